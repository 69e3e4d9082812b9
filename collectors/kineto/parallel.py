"""Use the machine's second core for big traces: the two halves of the chunks are decoded in two
forked child processes, each sending back its compact columns (a few bytes per event), which
are appended in order.

Forked, a child shares the trace's bytes with the parent (copy on write) instead of receiving
them. Both halves go to children, and the parent only waits, so that the millions of short-lived
event structs are never made in the process that runs the analysis: freed, they leave its heap
fragmented, pages that it keeps resident (~12 MiB of the analysis' peak on a 51 MiB trace;
benchmarks/README.md, "Issue 11 figures, fourth pass"). Anything that goes wrong in a child (or
a missing fork) falls back to decoding its half here, so the result never depends on whether
the children ran. PERF_JOBS=1 turns it off.
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
    parts = [ranges[:half], ranges[half:]]
    children = [_fork(path, raw, part) for part in parts]
    split = False
    for part, (pid, read_end) in zip(parts, children):  # in order: the first half's columns first
        with os.fdopen(read_end, "rb") as pipe:
            payload = pipe.read()
        os.waitpid(pid, 0)
        result: Any  # the child's Accumulator.export() when status is "ok"
        status, result = pickle.loads(payload) if payload else ("lost", None)
        if status == "split":
            split = True
        elif split:
            continue
        elif status == "ok":
            acc.merge(result)
        else:  # the child failed: do its half here
            _run(acc, path, raw, part)
    if split:
        raise SplitFailed
    return acc


def _fork(path: Path, raw: Raw, ranges: list[tuple[int, int]]) -> tuple[int, int]:
    """A child decoding `ranges`: (its pid, the read end of the pipe it answers on)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: decode, send, and leave without cleanup
        os.close(read_end)
        _child(path, raw, ranges, write_end)
    os.close(write_end)
    return pid, read_end


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
