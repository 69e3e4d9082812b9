"""The Inductor runner (`perf autotune --runner inductor`): a trial compiles with torch.compile
under its options, is checked against eager (a result over the bound is a failed trial with its
reason), is measured with its spread and its torch.profiler trace analyzed per kernel; the
roofline strategy's moves on whole-graph options follow the measured bound. Compiles are slow on
this machine: one tiny MLP, one fixture, few trials."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

pytest.importorskip("torch")

from profiler.autotune.db import Trial  # noqa: E402
from profiler.autotune.inductor import (  # noqa: E402
    InductorRunner,
    inductor_options,
    inductor_space,
    kernel_rows,
    load_inductor_workload,
    spread,
)
from profiler.autotune.space import Dimension, Space  # noqa: E402
from profiler.autotune.strategy import RooflineStrategy  # noqa: E402


@pytest.fixture(scope="module")
def mlp():  # type: ignore[no-untyped-def]
    from accelerator.workloads import tiny_mlp

    m, xs = tiny_mlp()
    w = load_inductor_workload("mlp", m, xs)
    space = inductor_space("mlp", "fp32")
    baseline = InductorRunner(w, space, warmup=1, repeats=3).run(space.candidate({}))
    return w, space, baseline


def test_baseline_is_checked_measured_and_its_trace_analyzed(mlp):
    w, space, r = mlp
    assert r.failure == "" and r.time_ns is not None
    # fp32 Inductor against eager fp32: reordered sums only, far inside check.BOUNDS["fp32"] = 1e-5
    assert 0.0 <= r.accuracy_error < 1e-5
    m = r.summary["measure"]
    assert m["repeats"] == 3 and m["warmup"] == 1 and m["number"] >= 1
    assert m["min_ns"] <= m["q1_ns"] <= m["median_ns"] <= m["q3_ns"] <= m["max_ns"]
    assert m["iqr_ns"] == pytest.approx(m["q3_ns"] - m["q1_ns"]) and r.time_ns == round(m["median_ns"])
    names = {k["name"] for k in r.summary["kernels"]}
    # the two Linears run as ATen GEMMs (extern kernels), GELU as Inductor's generated C++ kernel
    # (named in the trace by cpp.enable_kernel_profile), the compiled region as runtime
    assert "aten::addmm" in names and any("cpp_fused" in n for n in names)
    wrappers = [k for k in r.summary["kernels"] if k["name"].startswith("Torch-Compiled Region")]
    assert wrappers and all(k["bound"] == "runtime" for k in wrappers)
    addmm = next(k for k in r.summary["kernels"] if k["name"] == "aten::addmm")
    # floor of the two GEMMs per call, from their shapes: 2*4*32*64 + 2*4*64*16 = 24,576 FLOPs,
    # a positive floor the cost model derived, never above the measured time
    assert 0 < addmm["floor_ns"] <= addmm["time_ns"] and addmm["t_compute_ns"] > 0
    assert sum(r.summary["by_limiter"].values()) == pytest.approx(sum(k["time_ns"] for k in r.summary["kernels"]))


def test_a_result_over_the_bound_is_a_failed_trial_with_its_reason(mlp):
    w, space, base = mlp
    strict = InductorRunner(w, space, accuracy_budget=1e-300, warmup=1, repeats=1)
    r = strict.run(space.candidate({}))
    if base.accuracy_error == 0.0:
        pytest.skip("Inductor matched eager bit for bit on this CPU: no error to exceed")
    assert r.time_ns is None and r.failure.startswith("check: relative error") and "1e-300" in r.failure
    assert r.accuracy_error == pytest.approx(base.accuracy_error, rel=1e-6)  # the same code, the same error


def test_options_spell_out_every_default_and_the_cpp_gemm_template(mlp):
    _, space, _ = mlp
    assert space.dimension("inductor:max_fusion_size").default == 64  # Inductor's own default
    plain = inductor_options(space, space.candidate({}))
    assert plain["max_autotune"] is False and plain["epilogue_fusion"] is True
    assert "max_autotune_gemm_backends" not in plain
    tuned = inductor_options(space, space.candidate({"inductor:max_autotune": True}))
    assert tuned["max_autotune"] is True and tuned["max_autotune_gemm_backends"] == "CPP,ATEN"


def test_spread_is_the_quartiles_of_the_samples():
    # statistics.quantiles(inclusive) of 1..5: q1 = 2, median 3, q3 = 4
    s = spread([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s["q1_ns"], s["median_ns"], s["q3_ns"], s["iqr_ns"], s["min_ns"], s["max_ns"]) == (2, 3, 4, 2, 1, 5)


def test_kernel_rows_sum_per_name_per_call():
    units = pd.DataFrame(
        {
            "name": ["aten::addmm", "aten::addmm", "Torch-Compiled Region: 0/0", "cpp_fused_gelu_0"],
            "time_ns": [3000, 1000, 600, 300],
            "floor_ns": [200.0, 100.0, float("nan"), float("nan")],
            "t_compute_ns": [200.0, 100.0, float("nan"), float("nan")],
            "t_memory_ns": [50.0, 40.0, float("nan"), float("nan")],
            "t_runtime_ns": [50.0, 50.0, 50.0, 50.0],
            "bound": ["compute", "runtime", "unknown", "unknown"],
        }
    )
    rows = {r["name"]: r for r in kernel_rows(units, calls=2)}
    a = rows["aten::addmm"]
    # (3000 + 1000) / 2 calls = 2000 ns; floor (200 + 100) / 2 = 150; the longest unit's bound
    assert (a["time_ns"], a["floor_ns"], a["bound"], a["efficiency"]) == (2000, 150, "compute", 0.075)
    assert rows["Torch-Compiled Region: 0/0"]["bound"] == "runtime"  # torch.compile's wrapper: host time
    g = rows["cpp_fused_gelu_0"]
    assert (g["bound"], g["floor_ns"], g["time_ns"]) == ("unknown", 0.0, 150)  # no cost: all of it lost


GLOBAL = Space(
    (
        Dimension("inductor:max_fusion_size", "fusion", (64, 8, 256)),
        Dimension("inductor:freezing", "codegen", (False, True)),
        Dimension("inductor:max_autotune", "codegen", (False, True)),
    ),
    "fp32",
)


def _row(name: str, time_ns: float, bound: str) -> dict:
    return {
        "name": name,
        "time_ns": time_ns,
        "floor_ns": 10.0,
        "t_compute_ns": 10.0,
        "t_memory_ns": 1.0,
        "t_runtime_ns": 5.0,
        "bound": bound,
        "efficiency": 10.0 / time_ns,
    }


@pytest.mark.parametrize(
    ("top", "levers"),
    [("runtime", {"fusion"}), ("compute", {"codegen"})],
)
def test_roofline_moves_follow_the_measured_bound_on_whole_graph_options(top, levers):
    s = RooflineStrategy(GLOBAL)
    base = GLOBAL.candidate({})
    s.propose()  # the baseline
    kernels = [_row("hot", 9000.0, top), _row("cold", 100.0, "memory")]
    s.observe(base, Trial(base.hash, 0, "roofline", {}, 9100, "", 0.0, "", {"kernels": kernels}, 0.0))
    p = s.propose()
    (name,) = [n for n, _ in p.candidate.choices]
    # the kernel losing most (hot: 9000 - 10 ns) first, with the lever its bound calls for
    assert GLOBAL.dimension(name).lever in levers and p.finding.startswith(f"hot: {top}-bound")


def test_cli_runner_inductor_stores_trials_and_writes_the_plan(tmp_path):
    from typer.testing import CliRunner

    from profiler.cli import app

    db, plan = tmp_path / "t.sqlite", tmp_path / "plan.json"
    cli = CliRunner()
    bad = cli.invoke(app, ["autotune", "mlp", "--runner", "inductor", "--accel", "edge-npu"])
    assert bad.exit_code == 2 and "--runner inductor" in bad.stderr and bad.stderr.count("\n") == 1
    args = ["autotune", "mlp", "--runner", "inductor", "--budget", "2", "--db", str(db), "--json"]
    r = cli.invoke(app, [*args, "--strategy", "random", "--plan-out", str(plan)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["trials"] == 2 and doc["best"]["plan"]["runner"] == "inductor"
    assert doc["best"]["spread"]["min_ns"] <= doc["best"]["time_ns"] <= doc["best"]["spread"]["max_ns"]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT runner, candidate_hash, time_ns, failure, accuracy_error FROM trials").fetchall()
    assert len(rows) == 2 and {r[0] for r in rows} == {"inductor"}
    assert min(r[2] for r in rows if r[2] is not None) == doc["best"]["time_ns"]
    saved = json.loads(plan.read_text())
    assert saved["candidate_hash"] == doc["best"]["candidate_hash"] and "max_fusion_size" in saved["inductor_config"]
    again = cli.invoke(app, args)  # the study is held: refused without --resume
    assert again.exit_code == 2 and "--resume" in again.stderr
