"""The `HardwareSpec` value and its parts (`MemoryLevel`, `Link`), and the names they use: kinds,
execution units, dtypes. Loading and validation: `profiler.model.hardware` (which re-exports these).

A model module: imports nothing of ours but `profiler.model.dtypes` (stdlib otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from profiler.model.dtypes import dtype_name

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
