"""`perf compile-report LOGDIR` and `perf dashboard --compile-log DIR` on a real TORCH_TRACE
directory: the one `perf profile --model examples.models:mlp --compile` leaves when TORCH_TRACE
is set (tests/test_compiler_page.py's shared_compile: one compile per test session), and bad
input (missing, empty, junk, corrupt lines)."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from collectors.torch_compile.report import read_compile_report
from profiler.cli import app
from profiler.api import compile_report, load_trace
from tests.test_compiler_page import GELU_OPS, shared_compile

runner = CliRunner()


def run(*args: object):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return shared_compile(tmp_path_factory)


def test_compile_report_prints_the_tables(compiled):
    r = run("compile-report", compiled["torch_trace"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    for title in ("Compile phases (self time)", "Cache lookups", "Fusion map"):
        assert title in out
    assert "cpp_fused_gelu_0" in out and " + ".join(GELU_OPS) in out and "kernel_compile" in out
    assert r.stderr == ""  # a clean log: no problems to count


def test_compile_report_json_matches_the_reader(compiled):
    r = run("compile-report", compiled["torch_trace"], "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "perf.compile_report" and doc["schema_version"] == 1 and doc["problems"] == {}
    rep = read_compile_report(compiled["torch_trace"])
    tables = doc["tables"]
    assert [row["time_ns"] for row in tables["phase_summary"]] == rep.phase_summary["time_ns"].tolist()
    assert len(tables["phases"]) == len(rep.phases) > 10
    gelu = [k for k in tables["fusion"] if k["kernel"].startswith("cpp_fused") and "gelu" in k["kernel"]]
    assert len(gelu) == 1 and tuple(gelu[0]["aten_ops"]) == GELU_OPS
    assert {c["state"] for c in tables["caches"]} == {"miss"}  # a cold compile (fresh cache directory)


def test_the_log_and_the_trace_tell_the_same_compile(compiled):
    """perf profile captured in-process what TORCH_TRACE wrote to disk: the same steps, the same kernels."""
    rep = read_compile_report(compiled["torch_trace"])
    trace = load_trace(compiled["trace"])
    ev = trace.events
    passes = ev[ev["kind"] == "compile_pass"]
    assert sorted(passes["name"].astype(str)) == sorted(rep.phases["name"])
    assert sorted(passes["ts"].tolist()) == sorted(
        rep.phases["start_ns"].tolist()
    )  # one clock, exact to the ns as written
    carried = trace.metadata["ranks"]["0"]["perfCompile"]["tables"]["fusion"]
    assert [k["runtime_name"] for k in carried] == rep.fusion["runtime_name"].tolist()


def test_corrupt_lines_are_counted_not_fatal(compiled, tmp_path):
    d = tmp_path / "torch_trace"
    shutil.copytree(compiled["torch_trace"], d)
    log = next(d.glob("*.log"))
    with log.open("a") as f:
        f.write("this line is not a structured-log record\n")
        f.write('V1202 16:12:15.881000 9946 torch/x.py:1] {"artifact": \n')
    r = run("compile-report", d)
    assert r.exit_code == 0, r.output
    assert "cpp_fused_gelu_0" in r.stdout
    lines = r.stderr.strip().splitlines()
    assert f"perf: {d}: 1 structured-log lines without a glog prefix skipped" in lines
    assert f"perf: {d}: 1 structured-log lines with unreadable JSON skipped" in lines
    assert read_compile_report(d).problems.counts == {
        "structured-log lines without a glog prefix skipped": 1,
        "structured-log lines with unreadable JSON skipped": 1,
    }


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "no such file or directory"),
        ("empty", "no structured-log files (*.log) in this TORCH_TRACE directory"),
        ("junk", "not a torch.compile structured log"),
    ],
)
def test_bad_log_directories_are_one_line_errors(case, message, tmp_path):
    d = tmp_path / case
    if case != "missing":
        d.mkdir()
    if case == "junk":
        (d / "junk.log").write_text("hello\nworld\n")
    for cmd in (["compile-report", d], ["dashboard", "--compile-log", d]):  # the dashboard refuses before serving
        r = run(*cmd)
        assert r.exit_code == 2, r.output
        assert r.stderr.startswith(f"perf: {d}") and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, (
            r.stderr
        )


def test_dashboard_compile_log_joins_the_log_to_the_trace(compiled):
    from dashboard.app import create_app

    app = create_app([compiled["trace"]], compile_report=compile_report(compiled["torch_trace"]))
    try:
        store = app.perf_store
        tid = store.entries()[0].trace_id
        t = store.compile_tables(tid)
        assert t is store.compile_tables(tid)  # cached per trace
        gelu = t["fusion"][t["fusion"]["kind"] == "cpp"].iloc[0]
        assert gelu["aten_ops"] == GELU_OPS and gelu["calls"] == 2 and gelu["time_ns"] > 0
        assert t["phase_summary"]["compile_id"].eq("0/0").all()  # the log's own compile ids
        alone = store.compile_tables(None)  # no trace selected: the log alone, no kernel times
        assert "time_ns" not in alone["fusion"].columns and len(alone["fusion"]) == len(t["fusion"])
    finally:
        app.perf_store.close()
