"""Perfetto export and re-read against reading the original Kineto JSON, side by side.

Usage: .venv/bin/python benchmarks/bench_perfetto.py [TRACE]   (default: the largest real trace)

Prints, best of 3 each: reading the JSON (load_trace), the analysis the export attaches,
writing the .pftrace, reading it back, writing Chrome JSON, and the ratios to the JSON read.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collectors.perfetto import load_perfetto, write_chrome_json, write_perfetto
from profiler.api import analyze, load_trace

TRACES = ROOT / "tests" / "data" / "traces"


def best(fn, n: int = 3) -> tuple[float, object]:
    times, out = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else max(TRACES.glob("*/*.json.gz"), key=lambda p: p.stat().st_size)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "t.pftrace"
        t_json, trace = best(lambda: load_trace(src))
        t_an, units = best(lambda: analyze(trace, top=None, sections=("roofline",)).units)
        t_write, _ = best(lambda: write_perfetto(trace, out, units))
        t_read, back = best(lambda: load_perfetto(out))
        t_chrome, _ = best(lambda: write_chrome_json(trace, Path(d) / "t.json", units))
        size = out.stat().st_size
    print(
        f"trace: {src} ({len(trace.events):,} events, {len(trace.counters):,} counter samples, "
        f"{len(trace.flows):,} flows)"
    )
    print(f"{'step':32} {'seconds':>8} {'x JSON read':>12}")
    for label, t in (
        ("read Kineto JSON", t_json),
        ("analysis (units, roofline)", t_an),
        ("write .pftrace", t_write),
        ("read .pftrace back", t_read),
        ("export + re-read", t_write + t_read),
        ("write Chrome JSON", t_chrome),
    ):
        print(f"{label:32} {t:8.2f} {t / t_json:12.2f}")
    print(f".pftrace size: {size / 1e6:.1f} MB; events read back: {len(back.events):,}")


if __name__ == "__main__":
    main()
