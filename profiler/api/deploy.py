"""Deployment targets: export a model to ONNX, make a precision variant, and compare it layer by
layer with eager fp32 (`perf diff --numerics`, `perf gate --accuracy`).

Candidates are `BACKEND[:PRECISION]`: `onnxruntime` (CPU execution provider) at fp32, fp16, int8
(QDQ, static, per-channel weights) or int8-qnn, and `qnn-sim` (the QNN HTP x86 simulator through
onnxruntime-qnn; default precision int8-qnn, the QDQ configuration the HTP takes), and `inductor`
(torch.compile's Inductor on this CPU at fp32, bf16 or fp16: its kernels' per-layer outputs,
`diff_inductor`). The other backends (tensorrt, accelerator) are refused with one line.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from analysis.numerics import DEFAULT_THRESHOLD, NumericsReport, compare_layers
from profiler.model.errors import InputError

BACKENDS = ("onnxruntime", "qnn-sim")
#: The precision a backend runs when the candidate names none.
DEFAULT_PRECISION = {"onnxruntime": "fp32", "qnn-sim": "int8-qnn"}
PRECISIONS = ("fp32", "fp16", "int8", "int8-qnn")
#: `--candidate inductor:P`: the model cast to P and compiled (no quantization on this path).
INDUCTOR_PRECISIONS = ("fp32", "bf16", "fp16")


def parse_candidate(text: str) -> tuple[str, str]:
    """`onnxruntime:int8` -> ('onnxruntime', 'int8'); the precision defaults to DEFAULT_PRECISION."""
    backend, _, precision = text.partition(":")
    precision = precision or DEFAULT_PRECISION.get(backend, "fp32")
    if backend not in BACKENDS:
        raise InputError(
            None, f"--candidate {text}: backend {backend!r} is not supported yet; expected one of {', '.join(BACKENDS)}"
        )
    if precision.endswith(".json"):  # a mixed-precision plan file {module path: int8 | fp32}
        if not Path(precision).is_file():
            raise InputError(Path(precision), "no such plan file (JSON {module path: 'int8' | 'fp32'})")
        return backend, precision
    if precision not in PRECISIONS:
        raise InputError(
            None,
            f"--candidate {text}: precision {precision!r}; expected one of {', '.join(PRECISIONS)} or a plan .json",
        )
    return backend, precision


def quantized(precision: str) -> bool:
    """Whether the variant needs int8 calibration: int8, int8-qnn, or a plan file."""
    return precision.startswith("int8") or precision.endswith(".json")


def make_precision(fp32: Path, precision: str, out: Path, calib: Any, backend: str = "onnxruntime") -> Path:
    """The `precision` variant of the export at `fp32` (collectors.onnx.precision.to_precision); a
    plan file: int8 (int8-qnn on qnn-sim) with the plan's fp32 layers' nodes left in fp32."""
    from collectors.onnx.precision import load_plan, plan_nodes, to_precision

    if not precision.endswith(".json"):
        return to_precision(fp32, precision, out, calib)
    import onnx

    keep = plan_nodes(onnx.load(str(fp32), load_external_data=False), load_plan(Path(precision)))
    return to_precision(fp32, "int8-qnn" if backend == "qnn-sim" else "int8", out, calib, keep_fp32=keep)


def export_model(model: Any, inputs: tuple[Any, ...], path: Path, *, label: str = "model") -> Path:
    """The fp32 ONNX export of `model` at `path` (collectors.onnx.export)."""
    from collectors.onnx.export import export_onnx

    return export_onnx(model, inputs, path, label=label)


def diff_onnx(
    model: Any,
    inputs: tuple[Any, ...],
    fp32_onnx: Path,
    precision: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    calibration: Path | None = None,
    workdir: Path | None = None,
    backend: str = "onnxruntime",
    metric: Any = None,
) -> NumericsReport:
    """Eager fp32 against `backend` (onnxruntime: the CPU EP; qnn-sim: the QNN HTP simulator) at
    `precision` on `inputs`, per layer (analysis.numerics). `fp32_onnx` is `model`'s export; int8
    calibrates on the file's batches or random inputs."""
    import onnx

    from collectors.onnx.export import module_outputs
    from collectors.onnx.layers import eager_outputs, ort_outputs
    from collectors.onnx.precision import load_batches, random_calibration

    arrays = tuple(x.detach().cpu().numpy() for x in inputs)
    notes: list[str] = []
    calib = None
    if quantized(precision):
        if calibration is not None:
            calib = load_batches(calibration, len(arrays))
        else:
            calib = random_calibration([(a.shape, a.dtype) for a in arrays])
        notes.append(f"{precision} calibrated on {calib.source}")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        cand = make_precision(fp32_onnx, precision, Path(tmp) / "model.variant.onnx", calib, backend)
        tensors = {k: t for k, (t, _) in module_outputs(onnx.load(str(fp32_onnx), load_external_data=False)).items()}
        ref, ops, ref_out = eager_outputs(model, tuple(inputs))
        got, cand_out = ort_outputs(cand, arrays, tensors, candidate_session(backend))
    return compare_layers(
        ref,
        got,
        ops,
        ref_out,
        cand_out,
        threshold=threshold,
        candidate=f"{backend}:{precision}",
        notes=tuple(notes),
        metric=metric,
    )


