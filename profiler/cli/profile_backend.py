"""`perf profile --model M --backend onnxruntime|qnn-sim [--precision P]`: export, precision, run under the
runtime's profiler, then analyze the trace as `perf analyze` does (docs/deploy.md). `perf profile`
dispatches here for every backend but eager (its own path)."""

from __future__ import annotations

import sys
from pathlib import Path

from profiler.cli.common import fail, one_line_errors

BACKENDS = ("onnxruntime", "qnn-sim", "tensorrt")
LABEL = {
    "onnxruntime": "ONNX Runtime CPU profile",
    "qnn-sim": "QNN HTP simulator profile",
    "tensorrt": "trtexec per-layer profile",
}


def profile_backend(
    backend: str,
    model: str | None,
    inputs: list[str],
    output: Path | None,
    precision: str | None,
    runs: int | None,
    calibration: Path | None,
    force: bool,
    *,
    top: int,
    json: bool,
    hardware: str | None,
    section: list[str] | None,
) -> None:
    if backend not in BACKENDS:
        fail(f"--backend {backend}: expected eager, iree or one of {', '.join(BACKENDS)}")
    if not model:
        fail(f"--backend {backend} profiles a model: give --model MODULE:FACTORY and --input SHAPE")
        return
    if backend == "tensorrt":
        from profiler.api.deploy import tensorrt_unavailable

        why = tensorrt_unavailable()
        if why:  # told before the export's seconds
            fail(f"--backend tensorrt: {why}")
    from profiler.api.deploy import profile_onnxruntime
    from profiler.cli.analyze import analyze_recorded
    from profiler.model.files import check_writable

    with one_line_errors(calibration or Path(model)):
        from profiler.api.deploy import DEFAULT_PRECISION

        prec = precision or DEFAULT_PRECISION.get(backend, "fp32")
        tag = Path(prec).stem if prec.endswith(".json") else prec  # a plan file: its name
        out = check_writable(output or Path(f"perf-{model.rpartition(':')[2]}.{backend}-{tag}.json"), force=force)
        path, notes = profile_onnxruntime(
            model, inputs, out, precision=prec, runs=runs or 3, calibration=calibration, backend=backend
        )
    print(f"wrote {path} ({LABEL[backend]}, {prec})", file=sys.stderr)
    for n in notes:
        print(f"perf: note: {n}", file=sys.stderr)
    analyze_recorded(path, top=top, json=json, hardware=hardware, section=section)
