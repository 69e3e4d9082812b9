"""Synthetic rank sets derived from a real DLRM rank (tests/data/traces/dlrm_8rank_v100), for the
cross-rank tests and benchmarks/bench_ranks.py.

Every rank is a copy of one real rank file with its `distributedInfo` rank and world size
changed, so the ranks are identical: every collective starts at the same moment on all of them
(zero natural skew). A planted straggler rank k, delayed by D before each collective, is made
consistent with a synchronous job: with c(t) the collectives whose kernel ended by time t,

    other ranks: every event shifts by c(t) * D, and each collective kernel lasts D longer
                 (it waits for rank k);
    rank k:      every event shifts by (c(t) + 1) * D,

so at every collective rank k arrives exactly D after the others and all ranks finish together.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent / "data/traces/dlrm_8rank_v100/worker0_step_12.1694128201545.pt.trace.json.gz"
COLLECTIVE_KERNEL = "ncclKernel_"


def source_doc(source: Path = SOURCE, last_collectives: int | None = None) -> dict[str, Any]:
    """The source rank's document; `last_collectives`: keep only the events from a little before
    the start of the last that many collective kernels (a smaller rank for big sets)."""
    doc = json.loads(gzip.decompress(source.read_bytes()))
    if last_collectives:
        starts = sorted(e["ts"] for e in doc["traceEvents"] if _is_collective(e))
        cut = starts[-last_collectives] - 100  # µs: the launches just before it
        doc["traceEvents"] = [e for e in doc["traceEvents"] if "ts" not in e or e["ts"] >= cut]
    return doc


def _is_collective(e: dict[str, Any]) -> bool:
    return e.get("ph") == "X" and e.get("cat") == "kernel" and str(e.get("name", "")).startswith(COLLECTIVE_KERNEL)


def write_rank_set(
    out: Path,
    ranks: int,
    *,
    straggler: int | None = None,
    delay_us: int = 0,
    doc: dict[str, Any] | None = None,
) -> list[Path]:
    """`ranks` gzip files rank<R>.pt.trace.json.gz in `out`, copies of `doc` (default: the
    source rank), rank `straggler` delayed by `delay_us` before each collective (module docstring)."""
    doc = doc or source_doc()
    ends = sorted(e["ts"] + e["dur"] for e in doc["traceEvents"] if _is_collective(e))
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(ranks):
        d = dict(doc)
        d["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": r, "world_size": ranks}
        d["traceEvents"] = (
            [_shift(e, ends, delay_us, r == straggler) for e in doc["traceEvents"]] if delay_us else doc["traceEvents"]
        )
        p = out / f"rank{r}.pt.trace.json.gz"
        p.write_bytes(gzip.compress(json.dumps(d).encode(), compresslevel=1))
        paths.append(p)
    return paths


def _shift(e: dict[str, Any], ends: list[int], delay_us: int, late: bool) -> dict[str, Any]:
    if "ts" not in e:
        return e
    done = sum(1 for x in ends if x <= e["ts"])
    e = {**e, "ts": e["ts"] + (done + late) * delay_us}
    if not late and _is_collective(e):
        e["dur"] = e["dur"] + delay_us
    return e
