"""The TensorRT collector (collectors/onnx/tensorrt.py): trtexec's --exportProfile JSON, written
here by hand in the format trtexec writes (NVIDIA/TensorRT samples/common/sampleReporting.cpp,
exportJSONProfile: [{"count": N}, {"name", "timeMs", "averageMs", "medianMs", "percentage"}...]),
fused layer names mapped back to ONNX nodes and module paths. Running trtexec needs TensorRT and
an NVIDIA GPU: without them `perf profile --backend tensorrt` is one line, exit 2."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("onnxscript")

import onnx  # noqa: E402
import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from collectors.onnx.tensorrt import fused_nodes, load_trtexec_profile, trtexec_available  # noqa: E402
from profiler.api import load_trace  # noqa: E402
from profiler.cli import app  # noqa: E402
from profiler.model.errors import InputError  # noqa: E402
from tests.deploy_models import convnet  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from profiler.api.deploy import export_model

    d = tmp_path_factory.mktemp("trt")
    return onnx.load(str(export_model(convnet(), (torch.randn(2, 3, 8, 8),), d / "convnet.onnx")))


def names(model) -> dict[str, str]:
    return {n.op_type: n.name for n in model.graph.node}


def test_fused_names_as_trtexec_writes_them():
    # names from trtexec profiles in the wild: PWN nests pointwise fusions, '+' joins fused layers
    assert fused_nodes("PWN(PWN(/model.0/act/Sigmoid), /model.0/act/Mul)", set()) == [
        "/model.0/act/Sigmoid",
        "/model.0/act/Mul",
    ]
    assert fused_nodes("Conv_0 + PWN(Clip_3)", set()) == ["Conv_0", "Clip_3"]
    assert fused_nodes("Reformatting CopyNode for Input Tensor 0 to Conv_8", {"Conv_8"}) == ["Conv_8"]


def test_profile_into_one_average_inference(model, tmp_path):
    n = names(model)
    conv, relu, gemm = n["Conv"], n["Relu"], n["Gemm"]
    prof = tmp_path / "p.json"
    prof.write_text(
        json.dumps(
            [
                {"count": 100},
                {
                    "name": f"Reformatting CopyNode for Input Tensor 0 to {conv} + {relu}",
                    "timeMs": 1.0,
                    "averageMs": 0.01,
                    "medianMs": 0.01,
                    "percentage": 10,
                },
                {"name": f"{conv} + {relu}", "timeMs": 5.0, "averageMs": 0.05, "medianMs": 0.05, "percentage": 50},
                {"name": gemm, "timeMs": 4.0, "averageMs": 0.04, "medianMs": 0.04, "percentage": 40},
            ]
        )
    )
    t = load_trtexec_profile(prof, model=model)
    ev = t.events
    dev = ev[ev["device"] == "gpu0"].sort_values("ts")
    # averageMs -> ns back to back: 0.01 ms = 10,000 ns; 0.05 ms; 0.04 ms
    assert list(dev["ts"]) == [0, 10_000, 60_000] and list(dev["dur"]) == [10_000, 50_000, 40_000]
    assert list(dev["kind"]) == ["memcpy", "kernel", "kernel"]
    ops = ev[ev["kind"] == "op"]
    assert set(ops["name"]) == {"onnx::Conv+Relu", "onnx::Gemm"}
    gemm_op = ops[ops["name"] == "onnx::Gemm"].iloc[0]
    assert ev[ev["id"] == gemm_op["parent_id"]].iloc[0]["name"] == "nn.Module: fc"
    k = dev[dev["name"] == gemm].iloc[0]
    assert k["op_id"] == gemm_op["id"]
    assert t.metadata["count"] == 100
    step = ev[ev["name"] == "ProfilerStep#0"].iloc[0]
    assert step["dur"] == 100_000  # the three layers' averages


def test_layer_info_metadata_maps_a_renamed_layer(model, tmp_path):
    n = names(model)
    prof, info = tmp_path / "p.json", tmp_path / "p.layers.json"
    prof.write_text(json.dumps([{"count": 5}, {"name": "myelin_fused_0", "timeMs": 1.0, "averageMs": 0.2}]))
    info.write_text(
        json.dumps(
            {
                "Layers": [
                    {"Name": "myelin_fused_0", "Metadata": f"[ONNX Layer: {n['Conv']}]\x1f[ONNX Layer: {n['Relu']}]"}
                ],
                "Bindings": [],
            }
        )
    )
    t = load_trtexec_profile(prof, info, model)
    assert set(t.events.loc[t.events["kind"] == "op", "name"]) == {"onnx::Conv+Relu"}
    t = load_trace(prof)  # recognised by its {"count"} head; picks p.layers.json up beside it
    assert t.metadata["format"] == "trtexec"


def test_bad_profile_one_line(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('[{"name": "x", "averageMs": 1}]')
    with pytest.raises(InputError) as e:
        load_trtexec_profile(bad)
    assert "exportProfile" in str(e.value) and str(bad) in str(e.value)


def test_perf_profile_backend_tensorrt(tmp_path):
    out = tmp_path / "trt.json"
    args = ["profile", "--model", "tests.deploy_models:convnet", "--input", "2x3x8x8", "--backend", "tensorrt"]
    r = CliRunner().invoke(app, [*args, "-o", str(out), "--json"])
    why = trtexec_available()
    if why is not None:  # no TensorRT or no GPU here: refused in one line, before any export
        assert r.exit_code == 2 and why in r.output and not out.exists()
        return
    assert r.exit_code == 0, r.output
    assert any(o["name"].startswith("onnx::Conv") for o in json.loads(r.stdout)["ops"])


def test_perf_profile_backend_inductor(tmp_path):
    """--backend inductor is the model path under torch.compile (as --compile): the trace holds
    the compiled graph's kernels (Inductor's generated CPU code, 'cpp_fused' / 'graph_' frames)."""
    out = tmp_path / "ind.json.gz"
    args = ["profile", "--model", "tests.deploy_models:mlp", "--input", "4x16", "--backend", "inductor", "-o", str(out)]
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    t = load_trace(out)
    names = " ".join(map(str, t.events["name"].unique()))
    assert "Torch-Compiled Region" in names or "CompiledFunction" in names, names[:500]
    script = tmp_path / "s.py"
    script.write_text("print(1)\n")
    r = CliRunner().invoke(app, ["profile", "--backend", "inductor", str(script)])
    assert r.exit_code == 2 and "--backend inductor profiles a model" in r.output
