"""Eager vs compiled: what Inductor fused, what it saved, and what is still bound after.

`compare_compile(model, inputs)` runs the model eager, then under torch.compile (Inductor, with
C++ kernels profiled as record_function ranges and provenance tracking on), each for `steps`
profiled steps (CPU; CUDA too when the inputs are on a GPU), and joins:

- the fusion map (collectors.torch_compile.fusion_map): kernel -> post-grad nodes -> Dynamo nodes;
- the eager ops: the Dynamo graph's call nodes are matched in order to the eager trace's
  top-level ops of each step by name (aten::<base>), `collectors.torch_compile.match`;
- per kernel: before = the eager time of the ops it replaced (a Dynamo node split over k
  kernels gives each its share: nodes in the kernel / nodes in all kernels; marked estimate),
  after = the kernel's own time in the compiled run (both per step: total over steps / steps);
- the kernel's floors on the device's HardwareSpec, as analysis/roofline.py defines them:
  t_compute = flops / peak(dtype, matrix for matmuls else vector), t_memory = bytes /
  bandwidth, t_runtime = min_op_time; bound = the largest (ties: compute, memory, runtime);
  efficiency = floor / time per call.
"""

from __future__ import annotations

import math
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.kineto import load_kineto
from collectors.torch_compile.match import eager_matches, kernel_times
from collectors.torch_compile.merge import with_compile_events
from collectors.torch_compile.report import CompileReport, compile_report
from collectors.torch_compile.tlparse import Log, capture
from profiler.model.hardware import HardwareSpec, load_spec
from profiler.model.hardware_match import match_device
from profiler.model.trace import Trace

GROUP_COLUMNS = ["kernel", "runtime_name", "kind", "aten_ops", "sources", "code", "eager_ops", "eager_ns", "compiled_ns",
                 "saving_ns", "speedup", "calls", "flops", "bytes", "t_compute_ns", "t_memory_ns", "t_runtime_ns",
                 "bound", "efficiency", "estimate", "eager_event_ids"]


@dataclass(frozen=True)
class CompareResult:
    """Eager vs compiled, per fused group. `groups` columns (times per step, ns):

    kernel, runtime_name, kind ('cpp'/'triton'/'extern'), aten_ops ('aten::add + aten::mul'),
    sources ('model.py:42, ...'), code (first source line), eager_ops (the eager ops it replaced,
    'aten::mul, aten::add'), eager_ns (before), compiled_ns (after), saving_ns (before - after),
    speedup (before / after), calls (kernel calls per step), flops (FLOP per call), bytes (byte
    per call), t_compute_ns / t_memory_ns / t_runtime_ns (floors per call), bound (after:
    compute / memory / runtime / unknown), efficiency (floor / time per call), estimate (True
    when the before time is a share of a split op), eager_event_ids (the eager trace's event ids
    of the matched ops, all steps).
    """

    groups: pd.DataFrame
    steps: int
    eager_step_ns: float  # median wall time of one eager step
    compiled_step_ns: float  # median wall time of one compiled step (nan when it did not compile)
    compile: CompileReport
    spec: HardwareSpec | None
    eager: Trace | None = None
    compiled: Trace | None = None  # runtime events plus the compile passes (track rank0/compiler)
    unmatched: tuple[str, ...] = ()  # Dynamo nodes with no eager op (no ATen call, or renamed)
    messages: tuple[str, ...] = field(default_factory=tuple)

    @property
    def compiled_ok(self) -> bool:
        return self.compiled is not None


