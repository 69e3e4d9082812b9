"""Numerical diff and accuracy gate against ONNX Runtime (collectors/onnx, analysis/numerics,
perf diff --numerics, perf gate --accuracy) on the tiny models of tests/deploy_models.py.

Measured on this machine (int8 QDQ, random-normal calibration, 8 batches; inputs seed 1):
unmodified MLP output rel_error 0.029 (SQNR 30.6 dB), worst layer `mid` 0.038 (28.4 dB);
the fragile MLP's `mid` 1.0 (SQNR 0 dB), output 0.64.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from analysis.numerics import layer_error  # noqa: E402
from profiler.api.deploy import diff_onnx, export_model  # noqa: E402
from profiler.cli import app  # noqa: E402
from tests.deploy_models import BATCH, IN, fragile, mlp  # noqa: E402

INT8_BUDGET = 0.05  # output rel_error (SQNR >= 26 dB); measured 0.029 (30.6 dB)


@pytest.fixture(scope="module")
def inputs():
    torch.manual_seed(1)
    return (torch.randn(BATCH, IN),)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, inputs):
    """name -> (model, its fp32 ONNX export): each model exported once for the module."""
    d = tmp_path_factory.mktemp("onnx")
    out = {}
    for f in (mlp, fragile):
        m = f()
        out[f.__name__] = (m, export_model(m, inputs, d / f"{f.__name__}.onnx"))
    return out


def test_layer_error_arithmetic():
    # r = [3, 4], c = [3, 5]: d = [0, 1]; ||r|| = 5, ||c|| = sqrt(34), ||d|| = 1
    e = layer_error("x", "Linear", np.array([3.0, 4.0]), np.array([3.0, 5.0]))
    assert e.rel_error == pytest.approx(1 / 5)
    assert e.max_abs_error == 1.0
    assert e.cosine == pytest.approx((9 + 20) / (5 * math.sqrt(34)))
    assert e.sqnr_db == pytest.approx(20 * math.log10(5))  # = -20 log10(rel_error) = 13.98 dB
    same = layer_error("x", "", np.ones(3), np.ones(3))
    assert same.rel_error == 0.0 and same.sqnr_db == math.inf and same.cosine == pytest.approx(1.0)


def test_module_paths_from_the_export(exported):
    import onnx

    from collectors.onnx.export import module_outputs

    outs = module_outputs(onnx.load(str(exported["mlp"][1])))
    # fc1 is one Gemm; mid a Gemm then a Mul (its output is the Mul's); act1 a Relu
    assert {k: op for k, (_, op) in outs.items()} == {"fc1": "Gemm", "act1": "Relu", "mid": "Mul", "fc2": "Gemm"}


def test_fp32_matches_eager(exported, inputs):
    m, path = exported["mlp"]
    r = diff_onnx(m, inputs, path, "fp32")
    assert [x.name for x in r.layers] == ["fc1", "act1", "mid", "fc2"]  # network order, every leaf
    assert max(x.rel_error for x in r.layers) < 1e-5
    assert r.output.rel_error < 1e-5 and r.first_diverging is None


def test_fp16_within_half_precision(exported, inputs):
    m, path = exported["mlp"]
    r = diff_onnx(m, inputs, path, "fp16")
    # fp16 rounds to 11 significant bits: unit roundoff 2^-11 = 4.9e-4 per value; a few roundings
    # in a row stay within a small multiple of it, and above fp32's (2^-24 = 6e-8).
    assert 1e-6 < r.output.rel_error < 4 * 2**-11
    assert r.first_diverging is None


def test_int8_within_budget_and_no_layer_diverges(exported, inputs):
    m, path = exported["mlp"]
    r = diff_onnx(m, inputs, path, "int8")
    assert r.output.rel_error < INT8_BUDGET
    assert r.output.rel_error > 1e-4  # it is quantized: not the fp32 graph by mistake
    assert r.first_diverging is None
    assert any("random normal" in n for n in r.notes)


def test_planted_fault_is_the_first_diverging_layer(exported, inputs):
    m, path = exported["fragile"]
    assert diff_onnx(m, inputs, path, "fp32").first_diverging is None  # the fault is numerical only
    r = diff_onnx(m, inputs, path, "int8")
    assert r.first_diverging is not None and r.first_diverging.name == "mid"
    assert r.first_diverging.op == "ScaledLinear"
    before = [x for x in r.layers if x.name in ("fc1", "act1")]
    assert before and all(x.rel_error < 0.1 for x in before)
    assert r.growth[0][0] == "mid"


def test_qnn_qdq_config_finds_the_fault_too(exported, inputs):
    # get_qnn_qdq_config: uint8 asymmetric activations, per-channel uint8 weights (measured: mlp
    # output 0.029, 30.8 dB; fragile mid 1.0)
    m, path = exported["mlp"]
    r = diff_onnx(m, inputs, path, "int8-qnn")
    assert 1e-4 < r.output.rel_error < INT8_BUDGET and r.first_diverging is None
    m, path = exported["fragile"]
    r = diff_onnx(m, inputs, path, "int8-qnn")
    assert r.first_diverging is not None and r.first_diverging.name == "mid"
    assert r.notes[0].startswith("int8-qnn calibrated on random normal inputs")


def test_calibration_file_is_used(exported, inputs, tmp_path):
    m, path = exported["mlp"]
    f = tmp_path / "calib.npy"
    np.save(f, inputs[0].numpy()[None])  # one batch: the very inputs compared, so ranges fit them
    r = diff_onnx(m, inputs, path, "int8", calibration=f)
    assert r.notes == (f"int8 calibrated on {f}",)
    assert r.output.rel_error < INT8_BUDGET
    random = diff_onnx(m, inputs, path, "int8")  # the ranges differ, so do the errors
    assert r.output.rel_error != pytest.approx(random.output.rel_error, rel=1e-3)


runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(map(str, args)))


def test_gate_fails_naming_the_planted_layer():
    r = run(
        "gate",
        "--accuracy",
        "0.05",
        "tests.deploy_models:fragile",
        "--candidate",
        "onnxruntime:int8",
        "--input",
        f"{BATCH}x{IN}",
        "--json",
    )
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["passed"] is False and doc["budget"] == 0.05
    assert doc["first_diverging"]["name"] == "mid"
    assert [x["name"] for x in doc["numerics"]["layers"]][-1] == "fc2"


def test_diff_numerics_json_fp32():
    r = run(
        "diff",
        "--numerics",
        "tests.deploy_models:mlp",
        "--candidate",
        "onnxruntime",
        "--input",
        f"{BATCH}x{IN}",
        "--json",
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "perf.numerics" and doc["first_diverging"] is None
    assert [x["name"] for x in doc["layers"]] == ["fc1", "act1", "mid", "fc2"]
    assert set(doc["layers"][0]) == {"name", "op", "rel_error", "max_abs_error", "cosine", "sqnr_db"}


def test_exporter_rejects_model_one_line_exit_2():
    r = run("diff", "--numerics", "tests.deploy_models:unexportable", "--candidate", "onnxruntime", "--input", "4x3")
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "torch.onnx.export (dynamo) rejected the model" in lines[0], r.output


def test_unreadable_calibration_one_line_exit_2(tmp_path):
    bad = tmp_path / "calib.npy"
    bad.write_bytes(b"not numpy")
    r = run(
        "gate",
        "--accuracy",
        "0.05",
        "tests.deploy_models:mlp",
        "--candidate",
        "onnxruntime:int8",
        "--input",
        f"{BATCH}x{IN}",
        "--calibration",
        bad,
    )
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(bad) in lines[0] and "cannot read input batches" in lines[0], r.output


def test_inputs_file_is_compared_on(tmp_path):
    f = tmp_path / "x.pt"
    torch.save([torch.full((2, IN), 0.5)], f)  # one batch of one input, batch 2 (not --input's 4)
    r = run(
        "diff",
        "--numerics",
        "tests.deploy_models:mlp",
        "--candidate",
        "onnxruntime",
        "--inputs",
        f,
        "--input",
        f"{BATCH}x{IN}",
        "--json",
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["notes"][0] == f"compared on the first batch of {f} (2x{IN})"
    assert doc["output"]["rel_error"] < 1e-5


def test_bad_candidate_and_missing_traces_exit_2():
    r = run("diff", "--numerics", "tests.deploy_models:mlp", "--candidate", "tensorrt:int8", "--input", "4x16")
    assert r.exit_code == 2 and "backend 'tensorrt' is not supported yet" in r.output
    r = run("diff", "--numerics", "tests.deploy_models:mlp", "--candidate", "onnxruntime:int4", "--input", "4x16")
    assert r.exit_code == 2 and "precision 'int4'" in r.output
    r = run("diff")  # the trace mode still wants its two traces
    assert r.exit_code == 2 and "give the two traces" in r.output


def test_inductor_candidate_per_layer_from_the_compiled_graph(inputs):
    # the hooks are traced into one Inductor graph (no break: a break would run some layers in
    # eager and the comparison would not be of the compiled kernels)
    from torch._dynamo.utils import counters

    from profiler.api.deploy import diff_inductor

    counters.clear()
    fp32 = diff_inductor(mlp().eval(), inputs, "fp32")
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]
    assert [x.name for x in fp32.layers] == ["fc1", "act1", "mid", "fc2"]
    # Inductor's fp32 GEMMs and fusions reassociate sums: not bit-equal, within 1e-5 normwise
    assert all(x.rel_error <= 1e-5 for x in fp32.layers) and fp32.output.rel_error <= 1e-5
    bf16 = diff_inductor(mlp().eval(), inputs, "bf16")
    # bf16 keeps 8 significant bits: unit roundoff 2^-9 = 0.002 per rounding, a few roundings per
    # layer (input, weights, output): every layer's error is above fp32's and below 3%
    assert all(2e-4 < x.rel_error < 0.03 for x in bf16.layers), [(x.name, x.rel_error) for x in bf16.layers]
    assert bf16.candidate == "inductor:bf16" and bf16.first_diverging is None


def test_inductor_candidate_refuses_int8_one_line():
    r = run("diff", "--numerics", "tests.deploy_models:mlp", "--candidate", "inductor:int8", "--input", f"{BATCH}x{IN}")
    assert r.exit_code == 2 and "inductor runs fp32, bf16, fp16" in r.output and len(r.output.strip().splitlines()) == 1


def test_gate_on_a_user_task_metric():
    # top-1 disagreement over the 4 rows: fp32 ONNX Runtime agrees on every row (0.0, passes a
    # budget of 0); the fragile model at int8 flips the argmax of 1 row of 4 (0.25: fails)
    metric = "tests.deploy_models:top1_disagreement"
    args = ("--candidate", "onnxruntime:int8", "--input", f"{BATCH}x{IN}", "--metric", metric, "--json")
    ok = run("gate", "--accuracy", "0", "tests.deploy_models:mlp", *args[:1], "onnxruntime", *args[2:])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["passed"] is True and doc["value"] == 0.0 and doc["metric"].startswith(metric)
    bad = run("gate", "--accuracy", "0", "tests.deploy_models:fragile", *args)
    doc = json.loads(bad.stdout)
    assert bad.exit_code == 1 and doc["passed"] is False and doc["value"] == 0.25
    missing = run(
        "gate",
        "--accuracy",
        "0",
        "tests.deploy_models:mlp",
        "--candidate",
        "onnxruntime",
        "--metric",
        "tests.deploy_models:nope",
        "--input",
        f"{BATCH}x{IN}",
    )
    assert missing.exit_code == 2 and "--metric tests.deploy_models:nope" in missing.output


def test_accelerator_candidate_per_layer_from_the_functional_mode(inputs):
    # the program compiled for edge-npu, run tile by tile; each layer's value is its module's last
    # op of the eager output's size. fp32: the same fp32 arithmetic (the MLP's K of 16 and 32 fit
    # one tile): within the compiler's fp32 bound 1e-5. bf16: 8 significant bits, every layer
    # above 1e-4 (so the values are the program's, not eager's) and within the bf16 bound 1e-2
    from profiler.api.deploy_accel import diff_accelerator

    fp32 = diff_accelerator(mlp().eval(), inputs, "accelerator:fp32")
    assert [x.name for x in fp32.layers] == ["fc1", "act1", "mid", "fc2"]
    assert all(x.rel_error <= 1e-5 for x in fp32.layers)
    bf16 = diff_accelerator(mlp().eval(), inputs, "accelerator:bf16")
    assert all(1e-4 < x.rel_error < 1e-2 for x in bf16.layers), [(x.name, x.rel_error) for x in bf16.layers]
    assert bf16.candidate == "accelerator:bf16@edge-npu"
    r = run(
        "diff", "--numerics", "tests.deploy_models:mlp", "--candidate", "accelerator:int4", "--input", f"{BATCH}x{IN}"
    )
    assert r.exit_code == 2 and "the accelerator compiles fp32, bf16, int8, fp8" in r.output


def test_eager_candidate_at_half_precision(inputs):
    # fp16 keeps 11 significant bits: unit roundoff 2^-11 = 4.9e-4 per rounding; measured 5.1e-4
    # on the output: above fp32's rounding (1e-6), below a few roundoffs
    from profiler.api.deploy import diff_inductor

    fp16 = diff_inductor(mlp().eval(), inputs, "fp16", compiled=False)
    assert fp16.candidate == "eager:fp16" and 1e-5 < fp16.output.rel_error < 2e-3
