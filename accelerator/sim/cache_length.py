"""A decode program with the KV-cache length as a parameter: compiled twice, with caches of M and
M + 1 positions, the two programs have the same kernels, ops and transfers and differ only in
the sizes that follow the cache length (the K/V cache and its transfers, the attention's key
length, the mask). Every such size is linear in the length, so

    size(L) = size(M) + (L - M) x (size(M + 1) - size(M))      (a shape dim, or a transfer's bytes)

gives the program at any length L (`CacheLengthProgram.at(L)`): the decode step at cache length
L reads L keys per sequence, as a paged-attention server does, not the whole allocation. Two
compiles stand for all of a run's decode steps; any difference beyond sizes (another tiling,
another schedule) is an error naming it, since no single program then covers every length."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any


class CacheLengthProgram:
    """`at_m` and `at_m1`: the decode program compiled with caches of `m` and `m + 1` positions."""

    def __init__(self, at_m: Any, at_m1: Any, m: int) -> None:
        _same_structure(at_m, at_m1)
        self.base, self.m = at_m, m
        t0, t1 = at_m.types(), at_m1.types()
        self.varying = {n: (t0[n], t1[n]) for n in t0 if t0[n] != t1.get(n)}  # value -> (type at M, at M+1)
        self.bytes_step = {
            i: b.bytes - a.bytes for i, (a, b) in enumerate(zip(at_m.transfers, at_m1.transfers)) if a.bytes != b.bytes
        }
        self.tile_step = {  # kernel -> {tile key: its step per position} (a DMA kernel's elements)
            i: {key: kb.tile[key] - v for key, v in ka.tile.items() if kb.tile[key] != v}
            for i, (ka, kb) in enumerate(zip(at_m.kernels, at_m1.kernels))
            if ka.tile and ka.tile != kb.tile
        }
        touched = set(self.varying) | {at_m.transfers[i].value for i in self.bytes_step}
        producers = at_m.producers()
        self.touches: dict[int, tuple[list[str], list[int]]] = {}  # kernel -> (varying values, varying transfers)
        for i, k in enumerate(at_m.kernels):
            ops = [producers[n] for n in k.ops if n in producers]
            values = sorted({n for o in ops for n in (o.name, *o.refs())} & set(self.varying))
            if values or touched.intersection((*k.inputs, *k.outputs)) or i in self.tile_step:
                self.touches[i] = (values, [])
        for j in self.bytes_step:
            self.touches.setdefault(_kernel_of(at_m.transfers[j]), ([], []))[1].append(j)
        self.varying_kernels = frozenset(self.touches)  # the kernels whose time may change with the length
        self._types, self._producers = t0, at_m.producers()

    def at(self, length: int) -> ProgramAtLength:
        """The program at cache length `length` (module docstring)."""
        if length < 1:
            raise ValueError(f"cache length {length}: expected at least 1")
        d = length - self.m
        types = dict(self._types)
        producers = dict(self._producers)
        for name, (a, b) in self.varying.items():
            types[name] = _scaled(a, b, d)
            if name in producers:
                producers[name] = replace(producers[name], type=types[name])
        transfers = list(self.base.transfers)
        for i, step in self.bytes_step.items():
            transfers[i] = replace(transfers[i], bytes=transfers[i].bytes + d * step)
        kernels = list(self.base.kernels)
        for i, steps in self.tile_step.items():
            tile = dict(kernels[i].tile)
            tile.update({key: tile[key] + d * step for key, step in steps.items()})
            kernels[i] = replace(kernels[i], tile=tile)
        return ProgramAtLength(self, length, types, producers, tuple(transfers), tuple(kernels))


class ProgramAtLength:
    """The decode program at one cache length (duck-types a Program for accelerator/sim/run.py:
    what it does not override, it reads from the base program);
    `base` and `varying_kernels` let accelerator/sim/reuse.py reuse the other kernels' shapes."""

    def __init__(
        self,
        param: CacheLengthProgram,
        length: int,
        types: Mapping,
        producers: Mapping,
        transfers: tuple,
        kernels: tuple,
    ) -> None:
        self.base, self.varying_kernels, self.length = param.base, param.varying_kernels, length
        self._touches = param.touches
        self.name, self.chips, self.kernels, self.transfers = param.base.name, param.base.chips, kernels, transfers
        self._types, self._producers = types, producers

    def types(self) -> Mapping:
        return self._types

    def producers(self) -> Mapping:
        return self._producers

    def __getattr__(self, name: str) -> Any:  # the rest (placement, ops...) as the base program's
        return getattr(self.__dict__["base"], name)

    def varying_key(self, kernel: int) -> tuple:
        """What of kernel `kernel` differs from the base program at this length: the types of
        the varying values its ops read or write, its varying transfers' bytes, its tile."""
        values, moves = self._touches[kernel]
        tile = self.kernels[kernel].tile
        return (
            tuple(self._types[n] for n in values),
            tuple(self.transfers[j].bytes for j in moves),
            tuple(sorted(tile.items())) if tile else (),
        )


def _kernel_of(t: Any) -> int:
    return t.before if t.before >= 0 else t.after


def _scaled(a: Any, b: Any, d: int) -> Any:
    """The type `a` (at M) moved `d` positions along its difference to `b` (at M + 1)."""
    if isinstance(a, tuple):
        return tuple(_scaled(x, y, d) for x, y in zip(a, b, strict=True))
    hint = tuple(x + d * (y - x) for x, y in zip(a.hint, b.hint, strict=True))
    shape = tuple(x + d * (y - x) if isinstance(x, int) and isinstance(y, int) else x for x, y in zip(a.shape, b.shape))
    return replace(a, hint=hint, shape=shape)


def _same_structure(a: Any, b: Any) -> None:
    """ValueError naming the first difference between the two compiles beyond sizes."""
    ka = [(k.name, k.ops, k.unit, sorted(k.tile or {})) for k in a.kernels]
    kb = [(k.name, k.ops, k.unit, sorted(k.tile or {})) for k in b.kernels]
    if ka != kb:
        at = next((x[0] for x, y in zip(ka, kb) if x != y), f"{len(ka)} kernels, then {len(kb)}")
        raise ValueError(f"the decode program's kernels change with the KV-cache length (first: {at})")
    ta = [(t.value, t.src, t.dst, t.before, t.after) for t in a.transfers]
    tb = [(t.value, t.src, t.dst, t.before, t.after) for t in b.transfers]
    if ta != tb:
        raise ValueError("the decode program's DMA transfers change with the KV-cache length")
    if [(o.name, o.target) for o in a.ops] != [(o.name, o.target) for o in b.ops]:
        raise ValueError("the decode program's ops change with the KV-cache length")
    for x, y in zip(a.types().values(), b.types().values()):
        if _rank(x) != _rank(y):
            raise ValueError("a value's rank changes with the KV-cache length")


def _rank(t: Any) -> Any:
    return tuple(_rank(x) for x in t) if isinstance(t, tuple) else len(getattr(t, "hint", ()))
