"""The columnar cache (profiler/api/cache.py) against parsing the trace again.

Usage: bench_cache.py [TRACE ...] [--runs N] [--big PATH]

For each trace, whole processes side by side (alternating, so machine noise hits both):
  load:    a fresh interpreter that times `load_trace(path)` alone (imports excluded), parsing
           (PERF_NO_CACHE=1) against reading the cache entry a first run wrote;
  analyze: `perf analyze TRACE --json` wall time from spawn to exit, --no-cache against cached.
Prints medians (wall, and the load's CPU seconds: steadier on a shared machine) and the ratio
parse / cached (the issue's goal: at least 10x for the load).
The cache lives in a temporary folder, removed at the end. `--big PATH` adds a generated trace
(benchmarks/make_big_trace.py writes one: make_big_trace.py PATH --min-gb 1); for it only the load
is compared (a full analysis of 1 GiB in memory takes minutes and several GiB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from whole_process import run

REPO = Path(__file__).resolve().parent.parent
DEFAULT = REPO / "tests/data/traces/ddp_allreduce_v100/df_index_resolver.json.gz"
LOAD = (
    "import sys, time; from profiler.api import load_trace; t = time.perf_counter(); c = time.process_time(); "
    "load_trace(sys.argv[1]); print(time.perf_counter() - t, time.process_time() - c)"
)


def timed_load(path: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of load_trace(path) in a fresh interpreter (imports excluded)."""
    out = subprocess.run([sys.executable, "-c", LOAD, str(path)], env=env, cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"load of {path} exited {out.returncode}:\n{out.stderr[-3000:]}")
    wall, cpu = out.stdout.split()[-2:]
    return float(wall), float(cpu)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", type=Path, default=[DEFAULT])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big", type=Path, help="also a generated trace (make_big_trace.py)")
    args = ap.parse_args(argv)
    traces = [*args.traces, *([args.big] if args.big else [])]
    with tempfile.TemporaryDirectory(prefix="perf-bench-cache-") as cache:
        base = {**os.environ, "PYTHONPATH": str(REPO), "PERF_CACHE_DIR": cache}
        base.pop("PERF_NO_CACHE", None)
        parse_env = {**base, "PERF_NO_CACHE": "1"}
        print(f"{'trace':<34} {'what':<8} {'parse s':>9} {'cached s':>9} {'ratio':>7}  (median of {args.runs})")
        for path in traces:
            timed_load(path, base)  # writes the entry
            pairs = [(timed_load(path, parse_env), timed_load(path, base)) for _ in range(args.runs)]
            loads = [(p[0], c[0]) for p, c in pairs]
            cpu = [(p[1], c[1]) for p, c in pairs]
            cmd = [sys.executable, "-m", "profiler", "analyze", str(path), "--json"]
            walls = [
                (run([*cmd, "--no-cache"], env=base, cwd=REPO).seconds, run(cmd, env=base, cwd=REPO).seconds)
                for _ in range(args.runs if path != args.big else 0)  # the big one: the load only
            ]
            name = path.parent.name if path.name.startswith("df_") else path.name
            for what, timed in (("load", loads), ("load cpu", cpu), ("analyze", walls)):
                if not timed:
                    continue
                parse = statistics.median(p for p, _ in timed)
                cached = statistics.median(c for _, c in timed)
                print(f"{name[:34]:<34} {what:<8} {parse:>9.3f} {cached:>9.3f} {parse / cached:>6.1f}x")
            size = sum(f.stat().st_size for f in Path(cache, "traces").rglob("*") if f.is_file())
            print(f"{'':<34} cache now {size / 2**20:.1f} MiB for {len(list(Path(cache, 'traces').iterdir()))} traces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
