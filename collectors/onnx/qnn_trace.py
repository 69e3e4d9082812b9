"""QNN's per-node profile (the HTP backend, `profiling_level=detailed`) as a `Trace`.

QNN's profile CSV (what the QNN EP writes at `profiling_file_path`) has the columns `Msg
Timestamp, Message, Time, Unit of Measurement, Timing Source, Event Level, Event Identifier`.
Per execute it writes `Accelerator (execute) time (cycles)` (the graph's HTP cycles), then one
`NODE` row per QNN op, `<qnn op name>:OpId_<n> (cycles)` (cycles; they sum to the graph's), then
the host-side `Accelerator (execute) time` and `QNN (execute) time` (microseconds of the host that
runs the simulator, not of the HTP). `FINALIZE` rows (graph preparation) come once, first.

QNN names an op after the ONNX node it came from (`node_conv2d`, plus `_token_<k>` when it made
several); ops QNN inserts itself (`Transpose_token_4`: NCHW <-> NHWC layout) and the graph's
`Input`/`Output` have no ONNX node. perf's file (format perf.qnn_profile, collectors/onnx/qnn.py)
holds the CSV, how many executes were warm-up (left out: the simulator's first counts its cold
start) and, per ONNX node, its op, module path and input shapes/dtypes; a bare CSV reads
too, without them.

Into the Trace: the HTP is device 'npu0' of rank 0 (one in-order queue, track rank0/npu0/htp).
Runs follow each other on the HTP's clock: run k starts where run k-1's cycles end; its nodes run
one after another in the CSV's order. Cycles -> ns at HTP_CLOCK_HZ (see below), ns = cycles * 1e9 /
clock. Per run: annotation `ProfilerStep#k` on the host. Per NODE row: a `kernel` named
`onnx::<Op>` (mapped) or `qnn::<name>` (QNN's own op). A mapped kernel is launched by a host op of
the same name, interval, shapes and dtypes (QNN executes the whole graph as one call; this host view
is what lets the roofline cost the node and the `nn.Module: <name>` frames carry its module path,
as in a Kineto trace). A node unit quantized by QDQ records its inputs' integer dtype: the HTP
runs it in int8.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from collectors.onnx.ort_trace import _conv_concrete, _module_frames, _tensor_types, build_trace
from profiler.model.errors import InputError
from profiler.model.schema import Kind
from profiler.model.trace import Trace

#: Hexagon HTP v73 clock, ASSUMED: Qualcomm publishes no NPU clock for Snapdragon X Elite. 1 GHz
#: keeps cycles readable as ns; every kernel's `cycles` stays in the metadata's per-run totals, and
#: the preset (snapdragon-x-elite-htp.yaml) states the same assumption.
HTP_CLOCK_HZ = 1.0e9
HEADER = ("Msg Timestamp", "Message", "Time", "Unit of Measurement", "Timing Source", "Event Level", "Event Identifier")
RUN_START = "Accelerator (execute) time (cycles)"
DEVICE = "npu0"
_TOKEN = re.compile(r"_token_\d+$")  # QNN's suffix when one ONNX node became several QNN ops
_NODE = re.compile(r"^(?P<name>.*?)(?::OpId_\d+| OpId_\d+)? \(cycles\)$")


def node_table(model: Any) -> dict[str, dict[str, Any]]:
    """Per ONNX node (an onnx.ModelProto's): op, module_path, input_type_shape (ORT's spelling:
    [{dtype: shape}]) and, for Conv, concrete (ort_trace._conv_concrete). A node without the
    exporter's scopes (the quantizer's Q/DQ nodes) takes the module of its first input's producer;
    an input written by a DequantizeLinear records the quantized tensor's dtype."""
    import onnx

    from collectors.onnx.export import SCOPES_KEY, module_of

    model = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    types = _tensor_types(graph)
    producer = {o: n for n in graph.node for o in n.output}
    modules: dict[str, str] = {}
    out: dict[str, dict[str, Any]] = {}
    for n in graph.node:
        src = producer.get(n.input[0]) if n.input else None
        scoped = any(p.key == SCOPES_KEY for p in n.metadata_props)
        modules[n.name] = module_of(n) if scoped or src is None else modules.get(src.name, "")
        shapes = []
        for i in n.input:
            if not i or i not in types:
                continue
            ((dt, shape),) = types[i].items()
            p = producer.get(i)
            if p is not None and p.op_type == "DequantizeLinear" and p.input[0] in types:
                dt = next(iter(types[p.input[0]]))
            shapes.append({dt: shape})
        entry: dict[str, Any] = {"op": n.op_type, "module_path": modules[n.name], "input_type_shape": shapes}
        if n.op_type == "Conv":
            entry["concrete"] = _conv_concrete(n)
        out[n.name] = entry
    return out


def is_qnn_profile(path: Path) -> bool:
    """perf's perf.qnn_profile JSON, or QNN's profile CSV itself (by the head of a regular file)."""
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return head.startswith(b"Msg Timestamp,Message,Time") or (
        head.lstrip().startswith(b"{") and b'"perf.qnn_profile"' in head
    )


