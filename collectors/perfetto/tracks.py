"""Perfetto track descriptors for a `Trace`'s timeline rows: process per rank, threads under it,
a track per device with its streams beneath, counter tracks beside them.

ui.perfetto.dev groups thread tracks under their process (ThreadDescriptor.pid) and custom tracks
under their parent_uuid, so a rank reads as: rank 0 > thread 1234 ... ; rank 0 > gpu0 > stream 7.
Process ids are synthetic (rank + 1): the Trace does not keep the recorded ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from collectors.perfetto.fields import LANE_SUFFIX

INT32 = 2**31


@dataclass
class TrackPlan:
    """Descriptors to write and what each uuid stands for (the reader's side table)."""

    descriptors: list[dict] = field(default_factory=list)  # {uuid, parent, name, pid, tid, process, counter}
    slice_rows: list[list] = field(default_factory=list)  # [uuid, track, rank, device, stream, thread]
    counter_rows: list[list] = field(default_factory=list)  # [uuid, track, rank, device, name]
    next_uuid: int = 1
    _process: dict[int, int] = field(default_factory=dict)
    _device: dict[tuple[int, str], int] = field(default_factory=dict)

    def uuid(self) -> int:
        self.next_uuid += 1
        return self.next_uuid - 1

    def process(self, rank: int) -> int:
        if rank not in self._process:
            u = self._process[rank] = self.uuid()
            self.descriptors.append({"uuid": u, "pid": pid_of(rank), "process": f"rank {rank}"})
        return self._process[rank]

    def device(self, rank: int, device: str) -> int:
        """The group track of one device (its streams and counters go beneath); a CPU's is the process."""
        if device == "cpu":
            return self.process(rank)
        key = (rank, device)
        if key not in self._device:
            parent = self.process(rank)
            u = self._device[key] = self.uuid()
            self.descriptors.append({"uuid": u, "parent": parent, "name": device})
        return self._device[key]


def pid_of(rank: int) -> int:
    return rank + 1 if 0 <= rank < INT32 - 1 else 1


def slice_tracks(plan: TrackPlan, places: pd.DataFrame, lanes: int) -> int:
    """Descriptors for one timeline row and its `lanes` lanes; returns the uuid of lane 0 (lane k
    is that + k). `places` holds the row's track, rank, device, stream, thread."""
    track, rank, device, stream, thread = places
    rank = int(rank)
    plan.device(rank, str(device))  # parents first: the lanes' uuids must be consecutive
    first = None
    for k in range(lanes):
        u = plan.uuid()
        first = u if first is None else first
        suffix = LANE_SUFFIX.format(k) if k else ""
        if device == "cpu" and thread >= 0:
            if k == 0 and -INT32 <= thread < INT32:
                plan.descriptors.append(
                    {"uuid": u, "pid": pid_of(rank), "tid": int(thread), "thread": f"thread {thread}"}
                )
            else:  # an extra lane (a second thread descriptor would merge with the first) or a tid past int32
                plan.descriptors.append({"uuid": u, "parent": plan.process(rank), "name": f"thread {thread}{suffix}"})
        elif device != "cpu":
            name = f"stream {stream}" if stream >= 0 else _tail(track, rank, device)
            plan.descriptors.append({"uuid": u, "parent": plan.device(rank, device), "name": name + suffix})
        else:
            plan.descriptors.append(
                {"uuid": u, "parent": plan.process(rank), "name": _tail(track, rank, None) + suffix}
            )
        plan.slice_rows.append([u, str(track), rank, str(device), int(stream), int(thread)])
    return first


def counter_track(plan: TrackPlan, track: str, rank: int, device: str, name: str) -> int:
    """A counter track beneath its device, named '<row tail> <counter>' (e.g. 'memory allocated')."""
    u = plan.uuid()
    tail = _tail(track, rank, device)
    plan.descriptors.append(
        {"uuid": u, "parent": plan.device(rank, device), "name": f"{tail} {name}".strip(), "counter": True}
    )
    plan.counter_rows.append([u, track, int(rank), device, name])
    return u


def _tail(track: str, rank: int, device: str | None) -> str:
    """'rank0/gpu0/memory' -> 'memory'; 'rank0/profiler' -> 'profiler'; anything else whole."""
    for prefix in ((f"rank{rank}/{device}/",) if device else ()) + (f"rank{rank}/",):
        if track.startswith(prefix):
            return track[len(prefix) :]
    return track


def rows_of(events: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """(row code per event, one row of places per code: track, rank, device, stream, thread)."""
    key = events[["track", "rank", "device", "stream", "thread"]].astype({"track": object, "device": object})
    codes, uniq = pd.factorize(pd.MultiIndex.from_frame(key))
    return codes.astype(np.int64), pd.DataFrame(list(uniq), columns=["track", "rank", "device", "stream", "thread"])
