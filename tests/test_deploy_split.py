"""Graph splitting under an accuracy budget (`perf gate --split`): the autotune loop's strategy and
SQLite storage over per-layer plans {module path: fp32}, the rest int8."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from typer.testing import CliRunner  # noqa: E402

from profiler.autotune.db import TrialDB  # noqa: E402
from profiler.cli import app  # noqa: E402

ARGS = ["gate", "tests.deploy_models:fragile", "--input", "4x16", "--candidate", "onnxruntime:int8"]


def test_split_keeps_the_planted_layer_in_fp32(tmp_path):
    """tests.deploy_models:fragile: `mid` holds a 1000x outlier channel that per-tensor int8
    destroys (its output error ~1.0, tests/test_deploy_numerics.py). Exhaustive over fc1, mid, fc2:
    8 plans; every plan within the budget keeps `mid` in fp32, and the all-int8 plan is over it."""
    db = tmp_path / "t.sqlite"
    r = CliRunner().invoke(app, [*ARGS, "--split", "0.05", "--db", str(db), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "perf.split" and doc["strategy"] == "exhaustive"
    assert doc["layers"] == ["fc1", "mid", "fc2"] and len(doc["trials"]) == 2**3
    all_int8 = doc["trials"][0]
    assert all_int8["plan"] == {} and all_int8["rel_error"] > 0.5 and not all_int8["within_budget"]
    within = [t for t in doc["trials"] if t["within_budget"]]
    assert within and all(t["plan"].get("mid") == "fp32" for t in within)
    all_fp32 = next(t for t in doc["trials"] if len(t["plan"]) == 3)
    assert all_fp32["rel_error"] < 1e-5  # fp32 export = eager within 1e-5 (tests/test_deploy_numerics.py)
    best = doc["best"]
    assert best["within_budget"] and best["latency_ns"] == min(t["latency_ns"] for t in within)
    # the front: ascending latency, strictly falling error, and no trial beats a front plan on both
    front = doc["front"]
    assert [t["latency_ns"] for t in front] == sorted(t["latency_ns"] for t in front)
    assert all(a["rel_error"] > b["rel_error"] for a, b in zip(front, front[1:]))
    for f in front:
        assert not any(t["latency_ns"] < f["latency_ns"] and t["rel_error"] < f["rel_error"] for t in doc["trials"])
    # stored in the autotune loop's SQLite database: resuming runs nothing again
    store = TrialDB(db)
    try:
        (n,) = store.conn.execute("SELECT COUNT(*) FROM trials").fetchone()
    finally:
        store.close()
    assert n == 8
    r = CliRunner().invoke(app, [*ARGS, "--split", "0.05", "--db", str(db), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["trials"] == doc["trials"]


def test_no_plan_within_budget_exits_1(tmp_path):
    r = CliRunner().invoke(
        app, [*ARGS, "--split", "0", "--trials", "2", "--strategy", "random", "--db", str(tmp_path / "t.sqlite")]
    )
    assert r.exit_code == 1 and "no plan of 2 tried meets" in r.output
    r = CliRunner().invoke(app, [*ARGS[:-1], "onnxruntime:fp16", "--split", "0.1", "--db", str(tmp_path / "u.sqlite")])
    assert r.exit_code == 2 and "searches int8 plans" in r.output


def test_a_plan_file_as_the_candidate_precision(tmp_path):
    """`--candidate onnxruntime:PLAN.json`: the split's plan {mid, fc2 in fp32} on the fragile model
    brings the output error from 0.728 (all int8) to 0.0059 (measured by the split above)."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"mid": "fp32", "fc2": "fp32"}))
    args = ["diff", "--numerics", "tests.deploy_models:fragile", "--input", "4x16", "--json"]
    r = CliRunner().invoke(app, [*args, "--candidate", f"onnxruntime:{plan}"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["output"]["rel_error"] < 0.05 and doc["first_diverging"] is None
    r = CliRunner().invoke(app, [*args, "--candidate", "onnxruntime:int8"])
    assert json.loads(r.stdout)["output"]["rel_error"] > 0.5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mid": "int4"}))
    r = CliRunner().invoke(app, [*args, "--candidate", f"onnxruntime:{bad}"])
    assert r.exit_code == 2 and str(bad) in r.output and "Traceback" not in r.output
