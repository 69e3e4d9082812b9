"""ONNX Runtime (CPU execution provider): run a model under ORT's profiler, and read the
profile as a `Trace`.

ORT's profile is a JSON list of Chrome-trace events (ts, dur in microseconds): `cat: Session`
(model_loading_uri, session_initialization, model_run, SequentialExecutor::Execute) and
`cat: Node`, one `<node>_kernel_time` per node run with `args.op_name`, `provider`,
`input_type_shape` ([{"float": [2, 8]}, ...]) and `output_type_shape`. Graph optimisation is off
while profiling, so node names are the exported ones and carry module paths.

`profile_ort` adds to each node event, from the model: `module_path` (collectors.onnx.export)
and, for Conv, `concrete` (stride, padding, dilation, groups laid out as aten::convolution's
arguments, for analysis.cost.onnx). A bare ORT profile reads too, without them.

Into the Trace (all on the host: device 'cpu', rank 0):

    model_run                 annotation 'ProfilerStep#k' (one inference = one step, k from 0)
    other Session events      annotations under their own names
    Node events               op 'onnx::<op_name>' with shapes/dtypes from input_type_shape
                              (dtypes in Kineto's spelling, so the roofline costs them)
    module paths              python frames 'nn.Module: <name>' around a module's consecutive
                              nodes, nested as the path is (what analysis.modules reads)
    _fence_before/_after      dropped (zero-length markers)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from profiler.model.errors import InputError
from profiler.model.nesting import nest_sorted
from profiler.model.redact_trace import redact_trace
from profiler.model.rows import rows_frame
from profiler.model.schema import COUNTER_COLUMNS, DEVICE_COLUMNS, EVENT_COLUMNS, FLOW_COLUMNS, Kind
from profiler.model.trace import Trace

#: ONNX tensor element types as ORT's profile spells them -> Kineto's spelling (profiler.model.dtypes.KINETO).
ORT_DTYPES = {
    "float": "float",
    "float16": "c10::Half",
    "bfloat16": "c10::BFloat16",
    "double": "double",
    "int64": "long int",
    "int32": "int",
    "int16": "short int",
    "int8": "signed char",
    "uint8": "unsigned char",
    "bool": "bool",
}
MODULE_PREFIX = "nn.Module: "


def profile_ort(model_path: Path, inputs: tuple[np.ndarray, ...], out: Path, *, runs: int = 3) -> Path:
    """Run `model_path` `runs` times under ORT's profiler (CPU EP, graph optimisation off) and write
    the profile, with module paths and Conv attributes added, to `out` (JSON)."""
    import onnx
    import onnxruntime as ort

    from collectors.onnx.export import module_of

    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(out.with_suffix("")) + ".ort"
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(session.get_inputs(), inputs)}
    for _ in range(runs):
        session.run(None, feeds)
    raw = Path(session.end_profiling())
    events = json.loads(raw.read_text())
    raw.unlink()
    model = onnx.shape_inference.infer_shapes(onnx.load(str(model_path), load_external_data=False))
    graph = model.graph
    by_name = {n.name: n for n in graph.node}
    known = _tensor_types(graph)
    for e in events:
        node = by_name.get(str(e.get("name", "")).removesuffix("_kernel_time")) if e.get("cat") == "Node" else None
        if node is None:
            continue
        e["args"]["module_path"] = module_of(node)
        recorded = e["args"].get("input_type_shape") or []
        full = [known.get(i) for i in node.input if i]
        if len(recorded) != len(full) and all(full):  # ORT leaves out prepacked weights (Gemm's B)
            e["args"]["input_type_shape"] = full
        if node.op_type == "Conv":
            e["args"]["concrete"] = _conv_concrete(node)
    out.write_text(json.dumps(events))
    return out


def _tensor_types(graph: Any) -> dict[str, dict[str, list[int]]]:
    """Tensor name -> {ORT's dtype spelling: static shape}, from the inferred value infos,
    the graph's inputs and its initializers (tensors with a symbolic dim are left out)."""
    import onnx

    out: dict[str, dict[str, list[int]]] = {}
    for v in list(graph.input) + list(graph.value_info) + list(graph.output):
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if t.HasField("shape") and None not in dims:
            out[v.name] = {_ort_name(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)): [int(d or 0) for d in dims]}
    for init in graph.initializer:
        out[init.name] = {_ort_name(onnx.helper.tensor_dtype_to_np_dtype(init.data_type)): list(init.dims)}
    return out


