"""Kineto traces whose kernels carry CUPTI profiler counters (PyTorch's
`experimental_config=_ExperimentalConfig(profiler_metrics=[...])`): each kernel is a
`cuda_profiler_range` event whose `args` hold the metric values (Nsight metric names, no units:
instruction counts, 'inst'), recorded under kernel serialisation, so the trace has no ordinary
kernel events. The ranges' `ts` and `dur` are not the kernels' times (in the A100 sample they
are evenly spaced, 121,431 us apart, and overlap no launch): no duration, no start, no
correlation id; the ranges are in launch order, which is how they join to a trace
(analysis.counters_join).
"""

from __future__ import annotations

import json
from pathlib import Path

from profiler.model.errors import InputError
from profiler.model.files import read_bounded
from profiler.model.kernel_counters import KernelCounters, build, occurrences

CATEGORY = "cuda_profiler_range"


def has_cupti_counters(data: bytes) -> bool:
    return CATEGORY.encode() in data


def read_kineto_cupti(path: str | Path, max_bytes: int | None = None) -> KernelCounters:
    """The counters of the `cuda_profiler_range` events of a Kineto trace (module docstring)."""
    data = read_bounded(path, max_bytes)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise InputError(path, f"invalid JSON: {' '.join(str(e).split())[:120]}") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise InputError(path, "no traceEvents list")
    ranges = [e for e in events if isinstance(e, dict) and e.get("cat") == CATEGORY and e.get("ph") == "X"]
    if not ranges:
        raise InputError(path, f"no '{CATEGORY}' events: the trace carries no CUPTI counters")
    device, info = _device(doc)
    rows, launches = [], []
    ranges.sort(key=lambda ev: float(ev.get("ts", 0)))
    names = [str(ev.get("name", "")) for ev in ranges]
    for i, (ev, occ) in enumerate(zip(ranges, occurrences(names))):
        args = ev.get("args")
        if not isinstance(args, dict):
            args = {}
        for name, v in args.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                rows.append((i, names[i], str(name), float("nan"), "", "", str(v), device))
            else:
                rows.append((i, names[i], str(name), float(v), "inst", "", "", device))
        launches.append((i, names[i], occ, device, -1, -1, float("nan"), "", ""))
    return build(rows, launches, source="kineto-cupti", path=str(path), info=info)


def _device(doc: object) -> tuple[str, dict]:
    """(the device's label, its numbers for matching a preset) from the trace's deviceProperties."""
    props = doc.get("deviceProperties") if isinstance(doc, dict) else None
    if isinstance(props, list) and props and isinstance(props[0], dict):
        p = props[0]
        cc = f"{p.get('computeMajor')}.{p.get('computeMinor')}" if "computeMajor" in p else ""
        info = {
            "gpu": str(p.get("name", "")),
            "sm_count": int(p.get("numSms") or 0),
            "compute_capability": cc,
            "memory_bytes": int(p.get("totalGlobalMem") or 0),
        }
        return f"{info['gpu']}{f' (cc {cc})' if cc else ''}".strip(), info
    return "", {}
