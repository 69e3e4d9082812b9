"""The notebook API: `with profiler.profile(...) as p: ...; p.step()`, then p.path, p.trace, p.analysis()."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import profiler
from collectors.torch_runtime.native import NESTED
from collectors.torch_runtime.specs import parse_input
from profiler.model.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
M, K, N = 64, 128, 32


def matmul() -> torch.Tensor:
    return torch.randn(M, K) @ torch.randn(K, N)


def step_names(trace: profiler.Trace) -> list[str]:
    names = trace.events["name"].astype(str)
    return sorted(names[names.str.startswith("ProfilerStep#")])


def test_steps_trace_and_analysis(tmp_path):
    with profiler.profile(steps=2, out=tmp_path / "nb.json.gz") as p:
        for _ in range(5):
            matmul()
            p.step()
    assert p.path == tmp_path / "nb.json.gz" and p.path.is_file()
    # schedule(wait=0, warmup=1, active=2): step 0 traced and dropped, steps 1 and 2 recorded
    assert step_names(p.trace) == ["ProfilerStep#1", "ProfilerStep#2"]
    a = p.analysis()
    mm = a.units[a.units["name"] == "aten::mm"]
    assert len(mm) == 2
    # 2*M*N*K: one multiply-add is two FLOPs = 2*64*32*128 = 524,288 per call
    assert (mm["flops"] == 2 * M * N * K).all() and 2 * M * N * K == 524_288
    assert set(mm["step"]) == {1, 2}
    assert p.analysis(hardware="generic-x86-cpu", top=3).hardware == {"rank0/cpu": "generic-x86-cpu"}


def test_module_level_step_and_whole_block(tmp_path):
    profiler.step()  # no session: nothing happens
    with profiler.profile(out=tmp_path / "all.json") as p:  # steps=None: the whole block
        matmul()
        profiler.step()  # goes to the active session
        matmul()
    assert p.marks == 1
    assert step_names(p.trace) == ["ProfilerStep#0", "ProfilerStep#1"]
    assert (p.trace.events["name"] == "aten::mm").sum() == 2
    assert p.path.read_bytes().lstrip().startswith(b"{")  # .json: plain, not gzip


def test_exception_keeps_the_partial_recording(tmp_path):
    with pytest.raises(ValueError, match="bad batch"), profiler.profile(steps=5, out=tmp_path / "partial.json.gz") as p:
        for _ in range(4):
            matmul()
            p.step()
        raise ValueError("bad batch")
    assert p.written
    assert step_names(p.trace) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]


def test_nothing_recorded_is_one_clear_error(tmp_path):
    with profiler.profile(steps=2, warmup=1, wait=2, out=tmp_path / "none.json.gz") as p:
        matmul()
        p.step()
    assert not p.written and not p.path.exists()
    with pytest.raises(
        InputError, match=r"after 1 step\(\) mark\(s\); .* starts after mark 3, and steps=2 needs 5 marks"
    ):
        _ = p.trace


def test_one_profiler_at_a_time(tmp_path):
    with profiler.profile(out=tmp_path / "outer.json.gz"):
        with pytest.raises(RuntimeError, match="already running"), torch.profiler.profile():
            pass
        with pytest.raises(RuntimeError, match="already running"), profiler.profile(out=tmp_path / "inner.json.gz"):
            pass
        matmul()
    with torch.profiler.profile() as q:  # the guard is gone with the session
        matmul()
    assert any(e.name == "aten::mm" for e in q.events())
    assert "profiler.step()" in NESTED


def test_defaults_and_bad_arguments():
    with profiler.profile() as p:
        matmul()
    try:
        assert p.path.name.startswith("perf-") and p.path.name.endswith(".json.gz") and p.path.is_file()
    finally:
        p.path.unlink()
    with pytest.raises(InputError, match="activity 'tpu'"):
        profiler.profile(activities=["cpu", "tpu"])
    with pytest.raises(InputError, match="need steps >= 1"):
        profiler.profile(steps=0)
    with pytest.raises(RuntimeError, match="outside"):
        p.step()


def test_parse_input():
    assert parse_input("32x256").shape == (32, 256)
    s = parse_input("1x128:int64:32000")
    assert (s.shape, s.dtype, s.high) == ((1, 128), torch.int64, 32000)
    assert parse_input("4:bf16").dtype == torch.bfloat16


def test_import_profiler_does_not_import_torch():
    code = "import sys, profiler\nassert 'torch' not in sys.modules\nprofiler.profile\nassert 'torch' in sys.modules\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 0, r.stderr


def test_torch_compile_inside_the_block_joins_the_trace(tmp_path):
    """A function compiled inside the block: its compile passes land on the compiler track."""
    import torch._dynamo

    torch._dynamo.reset()

    @torch.compile
    def scaled_sin(x):
        return torch.sin(x) * 2 + 1

    x = torch.randn(256)
    with profiler.profile(out=tmp_path / "nbc.json.gz") as p:
        scaled_sin(x)
        p.step()
    assert p.compile is not None
    ev = p.trace.events
    passes = ev[ev["kind"] == "compile_pass"]
    assert len(passes) > 0 and set(passes["source"].astype(str)) == {"compiler"}
    assert set(passes["track"].astype(str)) <= {"rank0/compiler"} | {f"rank0/compiler/worker{k}" for k in range(1, 64)}
