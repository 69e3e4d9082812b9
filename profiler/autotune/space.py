"""The search space of the autotune loop, built from a compiled program.

Dimensions (each one choice of the compiler, its first option the compiler's own):

    tile:<kernel>       per matrix kernel (matmul or attention), the tiles that fit the core's
                        local memory with double buffering, sized by the tiling pass's own
                        formula (accelerator/compiler/tiling.py) on the kernel as fused;
                        matmul {m, n, k}: power-of-two multiples of the array's rows/cols (or
                        the dim itself); attention {q, kv} (below the whole: flash)
    fusion:<region>     per region the automatic plan fuses (a group of > 1 op): `fused` (the
                        plan's group) or `split` (a matmul/attention keeps its prologue, its
                        epilogue runs op by op; a vector chain runs op by op)
    precision:<module>  per layer (the module of each matmul), a policy of
                        accelerator/compiler/precision.py the preset's matrix unit runs
                        (only when the caller asks for the precision lever)
    chips               tensor parallel over 1, 2, 4, ... chips of the preset (multi-chip presets)

Fusion and tiling are chosen jointly: a candidate holds one option per dimension, so the space
is their product (`Space.size`). A `Candidate` holds only its choices that differ from the
compiler's (the baseline is the empty candidate) and hashes as sha256 of its canonical JSON.
Not in the space (the simulator reads no per-kernel setting for them, so they would change
nothing): the array's dataflow per kernel, buffering deeper than double, the split over cores
(the simulator takes the fastest split itself)."""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

LEVERS = ("tile", "fusion", "precision", "chips")
MAX_TILES = 6  # tile options per kernel: the compiler's and the 5 next by output reuse


def canonical(obj: Any) -> str:
    """Canonical JSON: sorted keys, no spaces (the hash input)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _jsonable(option: Any) -> Any:
    """A tile option is a tuple of (dim, size) pairs: JSON has it as a mapping."""
    if isinstance(option, tuple) and option and all(isinstance(p, tuple) and len(p) == 2 for p in option):
        return dict(option)
    return option


def _frozen(value: Any) -> Any:
    return tuple(sorted((str(k), int(v)) for k, v in value.items())) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class Dimension:
    """One choice: `name` ('tile:mm_4'), `lever` (tile, fusion, precision, chips), `options`
    (the compiler's own first), `kernels` (the baseline kernels it changes), `module`."""

    name: str
    lever: str
    options: tuple[Any, ...]
    kernels: tuple[str, ...] = ()
    module: str = ""

    @property
    def default(self) -> Any:
        return self.options[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "lever": self.lever,
            "options": [_jsonable(o) for o in self.options],
            "kernels": list(self.kernels),
            "module": self.module,
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Dimension:
        return Dimension(
            d["name"], d["lever"], tuple(_frozen(o) for o in d["options"]), tuple(d["kernels"]), d.get("module", "")
        )


@dataclass(frozen=True)
class Candidate:
    """The choices that differ from the compiler's: (dimension name, option) sorted by name."""

    choices: tuple[tuple[str, Any], ...] = ()

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.choices).get(name, default)

    def to_json(self) -> dict[str, Any]:
        return {name: _jsonable(option) for name, option in self.choices}

    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON of the choices (stable across runs and machines)."""
        return hashlib.sha256(canonical(self.to_json()).encode()).hexdigest()

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Candidate:
        return Candidate(tuple(sorted((k, _frozen(v)) for k, v in d.items())))

    def describe(self) -> str:
        if not self.choices:
            return "the compiler's plan"
        return "; ".join(f"{n}={_show(o)}" for n, o in self.choices)


def _show(option: Any) -> str:
    if isinstance(option, tuple):
        return "x".join(f"{k}{v}" for k, v in option)
    return str(option)


@dataclass(frozen=True)
class Space:
    """The joint space: `dimensions`, the baseline `precision` policy, the `model` and `accel`
    names it was built for."""

    dimensions: tuple[Dimension, ...]
    precision: str
    model: str = ""
    accel: str = ""
    _index: Mapping[str, Dimension] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {d.name: d for d in self.dimensions})

    def dimension(self, name: str) -> Dimension:
        return self._index[name]

    @property
    def size(self) -> int:
        return math.prod(len(d.options) for d in self.dimensions)

    def candidate(self, choice: Mapping[str, Any]) -> Candidate:
        """The candidate of `choice` (dimension -> option); defaults dropped; ValueError on an
        unknown dimension or option."""
        out = []
        for name, option in choice.items():
            d = self._index.get(name)
            option = _frozen(option)
            if d is None or option not in d.options:
                raise ValueError(f"{name}={option!r} is not in the space")
            if option != d.default:
                out.append((name, option))
        return Candidate(tuple(sorted(out)))

    def from_indices(self, indices: Mapping[str, int]) -> Candidate:
        return self.candidate({n: self._index[n].options[i] for n, i in indices.items()})

    def indices(self, c: Candidate) -> dict[str, int]:
        chosen = dict(c.choices)
        return {d.name: d.options.index(chosen.get(d.name, d.default)) for d in self.dimensions}

    def enumerate(self) -> Iterator[Candidate]:
        """Every candidate, in mixed-radix order (the first dimension varies slowest)."""
        for flat in range(self.size):
            yield self.nth(flat)

    def nth(self, flat: int) -> Candidate:
        choice = {}
        for d in reversed(self.dimensions):
            flat, i = divmod(flat, len(d.options))
            choice[d.name] = d.options[i]
        return self.candidate(choice)

    def sample(self, rng: random.Random) -> Candidate:
        return self.candidate({d.name: rng.choice(d.options) for d in self.dimensions})

    def neighbours(self, c: Candidate, dims: list[str]) -> list[Candidate]:
        """`c` with one of `dims` set to each of its other options."""
        chosen = dict(c.choices)
        out = []
        for name in dims:
            d = self._index[name]
            current = chosen.get(name, d.default)
            for option in d.options:
                if option != current:
                    out.append(self.candidate({**chosen, name: option}))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "model": self.model,
            "accel": self.accel,
            "dimensions": [d.to_dict() for d in self.dimensions],
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Space:
        dims = tuple(Dimension.from_dict(x) for x in d["dimensions"])
        return Space(dims, d["precision"], d.get("model", ""), d.get("accel", ""))
