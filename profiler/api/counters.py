"""Hardware counters through the facade: read a counter file or folder (collectors.counters), turn
it into measured FLOPs, bytes and a measured roofline (analysis.counters,
analysis.measured_roofline) and, with a trace, join it to the trace's kernels and set it beside
the cost model (analysis.counters_join, analysis.counters_compare). `perf counters` and
`perf analyze --counters` call this."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from profiler.model.hardware import HardwareSpec
from profiler.model.kernel_counters import KernelCounters

if TYPE_CHECKING:
    from profiler.api.result import Analysis
    from profiler.model.trace import Trace

#: PCI device ids of AMD Instinct parts rocprof-compute's sysinfo.csv records as `chip_id`
#: (Linux pci.ids, vendor 1002: 74a1 "Aqua Vanjaram [Instinct MI300X]", 74a5 "[Instinct MI325X]").
_AMD_CHIPS = {0x74A1: "MI300X", 0x74A5: "MI325X"}


@dataclass(frozen=True)
class CountersReport:
    """What `perf counters` shows. Tables: measured (analysis.counters.MEASURED_COLUMNS),
    recorded (analysis.counters.recorded_utilisation), roofline
    (analysis.measured_roofline.ROOFLINE_COLUMNS; empty without a spec), joined
    (analysis.counters_join.JOIN_COLUMNS) and compare (analysis.counters_compare.COMPARE_COLUMNS),
    both empty without a trace."""

    counters: KernelCounters
    measured: pd.DataFrame
    recorded: pd.DataFrame
    roofline: pd.DataFrame
    hardware: str = ""
    notes: tuple[str, ...] = ()
    tiles: dict[int, str] = field(default_factory=dict)  # launch -> tile arithmetic (gemm_tiles)
    join: dict[str, object] = field(default_factory=dict)
    joined: pd.DataFrame = field(default_factory=pd.DataFrame)
    compare: pd.DataFrame = field(default_factory=pd.DataFrame)
    findings: tuple = ()  # analysis.counters_compare.CounterFinding


def load_counters(path: str | Path, max_bytes: int | None = None) -> KernelCounters:
    """The kernel counters of a file or folder (collectors.counters.read_counters)."""
    from collectors.counters import read_counters

    return read_counters(path, max_bytes)


def linux_perf() -> str | None:
    """Path of the Linux perf tool, None when absent (collectors.counters.perf_stat.find_linux_perf)."""
    from collectors.counters.perf_stat import find_linux_perf

    return find_linux_perf()


def record_cpu_counters(out: str | Path):  # -> a context manager
    """Count this process's CPU events with Linux `perf stat` while the block runs, its CSV to `out`
    (collectors.counters.perf_stat.record: software events where hardware ones are not allowed)."""
    from collectors.counters.perf_stat import record

    return record(Path(out))


def counters_spec(kc: KernelCounters, hardware: str | None = None) -> tuple[HardwareSpec | None, str]:
    """(the spec the counters' roofline is drawn on, a note saying how it was chosen): `hardware`
    when given, else the device the file records (Nsight's Device / Kineto's deviceProperties
    name, rocprof-compute's chip id), else none."""
    from profiler.api.hardware import load_hardware
    from profiler.model.hardware_match import match_device

    if hardware:
        chosen = load_hardware(hardware)
        return chosen, f"ceilings from {chosen.name} (--hardware)"
    name = ""
    chip = str(kc.info.get("chip_id", "")).strip()
    if chip.isdigit() and int(chip) in _AMD_CHIPS:
        name = _AMD_CHIPS[int(chip)]
    elif kc.info.get("gpu"):
        name = str(kc.info["gpu"]).split(" (cc")[0]
    elif (
        len(kc.launches) and kc.launches["device"].iloc[0] and not str(kc.launches["device"].iloc[0]).startswith("gpu")
    ):
        name = str(kc.launches["device"].iloc[0]).split(" (cc")[0]
    if not name:
        return None, "no hardware recorded in the counter file: pass --hardware PRESET for the roofline"

    def number(key: str) -> int:
        v = str(kc.info.get(key, "")).strip()
        return int(v) if v.isdigit() else 0

    from profiler.api.hardware import accel_by_name

    accel = accel_by_name(name)  # a simulated trace names its accelerator preset
    if accel is not None:
        return accel, f"ceilings from {accel.name} (the simulated accelerator the counter file names)"
    arch = str(kc.info.get("gpu_arch", ""))  # gfx942 -> '9.4', as ROCm reports it in traces
    cc = str(kc.info.get("compute_capability", "")) or (f"{arch[3]}.{arch[4]}" if len(arch) >= 5 else "")
    spec = match_device(name, number("sm_count") or number("cu_per_gpu"), cc, number("memory_bytes"))
    if spec is None:
        return None, f"no preset matches {name!r}: pass --hardware PRESET for the roofline"
    return spec, f"ceilings from {spec.name} (matched from {name!r} in the counter file)"


def counters_report(
    kc: KernelCounters,
    *,
    hardware: str | None = None,
    trace: Trace | None = None,
    analysis: Analysis | None = None,
) -> CountersReport:
    """Measured FLOPs, bytes and roofline of every launch in `kc`; with `trace` and its `analysis`
    (classified units), joined to the trace's kernels and compared with the cost model."""
    from analysis.counters import measured, recorded_utilisation
    from analysis.gemm_tiles import tiles_in_launch
    from analysis.measured_roofline import measured_roofline

    m = measured(kc)
    spec, note = counters_spec(kc, hardware)
    notes = [note]
    joined, compare = pd.DataFrame(), pd.DataFrame()
    summary: dict[str, object] = {}
    found: tuple = ()
    if trace is not None:
        from analysis.counters_compare import compare as compare_units
        from analysis.counters_compare import findings
        from analysis.counters_join import join
        from profiler.api.hardware import spec_resolver

        joined, summary = join(trace, kc)
        spec_for = spec_resolver(trace, hardware)
        if spec is None:  # the trace's device names the ceilings
            gpus = trace.devices[trace.devices["device"] != "cpu"]
            if len(gpus):
                spec = spec_for(int(gpus["rank"].iloc[0]), str(gpus["device"].iloc[0]))
                if spec is not None:
                    notes = [f"ceilings from {spec.name} (the trace's device)"]
        if analysis is not None and len(analysis.units):
            compare = compare_units(analysis.units, m, joined, spec_for)
            found = tuple(findings(compare))
    matrix = [c for c in m.columns if c.startswith("flops_matrix_")]
    tiles = {}
    for r, mf in zip(m.itertuples(), m[matrix].sum(axis=1)):
        t = (
            tiles_in_launch(str(r.kernel), str(r.grid), str(r.block), float(mf))
            if kc.source.startswith("rocprof")
            else ""
        )
        if t:
            tiles[int(r.launch)] = t
    roof = measured_roofline(m, spec) if spec is not None else pd.DataFrame()
    return CountersReport(
        counters=kc,
        measured=m,
        recorded=recorded_utilisation(kc),
        roofline=roof,
        hardware=spec.name if spec is not None else "",
        notes=tuple(notes),
        tiles=tiles,
        join=summary,
        joined=joined,
        compare=compare,
        findings=found,
    )
