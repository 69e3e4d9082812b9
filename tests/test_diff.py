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
    slower.append({"ph": "X", "cat": "kernel", "name": "extra_kernel", "pid": 0, "tid": 7, "ts": 99, "dur": 1,
                   "args": {"device": 0, "stream": 7}})
    b = write_trace(tmp_path / "b.json", slower)
    doc = json.loads(runner.invoke(app, ["diff", str(a), str(b), "--json"]).stdout)
    by_name = {(c["kind"], c["name"]): c for c in doc["changes"]}
    gemm = by_name[("kernel", "gemm")]
    assert (gemm["time_a_ns"], gemm["time_b_ns"], gemm["delta_ns"], gemm["change"]) == (10_000, 25_000, 15_000, "time")
    assert by_name[("op", "aten::addmm")]["delta_ns"] == 15_000  # the op that launched it
    assert by_name[("kernel", "extra_kernel")]["change"] == "added"
    assert doc["changes"][0]["delta_ns"] == 15_000  # largest first
