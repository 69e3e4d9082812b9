"""TensorRT: build and time an ONNX model with `trtexec`, and read its per-layer profile as a `Trace`.

trtexec (TensorRT's command-line tool, samples/trtexec in NVIDIA/TensorRT) writes, with
`--exportProfile=FILE`, a JSON list (samples/common/sampleReporting.cpp, exportJSONProfile):

    [ { "count" : 625 },
      { "name" : "Conv_0 + PWN(Clip_3)", "timeMs" : 41.42, "averageMs" : 0.0663, "medianMs" : 0.065,
        "percentage" : 1.36 }, ... ]

one entry per engine layer (`count` inferences; `timeMs` their total, `averageMs` per inference;
`medianMs` since TensorRT 8.4) and, with `--exportLayerInfo=FILE --profilingVerbosity=detailed`,
`{"Layers": [{"Name": ..., "LayerType": ..., "Metadata": "[ONNX Layer: /conv/Conv]\\x1f[ONNX Layer:
/act/Relu]", ...}], "Bindings": [...]}`: the ONNX nodes each engine layer came from.

Fused layer names map back to ONNX nodes by the layer info's Metadata when given, else by the
name TensorRT composes: `A + B` (fused), `PWN(A, B)` (a pointwise fusion, nested), `Reformatting
CopyNode for Input Tensor 0 to X` (a layout copy before X: attributed to X's nodes). Module paths
come from those nodes (collectors/onnx/export.py), the common prefix when they span several.

The profile holds per-layer averages, not a timeline: the Trace is one average inference, the
layers back to back on rank0/gpu0/trt in the profile's order, each `averageMs` long, one
ProfilerStep around them; `metadata['count']` says over how many inferences it was averaged.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from profiler.model.errors import InputError
from profiler.model.schema import Kind
from profiler.model.trace import Trace

_REFORMAT = re.compile(r"^Reformatting CopyNode for (?:Input|Output) Tensor \d+ to (.*)$")
_ONNX_LAYER = re.compile(r"\[ONNX Layer: ([^\]]+)\]")


def fused_nodes(layer: str, known: set[str]) -> list[str]:
    """The ONNX node names in a TensorRT layer name (`A + PWN(B, C)` -> [A, B, C]), those in `known`
    when the model's node names are given, else every part."""
    m = _REFORMAT.match(layer)
    if m:
        layer = m.group(1)
    parts = [p.strip() for p in re.split(r"\s\+\s|,\s|PWN\(|\)", layer)]
    names = [p for p in parts if p]
    return [n for n in names if n in known] if known else names


def _common_module(paths: list[str]) -> str:
    split = [p.split(".") for p in paths if p]
    if not split:
        return ""
    out = []
    for parts in zip(*split):
        if len(set(parts)) != 1:
            break
        out.append(parts[0])
    return ".".join(out)


