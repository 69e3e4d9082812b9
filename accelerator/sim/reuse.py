"""Time each distinct kernel once: `simulate_reusing(program, accel, memo)` gives the same `SimRun`
as `run.simulate(program, accel)`, but runs `simulate` only on one representative of each kernel
*shape* (its unit, tile, fused ops with their operand types, and its DMA transfers' routes and
bytes) and copies that kernel's time to every identical one. A Llama layer's kernels repeat 32
times per step and every decode step repeats all of them but the attention's, so a serving run
of 129 steps times a few hundred distinct kernels instead of ~100,000 (benchmarks/bench_simulate.py).

Sound while a kernel's duration depends only on the kernel itself (run.py times each kernel on
its own; where it starts, after its inputs and once its resource is free, is placed here by the
same `run.Timeline`); tests/test_sim_serving.py checks the result equals `simulate`'s, kernel for
kernel, so a timing model that starts to depend on a kernel's neighbours fails there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelerator.compiler.program import Ref
from accelerator.hardware import AccelSpec
from accelerator.sim.run import SimKernel, SimRun, Timeline, simulate

#: op attrs that name a value or a kernel (they differ between identical layers, never change timing)
_NAME_ATTRS = frozenset({"kernel", "in_place"})
_SCALARS = (int, float, str, bool, type(None))


class KernelMemo:
    """Timed kernels by shape (`signature`), shared across programs and steps: a `SimKernel` with
    start 0 and its transfers' starts relative to the kernel's. `hits`/`misses` count lookups."""

    def __init__(self) -> None:
        self.timed: dict[tuple[int, int], SimKernel] = {}  # (chips, signature number) -> kernel
        self.accel: AccelSpec | None = None  # the accelerator the shapes were timed on
        self.signatures: dict[int, tuple] = {}  # id(base program) -> (it, its _Layout, its signature numbers)
        self.numbers: dict[tuple, int] = {}  # signature -> its number (a small key: tuples rehash on every lookup)
        self.hits = 0
        self.misses = 0


class _Subset:
    """The few kernels of `program` that `simulate` has to time (duck-types a Program: what it
    does not override, it reads from `program`)."""

    def __init__(self, program: Any, indices: list[int], types: Mapping, producers: Mapping) -> None:
        self._program = program
        self.name, self.chips = program.name, program.chips
        self.kernels = tuple(program.kernels[i] for i in indices)
        where = {old: new for new, old in enumerate(indices)}
        self.transfers = tuple(_moved(t, where) for t in program.transfers if _kernel_of(t) in where)
        self._types, self._producers = types, producers

    def types(self) -> Mapping:
        return self._types

    def producers(self) -> Mapping:
        return self._producers

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_program"], name)


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


class _Layout:
    """What does not change between a program and the same program at another KV-cache length:
    each accelerator kernel's index, trace name (as run.simulate names it), op names, and the
    positions of its loads and stores in `program.transfers`."""

    def __init__(self, program: Any) -> None:
        producers = program.producers()
        moves: dict[int, tuple[list[int], list[int]]] = {}
        for i, t in enumerate(program.transfers):
            pair = moves.setdefault(t.before if t.before >= 0 else t.after, ([], []))
            pair[0 if t.before >= 0 else 1].append(i)
        self.rows: list[tuple[int, str, tuple, list[int], list[int]]] = []
        seen: set[str] = set()
        for idx, k in enumerate(program.kernels):
            if k.unit == "host" or not any(n in producers for n in k.ops):
                continue
            name = k.name if k.name not in seen else f"{k.name}@{idx}"
            seen.add(name)
            loads, stores = moves.get(idx, ([], []))
            self.rows.append((idx, name, tuple(k.ops), loads, stores))


def _signature_numbers(program: Any, layout: _Layout, memo: KernelMemo, only: Any = None) -> dict[int, int]:
    """kernel index -> its `signature`'s number in `memo`, for the layout's kernels (or `only` those)."""
    types, producers, transfers = program.types(), program.producers(), program.transfers
    out = {}
    for idx, _, names, loads, stores in layout.rows:
        if only is not None and idx not in only:
            continue
        ops = [producers[n] for n in names if n in producers]
        sig = signature(program.kernels[idx], ops, types, [transfers[i] for i in loads], [transfers[i] for i in stores])
        out[idx] = memo.numbers.setdefault(sig, len(memo.numbers))
    return out


def _plan(program: Any, memo: KernelMemo) -> tuple[_Layout, dict[int, int]]:
    """The layout and signature numbers of `program`. A program at one KV-cache length
    (accelerator/sim/cache_length.py) names its `base` and the `varying_kernels` the length can
    change: the layout and the other kernels' signatures are the base's, found once per run."""
    base, varying = getattr(program, "base", None), getattr(program, "varying_kernels", None)
    if base is None or varying is None:
        layout = _Layout(program)
        return layout, _signature_numbers(program, layout, memo)
    held = memo.signatures.get(id(base))
    if held is None or held[0] is not base:
        layout = _Layout(base)
        held = memo.signatures[id(base)] = (base, layout, _signature_numbers(base, layout, memo))
    _, layout, numbers = held
    varying_key = getattr(program, "varying_key", None)
    if varying_key is None:
        return layout, {**numbers, **_signature_numbers(program, layout, memo, varying)}
    # the base's signature plus what the length changed stands for the whole signature
    changed = {
        i: memo.numbers.setdefault((numbers[i], varying_key(i)), len(memo.numbers)) for i in varying if i in numbers
    }
    return layout, {**numbers, **changed}


def simulate_reusing(program: Any, accel: AccelSpec, memo: KernelMemo | None = None, all_chips: bool = True) -> SimRun:
    """`run.simulate(program, accel)`, timing each distinct kernel shape once (module docstring).
    `memo` carries timed shapes from call to call (a serving run's steps share most kernels).
    `all_chips=False`: only chip 0's kernels (every chip runs the same ones at the same times)."""
    memo = memo if memo is not None else KernelMemo()
    chips = max(1, int(program.chips))
    if memo.accel is not accel:  # times on another accelerator do not carry over
        memo.timed.clear()
        memo.accel = accel
    layout, numbers = _plan(program, memo)
    timed = memo.timed
    missing: dict[tuple[int, int], int] = {}
    for row in layout.rows:
        key = (chips, numbers[row[0]])
        if key not in timed and key not in missing:
            missing[key] = row[0]
    memo.hits += len(layout.rows) - len(missing)
    memo.misses += len(missing)
    if missing:
        reps = sorted(missing.values())
        sub = simulate(_Subset(program, reps, program.types(), program.producers()), accel)
        by_index = dict(zip(reps, [s for s in sub.kernels if s.chip == 0], strict=True))
        for key, idx in missing.items():
            timed[key] = _relative(by_index[idx])
    transfers = program.transfers
    per_chip: list[SimKernel] = []
    timeline = Timeline()  # placed as run.simulate places them: the kernels around a kernel set its start
    rows = iter(layout.rows)
    row = next(rows, None)
    for kidx, kernel in enumerate(program.kernels):
        if row is None or row[0] != kidx:  # no accelerator time (host, views)
            timeline.skip(kernel)
            continue
        idx, name, ops, loads, stores = row
        row = next(rows, None)
        rep = timed[(chips, numbers[idx])]
        at, after, deps = timeline.place(kernel, rep.resource, rep.time.total)
        moves = ()
        if rep.transfers:
            values = [transfers[i].value for i in loads] + [transfers[i].value for i in stores]
            moves = tuple(
                copy_with(r, value=v, start_s=at + r.start_s) for v, r in zip(values, rep.transfers, strict=True)
            )
        per_chip.append(copy_with(rep, name=name, ops=ops, start_s=at, transfers=moves, after=after, deps=deps))
    kernels = list(per_chip)
    for chip in range(1, chips if all_chips else 1):
        kernels += [copy_with(s, chip=chip) for s in per_chip]
    by_limiter: dict[str, float] = {}
    for s in per_chip:
        by_limiter[s.time.limiter] = by_limiter.get(s.time.limiter, 0.0) + s.time.total
    total = max((s.end_s for s in per_chip), default=0.0)
    return SimRun(accel, program.name, chips, tuple(kernels), total, by_limiter)


def copy_with(obj: Any, **changes: Any) -> Any:
    """`dataclasses.replace(obj, **changes)` for a frozen dataclass of plain fields, without
    re-running its __init__ (whose frozen __setattr__ per field is most of the cost of
    copying ~100,000 kernels and their transfers)."""
    fields = getattr(obj, "__dict__", None)
    if fields is None:  # a slotted class: the ordinary way
        from dataclasses import replace

        return replace(obj, **changes)
    new = object.__new__(type(obj))
    object.__setattr__(new, "__dict__", {**fields, **changes})
    return new


def _relative(s: SimKernel) -> SimKernel:
    """`s` moved to start 0 (its transfers with it)."""
    from dataclasses import replace

    moves = tuple(replace(t, start_s=t.start_s - s.start_s) for t in s.transfers)
    return replace(s, start_s=0.0, transfers=moves)
