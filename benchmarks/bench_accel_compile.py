"""Compile time of the Llama-2-7B- and Llama-3-8B-shaped decoders (32 layers each; shapes in
accelerator/workloads/llama.py with their sources) on the accelerator compiler, per pass.
Weights live on the meta device: never materialised, compile only.

    python benchmarks/bench_accel_compile.py [--workload llama2-7b --workload llama3-8b]
        [--prompt 128] [--precision bf16] [--accel datacenter-npu] [--no-reuse] [--no-replay]

Issue 12's goal: under 30 s for Llama-2-7B with identical blocks compiled once (blocks.py);
`--no-reuse` measures the whole-model export and decomposition it replaces, `--no-replay` the
fusion and tiling of every instance (instead of the first instance's decisions replayed)
(benchmarks/README.md has the figures)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelerator.compiler.pipeline import compile_model  # noqa: E402
from accelerator.hardware import load_accel  # noqa: E402
from accelerator.workloads.llama import LLAMA2_7B, LLAMA3_8B, meta_llama  # noqa: E402

CONFIGS = {"llama2-7b": LLAMA2_7B, "llama3-8b": LLAMA3_8B}
GOAL_S = 30.0  # issue 12: Llama-2-7B-shaped decoder compiled in under 30 s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", action="append", choices=sorted(CONFIGS))
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--accel", default="datacenter-npu")
    ap.add_argument("--chips", type=int, default=1)
    ap.add_argument("--no-reuse", action="store_true", help="export and decompose every block")
    ap.add_argument("--no-replay", action="store_true", help="fuse and tile every block instance")
    args = ap.parse_args()
    hw = load_accel(args.accel)
    for name in args.workload or sorted(CONFIGS):
        t0 = time.perf_counter()
        model, inputs = meta_llama(CONFIGS[name], args.prompt)
        build = time.perf_counter() - t0
        c = compile_model(
            model,
            inputs,
            hw,
            args.precision,
            reuse_blocks=not args.no_reuse,
            replay_blocks=not args.no_replay,
            chips=args.chips,
        )
        reuse = "every block compiled" if args.no_reuse else "identical blocks compiled once"
        reuse += ", fusion and tiling per instance" if args.no_replay and not args.no_reuse else ""
        print(f"{name}-shaped, prompt {args.prompt}, {args.precision} on {args.accel} x{args.chips}, {reuse}")
        print(f"{'build (meta)':<14}{build:>8.2f} s")
        for row in c.log:
            print(
                f"{row.name:<14}{row.wall_ns / 1e9:>8.2f} s  ops {row.ops_before} -> {row.ops_after}"
                f"  decisions {len(row.decisions)}"
            )
        total = sum(r.wall_ns for r in c.log) / 1e9
        verdict = "meets" if total < GOAL_S else "MISSES"
        print(f"{'total':<14}{total:>8.2f} s  ({verdict} the goal < {GOAL_S:g} s)\n")


if __name__ == "__main__":
    main()