def load_trtexec_profile(
    profile: str | Path, layer_info: str | Path | None = None, model: Any = None, device_name: str = ""
) -> Trace:
    """The Trace of a trtexec `--exportProfile` JSON (module docstring); `layer_info` its
    `--exportLayerInfo` JSON, `model` the onnx.ModelProto it was built from (module paths and ops)."""
    from collectors.onnx.export import module_of
    from collectors.onnx.ort_trace import build_trace

    path = Path(profile)
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(path, f"not a readable trtexec profile: {type(e).__name__}") from None
    if not isinstance(doc, list) or not doc or not isinstance(doc[0], dict) or "count" not in doc[0]:
        raise InputError(path, 'not a trtexec --exportProfile JSON: expected [{"count": N}, {"name": ...}, ...]')
    layers = doc[1:]
    for i, entry in enumerate(layers, start=1):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("name"), str)
            or not isinstance(entry.get("averageMs"), (int, float))
        ):
            raise InputError(path, f"entry {i}: a layer needs a name and averageMs")
    meta: dict[str, list[str]] = {}
    if layer_info is not None:
        info_path = Path(layer_info)
        try:
            info = json.loads(info_path.read_text())
            for lay in info.get("Layers", []):
                if isinstance(lay, dict) and isinstance(lay.get("Metadata"), str):
                    meta[str(lay.get("Name", ""))] = _ONNX_LAYER.findall(lay["Metadata"])
        except (OSError, UnicodeDecodeError, ValueError, AttributeError) as e:
            raise InputError(info_path, f"not a readable trtexec --exportLayerInfo JSON: {type(e).__name__}") from None
    by_name = {n.name: n for n in model.graph.node} if model is not None else {}
    rows: list[dict[str, Any]] = []
    at = 0
    for entry in layers:
        name, dur = entry["name"], int(round(float(entry["averageMs"]) * 1e6))
        onnx_nodes = meta.get(name) or fused_nodes(name, set(by_name))
        kernel = {
            "name": name,
            "kind": Kind.MEMCPY.value if _REFORMAT.match(name) else Kind.KERNEL.value,
            "cat": "tensorrt",
            "ts": at,
            "dur": dur,
            "device": "gpu0",
            "track": "rank0/gpu0/trt",
            "stream": 0,
            "source": "runtime",
        }
        rows.append(kernel)
        known = [by_name[n] for n in onnx_nodes if n in by_name]
        if known:
            rows.append(
                {
                    "name": f"onnx::{known[0].op_type}"
                    if len(known) == 1
                    else "onnx::" + "+".join(n.op_type for n in known),
                    "kind": Kind.OP.value,
                    "cat": "tensorrt",
                    "ts": at,
                    "dur": dur,
                    "thread": 0,
                    "source": "runtime",
                    "_module": _common_module([module_of(n) for n in known]),
                    "_kernel": kernel,
                }
            )
        at += dur
    from collectors.onnx.ort_trace import _module_frames

    rows.append(
        {
            "name": "ProfilerStep#0",
            "kind": Kind.ANNOTATION.value,
            "cat": "tensorrt",
            "ts": 0,
            "dur": at,
            "thread": 0,
            "source": "runtime",
        }
    )
    rows += _module_frames([r for r in rows if r.get("_module")])
    devices = [{"rank": 0, "device": "gpu0", "name": device_name or "NVIDIA GPU (TensorRT engine)"}]
    metadata = {
        "files": [str(path)],
        "format": "trtexec",
        "framework": "TensorRT (trtexec --exportProfile): one average inference",
        "count": int(doc[0]["count"]),
    }
    return build_trace(rows, [(0, at)], devices, metadata)


def is_trtexec_profile(path: Path) -> bool:
    """A JSON list opening with trtexec's {"count": N} entry (a look at the head of a regular file)."""
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.lstrip().startswith(b"[") and b'"count"' in head


def load_trtexec(path: str | Path, max_bytes: int | None = None) -> Trace:
    """A trtexec profile with what `profile_trtexec` writes beside it, when there: `<name>.layers.json`
    (layer info) and `<name>.onnx` (the model built)."""
    import onnx

    path = Path(path)
    layers, model = path.with_suffix(".layers.json"), path.with_suffix(".onnx")
    proto = onnx.load(str(model), load_external_data=False) if model.is_file() else None
    return load_trtexec_profile(path, layers if layers.is_file() else None, proto)


def trtexec_available() -> str | None:
    """Why trtexec cannot run here (None when it can): the tool and an NVIDIA GPU are needed."""
    if shutil.which("trtexec") is None:
        return "trtexec is not on PATH (TensorRT is not installed)"
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA GPU (nvidia-smi not found)"
    return None


def profile_trtexec(model_path: Path, out: Path, *, precision: str = "fp32", runs: int = 100) -> tuple[Path, Path]:
    """Build `model_path` into an engine and time it with trtexec: writes `out` (--exportProfile),
    `<out>.layers.json` (--exportLayerInfo, detailed) and `<out>.onnx` (the model, for module
    paths). InputError when trtexec cannot run here."""
    why = trtexec_available()
    if why:
        raise InputError(None, f"--backend tensorrt: {why}")
    layers = out.with_suffix(".layers.json")
    cmd = [
        "trtexec",
        f"--onnx={model_path}",
        f"--exportProfile={out}",
        f"--exportLayerInfo={layers}",
        "--profilingVerbosity=detailed",
        "--separateProfileRun",
        f"--iterations={runs}",
    ]
    if precision == "fp16":
        cmd.append("--fp16")
    elif precision.startswith("int8"):
        cmd.append("--int8")  # a QDQ model: TensorRT takes the scales from its Q/DQ nodes
    shutil.copyfile(model_path, out.with_suffix(".onnx"))
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not out.is_file():
        last = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InputError(None, f"--backend tensorrt: trtexec failed (exit {r.returncode}): {last[0][:300]}")
    return out, layers
