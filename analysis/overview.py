"""What a trace is: its source, ranks, devices, time span, events by kind and iterations."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profiler.model.trace import Trace


@dataclass(frozen=True)
class Overview:
    """A trace at a glance. Times in ns on the trace's common clock."""

    framework: str  # e.g. 'PyTorch profiler (Kineto), schema 1'
    files: tuple[str, ...]
    ranks: tuple[int, ...]
    world_size: int | None  # as the trace states it (may exceed the ranks present)
    devices: tuple[tuple[int, str, str], ...]  # (rank, device, name)
    start_ns: int
    end_ns: int
    events_by_kind: tuple[tuple[str, int], ...]  # most frequent first
    steps: tuple[int, ...]  # ProfilerStep numbers present

    @property
    def wall_ns(self) -> int:
        return self.end_ns - self.start_ns


def overview(trace: Trace) -> Overview:
    ev = trace.events
    ranks_meta = trace.metadata.get("ranks", {})
    first: dict = next(iter(ranks_meta.values()), {})
    schema = first.get("schemaVersion")
    framework = "PyTorch profiler (Kineto)" + (f", schema {schema}" if schema is not None else "")
    runtime = _runtime(first)
    if runtime:
        framework += f", {runtime}"
    # a non-Kineto source names itself: in the Trace's metadata, or in the file's top level
    framework = str(trace.metadata.get("framework") or first.get("framework") or framework)
    world = {
        m.get("distributedInfo", {}).get("world_size")
        for m in ranks_meta.values()
        if isinstance(m.get("distributedInfo"), dict)
    }
    world.discard(None)
    counts = ev["kind"].value_counts(sort=True)
    steps = np.unique(ev["step"].to_numpy())
    end = ev["ts"].to_numpy() + ev["dur"].to_numpy()
    return Overview(
        framework=framework,
        files=tuple(trace.metadata.get("files", ())),
        ranks=tuple(trace.ranks),
        world_size=max(world) if world else None,
        devices=tuple(
            (int(r), str(d), str(n)) for r, d, n in trace.devices[["rank", "device", "name"]].itertuples(index=False)
        ),
        start_ns=int(ev["ts"].min()) if len(ev) else 0,
        end_ns=int(end.max()) if len(ev) else 0,
        events_by_kind=tuple((str(k), int(v)) for k, v in counts.items() if v),
        steps=tuple(int(s) for s in steps if s >= 0),
    )


def select_rank(trace: Trace, rank: int) -> Trace:
    """The trace restricted to one rank (events, counters, flows, devices)."""
    ev = trace.events[trace.events["rank"] == rank].reset_index(drop=True)
    ids = ev["id"].to_numpy()
    fl = trace.flows[np.isin(trace.flows["src"].to_numpy(), ids)].reset_index(drop=True)
    co = trace.counters[trace.counters["rank"] == rank].reset_index(drop=True)
    dv = trace.devices[trace.devices["rank"] == rank].reset_index(drop=True)
    meta = dict(trace.metadata)
    meta["ranks"] = {k: v for k, v in meta.get("ranks", {}).items() if k == str(rank)}
    return Trace(events=ev, counters=co, flows=fl, devices=dv, metadata=meta, problems=trace.problems)


def _runtime(meta: dict) -> str:
    """'CUDA 12.9' or 'HIP 7.2' from the versions Kineto records (CUDA: 1000*major + 10*minor;
    HIP: 10,000,000*major + 100,000*minor + patch)."""
    cuda, hip = meta.get("cuda_runtime_version"), meta.get("hip_runtime_version")
    if isinstance(cuda, int) and not isinstance(cuda, bool) and cuda > 0:
        return f"CUDA {cuda // 1000}.{cuda % 1000 // 10}"
    if isinstance(hip, int) and not isinstance(hip, bool) and hip > 0:
        return f"HIP {hip // 10_000_000}.{hip % 10_000_000 // 100_000}"
    if "roctracer_version" in meta:
        return "ROCm"
    return ""
