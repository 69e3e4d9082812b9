"""The saved compiled program (accelerator/compiler/saved.py, `perf compile -o`): what the
simulator reads comes back equal, field by field; values JSON cannot hold keep their kind; a bad
file is one line naming it, exit 2."""

from __future__ import annotations

import gzip
import json
import math

import pytest
import torch
import typer
from typer.testing import CliRunner

from accel_programs import decomposed
from accelerator.compiler.pipeline import CompileContext, Pipeline, default_passes
from accelerator.compiler.program import Op, Ref, TensorType
from accelerator.compiler.saved import Opaque, load_program, require_executable, save_program
from accelerator.hardware import load_accel
from profiler.cli import app
from profiler.cli.common import one_line_errors
from profiler.model.errors import InputError

HW = "datacenter-npu"  # 8 chips: 2-chip partitions fit


def full_compile(name: str, policy: str, chips: int):
    """Every pass after decomposition over the shared decomposed workload (capture is the slow part)."""
    passes = [(n, fn) for n, fn in default_passes() if n != "decompose"]
    return Pipeline(passes).run_program(decomposed(name), CompileContext(load_accel(HW), policy, chips=chips))


@pytest.mark.parametrize("chips", [1, 2, 4])
@pytest.mark.parametrize("policy", ["fp32", "bf16"])
@pytest.mark.parametrize("name", ["mlp", "llama"])
def test_round_trip_keeps_every_field_the_simulator_reads(tmp_path, name, policy, chips):
    compiled = full_compile(name, policy, chips)
    p = compiled.program
    # the program is fully compiled: kernels placed and scheduled, split over `chips`
    assert p.kernels and p.placement and p.transfers and p.chips == chips
    assert bool(p.shards) == (chips > 1)
    # the tiny Llama's 2 KV heads on 4 chips: replicated, 2 chips per slice
    assert bool(p.replicas) == (name == "llama" and chips == 4)
    path = tmp_path / ("p.json.gz" if chips == 2 else "p.json")
    save_program(compiled, path, hardware_name=HW, precision=policy, model=name)
    if chips == 2:
        assert path.read_bytes()[:2] == b"\x1f\x8b"  # gzip by the name
    saved = load_program(path)
    q = saved.program
    assert q.name == p.name and q.chips == p.chips and dict(q.shards) == dict(p.shards)
    assert dict(q.replicas) == dict(p.replicas)
    assert q.inputs == p.inputs and q.outputs == p.outputs
    # Op/Kernel equality compares target, args (tuples stay tuples, Refs stay Refs), kwargs, type,
    # module, source and attrs; Placement its live (first, last) tuple; Transfer every field
    assert q.ops == p.ops
    assert q.kernels == p.kernels
    assert dict(q.placement) == dict(p.placement)
    assert q.transfers == p.transfers
    assert q.state == {} and q.exported is None  # no weights, no torch.export program
    assert (saved.hardware, saved.hardware_source, saved.precision, saved.model) == (HW, HW, policy, name)
    # the log: one row per pass run here (7: decompose is the shared fixture's), decisions counted
    assert [r["name"] for r in saved.log] == [n for n, _ in default_passes() if n != "decompose"]
    assert [r["decisions"] for r in saved.log] == [len(r.decisions) for r in compiled.log]
    if policy == "bf16":  # the casts the precision pass inserted keep their dtype argument
        assert any(o.target == "npu.cast" and "bfloat16" in o.args for o in q.ops)
    if chips > 1:
        assert any("collective" in o.attrs for o in q.ops)
    require_executable(saved)  # every argument of these programs is kept as a value


def _op(args, kwargs=None, attrs=None) -> Op:
    t = TensorType((4, "s0"), "float32", (4, 8))
    return Op("y", "aten.to.dtype", tuple(args), kwargs or {}, t, "fc", "m.py:3", attrs or {})


