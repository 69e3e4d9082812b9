"""What the roofline analysis adds to ingestion, on the real traces that record shapes.

Usage: .venv/bin/python benchmarks/bench_analysis.py [TRACE ...]

Prints, per trace, the best of 5 runs of `load_trace` (ingest) and of the roofline analysis
(`analyze` with the sections summary, ops, roofline, timeline and advice: units, cost model,
floors, bound, the wall equation, the tables) and their ratio. Target (issue 3): the roofline
analysis adds at most 50% to ingest time. The insight sections added later (critical path,
memory, LLM, modules) are timed on their own in the last column, against no target.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from profiler import analyze, load_trace
from profiler.api import SECTIONS

TRACES = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces"
DEFAULT = [
    TRACES / "b200_eager" / "eager_trace.json.gz",
    TRACES / "resnet50_legacy_v100" / "worker0.1623143089861.pt.trace.json.gz",
]
TARGET = 0.5
ROOFLINE = ("summary", "ops", "roofline", "timeline", "advice")
INSIGHT = tuple(s for s in SECTIONS if s not in ROOFLINE)


def best(fn, runs: int = 5) -> tuple[float, object]:
    out, t_best = None, float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t0)
    return t_best, out


def main(paths: list[Path]) -> int:
    print(
        f"{'trace':28} {'ingest s':>9} {'roofline s':>11} {'roofline/ingest':>16}   target <= {TARGET:.0%}"
        f"   {'+ insight s':>11} {'all/ingest':>11}"
    )
    for p in paths:
        t_load, trace = best(lambda: load_trace(p))
        t_an, _ = best(lambda: analyze(trace, sections=ROOFLINE))
        t_all, _ = best(lambda: analyze(trace, sections=SECTIONS))
        ratio = t_an / t_load
        print(
            f"{p.parent.name:28} {t_load:9.3f} {t_an:11.3f} {ratio:15.0%}   {'PASS' if ratio <= TARGET else 'FAIL':>14}"
            f"   {t_all - t_an:11.3f} {t_all / t_load:10.0%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main([Path(a) for a in sys.argv[1:]] or DEFAULT))
