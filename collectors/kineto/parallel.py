"""Use the machine's second core for big traces: the second half of the chunks is decoded in a
forked child process while this one decodes the first half; the child sends back its compact
columns (a few bytes per event) and they are appended in order.

Forked, the child shares the trace's bytes with the parent (copy on write) instead of receiving
them. Anything that goes wrong in the child (or a missing fork) falls back to decoding its half
here, so the result never depends on whether the child ran. PERF_JOBS=1 turns it off.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from msgspec import Raw

from collectors.kineto.chunks import SplitFailed, event_chunks, spans
from collectors.kineto.decode import no_gc
from collectors.kineto.extract import Accumulator
from profiler.model.trace import Problems

MIN_CHUNKS = 8  # below ~32 MB of events a fork costs more than it saves


def jobs() -> int:
    """Processes to use: PERF_JOBS, else 2 where fork exists and there are two cores."""
    env = os.environ.get("PERF_JOBS")
    if env and env.isdigit():
        return max(1, int(env))
    return 2 if hasattr(os, "fork") and (os.cpu_count() or 1) >= 2 else 1


def accumulate(path: Path, raw: Raw, problems: Problems) -> Accumulator:
    """All chunks of `raw` into one Accumulator, in order. Raises SplitFailed like event_chunks."""
    ranges = spans(raw)
    acc = Accumulator(problems)
    if len(ranges) < MIN_CHUNKS or jobs() < 2:
        _run(acc, path, raw, ranges if len(ranges) > 1 else None)
        return acc
    half = len(ranges) // 2
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: decode the second half, send it, and leave without cleanup
        os.close(read_end)
        _child(path, raw, ranges[half:], write_end)
    os.close(write_end)
    try:
        _run(acc, path, raw, ranges[:half])
    finally:
        with os.fdopen(read_end, "rb") as pipe:
            payload = pipe.read()
        os.waitpid(pid, 0)
    result: Any  # the child's Accumulator.export() when status is "ok"
    status, result = pickle.loads(payload) if payload else ("lost", None)
    if status == "ok":
        acc.merge(result)
    elif status == "split":
        raise SplitFailed
    else:  # the child failed: do its half here
        _run(acc, path, raw, ranges[half:])
    return acc


def _run(acc: Accumulator, path: Path, raw: Raw, ranges: list[tuple[int, int]] | None) -> None:
    with no_gc():  # millions of short-lived objects, no cycles among them
        for events in event_chunks(path, raw, acc.problems, ranges):
            acc.add(events)


def _child(path: Path, raw: Raw, ranges: list[tuple[int, int]], write_end: int) -> None:
    message: tuple[str, Any]
    try:
        try:
            acc = Accumulator(Problems())
            _run(acc, path, raw, ranges)
            message = ("ok", acc.export())
        except SplitFailed:
            message = ("split", None)
        except BaseException as e:  # noqa: BLE001 - reported to the parent, which redoes the work
            message = ("error", repr(e))
        with os.fdopen(write_end, "wb") as pipe:  # streamed: no second copy of the columns
            pickle.dump(message, pipe, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        os._exit(0)