def compare_compile(factory_or_module: Any, inputs: Any, steps: int = 3, *, warmup: int = 2, hardware: str | HardwareSpec | None = None,
                    backward: bool = False, workdir: str | Path | None = None) -> CompareResult:
    """Profile `factory_or_module` (an nn.Module, or a no-argument callable returning one) on
    `inputs` (a tensor or a tuple of tensors) eager, then compiled, `steps` profiled steps each.

    Phases are recorded on a fresh compile with the FX graph / AOTAutograd caches off (so every
    phase runs); a model that fails to compile yields the eager side, whatever the compile log
    holds, and a message; graph breaks are reported with their reasons and the compiled run goes
    on. `hardware` is a preset name, a spec file or a HardwareSpec; by default the device's
    preset (GPU) or generic-x86-cpu (CPU).
    """
    import torch

    model = factory_or_module if isinstance(factory_or_module, torch.nn.Module) else factory_or_module()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compare_compile needs an nn.Module or a factory returning one, got {type(model).__name__}")
    xs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    device = next((x.device for x in xs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    model = model.to(device)
    spec = _spec(hardware, device)
    messages: list[str] = []
    tmp = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="perf-compare-"))

    def step(fn: Callable) -> None:
        with torch.set_grad_enabled(backward):
            out = fn(*xs)
            if backward:
                (out if isinstance(out, torch.Tensor) else out[0]).float().sum().backward()

    eager = _profile(lambda: step(model), steps, warmup, tmp / "eager.json", device)
    compiled_fn = None
    with capture() as log, _compile_config():
        torch._dynamo.reset()
        try:
            compiled_fn = torch.compile(model)
            step(compiled_fn)  # the compile happens here, inside the capture
        except Exception as e:  # noqa: BLE001 -- any compile failure: keep the eager side and say why
            messages.append(f"torch.compile failed: {type(e).__name__}: {_first_line(e)}")
            compiled_fn = None
    report = compile_report(log)
    compiled = None
    if compiled_fn is not None:
        try:
            compiled = _profile(lambda: step(compiled_fn), steps, warmup, tmp / "compiled.json", device)
            compiled = with_compile_events(compiled, report.phases)
        except Exception as e:  # noqa: BLE001 -- a compiled model that fails at run time: report it
            messages.append(f"the compiled model failed to run: {type(e).__name__}: {_first_line(e)}")
            compiled = None
    for r in report.graph_breaks.itertuples(index=False):
        messages.append(f"graph break at {Path(r.file).name}:{r.line}: {r.reason}")
    if report.problems:
        messages += [f"compile log: {line}" for line in report.problems.lines()]
    groups, unmatched = _groups(report, log, eager, compiled, steps, spec) if compiled is not None else (_empty(), ())
    if compiled is not None and report.fusion.empty:
        messages.append("no kernels in the compile log (nothing compiled, or provenance tracking missing)")
    return CompareResult(groups=groups, steps=steps, eager_step_ns=_step_ns(eager), compiled_step_ns=_step_ns(compiled) if compiled is not None else math.nan,
                         compile=report, spec=spec, eager=eager, compiled=compiled, unmatched=unmatched, messages=tuple(messages))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else traceback.format_exception_only(type(e), e)[-1].strip()


def _compile_config():
    """Inductor settings for the comparison: kernels visible to the profiler, provenance on,
    caches off (a warm cache would skip the phases and the fusion map's records)."""
    import torch._inductor.config as ic
    from torch._dynamo import config as dc

    return _Patches(ic.patch({"cpp.enable_kernel_profile": True, "trace.provenance_tracking_level": 1,
                              "fx_graph_cache": False, "force_disable_caches": True}),
                    dc.patch({"automatic_dynamic_shapes": False}))


class _Patches:
    def __init__(self, *patches: Any) -> None:
        self.patches = patches

    def __enter__(self) -> None:
        import torch._functorch.config as fc

        self.aot = fc.patch({"enable_autograd_cache": False})
        for p in (*self.patches, self.aot):
            p.__enter__()

    def __exit__(self, *exc: object) -> None:
        for p in reversed((*self.patches, self.aot)):
            p.__exit__(*exc)


