"""Bounded-memory analysis (perf analyze --memory-limit) against the in-memory path, on traces
generated from a real one (benchmarks/make_big_trace.py: its steps repeated with shifted
timestamps and ids).

Usage: bench_stream.py TRACE [TRACE ...] [--limit 2G] [--in-memory-max-gib 1.5]

Each trace, whole processes one after another (cache off, so both parse):
  streamed:  perf analyze TRACE --json --memory-limit LIMIT (the trace is larger than LIMIT/3)
  in-memory: perf analyze TRACE --json --section summary --section ops --memory-limit 1T (the
             same sections, all in memory), only for traces up to --in-memory-max-gib.
Prints decompressed size, wall and CPU seconds, seconds per GiB and peak memory (whole process
tree, benchmarks/whole_process.py), and whether the peak stayed under the limit. That both
paths give the same numbers is tests/test_stream.py's job.
Make the traces first: make_big_trace.py /tmp/big1.json --min-gb 1; ... --min-gb 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from whole_process import run

REPO = Path(__file__).resolve().parent.parent
GiB = 2**30
MiB = 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--limit", default="2G")
    ap.add_argument("--in-memory-max-gib", type=float, default=1.5)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from profiler.api.stream import decompressed_size
    from profiler.model.files import parse_size

    limit = parse_size(args.limit)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PERF_NO_CACHE": "1"}
    base = [sys.executable, "-m", "profiler", "analyze"]
    print(f"{'trace':<18} {'GiB':>5} {'path':<10} {'wall s':>8} {'cpu s':>8} {'s/GiB':>7} {'peak MiB':>9}  limit")
    for path in args.traces:
        gib = decompressed_size(path) / GiB
        runs = [("streamed", [*base, str(path), "--json", "--memory-limit", args.limit])]
        if gib <= args.in_memory_max_gib:
            runs.append(
                (
                    "in-memory",
                    [*base, str(path), "--json", "--section", "summary", "--section", "ops", "--memory-limit", "1T"],
                )
            )
        for what, cmd in runs:
            r = run(cmd, env=env, cwd=REPO, timeout=7200)
            under = f"{'under' if r.peak_bytes < limit else 'OVER'} {args.limit}" if what == "streamed" else ""
            print(
                f"{path.name[:18]:<18} {gib:>5.2f} {what:<10} {r.seconds:>8.1f} {r.cpu_seconds:>8.1f} "
                f"{r.seconds / gib:>7.1f} {r.peak_bytes / MiB:>9.0f}  {under}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
