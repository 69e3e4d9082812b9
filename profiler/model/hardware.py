"""`HardwareSpec`: the ceilings a roofline is drawn against, loaded from cited YAML presets.

A spec holds dense peak FLOP/s per execution unit (`matrix`: tensor/matrix cores; `vector`:
SIMD/CUDA cores) and dtype, the memory levels outermost first (capacity, bandwidth), the
interconnect links (bandwidth per direction per device, a fixed per-collective latency, a
per-step (hop) latency, topology) and the minimum time of one op (an empty kernel launch on a GPU, the dispatch of an
empty op on a CPU). Those are the floors of docs/architecture.md, "How time is classified":

    t_compute = flops / peak(dtype, unit)
    t_memory  = max over levels of bytes_level / bandwidth(level)
    t_comm    = link.latency + steps * link.hop_latency + algorithm bytes / link.bandwidth
                (analysis.cost.comm: steps and algorithm bytes per collective)
    t_runtime = min_op_time
    t_host    = bytes copied between host and device / host_link.bandwidth
                (HtoD / DtoH copies: analysis.roofline; device-to-device copies stay on HBM)

Presets live in `profiler/model/presets/*.yaml`, every number with its source beside it. Vendor
sheets quote "with sparsity" figures for tensor cores; presets hold dense figures only.
`perf calibrate` writes a spec of the same shape with measured ceilings.

A model module: imports nothing of ours but `profiler.model.errors` (stdlib and PyYAML otherwise).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from profiler.model.dtypes import dtype_name
from profiler.model.errors import InputError
from profiler.model.files import read_bounded, write_atomic

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
#: A spec is a few KiB of YAML; anything past this is not one (and is not read into memory).
SPEC_MAX_BYTES = 4 * 2**20

KINDS = ("gpu", "cpu", "npu")
UNITS = ("matrix", "vector")
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")

# The dtype an op falls back to when the unit has no native support for its own (it runs
# at the next wider precision the hardware has; fp32 is always present, validation checks it).
_WIDER = {"fp4": "fp8", "fp8": "bf16", "int8": "fp16", "bf16": "fp32", "fp16": "fp32", "tf32": "fp32"}


def normalize_dtype(dtype: str) -> str | None:
    """Our dtype name for `dtype` ('torch.bfloat16', 'c10::Half', 'float8_e4m3fn', ...), None if unknown."""
    d = str(dtype).strip().lower().removeprefix("torch.")
    if d in DTYPES:
        return d
    if d.startswith(("float4", "fp4", "nvfp4", "mxfp4")):
        return "fp4"
    name = dtype_name(dtype)  # profiler.model.dtypes: every spelling the readers meet
    return name if name in DTYPES else None


class _FrozenDict(dict):
    """A dict that refuses changes (so a frozen spec stays frozen), still picklable and JSON-able."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("HardwareSpec mappings are read-only; build a new spec instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self):
        return (_FrozenDict, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted((k, v) for k, v in self.items() if not isinstance(v, (dict, list)))))


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _FrozenDict({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy: `bandwidth` bytes/s (whole device), `capacity_bytes` None if
    unknown (whole device), `partitions` the independent instances it is split into (shared memory:
    one per SM), so one instance holds capacity_bytes / partitions."""

    name: str
    capacity_bytes: int | None
    bandwidth: float  # bytes/s
    partitions: int = 1


@dataclass(frozen=True)
class Link:
    """An interconnect: `bandwidth` bytes/s per direction per device, `latency` s fixed per
    collective, `hop_latency` s per algorithm step (NCCL's baseLat and hwLat; 0 when `latency`
    was measured for the whole collective, as `perf calibrate` does)."""

    name: str
    bandwidth: float  # bytes/s per direction per device
    latency: float  # s
    topology: str  # e.g. 'nvswitch', 'full-mesh', 'bridge-pair', 'host'
    hop_latency: float = 0.0  # s per step


@dataclass(frozen=True)
class HardwareSpec:
    """Ceilings of one device. See the module docstring; build with `load_spec` or `from_dict`."""

    name: str
    kind: str  # 'gpu' | 'cpu' | 'npu'
    vendor: str
    peak_flops: Mapping[str, Mapping[str, float]]  # unit -> dtype -> dense FLOP/s (OP/s for int8)
    memory: tuple[MemoryLevel, ...]  # outermost first
    links: tuple[Link, ...] = ()
    min_op_time: float = 0.0  # s, one empty kernel launch / op dispatch
    host_link: Link | None = None  # the link to host memory (PCIe, NVLink-C2C); None when unknown
    match: Mapping[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "peak_flops", _freeze(self.peak_flops))
        object.__setattr__(self, "match", _freeze(self.match))
        object.__setattr__(self, "memory", tuple(self.memory))
        object.__setattr__(self, "links", tuple(self.links))
        object.__setattr__(self, "sources", tuple(self.sources))

    def __hash__(self) -> int:
        return hash(
            (self.name, self.kind, self.vendor, self.memory, self.links, self.host_link, self.min_op_time, self.sources)
        )

    def peak(self, dtype: str, unit: str = "matrix") -> float:
        """Dense peak FLOP/s for `dtype` on `unit` ('matrix' or 'vector').

        `dtype` may be ours ('bf16') or torch's ('torch.bfloat16', 'float8_e4m3fn'); an unknown
        dtype (int64, bool, complex) is costed as fp32. When the unit lacks the dtype:

        - on the matrix unit, the vector unit's figure for the same dtype is used (the op runs on
          the SIMD cores: e.g. fp64 on a GPU whose tensor cores have no fp64);
        - otherwise the next wider dtype the hardware has: fp4 -> fp8 -> bf16 -> fp32,
          int8 -> fp16 -> fp32, tf32 -> fp32 (no TF32 tensor cores: the matmul runs in fp32,
          on the fp32 matrix unit if there is one, else on the vector unit), and the same
          matrix-then-vector order at each step.

        A vector-unit query never falls back to the matrix unit. fp32 vector is always present.
        """
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, not {unit!r}")
        d: str | None = normalize_dtype(dtype) or "fp32"
        units = ("matrix", "vector") if unit == "matrix" else ("vector",)
        while d is not None:
            for u in units:
                v = self.peak_flops.get(u, {}).get(d)
                if v:
                    return float(v)
            d = _WIDER.get(d)
        raise KeyError(f"{self.name}: no peak for {dtype} on {unit} (and no fp32 vector figure)")

    def peak_source(self, dtype: str, unit: str = "matrix") -> str:
        """Which figure `peak(dtype, unit)` uses, as 'unit dtype' ('vector fp32' for bf16 on a V100,
        whose tensor cores have no bf16): the label of a fallback."""
        d: str | None = normalize_dtype(dtype) or "fp32"
        units = ("matrix", "vector") if unit == "matrix" else ("vector",)
        while d is not None:
            for u in units:
                if self.peak_flops.get(u, {}).get(d):
                    return f"{u} {d}"
            d = _WIDER.get(d)
        return ""

    def bandwidth(self, level: str | None = None) -> float:
        """Bandwidth in bytes/s of memory level `level`; None, 'main', 'hbm', 'dram' or 'global' mean the outermost."""
        for m in self.memory:
            if m.name == level:
                return m.bandwidth
        if level in (None, "main", "hbm", "dram", "global", "device"):
            return self.memory[0].bandwidth
        raise KeyError(f"{self.name} has no memory level {level!r} (levels: {', '.join(m.name for m in self.memory)})")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (the YAML layout), for writing a spec or storing it in trace metadata."""
        return {
            "name": self.name,
            "kind": self.kind,
            "vendor": self.vendor,
            "description": self.description,
            "peak_flops": _thaw(self.peak_flops),
            "memory": [
                {
                    "name": m.name,
                    "capacity_bytes": m.capacity_bytes,
                    "bandwidth": m.bandwidth,
                    **({"partitions": m.partitions} if m.partitions != 1 else {}),
                }
                for m in self.memory
            ],
            "links": [
                {
                    "name": lk.name,
                    "bandwidth": lk.bandwidth,
                    "latency": lk.latency,
                    "topology": lk.topology,
                    **({"hop_latency": lk.hop_latency} if lk.hop_latency else {}),
                }
                for lk in self.links
            ],
            "min_op_time": self.min_op_time,
            **(
                {
                    "host_link": {
                        "name": self.host_link.name,
                        "bandwidth": self.host_link.bandwidth,
                        "latency": self.host_link.latency,
                    }
                }
                if self.host_link
                else {}
            ),
            "match": _thaw(self.match),
            "sources": list(self.sources),
        }


# ---------------------------------------------------------------------------------------------
# Loading and validation


class _SpecProblem(ValueError):
    """A one-line reason a spec document is invalid."""


def _num(value: Any, where: str, *, allow_zero: bool = False) -> float:
    # PyYAML (YAML 1.1) reads `19.5e12` as a string, so numeric strings are accepted.
    if isinstance(value, bool):
        raise _SpecProblem(f"{where} must be a number, not {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _SpecProblem(f"{where} must be a number, not {value!r}") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise _SpecProblem(f"{where} must be a positive number, not {value!r}")
    return x


def _str(doc: Mapping, key: str, where: str = "") -> str:
    v = doc.get(key)
    if not isinstance(v, str) or not v.strip():
        raise _SpecProblem(f"{where}{key} must be a non-empty string")
    return v.strip()


def from_dict(doc: Any) -> HardwareSpec:
    """Validate a YAML-layout dict and build the spec; raises ValueError with a one-line reason."""
    if not isinstance(doc, Mapping):
        raise _SpecProblem("a hardware spec must be a mapping at the top level")
    known = {f.name for f in fields(HardwareSpec)}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise _SpecProblem(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(known))})")
    name = _str(doc, "name")
    kind = _str(doc, "kind")
    if kind not in KINDS:
        raise _SpecProblem(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    vendor = _str(doc, "vendor")

    pf = doc.get("peak_flops")
    if not isinstance(pf, Mapping) or not pf:
        raise _SpecProblem("peak_flops must map a unit (matrix, vector) to {dtype: FLOP/s}")
    peaks: dict[str, dict[str, float]] = {}
    for unit, table in pf.items():
        if unit not in UNITS:
            raise _SpecProblem(f"peak_flops: unknown unit {unit!r} (units: {', '.join(UNITS)})")
        if not isinstance(table, Mapping):
            raise _SpecProblem(f"peak_flops.{unit} must map a dtype to FLOP/s")
        peaks[unit] = {}
        for dt, v in table.items():
            if dt not in DTYPES:
                raise _SpecProblem(f"peak_flops.{unit}: unknown dtype {dt!r} (dtypes: {', '.join(DTYPES)})")
            peaks[unit][dt] = _num(v, f"peak_flops.{unit}.{dt}")
    if "fp32" not in peaks.get("vector", {}):
        raise _SpecProblem("peak_flops.vector.fp32 is required (it is every dtype's last fallback)")

    mem = doc.get("memory")
    if not isinstance(mem, list) or not mem:
        raise _SpecProblem("memory must be a non-empty list of levels, outermost first")
    levels = []
    for i, m in enumerate(mem):
        if not isinstance(m, Mapping):
            raise _SpecProblem(f"memory[{i}] must be a mapping with name, capacity_bytes, bandwidth")
        lname = _str(m, "name", f"memory[{i}].")
        cap = m.get("capacity_bytes")
        cap_i = None if cap is None else int(_num(cap, f"memory[{i}].capacity_bytes"))
        parts = int(_num(m.get("partitions", 1), f"memory[{i}].partitions"))
        if parts < 1:
            raise _SpecProblem(f"memory[{i}].partitions must be a positive integer")
        levels.append(MemoryLevel(lname, cap_i, _num(m.get("bandwidth"), f"memory[{i}].bandwidth"), parts))
    if len({lv.name for lv in levels}) != len(levels):
        raise _SpecProblem("memory level names must be unique")

    links_doc = doc.get("links") or []
    if not isinstance(links_doc, list):
        raise _SpecProblem("links must be a list")
    links = []
    for i, lk in enumerate(links_doc):
        if not isinstance(lk, Mapping):
            raise _SpecProblem(f"links[{i}] must be a mapping with name, bandwidth, latency, topology")
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
        raise _SpecProblem(f"min_op_time is in seconds; {min_op} s is not plausible")

    match = doc.get("match") or {}
    if not isinstance(match, Mapping):
        raise _SpecProblem("match must be a mapping")
    for key in ("names", "exclude"):
        for rx in match.get(key) or []:
            try:
                re.compile(rx)
            except (re.error, TypeError) as e:
                raise _SpecProblem(f"match.{key}: bad regex {rx!r}: {e}") from None
    mb = match.get("memory_bytes")
    if mb is not None:
        rng = mb if isinstance(mb, list) else [mb, mb]
        if len(rng) != 2:
            raise _SpecProblem("match.memory_bytes must be a value or [min, max]")
        lo, hi = (_num(x, "match.memory_bytes") for x in rng)
        if lo > hi:
            raise _SpecProblem("match.memory_bytes: min > max")

    sources = doc.get("sources") or []
    if not isinstance(sources, list) or not all(isinstance(s, str) and s.strip() for s in sources):
        raise _SpecProblem("sources must be a list of citations (title and URL or page)")

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
        raise _SpecProblem("host_link must be a mapping with name, bandwidth (bytes/s per direction)")
    return Link(
        _str(lk, "name", "host_link."),
        _num(lk.get("bandwidth"), "host_link.bandwidth"),
        _num(lk.get("latency", 0.0), "host_link.latency", allow_zero=True),
        "host",
    )


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _load_file(path: Path) -> HardwareSpec:
    if not os.path.lexists(path):
        raise InputError(path, f"no such file (and no preset of that name; presets: {', '.join(presets())})")
    try:
        text = read_bounded(path, SPEC_MAX_BYTES, gunzip=False).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"cannot read hardware spec: {_one_line(e)}") from None
    try:
        doc = yaml.load(text, Loader=_SAFE_LOADER)
    except RecursionError:
        raise InputError(path, "invalid YAML: nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        if "nesting depth" in str(problem):  # libyaml's word for what the pure-Python loader hits as recursion
            problem = "nested too deeply"
        raise InputError(path, f"invalid YAML{where}: {_one_line(problem)}") from None
    try:
        return from_dict(doc)
    except _SpecProblem as e:
        raise InputError(path, f"invalid hardware spec: {_one_line(e)}") from None


#: libyaml's parser where PyYAML has it (its wheels do): the same safe constructor and resolver, 10x faster.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def _preset(name: str) -> HardwareSpec:
    return _load_file(PRESETS_DIR / f"{name}.yaml")


@cache
def preset_match(name: str) -> dict[str, Any]:
    """The `match:` block of a shipped preset, parsed alone: matching a device reads these, and
    only the preset that wins is loaded whole (`_preset`, which also validates the block)."""
    lines = (PRESETS_DIR / f"{name}.yaml").read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"match:\s*(#.*)?$", line)), None)
    if start is None:
        return {}
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1] not in ("", " ", "#")), len(lines))
    doc = yaml.load("\n".join(lines[start:end]), Loader=_SAFE_LOADER)
    return dict(doc.get("match") or {})


@cache
def _preset_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in PRESETS_DIR.glob("*.yaml")))


def presets() -> list[str]:
    """Names of the shipped presets (file stems of profiler/model/presets/*.yaml), sorted."""
    return list(_preset_names())


def load_spec(path_or_name: str | Path) -> HardwareSpec:
    """A preset by name ('a100-sxm-80gb'; case and '_' vs '-' ignored) or a YAML spec file.

    Raises `InputError(path, one-line problem)` for a missing, unreadable or invalid file.
    """
    if isinstance(path_or_name, str):
        key = path_or_name.strip().lower().replace("_", "-")
        if key in presets():
            return _preset(key)
    return _load_file(Path(path_or_name))


def save_spec(spec: HardwareSpec, path: str | Path, *, force: bool = False) -> Path:
    """Write `spec` as YAML (what `perf calibrate` produces), whole or not at all, over an existing
    file only with `force` (profiler.model.files.write_atomic); `load_spec(path)` reads it back."""
    return write_atomic(path, yaml.safe_dump(spec.to_dict(), sort_keys=False).encode("utf-8"), force=force)