def _profile(run: Callable[[], None], steps: int, warmup: int, out: Path, device: Any) -> Trace:
    """`steps` runs under torch.profiler, each in a 'ProfilerStep#<i>' range, after `warmup` runs."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        run()
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts, record_shapes=True) as prof:
        for i in range(steps):
            with record_function(f"ProfilerStep#{i}"):
                run()
                sync()
    prof.export_chrome_trace(str(out))
    return load_kineto(out)


def _spec(hardware: str | HardwareSpec | None, device: Any) -> HardwareSpec | None:
    if isinstance(hardware, HardwareSpec):
        return hardware
    if hardware:
        return load_spec(hardware)
    if device.type == "cuda":
        import torch

        p = torch.cuda.get_device_properties(device)
        return match_device(p.name, p.multi_processor_count, f"{p.major}.{p.minor}", p.total_memory)
    return load_spec("generic-x86-cpu")


def _step_ns(trace: Trace | None) -> float:
    """Median duration of the ProfilerStep ranges (ns)."""
    if trace is None:
        return math.nan
    ev = trace.events
    steps = ev[ev["name"].astype(str).str.startswith("ProfilerStep#")]
    return float(steps["dur"].median()) if len(steps) else math.nan


def _empty() -> pd.DataFrame:
    return pd.DataFrame(columns=GROUP_COLUMNS)


def _groups(report: CompileReport, log: Log, eager: Trace, compiled: Trace, steps: int,
            spec: HardwareSpec | None) -> tuple[pd.DataFrame, tuple[str, ...]]:
    fusion = report.fusion
    if fusion.empty:
        return _empty(), ()
    per_node, unmatched = eager_matches(log, eager)  # (compile_id, dynamo node) -> (name, ns, event ids)
    times = kernel_times(compiled, fusion)  # runtime_name -> (total ns, calls)
    rows = []
    for cid, kernels in fusion.groupby("compile_id", sort=False):
        # how many post-grad nodes of each Dynamo node landed in any kernel: the share's denominator
        total = pd.Series([p for pre in kernels["pre_nodes"] for p in pre], dtype=object).value_counts()
        for k in kernels.itertuples(index=False):
            eager_ns, names, ids, estimate = 0.0, [], [], False
            for pre, n in pd.Series(list(k.pre_nodes), dtype=object).value_counts().items():
                hit = per_node.get((cid, pre))
                if hit is None:
                    continue
                share = n / total[pre]
                estimate |= share < 1
                eager_ns += share * hit[1]
                names.append(hit[0])
                ids += hit[2]
            t, calls = times.get(k.runtime_name, (math.nan, 0))
            rows.append(_floors(k, eager_ns / steps if names else math.nan, t / steps, calls / steps, names, ids, estimate, spec))
    return pd.DataFrame(rows, columns=GROUP_COLUMNS), unmatched


def kernel_floors(flops: float, nbytes: float, dtype: str, family: str, per_call_ns: float,
                  spec: HardwareSpec | None, calls: int = 1) -> tuple[list[float], str, float]:
    """([t_compute_ns, t_memory_ns, t_runtime_ns], bound, efficiency) of one kernel call (or of
    `calls` calls doing `flops` and `nbytes` together, timed `per_call_ns` in all):
    t_compute = flops / peak(dtype, matrix for gemm else vector), t_memory = bytes / bandwidth,
    t_runtime = calls * min_op_time; bound = the largest (ties: compute, memory, runtime); efficiency =
    the largest floor / time per call. NaN floors and 'unknown' without a spec or a cost."""
    if spec is None or math.isnan(flops) or math.isnan(nbytes):
        return [math.nan] * 3, "unknown", math.nan
    unit = "matrix" if family == "gemm" else "vector"
    floors = [flops / spec.peak(dtype, unit) * 1e9, nbytes / spec.bandwidth() * 1e9, calls * spec.min_op_time * 1e9]
    bound = ("compute", "memory", "runtime")[int(np.argmax(floors))]  # argmax keeps the first of ties
    eff = max(floors) / per_call_ns if per_call_ns and not math.isnan(per_call_ns) else math.nan
    return floors, bound, eff


def _floors(k: Any, eager_ns: float, compiled_ns: float, calls: float, names: list[str], ids: list[int], estimate: bool,
            spec: HardwareSpec | None) -> list:
    nbytes = k.bytes_read + k.bytes_written
    per_call = compiled_ns / calls if calls else math.nan
    floors, bound, eff = kernel_floors(k.flops, nbytes, k.dtype, k.family, per_call, spec)
    saving = eager_ns - compiled_ns
    return [k.kernel, k.runtime_name, k.kind, " + ".join(k.aten_ops), ", ".join(k.sources), k.code, ", ".join(dict.fromkeys(names)),
            eager_ns, compiled_ns, saving, eager_ns / compiled_ns if compiled_ns else math.nan, calls, k.flops, nbytes,
            *floors, bound, eff, estimate, tuple(ids)]
