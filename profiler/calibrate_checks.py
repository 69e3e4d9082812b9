"""`perf calibrate`: every measured ceiling checked for sanity before it is written.

A figure is kept when it is finite, above a physical floor, and, where a reference exists for the
device, within 0.1x to 1.5x of it:

- GPU: the reference is the preset matched from the device's properties
  (profiler.model.hardware_match), figure by figure (peak per unit and dtype, outermost bandwidth).
- CPU: no published figure is known for an arbitrary part (generic-x86-cpu is nominal), so the
  reference is an upper bound per core: 2 FMA units x 16 fp32 lanes (AVX-512) x 2 FLOP x 4 GHz =
  256 GFLOP/s per core for fp32 (128 for fp64), 1.5x of which is the most accepted.
- Physical floors: 1 GFLOP/s per core for fp32/fp64 FLOP rates (issue 10: a measured 33.6 MFLOP/s
  vector peak is an elementwise op timed over memory, not a peak), 1 GB/s for a bandwidth.

A rejected figure is left out with a message; a spec needs its fp32 vector peak and outermost
bandwidth, so their rejection stops calibration (`CalibrationError`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from profiler.model.hardware import HardwareSpec

LOW, HIGH = 0.1, 1.5
FLOP_FLOOR_PER_CORE = 1e9  # FLOP/s
BANDWIDTH_FLOOR = 1e9  # bytes/s
#: fp32 FLOP/s per core at most: 2 FMA units x 16 lanes (AVX-512) x 2 FLOP x 4 GHz; fp64 half that.
CPU_MAX_PER_CORE = {"fp32": 256e9, "fp64": 128e9}


class CalibrationError(ValueError):
    """A required ceiling (fp32 vector peak, outermost bandwidth) failed its sanity check."""


def check_spec(spec: HardwareSpec, cores: int, reference: HardwareSpec | None = None) -> tuple[HardwareSpec, list[str]]:
    """(`spec` less its implausible figures, one message per figure rejected). Raises
    CalibrationError when the fp32 vector peak or the outermost bandwidth is rejected."""
    notes: list[str] = []
    peaks: dict[str, dict[str, float]] = {}
    for unit, table in spec.peak_flops.items():
        peaks[unit] = {}
        for dtype, value in table.items():
            why = _flop_problem(spec, unit, dtype, float(value), cores, reference)
            if why:
                notes.append(f"{unit} {dtype} peak {value / 1e9:.3g} GFLOP/s rejected: {why}")
            else:
                peaks[unit][dtype] = float(value)
    if "fp32" not in peaks.get("vector", {}):
        raise CalibrationError(
            "; ".join(n for n in notes if n.startswith("vector fp32")) or "no fp32 vector peak measured"
        )
    memory = list(spec.memory)
    ref_bw = reference.bandwidth() if reference is not None else None
    why = _ratio_problem(memory[0].bandwidth, ref_bw, f"{reference.name if reference else ''} bandwidth") or (
        f"below the physical floor of {BANDWIDTH_FLOOR / 1e9:.3g} GB/s"
        if not memory[0].bandwidth >= BANDWIDTH_FLOOR
        else ""
    )
    if why:
        raise CalibrationError(f"{memory[0].name} bandwidth {memory[0].bandwidth / 1e9:.3g} GB/s rejected: {why}")
    return replace(spec, peak_flops={u: t for u, t in peaks.items() if t}), notes


def _flop_problem(
    spec: HardwareSpec, unit: str, dtype: str, value: float, cores: int, reference: HardwareSpec | None
) -> str:
    if not math.isfinite(value) or value <= 0:
        return "not a positive number"
    if dtype in ("fp32", "fp64") and value < FLOP_FLOOR_PER_CORE * cores:
        return (
            f"below the physical floor of {FLOP_FLOOR_PER_CORE * cores / 1e9:.3g} GFLOP/s ({cores} cores x 1 GFLOP/s): "
            "a kernel bound by something else (memory, dispatch) was timed"
        )
    if reference is not None:
        ref = reference.peak_flops.get(unit, {}).get(dtype)
        return _ratio_problem(value, float(ref) if ref else None, f"{reference.name} {unit} {dtype}")
    if spec.kind == "cpu" and dtype in CPU_MAX_PER_CORE and value > HIGH * CPU_MAX_PER_CORE[dtype] * cores:
        return (
            f"above {HIGH}x the most a core can do ({CPU_MAX_PER_CORE[dtype] / 1e9:.0f} GFLOP/s per core x {cores}: "
            "2 FMA units x 16 lanes x 2 FLOP x 4 GHz)"
        )
    return ""


def _ratio_problem(value: float, ref: float | None, what: str) -> str:
    if ref is None or not ref > 0:
        return ""
    r = value / ref
    return "" if LOW <= r <= HIGH else f"{r:.3g}x the {what} figure ({ref / 1e9:.4g} G), outside {LOW}x..{HIGH}x"
