"""`AccelSpec`: the accelerator the compiler targets and the simulator runs, from a YAML file
(`accelerator/presets/*.yaml`, every number with its source or reasoning beside it).

Fields (issue 13, section 1): chips (count, topology, link bandwidth/latency); per chip the
off-chip memory (`hbm`: capacity, bandwidth, latency) and shared on-chip memory; per core a
systolic matrix unit (rows x cols, dataflow os/ws/is, MACs per cycle per dtype, optionally
stationary_buffers 1 or 2: its stationary block single- or double-buffered), a vector unit
(lanes, ops per lane per cycle per dtype and op class add_mul/exp/reciprocal), local memory
(capacity, bandwidth) and DMA engines (count, bandwidth, setup latency); clock; kernel dispatch
overhead; optionally `host_link` (bandwidth per direction, latency) between the accelerator and
the host that runs the host partition. Units: bytes, bytes/s, seconds, Hz.

Bad input raises `InputError(path, one line naming the field)`; the CLI prints it and exits 2."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from profiler.model.errors import InputError
from profiler.model.files import read_bounded

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
SPEC_MAX_BYTES = 1 * 2**20
DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")
OP_CLASSES = ("add_mul", "exp", "reciprocal")
DATAFLOWS = ("os", "ws", "is")
TOPOLOGIES = ("single", "ring", "mesh2d", "fully_connected", "switch")


@dataclass(frozen=True)
class Memory:
    capacity_bytes: int
    bandwidth: float  # bytes/s
    latency_s: float = 0.0


@dataclass(frozen=True)
class MatrixUnit:
    rows: int
    cols: int
    dataflow: str  # os, ws or is
    macs_per_cycle: Mapping[str, float]  # dtype -> MACs per cycle
    stationary_buffers: int = 1  # 1: SCALE-Sim's array; 2: the stationary block double-buffered


@dataclass(frozen=True)
class VectorUnit:
    lanes: int
    ops_per_cycle: Mapping[str, Mapping[str, float]]  # dtype -> op class -> ops per lane per cycle


@dataclass(frozen=True)
class Dma:
    engines: int
    bandwidth: float  # bytes/s per engine
    setup_latency_s: float


@dataclass(frozen=True)
class Link:
    bandwidth: float  # bytes/s per direction
    latency_s: float


@dataclass(frozen=True)
class AccelSpec:
    name: str
    description: str
    clock_hz: float
    dispatch_overhead_s: float
    host_fallback: bool
    chips: int
    topology: str
    link: Link | None
    hbm: Memory
    shared_memory: Memory
    cores: int
    matrix: MatrixUnit
    vector: VectorUnit
    local_memory: Memory
    dma: Dma
    host_link: Link | None = None  # accelerator <-> host (the host partition's transfers), per direction

    def matrix_dtypes(self) -> tuple[str, ...]:
        return tuple(d for d, v in self.matrix.macs_per_cycle.items() if v > 0)

    def vector_dtypes(self, op_class: str = "add_mul") -> tuple[str, ...]:
        return tuple(d for d, v in self.vector.ops_per_cycle.items() if v.get(op_class, 0) > 0)

    def matrix_peak_flops(self, dtype: str) -> float:
        """FLOP/s of all matrix units of one chip: cores x MACs/cycle x 2 x clock."""
        return self.cores * self.matrix.macs_per_cycle.get(dtype, 0) * 2 * self.clock_hz


class _Problem(Exception):
    pass


def _section(doc: Any, key: str, where: str) -> Mapping:
    v = doc.get(key) if isinstance(doc, Mapping) else None
    if not isinstance(v, Mapping):
        raise _Problem(f"{where}{key} is missing (a mapping)")
    return v


def _num(doc: Mapping, key: str, where: str, *, integer: bool = False, allow_zero: bool = False) -> float:
    if key not in doc:
        raise _Problem(f"{where}{key} is missing")
    v = doc[key]
    try:
        x = float(v) if not isinstance(v, bool) else math.nan  # YAML 1.1 reads 1.0e9 as a number, 1e9 as a string
    except (TypeError, ValueError):
        x = math.nan
    kind = "integer" if integer else "number"
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero) or (integer and x != int(x)):
        raise _Problem(f"{where}{key} must be a {'non-negative' if allow_zero else 'positive'} {kind}, not {v!r}")
    return int(x) if integer else x


def _int(doc: Mapping, key: str, where: str, *, allow_zero: bool = False) -> int:
    """`_num` for a count: a non-negative whole number."""
    return int(_num(doc, key, where, integer=True, allow_zero=allow_zero))


def _memory(doc: Mapping, key: str, where: str, latency: bool = False) -> Memory:
    m = _section(doc, key, where)
    w = f"{where}{key}."
    lat = _num(m, "latency_s", w, allow_zero=True) if latency else 0.0
    return Memory(_int(m, "capacity_bytes", w), _num(m, "bandwidth", w), lat)


def _dtype_table(doc: Mapping, where: str) -> dict[str, Any]:
    unknown = [k for k in doc if k not in DTYPES]
    if unknown:
        raise _Problem(f"{where}{unknown[0]} is not a dtype this compiler knows ({', '.join(DTYPES)})")
    return dict(doc)


def _stationary_buffers(mx: Mapping) -> int:
    """Optional `chip.core.matrix.stationary_buffers`: 1 (default) or 2."""
    v = mx.get("stationary_buffers", 1)
    if v not in (1, 2) or isinstance(v, bool):
        raise _Problem(f"chip.core.matrix.stationary_buffers must be 1 or 2, not {v!r}")
    return int(v)


def from_dict(doc: Any) -> AccelSpec:
    """Validate a parsed YAML document; raises _Problem naming the first bad field."""
    if not isinstance(doc, Mapping):
        raise _Problem("the document must be a mapping of fields")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _Problem("name is missing (a non-empty string)")
    chips_doc = _section(doc, "chips", "")
    chips = _int(chips_doc, "count", "chips.")
    topology = chips_doc.get("topology")
    if topology not in TOPOLOGIES:
        raise _Problem(f"chips.topology must be one of {', '.join(TOPOLOGIES)}, not {topology!r}")
    link = None
    if chips > 1:
        if topology == "single":
            raise _Problem(f"chips.topology is single but chips.count is {chips}")
        ld = _section(chips_doc, "link", "chips.")
        link = Link(_num(ld, "bandwidth", "chips.link."), _num(ld, "latency_s", "chips.link.", allow_zero=True))
    chip = _section(doc, "chip", "")
    core = _section(chip, "core", "chip.")
    mx = _section(core, "matrix", "chip.core.")
    dataflow = mx.get("dataflow")
    if dataflow not in DATAFLOWS:
        raise _Problem(f"chip.core.matrix.dataflow must be one of {', '.join(DATAFLOWS)}, not {dataflow!r}")
    macs = _dtype_table(_section(mx, "macs_per_cycle", "chip.core.matrix."), "chip.core.matrix.macs_per_cycle.")
    macs = {d: _num(macs, d, "chip.core.matrix.macs_per_cycle.", allow_zero=True) for d in macs}
    if not any(macs.values()):
        raise _Problem("chip.core.matrix.macs_per_cycle has no dtype with a positive rate")
    matrix = MatrixUnit(
        _int(mx, "rows", "chip.core.matrix."),
        _int(mx, "cols", "chip.core.matrix."),
        dataflow,
        macs,
        _stationary_buffers(mx),
    )
    vx = _section(core, "vector", "chip.core.")
    table = _dtype_table(_section(vx, "ops_per_cycle", "chip.core.vector."), "chip.core.vector.ops_per_cycle.")
    ops: dict[str, dict[str, float]] = {}
    for dt, classes in table.items():
        w = f"chip.core.vector.ops_per_cycle.{dt}."
        if not isinstance(classes, Mapping):
            raise _Problem(f"{w[:-1]} must map {', '.join(OP_CLASSES)} to ops per lane per cycle")
        ops[dt] = {c: _num(classes, c, w, allow_zero=True) for c in OP_CLASSES}
    if ops.get("fp32", {}).get("add_mul", 0) <= 0:
        raise _Problem("chip.core.vector.ops_per_cycle.fp32.add_mul must be positive (fp32 is every op's fallback)")
    vector = VectorUnit(_int(vx, "lanes", "chip.core.vector."), ops)
    dd = _section(core, "dma", "chip.core.")
    dma = Dma(
        _int(dd, "engines", "chip.core.dma."),
        _num(dd, "bandwidth", "chip.core.dma."),
        _num(dd, "setup_latency_s", "chip.core.dma.", allow_zero=True),
    )
    host_link = None
    if "host_link" in doc:
        hl = _section(doc, "host_link", "")
        host_link = Link(_num(hl, "bandwidth", "host_link."), _num(hl, "latency_s", "host_link.", allow_zero=True))
    host_fallback = doc.get("host_fallback", True)
    if not isinstance(host_fallback, bool):
        raise _Problem(f"host_fallback must be true or false, not {host_fallback!r}")
    return AccelSpec(
        name=name.strip(),
        description=str(doc.get("description", "")),
        clock_hz=_num(doc, "clock_hz", ""),
        dispatch_overhead_s=_num(doc, "dispatch_overhead_s", "", allow_zero=True),
        host_fallback=host_fallback,
        chips=chips,
        topology=topology,
        link=link,
        hbm=_memory(chip, "hbm", "chip.", latency=True),
        shared_memory=_memory(chip, "shared_memory", "chip."),
        cores=_int(chip, "cores", "chip."),
        matrix=matrix,
        vector=vector,
        local_memory=_memory(core, "local_memory", "chip.core."),
        dma=dma,
        host_link=host_link,
    )


def presets() -> list[str]:
    """Names of the shipped accelerator presets (accelerator/presets/*.yaml), sorted."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def _load_file(path: Path) -> AccelSpec:
    if not os.path.lexists(path):
        raise InputError(
            path, f"no such file (and no accelerator preset of that name; presets: {', '.join(presets())})"
        )
    try:
        text = read_bounded(path, SPEC_MAX_BYTES, gunzip=False).decode("utf-8")
        doc = yaml.safe_load(text)
    except UnicodeDecodeError as e:
        raise InputError(path, f"cannot read accelerator description: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise InputError(path, "invalid YAML: nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise InputError(path, f"invalid YAML{where}: {' '.join(str(problem).split())}") from None
    try:
        return from_dict(doc)
    except _Problem as e:
        raise InputError(path, f"invalid accelerator description: {' '.join(str(e).split())}") from None


@cache
def _preset(name: str) -> AccelSpec:
    return _load_file(PRESETS_DIR / f"{name}.yaml")


def load_accel(path_or_name: str | Path) -> AccelSpec:
    """A preset by name (`edge-npu`, `datacenter-npu`; case and '_' vs '-' ignored) or a YAML file.
    Raises InputError(path, one-line problem) for a missing, unreadable or invalid file."""
    if isinstance(path_or_name, str):
        key = path_or_name.strip().lower().replace("_", "-")
        if key in presets():
            return _preset(key)
    return _load_file(Path(path_or_name))
