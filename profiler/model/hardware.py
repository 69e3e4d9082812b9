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

This module loads and saves specs (presets by name, YAML files); the value is in
`profiler.model.hardware_spec` and its validation in `profiler.model.hardware_validate`, both
re-exported here. Model modules: they import nothing of ours outside the model (stdlib and PyYAML
otherwise).
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from profiler.model.errors import InputError
from profiler.model.files import read_bounded, write_atomic

# the spec value and its validation, re-exported: `from profiler.model.hardware import HardwareSpec`
from profiler.model.hardware_spec import (
    DTYPES as DTYPES,
    KINDS as KINDS,
    UNITS as UNITS,
    HardwareSpec as HardwareSpec,
    Link as Link,
    MemoryLevel as MemoryLevel,
    _freeze as _freeze,
    normalize_dtype as normalize_dtype,
)
from profiler.model.hardware_validate import SpecProblem, from_dict as from_dict

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
#: A spec is a few KiB of YAML; anything past this is not one (and is not read into memory).
SPEC_MAX_BYTES = 4 * 2**20


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
    except SpecProblem as e:
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
