"""Memory allocation: every buffer of the program placed in a memory level of one chip, with
liveness analysis over the kernel order and reuse of the space a dead buffer leaves.

Buffers: the program's tensor inputs and the values a kernel hands to another kernel or to the
caller (`Kernel.outputs`). Values inside a fused kernel never leave the core's local memory
(the tiling pass sizes those), symbolic sizes (`symint`) live on the host, a tuple result is
read through its `getitem`s (each its own buffer). Two kinds of value are another buffer's
memory (`aliases`): an in-place write's (`attrs["in_place"]`) is the buffer it writes, and a
view's (view, permute, transpose, slice, select, expand, (un)squeeze: VIEWS) is its operand's,
read through strides by the DMA engines, so a view copies nothing. Size: `numel x itemsize` at
the example input's shape (a dynamic dim is sized at its hint: the plan holds for inputs up to
the example's size, not beyond).

Liveness (`liveness`), by kernel index in the schedule's order: a value is live from the kernel
that produces it (a program input: from kernel 0) to the last kernel that reads it; a program
output to the last kernel. Parameters, buffers and constants are state resident across calls, so
they are allocated over the whole program (their space is never handed to another buffer).

Levels (the policy): state, user inputs, program outputs and whatever a host kernel reads or
writes live in HBM (the host reaches the chip through HBM; the weights would not fit on-chip in
general and are streamed by the schedule); every other buffer, an intermediate, goes to the
chip's shared on-chip memory when the plan fits there, else it spills to HBM (a decision).

Offsets (`place`): greedy by size with best fit (Pisarchyk & Lee, "Efficient Memory Management
for Deep Neural Net Inference", 2020, the "greedy by size" strategy of TFLite's arena planner):
buffers in decreasing size; each takes the smallest gap between the buffers already placed whose
live ranges overlap its own, else the end of the highest of them. Offsets are multiples of
ALIGN. Two buffers of one level whose live ranges overlap never share a byte (the property
tests/test_accel_allocate.py checks on random programs). HBM that cannot hold a buffer stops the
compile: InputError naming the buffer, its size and the capacity."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from accelerator.compiler.legalize import op_kind
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Kernel, Op, Placement, Program, Ref, TensorType, default_kernels
from accelerator.compiler.schedule import order_kernels
from profiler.model.errors import InputError

ALIGN = 64  # bytes: offsets on a 64-byte line, the DMA burst and cache-line size (assumption)
ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "int64": 8,
    "int32": 4,
    "bfloat16": 2,
    "float16": 2,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "symint": 0,
}
STATE_KINDS = ("param", "buffer", "constant")
VIEWS = {
    "view",
    "_unsafe_view",
    "alias",
    "unsqueeze",
    "squeeze",
    "permute",
    "transpose",
    "t",
    "expand",
    "slice",
    "select",
}


def value_bytes(t: TensorType) -> int:
    """numel (at the hint) x itemsize; a dtype not in ITEMSIZE counts 4 bytes."""
    return t.numel * ITEMSIZE.get(t.dtype, 4)


def kernels_of(program: Program) -> tuple[Kernel, ...]:
    """The program's kernels (after fusion), else one per op (default_kernels)."""
    return program.kernels or default_kernels(program)


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True)
class Buffer:
    """A value to place: `size` in bytes, `live` (first, last) kernel index, `level` it goes to
    unless it spills (`shared` or `hbm`), `why` that level."""

    name: str
    size: int
    live: tuple[int, int]
    level: str
    why: str


def aliases(program: Program) -> dict[str, str]:
    """Value -> the buffer whose memory it is (chains resolved): an in-place op's value -> the
    buffer it writes; a view's -> its operand's buffer."""
    out: dict[str, str] = {}
    for o in program.ops:
        if "in_place" in o.attrs:
            base = str(o.attrs["in_place"])
        elif op_kind(o.target) in VIEWS and o.args and isinstance(o.args[0], Ref):
            base = o.args[0].name
        else:
            continue
        out[o.name] = out.get(base, base)
    return out


