"""What the user waits for: the whole `perf analyze --json` (every section) as one process, next to
the bare parse of the same file and HTA's load + temporal breakdown, each a whole process.

Usage: .venv/bin/python benchmarks/bench_analyze.py [TRACE ...] [--big] [--runs 5] [--hta-runs N]

Default trace: tests/data/traces/ddp_allreduce_v100 (51 MiB of JSON, 216k events); --big adds
benchmarks/data/big_trace.json (1 GiB, made by make_big_trace.py when absent). Contenders, one
after another (never side by side in time: two cores), medians of --runs:

- bare: `python -c` gunzip (when .gz) + orjson.loads of the file: the floor for any Python tool;
- ours: `python -m profiler analyze TRACE --json` (every section), stdout to /dev/null;
- hta: HolisticTraceAnalysis' TraceAnalysis(trace_dir) + get_temporal_breakdown, in
  benchmarks/.venv-hta (bash benchmarks/setup_hta_env.sh); skipped when that venv is missing.

Time is wall time from spawn to exit, imports included, from compiled bytecode as installed
(PYTHONDONTWRITEBYTECODE is dropped for the contenders, so the first run writes it). Memory: peak
RSS of the process tree (benchmarks/whole_process.py) minus that of a process that only imports
the same modules (the import baseline), over the uncompressed trace size. Goals (issue 11): ours <= 1.5x bare,
ours >= 10x faster than HTA, ours' memory <= 2x the uncompressed trace.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
from pathlib import Path

from whole_process import Summary, median_of

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT = REPO / "tests" / "data" / "traces" / "ddp_allreduce_v100" / "df_index_resolver.json.gz"
BIG = HERE / "data" / "big_trace.json"
HTA_PYTHON = HERE / ".venv-hta" / "bin" / "python"
MiB = 2**20
GOAL_VS_BARE, GOAL_VS_HTA, GOAL_MEM = 1.5, 10.0, 2.0

BARE_IMPORTS = "import gzip, sys, orjson"
BARE = (
    BARE_IMPORTS
    + """
data = open(sys.argv[1], "rb").read()
orjson.loads(gzip.decompress(data) if data[:2] == b"\\x1f\\x8b" else data)
"""
)
OURS_IMPORTS = (
    "import profiler.cli, profiler.api.pipeline, profiler.render.json, profiler.render.text, collectors.kineto, "
    "analysis.roofline"
)
HTA_IMPORTS = "import logging, os, shutil, sys, tempfile; from hta.trace_analysis import TraceAnalysis"
# HTA takes a directory and reads every trace in it: give it one holding a link to this trace
HTA = (
    HTA_IMPORTS
    + """
logging.disable(logging.WARNING)
tmp = tempfile.mkdtemp(prefix="hta-bench-")
os.symlink(os.path.abspath(sys.argv[1]), os.path.join(tmp, os.path.basename(sys.argv[1])))
try:
    TraceAnalysis(trace_dir=tmp).get_temporal_breakdown(visualize=False)
finally:
    shutil.rmtree(tmp)
"""
)


def uncompressed_size(path: Path) -> int:
    """Bytes of JSON; reading it all also puts the file in the page cache for every contender."""
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    total = 0
    with gzip.open(path, "rb") if gz else open(path, "rb") as fh:
        while chunk := fh.read(16 * MiB):
            total += len(chunk)
    return total


def contenders(trace: Path, hta_python: Path) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (command, the same interpreter importing only what the command imports)."""
    py = sys.executable
    out = {
        "bare": ([py, "-c", BARE, str(trace)], [py, "-c", BARE_IMPORTS]),
        "ours": ([py, "-m", "profiler", "analyze", str(trace), "--json"], [py, "-c", OURS_IMPORTS]),
    }
    if hta_python.exists():
        out["hta"] = ([str(hta_python), "-c", HTA, str(trace)], [str(hta_python), "-c", HTA_IMPORTS])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--big", action="store_true", help=f"also {BIG.relative_to(REPO)} (generated when absent)")
    ap.add_argument("--runs", type=int, default=5, help="runs per contender (median reported)")
    ap.add_argument("--hta-runs", type=int, help="runs for HTA (default --runs; it takes minutes on 1 GiB)")
    ap.add_argument("--hta-python", type=Path, default=HTA_PYTHON)
    ap.add_argument("--contenders", default="bare,ours,hta", help="comma list of bare, ours, hta")
    ap.add_argument("--ours-repo", type=Path, default=REPO, help="run ours from this checkout (e.g. an older commit)")
    args = ap.parse_args(argv)
    traces = [t.resolve() for t in args.traces] or [DEFAULT]
    if args.big:
        if not BIG.exists():
            subprocess.run([sys.executable, str(HERE / "make_big_trace.py"), str(BIG)], check=True)
        traces.append(BIG)
    repo = args.ours_repo.resolve()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p)}
    # an installed package runs from compiled bytecode (pip writes it): without this, a checkout
    # under PYTHONDONTWRITEBYTECODE=1 recompiles ours on every run (~0.2 s) while HTA's is cached
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not args.hta_python.exists():
        print(f"hta: skipped ({args.hta_python} missing: bash benchmarks/setup_hta_env.sh)")
    print(
        f"goals: ours <= {GOAL_VS_BARE:g}x bare parse; ours >= {GOAL_VS_HTA:g}x faster than HTA; "
        f"ours' peak memory above imports <= {GOAL_MEM:g}x the uncompressed trace"
    )
    for trace in traces:
        size = uncompressed_size(trace)
        print(f"\n== {trace.name} ({size / MiB:,.1f} MiB uncompressed); medians of {args.runs}, whole processes")
        print(
            f"{'contender':6} {'wall s':>8} {'cpu s':>8} {'imports MiB':>12} {'peak MiB':>10} {'above/trace':>12}  runs"
        )
        res: dict[str, Summary] = {}
        chosen = {c.strip() for c in args.contenders.split(",")}
        for name, (cmd, imports) in contenders(trace, args.hta_python).items():
            if name not in chosen:
                continue
            n = args.hta_runs or args.runs if name == "hta" else args.runs
            base = median_of(imports, 3, env=env, cwd=repo)
            s = res[name] = median_of(cmd, n, env=env, cwd=repo)
            above = s.peak_bytes - base.peak_bytes
            print(
                f"{name:6} {s.seconds:8.2f} {s.cpu_seconds:8.2f} {base.peak_bytes / MiB:12.0f} "
                f"{s.peak_bytes / MiB:10.0f} {above / size:11.2f}x  {', '.join(f'{x:.2f}' for x in s.all_seconds)}",
                flush=True,
            )
            if name == "ours":
                mem_ratio = above / size
        if "ours" not in res:
            continue
        ours = res["ours"].seconds
        if "bare" in res:
            print(f"ours / bare parse: {ours / res['bare'].seconds:.2f}x (goal <= {GOAL_VS_BARE:g}x)")
        if "hta" in res:
            print(f"HTA / ours: {res['hta'].seconds / ours:.2f}x faster (goal >= {GOAL_VS_HTA:g}x)")
        print(f"ours' peak above imports / trace: {mem_ratio:.2f}x (goal <= {GOAL_MEM:g}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