def test_values_json_cannot_hold_keep_their_kind(tmp_path):
    compiled = full_compile("mlp", "fp32", 1)
    p = compiled.program
    args = (Ref("x"), torch.float16, (1, [2, 3]), float("nan"), float("-inf"), None, True, {"k": (Ref("x"),)})
    op = _op(args, {"memory_format": torch.channels_last, "copy": False}, {"unit": "vector", "scale": 0.5})
    save_program(p.with_ops([*p.ops, op]), tmp_path / "p.json", hardware_name=HW, precision="fp32")
    saved = load_program(tmp_path / "p.json")
    got = saved.program.ops[-1]
    assert got.args[:3] == (Ref("x"), torch.float16, (1, [2, 3]))
    assert math.isnan(got.args[3]) and got.args[4] == -math.inf
    assert got.args[5:] == (None, True, {"k": (Ref("x"),)})
    # a memory format is not JSON nor a dtype: kept as text, so the op is timed but not run
    assert got.kwargs == {"memory_format": Opaque("torch.channels_last"), "copy": False}
    assert got.attrs == {"unit": "vector", "scale": 0.5} and got.type == op.type
    with pytest.raises(InputError, match=r"op y \(aten.to.dtype\) has an argument saved as text"):
        require_executable(saved)
    # saving the loaded program again writes the same document (Opaque saves as its text)
    save_program(saved.program, tmp_path / "q.json", hardware_name=HW, precision="fp32")
    a, b = (json.loads((tmp_path / f).read_bytes()) for f in ("p.json", "q.json"))
    assert a["ops"] == b["ops"] and a["kernels"] == b["kernels"]


def _cli_error(path) -> str:
    """The error `perf` prints for a file load_program refuses (the CLI's one_line_errors), exit 2."""
    with pytest.raises(typer.Exit) as e, one_line_errors(path):
        load_program(path)
    assert e.value.exit_code == 2
    return str(path)


@pytest.fixture(scope="module")
def good_doc(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "good.json"
    save_program(full_compile("mlp", "fp32", 1), path, hardware_name=HW, precision="fp32")
    return path.read_bytes()


@pytest.mark.parametrize(
    "content,problem",
    [
        (lambda good: good[: len(good) // 2], "not a saved program: not JSON"),  # truncated
        (lambda good: b"\x00\x01garbage", "not a saved program: not JSON"),
        (lambda good: gzip.compress(good)[:40], ""),  # truncated gzip: read_bounded's message
        (
            lambda good: json.dumps({"schema": "perf.accel_compile", "version": 1}).encode(),
            "schema 'perf.accel_compile'",
        ),
        (lambda good: json.dumps([1, 2]).encode(), "schema 'list'"),
        (lambda good: good.replace(b'"version":1', b'"version":7'), "saved program version 7"),
        (lambda good: good.replace(b'"ops":', b'"opz":'), "lacks the key 'ops'"),
        (lambda good: good.replace(b'"chips":1', b'"chips":"1"'), "malformed saved program: expected an integer"),
        (lambda good: good.replace(b'{"ref":', b'{"raf":'), "unknown value tag 'raf'"),
    ],
)
def test_a_bad_file_is_one_line_naming_it_exit_2(tmp_path, capsys, good_doc, content, problem):
    path = tmp_path / "bad.json"
    path.write_bytes(content(good_doc))
    _cli_error(path)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"perf: {path}: ") and problem in err and "Traceback" not in err


def test_perf_compile_writes_the_program_and_refuses_to_overwrite(tmp_path):
    runner = CliRunner()
    out = tmp_path / "mlp.json.gz"
    r = runner.invoke(app, ["compile", "mlp", "--accel", "edge-npu", "--precision", "bf16", "-o", str(out)])
    assert r.exit_code == 0, r.output
    saved = load_program(out)
    # bf16 MLP on edge-npu: fc1 (permute, mm, bias, GELU) and fc2 fused into 2 matrix kernels
    assert [k.unit for k in saved.program.kernels] == ["matrix", "matrix"]
    assert (saved.hardware, saved.hardware_source, saved.precision, saved.model) == (
        "edge-npu",
        "edge-npu",
        "bf16",
        "mlp",
    )
    assert [r["name"] for r in saved.log][0] == "capture"
    before = out.read_bytes()
    r = runner.invoke(app, ["compile", "mlp", "--accel", "edge-npu", "--output", str(out)])
    assert r.exit_code == 2 and "already exists; pass --force" in r.output and out.read_bytes() == before
    r = runner.invoke(app, ["compile", "mlp", "--accel", "edge-npu", "-o", str(out), "--force"])
    assert r.exit_code == 0, r.output
    assert load_program(out).precision == "fp32"