def is_view_kernel(kernel: Kernel, ops: Mapping[str, Op]) -> bool:
    """Every op of the kernel is a view: it moves nothing."""
    return all(op_kind(ops[n].target) in VIEWS for n in kernel.ops)


def liveness(program: Program, kernels: tuple[Kernel, ...]) -> dict[str, tuple[int, int]]:
    """(first, last) kernel index of every buffer: from its producer (program inputs: 0) to its
    last reader (program outputs: the last kernel). An in-place op's value extends the range of
    the buffer it writes and a view's the range of its operand's buffer (`aliases`). Tuple values
    and symbolic sizes are not buffers."""
    types = program.types()
    last = max(len(kernels) - 1, 0)
    alias = aliases(program)
    live: dict[str, list[int]] = {i.name: [0, 0] for i in program.inputs}
    for idx, k in enumerate(kernels):
        for v in k.outputs:
            live.setdefault(alias.get(v, v), [idx, idx])
    for idx, k in enumerate(kernels):
        for v in k.inputs:
            v = alias.get(v, v)
            if v in live:
                live[v][1] = max(live[v][1], idx)
    for o in program.outputs:
        name = alias.get(o.name, o.name)
        if name in live:
            live[name][1] = last
    return {
        n: (a, b)
        for n, (a, b) in live.items()
        if isinstance(types.get(n), TensorType) and types[n].dtype != "symint"  # type: ignore[union-attr]
    }


def _buffers(program: Program, kernels: tuple[Kernel, ...]) -> list[Buffer]:
    types = program.types()
    last = max(len(kernels) - 1, 0)
    inputs = {i.name: i for i in program.inputs}
    alias = aliases(program)
    outputs = {alias.get(o.name, o.name) for o in program.outputs}
    host = {alias.get(v, v) for k in kernels if k.unit == "host" for v in (*k.inputs, *k.outputs)}
    out: list[Buffer] = []
    for name, live in liveness(program, kernels).items():
        size = value_bytes(types[name])  # type: ignore[arg-type]
        kind = inputs[name].kind if name in inputs else ""
        if kind in STATE_KINDS:
            out.append(Buffer(name, size, (0, last), "hbm", f"{kind}: state resident across calls"))
        elif kind:
            out.append(Buffer(name, size, live, "hbm", "program input: the host writes it to HBM"))
        elif name in outputs:
            out.append(Buffer(name, size, live, "hbm", "program output: the host reads it from HBM"))
        elif name in host:
            out.append(Buffer(name, size, live, "hbm", "a host kernel reads or writes it"))
        else:
            out.append(Buffer(name, size, live, "shared", "intermediate"))
    return out


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def best_fit(size: int, live: tuple[int, int], placed: Iterable[tuple[int, int, tuple[int, int]]]) -> int:
    """Lowest-waste offset for `size` bytes live over `live`, given `placed` (offset, size, live):
    the smallest gap between buffers whose live ranges overlap `live` that holds it, else the end
    of the highest of them."""
    busy = sorted((off, off + _aligned(sz)) for off, sz, lv in placed if _overlaps(lv, live))
    need = _aligned(size)
    best: tuple[int, int] | None = None  # (gap, offset)
    cursor = 0
    for start, end in busy:
        if start - cursor >= need and (best is None or start - cursor < best[0]):
            best = (start - cursor, cursor)
        cursor = max(cursor, end)
    return best[1] if best is not None else cursor


def place(buffers: list[Buffer], capacity: int, level: str) -> tuple[dict[str, Placement], list[Buffer]]:
    """Offsets for `buffers` in one level of `capacity` bytes, greedy by size (largest first;
    ties by first use, then name) with best fit. Returns the placements and the buffers that
    did not fit (their end would pass `capacity`)."""
    placed: list[tuple[int, int, tuple[int, int]]] = []
    out: dict[str, Placement] = {}
    rejected: list[Buffer] = []
    for b in sorted(buffers, key=lambda b: (-b.size, b.live[0], b.name)):
        off = best_fit(b.size, b.live, placed)
        if off + b.size > capacity:
            rejected.append(b)
            continue
        placed.append((off, b.size, b.live))
        out[b.name] = Placement(level, off, b.size, b.live)
    return out, rejected


