"""A HardwareSpec as label/value rows, for `perf hardware show` to render."""

from __future__ import annotations

from profiler.model.hardware import DTYPES, UNITS, HardwareSpec
from profiler.model.numfmt import fmt_bytes


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"


def describe(spec: HardwareSpec) -> list[tuple[str, str]]:
    """Rows (label, value) describing `spec`, for the CLI to render as a table.

    Peaks in TFLOP/s (TOP/s for int8), capacities and bandwidths in decimal SI bytes (GB = 10^9
    bytes, the one base of every output, profiler.model.numfmt; a vendor's "40GB" of HBM is
    40 GiB = 42.9 GB), times in µs.
    """
    rows: list[tuple[str, str]] = [("name", spec.name), ("kind", spec.kind), ("vendor", spec.vendor)]
    if spec.description:
        rows.append(("description", spec.description))
    for unit in UNITS:
        for dt in DTYPES:
            v = spec.peak_flops.get(unit, {}).get(dt)
            if v:
                rows.append((f"peak {unit} {dt}", f"{_fmt(v / 1e12)} {'TOP/s' if dt == 'int8' else 'TFLOP/s'}"))
    for m in spec.memory:
        cap = "capacity unknown" if m.capacity_bytes is None else fmt_bytes(m.capacity_bytes)
        rows.append((f"memory {m.name}", f"{cap}, {_fmt(m.bandwidth / 1e9)} GB/s"))
    for lk in spec.links:
        rows.append(
            (
                f"link {lk.name}",
                f"{_fmt(lk.bandwidth / 1e9)} GB/s per direction, {lk.latency * 1e6:.2g} µs, {lk.topology}",
            )
        )
    if spec.host_link:
        rows.append((f"host link {spec.host_link.name}", f"{_fmt(spec.host_link.bandwidth / 1e9)} GB/s per direction"))
    rows.append(("min op time", f"{spec.min_op_time * 1e6:.2g} µs"))
    for i, s in enumerate(spec.sources, 1):
        rows.append((f"source {i}", s))
    return rows
