"""The ONNX Runtime CPU collector (collectors/onnx/ort_trace.py): its profile as a Trace that the
roofline costs (analysis/cost/onnx.py), with module paths, through perf analyze and perf export."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from analysis.cost import op_cost  # noqa: E402
from collectors.onnx.ort_trace import load_ort_profile, profile_ort  # noqa: E402
from profiler.api import analyze, load_trace  # noqa: E402
from profiler.api.deploy import export_model  # noqa: E402
from profiler.cli import app  # noqa: E402
from tests.deploy_models import convnet  # noqa: E402

RUNS = 3
X = (2, 3, 8, 8)


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    d = tmp_path_factory.mktemp("ort")
    x = torch.randn(*X)
    path = export_model(convnet(), (x,), d / "convnet.onnx")
    return profile_ort(path, (x.numpy(),), d / "convnet.ort.json", runs=RUNS)


def flops_of(module, x):
    with FlopCounterMode(display=False) as fc:
        module(x)
    return fc.get_total_flops()


def test_node_events_costed_as_flop_counter(profile):
    t = load_ort_profile(profile)
    ev = t.events
    m = convnet()
    x = torch.randn(*X)
    conv_flops = flops_of(m.conv, x)  # 2 * 2*8*4*4 * 3*3*3 = 13824
    fc_flops = flops_of(m.fc, torch.randn(2, 128))  # 2 * 2*128*10 = 5120
    assert (conv_flops, fc_flops) == (13824, 5120)
    for name, want in (("onnx::Conv", conv_flops), ("onnx::Gemm", fc_flops)):
        rows = ev[ev["name"] == name]
        assert len(rows) == RUNS
        r = rows.iloc[0]
        c = op_cost(
            name, json.loads(r["shapes"]), json.loads(r["dtypes"]), json.loads(r["concrete"]) if r["concrete"] else None
        )
        assert c is not None and c.flops == want


def test_steps_and_module_paths(profile):
    t = load_trace(profile)  # recognised as an ORT profile by the facade
    assert t.metadata["format"] == "onnxruntime"
    ev = t.events
    steps = ev[ev["name"].astype(str).str.startswith("ProfilerStep#")]
    assert len(steps) == RUNS
    conv = ev[ev["name"] == "onnx::Conv"].iloc[0]
    parent = ev[ev["id"] == conv["parent_id"]].iloc[0]
    assert parent["name"] == "nn.Module: conv" and parent["kind"] == "python"
    a = analyze(t, sections=("modules",))
    mods = a.modules.set_index("path")
    assert set(mods.index) == {"conv", "act", "fc"}
    assert mods.loc["conv", "flops"] == RUNS * 13824 and mods.loc["conv", "calls"] == RUNS


def test_analyze_and_perfetto_export_cli(profile, tmp_path):
    r = CliRunner().invoke(app, ["analyze", str(profile), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    names = {o["name"] for o in doc["ops"]}
    assert {"onnx::Conv", "onnx::Gemm", "onnx::Relu"} <= names
    out = tmp_path / "t.pftrace"
    r = CliRunner().invoke(app, ["export", str(profile), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0


def test_not_a_profile_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('[{"cat": "Session", "name": 3')
    with pytest.raises(Exception) as e:
        load_ort_profile(bad)
    assert str(bad) in str(e.value) and "ONNX Runtime profile" in str(e.value)
    np.testing.assert_equal(bad.read_text(), '[{"cat": "Session", "name": 3')  # never modified


def test_perf_profile_backend_onnxruntime(tmp_path):
    out = tmp_path / "cn.json"
    args = [
        "profile",
        "--model",
        "tests.deploy_models:convnet",
        "--input",
        "2x3x8x8",
        "--backend",
        "onnxruntime",
        "-o",
        str(out),
        "--json",
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    conv = [o for o in doc["ops"] if o["name"] == "onnx::Conv"]
    assert conv and conv[0]["count"] == 3  # three runs, one Conv each
    r = CliRunner().invoke(app, ["profile", "--model", "tests.deploy_models:convnet", "--backend", "tvm"])
    assert r.exit_code == 2 and "--backend tvm" in r.output


def test_dashboard_reads_it(profile):
    from dashboard import views
    from dashboard.store import TraceStore

    store = TraceStore()
    try:
        tid = store.add_path(profile)
        ops = views.ops_for(store, tid, None)
        conv = ops[ops["name"] == "onnx::Conv"]
        assert len(conv) == 1 and conv["count"].iloc[0] == RUNS
        assert conv["flops_effective"].iloc[0] == RUNS * 13824  # the op table sums its calls
        assert views.timeline_for(store, tid) is not None
    finally:
        store.close()