def numerics_diff(
    spec: str,
    input_specs: list[str],
    candidate: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    inputs_file: Path | None = None,
    calibration: Path | None = None,
    metric: str | None = None,
) -> NumericsReport:
    """`perf diff --numerics`: build the model from its factory, export it, compare the candidate.
    Inputs: the first batch of `inputs_file` when given, else the seeded random inputs of --input.
    `metric`: MODULE:FN, a task metric fn(reference output, candidate output) -> float (numpy
    arrays, fp32) the accuracy gate judges instead of the output's rel_error."""
    import torch

    from collectors.onnx.precision import load_batches
    from collectors.torch_runtime.run_model import prepare

    kind = candidate.partition(":")[0].partition("@")[0]
    task_metric = (metric, load_metric(metric)) if metric else None
    # every candidate is parsed before the model is built: a bad one is told first
    if kind == "accelerator":
        from profiler.api.deploy_accel import diff_accelerator, parse_accelerator_candidate

        backend, precision = kind, parse_accelerator_candidate(candidate)[0]
    elif kind in ("inductor", "eager"):  # eager: the model cast to the precision, not compiled
        backend, precision = parse_inductor_candidate(candidate)
    else:
        backend, precision = parse_candidate(candidate)
    model, xs = prepare(spec, input_specs, "fp32", False, eager_check=True)
    model = model.eval()
    seen = f"compared on seeded random inputs ({', '.join(input_specs)})"
    if inputs_file is not None:
        xs = [torch.from_numpy(a) for a in load_batches(inputs_file, len(xs)).batches[0]]
        seen = f"compared on the first batch of {inputs_file} ({', '.join('x'.join(map(str, x.shape)) for x in xs)})"
    if backend == "accelerator":
        report = diff_accelerator(model, tuple(xs), candidate, threshold=threshold, metric=task_metric)
        return dataclasses.replace(report, notes=(seen, *report.notes))
    if backend in ("inductor", "eager"):
        report = diff_inductor(
            model, tuple(xs), precision, threshold=threshold, metric=task_metric, compiled=backend == "inductor"
        )
        return dataclasses.replace(report, notes=(seen, *report.notes))
    if calibration is not None and quantized(precision):
        load_batches(calibration, len(xs))  # an unreadable file is told before the export's seconds
    with tempfile.TemporaryDirectory() as tmp:
        path = export_model(model, tuple(xs), Path(tmp) / "model.onnx", label=f"--model {spec}")
        report = diff_onnx(
            model,
            tuple(xs),
            path,
            precision,
            threshold=threshold,
            calibration=calibration,
            backend=backend,
            metric=task_metric,
        )
    return dataclasses.replace(report, notes=(seen, *report.notes))


def parse_inductor_candidate(text: str) -> tuple[str, str]:
    """`inductor|eager[:fp32|bf16|fp16]` -> (backend, precision); fp32 by default."""
    backend, _, precision = text.partition(":")
    precision = precision or "fp32"
    if precision not in INDUCTOR_PRECISIONS:
        raise InputError(
            None,
            f"--candidate {text}: {backend} runs {', '.join(INDUCTOR_PRECISIONS)} "
            "(int8 and plans are ONNX Runtime's: --candidate onnxruntime:int8)",
        )
    return backend, precision


def diff_inductor(
    model: Any,
    inputs: tuple[Any, ...],
    precision: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    metric: Any = None,
    compiled: bool = True,
) -> NumericsReport:
    """Eager fp32 against the model cast to `precision` and compiled by Inductor (or, `compiled`
    False, run eagerly at that precision), per layer: the same forward hooks on both sides
    (collectors.torch_runtime.layer_outputs); on the compiled side dynamo traces them into the
    graph, so each layer's output is the one Inductor's kernels made."""
    import copy

    import torch

    from collectors.torch_runtime.layer_outputs import eager_outputs

    ref, ops, ref_out = eager_outputs(model, inputs)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    cand = copy.deepcopy(model).to(dtype).eval()
    xs = tuple(x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)
    if compiled:
        torch._dynamo.reset()  # a fresh compile: no cache entry of another dtype is reused
    got, _, cand_out = eager_outputs(cand, xs, run=torch.compile(cand, backend="inductor") if compiled else None)
    name = f"{'inductor' if compiled else 'eager'}:{precision}"
    return compare_layers(ref, got, ops, ref_out, cand_out, threshold=threshold, candidate=name, metric=metric)


def load_metric(spec: str) -> Any:
    """The task metric MODULE:FN (or file.py:FN) as a callable (InputError, one line, otherwise)."""
    from collectors.torch_runtime.specs import load_factory

    try:
        return load_factory(spec)
    except InputError as e:  # load_factory speaks of --model
        raise InputError(None, str(e).replace("--model", "--metric", 1)) from None


