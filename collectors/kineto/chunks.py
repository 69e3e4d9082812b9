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

import re
from collections.abc import Iterator
from pathlib import Path

import msgspec
from msgspec import Raw

from collectors.kineto.decode import FAST, Event, decode_events, decode_leniently, no_gc
from profiler.model.trace import Problems

CHUNK_BYTES = 4 << 20
_EVENT_START = re.compile(rb"\n[ \t]*\{")


class SplitFailed(Exception):
    """A chunk boundary fell inside an event; decode the array whole instead."""


def spans(raw: Raw) -> list[tuple[int, int]]:
    """Byte ranges [a, b) of `traceEvents` (a JSON array) holding whole events, in order."""
    body = memoryview(raw)
    bounds = _boundaries(body, CHUNK_BYTES)
    return [_trim(body, a, b, first=a == 0, last=b == len(body)) for a, b in zip(bounds, bounds[1:])]


def event_chunks(path: Path, raw: Raw, problems: Problems, ranges: list[tuple[int, int]] | None = None) -> Iterator[list[Event]]:
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


_SPACE = frozenset(b" \t\r\n")


def _trim(body: memoryview, a: int, b: int, *, first: bool, last: bool) -> tuple[int, int]:
    """Narrow [a, b) to the events: drop the array's '[' / ']', whitespace and the last comma."""
    while a < b and body[a] in _SPACE:
        a += 1
    if first and a < b and body[a] == ord("["):
        a += 1
    while b > a and body[b - 1] in _SPACE:
        b -= 1
    if last and b > a and body[b - 1] == ord("]"):
        b -= 1
        while b > a and body[b - 1] in _SPACE:
            b -= 1
    if b > a and body[b - 1] == ord(","):
        b -= 1
    return a, b


def _boundaries(body: memoryview, chunk_bytes: int) -> list[int]:
    """Start offsets of the chunks, and the end: [0, b1, b2, ..., len(body)]."""
    out = [0]
    pos = chunk_bytes
    while pos < len(body):
        m = _EVENT_START.search(body, pos)
        if m is None:
            break
        out.append(m.start() + 1)
        pos = m.start() + 1 + chunk_bytes
    out.append(len(body))
    return out
