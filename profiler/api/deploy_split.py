"""Graph splitting under a speed/accuracy budget (`perf gate --split BUDGET MODEL --candidate ...`):
which layers to keep in fp32 so the int8 model meets the accuracy budget at the lowest latency.

This module is the facade's half: the setup (`prepare_split`) and one plan's measurement
(`measure_plan`). The search is the autotune loop's (profiler.autotune: `tune`, a `make_strategy`
strategy, the SQLite `TrialDB`), driven from the top floor (profiler/cli/deploy_split.py: the
facade may not import the loop, which sits above it), over a space of one precision dimension
per compute layer (every module path that owns a Conv, ConvTranspose, Gemm or MatMul node),
options ('int8', 'fp32'), int8 first (the baseline: the whole model quantized). A trial is a
per-layer plan {module path: dtype}: the int8 variant with the fp32 layers' nodes excluded from
quantization (collectors.onnx.precision.plan_nodes), then

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from profiler.model.errors import InputError

COMPUTE_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


@dataclass(frozen=True)
class SplitSetup:
    """What every plan's trial shares: the fp32 export (in the caller's directory), the inputs,
    eager fp32's output, the backend and base precision, the calibration, the layers (module paths
    owning a compute node, network order) and the workload hash (export bytes, precision, calibration)."""

    fp32: Path
    arrays: tuple[np.ndarray, ...]
    ref_out: np.ndarray
    backend: str
    precision: str
    calib: Any
    layers: tuple[str, ...]
    workload: str


def prepare_split(
    spec: str, input_specs: list[str], candidate: str, workdir: Path, *, calibration: Path | None = None
) -> SplitSetup:
    """Build the model, export it to `workdir`, run eager fp32 once, list the layers."""
    import onnx

    from collectors.onnx.export import nodes
    from collectors.onnx.layers import eager_outputs
    from collectors.onnx.precision import load_batches, random_calibration
    from collectors.torch_runtime.run_model import prepare
    from profiler.api.deploy import export_model, parse_candidate

    backend, precision = parse_candidate(candidate)
    if not precision.startswith("int8"):
        raise InputError(None, f"--candidate {candidate}: --split searches int8 plans (int8 or int8-qnn)")
    model, xs = prepare(spec, input_specs, "fp32", False, eager_check=True)
    model = model.eval()
    arrays = tuple(x.detach().cpu().numpy() for x in xs)
    calib = (
        load_batches(calibration, len(arrays))
        if calibration
        else random_calibration([(a.shape, a.dtype) for a in arrays])
    )
    fp32 = export_model(model, tuple(xs), workdir / "model.onnx", label=f"--model {spec}")
    layers = tuple(dict.fromkeys(n.module for n in nodes(onnx.load(str(fp32))) if n.op in COMPUTE_OPS and n.module))
    if not layers:
        raise InputError(None, f"--model {spec}: no Conv, Gemm or MatMul layer to keep in fp32")
    _, _, ref_out = eager_outputs(model, tuple(xs))
    workload = hashlib.sha256(fp32.read_bytes() + f"{precision}|{calib.source}".encode()).hexdigest()
    return SplitSetup(fp32, arrays, ref_out, backend, precision, calib, layers, workload)


def measure_plan(
    setup: SplitSetup, plan: dict[str, str], workdir: Path
) -> tuple[float | None, float | None, str, tuple[str, ...]]:
    """One plan {module path: 'fp32'} (others int8): (latency ns, output rel_error, failure ('' when
    none), the nodes kept in fp32). A plan the runtime refuses is a failure, not an error."""
    import onnx

    from analysis.numerics import layer_error
    from collectors.onnx.latency import ort_latency_ns, qnn_latency_ns
    from collectors.onnx.layers import ort_outputs
    from collectors.onnx.precision import plan_nodes, to_precision
    from profiler.api.deploy import candidate_session

    # each dimension is one module's own nodes: 'blocks.0' in fp32 is its attention MatMuls, not its Linears
    keep = plan_nodes(onnx.load(str(setup.fp32), load_external_data=False), plan, inside=False)
    try:
        model = to_precision(setup.fp32, setup.precision, workdir / "plan.onnx", setup.calib, keep_fp32=keep)
        _, out = ort_outputs(model, setup.arrays, {}, candidate_session(setup.backend))
        if setup.backend == "qnn-sim":
            ns = qnn_latency_ns(model, setup.arrays, label="--split")
        else:
            ns = ort_latency_ns(model, setup.arrays)
    except InputError as e:
        return None, None, e.problem, keep
    return ns, layer_error("output", "", setup.ref_out, out).rel_error, "", keep
