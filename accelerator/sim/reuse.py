"""Time each distinct kernel once: `simulate_reusing(program, accel, memo)` gives the same `SimRun`
as `run.simulate(program, accel)`, but runs `simulate` only on one representative of each kernel
*shape* (its unit, tile, fused ops with their operand types, and its DMA transfers' routes and
bytes) and copies that kernel's time to every identical one. A Llama layer's kernels repeat 32
times per step and every decode step repeats all of them but the attention's, so a serving run
of 129 steps times a few hundred distinct kernels instead of ~100,000 (benchmarks/bench_simulate.py).

Sound while a kernel's time depends only on the kernel itself (run.py times each kernel on its
own, back to back); tests/test_sim_serving.py checks the result equals `simulate`'s, kernel for
kernel, so a timing model that starts to depend on a kernel's neighbours fails there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelerator.compiler.program import Ref
from accelerator.hardware import AccelSpec
from accelerator.sim.run import SimKernel, SimRun, SimTransfer, simulate

#: op attrs that name a value or a kernel (they differ between identical layers, never change timing)
_NAME_ATTRS = frozenset({"kernel", "in_place"})
_SCALARS = (int, float, str, bool, type(None))


class KernelMemo:
    """Timed kernels by shape (`signature`), shared across programs and steps: a `SimKernel` with
    start 0 and its transfers' starts relative to the kernel's. `hits`/`misses` count lookups."""

    def __init__(self) -> None:
        self.timed: dict[tuple[int, int], SimKernel] = {}  # (chips, signature number) -> kernel
        self.accel: AccelSpec | None = None  # the accelerator the shapes were timed on
        self.signatures: dict[int, tuple[Any, dict[int, int]]] = {}  # id(base program) -> (it, signatures)
        self.numbers: dict[tuple, int] = {}  # signature -> its number (a small key: tuples rehash on every lookup)
        self.hits = 0
        self.misses = 0


class _Subset:
    """The few kernels of `program` that `simulate` has to time (duck-types a Program)."""

    def __init__(self, program: Any, indices: list[int], types: Mapping, producers: Mapping) -> None:
        self.name, self.chips = program.name, program.chips
        self.kernels = tuple(program.kernels[i] for i in indices)
        where = {old: new for new, old in enumerate(indices)}
        self.transfers = tuple(_moved(t, where) for t in program.transfers if _kernel_of(t) in where)
        self._types, self._producers = types, producers

    def types(self) -> Mapping:
        return self._types

    def producers(self) -> Mapping:
        return self._producers


def _kernel_of(t: Any) -> int:
    return t.before if t.before >= 0 else t.after


def _moved(t: Any, where: Mapping[int, int]) -> Any:
    from dataclasses import replace

    return replace(t, before=where[t.before]) if t.before >= 0 else replace(t, after=where[t.after])


def _freeze(value: Any, types: Mapping) -> Any:
    """A hashable stand-in for an op argument: a value by its type, containers by their items."""
    if isinstance(value, Ref):
        return _type_key(types.get(value.name))
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v, types) for v in value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v, types)) for k, v in value.items()))
    return repr(value)


def _freeze_attrs(attrs: Mapping) -> tuple:
    """A kernel's attrs, hashable; a mapping inside them is keyed by op names (fusion's 'fused':
    op -> why), which differ from layer to layer: only its values count."""
    out = []
    for k, v in sorted(attrs.items()):
        if isinstance(v, Mapping):
            v = tuple(sorted(repr(x) for x in v.values()))
        out.append((k, v if isinstance(v, _SCALARS) else repr(v)))
    return tuple(out)


def _type_key(t: Any) -> Any:
    if isinstance(t, tuple):
        return tuple(_type_key(x) for x in t)
    return (getattr(t, "hint", None), getattr(t, "dtype", None))


def signature(kernel: Any, ops: list, types: Mapping, loads: list, stores: list) -> tuple:
    """What a kernel's time depends on: unit, tile, attrs, each fused op (target, result type,
    argument types and constants, attrs but its names) and its transfers (src, dst, bytes)."""
    parts: list[Any] = [kernel.unit, _freeze(kernel.tile or {}, types), _freeze_attrs(kernel.attrs or {})]
    for op in ops:
        attrs = {k: v for k, v in (op.attrs or {}).items() if k not in _NAME_ATTRS}
        parts.append(
            (op.target, _type_key(op.type), _freeze(op.args, types), _freeze(op.kwargs, types), _freeze(attrs, types))
        )
    parts.append(tuple((t.src, t.dst, t.bytes) for t in loads))
    parts.append(tuple((t.src, t.dst, t.bytes) for t in stores))
    return tuple(parts)


def _by_kernel(transfers: Any) -> tuple[dict[int, list], dict[int, list]]:
    """Each kernel's loads (issued before it) and stores (after it), by kernel index."""
    loads: dict[int, list] = {}
    stores: dict[int, list] = {}
    for t in transfers:
        (loads.setdefault(t.before, []) if t.before >= 0 else stores.setdefault(t.after, [])).append(t)
    return loads, stores


