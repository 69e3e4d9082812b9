"""Trials each strategy needs to come within 2% of the exhaustive optimum (and to reach it), on
the simulator: roofline-guided vs random vs Optuna's TPE, median over seeds, side by side in one
run, printed as ratios against the roofline strategy.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_autotune.py [--seeds 10] [--max-points 1000]
        [--workload block|convnet|all] [--json OUT]

Workloads (edge-npu, bf16): `block`, a Llama-style decoder block (TinyLlama, 1 layer, dim 256,
SwiGLU 704, 4 heads / 2 KV heads, prefill of 64 tokens) and `convnet` (the tiny ResNet,
accelerator/workloads/resnet.py, batch 2 of 16 x 16). The space: the tile and fusion
dimensions of profiler/autotune/space.py for the heaviest kernels of the baseline (by simulated
time, a choice blind to any strategy) while the product stays under --max-points, so that the
exhaustive optimum is measured, not guessed.

The exhaustive pass compiles and simulates every point once (the functional check off: tiles
and fusion keep the arithmetic, tests/test_accel_fusion.py; the search, not the numerics, is
measured); each strategy then runs through the real driver (profiler/autotune/loop.py) on an
in-memory database, its runner answering from that table (the simulator is deterministic: the
same candidate, the same time), the roofline strategy with the analysis of each trace it reads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from profiler.autotune.build import build_space, load_workload
from profiler.autotune.db import Study, TrialDB
from profiler.autotune.loop import tune
from profiler.autotune.runner import SimulatorRunner, TrialResult, analyze_run
from profiler.autotune.space import Space
from profiler.autotune.strategy import make_strategy

STRATEGIES = ("roofline", "random", "tpe")


def workload(name: str):  # type: ignore[no-untyped-def]
    from accelerator.hardware import load_accel
    from accelerator.workloads.llama import LlamaConfig, tiny_llama
    from accelerator.workloads.resnet import tiny_resnet

    hw = load_accel("edge-npu")
    if name == "block":
        cfg = LlamaConfig(n_layers=1, dim=256, hidden=704, n_heads=4, n_kv_heads=2, vocab=256, max_seq=64)
        m, xs = tiny_llama(prompt=64, cfg=cfg)
    else:
        m, xs = tiny_resnet()
    return load_workload(name, m, xs, hw, "bf16"), hw


def restricted(space: Space, kernel_time: dict[str, int], max_points: int) -> Space:
    """The dimensions of the heaviest kernels first, while the product stays <= max_points."""
    dims, size = [], 1
    for d in sorted(space.dimensions, key=lambda d: -max(kernel_time.get(k, 0) for k in d.kernels)):
        if size * len(d.options) <= max_points:
            dims.append(d)
            size *= len(d.options)
    return Space(tuple(dims), space.precision, space.model, space.accel)


class Table:
    """Every point's trial (simulated time or failure, the functional check on), and the
    analysis of the points a strategy reads."""

    name, hardware = "simulator", "edge-npu"

    def __init__(self, w, space: Space, hw, budget: float):  # type: ignore[no-untyped-def]
        self.space, self.hw = space, hw
        self.runner = SimulatorRunner(w, space, budget, analyze=False)
        self.results: dict[str, TrialResult] = {}
        self.analysis: dict[str, list] = {}
        self.with_analysis = False

    def fill(self) -> None:
        for c in self.space.enumerate():
            self.results[c.hash] = self.runner.run(c)

    def run(self, c) -> TrialResult:  # type: ignore[no-untyped-def]
        from accelerator.sim.run import simulate

        r = self.results[c.hash]
        if r.time_ns is None or not self.with_analysis:
            return r
        if c.hash not in self.analysis:
            self.analysis[c.hash] = analyze_run(simulate(self.runner.compile(c).program, self.hw))
        return TrialResult(r.time_ns, "", r.accuracy_error, {**r.summary, "kernels": self.analysis[c.hash]})


class Reached(Exception):
    pass


def trials_to(table: Table, strategy: str, seed: int, target: int, budget: int) -> int | None:
    """Trials stored (the baseline included) when the best first reaches <= target; None if never."""
    db = TrialDB(":memory:")
    table.with_analysis = strategy == "roofline"

    def stop(trial, stored, best, elapsed, finding):  # type: ignore[no-untyped-def]
        if best is not None and best.time_ns <= target:
            raise Reached(stored)

    try:
        tune(
            table.space,
            table,
            make_strategy(strategy, table.space, seed, table.hw),
            db,
            Study("bench", "edge-npu", "simulator"),
            budget,
            seed,
            stop,
        )
    except Reached as r:
        return int(r.args[0])
    finally:
        db.close()
    return None


def bench(name: str, seeds: int, max_points: int, budget: float) -> dict:
    t0 = time.perf_counter()
    w, hw = workload(name)
    full = build_space(w, ("tile", "fusion", "precision"))
    from accelerator.sim.run import simulate
    from accelerator.sim.trace import summary

    kernel_time = {k["name"]: k["dur_ns"] for k in summary(simulate(w.compiled.program, hw))["kernels"]}
    space = restricted(full, kernel_time, max_points)
    table = Table(w, space, hw, budget)
    table.fill()
    fill_s = time.perf_counter() - t0
    ok = sorted(r.time_ns for r in table.results.values() if r.time_ns is not None)
    optimum, baseline = ok[0], table.results[space.candidate({}).hash].time_ns
    out = {
        "workload": name,
        "space_full": full.size,
        "space": space.size,
        "dimensions": [d.name for d in space.dimensions],
        "failed_points": sum(r.time_ns is None for r in table.results.values()),
        "accuracy_budget": budget,
        "baseline_ns": baseline,
        "optimum_ns": optimum,
        "worst_ns": ok[-1],
        "exhaustive_s": round(fill_s, 1),
        "strategies": {},
    }
    for strategy in STRATEGIES:
        within, exact = [], []
        for seed in range(seeds):
            within.append(trials_to(table, strategy, seed, int(optimum * 1.02), space.size))
            exact.append(trials_to(table, strategy, seed, optimum, space.size))
        out["strategies"][strategy] = {"within_2pct": within, "optimum": exact}
    return out


def _median(xs: list) -> float:
    return statistics.median(x if x is not None else float("inf") for x in xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--max-points", type=int, default=1000)
    ap.add_argument("--workload", choices=("block", "convnet", "all"), default="all")
    ap.add_argument("--accuracy-budget", type=float, default=3e-2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results = []
    for name in ("block", "convnet") if args.workload == "all" else (args.workload,):
        r = bench(name, args.seeds, args.max_points, args.accuracy_budget)
        results.append(r)
        print(
            f"{name}: space {r['space']:,} points of {r['space_full']:,} ({len(r['dimensions'])} choices), "
            f"exhaustive {r['exhaustive_s']} s, {r['failed_points']} points fail (compile or check "
            f"within {r['accuracy_budget']:g}); "
            f"baseline {r['baseline_ns'] / 1e3:,.3f} us, optimum {r['optimum_ns'] / 1e3:,.3f} us "
            f"({r['baseline_ns'] / r['optimum_ns']:.4f}x), worst {r['worst_ns'] / 1e3:,.3f} us"
        )
        ref = r["strategies"]["roofline"]
        for goal, label in (("within_2pct", "within 2% of the optimum"), ("optimum", "the optimum itself")):
            mine = _median(ref[goal])
            print(f"  trials to {label} (median of {args.seeds} seeds; % of the space; x roofline's):")
            for s in STRATEGIES:
                m = _median(r["strategies"][s][goal])
                share = f"{m / r['space']:.1%}" if m != float("inf") else "never"
                print(f"    {s:<9}{m:>8}  {share:>7}  {m / mine:>6.2f}x")
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
