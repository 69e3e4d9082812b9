"""The speedup each strategy finds within 30 trials on the Inductor runner (the real runtime on
this CPU: torch.compile with Inductor's options, profiler/autotune/inductor.py), on the MLP and
the Llama-style decoder block, side by side in one run, with the measured noise.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_autotune_inductor.py [--budget 30]
        [--workload mlp|block|all] [--threads 1] [--confirm 3] [--json OUT]

Workloads (fp32, inference): `mlp`, the MLP of accelerator/workloads/mlp.py at 256 -> 1024 ->
256 on a batch of 64 rows; `block`, the decoder block of bench_autotune.py (TinyLlama, 1 layer,
dim 256, SwiGLU 704, 4 heads / 2 KV heads, prefill of 64 tokens).

Each strategy (roofline, random, TPE; seed 0) runs through the real driver
(profiler/autotune/loop.py) with its own database, its runner measuring each candidate once per
process (a candidate two strategies propose is compiled and measured once: they read the same
measurement, so a difference between strategies is never noise between two measurements of one
point). A trial's time is the median of the runner's repeats (15 x `number` calls after 3
warm-up calls). Noise, measured, not assumed: the baseline and each strategy's best are
compiled and measured again `--confirm` times from scratch (a fresh dynamo reset each); the
table gives the confirmed speedup (median of the baseline's confirmations / median of the
best's; also by each measurement's minimum, the statistic least moved by other work on the
machine) with the confirmations, and each trial's own IQR.

`--threads` sets torch's intra-op threads (1 by default: on a machine shared with other work,
OpenMP threads that spin on a busy core make a 4 x 64 GEMM take milliseconds)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from profiler.autotune.db import Study, TrialDB
from profiler.autotune.inductor import InductorRunner, inductor_space, load_inductor_workload
from profiler.autotune.loop import best_trial, tune
from profiler.autotune.runner import TrialResult
from profiler.autotune.space import Candidate
from profiler.autotune.strategy import make_strategy

STRATEGIES = ("roofline", "random", "tpe")


def workload(name: str):  # type: ignore[no-untyped-def]
    import torch

    from accelerator.workloads.llama import LlamaConfig, tiny_llama
    from accelerator.workloads.mlp import MLP

    if name == "mlp":
        torch.manual_seed(0)
        return MLP(256, 1024, 256).eval(), (torch.randn(64, 256),)
    cfg = LlamaConfig(n_layers=1, dim=256, hidden=704, n_heads=4, n_kv_heads=2, vocab=256, max_seq=64)
    return tiny_llama(prompt=64, cfg=cfg)


class Measured:
    """The Inductor runner, each candidate measured once per process (module docstring)."""

    name = "inductor"

    def __init__(self, runner: InductorRunner):
        self.runner, self.hardware = runner, runner.hardware
        self.results: dict[str, TrialResult] = {}
        self.wall = 0.0

    def run(self, c: Candidate) -> TrialResult:
        if c.hash not in self.results:
            start = time.perf_counter()
            self.results[c.hash] = self.runner.run(c)
            self.wall += time.perf_counter() - start
            r = self.results[c.hash]
            what = f"{r.time_ns / 1e3:,.1f} us" if r.time_ns else r.failure[:80]
            print(f"    measured {len(self.results)}: {c.describe()[:90]}: {what}", file=sys.stderr, flush=True)
        return self.results[c.hash]


def confirm(runner: InductorRunner, c: Candidate, times: int) -> list[tuple[float, float]]:
    """(median, min) per call (ns) of `times` fresh compiles and measurements of `c`."""
    out = []
    for _ in range(times):
        r = runner.run(c)
        if r.time_ns is not None:
            out.append((float(r.time_ns), float(r.summary["measure"]["min_ns"])))
    return out


def ratio(base: list[tuple[float, float]], best: list[tuple[float, float]], i: int) -> float | None:
    """median over confirmations of the baseline's statistic i (0 median, 1 min) / the best's."""
    if not base or not best:
        return None
    return statistics.median(b[i] for b in base) / statistics.median(b[i] for b in best)


def bench(name: str, budget: int, n_confirm: int) -> dict:
    m, xs = workload(name)
    w = load_inductor_workload(name, m, xs, "fp32")
    space = inductor_space(name, "fp32")
    runner = InductorRunner(w, space, analyze=True)
    measured = Measured(runner)
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for s in STRATEGIES:
            print(f"{name}: {s}", file=sys.stderr, flush=True)
            db = TrialDB(Path(tmp) / f"{s}.sqlite")
            study = Study(w.hash, space.accel, "inductor", name)
            trials = tune(space, measured, make_strategy(s, space, 0), db, study, budget, 0)
            db.close()
            best = best_trial(trials)
            rows[s] = {"trials": trials, "best": best}
    base_c = space.candidate({})
    base_trial = rows[STRATEGIES[0]]["trials"][0]
    base_conf = confirm(runner, base_c, n_confirm)
    out: dict[str, Any] = {
        "workload": name,
        "hardware": space.accel,
        "space_size": space.size,
        "points_measured": len(measured.results),
        "failed_points": sum(r.time_ns is None for r in measured.results.values()),
        "measure_wall_s": round(measured.wall, 1),
        "baseline_ns": base_trial.time_ns,
        "baseline_iqr_ns": base_trial.trace_summary["measure"]["iqr_ns"],
        "baseline_confirmed_ns": base_conf,
        "strategies": {},
    }
    for s in STRATEGIES:
        best = rows[s]["best"]
        c = Candidate.from_json(best.candidate)
        conf = confirm(runner, c, n_confirm) if best.candidate else base_conf
        found_at = best.seq + 1
        out["strategies"][s] = {
            "best": best.candidate,
            "best_ns": best.time_ns,
            "best_iqr_ns": best.trace_summary["measure"]["iqr_ns"],
            "found_at_trial": found_at,
            "speedup_stored": base_trial.time_ns / best.time_ns,
            "confirmed_ns": conf,
            "speedup_confirmed": ratio(base_conf, conf, 0),
            "speedup_confirmed_min": ratio(base_conf, conf, 1),
            "first_findings": [t.finding for t in rows[s]["trials"][1:4]],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=30)
    ap.add_argument("--workload", choices=("mlp", "block", "all"), default="all")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--confirm", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    names = ("mlp", "block") if args.workload == "all" else (args.workload,)
    results = []
    for n in names:
        results.append(bench(n, args.budget, args.confirm))
        report(results[-1])
        if args.json:  # after each workload: a long run stopped early keeps what it measured
            args.json.write_text(json.dumps(results, indent=2, default=str))


def report(r: dict) -> None:
    """The table of one workload (module docstring), on stdout."""
    print(
        f"\n{r['workload']} on {r['hardware']}: {r['points_measured']} of {r['space_size']} points measured "
        f"({r['failed_points']} failed) in {r['measure_wall_s']} s; baseline {r['baseline_ns'] / 1e3:,.1f} us "
        f"(IQR {r['baseline_iqr_ns'] / 1e3:,.1f} us; confirmations "
        + ", ".join(f"{v[0] / 1e3:,.1f}" for v in r["baseline_confirmed_ns"])
        + " us)"
    )
    print(
        f"{'strategy':<10}{'best us':>10}{'IQR us':>9}{'at trial':>9}{'speedup':>9}{'confirmed':>11}"
        f"{'by min':>9}  best plan"
    )
    for s, v in r["strategies"].items():
        conf = f"{v['speedup_confirmed']:.3f}x" if v["speedup_confirmed"] else "-"
        by_min = f"{v['speedup_confirmed_min']:.3f}x" if v["speedup_confirmed_min"] else "-"
        plan = "; ".join(f"{k.split(':', 1)[1]}={o}" for k, o in v["best"].items()) or "(baseline)"
        print(
            f"{s:<10}{v['best_ns'] / 1e3:>10,.1f}{v['best_iqr_ns'] / 1e3:>9,.1f}{v['found_at_trial']:>9}"
            f"{v['speedup_stored']:>8.3f}x{conf:>11}{by_min:>9}  {plan}"
        )
        seen = ", ".join(f"{a / 1e3:,.1f}/{b / 1e3:,.1f}" for a, b in v["confirmed_ns"])
        print(
            f"{'':<10}confirmations (median/min us): {seen}; "
            f"first moves: {' | '.join(f[:70] for f in v['first_findings'])}"
        )


if __name__ == "__main__":
    main()
