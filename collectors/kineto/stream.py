"""Read a Kineto trace larger than memory: the file (plain or gzip) is read a block at a time and
`traceEvents` is cut into chunks of about `chunk_bytes` at event boundaries; each chunk is decoded
and built into an events table by the in-memory reader's own functions (chunks.event_chunks,
extract.Accumulator, build.build_events), redacted, and handed on before the next is read. Peak
memory is one chunk's text, its decoded events and its table, whatever the file's size.

What is not built here, because it needs every event at once: the link columns (parent_id, depth,
op_id, step: nesting and launch links, collectors/kineto/link.py), flows, and the memory and
sample counters. `ts` is on the file's own clock (`baseTimeNanoseconds`, which Kineto writes
after the events, is returned in the metadata for the caller to add).

Boundaries: an event starts after a newline (chunks.py says why that is safe); the top-level
fields before the array are decoded when the array's opening is found, those after it at the end.
Minified JSON (no newlines) is cut at a '},{' instead; every cut is checked by decoding the chunk.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import pandas as pd

from collectors.kineto.build import build_events
from collectors.kineto.chunks import SplitFailed, _event_start, _trim, event_chunks
from collectors.kineto.extract import Accumulator
from profiler.model.errors import InputError
from profiler.model.files import GZIP_MAGIC, TooLarge, describe_size, open_regular
from profiler.model.redact_trace import redact_trace
from profiler.model.trace import Problems, Trace, empty_table

HEAD_LIMIT = 64 << 20  # the top-level fields before traceEvents: kilobytes in practice
TAIL_WINDOW = 1 << 20  # a boundary is looked for in the last MiB of a block first
_ARRAY_START = re.compile(rb'"traceEvents"\s*:\s*\[')
_BETWEEN = re.compile(rb"\}\s*,\s*\{")  # between two events of minified JSON (or inside one: checked)
MAX_TRIES = 8  # cuts tried in a block before it is taken to hold the array's end


class StreamedFile:
    """One file read as a stream: iterate `chunks()` for its events tables (redacted, ids
    numbered from `id_offset`); `metadata` (its top-level fields, redacted) is complete when the
    iteration ends; `problems` counts what could not be read."""

    def __init__(self, path: Path, chunk_bytes: int, max_bytes: int | None = None, id_offset: int = 0):
        self.path = path
        self.chunk_bytes = max(int(chunk_bytes), 1 << 16)
        self.max_bytes = max_bytes
        self.metadata: dict[str, Any] = {}
        self.problems = Problems()
        self.rows = 0
        self.id_offset = id_offset
        self.rank = 0
        self.read = 0  # decompressed bytes read so far

    def chunks(self) -> Iterator[pd.DataFrame]:
        with ExitStack() as stack:
            f = stack.enter_context(open_regular(self.path))
            if f.read(2) == GZIP_MAGIC:
                f.seek(0)
                f = stack.enter_context(gzip.GzipFile(fileobj=f, mode="rb"))  # type: ignore[assignment]
            else:
                f.seek(0)
            try:
                yield from self._chunks(f)
            except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as e:
                raise InputError(self.path, f"cannot read: {e}") from None

    def _chunks(self, f: BinaryIO) -> Iterator[pd.DataFrame]:
        self.read = 0
        buf = bytearray(self._head(f))  # grown and cut in place: one buffer, never copied whole
        while True:
            block = self._read(f)
            if not block:
                break
            buf += block
            del block
            if len(buf) < self.chunk_bytes:
                continue
            cuts = self._cuts(buf)
            if not cuts:
                if len(buf) > 4 * self.chunk_bytes:
                    raise InputError(self.path, "cannot be streamed: no boundary between events in a chunk")
                continue
            for cut in cuts:  # the first whose text decodes as whole events
                table = self._table(bytes(memoryview(buf)[:cut]))
                if table is not None:
                    yield table
                    del buf[:cut]
                    break
            else:  # every cut fell past the array's end: what is left is its last events and the tail
                buf += self._rest(f)
                break
        yield from self._last(buf)
        if self.rows == 0:
            why = "; ".join(self.problems.lines()) or "no complete ('X') events"
            raise InputError(self.path, f"no readable events ({why})")

    def _rest(self, f: BinaryIO) -> bytes:
        """The rest of the file, which must be short (the fields after the array)."""
        rest = []
        while block := self._read(f):
            rest.append(block)
            if len(rest) * self.chunk_bytes > HEAD_LIMIT + 4 * self.chunk_bytes:
                raise InputError(self.path, "malformed JSON in traceEvents")
        return b"".join(rest)

    def _last(self, buf: bytearray) -> Iterator[pd.DataFrame]:
        """The array's last events and the fields after it, in the file's last bytes: the ']' that
        closes traceEvents is the last one after which the rest reads as the object's remaining
        fields and before which the events decode (the tail may hold arrays of its own)."""
        i = len(buf)
        for _ in range(10_000):
            i = buf.rfind(b"]", 0, i)
            if i < 0:
                break
            after = buf[i + 1 :].strip()  # '}' or ', "key": value, ... }'
            if not after.startswith(b",") and after != b"}":
                continue
            try:
                tail = msgspec.json.decode(b"{" + after[1:] if after.startswith(b",") else b"{}")
            except msgspec.DecodeError:
                continue
            if not isinstance(tail, dict):
                continue
            events = bytes(memoryview(buf)[:i])
            if not events.strip():
                self._set_metadata(tail)
                return
            table = self._table(events)
            if table is not None:
                self._set_metadata(tail)
                yield table
                return
        raise InputError(self.path, "truncated or malformed: the 'traceEvents' array is not closed")

    def _read(self, f: BinaryIO) -> bytes:
        block = f.read(self.chunk_bytes)
        self.read += len(block)
        if self.max_bytes is not None and self.read > self.max_bytes:
            limit = describe_size(self.max_bytes)
            raise TooLarge(self.path, f"decompresses to more than the reading limit of {limit} (--max-bytes raises it)")
        return block

    def _head(self, f: BinaryIO) -> bytes:
        """Read up to the opening '[' of traceEvents; decode the fields before it; return the rest."""
        buf = b""
        while len(buf) < HEAD_LIMIT:
            block = self._read(f)
            if not block:
                break
            buf += block
            for m in _ARRAY_START.finditer(buf):
                before = buf[: m.start()].rstrip().rstrip(b",")
                try:  # at the top level only: what precedes it closes into an object
                    head = msgspec.json.decode(before + b"}")
                except msgspec.DecodeError:
                    continue
                if isinstance(head, dict):
                    self._set_metadata(head)
                    return buf[m.end() :]
        raise InputError(self.path, "not a Kineto trace that can be streamed: no top-level 'traceEvents' array found")

    def _set_metadata(self, top: dict[str, Any]) -> None:
        self.metadata.update(top)
        dist = self.metadata.get("distributedInfo")
        rank = dist.get("rank") if isinstance(dist, dict) else None
        ok = isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 2**31
        self.rank = rank if ok else 0  # type: ignore[assignment]

    def _cuts(self, buf: bytearray) -> list[int]:
        """Offsets near the end of `buf` where an event may start, best first: after a newline
        (chunks._event_start), else (minified JSON) at the '{' of a '},{'. A candidate is only
        kept if the text before it decodes as whole events (`_table`): a '},{' inside an event's
        args or a string leaves brackets or a string open, which never decodes."""
        with memoryview(buf) as view:  # released before the caller resizes buf
            for pos in (max(1, len(buf) - TAIL_WINDOW), max(1, len(buf) // 2)):
                at = _event_start(view, pos)
                if at > 0:
                    return [at]
        lo = max(0, len(buf) - TAIL_WINDOW)
        found = [m.end() - 1 for m in _BETWEEN.finditer(buf, lo)]
        return found[::-1][:MAX_TRIES]

    def _table(self, text: bytes) -> pd.DataFrame | None:
        """One chunk of events' text -> its events table (redacted), ids from the running count;
        None when the text is not a run of whole events."""
        a, b = _trim(memoryview(text), 0, len(text), first=False, last=False)
        before = Counter(self.problems.counts)
        acc = Accumulator(self.problems)
        try:
            for events in event_chunks(self.path, msgspec.Raw(text), self.problems, [(a, b)]):
                acc.add(events)
        except SplitFailed:
            self.problems.counts = before
            return None
        simulated = self.metadata.get("traceSource") == "simulator"
        ev = build_events(acc, self.rank, 0, simulated=simulated)
        ev["id"] += self.id_offset + self.rows
        self.rows += len(ev)
        names = self.metadata.setdefault("process_names", {})
        names.update(acc.process_names)
        bare = Trace(ev, empty_table("counters"), empty_table("flows"), empty_table("devices"), {}, Problems())
        return redact_trace(bare).events

    def redacted_metadata(self) -> dict[str, Any]:
        """The top-level fields, redacted (profiler.model.redact_trace), once `chunks()` ended."""
        bare = Trace(empty_table("events"), empty_table("counters"), empty_table("flows"), empty_table("devices"))
        meta = {k: v for k, v in self.metadata.items() if k != "traceEvents"}
        return redact_trace(Trace(bare.events, bare.counters, bare.flows, bare.devices, meta, Problems())).metadata
