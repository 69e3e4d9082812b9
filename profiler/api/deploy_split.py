"""Graph splitting under a speed/accuracy budget (`perf gate --split BUDGET MODEL --candidate ...`):
which layers to keep in fp32 so the int8 model meets the accuracy budget at the lowest latency.

The search is the autotune loop's (profiler.autotune: `tune`, a `make_strategy` strategy, the
SQLite `TrialDB`), over a space of one precision dimension per compute layer (every module path
that owns a Conv, ConvTranspose, Gemm or MatMul node), options ('int8', 'fp32'), int8 first (the
baseline: the whole model quantized). A trial is a per-layer plan {module path: dtype}: the int8
variant with the fp32 layers' nodes excluded from quantization (collectors.onnx.precision.plan_nodes),
then

    error   = rel_error of the model output against eager fp32 (normwise, analysis.numerics),
              on the seeded inputs of --input; int8 calibrated as `perf diff --numerics` does
    latency = collectors.onnx.latency: ORT CPU with graph optimisation on (median of 20 runs), or
              the HTP simulator's cycles per execute (median of 5) at the preset's assumed clock

The best plan is the fastest whose error is within the budget; the front is the plans no other
beats on both latency and error (profiler.autotune.loop.front). The study is keyed by the fp32
export's bytes, the backend and the base precision, so `--db` resumes it.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from profiler.model.errors import InputError

COMPUTE_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
STRATEGIES = ("exhaustive", "random", "tpe")


@dataclass(frozen=True)
class SplitResult:
    """The trials (profiler.autotune.db.Trial, in the order stored), the speed/accuracy front, the
    best plan within the budget (None when none meets it), and what the search was."""

    trials: tuple[Any, ...]
    front: tuple[Any, ...]
    best: Any
    budget: float
    candidate: str
    layers: tuple[str, ...]
    strategy: str
    notes: tuple[str, ...]

    @staticmethod
    def plan(trial: Any) -> dict[str, str]:
        """A trial's plan: {module path: 'fp32'} for the layers it keeps in fp32 (the rest int8)."""
        return {k.removeprefix("precision:"): str(v) for k, v in trial.candidate.items()}


class _PlanRunner:
    """The loop's runner: one plan -> TrialResult(latency ns, failure, output rel_error)."""

    def __init__(
        self, fp32: Path, arrays: tuple[np.ndarray, ...], ref_out: np.ndarray, backend: str, precision: str, calib: Any
    ):
        self.fp32, self.arrays, self.ref_out = fp32, arrays, ref_out
        self.backend, self.precision, self.calib = backend, precision, calib

    def run(self, candidate: Any) -> Any:
        import onnx

        from analysis.numerics import layer_error
        from collectors.onnx.latency import ort_latency_ns, qnn_latency_ns
        from collectors.onnx.layers import ort_outputs
        from collectors.onnx.precision import plan_nodes, to_precision
        from profiler.api.deploy import candidate_session
        from profiler.autotune.runner import TrialResult

        plan = {k.removeprefix("precision:"): str(v) for k, v in candidate.to_json().items()}
        keep = plan_nodes(onnx.load(str(self.fp32), load_external_data=False), plan)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                model = to_precision(self.fp32, self.precision, Path(tmp) / "plan.onnx", self.calib, keep_fp32=keep)
                _, out = ort_outputs(model, self.arrays, {}, candidate_session(self.backend))
                if self.backend == "qnn-sim":
                    ns = qnn_latency_ns(model, self.arrays, label="--split")
                else:
                    ns = ort_latency_ns(model, self.arrays)
            except InputError as e:
                return TrialResult(None, failure=e.problem)
        err = layer_error("output", "", self.ref_out, out).rel_error
        return TrialResult(int(round(ns)), accuracy_error=err, summary={"total_ns": ns, "fp32_nodes": list(keep)})


def split_search(
    spec: str,
    input_specs: list[str],
    candidate: str,
    budget: float,
    db_path: Path,
    *,
    trials: int = 16,
    strategy: str = "",
    seed: int = 0,
    calibration: Path | None = None,
) -> SplitResult:
    """Search per-layer plans (module docstring); `strategy` '' picks exhaustive when every plan
    fits in `trials`, else tpe."""
    from collectors.onnx.export import nodes
    from collectors.onnx.layers import eager_outputs
    from collectors.onnx.precision import load_batches, random_calibration
    from collectors.torch_runtime.run_model import prepare
    from profiler.api.deploy import export_model, parse_candidate
    from profiler.autotune.db import Study, TrialDB
    from profiler.autotune.loop import front, tune
    from profiler.autotune.space import Dimension, Space
    from profiler.autotune.strategy import make_strategy

    backend, precision = parse_candidate(candidate)
    if not precision.startswith("int8"):
        raise InputError(None, f"--candidate {candidate}: --split searches int8 plans (int8 or int8-qnn)")
    if not budget >= 0 or trials < 1:
        raise InputError(None, f"--split {budget} --trials {trials}: the budget is a rel_error >= 0, trials >= 1")
    import onnx

    model, xs = prepare(spec, input_specs, "fp32", False, eager_check=True)
    model = model.eval()
    arrays = tuple(x.detach().cpu().numpy() for x in xs)
    calib = (
        load_batches(calibration, len(arrays))
        if calibration
        else random_calibration([(a.shape, a.dtype) for a in arrays])
    )
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = export_model(model, tuple(xs), Path(tmp) / "model.onnx", label=f"--model {spec}")
        layers = tuple(dict.fromkeys(n.module for n in nodes(onnx.load(str(fp32))) if n.op in COMPUTE_OPS and n.module))
        if not layers:
            raise InputError(None, f"--model {spec}: no Conv, Gemm or MatMul layer to keep in fp32")
        space = Space(
            tuple(Dimension(f"precision:{m}", "precision", ("int8", "fp32"), module=m) for m in layers),
            precision,
            model=spec,
            accel=backend,
        )
        name = strategy or ("exhaustive" if 2 ** len(layers) <= trials else "tpe")
        if name not in STRATEGIES:
            raise InputError(None, f"--strategy {name}: expected one of {', '.join(STRATEGIES)}")
        _, _, ref_out = eager_outputs(model, tuple(xs))
        runner = _PlanRunner(fp32, arrays, ref_out, backend, precision, calib)
        workload = hashlib.sha256(fp32.read_bytes() + f"{precision}|{calib.source}".encode()).hexdigest()
        study = Study(workload, "snapdragon-x-elite-htp" if backend == "qnn-sim" else "cpu", backend, spec)
        db = TrialDB(db_path)
        try:
            done = tune(space, runner, make_strategy(name, space, seed), db, study, trials, seed)
        finally:
            db.close()
    within = [t for t in done if t.ok and t.accuracy_error is not None and t.accuracy_error <= budget]
    best = min(within, key=lambda t: (t.time_ns, t.accuracy_error, t.seq)) if within else None
    notes = (
        f"{precision} calibrated on {calib.source}",
        f"error on the seeded inputs of --input {' '.join(input_specs)}",
    )
    return SplitResult(tuple(done), tuple(front(list(done))), best, budget, candidate, layers, name, notes)