def _ort_name(dtype: Any) -> str:
    name = np.dtype(dtype).name
    return {"float32": "float", "float64": "double"}.get(name, name)


def _conv_concrete(node: Any) -> list[Any] | None:
    """aten::convolution's (input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups) from the node's attributes (an onnx.NodeProto); None for asymmetric padding."""
    import onnx

    a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
    pads = list(a.get("pads", []))
    half = len(pads) // 2
    if pads and pads[:half] != pads[half:] or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    dims = half or len(a.get("kernel_shape", [])) or 2
    return [
        "",
        "",
        "",
        json.dumps(list(a.get("strides", [1] * dims))),
        json.dumps(pads[:half] or [0] * dims),
        json.dumps(list(a.get("dilations", [1] * dims))),
        "False",
        json.dumps([0] * dims),
        str(int(a.get("group", 1))),
    ]


def is_ort_profile(path: Path) -> bool:
    """A JSON list whose first events are ORT's Session events (a cheap look at the head of a
    regular file: a FIFO or device is left to the readers that refuse it)."""
    try:
        if not path.is_file() or path.name.endswith(".gz"):
            return False
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    text = head.lstrip()
    return text.startswith(b"[") and (b'"cat": "Session"' in head or b'"cat":"Session"' in head)


def _shapes(spec: Any) -> tuple[list, list]:
    shapes, dtypes = [], []
    for item in spec or []:
        ((dt, shape),) = item.items()
        shapes.append(list(shape))
        dtypes.append(ORT_DTYPES.get(dt, dt))
    return shapes, dtypes


def load_ort_profile(path: str | Path, max_bytes: int | None = None) -> Trace:
    """The Trace of an ONNX Runtime profile JSON (see the module docstring); at most `max_bytes`
    read (profiler.model.files.read_bounded)."""
    from profiler.model.files import read_bounded

    path = Path(path)
    raw = read_bounded(path, max_bytes)
    try:
        events = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as err:
        raise InputError(path, f"not a readable ONNX Runtime profile: {type(err).__name__}") from None
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise InputError(path, "not an ONNX Runtime profile: expected a JSON list of events")
    rows: list[dict[str, Any]] = []
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"), key=_ts)
    for e in events:
        cat, name = e.get("cat"), str(e.get("name", ""))
        if e.get("ph") != "X" or name.endswith(("_fence_before", "_fence_after")):
            continue
        ts, dur = int(round(float(e.get("ts", 0)) * 1000)), int(round(float(e.get("dur", 0)) * 1000))
        tid = int(e.get("tid", 0))
        base = {"ts": ts, "dur": max(dur, 0), "thread": tid, "cat": str(cat), "source": "runtime"}
        if cat == "Node":
            args = e.get("args", {})
            shapes, dtypes = _shapes(args.get("input_type_shape"))
            concrete = args.get("concrete")
            rows.append(
                {
                    **base,
                    "name": f"onnx::{args.get('op_name', name)}",
                    "kind": Kind.OP.value,
                    "shapes": json.dumps(shapes, separators=(",", ":")) if shapes else "",
                    "dtypes": json.dumps(dtypes) if dtypes else "",
                    "concrete": json.dumps(concrete) if concrete else "",
                    "_module": str(args.get("module_path", "")),
                }
            )
        elif cat == "Session":
            label = f"ProfilerStep#{runs.index(e)}" if name == "model_run" else name
            rows.append({**base, "name": label, "kind": Kind.ANNOTATION.value})
    rows += _module_frames([r for r in rows if r.get("_module")])
    return _trace(rows, runs, path)


def _ts(e: dict) -> float:
    return float(e.get("ts", 0))