def candidate_session(backend: str) -> Any:
    """The session maker ort_outputs runs the candidate on: None (ORT's CPU EP) or the QNN HTP's."""
    if backend != "qnn-sim":
        return None
    from collectors.onnx.qnn import qnn_session

    return lambda model, feeds: qnn_session(model, feeds, label="--candidate qnn-sim")


def make_variant(
    spec: str,
    input_specs: list[str],
    precision: str,
    workdir: Path,
    *,
    calibration: Path | None = None,
    backend: str = "onnxruntime",
) -> tuple[Path, tuple[Any, ...], tuple[str, ...]]:
    """Build the model from its factory, export it to `workdir` and make its `precision` variant:
    (the variant's path, the input arrays, notes: what int8 calibrated on)."""
    from collectors.onnx.precision import load_batches, random_calibration
    from collectors.torch_runtime.run_model import prepare

    if precision not in PRECISIONS and not precision.endswith(".json"):
        raise InputError(None, f"--precision {precision}: expected one of {', '.join(PRECISIONS)} or a plan .json")
    model, xs = prepare(spec, input_specs, "fp32", False, eager_check=True)
    model = model.eval()
    arrays = tuple(x.detach().cpu().numpy() for x in xs)
    calib = None
    if quantized(precision):
        calib = (
            load_batches(calibration, len(arrays))
            if calibration
            else random_calibration([(a.shape, a.dtype) for a in arrays])
        )
    fp32 = export_model(model, tuple(xs), workdir / "model.onnx", label=f"--model {spec}")
    cand = make_precision(fp32, precision, workdir / "model.variant.onnx", calib, backend)
    return cand, arrays, ((f"{precision} calibrated on {calib.source}",) if calib else ())


def profile_variant(
    cand: Path, arrays: tuple[Any, ...], out: Path, *, backend: str, runs: int, label: str, precision: str = "fp32"
) -> Path:
    """Run the ONNX model `cand` `runs` times under `backend`'s profiler and write the profile to
    `out`: ONNX Runtime's CPU profile (collectors.onnx.ort_trace), QNN's HTP profile
    (collectors.onnx.qnn) or trtexec's per-layer profile (collectors.onnx.tensorrt)."""
    if backend == "qnn-sim":
        from collectors.onnx.qnn import profile_qnn

        return profile_qnn(cand, arrays, out, runs=runs, label=label)
    if backend == "tensorrt":
        from collectors.onnx.tensorrt import profile_trtexec

        return profile_trtexec(cand, out, precision=precision, runs=max(runs, 10))[0]
    from collectors.onnx.ort_trace import profile_ort

    return profile_ort(cand, arrays, out, runs=runs)


def profile_onnxruntime(
    spec: str,
    input_specs: list[str],
    out: Path,
    *,
    precision: str = "fp32",
    runs: int = 3,
    calibration: Path | None = None,
    backend: str = "onnxruntime",
) -> tuple[Path, tuple[str, ...]]:
    """`perf profile MODEL --backend onnxruntime|qnn-sim`: export the model, make the `precision`
    variant, run it `runs` times under the runtime's profiler and write the profile to `out`
    (profile_variant). Returns the path and notes (int8: what it calibrated on)."""
    with tempfile.TemporaryDirectory() as tmp:
        cand, arrays, notes = make_variant(
            spec, input_specs, precision, Path(tmp), calibration=calibration, backend=backend
        )
        path = profile_variant(
            cand, arrays, out, backend=backend, runs=runs, label=f"--model {spec} ({precision})", precision=precision
        )
    return path, notes


def read_numerics(path: Path) -> dict[str, Any]:
    """The perf.numerics document in `path`: a `perf diff --numerics --json` file, or a
    `perf gate --accuracy --json` / `perf gate --config --json` one that holds it; InputError
    (one line) otherwise."""
    import json

    from profiler.model.files import read_bounded

    try:
        doc = json.loads(read_bounded(Path(path), 64 * 2**20))
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError(path, f"not a readable JSON document: {type(e).__name__}") from None
    if isinstance(doc, dict) and doc.get("schema") == "perf.gate_pipeline":
        doc = doc.get("accuracy") or {}
    if isinstance(doc, dict) and doc.get("schema") == "perf.accuracy_gate":
        doc = doc.get("numerics") or {}
    layers = doc.get("layers") if isinstance(doc, dict) else None
    keys = ("name", "op", "rel_error", "max_abs_error", "cosine", "sqnr_db")
    if not isinstance(layers, list) or not all(isinstance(x, dict) and all(k in x for k in keys) for x in layers):
        raise InputError(path, "not a perf diff --numerics --json document (no 'layers' with name, op, rel_error...)")
    if not isinstance(doc.get("threshold"), (int, float)):
        raise InputError(path, "a perf.numerics document without its 'threshold'")
    return doc


def tensorrt_unavailable() -> str | None:
    """Why `--backend tensorrt` cannot run here (collectors.onnx.tensorrt.trtexec_available), or None."""
    from collectors.onnx.tensorrt import trtexec_available

    return trtexec_available()
