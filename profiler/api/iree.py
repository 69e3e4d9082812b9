"""`perf profile --backend iree`: capture, compile, time and analyse a model through IREE in one
step (collectors.iree, analysis.iree_dispatches; docs/iree.md)."""

from __future__ import annotations

import inspect
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from collectors.iree.passes import PassTree
from profiler.model.errors import InputError

#: timed calls of the module (iree-benchmark-module) and of the eager model
RUNS = 20


@dataclass(frozen=True)
class IreeRun:
    """One model through IREE: the pass tree, compile_ns (iree-compile's wall time, ns), the
    dispatch table (analysis.iree_dispatches.dispatch_roofline), the eager comparison
    (`compare`: module, eager_ns, iree_ns, dispatches) and per call (ns): eager_ns (the eager
    forward), iree_ns (the sum of the dispatches' times), iree_call_ns (the whole VM call)."""

    passes: PassTree
    compile_ns: int
    dispatches: pd.DataFrame
    compare: pd.DataFrame
    eager_ns: float
    iree_ns: float
    iree_call_ns: float
    hardware: str
    trace: Path | None

    def doc(self) -> dict:
        """The JSON report (`perf profile --backend iree --json`)."""
        rows = []
        for r in self.dispatches.to_dict("records"):
            rows.append({k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()})
        return {
            "backend": "iree",
            "compile_ns": self.compile_ns,
            "compiler_total_ns": self.passes.total_ns,
            "compiler_rest_ns": self.passes.rest_ns,
            "passes": [r.as_dict() for r in self.passes.roots],
            "dispatches": rows,
            "hardware": self.hardware,
            "eager_ns": self.eager_ns,
            "iree_ns": self.iree_ns,
            "iree_call_ns": self.iree_call_ns,
            "compare": self.compare.to_dict("records"),
            "trace": str(self.trace) if self.trace else None,
        }


def iree_available() -> str | None:
    """None when IREE's compiler, runtime and iree-turbine import, else the one-line reason."""
    from collectors.iree import capture

    return capture.iree_available()


def profile_iree(
    model,
    inputs: list,
    *,
    out: Path | None = None,
    flags: tuple[str, ...] = (),
    hardware: str | None = None,
    runs: int = RUNS,
    workdir: Path | None = None,
    label: str = "model",
) -> IreeRun:
    """Export `model(*inputs)` with iree-turbine, compile it for the local CPU, time every
    dispatch, cost them on `hardware` (default: the nominal CPU preset) and compare with eager.
    Raises InputError (one line naming `label`, the tool's first error line) when any step fails."""
    from analysis.iree_dispatches import dispatch_roofline, dispatch_table
    from collectors.iree.capture import export
    from collectors.iree.compile import compile_module
    from collectors.iree.dispatches import read_dispatches
    from collectors.iree.runtime import profile_dispatches
    from collectors.iree.trace import write_trace
    from profiler.api.hardware import DEFAULT_CPU_SPEC, load_hardware

    spec = load_hardware(hardware or DEFAULT_CPU_SPEC)
    model_file = _source_file(model)
    eager_ns, eager_modules = eager_times(model, inputs, runs)
    with tempfile.TemporaryDirectory(prefix="perf-iree-") as tmp:
        work = workdir or Path(tmp)
        try:
            captured = export(model, inputs, work, label)
            compiled = compile_module(captured.mlir, work, tuple(flags))
            dispatches, ops = read_dispatches(compiled.dumps, (model_file,) if model_file else ())
            events, call = profile_dispatches(compiled.vmfb, captured.params, captured.inputs, work, runs=runs)
        except InputError as e:  # the files named are in a folder about to go: name the model
            raise InputError(label, e.problem) from None
    table = dispatch_roofline(dispatch_table(dispatches, ops, events), spec)
    compare = compare_eager(table, eager_modules)
    iree_ns = float(table["per_call_ns"].sum()) if len(table) else float("nan")
    run = IreeRun(compiled.passes, compiled.compile_ns, table, compare, eager_ns, iree_ns, call, spec.name, out)
    if out is not None:
        write_trace(out, compiled.passes, compiled.start_ns, compiled.compile_ns, events, table, run.doc())
    return run


def _source_file(model) -> str | None:
    try:
        return inspect.getsourcefile(type(model))
    except TypeError:
        return None


def eager_times(model, inputs: list, runs: int) -> tuple[float, dict[str, float]]:
    """(median ns of one eager forward, mean ns per call of each leaf module by its path), each after
    one warm-up call; the forward timed bare, the leaf modules in a second pass with forward hooks
    (time.perf_counter_ns)."""
    import torch

    with torch.no_grad():
        model(*inputs)
        calls = []
        for _ in range(runs):  # without hooks: they cost time of their own
            t0 = time.perf_counter_ns()
            model(*inputs)
            calls.append(time.perf_counter_ns() - t0)
        total = float(np.median(calls))  # the median: a shared CPU's preemptions skew a mean
    spent: dict[str, int] = {}
    starts: dict[str, int] = {}
    handles = []
    for name, mod in model.named_modules():
        if name and not list(mod.children()):
            handles.append(
                mod.register_forward_pre_hook(lambda m, a, n=name: starts.__setitem__(n, time.perf_counter_ns()))
            )
            handles.append(
                mod.register_forward_hook(
                    lambda m, a, o, n=name: spent.__setitem__(n, spent.get(n, 0) + time.perf_counter_ns() - starts[n])
                )
            )
    try:
        with torch.no_grad():
            model(*inputs)
            spent.clear()
            for _ in range(runs):
                model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return total, {k: v / runs for k, v in spent.items()}


def compare_eager(table: pd.DataFrame, eager_modules: dict[str, float]) -> pd.DataFrame:
    """Eager vs IREE by module: each dispatch goes to the first module its locations name (ops
    at the model's top level, '<top>', map to no module); per module, the eager time of that
    leaf module and the summed time per call of its dispatches.

    Columns: module, dispatches (count), iree_ns, eager_ns (NaN: no leaf module of that path),
    ratio (eager_ns / iree_ns: above 1, IREE is faster).
    """
    rows: dict[str, list] = {}
    for r in table.itertuples(index=False):
        mods = [loc.split(" ", 1)[0] for loc in r.locations if not loc.startswith("<top>")]
        key = mods[0] if mods else "<top>"
        acc = rows.setdefault(key, [0, 0.0])
        acc[0] += 1
        acc[1] += 0.0 if np.isnan(r.per_call_ns) else r.per_call_ns
    out = pd.DataFrame(
        [[k, n, ns, eager_modules.get(k, np.nan)] for k, (n, ns) in rows.items()],
        columns=["module", "dispatches", "iree_ns", "eager_ns"],
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        out["ratio"] = out["eager_ns"] / out["iree_ns"]
    return out
