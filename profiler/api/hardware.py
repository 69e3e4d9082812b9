"""Which HardwareSpec floors each device of a trace, and whether that is a what-if."""

from __future__ import annotations

from collections.abc import Callable

from profiler.model.devices import runs_on_cpu
from profiler.model.hardware import HardwareSpec, load_spec
from profiler.model.hardware_match import match_device
from profiler.model.trace import Trace

#: Used for a CPU when no spec is given: nominal numbers, to be replaced by `perf calibrate`.
DEFAULT_CPU_SPEC = "generic-x86-cpu"


def load_hardware(name: str) -> HardwareSpec:
    """A roofline preset or spec YAML (profiler.model.hardware.load_spec), or an accelerator
    preset of accelerator/presets (`edge-npu`, `datacenter-npu`): the roofline spec of one of its
    chips, derived by accelerator/sim/spec.py, so `--hardware edge-npu` floors on it."""
    from accelerator.hardware import load_accel, presets
    from accelerator.sim.spec import hardware_spec

    key = str(name).strip().lower().replace("_", "-")
    if key in presets():
        return hardware_spec(load_accel(key))
    return load_spec(name)


def accel_by_name(name: str) -> HardwareSpec | None:
    """The derived spec of the accelerator preset a simulated trace names its chips after
    (accelerator/sim/trace.py records the preset's name in deviceProperties), else None."""
    from accelerator.hardware import presets

    key = str(name or "").strip().lower()
    return load_hardware(key) if key in presets() else None


def spec_resolver(trace: Trace, hardware: str | None = None) -> Callable[[int, str], HardwareSpec | None]:
    """(rank, device) -> the HardwareSpec its floors use.

    `hardware` (a preset name or a YAML file) applies to every accelerator, or to the CPU of a
    CPU-only trace (the host, and a CPU running device work: 'cpu<N>', e.g. IREE's dispatches);
    otherwise each GPU is matched from its recorded deviceProperties numbers
    (profiler.model.hardware_match.match_device) and a CPU gets the nominal generic-x86-cpu preset.
    """
    override = load_hardware(hardware) if hardware else None
    cpu_only = _cpu_only(trace)
    matched: dict[tuple[int, str], HardwareSpec | None] = {}
    for d in trace.devices.itertuples(index=False):
        spec: HardwareSpec | None
        if runs_on_cpu(str(d.device)):
            spec = override if (override and cpu_only) else load_spec(DEFAULT_CPU_SPEC)
        else:
            spec = (
                override
                or accel_by_name(d.name)  # a simulated chip names its accelerator preset exactly
                or match_device(d.name, int(max(d.sm_count, 0)), d.compute_capability, int(max(d.memory_bytes, 0)))
            )
        matched[(int(d.rank), str(d.device))] = spec
    return lambda rank, device: matched.get((rank, device))


def _cpu_only(trace: Trace) -> bool:
    """Every device of the trace is a CPU: the host threads, or a CPU running device work."""
    return all(runs_on_cpu(str(d)) for d in trace.devices["device"])


def hardware_notes(trace: Trace, hardware: str | None = None) -> tuple[str, ...]:
    """One line per device whose spec was not chosen by name: a GPU matched by its numbers only
    (profiler.model.hardware_match.match_note), a GPU no preset fits, a CPU on the NOMINAL
    generic preset. Empty when `hardware` was given for every device it applies to."""
    from profiler.model.hardware_match import match_note

    notes = []
    cpu_only = _cpu_only(trace)
    for d in trace.devices.itertuples(index=False):
        label = f"rank{int(d.rank)}/{d.device}"
        if runs_on_cpu(str(d.device)):
            if cpu_only and not hardware:
                notes.append(
                    f"{label}: floored on the NOMINAL {DEFAULT_CPU_SPEC} preset (no figure measured on this CPU); "
                    "run perf calibrate and pass --hardware FILE"
                )
            continue
        if hardware or accel_by_name(d.name) is not None:
            continue
        _, note = match_note(d.name, int(max(d.sm_count, 0)), d.compute_capability, int(max(d.memory_bytes, 0)))
        if note:
            notes.append(f"{label}: {note}")
    return tuple(dict.fromkeys(notes))


def spec_names(trace: Trace, spec_for: Callable[[int, str], HardwareSpec | None]) -> dict[str, str]:
    """'rank0/gpu0' -> the name of the spec its floors use ('' when none)."""
    out = {}
    for r, d in trace.devices[["rank", "device"]].itertuples(index=False):
        spec = spec_for(int(r), str(d))
        out[f"rank{r}/{d}"] = spec.name if spec else ""
    return out


def is_whatif(trace: Trace, hardware: str | None) -> bool:
    """True when `hardware` floors a GPU that a preset matched as other hardware: the trace was
    measured elsewhere, so its times are projected, not judged. A CPU trace's --hardware (a spec
    perf calibrate measured) and a GPU no preset matched take the given spec as the real one."""
    if not hardware:
        return False
    target = load_hardware(hardware)
    for d in trace.devices.itertuples(index=False):
        if runs_on_cpu(str(d.device)):
            continue
        matched = match_device(d.name, int(max(d.sm_count, 0)), d.compute_capability, int(max(d.memory_bytes, 0)))
        if matched is not None and matched.name != target.name:
            return True
    return False


def peak_label(spec: HardwareSpec | None, dtype: str) -> str:
    """'bf16 on v100-sxm2-32gb: no bf16 matrix unit, vector fp32 peak used' where the dtype falls back."""
    if spec is None:
        return ""
    used = spec.peak_source(dtype, "matrix")
    if used == f"matrix {dtype}":
        return f"matrix {dtype}"
    return f"{dtype} on {spec.name}: no {dtype} matrix unit, {used} peak used (fallback)"


def world_sizes(trace: Trace) -> dict[int, int]:
    """rank -> the world size its file records (distributedInfo), where it records one."""
    out = {}
    for rank, meta in trace.metadata.get("ranks", {}).items():
        info = meta.get("distributedInfo")
        if isinstance(info, dict) and isinstance(info.get("world_size"), int):
            out[int(rank)] = info["world_size"]
    return out