def peak_bytes(placement: Mapping[str, Placement], level: str) -> int:
    """The high-water mark of a level: max(offset + size) over its buffers (0 when none)."""
    return max((p.offset + p.size for p in placement.values() if p.level == level), default=0)


def live_peak_bytes(placement: Mapping[str, Placement], level: str) -> int:
    """The lower bound any allocation needs: max over kernels of the bytes live at that kernel."""
    unique = {(p.offset, p.size, p.live) for p in placement.values() if p.level == level}  # an alias counts once
    return _live_peak([(size, live) for _, size, live in unique])


def _live_peak(buffers: Iterable[tuple[int, tuple[int, int]]]) -> int:
    events: dict[int, int] = {}
    for size, (first, last) in buffers:
        events[first] = events.get(first, 0) + size
        events[last + 1] = events.get(last + 1, 0) - size
    now = peak = 0
    for t in sorted(events):
        now += events[t]
        peak = max(peak, now)
    return peak


def _kib(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def allocate(program: Program, ctx: CompileContext) -> Program:
    """Place every buffer (module docstring); program.kernels in schedule order, placement set."""
    hw = ctx.hardware
    kernels = order_kernels(program, kernels_of(program))
    buffers = _buffers(program, kernels)
    shared, spilled = place([b for b in buffers if b.level == "shared"], hw.shared_memory.capacity_bytes, "shared")
    for b in spilled:
        ctx.decide(
            b.name,
            f"spilled to hbm ({_kib(b.size)})",
            f"shared memory ({_kib(hw.shared_memory.capacity_bytes)}) is full over kernels {b.live[0]}..{b.live[1]}",
        )
    to_hbm = [b for b in buffers if b.level == "hbm"] + [replace(b, level="hbm") for b in spilled]
    hbm, too_big = place(to_hbm, hw.hbm.capacity_bytes, "hbm")
    if too_big:
        b = too_big[0]
        need = _live_peak((x.size, x.live) for x in to_hbm)
        raise InputError(
            program.name,
            f"buffer {b.name} ({b.size} B, live over kernels {b.live[0]}..{b.live[1]}) does not fit in "
            f"{hw.name}'s HBM of {hw.hbm.capacity_bytes} B; the plan needs at least {need} B "
            "(sizes at the example input's shape)",
        )
    placement = {**hbm, **shared}
    shared_with = {v: target for v, target in aliases(program).items() if target in placement}
    placement.update((v, placement[target]) for v, target in shared_with.items())
    for level, cap in (("shared", hw.shared_memory.capacity_bytes), ("hbm", hw.hbm.capacity_bytes)):
        ctx.decide(
            "",
            f"peak {level} {_kib(peak_bytes(placement, level))} of {_kib(cap)}",
            f"greedy by size, best fit; {_kib(live_peak_bytes(placement, level))} live at once at most; "
            "dynamic dims at their hint",
        )
    why = {b.name: b.why for b in buffers}
    for b in sorted(buffers, key=lambda b: b.live[0]):
        p = placement[b.name]
        reason = why[b.name] + ("" if p.level == b.level else ", spilled")
        ctx.decide(b.name, f"{p.level} @{p.offset} ({p.size} B, kernels {p.live[0]}..{p.live[1]})", reason)
    ops = program.producers()
    for v, target in shared_with.items():
        kind = "an in-place write of" if "in_place" in ops[v].attrs else "a view of"
        ctx.decide(v, f"{placement[v].level} @{placement[v].offset}: {kind} {target}", "shares its memory: no copy")
    return replace(program, kernels=kernels, placement=placement)