def _all_signatures(program: Any, memo: KernelMemo, only: Any = None) -> dict[int, int]:
    """kernel index -> `signature` (as its number in `memo`) for the accelerator's kernels of
    `program` (all, or `only`)."""
    types, producers = program.types(), program.producers()
    loads, stores = _by_kernel(program.transfers)
    out = {}
    for idx, k in enumerate(program.kernels):
        if only is not None and idx not in only:
            continue
        ops = [producers[n] for n in k.ops if n in producers]
        if k.unit != "host" and ops:
            sig = signature(k, ops, types, loads.get(idx, []), stores.get(idx, []))
            out[idx] = memo.numbers.setdefault(sig, len(memo.numbers))
    return out


def _signatures(program: Any, memo: KernelMemo) -> list[tuple[int, int]]:
    """(index, signature) of the accelerator's kernels in order. A program at one KV-cache length
    (accelerator/sim/cache_length.py) names its `base` and the `varying_kernels` the length can
    change: the others' signatures are the base's, computed once per run."""
    base, varying = getattr(program, "base", None), getattr(program, "varying_kernels", None)
    if base is None or varying is None:
        return sorted(_all_signatures(program, memo).items())
    held = memo.signatures.get(id(base))
    if held is None or held[0] is not base:
        held = memo.signatures[id(base)] = (base, _all_signatures(base, memo))
    sigs = dict(held[1])
    for idx in varying:
        sigs.pop(idx, None)
    sigs.update(_all_signatures(program, memo, varying))
    return sorted(sigs.items())


def simulate_reusing(program: Any, accel: AccelSpec, memo: KernelMemo | None = None) -> SimRun:
    """`run.simulate(program, accel)`, timing each distinct kernel shape once (module docstring).
    `memo` carries timed shapes from call to call (a serving run's steps share most kernels)."""
    memo = memo if memo is not None else KernelMemo()
    types, producers = program.types(), program.producers()
    loads, stores = _by_kernel(program.transfers)
    chips = max(1, int(program.chips))
    if memo.accel is not accel:  # times on another accelerator do not carry over
        memo.timed.clear()
        memo.accel = accel
    keyed = [(idx, (chips, sig)) for idx, sig in _signatures(program, memo)]
    missing: dict[tuple[int, int], int] = {}
    for idx, key in keyed:
        if key not in memo.timed and key not in missing:
            missing[key] = idx
    memo.hits += len(keyed) - len(missing)
    memo.misses += len(missing)
    if missing:
        reps = sorted(missing.values())
        sub = simulate(_Subset(program, reps, types, producers), accel)
        by_index = dict(zip(reps, [s for s in sub.kernels if s.chip == 0], strict=True))
        for key, idx in missing.items():
            memo.timed[key] = _relative(by_index[idx])
    per_chip: list[SimKernel] = []
    seen: set[str] = set()
    clock = 0.0
    for idx, key in keyed:
        rep, k = memo.timed[key], program.kernels[idx]
        name = k.name if k.name not in seen else f"{k.name}@{idx}"
        seen.add(k.name)
        moves = [*loads.get(idx, []), *stores.get(idx, [])]
        transfers = tuple(
            SimTransfer(m.value, r.route, r.bytes, clock + r.start_s, r.dur_s)
            for m, r in zip(moves, rep.transfers, strict=True)
        )
        per_chip.append(
            SimKernel(
                name, rep.unit, tuple(k.ops), rep.targets, 0, clock, rep.time, rep.flops, rep.hbm_read,
                rep.hbm_written, rep.shared_bytes, rep.dtype, rep.family, rep.matrix_s, rep.vector_s, transfers,
                rep.collective, rep.comm_elements,
            )
        )  # fmt: skip
        clock += rep.time.total
    kernels = list(per_chip)
    for chip in range(1, chips):
        kernels += [_on_chip(s, chip) for s in per_chip]
    by_limiter: dict[str, float] = {}
    for s in per_chip:
        by_limiter[s.time.limiter] = by_limiter.get(s.time.limiter, 0.0) + s.time.total
    return SimRun(accel, program.name, chips, tuple(kernels), clock, by_limiter)


def _relative(s: SimKernel) -> SimKernel:
    """`s` moved to start 0 (its transfers with it)."""
    from dataclasses import replace

    moves = tuple(replace(t, start_s=t.start_s - s.start_s) for t in s.transfers)
    return replace(s, start_s=0.0, transfers=moves)


def _on_chip(s: SimKernel, chip: int) -> SimKernel:
    from dataclasses import replace

    return replace(s, chip=chip)