def _module_frames(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One python frame per module call: consecutive nodes (in time, per thread) sharing a path
    prefix make one frame spanning them, nested as the path is."""
    frames: list[dict[str, Any]] = []
    open_: list[dict[str, Any]] = []  # the frames around the current node, outermost first
    for n in sorted(nodes, key=lambda r: (r["thread"], r["ts"])):
        parts = n["_module"].split(".")
        prefixes = [".".join(parts[: k + 1]) for k in range(len(parts))]
        keep = 0
        while keep < len(open_) and keep < len(prefixes) and open_[keep]["_path"] == prefixes[keep]:
            if open_[keep]["thread"] != n["thread"]:
                break
            keep += 1
        open_ = open_[:keep]
        for p in prefixes[keep:]:
            f = {
                "name": MODULE_PREFIX + p.rsplit(".", 1)[-1],
                "kind": Kind.PYTHON.value,
                "cat": "module",
                "ts": n["ts"],
                "dur": 0,
                "thread": n["thread"],
                "source": "runtime",
                "_path": p,
            }
            frames.append(f)
            open_.append(f)
        for f in open_:
            f["dur"] = max(f["dur"], n["ts"] + n["dur"] - f["ts"])
    return frames


def _trace(rows: list[dict[str, Any]], runs: list[dict], path: Path) -> Trace:
    steps = [(int(round(_ts(e) * 1000)), int(round((_ts(e) + float(e.get("dur", 0))) * 1000))) for e in runs]
    devices = [{"rank": 0, "device": "cpu", "name": "ONNX Runtime CPUExecutionProvider"}]
    metadata = {
        "files": [str(path)],
        "format": "onnxruntime",
        "framework": "ONNX Runtime profiler (CPU execution provider)",
    }
    return build_trace(rows, steps, devices, metadata)


def build_trace(
    rows: list[dict[str, Any]], steps: list[tuple[int, int]], devices: list[dict[str, Any]], metadata: dict[str, Any]
) -> Trace:
    """The Trace of `rows` (event dicts with ts, dur, name, kind; host rows with `thread`, device
    rows with `device`, `track` and `stream`; rank 0): ids in (track, time) order, each row's step
    from `steps` ([start, end) ns of ProfilerStep#k), host rows nested per thread (parent_id,
    depth), a row's `_kernel` (the device row it launched) given its id as op_id, the private
    `_module`/`_path` keys dropped."""
    order = {Kind.ANNOTATION.value: 0, Kind.PYTHON.value: 1}  # equal spans: the enclosing kind first
    for r in rows:
        if "device" not in r:
            r.update(device="cpu", track=f"rank0/cpu/thread{r['thread']}")
    rows.sort(key=lambda r: (r["device"] != "cpu", r.get("thread", -1), r["ts"], -r["dur"], order.get(r["kind"], 2)))
    for k, r in enumerate(rows):
        r.update(id=k, rank=0)
        r["step"] = next((i for i, (a, b) in enumerate(steps) if a <= r["ts"] and r["ts"] + r["dur"] <= b), -1)
        r.pop("_module", None)
        r.pop("_path", None)
    for r in rows:
        launched = r.pop("_kernel", None)
        if launched is not None:
            launched["op_id"] = r["id"]
    host = [i for i, r in enumerate(rows) if r["device"] == "cpu"]
    start = np.array([rows[i]["ts"] for i in host], dtype=np.int64)
    dur = np.array([rows[i]["dur"] for i in host], dtype=np.int64)
    thread = np.array([rows[i]["thread"] for i in host], dtype=np.int64)
    for t in np.unique(thread):
        idx = np.flatnonzero(thread == t)
        parent, depth, _ = nest_sorted(start[idx], dur[idx])
        for j, i in enumerate(idx):
            rows[host[i]]["parent_id"] = host[int(idx[parent[j]])] if parent[j] >= 0 else -1
            rows[host[i]]["depth"] = int(depth[j])
    trace = Trace(
        events=rows_frame(rows, EVENT_COLUMNS),
        counters=rows_frame([], COUNTER_COLUMNS),
        flows=rows_frame([], FLOW_COLUMNS),
        devices=rows_frame(devices, DEVICE_COLUMNS),
        metadata=metadata,
    )
    return redact_trace(trace).validate()
