"""Perfetto tracks -> our timeline rows: track label, rank, device, stream, thread.

An export of this suite names what each track uuid stands for in its 'perf.tracks' metadata, and
that is used as written. Any other trace is mapped from its descriptors:

- rank: the number in the owning process's name ('rank 3', 'Rank3'), else 0;
- a thread track (ThreadDescriptor): device 'cpu', thread = tid -> 'rank0/cpu/thread<tid>';
- a track under a device track ('gpu 1', 'cuda1', 'device 1') -> device 'gpu1'; a track named
  'stream 7' there -> stream 7, 'rank0/gpu1/stream7' (other names: 'rank0/gpu1/<name>');
- a custom track named 'thread <n>' -> that host thread (an extra lane of ours);
- any other custom track -> device 'cpu', 'rank0/<name>'; a process's own track 'rank0/process<pid>';
- counter tracks -> '<rank>/<device>/counters', the counter named by the track.

The '(overlap N)' suffix of an extra lane (collectors.perfetto.lanes) is dropped: lanes map back
onto their row.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from collectors.perfetto.read import Raw, Track

_RANK = re.compile(r"\brank\s*(\d+)", re.IGNORECASE)
_DEVICE = re.compile(r"^(?:gpu|cuda|device|hip)\s*:?\s*(\d+)$", re.IGNORECASE)
_STREAM = re.compile(r"^stream\s*(-?\d+)$", re.IGNORECASE)
_THREAD = re.compile(r"^thread\s*(-?\d+)$", re.IGNORECASE)
_LANE = re.compile(r" \(overlap \d+\)$")


class Place(NamedTuple):
    track: str
    rank: int
    device: str
    stream: int
    thread: int


class Places:
    """uuid -> Place for slices, uuid -> (Place, counter name) for counters; memoised."""

    def __init__(self, raw: Raw, side: dict | None):
        self.raw = raw
        self.slice_side = {
            int(r[0]): Place(str(r[1]), int(r[2]), str(r[3]), int(r[4]), int(r[5]))
            for r in (side or {}).get("slices", [])
        }
        self.counter_side = {
            int(r[0]): (Place(str(r[1]), int(r[2]), str(r[3]), -1, -1), str(r[4]))
            for r in (side or {}).get("counters", [])
        }
        self.unknown = 0

    def slice(self, uuid: int) -> Place:
        got = self.slice_side.get(uuid)
        if got is None:
            got = self.slice_side[uuid] = self._derive(uuid)
        return got

    def counter(self, uuid: int) -> tuple[Place, str]:
        got = self.counter_side.get(uuid)
        if got is None:
            t = self.raw.tracks.get(uuid)
            parent = self._derive(t.parent) if t and t.parent else self._derive(uuid)
            name = _LANE.sub("", t.name) if t and t.name else f"counter{uuid}"
            got = self.counter_side[uuid] = (
                Place(f"rank{parent.rank}/{parent.device}/counters", parent.rank, parent.device, -1, -1),
                name,
            )
        return got

    def _chain(self, uuid: int) -> list[Track]:
        out, seen = [], set()
        t = self.raw.tracks.get(uuid)
        while t is not None and t.uuid not in seen:
            out.append(t)
            seen.add(t.uuid)
            t = self.raw.tracks.get(t.parent) if t.parent else None
        return out

    def _derive(self, uuid: int) -> Place:
        chain = self._chain(uuid)
        if not chain:
            self.unknown += 1
            return Place(f"rank0/cpu/track{uuid}", 0, "cpu", -1, -1)
        pid = next((t.pid for t in chain if t.pid is not None), None)
        pname = self.raw.processes.get(pid, "") if pid is not None else ""
        pname = pname or next((t.process_name for t in chain if t.process_name), "")
        m = _RANK.search(pname)
        rank = int(m.group(1)) if m else 0
        own = chain[0]
        if own.tid is not None:
            return Place(f"rank{rank}/cpu/thread{own.tid}", rank, "cpu", -1, own.tid)
        name = _LANE.sub("", own.name)
        device = next(
            (f"gpu{d.group(1)}" for t in chain if t.tid is None and (d := _DEVICE.match(t.name.strip()))), None
        )
        if device:
            s = _STREAM.match(name)
            if s:
                return Place(f"rank{rank}/{device}/stream{s.group(1)}", rank, device, int(s.group(1)), -1)
            return Place(f"rank{rank}/{device}/{name or uuid}", rank, device, -1, -1)
        th = _THREAD.match(name)
        if th:
            return Place(f"rank{rank}/cpu/thread{th.group(1)}", rank, "cpu", -1, int(th.group(1)))
        if own.pid is not None and not name:
            return Place(f"rank{rank}/process{own.pid}", rank, "cpu", -1, -1)
        return Place(f"rank{rank}/{name or f'track{uuid}'}", rank, "cpu", -1, -1)
