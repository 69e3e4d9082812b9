"""Shared test helpers: where the real traces are, and writing small inline traces."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

# The columnar cache (profiler/api/cache.py) is off in tests, subprocesses included: a hit would
# skip the reader a test means to exercise, and tests must not write to ~/.cache. Its own tests
# (tests/test_trace_cache.py) turn it on in a temporary folder.
os.environ["PERF_NO_CACHE"] = "1"

#: Real traces and counter files recorded by others, copied unchanged with their licences and
#: provenance (tests/data/traces/README.md, tests/data/counters/README.md): a clone stands alone.
DATA = Path(__file__).resolve().parent / "data"
TRACES = DATA / "traces"
COUNTERS = DATA / "counters"


def real_trace(folder: str) -> Path:
    """Path of a real trace folder's single file (or the folder, for multi-rank ones)."""
    d = TRACES / folder
    files = sorted(d.glob("*.json.gz"))
    return files[0] if len(files) == 1 else d


def write_trace(path: Path, events: list[dict], gz: bool = False, **top: object) -> Path:
    """Write a Kineto-style trace: top-level fields plus traceEvents."""
    doc = {"schemaVersion": 1, **top, "traceEvents": events}
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def x(name: str, cat: str, ts: float, dur: float, pid: int | str = 1, tid: int | str = 1, **args: object) -> dict:
    """A complete ('X') event; times in µs as Kineto writes them."""
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        ev["args"] = args
    return ev


@pytest.fixture
def tiny(tmp_path: Path):
    """Factory: write events to tmp_path/<name>.json and return the path."""

    def make(events: list[dict], name: str = "t.json", **top: object) -> Path:
        return write_trace(tmp_path / name, events, **top)

    return make
