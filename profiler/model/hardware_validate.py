"""Validation of a spec document (the YAML layout, as a dict) into a `HardwareSpec`: every field
checked, a one-line reason (`SpecProblem`) for the first that is wrong."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from profiler.model.hardware_spec import DTYPES, KINDS, UNITS, HardwareSpec, Link, MemoryLevel


class SpecProblem(ValueError):
    """A one-line reason a spec document is invalid."""


def _num(value: Any, where: str, *, allow_zero: bool = False) -> float:
    # PyYAML (YAML 1.1) reads `19.5e12` as a string, so numeric strings are accepted.
    if isinstance(value, bool):
        raise SpecProblem(f"{where} must be a number, not {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SpecProblem(f"{where} must be a number, not {value!r}") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise SpecProblem(f"{where} must be a positive number, not {value!r}")
    return x


def _str(doc: Mapping, key: str, where: str = "") -> str:
    v = doc.get(key)
    if not isinstance(v, str) or not v.strip():
        raise SpecProblem(f"{where}{key} must be a non-empty string")
    return v.strip()


def from_dict(doc: Any) -> HardwareSpec:
    """Validate a YAML-layout dict and build the spec; raises ValueError with a one-line reason."""
    if not isinstance(doc, Mapping):
        raise SpecProblem("a hardware spec must be a mapping at the top level")
    known = {f.name for f in fields(HardwareSpec)}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise SpecProblem(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(known))})")
    name = _str(doc, "name")
    kind = _str(doc, "kind")
    if kind not in KINDS:
        raise SpecProblem(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    vendor = _str(doc, "vendor")

    pf = doc.get("peak_flops")
    if not isinstance(pf, Mapping) or not pf:
        raise SpecProblem("peak_flops must map a unit (matrix, vector) to {dtype: FLOP/s}")
    peaks: dict[str, dict[str, float]] = {}
    for unit, table in pf.items():
        if unit not in UNITS:
            raise SpecProblem(f"peak_flops: unknown unit {unit!r} (units: {', '.join(UNITS)})")
        if not isinstance(table, Mapping):
            raise SpecProblem(f"peak_flops.{unit} must map a dtype to FLOP/s")
        peaks[unit] = {}
        for dt, v in table.items():
            if dt not in DTYPES:
                raise SpecProblem(f"peak_flops.{unit}: unknown dtype {dt!r} (dtypes: {', '.join(DTYPES)})")
            peaks[unit][dt] = _num(v, f"peak_flops.{unit}.{dt}")
    if "fp32" not in peaks.get("vector", {}):
        raise SpecProblem("peak_flops.vector.fp32 is required (it is every dtype's last fallback)")

    mem = doc.get("memory")
    if not isinstance(mem, list) or not mem:
        raise SpecProblem("memory must be a non-empty list of levels, outermost first")
    levels = []
    for i, m in enumerate(mem):
        if not isinstance(m, Mapping):
            raise SpecProblem(f"memory[{i}] must be a mapping with name, capacity_bytes, bandwidth")
        lname = _str(m, "name", f"memory[{i}].")
        cap = m.get("capacity_bytes")
        cap_i = None if cap is None else int(_num(cap, f"memory[{i}].capacity_bytes"))
        parts = int(_num(m.get("partitions", 1), f"memory[{i}].partitions"))
        if parts < 1:
            raise SpecProblem(f"memory[{i}].partitions must be a positive integer")
        levels.append(MemoryLevel(lname, cap_i, _num(m.get("bandwidth"), f"memory[{i}].bandwidth"), parts))
    if len({lv.name for lv in levels}) != len(levels):
        raise SpecProblem("memory level names must be unique")

    links_doc = doc.get("links") or []
    if not isinstance(links_doc, list):
        raise SpecProblem("links must be a list")
    links = []
    for i, lk in enumerate(links_doc):
        if not isinstance(lk, Mapping):
            raise SpecProblem(f"links[{i}] must be a mapping with name, bandwidth, latency, topology")
        links.append(
            Link(
                _str(lk, "name", f"links[{i}]."),
                _num(lk.get("bandwidth"), f"links[{i}].bandwidth"),
                _num(lk.get("latency"), f"links[{i}].latency", allow_zero=True),
                _str(lk, "topology", f"links[{i}]."),
                _num(lk.get("hop_latency", 0.0), f"links[{i}].hop_latency", allow_zero=True),
            )
        )

    host_link = _host_link(doc.get("host_link"))
    min_op = _num(doc.get("min_op_time"), "min_op_time", allow_zero=True)
    if min_op > 1.0:
        raise SpecProblem(f"min_op_time is in seconds; {min_op} s is not plausible")

    match = doc.get("match") or {}
    if not isinstance(match, Mapping):
        raise SpecProblem("match must be a mapping")
    for key in ("names", "exclude"):
        for rx in match.get(key) or []:
            try:
                re.compile(rx)
            except (re.error, TypeError) as e:
                raise SpecProblem(f"match.{key}: bad regex {rx!r}: {e}") from None
    mb = match.get("memory_bytes")
    if mb is not None:
        rng = mb if isinstance(mb, list) else [mb, mb]
        if len(rng) != 2:
            raise SpecProblem("match.memory_bytes must be a value or [min, max]")
        lo, hi = (_num(x, "match.memory_bytes") for x in rng)
        if lo > hi:
            raise SpecProblem("match.memory_bytes: min > max")

    sources = doc.get("sources") or []
    if not isinstance(sources, list) or not all(isinstance(s, str) and s.strip() for s in sources):
        raise SpecProblem("sources must be a list of citations (title and URL or page)")

    return HardwareSpec(
        name=name,
        kind=kind,
        vendor=vendor,
        peak_flops=peaks,
        memory=tuple(levels),
        links=tuple(links),
        min_op_time=min_op,
        host_link=host_link,
        match=dict(match),
        sources=tuple(s.strip() for s in sources),
        description=str(doc.get("description") or ""),
    )


def _host_link(lk: Any) -> Link | None:
    """host_link: {name, bandwidth (bytes/s per direction), latency (s, default 0)}, or absent."""
    if lk is None:
        return None
    if not isinstance(lk, Mapping):
        raise SpecProblem("host_link must be a mapping with name, bandwidth (bytes/s per direction)")
    return Link(
        _str(lk, "name", "host_link."),
        _num(lk.get("bandwidth"), "host_link.bandwidth"),
        _num(lk.get("latency", 0.0), "host_link.latency", allow_zero=True),
        "host",
    )
