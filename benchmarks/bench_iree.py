"""IREE beside eager PyTorch and torch.compile on this machine's CPU, for the tiny MLP and
attention blocks (written out, and with F.scaled_dot_product_attention) of tests/iree_models.py:
compile time by phase (IREE: the pass tree's top-level pipelines; torch.compile: its first call)
and run time per call (IREE: by dispatch, from its HAL profiling). Each (model, backend) runs in
its own process, one after the other.

    python benchmarks/bench_iree.py [--runs 50]

The figures go in benchmarks/README.md (issue 18's note)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

MODELS = {"mlp": ("mlp", (16, 64)), "attention": ("attention", (2, 8, 32)), "sdpa": ("sdpa", (2, 8, 32))}
BACKENDS = ("eager", "torch.compile", "iree")


def one(model: str, backend: str, runs: int) -> dict:
    """Measure one (model, backend) in this process."""
    import torch

    import iree_models

    factory, shape = MODELS[model]
    torch.manual_seed(0)
    m = getattr(iree_models, factory)().eval()
    x = torch.randn(*shape)
    if backend == "iree":
        from profiler.api.iree import profile_iree

        r = profile_iree(m, [x], runs=runs)
        roots = sorted(r.passes.roots, key=lambda n: -n.wall_ns)
        return {
            "compile_ns": r.compile_ns,
            "phases": {f"{n.name} / {n.children[0].name if n.children else ''}": n.wall_ns for n in roots[:6]},
            "rest_ns": r.passes.rest_ns,
            "call_ns": r.iree_call_ns,
            "dispatch_ns": r.iree_ns,
            "dispatches": {d.name: d.per_call_ns for d in r.dispatches.itertuples()},
        }
    fn = torch.compile(m) if backend == "torch.compile" else m
    with torch.no_grad():
        t0 = time.perf_counter_ns()
        fn(x)  # torch.compile compiles here; eager: the warm-up call
        first = time.perf_counter_ns() - t0
        calls = []
        for _ in range(runs):
            t0 = time.perf_counter_ns()
            fn(x)
            calls.append(time.perf_counter_ns() - t0)
        call = sorted(calls)[len(calls) // 2]  # the median: preemptions on a shared CPU skew a mean
    return {"compile_ns": first if backend == "torch.compile" else 0, "call_ns": call}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "BACKEND"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], a.one[1], a.runs)))
        return
    for model in MODELS:
        res = {}
        for backend in BACKENDS:
            p = subprocess.run(
                [sys.executable, __file__, "--one", model, backend, "--runs", str(a.runs)],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            if p.returncode != 0:
                print(f"{model} {backend}: failed: {p.stderr.strip().splitlines()[-1:]}")
                continue
            res[backend] = json.loads(p.stdout.strip().splitlines()[-1])
        print(f"\n== {model} ==")
        for b, r in res.items():
            print(f"  {b:14s} compile {r['compile_ns'] / 1e6:9.1f} ms   call {r['call_ns'] / 1e3:9.1f} us")
        if "iree" in res:
            r = res["iree"]
            print("  iree compile by top-level pipeline (pass tree roots, largest first):")
            for name, ns in r["phases"].items():
                print(f"    {ns / 1e6:8.1f} ms  {name}")
            print(f"    {r['rest_ns'] / 1e6:8.1f} ms  (rest: compiler Total under no root, docs/iree.md)")
            print("  iree run time per call by dispatch:")
            for name, ns in r["dispatches"].items():
                print(f"    {ns / 1e3:8.2f} us  {name}")
            if "eager" in res:
                print(
                    f"  eager / iree per call: {res['eager']['call_ns'] / r['call_ns']:.2f}x "
                    f"(IREE: the whole VM call; its dispatches {r['dispatch_ns'] / 1e3:.1f} us)"
                )
            if "torch.compile" in res:
                tc = res["torch.compile"]
                print(
                    f"  torch.compile / iree per call: {tc['call_ns'] / r['call_ns']:.2f}x;"
                    f" compile: {tc['compile_ns'] / r['compile_ns']:.2f}x"
                )


if __name__ == "__main__":
    main()