def load_qnn_profile(path: str | Path, max_bytes: int | None = None) -> Trace:
    """The Trace of a QNN HTP profile (see the module docstring); at most `max_bytes` read."""
    from profiler.model.files import read_bounded

    path = Path(path)
    try:
        text = read_bounded(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "not a QNN profile: not UTF-8 text") from None
    nodes: dict[str, dict[str, Any]] = {}
    arch, warmup = "", 0
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
            text, nodes, arch = str(doc["csv"]), dict(doc.get("nodes") or {}), str(doc.get("htp_arch", ""))
            warmup = int(doc.get("warmup", 0))
        except (ValueError, KeyError, TypeError) as err:
            raise InputError(path, f"not a readable perf.qnn_profile: {type(err).__name__} {err}") from None
    runs = _runs(list(csv.reader(io.StringIO(text))), path)
    if warmup >= len(runs):
        raise InputError(path, f"{len(runs)} execute(s) recorded, all of them the {warmup} warm-up run(s)")
    runs = runs[warmup:]
    rows, steps, totals = _events(runs, nodes)
    devices = [{"rank": 0, "device": DEVICE, "name": f"Qualcomm Hexagon HTP v{arch or '?'} (QNN x86 simulator)"}]
    metadata = {
        "files": [str(path)],
        "format": "qnn-htp",
        "framework": "QNN HTP backend (onnxruntime-qnn x86 simulator), detailed profile",
        "htp_arch": arch,
        "clock_hz": HTP_CLOCK_HZ,
        "clock_note": "ASSUMED HTP clock (Qualcomm publishes none): ns = cycles * 1e9 / clock_hz",
        "run_cycles": totals,
        "warmup_runs_dropped": warmup,
    }
    return build_trace(rows, steps, devices, metadata)


def _runs(table: list[list[str]], path: Path) -> list[tuple[int, list[tuple[str, int]]]]:
    """Per execute: (the graph's cycles, [(QNN op name, cycles)] in order)."""
    if not table or tuple(c.strip() for c in table[0][: len(HEADER)]) != HEADER:
        raise InputError(path, f"not a QNN profile CSV: the header is not {', '.join(HEADER[:3])}...")
    runs: list[tuple[int, list[tuple[str, int]]]] = []
    for line, row in enumerate(table[1:], start=2):
        if len(row) < len(HEADER):
            continue
        message, value, unit, ident = row[1].strip(), row[2].strip(), row[3].strip(), row[6].strip()
        if unit != "CYCLES" or (ident != RUN_START and message != "NODE"):
            continue
        try:
            cycles = int(value)
        except ValueError:
            raise InputError(path, f"line {line}: cycles {value!r} is not an integer") from None
        if cycles < 0:
            raise InputError(path, f"line {line}: negative cycles {cycles}")
        if ident == RUN_START:
            runs.append((cycles, []))
            continue
        if not runs:
            raise InputError(path, f"line {line}: a NODE row before any '{RUN_START}' row")
        m = _NODE.match(ident)
        runs[-1][1].append((m.group("name") if m else ident, cycles))
    if not any(nodes for _, nodes in runs):
        raise InputError(path, "a QNN profile without NODE rows: profile with profiling_level=detailed")
    return runs


def _onnx_node(qnn_name: str, nodes: dict[str, dict[str, Any]]) -> str | None:
    """The ONNX node a QNN op came from: its name, or its name less QNN's `_token_<k>` suffix."""
    for cand in (qnn_name, _TOKEN.sub("", qnn_name)):
        if cand in nodes:
            return cand
    return None


def _events(
    runs: list[tuple[int, list[tuple[str, int]]]], nodes: dict[str, dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[tuple[int, int]], list[int]]:
    from collectors.onnx.ort_trace import _shapes

    ns = 1e9 / HTP_CLOCK_HZ
    rows: list[dict[str, Any]] = []
    steps: list[tuple[int, int]] = []
    totals: list[int] = []
    cursor = 0  # cycles since the first run began
    for k, (graph_cycles, ops) in enumerate(runs):
        run_cycles = max(graph_cycles, sum(c for _, c in ops))
        a, b = round(cursor * ns), round((cursor + run_cycles) * ns)
        steps.append((a, b))
        totals.append(graph_cycles)
        host = {"thread": 0, "source": "simulator", "cat": "qnn"}
        rows.append({**host, "name": f"ProfilerStep#{k}", "kind": Kind.ANNOTATION.value, "ts": a, "dur": b - a})
        at = cursor
        for qnn_name, cycles in ops:
            ts, dur = round(at * ns), round(cycles * ns)
            at += cycles
            onnx_name = _onnx_node(qnn_name, nodes)
            info = nodes.get(onnx_name or "", {})
            kernel = {
                "name": f"onnx::{info['op']}" if info else "qnn::" + _TOKEN.sub("", qnn_name),
                "kind": Kind.KERNEL.value,
                "cat": "qnn",
                "ts": ts,
                "dur": dur,
                "device": DEVICE,
                "track": f"rank0/{DEVICE}/htp",
                "stream": 0,
                "source": "simulator",
            }
            rows.append(kernel)
            if info:
                shapes, dtypes = _shapes(info.get("input_type_shape"))
                concrete = info.get("concrete")
                op = {
                    **host,
                    "name": kernel["name"],
                    "kind": Kind.OP.value,
                    "ts": ts,
                    "dur": dur,
                    "shapes": json.dumps(shapes, separators=(",", ":")) if shapes else "",
                    "dtypes": json.dumps(dtypes) if dtypes else "",
                    "concrete": json.dumps(concrete) if concrete else "",
                    "_module": str(info.get("module_path", "")),
                    "_kernel": kernel,
                }
                rows.append(op)
        cursor += run_cycles
    rows += _module_frames([r for r in rows if r.get("_module")])
    return rows, steps, totals
