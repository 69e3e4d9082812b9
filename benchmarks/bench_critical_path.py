"""Critical-path speed on every real trace, next to the time to ingest that trace.

Per trace folder in tests/data/traces: ingest (load_trace), the critical path of every rank with
the current analysis.critical_path ('after') and, when --old names a saved copy of an earlier
version of that module, with it too ('before'), and before / after. Each time is the best of
--repeat runs (the machine is shared; the minimum is the least disturbed run), old and new
interleaved. Both get the same classified units table (analyze(..., sections=("roofline",))).

Usage: bench_critical_path.py [--old /tmp/critical_path_old.py] [--repeat N] [FOLDER ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from functools import partial
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analysis import critical_path as new
from profiler.api import analyze, load_trace
from tests.conftest import TRACES, real_trace


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("critical_path_old", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def best_of(repeat: int, fn) -> float:
    """Seconds: the fastest of `repeat` calls of fn()."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def all_ranks(module: ModuleType, trace, units) -> None:
    for rank in trace.ranks:
        module.critical_path(trace, rank, units)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="*", help="trace folders under tests/data/traces (default: all)")
    ap.add_argument("--old", type=Path, help="a saved copy of an earlier analysis/critical_path.py")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    old = load_module(args.old) if args.old else None
    folders = args.folders or sorted(p.name for p in TRACES.iterdir() if p.is_dir() and p.name != "LICENSES")
    print(
        f"{'trace':30} {'ranks':>5} {'ingest s':>9} {'before s':>9} {'after s':>9} "
        f"{'before/after':>12} {'after/ingest':>12}"
    )
    for name in folders:
        path = real_trace(name)
        ingest = best_of(max(1, args.repeat // 2), partial(load_trace, path))
        trace = load_trace(path)
        units = analyze(trace, sections=("roofline",)).units
        after = before = float("inf")
        for _ in range(args.repeat):  # interleaved, so both see the same machine load
            after = min(after, best_of(1, partial(all_ranks, new, trace, units)))
            if old is not None:
                before = min(before, best_of(1, partial(all_ranks, old, trace, units)))
        b = f"{before:9.3f}" if old is not None else f"{'-':>9}"
        ratio = f"{before / after:11.1f}x" if old is not None else f"{'-':>12}"
        print(
            f"{name:30} {len(trace.ranks):5d} {ingest:9.3f} {b} {after:9.3f} {ratio} {after / ingest:12.2f}", flush=True
        )


if __name__ == "__main__":
    main()
