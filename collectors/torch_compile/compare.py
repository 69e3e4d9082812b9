"""Eager vs compiled: run a model both ways under the profiler and keep what the compiler wrote.

`compare_compile(model, inputs)` runs the model eager, then under torch.compile (Inductor, with
C++ kernels profiled as record_function ranges and provenance tracking on), each for `steps`
profiled steps (CPU; CUDA too when the inputs are on a GPU), and returns both Traces, the
compile report (its fusion map: kernel -> post-grad nodes -> Dynamo nodes) and the Dynamo
graphs' call nodes. Joining kernels to the eager ops they replaced, and their floors, is
analysis's (analysis.fusion.fusion_groups; profiler.api.compare_compile does both).
"""

from __future__ import annotations

import math
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from collectors.kineto import load_kineto
from collectors.torch_compile.graph_text import dynamo_graphs
from collectors.torch_compile.merge import with_compile_events
from collectors.torch_compile.report import CompileReport, compile_report
from collectors.torch_compile.tlparse import capture
from profiler.model.hardware import HardwareSpec, load_spec
from profiler.model.hardware_match import match_device
from profiler.model.trace import Trace


@dataclass(frozen=True)
class CompareResult:
    """Eager vs compiled. `groups`: one row per fused kernel (analysis.fusion.fusion_groups lists
    its columns), empty until analysis fills it (profiler.api.compare_compile); `graphs`: the
    Dynamo graphs' call nodes per compile id, which it matches to the eager ops.
    """

    steps: int
    eager_step_ns: float  # median wall time of one eager step
    compiled_step_ns: float  # median wall time of one compiled step (nan when it did not compile)
    compile: CompileReport
    spec: HardwareSpec | None
    eager: Trace | None = None
    compiled: Trace | None = None  # runtime events plus the compile passes (track rank0/compiler)
    unmatched: tuple[str, ...] = ()  # Dynamo nodes with no eager op (no ATen call, or renamed)
    messages: tuple[str, ...] = field(default_factory=tuple)
    graphs: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    groups: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def compiled_ok(self) -> bool:
        return self.compiled is not None


def compare_compile(
    factory_or_module: Any,
    inputs: Any,
    steps: int = 3,
    *,
    warmup: int = 2,
    hardware: str | HardwareSpec | None = None,
    backward: bool = False,
    workdir: str | Path | None = None,
) -> CompareResult:
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
    graphs = tuple((cid, tuple(nodes)) for cid, nodes in dynamo_graphs(log))
    if compiled is not None and report.fusion.empty:
        messages.append("no kernels in the compile log (nothing compiled, or provenance tracking missing)")
    return CompareResult(
        steps=steps,
        eager_step_ns=_step_ns(eager),
        compiled_step_ns=_step_ns(compiled) if compiled is not None else math.nan,
        compile=report,
        spec=spec,
        eager=eager,
        compiled=compiled,
        messages=tuple(messages),
        graphs=graphs,
    )


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else traceback.format_exception_only(type(e), e)[-1].strip()


def _compile_config():
    """Inductor settings for the comparison: kernels visible to the profiler, provenance on,
    caches off (a warm cache would skip the phases and the fusion map's records)."""
    import torch._inductor.config as ic
    from torch._dynamo import config as dc

    return _Patches(
        ic.patch(
            {
                "cpp.enable_kernel_profile": True,
                "trace.provenance_tracking_level": 1,
                "fx_graph_cache": False,
                "force_disable_caches": True,
            }
        ),
        dc.patch({"automatic_dynamic_shapes": False}),
    )


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
