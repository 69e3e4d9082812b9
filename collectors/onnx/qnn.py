"""Run an ONNX model on Qualcomm's HTP through ONNX Runtime's QNN execution provider, on the x86
simulator that `onnxruntime-qnn` ships, and record QNN's per-node profile.

onnxruntime-qnn 2.x is a plugin EP: `ort.register_execution_provider_library` loads
`libonnxruntime_providers_qnn.so`, `ort.get_ep_devices()` lists its device and
`SessionOptions.add_provider_for_devices(devices, options)` appends it. Options used:
`backend_path` = the package's `libQnnHtp.so` (on x86-64 Linux that library runs the HTP graph on
the host: the simulator), `htp_arch` (the Hexagon version simulated), `profiling_level=detailed`
and `profiling_file_path` (QNN writes a CSV there: per execute, the accelerator's cycles and one
`NODE` row of cycles per QNN op; collectors/onnx/qnn_trace.py reads it).

The CPU fallback is off (`session.disable_cpu_ep_fallback`): a model the EP cannot place whole
is refused, and a second, permissive session under ORT's profiler names the nodes left to the
CPU (the strict session's error names none). One exception: when the only nodes left are the
graph's edge conversions (a QuantizeLinear of a graph input, a DequantizeLinear of a graph
output), the model runs with them on the CPU, as a deployment would (the QNN EP leaves them
there on some graphs, e.g. the ResNet-style net of benchmarks/bench_deploy.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from profiler.model.errors import InputError

#: The Hexagon version simulated: v73, the HTP of Snapdragon X Elite (the preset
#: snapdragon-x-elite-htp; Qualcomm's QNN docs list SC8380XP as HTP v73).
HTP_ARCH = "73"
FORMAT = "perf.qnn_profile"
#: Executes run before the measured ones: the simulator's first execute counts its cold start
#: (measured: QuantizeLinear of a 2x3x8x8 input, 3.1M cycles first, ~50k after). The file says
#: how many; the reader leaves them out.
WARMUP = 1
_registered = False


def _ep() -> Any:
    """The QNN EP's devices, registering the plugin library once per process."""
    global _registered
    import onnxruntime as ort
    import onnxruntime_qnn as qnn

    if not _registered:
        try:
            ort.register_execution_provider_library(qnn.get_ep_name(), qnn.get_library_path())
        except Exception as e:  # noqa: BLE001 - already registered in this process
            if "already" not in str(e).lower():
                raise
        _registered = True
    return [d for d in ort.get_ep_devices() if d.ep_name == qnn.get_ep_name()]


