"""Split `traceEvents` into chunks of about 32 MB and decode them one at a time.

A gigabyte trace decoded whole holds millions of event structs and strings at once (about
five times the file). Decoded in chunks, each chunk becomes compact numpy columns
(`extract.Accumulator`) before the next is decoded, so only one chunk's objects live at a time.

Kineto writes one event per line group, each starting on a new line with `{`. JSON strings
cannot hold a raw newline, so every match of `\\n[ \\t]*{` lies between tokens; a boundary that
is not between two events leaves a chunk with unbalanced brackets, which fails to decode, and
then the caller decodes the whole array in one piece instead (`SplitFailed`). Minified JSON has
no such boundaries and is decoded in one piece.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import numpy as np
from msgspec import Raw

from collectors.kineto.decode import FAST, Event, decode_events, decode_leniently, no_gc
from profiler.model.trace import Problems

CHUNK_BYTES = 4 << 20


class SplitFailed(Exception):
    """A chunk boundary fell inside an event; decode the array whole instead."""


def spans(raw: Raw) -> list[tuple[int, int]]:
    """Byte ranges [a, b) of `traceEvents` (a JSON array) holding whole events, in order."""
    body = memoryview(raw)
    bounds = _boundaries(body, CHUNK_BYTES)
    return [_trim(body, a, b, first=a == 0, last=b == len(body)) for a, b in zip(bounds, bounds[1:])]


def event_chunks(
    path: Path, raw: Raw, problems: Problems, ranges: list[tuple[int, int]] | None = None
) -> Iterator[list[Event]]:
    """Yield the events of `traceEvents` in order, a chunk of about CHUNK_BYTES at a time
    (only those of `ranges`, from `spans`, when given)."""
    if ranges is None:
        ranges = spans(raw)
        if len(ranges) <= 1:
            yield decode_events(path, raw, problems)
            return
    body = memoryview(raw)
    for a, b in ranges:
        text = b"".join((b"[", body[a:b], b"]"))  # the one copy of the chunk
        with no_gc():
            try:
                yield FAST.decode(text)
                continue
            except msgspec.ValidationError:
                pass
            except msgspec.DecodeError as e:
                if "UTF-8" not in str(e):
                    raise SplitFailed from None
            try:
                yield decode_leniently(path, text, problems)
            except Exception:  # a bad split shows as malformed JSON here; the whole decode decides
                raise SplitFailed from None


#: JSON's blanks (between tokens), and the blanks that may stand between a newline and an event's '{'
_BLANK = b" \t\r\n"
_SPACE_TAB = b" \t"


def _solid(x: np.ndarray, blank: bytes) -> np.ndarray:
    """Mask of the bytes of `x` that are not in `blank` (SIMD compares: a table lookup is 20x slower)."""
    mask = x != blank[0]
    for c in blank[1:]:
        mask &= x != c
    return mask


def _trim(body: memoryview, a: int, b: int, *, first: bool, last: bool) -> tuple[int, int]:
    """Narrow [a, b) to the events: drop the array's '[' / ']', whitespace and the last comma.
    Blanks are skipped by numpy over growing windows: linear and in C (a byte at a time in
    Python took 38.8 s over 100 MiB of blanks)."""
    arr = np.frombuffer(body, dtype=np.uint8)
    a = _first_solid(arr, a, b, _BLANK)
    if first and a < b and body[a] == ord("["):
        a += 1
    b = _last_solid(arr, a, b, _BLANK) + 1 or a
    if last and b > a and body[b - 1] == ord("]"):
        b = _last_solid(arr, a, b - 1, _BLANK) + 1 or a
    if b > a and body[b - 1] == ord(","):
        b -= 1
    return a, b


def _first_solid(arr: np.ndarray, lo: int, hi: int, blank: bytes) -> int:
    """The first offset in [lo, hi) whose byte is not `blank`, or hi (small windows first)."""
    span = 64
    while lo < hi:
        end = min(hi, lo + span)
        solid = np.flatnonzero(_solid(arr[lo:end], blank))
        if len(solid):
            return lo + int(solid[0])
        lo, span = end, min(span * 4, 1 << 22)
    return hi


def _last_solid(arr: np.ndarray, lo: int, hi: int, blank: bytes) -> int:
    """The last offset in [lo, hi) whose byte is not `blank`, or -1 (tail windows first)."""
    span = 64
    while hi > lo:
        start = max(lo, hi - span)
        solid = np.flatnonzero(_solid(arr[start:hi], blank))
        if len(solid):
            return start + int(solid[-1])
        hi, span = start, min(span * 4, 1 << 22)
    return -1


def _boundaries(body: memoryview, chunk_bytes: int) -> list[int]:
    """Start offsets of the chunks, and the end: [0, b1, b2, ..., len(body)]."""
    out = [0]
    pos = chunk_bytes
    while pos < len(body):
        start = _event_start(body, pos)
        if start < 0:
            break
        out.append(start)
        pos = start + chunk_bytes
    out.append(len(body))
    return out


def _event_start(body: memoryview, pos: int) -> int:
    """The offset just after the newline of the first `\\n[ \\t]*{` whose newline is at or after
    `pos`, or -1. Found with numpy over growing windows: a regex would try every newline, seconds
    over megabytes of blank lines. In a window, the bytes that are not spaces or tabs are listed;
    a '{' whose predecessor in that list is a newline (at or after pos) starts an event."""
    a = np.frombuffer(body, dtype=np.uint8)
    before = -1  # the last byte before the window that is not a space or tab (-1: none since pos)
    lo, window = pos, 4096
    while lo < len(a):
        w = a[lo : lo + window]
        if not (w == 123).any():  # no '{' here (megabytes of blank lines): only the last solid byte matters
            before = max(before, _last_solid(a, lo, lo + len(w), _SPACE_TAB))
        elif len(solid := np.flatnonzero(_solid(w, _SPACE_TAB)) + lo):
            prev = np.concatenate(([before], solid[:-1]))
            starts = (a[solid] == 123) & (prev >= pos) & (a[np.maximum(prev, 0)] == 10)
            hit = np.flatnonzero(starts)
            if len(hit):
                return int(prev[hit[0]]) + 1
            before = int(solid[-1])
        lo += window
        window = min(window * 4, 1 << 20)
    return -1
