"""`perf autotune`: the JSON contract, the budget across --resume, the refusal to overwrite a
study, progress on stderr, and the tuned plan round trip through `perf compile --plan` and
`perf simulate --plan` (same kernels, same simulated time)."""

from __future__ import annotations

import json
import sqlite3

import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from profiler.cli import app  # noqa: E402

runner = CliRunner()


def run(*args):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def test_autotune_json_resume_refusal_and_plan_round_trip(tmp_path):
    db, plan = tmp_path / "trials.sqlite", tmp_path / "plan.json"
    common = ["autotune", "mlp", "--accel", "edge-npu", "--db", str(db), "--strategy", "random", "--seed", "3"]
    r = run(*common, "--budget", "3", "--resume")  # --resume on a missing database starts fresh
    assert r.exit_code == 0, r.output
    assert r.stderr.count("[") >= 3 and "[1/3]" in r.stderr and "baseline" in r.stderr  # live progress
    assert "baseline" in r.stdout and "tuned" in r.stdout

    again = run(*common, "--budget", "5")  # the study is there: refused, one line, exit 2
    assert again.exit_code == 2 and again.stderr.count("\n") == 1 and "--resume" in again.stderr

    r = run(*common, "--budget", "5", "--resume", "--json", "--plan-out", str(plan))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["trials"] == 5  # the budget counts the 3 stored trials
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, candidate_hash, time_ns, failure, accuracy_error FROM trials").fetchall()
    assert sorted(r[0] for r in rows) == [0, 1, 2, 3, 4] and len({r[1] for r in rows}) == 5
    best = doc["best"]
    assert {"candidate_hash", "time_ns", "accuracy_error", "plan"} <= set(best)
    ok = [r for r in rows if r[2] is not None]
    assert best["time_ns"] == min(r[2] for r in ok) and best["accuracy_error"] < 1e-2
    assert doc["baseline"]["seq"] == 0 and doc["speedup"] == doc["baseline"]["time_ns"] / best["time_ns"]

    # the plan file: perf compile --plan builds exactly its kernels, perf simulate --plan times it the same
    saved = json.loads(plan.read_text())
    assert saved["candidate_hash"] == best["candidate_hash"]
    flags = ["--accel", "edge-npu", "--precision", saved["precision"], "--plan", str(plan)]
    c = run("compile", "mlp", *flags, "--json")
    assert c.exit_code == 0, c.output
    compiled = json.loads(c.stdout)["kernels"]
    assert [(k["name"], k["ops"], k["tile"]) for k in compiled] == [
        (k["name"], k["ops"], k.get("tile")) for k in saved["kernels"]
    ]
    s = run("simulate", "mlp", *flags, "--json")
    assert s.exit_code == 0, s.output
    assert json.loads(s.stdout)["total_ns"] == best["time_ns"]


def test_bad_arguments_are_one_line_exit_2(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database\n" * 100)
    cases = [
        ("autotune", "mlp", "--accel", "edge-npu", "--strategy", "annealing"),
        ("autotune", "mlp", "--accel", "edge-npu", "--budget", "0"),
        ("autotune", "mlp"),
        ("autotune", "nosuchmodel", "--accel", "edge-npu", "--db", str(tmp_path / "t.sqlite")),
        ("autotune", "mlp", "--accel", "edge-npu", "--db", str(bad), "--budget", "1"),
    ]
    for args in cases:
        r = run(*args)
        assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.output, (args, r.output)
    assert bad.read_text() == "not a database\n" * 100


def test_a_changed_plan_round_trips_through_compile_and_simulate(tmp_path):
    """A plan that differs from the compiler's (fc1's GELU split off, fc1 tiled n=32, fc2 int8)
    compiles to the same kernels and simulates to the time its trial measured."""
    from accelerator.hardware import load_accel
    from accelerator.workloads import tiny_mlp
    from profiler.autotune.build import build_space, compile_candidate, load_workload, plan_document
    from profiler.autotune.runner import SimulatorRunner

    m, xs = tiny_mlp()
    w = load_workload("mlp", m, xs, load_accel("edge-npu"), "bf16", "edge-npu")
    space = build_space(w)
    c = space.candidate({"fusion:addmm": "split", "tile:addmm": {"m": 4, "n": 32, "k": 32}, "precision:fc2": "int8"})
    trial = SimulatorRunner(w, space, accuracy_budget=5e-2).run(c)
    assert trial.failure == ""
    doc = plan_document(w, space, c, compile_candidate(w, space, c))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    assert doc["flags"] == "--accel edge-npu --precision bf16 --precision-override fc2=int8"
    flags = [*doc["flags"].split(), "--plan", str(path)]
    k = json.loads(run("compile", "mlp", *flags, "--json").stdout)["kernels"]
    assert [(x["name"], x["ops"], x["tile"]) for x in k] == [
        (x["name"], x["ops"], x.get("tile")) for x in doc["kernels"]
    ]
    assert any(x["name"] == "gelu" for x in k) and k[0]["tile"] == {"m": 4, "n": 32, "k": 32}
    assert "npu.qmm" in [t for x in k for t in x["fused_ops"]]
    s = run("simulate", "mlp", *flags, "--json")
    assert s.exit_code == 0, s.output
    assert json.loads(s.stdout)["total_ns"] == trial.time_ns
