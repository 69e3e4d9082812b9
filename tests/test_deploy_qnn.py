"""The QNN HTP simulator collector (collectors/onnx/qnn.py runs it, qnn_trace.py reads its
per-node cycles): device events on the snapdragon-x-elite-htp preset with module paths, through
perf analyze, perf export and the dashboard; a node the HTP lacks is one line, exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime_qnn")
pytest.importorskip("onnxscript")

import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from collectors.onnx.qnn_trace import HTP_CLOCK_HZ, load_qnn_profile  # noqa: E402
from profiler.api import analyze, load_trace  # noqa: E402
from profiler.cli import app  # noqa: E402
from profiler.model.errors import InputError  # noqa: E402
from tests.deploy_models import convnet  # noqa: E402

RUNS = 3
X = (2, 3, 8, 8)
HEADER = "Msg Timestamp,Message,Time,Unit of Measurement,Timing Source,Event Level,Event Identifier\n"


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    from collectors.onnx.precision import random_calibration, to_precision
    from collectors.onnx.qnn import profile_qnn
    from profiler.api.deploy import export_model

    d = tmp_path_factory.mktemp("qnn")
    x = torch.randn(*X)
    fp32 = export_model(convnet(), (x,), d / "convnet.onnx")
    qdq = to_precision(fp32, "int8-qnn", d / "convnet.qdq.onnx", random_calibration([(X, np.float32)]))
    return profile_qnn(qdq, (x.numpy(),), d / "convnet.qnn.json", runs=RUNS)


def test_node_cycles_become_device_events_with_module_paths(profile):
    t = load_trace(profile)  # recognised as a QNN profile by the facade
    assert t.metadata["format"] == "qnn-htp" and t.metadata["htp_arch"] == "73"
    ev = t.events
    kernels = ev[ev["kind"] == "kernel"]
    assert set(kernels["device"]) == {"npu0"} and set(kernels["track"]) == {"rank0/npu0/htp"}
    # per run, the NODE rows' cycles add up to QNN's own 'Accelerator (execute) time (cycles)'
    # row (an independent total in the CSV), and ns = cycles * 1e9 / clock
    ns_per_cycle = 1e9 / HTP_CLOCK_HZ
    for k, total in enumerate(t.metadata["run_cycles"]):
        run = kernels[kernels["step"] == k]
        assert abs(run["dur"].sum() - total * ns_per_cycle) <= len(run)  # rounding: <= 1 ns a node
    assert len(t.metadata["run_cycles"]) == RUNS  # the warm-up execute is left out
    conv = ev[(ev["name"] == "onnx::Conv") & (ev["kind"] == "kernel")].iloc[0]
    op = ev[ev["id"] == conv["op_id"]].iloc[0]  # the host view of the node launched it
    assert op["name"] == "onnx::Conv" and op["kind"] == "op"
    assert json.loads(op["dtypes"])[:2] == ["unsigned char", "unsigned char"]  # QDQ: the HTP runs it in uint8
    frame = ev[ev["id"] == op["parent_id"]].iloc[0]
    assert frame["name"] == "nn.Module: conv"
    a = analyze(t, sections=("modules", "roofline"))
    mods = a.modules.set_index("path")
    assert {"conv", "fc"} <= set(mods.index)
    # 2 * 2*8*4*4 * 3*3*3 = 13824 per Conv call (as tests/test_deploy_ort_trace.py, flop_counter)
    assert mods.loc["conv", "flops"] == RUNS * 13824


def test_device_floored_on_the_htp_preset(profile):
    from profiler.api.hardware import spec_resolver

    t = load_trace(profile)
    spec = spec_resolver(t)(0, "npu0")
    assert spec is not None and spec.name == "snapdragon-x-elite-htp"
    assert spec.peak_flops["matrix"]["int8"] == 45e12  # Qualcomm's published 45 TOPS


def test_analyze_export_dashboard(profile, tmp_path):
    r = CliRunner().invoke(app, ["analyze", str(profile), "--json"])
    assert r.exit_code == 0, r.output
    names = {o["name"] for o in json.loads(r.stdout)["ops"]}
    assert {"onnx::Conv", "onnx::Gemm", "onnx::QuantizeLinear"} <= names
    out = tmp_path / "t.pftrace"
    r = CliRunner().invoke(app, ["export", str(profile), "-o", str(out)])
    assert r.exit_code == 0 and out.stat().st_size > 0, r.output
    from dashboard import views
    from dashboard.store import TraceStore

    store = TraceStore()
    try:
        tid = store.add_path(profile)
        ops = views.ops_for(store, tid, None)
        assert ops[ops["name"] == "onnx::Conv"]["count"].iloc[0] == RUNS
        assert views.timeline_for(store, tid) is not None
    finally:
        store.close()


def test_bare_csv_by_hand(tmp_path):
    """A QNN CSV written by hand: two executes; QNN's own ops (`_token_k`, Input) keep QNN's names."""
    p = tmp_path / "qnn.csv"
    p.write_text(
        HEADER + "0,FINALIZE,900,US,BACKEND,ROOT,QNN (finalize) time\n"
        "0,BACKEND,300,CYCLES,BACKEND,ROOT,Accelerator (execute) time (cycles)\n"
        "0,NODE,0,CYCLES,BACKEND,SUB-EVENT,Input OpId_2 (cycles)\n"
        "0,NODE,100,CYCLES,BACKEND,SUB-EVENT,Transpose_token_4:OpId_18 (cycles)\n"
        "0,NODE,200,CYCLES,BACKEND,SUB-EVENT,node_conv2d_token_1:OpId_26 (cycles)\n"
        "0,BACKEND,5,US,BACKEND,ROOT,Accelerator (execute) time\n"
        "0,BACKEND,400,CYCLES,BACKEND,ROOT,Accelerator (execute) time (cycles)\n"
        "0,NODE,150,CYCLES,BACKEND,SUB-EVENT,Transpose_token_4:OpId_18 (cycles)\n"
        "0,NODE,250,CYCLES,BACKEND,SUB-EVENT,node_conv2d_token_1:OpId_26 (cycles)\n"
    )
    t = load_qnn_profile(p)
    k = t.events[t.events["kind"] == "kernel"].sort_values(["ts", "dur"])
    # run 0: Input 0 + Transpose 100 + conv 200 = 300 cycles; run 1 starts at cycle 300
    assert list(k["name"]) == [
        "qnn::Input",
        "qnn::Transpose",
        "qnn::node_conv2d",
        "qnn::Transpose",
        "qnn::node_conv2d",
    ]
    assert list(k["ts"]) == [0, 0, 100, 300, 450] and list(k["dur"]) == [0, 100, 200, 150, 250]
    assert list(k["step"]) == [0, 0, 0, 1, 1]
    # the perf file maps node_conv2d_token_1 back to its ONNX node and module
    doc = {"format": "perf.qnn_profile", "htp_arch": "73", "warmup": 1, "csv": p.read_text()}
    doc["nodes"] = {"node_conv2d": {"op": "Conv", "module_path": "block.conv", "input_type_shape": []}}
    j = tmp_path / "qnn.json"
    j.write_text(json.dumps(doc))
    t = load_trace(j)
    ev = t.events
    k = ev[ev["kind"] == "kernel"]
    assert list(k["ts"]) == [0, 150] and list(k["name"]) == ["qnn::Transpose", "onnx::Conv"]  # run 0 was warm-up
    frames = set(ev.loc[ev["kind"] == "python", "name"])
    assert frames == {"nn.Module: block", "nn.Module: conv"}


@pytest.mark.parametrize(
    "body,problem",
    [
        ("0,NODE,5,CYCLES,BACKEND,SUB-EVENT,a:OpId_1 (cycles)\n", "before any"),
        ("0,BACKEND,5,CYCLES,BACKEND,ROOT,Accelerator (execute) time (cycles)\n", "profiling_level=detailed"),
        (
            "0,BACKEND,5,CYCLES,BACKEND,ROOT,Accelerator (execute) time (cycles)\n0,NODE,x,CYCLES,B,S,a (cycles)\n",
            "not an integer",
        ),
    ],
)
def test_bad_csv_one_line(tmp_path, body, problem):
    p = tmp_path / "bad.csv"
    p.write_text(HEADER + body)
    with pytest.raises(InputError) as e:
        load_qnn_profile(p)
    assert problem in str(e.value) and str(p) in str(e.value)
    assert p.read_text() == HEADER + body  # never modified


def test_op_the_htp_lacks_is_one_line_exit_2(tmp_path):
    args = ["profile", "--model", "tests.deploy_models:determinant", "--input", "2x3x3", "--backend", "qnn-sim"]
    r = CliRunner().invoke(app, [*args, "--precision", "fp32", "-o", str(tmp_path / "d.json")])
    assert r.exit_code == 2
    assert "the QNN HTP cannot run 1 node(s):" in r.output and "(Det)" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "d.json").exists()


def test_numerics_on_the_simulator_agree_with_the_qdq_reference():
    """qnn-sim runs the int8-qnn QDQ model on the HTP; ONNX Runtime's CPU EP runs the same model
    as fake quantization (the QDQ format's reference semantics): their output errors against eager
    fp32 agree within 0.01 (measured: 0.1205 and 0.1205 on tests.deploy_models:mlp, 4x16)."""
    from profiler.api.deploy import numerics_diff

    sim = numerics_diff("tests.deploy_models:mlp", ["4x16"], "qnn-sim")
    ref = numerics_diff("tests.deploy_models:mlp", ["4x16"], "onnxruntime:int8-qnn")
    assert sim.candidate == "qnn-sim:int8-qnn"
    assert [x.name for x in sim.layers] == [x.name for x in ref.layers]
    assert abs(sim.output.rel_error - ref.output.rel_error) < 0.01
    assert sim.output.rel_error > 1e-3  # it is quantized: not the fp32 graph
