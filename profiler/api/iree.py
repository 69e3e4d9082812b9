"""`perf profile --backend iree`: capture, compile, time and analyse a model through IREE in one
step (collectors.iree, analysis.iree_dispatches; docs/iree.md)."""

from __future__ import annotations

import inspect
import tempfile
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
    dispatch table (analysis.iree_dispatches.dispatch_roofline), the eager comparison by source
    line (`compare`: analysis.iree_compare.COLUMNS) and per call (ns): eager_ns (the bare eager
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
    eager_threads: int = 0  # torch's intra-op threads in the eager run (torch.get_num_threads)

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
            "eager_threads": self.eager_threads,
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
    from analysis.iree_compare import compare_eager
    from analysis.iree_dispatches import dispatch_roofline, dispatch_table
    from collectors.iree.capture import export
    from collectors.iree.eager import eager_times
    from collectors.iree.compile import compile_module
    from collectors.iree.dispatches import read_dispatches
    from collectors.iree.runtime import profile_dispatches
    from collectors.iree.trace import write_trace
    from profiler.api.hardware import DEFAULT_CPU_SPEC, load_hardware

    spec = load_hardware(hardware or DEFAULT_CPU_SPEC)
    model_file = _source_file(model)
    eager_ns, eager_lines = eager_times(model, inputs, runs, model_file)
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
    compare = compare_eager(table, eager_lines)
    iree_ns = float(table["per_call_ns"].sum()) if len(table) else float("nan")
    import torch

    run = IreeRun(
        compiled.passes,
        compiled.compile_ns,
        table,
        compare,
        eager_ns,
        iree_ns,
        call,
        spec.name,
        out,
        torch.get_num_threads(),
    )
    if out is not None:
        write_trace(out, compiled.passes, compiled.start_ns, compiled.compile_ns, events, table, run.doc())
    return run


def _source_file(model) -> str | None:
    try:
        return inspect.getsourcefile(type(model))
    except TypeError:
        return None


def iree_report(trace) -> dict | None:
    """The IREE report a trace file written by `perf profile --backend iree` carries (its
    `perfIree` field: `IreeRun.doc`'s compile_ns, passes, dispatches, compare, ...), or None."""
    from collectors.iree.trace import DOC_KEY

    for meta in trace.metadata.get("ranks", {}).values():
        doc = meta.get(DOC_KEY) if isinstance(meta, dict) else None
        if isinstance(doc, dict) and isinstance(doc.get("passes"), list) and isinstance(doc.get("dispatches"), list):
            return doc
    return None


def short_location(location: str) -> str:
    """'q model.py:39' for a location 'q /abs/path/model.py:39' (the JSON keeps the full path)."""
    head, sep, path = location.rpartition(" ")
    return f"{head}{sep}{path.rsplit('/', 1)[-1]}"
