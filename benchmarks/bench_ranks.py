"""Scaling of `perf analyze DIR --engine dask` with the number of workers, on synthetic rank sets.

The sets are copies of DLRM rank 0 (tests/data/traces/dlrm_8rank_v100) with their rank and world
size rewritten (tests/rank_sets.py), rank 3 planted as a 2 ms straggler: 64 ranks of the whole
file (3,290 events each), and 1,024 ranks of its last two collectives (923 events each, so the
set is generated and read in minutes on this 2-core machine, not hours).

Each configuration runs as a whole process (benchmarks/bench_ranks.py --child): the Dask client
reads the set on a LocalCluster of N worker processes, merges it and analyzes it; it reports its
wall time and its own peak RSS (ru_maxrss of the client process; the workers are other
processes). Every run checks that no rank was lost or counted twice: ranks 0..n-1 each hold the
source rank's event count, and the planted straggler is found.

The analysis run is the `ranks` section by default (units classified, the cross-rank tables;
`perf analyze DIR --section ranks`): the timeline, critical path and advice per rank are the
local pipeline's, the same on either engine, and are left out (--sections all runs them).

Usage: bench_ranks.py [--sets 64,1024] [--workers 1,2,4] [--keep DIR] [--sections ranks|all|a,b]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

STRAGGLER, DELAY_US = 3, 2000
#: ranks -> collectives kept of the source rank (None: all of it)
SETS = {64: None, 1024: 2}


def child(directory: Path, workers: int, sections: tuple[str, ...]) -> None:
    """One measured run: read on Dask, analyze, check; one JSON line on stdout."""
    import resource

    from profiler.api import analyze, load_ranks, load_trace

    t0 = time.perf_counter()
    got = load_ranks(directory, workers=workers)
    t_read = time.perf_counter() - t0
    a = analyze(got.trace, instances=got.instances, sections=sections)
    wall = time.perf_counter() - t0
    files = sorted(directory.iterdir())
    per_rank = got.trace.events.groupby("rank").size()
    one = len(load_trace(files[0]).events)  # every rank is a copy of this one
    ok_ranks = per_rank.index.tolist() == list(range(len(files))) and (per_rank == one).all()
    s = a.stragglers
    print(
        json.dumps(
            {
                "ranks": len(files),
                "workers": workers,
                "wall_s": wall,
                "read_s": t_read,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "events": int(per_rank.sum()),
                "events_per_rank": one,
                "ranks_ok": bool(ok_ranks),
                "straggler": int(s["rank"].iat[0]) if len(s) else None,
                "delay_ns": int(s["delay_ns"].iat[0]) if len(s) else None,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=3, metavar=("DIR", "WORKERS", "SECTIONS"))
    ap.add_argument(
        "--sections",
        default="ranks",
        help="analysis sections, comma-separated (default: ranks, what `perf analyze DIR --section ranks` runs; "
        "'all' for every section)",
    )
    ap.add_argument("--sets", default="64,1024")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--keep", type=Path, help="generate the sets here (kept); default: a temporary directory")
    args = ap.parse_args()
    if args.child:
        from profiler.api import SECTIONS

        names = args.child[2]
        child(Path(args.child[0]), int(args.child[1]), SECTIONS if names == "all" else tuple(names.split(",")))
        return
    from tests.rank_sets import source_doc, write_rank_set

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_ranks_"))
    for n in map(int, args.sets.split(",")):
        d = root / f"ranks{n}"
        if not d.is_dir() or len(list(d.iterdir())) != n:
            t0 = time.perf_counter()
            write_rank_set(d, n, straggler=STRAGGLER, delay_us=DELAY_US, doc=source_doc(last_collectives=SETS.get(n)))
            print(f"generated {n} ranks in {time.perf_counter() - t0:.1f} s ({d})", flush=True)
        base = None
        for w in map(int, args.workers.split(",")):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(d), str(w), args.sections],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            base = base or r["wall_s"]
            assert r["ranks_ok"], f"ranks lost or counted twice: {r}"
            assert r["straggler"] == STRAGGLER and abs(r["delay_ns"] - DELAY_US * 1000) <= 0.05 * DELAY_US * 1000, r
            print(
                f"[{args.sections}] {n:5d} ranks  {w} worker(s)  "
                f"wall {r['wall_s']:6.1f} s (read {r['read_s']:6.1f} s)  "
                f"speedup x{base / r['wall_s']:.2f}  client peak RSS {r['peak_rss_mib']:6.0f} MiB  "
                f"events {r['events']:,} ({r['events_per_rank']:,}/rank, checked)  "
                f"straggler rank {r['straggler']} {r['delay_ns'] / 1e6:.3f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
