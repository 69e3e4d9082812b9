"""`perf compile`: the pass table, the JSON contract, --check and --dump-ir on a built-in
workload; bad input (a bad hardware YAML, an unknown model, a model without inputs) one line, exit 2."""

from __future__ import annotations

import json
import sys
import textwrap

from typer.testing import CliRunner

from accelerator.compiler.mlir import parse_mlir, print_module
from accelerator.hardware import PRESETS_DIR
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
    names = ["capture", "decompose", "precision", "legalize", "partition", "fusion", "tiling", "allocate", "schedule"]
    assert [p["name"] for p in doc["passes"]] == names
    assert [(p["ops_before"], p["ops_after"]) for p in doc["passes"]] == [(0, 3), (3, 5), (5, 11)] + [(11, 11)] * 6
    assert [p["kernels_after"] for p in doc["passes"]] == [0, 0, 0, 0, 0, 2, 2, 2, 2]
    # int8 MLP, 11 ops -> 2 kernels: fc1 = weight permute, quantize x, qmm, dequantize, bias add,
    # GELU and fc2's quantize of the GELU (epilogue); fc2 = weight permute, qmm, dequantize, bias add
    assert [(k["unit"], k["fused_ops"]) for k in doc["kernels"]] == [
        (
            "matrix",
            [
                "aten.permute.default",
                "npu.quantize",
                "npu.qmm",
                "npu.dequantize",
                "aten.add.Tensor",
                "aten.gelu.default",
                "npu.quantize",
            ],
        ),
        ("matrix", ["aten.permute.default", "npu.qmm", "npu.dequantize", "aten.add.Tensor"]),
    ]
    # fc1 tile on 32x32 arrays: M=4 (shorter than the array: not padded), N=64, K=32; local bytes
    # (tiling.py) with a = 4 (x is loaded fp32, quantized on chip), b = 1, acc = 4 (int32),
    # out = 1 (int8 quantized GELU): 2*(4*32*4 + 32*64*1) + 4*64*4 + 2*4*64*1 + bias 2*64*4
    # + weight scales 2*64*4 = 5120 + 1024 + 512 + 512 + 512 = 7680
    assert doc["kernels"][0]["tile"] == {"m": 4, "n": 64, "k": 32} and doc["kernels"][0]["local_bytes"] == 7680
    # fc1 hands fc2 its quantized GELU, 4 x 64 int8 = 256 B, kept on chip in shared memory
    assert doc["kernels"][0]["placement"] == [{"value": "addmm_1_xq", "level": "shared", "offset": 0, "bytes": 256}]
    assert doc["host"] == []
    assert doc["check"]["max_rel_error"] <= 0.05 and {x["name"] for x in doc["check"]["layers"]} == {
        "fc1",
        "act",
        "fc2",
    }
    mem = doc["memory"]  # edge-npu: 512 KiB local, 4 MiB shared, 8 GiB of DRAM
    assert mem["capacity"] == {"local": 524288, "shared": 4194304, "hbm": 8589934592}
    placed = [p for k in doc["kernels"] for p in k["placement"] or []]
    assert mem["peak_onchip_bytes"] == max(p["offset"] + p["bytes"] for p in placed if p["level"] == "shared")
    # fc2's kernel (named after its matmul) ends in the output: the host reads it from HBM
    out = next(k for k in doc["kernels"] if k["name"] == "addmm_1_acc")
    assert out["placement"] == [
        {"value": "addmm_1", "level": "hbm", "offset": out["placement"][0]["offset"], "bytes": 256}
    ]
    moves = doc["transfers"]
    assert moves["by_route"]["local->hbm"] == 4 * 16 * 4 and moves["total_bytes"] == sum(moves["by_route"].values())
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [f"{i:02d}-{n}.mlir" for i, n in enumerate(names)]
    text = (tmp_path / "06-tiling.mlir").read_text()
    assert print_module(parse_mlir(text)) == text and text.count('"npu.qmm"') == 2
    assert text.count('kernel = "addmm_acc"') == 7 and 'tile = "m=4 n=64 k=32"' in text


