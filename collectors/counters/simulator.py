"""The simulated accelerator's counters: a `perf simulate -o` trace (accelerator/sim/trace.py,
top level `"traceSource": "simulator"`) whose kernel events (category `kernel`, 'X') carry each
kernel's ground truth in their `args`. One launch per kernel event, in time order (file order
among equal times); one row per arg:

    flops                                   flop   (2 per MAC, 1 per vector op per element)
    hbm_read, hbm_written, shared_bytes     byte
    compute_ns, matrix_ns, vector_ns, contention_ns   ns
    stall_cycles.<cause>                    cycle  (one row per cause: dispatch, dma_latency, ...)
    unit, dtype, family, limiter, collective, ops, targets   text (lists joined with ', ')
    a collective's message args ('In msg nelems', 'Group size', ...)   '' (counts)

Launch: start and duration from the event's ts/dur (µs with 3 decimals: exact ns), device
'npu<chip>' (the Kineto reader's name for the chip: pid), no correlation id (the trace has no
host runtime). analysis/counters.py turns these into FLOPs by precision and bytes by level.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from profiler.model.errors import InputError, printable
from profiler.model.files import read_bounded
from profiler.model.kernel_counters import KernelCounters, build, occurrences

SOURCE = "simulator"
_MARK = re.compile(rb'"traceSource"\s*:\s*"simulator"')
#: arg -> unit; '*_ns' args are ns, stall causes cycles, any other number a count ('').
UNITS = {"flops": "flop", "hbm_read": "byte", "hbm_written": "byte", "shared_bytes": "byte"}


def is_simulator_trace(data: bytes) -> bool:
    """Whether decompressed trace bytes say `"traceSource": "simulator"` (read_simulator checks the top level)."""
    return _MARK.search(data) is not None


def _unit(name: str) -> str:
    if name.startswith("stall_cycles."):
        return "cycle"
    return "ns" if name.endswith("_ns") else UNITS.get(name, "")


def read_simulator(path: str | Path, max_bytes: int | None = None, data: bytes | None = None) -> KernelCounters:
    """The per-kernel counters of a simulated trace (module docstring); `data`: its bytes when already read.
    InputError (one line) for a document that is not a simulator trace or a kernel event without its args."""
    if data is None:
        data = read_bounded(path, max_bytes)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise InputError(path, f"invalid JSON: {' '.join(str(e).split())[:120]}") from None
    if not isinstance(doc, dict) or doc.get("traceSource") != SOURCE:
        raise InputError(path, 'not a simulated trace: no top-level "traceSource": "simulator"')
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        raise InputError(path, "no traceEvents list")
    kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X"]
    if not kernels:
        raise InputError(path, "no kernel events: the simulated trace holds no kernels")
    order = sorted(range(len(kernels)), key=lambda i: (_number(kernels[i], "ts", path), i))
    names = [str(kernels[i].get("name", "")) for i in order]
    rows: list[tuple] = []
    launches: list[tuple] = []
    for launch, (i, name, occ) in enumerate(zip(order, names, occurrences(names))):
        ev = kernels[i]
        args = ev.get("args")
        if not isinstance(args, dict) or "flops" not in args:
            raise InputError(
                path, f"kernel event {printable(name[:80])!r} (#{i}) has no args with its counters (flops, bytes)"
            )
        device = f"npu{ev.get('pid', 0)}"
        for key, v in _flat(args):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                text = ", ".join(map(str, v)) if isinstance(v, list) else str(v)
                rows.append((launch, name, key, float("nan"), "", "", text, device))
            else:
                rows.append((launch, name, key, float(v), _unit(key), "", "", device))  # the trace writes no units
        start = round(_number(ev, "ts", path) * 1000)
        dur = float(round(_number(ev, "dur", path) * 1000))
        launches.append((launch, name, occ, device, -1, start, dur, "", ""))
    props = doc.get("deviceProperties")
    accel = str(props[0].get("name", "")) if isinstance(props, list) and props and isinstance(props[0], dict) else ""
    return build(rows, launches, source=SOURCE, path=str(path), info={"gpu": accel} if accel else {})


def _flat(args: dict) -> list[tuple[str, object]]:
    """(name, value) of every arg, `stall_cycles` {cause: cycles} as one 'stall_cycles.<cause>' each."""
    out: list[tuple[str, object]] = []
    for k, v in args.items():
        if k == "stall_cycles" and isinstance(v, dict):
            out += [(f"stall_cycles.{c}", n) for c, n in v.items()]
        else:
            out.append((str(k), v))
    return out


def _number(ev: dict, key: str, path: str | Path) -> float:
    v = ev.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(path, f"kernel event {printable(str(ev.get('name', ''))[:80])!r} has no numeric {key!r}")
    return float(v)
