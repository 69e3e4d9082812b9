"""The counter tracks of a simulated run (`trace.py` writes them as Chrome 'C' events) and the
DMA transfers' places on the trace's rounded timeline, which the DMA events and the queue-depth
counter share. Formulas in `counter_samples` and docs/accelerator.md ("Simulating a program")."""

from __future__ import annotations

from typing import Any

import numpy as np

from accelerator.sim.run import SimRun


def transfer_times(run: SimRun, spans: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    """Every DMA transfer of `run` in kernel order, on the rounded timeline (ns): `kernel` its
    kernel's index, `start` round(its start + the kernel's shift to its rounded place), `dur`
    max(1, round(its seconds)), `load` (into local memory), `queued` its kernel's first load's
    start (the kernel's shift if it loads nothing). numpy's rint rounds halves to even, as round."""
    kernels = run.kernels
    counts = np.fromiter((len(s.transfers) for s in kernels), dtype=np.int64, count=len(kernels))
    flat = [t for s in kernels for t in s.transfers]
    n = len(flat)
    starts = np.array([a for a, _ in spans], dtype=np.float64)
    shift = starts - np.fromiter((s.start_s for s in kernels), dtype=np.float64, count=len(kernels)) * 1e9
    kernel = np.repeat(np.arange(len(kernels)), counts)
    t_start = np.fromiter((t.start_s for t in flat), dtype=np.float64, count=n)
    load = np.fromiter((t.route.endswith("->local") for t in flat), dtype=bool, count=n)
    first_load = np.zeros(len(kernels))
    if load.any():
        lowest = np.full(len(kernels), np.inf)
        np.minimum.at(lowest, kernel[load], t_start[load])
        first_load = np.where(np.isfinite(lowest), lowest, 0.0)
    return {
        "kernel": kernel,
        "start": np.rint(t_start * 1e9 + shift[kernel]).astype(np.int64),
        "dur": np.maximum(1, np.rint(np.fromiter((t.dur_s for t in flat), dtype=np.float64, count=n) * 1e9)).astype(
            np.int64
        ),
        "load": load,
        "queued": np.rint(first_load * 1e9 + shift).astype(np.int64)[kernel],
    }


#: the counter tracks, per chip (docs/accelerator.md, "Simulating a program")
COUNTERS = (
    "matrix utilisation (%)",
    "vector utilisation (%)",
    "HBM bandwidth (GB/s)",
    "shared memory used (MiB)",
    "local memory used per core (KiB)",
    "DMA queue depth",
)


def counter_samples(run: SimRun, spans: list[tuple[int, int]] | None = None) -> dict[tuple[int, str], list]:
    """(chip, counter) -> [(ns, value)] in time order, one sample where the value changes:

    - matrix / vector utilisation: 100 x the unit's busy seconds / the kernel's seconds while a
      kernel runs, summed over kernels running at once (a collective on the link adds 0);
    - HBM bandwidth: the kernel's HBM bytes / its seconds, summed likewise (GB/s);
    - local memory used per core: the running kernel's tile working set (KiB);
    - shared memory used: the bytes the allocation keeps live in shared memory (and the working
      set of a kernel tiled in shared memory), set at each kernel's start (MiB; held until the next);
    - DMA queue depth: transfers queued and not done: a kernel's loads all queue at its first
      load's start and leave as each finishes; a store queues when it starts."""
    if spans is None:
        from accelerator.sim.trace import timeline_ns  # trace.py imports this module

        spans = timeline_ns(run)
    levels: dict[tuple[int, str], list[tuple[int, float]]] = {}
    rates: dict[int, tuple[float, ...]] = {}  # id(KernelTime) -> the four rates (copies share them)
    per_kernel = []
    for s, (start, dur) in zip(run.kernels, spans, strict=True):
        r = rates.get(id(s.time))
        if r is None:
            seconds = max(s.time.total, 1e-12)
            r = rates[id(s.time)] = (
                100 * s.matrix_s / seconds,
                100 * s.vector_s / seconds,
                (s.hbm_read + s.hbm_written) / seconds / 1e9,
                s.local_bytes / 1024,
            )
        per_kernel.append(r)
        chip = s.chip
        if s.resource == "cores":
            levels.setdefault((chip, COUNTERS[3]), []).append((start, s.shared_live_bytes / 2**20))
    ts = np.array(spans, dtype=np.int64).reshape(-1, 2)
    start, end = ts[:, 0], ts[:, 0] + ts[:, 1]
    chips = np.fromiter((s.chip for s in run.kernels), dtype=np.int64, count=len(run.kernels))
    values = np.array(per_kernel, dtype=np.float64).reshape(-1, 4)
    out: dict[tuple[int, str], list] = {}
    for j, name in enumerate((COUNTERS[0], COUNTERS[1], COUNTERS[2], COUNTERS[4])):
        _running_sums(out, name, chips, start, end, values[:, j])
    moves = transfer_times(run, spans)
    queued_at = np.where(moves["load"], moves["queued"], moves["start"])
    _running_sums(
        out, COUNTERS[5], chips[moves["kernel"]], queued_at, moves["start"] + moves["dur"], np.ones(len(queued_at))
    )
    for (chip, name), samples in levels.items():  # freed when the chip's last kernel ends
        samples.append((max(a + d for (a, d), k in zip(spans, run.kernels, strict=True) if k.chip == chip), 0.0))
    for key, samples in levels.items():
        samples.sort(key=lambda c: c[0])
        out[key] = [(at, round(v, 6)) for i, (at, v) in enumerate(samples) if i == 0 or samples[i - 1][1] != v]
    return out


def _running_sums(
    out: dict, name: str, chip: np.ndarray, start: np.ndarray, end: np.ndarray, value: np.ndarray
) -> None:
    """Per chip, the running sum of `value` over [start, end) intervals (those with a non-zero
    value), one (ns, value) sample per distinct change time, into out[(chip, name)]: the changes
    (+v at start, -v at end, interval by interval) stably sorted by time and summed in turn."""
    keep = value != 0
    if not keep.any():
        return
    at = np.stack([start[keep], end[keep]], axis=1).ravel()
    delta = np.stack([value[keep], -value[keep]], axis=1).ravel()
    on = np.repeat(chip[keep], 2)
    for c in np.unique(on).tolist():
        mine = on == c
        order = np.argsort(at[mine], kind="stable")
        times, running = at[mine][order], np.cumsum(delta[mine][order])
        last = np.flatnonzero(np.append(times[1:] != times[:-1], True))
        rounded = _Rounded(6)
        out[(c, name)] = [(t, max(0.0, rounded[v])) for t, v in zip(times[last].tolist(), running[last].tolist())]


def counter_events(run: SimRun, spans: list[tuple[int, int]] | None = None) -> list[dict[str, Any]]:
    """`counter_samples` as Chrome counter ('C') events, pid = chip, args {value}."""
    shown = _Rounded(3)
    return [
        {"ph": "C", "name": name, "pid": chip, "ts": at / 1000, "args": {"value": shown[v]}}
        for (chip, name), samples in sorted(counter_samples(run, spans).items())
        for at, v in samples
    ]


class _Rounded(dict):
    """value -> round(value, digits), each distinct value rounded once (a counter's values
    repeat: copies of one timed kernel share them; round with digits is slow)."""

    def __init__(self, digits: int) -> None:
        super().__init__()
        self.digits = digits

    def __missing__(self, v: float) -> float:
        r = self[v] = round(v, self.digits)
        return r
