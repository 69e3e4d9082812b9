"""`perf compile`: the pass table, the JSON contract, --check and --dump-ir on a built-in
workload; bad input (a bad hardware YAML, an unknown model, a model without inputs) one line, exit 2."""

from __future__ import annotations

import json
import sys
import textwrap

from typer.testing import CliRunner

from accelerator.compiler.mlir import parse_mlir, print_module
from profiler.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_compile_json_with_check_and_ir(tmp_path):
    r = run(
        "compile", "mlp", "--accel", "edge-npu", "--precision", "int8", "--check", "--json", "--dump-ir", str(tmp_path)
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [p["name"] for p in doc["passes"]] == ["capture", "decompose", "precision", "legalize", "partition"]
    assert [(p["ops_before"], p["ops_after"]) for p in doc["passes"]] == [(0, 3), (3, 5), (5, 11), (11, 11), (11, 11)]
    # int8 MLP: 2 qmm on the matrix unit; (quantize, dequantize, bias add) x 2 + GELU = 7 on the vector unit
    assert sorted((k["unit"], k["fused_ops"][0]) for k in doc["kernels"] if k["unit"] == "matrix") == [
        ("matrix", "npu.qmm"),
        ("matrix", "npu.qmm"),
    ]
    assert len(doc["kernels"]) == 9 and doc["host"] == []
    assert doc["check"]["max_rel_error"] <= 0.05 and {x["name"] for x in doc["check"]["layers"]} == {
        "fc1",
        "act",
        "fc2",
    }
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [
        "00-capture.mlir",
        "01-decompose.mlir",
        "02-precision.mlir",
        "03-legalize.mlir",
        "04-partition.mlir",
    ]
    text = (tmp_path / "03-legalize.mlir").read_text()
    assert print_module(parse_mlir(text)) == text and text.count('"npu.qmm"') == 2


def test_compile_text_table():
    r = run("compile", "--model", "mlp", "--accel", "datacenter-npu", "--precision", "bf16")
    assert r.exit_code == 0, r.output
    assert "mlp on datacenter-npu, precision bf16" in r.stdout
    # bf16 MLP: 2 addmm (matrix); cast of x to bf16, GELU, cast of the output to fp32 (vector);
    # weights and biases are stored bf16, GELU of a bf16 addmm is bf16 already (no cast)
    assert "legalize" in r.stdout and "kernels: 5 (matrix 2, vector 3), unfused" in r.stdout


def test_user_factory_with_example_inputs(tmp_path, monkeypatch):
    (tmp_path / "mymodels.py").write_text(
        textwrap.dedent(
            """
            import torch
            class Tiny(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = torch.nn.Linear(8, 4)
                    self.example_inputs = (torch.randn(2, 8),)
                def forward(self, x):
                    return torch.relu(self.fc(x))
            def tiny():
                return Tiny()
            def no_inputs():
                return torch.nn.Linear(8, 4)
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    r = run("compile", "mymodels:tiny", "--accel", "edge-npu", "--check", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["check"]["max_rel_error"] <= 1e-5
    r = run("compile", "mymodels:no_inputs", "--accel", "edge-npu")
    assert r.exit_code == 2
    assert "give --input SHAPE or an example_inputs tuple on the module" in r.stderr
    sys.modules.pop("mymodels", None)


def test_bad_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "npu.yaml"
    bad.write_text("name: x\nchips: {count: 1, topology: single}\n")
    r = run("compile", "mlp", "--accel", str(bad))
    assert r.exit_code == 2 and r.stderr.strip().count("\n") == 0
    assert f"{bad}: invalid accelerator description: chip is missing" in r.stderr
    r = run("compile", "resnet9000", "--accel", "edge-npu")
    assert (
        r.exit_code == 2
        and "resnet9000: not a workload (mlp, resnet, vit, llama, llama2-7b, llama3-8b) nor MODULE:FACTORY" in r.stderr
    )
    r = run("compile", "mlp", "--accel", "edge-npu", "--precision", "fp8")
    assert r.exit_code == 2 and "edge-npu: precision fp8: the matrix unit has no fp8" in r.stderr
    r = run("compile", "mlp")
    assert r.exit_code == 2 and "--accel" in r.stderr


def test_trace_puts_the_passes_on_the_compiler_track(tmp_path):
    from profiler.api import load_trace

    out = tmp_path / "compile.json.gz"
    r = run("compile", "mlp", "--accel", "edge-npu", "--json", "--trace", str(out))
    assert r.exit_code == 0, r.output
    passes = json.loads(r.stdout)["passes"]
    ev = load_trace(out).events
    assert ev["kind"].astype(str).tolist() == ["compile_pass"] * len(passes) and len(passes) >= 4
    assert set(ev["track"].astype(str)) == {"rank0/compiler"}
    assert ev["name"].astype(str).tolist() == [p["name"] for p in passes]
    # back to back from 0, each as long as its wall time (µs with 3 decimals: exact ns)
    assert ev["dur"].tolist() == [p["wall_ns"] for p in passes]
    starts = [sum(p["wall_ns"] for p in passes[:i]) for i in range(len(passes))]
    assert ev["ts"].tolist() == starts
    r = run("compile", "mlp", "--accel", "edge-npu", "--trace", str(out))
    assert r.exit_code == 2 and "already exists; pass --force" in r.stderr


def test_precision_override_per_layer():
    r = run(
        "compile", "mlp", "--accel", "edge-npu", "--precision", "int8", "--precision-override", "fc2=fp32", "--json"
    )
    assert r.exit_code == 0, r.output
    matrix = [k for k in json.loads(r.stdout)["kernels"] if k["fused_ops"][0] in ("npu.qmm", "aten.addmm.default")]
    # fc1 an int8 qmm on the matrix unit; fc2 an fp32 addmm, on the vector unit (no fp32 matrix on the edge)
    assert [(k["module"], k["fused_ops"][0], k["unit"]) for k in matrix] == [
        ("fc1", "npu.qmm", "matrix"),
        ("fc2", "aten.addmm.default", "vector"),
    ]
    r = run("compile", "mlp", "--accel", "edge-npu", "--precision-override", "fc2")
    assert r.exit_code == 2 and "--precision-override fc2: expected MODULE=POLICY" in r.stderr