def test_compile_text_table():
    r = run("compile", "--model", "mlp", "--accel", "datacenter-npu", "--precision", "bf16")
    assert r.exit_code == 0, r.output
    assert "mlp on datacenter-npu, precision bf16" in r.stdout
    # bf16 MLP, 7 ops: 2 weight permutes, 2 addmm; cast of x to bf16, GELU, cast of the output
    # to fp32. Fused: fc1 = permute + cast + addmm + GELU, fc2 = permute + addmm + cast
    assert "legalize" in r.stdout and "kernels: 2 (matrix 2) running 7 ops" in r.stdout
    # datacenter-npu: 128 x 128 arrays, every dim (M=4, N=64, K=32) within one tile
    assert "permute + x_to_bfloat16 + addmm + gelu" in r.stdout and "m=4 n=64 k=32" in r.stdout
    assert "memory: peak on-chip " in r.stdout and " of 128.0 MiB shared, peak HBM " in r.stdout


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
    small = tmp_path / "small.yaml"  # edge-npu with 10000 B of DRAM: the fp32 MLP's weights alone are 12288 B
    small.write_text(
        (PRESETS_DIR / "edge-npu.yaml").read_text().replace("capacity_bytes: 8589934592", "capacity_bytes: 10000")
    )
    r = run("compile", "mlp", "--accel", str(small))
    assert r.exit_code == 2 and r.stderr.strip().count("\n") == 0
    assert "buffer p_fc2_weight (4096 B, live over kernels 0..1) does not fit in edge-npu's HBM of 10000 B" in r.stderr


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
    kernels = json.loads(r.stdout)["kernels"]
    mm = [next(t for t in k["fused_ops"] if t in ("npu.qmm", "aten.addmm.default")) for k in kernels]
    # fc1 an int8 qmm on the matrix unit; fc2 an fp32 addmm, on the vector unit (no fp32 matrix on the edge)
    assert [(k["module"], t, k["unit"]) for k, t in zip(kernels, mm)] == [
        ("fc1", "npu.qmm", "matrix"),
        ("fc2", "aten.addmm.default", "vector"),
    ]
    r = run("compile", "mlp", "--accel", "edge-npu", "--precision-override", "fc2")
    assert r.exit_code == 2 and "--precision-override fc2: expected MODULE=POLICY" in r.stderr


def test_the_four_compile_errors_are_one_line_naming_where_exit_2(tmp_path, monkeypatch):
    # issue 12's must-hold: an unsupported op, a plan naming a node that does not exist, a tile
    # that does not fit, a model torch.export rejects: one line each, naming where, exit 2
    (tmp_path / "badmodels.py").write_text(
        textwrap.dedent(
            """
            import torch
            class Sorts(torch.nn.Module):
                example_inputs = (torch.randn(2, 8),)
                def forward(self, x):
                    return torch.sort(x, dim=-1).values * 2
            class Branches(torch.nn.Module):
                example_inputs = (torch.randn(3),)
                def forward(self, x):
                    if x.sum() > 0:
                        return x * 2
                    return x
            def sorts():
                return Sorts()
            def branches():
                return Branches()
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def one_line(r, *parts):
        assert r.exit_code == 2 and r.stderr.strip().count("\n") == 0, r.output
        for p in parts:
            assert p in r.stderr, r.stderr

    r = run("compile", "badmodels:sorts", "--accel", "edge-npu", "--no-host-fallback")
    one_line(r, "badmodels.py:6: aten.sort.default in", "no unit of edge-npu runs it and host fallback is off")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"kernels": [{"ops": ["addmm", "nope"]}]}))
    r = run("compile", "mlp", "--accel", "edge-npu", "--plan", str(plan))
    one_line(r, f"{plan}: the plan names op 'nope', which MLP does not have")
    # a 4096 x 4096 x 4096 fp32 tile needs far more than the edge NPU's 512 KiB of local memory
    plan.write_text(json.dumps({"kernels": [], "tiles": {"addmm": {"m": 4096, "n": 4096, "k": 4096}}}))
    r = run("compile", "mlp", "--accel", "edge-npu", "--plan", str(plan))
    one_line(r, f"{plan}: kernel addmm: tile m=4096 n=4096 k=4096 needs", "B of local memory, over the 524288 B")
    r = run("compile", "badmodels:branches", "--accel", "edge-npu")
    one_line(r, "Branches: torch.export rejected the model: ", "(at badmodels.py:10)")
    sys.modules.pop("badmodels", None)
