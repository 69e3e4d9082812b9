"""Start-up: how long `perf --help` and `perf analyze` of a small trace take as whole processes,
against `python -c pass` (the interpreter's own start) and against importing what analyze imports.

Usage: .venv/bin/python benchmarks/bench_startup.py [--runs 11] [--trace PATH] [--ours-repo PATH]

Each command runs --runs times, one after another; medians of wall and CPU time. Goals (issue
11): `perf --help` under 0.3 s; `perf analyze` of a ~1 MB trace not dominated by imports (the
import-only process is printed as a share of it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from whole_process import median_of

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TRACE = REPO / "tests" / "data" / "traces" / "b200_eager" / "eager_trace.json.gz"  # 0.8 MB gzip
GOAL_HELP_S = 0.3
# everything `perf analyze --json` imports before it reads the file (no pydantic: the command's
# values are read without it, profiler/cli/plain_values.py)
IMPORTS = (
    "import profiler.cli, profiler.api, profiler.render.json, profiler.render.text, collectors.kineto, "
    "analysis.critical_path, "
    "analysis.memory, analysis.llm, analysis.modules, analysis.advice, analysis.timeline, analysis.roofline"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--ours-repo", type=Path, default=REPO, help="run ours from this checkout (e.g. an older commit)")
    args = ap.parse_args(argv)
    repo = args.ours_repo.resolve()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p)}
    py = sys.executable
    commands = {
        "python -c pass": [py, "-c", "pass"],
        "perf --help": [py, "-m", "profiler", "--help"],
        "import analyze's modules": [py, "-c", IMPORTS],
        f"perf analyze {args.trace.name} --json": [py, "-m", "profiler", "analyze", str(args.trace), "--json"],
    }
    print(
        f"medians of {args.runs} whole processes; {args.trace} is {args.trace.stat().st_size / 2**20:.2f} MiB on disk"
    )
    print(f"{'command':52} {'wall s':>8} {'cpu s':>8} {'x pass':>8}")
    res = {}
    for label, cmd in commands.items():
        s = res[label] = median_of(cmd, args.runs, env=env, cwd=repo)
        print(
            f"{label:52} {s.seconds:8.3f} {s.cpu_seconds:8.3f} {s.seconds / res['python -c pass'].seconds:8.1f}",
            flush=True,
        )
    helps = res["perf --help"].seconds
    analyze = res[f"perf analyze {args.trace.name} --json"]
    imports = res["import analyze's modules"]
    print(
        f"perf --help: {helps:.3f} s (goal < {GOAL_HELP_S:g} s: {'PASS' if helps < GOAL_HELP_S else 'FAIL'}); "
        f"{helps / res['python -c pass'].seconds:.1f}x python -c pass"
    )
    print(
        f"perf analyze: imports are {imports.seconds / analyze.seconds:.0%} of its wall time "
        f"({imports.cpu_seconds / analyze.cpu_seconds:.0%} of its CPU time)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
