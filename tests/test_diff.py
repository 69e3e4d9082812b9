"""`perf diff`: ops matched by name and shapes; count, time and bound changes."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from profiler.cli import app
from tests.conftest import real_trace, write_trace
from tests.test_kineto_inline import EVENTS

runner = CliRunner()


def test_diff_of_a_trace_with_itself_is_empty():
    for folder in ("b200_eager", "dlrm_8rank_v100", "resnet50_legacy_v100"):
        path = real_trace(folder)
        doc = json.loads(runner.invoke(app, ["diff", str(path), str(path), "--json"]).stdout)
        assert doc["changes"] == [] and doc["busy_ns"]["a"] == doc["busy_ns"]["b"]


def test_diff_finds_a_slower_kernel_and_a_new_one(tmp_path):
    a = write_trace(tmp_path / "a.json", EVENTS)
    slower = [dict(e) for e in EVENTS]
    for e in slower:
        if e["name"] == "gemm":
            e["dur"] = 25  # 10 us -> 25 us
    slower.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "extra_kernel",
            "pid": 0,
            "tid": 7,
            "ts": 99,
            "dur": 1,
            "args": {"device": 0, "stream": 7},
        }
    )
    b = write_trace(tmp_path / "b.json", slower)
    doc = json.loads(runner.invoke(app, ["diff", str(a), str(b), "--json"]).stdout)
    by_name = {(c["kind"], c["name"]): c for c in doc["changes"]}
    gemm = by_name[("kernel", "gemm")]
    assert (gemm["time_a_ns"], gemm["time_b_ns"], gemm["delta_ns"], gemm["change"]) == (10_000, 25_000, 15_000, "time")
    assert by_name[("op", "aten::addmm")]["delta_ns"] == 15_000  # the op that launched it
    assert by_name[("kernel", "extra_kernel")]["change"] == "added"
    assert doc["changes"][0]["delta_ns"] == 15_000  # largest first


def test_setup_comes_first_and_other_hardware_is_not_like_for_like():
    a, b = real_trace("nccl_meta_a100"), real_trace("resnet50_legacy_v100")
    r = runner.invoke(app, ["diff", str(a), str(b), "--top", "3"])
    out = " ".join(r.stdout.split())
    assert out.startswith("NOT like-for-like: hardware differs: NVIDIA A100-PG509-200 vs Tesla V100-DGXS-32GB")
    assert out.index("Setup") < out.index("Changes")
    doc = json.loads(runner.invoke(app, ["diff", str(a), str(b), "--json"]).stdout)
    s = doc["setup"]
    assert s["like_for_like"] is False and len(s["reasons"]) == 1  # world size unrecorded in B: not a difference
    fields = {f["field"]: f for f in s["fields"]}
    assert not fields["hardware"]["same"] and fields["dtypes"]["same"] and fields["software"]["a"] == "NCCL 2.17.1"


def test_eight_ranks_against_two_is_not_like_for_like(tmp_path):
    eight = real_trace("dlrm_8rank_v100")
    two = tmp_path / "two"
    two.mkdir()
    for f in sorted(eight.glob("*.json.gz"))[:2]:
        (two / f.name).write_bytes(f.read_bytes())
    doc = json.loads(runner.invoke(app, ["diff", str(eight), str(two), "--json"]).stdout)
    s = doc["setup"]
    assert s["like_for_like"] is False and s["reasons"] == ["ranks differs: 8 vs 2"]
    assert {f["field"]: f["same"] for f in s["fields"]}["hardware"]


def test_same_setup_is_like_for_like():
    path = real_trace("b200_eager")
    doc = json.loads(runner.invoke(app, ["diff", str(path), str(path), "--json"]).stdout)
    s = doc["setup"]
    assert s["like_for_like"] is True and all(f["same"] for f in s["fields"])
    fields = {f["field"]: f["a"] for f in s["fields"]}
    # Kineto's cuda_runtime_version 12090 is CUDA 12.9; the top op by device time is vllm::moe_forward
    assert "CUDA runtime 12.9" in fields["software"] and "NCCL 2.27.5" in fields["software"]
    assert fields["shapes"].startswith("vllm::moe_forward [[888,3072],[888,128],[]]")
    assert fields["hardware"] == "NVIDIA B200" and fields["world_size"] == "8"
