"""Fuzz the readers for many executions and count the exceptions that are not InputError (goal: 0).

Runs tests/fuzz/fuzz_readers.py (atheris / libFuzzer) in count mode: an exception other than
InputError is recorded by type and place (the innermost frame of ours) and the run goes on.
The corpus starts from tests/fuzz/seeds (copied, so the seeds are never touched) or from
--corpus DIR, which keeps what the fuzzer learns between runs.

    .venv/bin/python benchmarks/bench_fuzz.py                  # 1,000,000 executions
    .venv/bin/python benchmarks/bench_fuzz.py --runs 20000 --corpus /tmp/perf-fuzz-corpus

Prints: executions, exec/s, the count of non-InputError exceptions and each place.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUZZ = ROOT / "tests" / "fuzz" / "fuzz_readers.py"
SEEDS = ROOT / "tests" / "fuzz" / "seeds"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1_000_000, help="executions (libFuzzer -runs)")
    ap.add_argument("--corpus", type=Path, help="corpus directory to use and grow (default: a copy of the seeds)")
    ap.add_argument("--max-time", type=int, default=0, help="stop after this many seconds as well (0: no limit)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="perf-bench-fuzz-") as tmp:
        corpus = args.corpus or Path(tmp) / "corpus"
        if not corpus.exists() or not any(corpus.iterdir()):
            shutil.copytree(SEEDS, corpus, dirs_exist_ok=True)
        counts = Path(tmp) / "counts.json"
        cmd = [
            sys.executable,
            str(FUZZ),
            str(corpus),
            f"-runs={args.runs}",
            "-timeout=60",
            "-rss_limit_mb=4096",
            f"-artifact_prefix={tmp}/",
            "-print_final_stats=1",
        ]
        if args.max_time:
            cmd.append(f"-max_total_time={args.max_time}")
        t0 = time.monotonic()
        r = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, env={**_env(), "PERF_FUZZ_COUNT": str(counts)}, check=False
        )
        wall = time.monotonic() - t0
        done = re.search(r"Done (\d+) runs", r.stderr)
        runs = int(done[1]) if done else json.loads(counts.read_text())["executions"] if counts.exists() else 0
        found = json.loads(counts.read_text()) if counts.exists() else {"errors": 0, "by_place": {}}
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            print(f"fuzzer exited with {r.returncode} (a crash outside the count: a timeout, an OOM)", file=sys.stderr)
        print(f"executions: {runs:,} in {wall:,.0f} s ({runs / wall:,.1f} exec/s)")
        print(f"non-InputError exceptions: {found['errors']}")
        for place, n in sorted(found["by_place"].items(), key=lambda kv: -kv[1]):
            print(f"  {n:>8,}  {place}")
        sys.exit(0 if found["errors"] == 0 and r.returncode == 0 else 1)


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


if __name__ == "__main__":
    main()