@contextlib.contextmanager
def native_stdout_silenced() -> Iterator[None]:
    """Point file descriptor 1 at /dev/null while QNN's native libraries run: the HTP library
    prints a line ('# LIBNATIVE: No alternate configuration ...') to stdout, which would corrupt
    --json; it writes nothing else there (errors come back as exceptions)."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def qnn_session(
    model: Path | bytes, feeds: dict[str, np.ndarray], *, profile_csv: Path | None = None, label: str = ""
) -> Any:
    """An InferenceSession of `model` placed whole on the QNN HTP backend (simulator); InputError
    (one line naming the nodes the HTP cannot run) when the EP cannot place every node."""
    import onnxruntime as ort
    import onnxruntime_qnn as qnn

    from collectors.torch_runtime.specs import one_line

    try:
        devices = _ep()
    except Exception as e:  # noqa: BLE001 - the plugin library failed to load
        raise InputError(None, f"{label}: the QNN execution provider did not load: {one_line(e)}") from None
    if not devices:
        raise InputError(None, f"{label}: onnxruntime-qnn lists no QNN device on this machine")
    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # fatal only: the refusal is told in one line below
    opts.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    ep: dict[str, str] = {"backend_path": qnn.get_qnn_htp_path(), "htp_arch": HTP_ARCH}
    if profile_csv is not None:
        ep.update(profiling_level="detailed", profiling_file_path=str(profile_csv))
    opts.add_provider_for_devices(devices, ep)
    source = model if isinstance(model, bytes) else str(model)
    try:
        with native_stdout_silenced():
            return ort.InferenceSession(source, opts)
    except Exception as e:  # noqa: BLE001 - an op the HTP lacks, or a graph QNN fails to finalize
        left = _left_to_cpu(source, feeds, devices, ep)
        if left and all(_boundary(source, name) for name, _ in left):
            # Only the graph's own input QuantizeLinear / output DequantizeLinear are left: the
            # float <-> int8 conversion at the model's edge, which deployments run on the CPU.
            loose = ort.SessionOptions()
            loose.log_severity_level = 4
            loose.add_provider_for_devices(devices, ep)
            with native_stdout_silenced():
                return ort.InferenceSession(source, loose)
        if left:
            shown = ", ".join(f"{n} ({op})" for n, op in left[:5]) + (
                f" and {len(left) - 5} more" if len(left) > 5 else ""
            )
            raise InputError(None, f"{label}: the QNN HTP cannot run {len(left)} node(s): {shown}") from None
        raise InputError(None, f"{label}: the QNN HTP backend refused the model: {one_line(e)}") from None


def _boundary(source: Any, node_name: str) -> bool:
    """A QuantizeLinear reading a graph input, or a DequantizeLinear writing a graph output."""
    import onnx

    model = onnx.load_from_string(source) if isinstance(source, bytes) else onnx.load(source, load_external_data=False)
    ins, outs = {i.name for i in model.graph.input}, {o.name for o in model.graph.output}
    for n in model.graph.node:
        if n.name == node_name:
            return (n.op_type == "QuantizeLinear" and n.input[0] in ins) or (
                n.op_type == "DequantizeLinear" and n.output[0] in outs
            )
    return False


def _left_to_cpu(source: Any, feeds: dict[str, np.ndarray], devices: Any, ep: dict[str, str]) -> list[tuple[str, str]]:
    """(node name, op type) of the nodes ORT assigns to its CPU EP when fallback is allowed, from
    one profiled run (ORT's Node events carry the provider)."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4  # fatal only: the refusal is told in one line below
        opts.enable_profiling = True
        opts.profile_file_prefix = str(Path(tmp) / "placement")
        opts.add_provider_for_devices(devices, {k: v for k, v in ep.items() if not k.startswith("profiling")})
        try:
            with native_stdout_silenced():
                session = ort.InferenceSession(source, opts)
                session.run(None, feeds)
            events = json.loads(Path(session.end_profiling()).read_text())
        except Exception:  # noqa: BLE001 - not even the permissive session runs: no names to give
            return []
    model = onnx.load_from_string(source) if isinstance(source, bytes) else onnx.load(source, load_external_data=False)
    ops = {n.name: n.op_type for n in model.graph.node}
    left = []
    for e in events:
        args = e.get("args", {})
        name = str(e.get("name", "")).removesuffix("_kernel_time")
        if e.get("cat") == "Node" and args.get("provider") == "CPUExecutionProvider" and name in ops:
            if (name, ops[name]) not in left:
                left.append((name, ops[name]))
    return left


def profile_qnn(model_path: Path, inputs: tuple[np.ndarray, ...], out: Path, *, runs: int = 3, label: str = "") -> Path:
    """Run `model_path` WARMUP + `runs` times on the QNN HTP simulator with detailed profiling and
    write `out` (JSON, format perf.qnn_profile): QNN's profile CSV as written, the Hexagon version,
    the warm-up count, and
    per ONNX node its op, module path, input shapes and dtypes (qnn_trace.node_table)."""
    import onnx

    from collectors.onnx.qnn_trace import node_table

    model = onnx.load(str(model_path), load_external_data=False)
    feeds = {i.name: a for i, a in zip(model.graph.input, inputs)}
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "qnn_profile.csv"
        session = qnn_session(model_path, feeds, profile_csv=csv_path, label=label)
        with native_stdout_silenced():
            for _ in range(WARMUP + runs):
                session.run(None, feeds)
            del session  # QNN writes the profile when the session is released
        if not csv_path.is_file():
            raise InputError(None, f"{label}: the QNN EP wrote no profile (profiling_file_path={csv_path})")
        text = csv_path.read_text()
    doc = {
        "format": FORMAT,
        "schema_version": 1,
        "htp_arch": HTP_ARCH,
        "warmup": WARMUP,
        "model": model_path.name,
        "nodes": node_table(model),
        "csv": text,
    }
    out.write_text(json.dumps(doc))
    return out
