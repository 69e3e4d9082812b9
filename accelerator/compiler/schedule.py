"""Scheduling: the order the kernels run in and the DMA transfers between memory levels.

Order (`order_kernels`): topological over the values kernels hand each other, keeping program
order wherever it is already valid (a stable topological sort: among the kernels whose inputs
are ready, the earliest in program order runs first). Program order is topological unless a
pass reordered kernels, so the order changes only to repair that. An in-place write of a buffer
(`attrs["in_place"]`, the KV-cache update) stays after the kernels that read the buffer before
it in program order and before those that read it after. The allocation pass calls this too, so
liveness is computed over the order that runs.

Transfers (`transfers`): a core computes from its local memory, so before each kernel the DMA
engines load every input from the level it is placed in (HBM or shared memory, per the
allocation) into local memory, and after it store every output to its level. Bytes: the whole
tensor, or with a tile (`kernel.tile`, the tiling pass) what the tiles read: a matmul
(mm, addmm, bmm, npu.qmm; A is M x K, B is K x N) computing one m x n output tile at a time reads
its A operand ceil(N / n) times and its B operand (and an addmm's bias) ceil(M / m) times; every
other input is read once. An in-place write (index_copy_, index_put_) loads nothing of the
buffer it writes and stores only the rows it writes (its source operand's bytes); a gather
(embedding, index) loads only the rows it gathers (its result's bytes) of the table it reads.
A kernel of views only moves nothing (a view is its operand's memory, allocate.py's `aliases`);
a kernel reading a view loads the view's bytes (a slice: its part; an expand: its base's).
Host kernels reach HBM themselves: no DMA. Without a placement (allocation skipped) every
buffer counts as HBM. The log has the bytes moved per route (hbm->local, shared->local,
local->shared, local->hbm)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import replace

from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Kernel, Op, Program, Ref, TensorType, Transfer, default_kernels

MATMULS = {"aten.mm.default": 0, "aten.bmm.default": 0, "npu.qmm": 0, "aten.addmm.default": 1}  # index of A
GATHERS = {"aten.embedding.default", "aten.index.Tensor"}  # read only the rows they gather: arg 0's table


def order_kernels(program: Program, kernels: tuple[Kernel, ...]) -> tuple[Kernel, ...]:
    """`kernels` in a topological order that keeps their given order where it is valid."""
    producer = {v: i for i, k in enumerate(kernels) for v in (*k.ops, *k.outputs)}
    in_place = {o.name: str(o.attrs["in_place"]) for o in program.ops if "in_place" in o.attrs}
    deps: list[set[int]] = [set() for _ in kernels]
    for i, k in enumerate(kernels):
        deps[i].update(producer[v] for v in k.inputs if v in producer and producer[v] != i)
    writers: dict[str, list[int]] = {}
    for i, k in enumerate(kernels):
        for op in k.ops:
            if op in in_place:
                writers.setdefault(in_place[op], []).append(i)
    position = {o.name: i for i, o in enumerate(program.ops)}
    at = [min((position.get(n, i) for n in k.ops), default=i) for i, k in enumerate(kernels)]  # program order
    for buf, ws in writers.items():
        readers = [i for i, k in enumerate(kernels) if buf in k.inputs]
        for w in ws:
            for r in readers:
                if r != w:
                    deps[w if at[r] < at[w] else r].add(r if at[r] < at[w] else w)
    users: list[list[int]] = [[] for _ in kernels]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    waiting = [len(d) for d in deps]
    ready = [i for i, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(kernels):
        stuck = next(kernels[i].name for i, n in enumerate(waiting) if n > 0)
        raise ValueError(f"kernel {stuck} is in a dependency cycle: the kernels do not form a program")
    return tuple(kernels[i] for i in order)


def _bytes(t: object) -> int:
    from accelerator.compiler.allocate import value_bytes  # here: allocate imports order_kernels from this module

    return value_bytes(t) if isinstance(t, TensorType) else 0


def _matmul_reads(kernel: Kernel, ops: Mapping[str, Op], types: Mapping[str, object]) -> dict[str, int]:
    """Times each input of a tiled matmul kernel is read (inputs not listed: once)."""
    tile = kernel.tile or {}
    mm = next((ops[n] for n in kernel.ops if ops[n].target in MATMULS), None)
    if mm is None or not tile:
        return {}
    a_at = MATMULS[mm.target]
    a, b = mm.args[a_at], mm.args[a_at + 1]
    out = mm.type if isinstance(mm.type, TensorType) else None
    if not (isinstance(a, Ref) and isinstance(b, Ref) and out is not None and len(out.hint) >= 2):
        return {}
    m_dim, n_dim = out.hint[-2], out.hint[-1]
    n_passes = math.ceil(n_dim / tile["n"]) if tile.get("n") else 1
    m_passes = math.ceil(m_dim / tile["m"]) if tile.get("m") else 1
    reads = {a.name: n_passes, b.name: m_passes}
    if a_at == 1 and isinstance(mm.args[0], Ref):
        reads[mm.args[0].name] = m_passes  # the addmm bias, once per row of tiles
    return reads


def _written_bytes(op: Op, types: Mapping[str, object]) -> int:
    """Bytes an in-place write moves: its last tensor operand (index_copy_'s source, index_put_'s values)."""
    refs = [r for r in op.refs() if r != op.attrs["in_place"]]
    return _bytes(types.get(refs[-1])) if refs else 0


def transfers(program: Program, kernels: tuple[Kernel, ...]) -> tuple[Transfer, ...]:
    """The loads before and stores after each kernel (module docstring), in schedule order."""
    from accelerator.compiler.allocate import is_view_kernel

    types = program.types()
    ops = program.producers()
    level = {v: p.level for v, p in program.placement.items()}
    held = {v: p.size for v, p in program.placement.items()}  # an expanded view reads its base's bytes
    out: list[Transfer] = []
    for idx, k in enumerate(kernels):
        if k.unit == "host" or is_view_kernel(k, ops):
            continue
        writes = {str(ops[n].attrs["in_place"]): ops[n] for n in k.ops if "in_place" in ops[n].attrs}
        reads = _matmul_reads(k, ops, types)
        gathered = {
            op.args[0].name: _bytes(op.type)
            for op in (ops[n] for n in k.ops)
            if op.target in GATHERS and isinstance(op.args[0], Ref)
        }
        for v in k.inputs:
            size = _bytes(types.get(v))
            size = min(size, gathered.get(v, size), held.get(v, size))
            if v in writes or size == 0:
                continue
            out.append(Transfer(v, level.get(v, "hbm"), "local", size * reads.get(v, 1), before=idx))
        for v in k.outputs:
            size = _bytes(types.get(v))
            if size and "in_place" not in getattr(ops.get(v), "attrs", {}):  # an in-place write: below
                out.append(Transfer(v, "local", level.get(v, "hbm"), size, after=idx))
        for buf, op in writes.items():
            out.append(Transfer(buf, "local", level.get(buf, "hbm"), _written_bytes(op, types), after=idx))
    return tuple(out)


def route_bytes(moves: tuple[Transfer, ...]) -> dict[str, int]:
    """Bytes per route, `src->dst`, in first-use order."""
    out: dict[str, int] = {}
    for t in moves:
        key = f"{t.src}->{t.dst}"
        out[key] = out.get(key, 0) + t.bytes
    return out


def schedule(program: Program, ctx: CompileContext) -> Program:
    """Order the kernels and issue the DMA transfers (module docstring)."""
    given = program.kernels or default_kernels(program)
    kernels = order_kernels(program, given)
    moved = [k.name for k, g in zip(kernels, given, strict=True) if k is not g]
    if moved:
        ctx.decide("", f"reordered {len(moved)} kernels, first {moved[0]}", "an input was produced after its reader")
    else:
        ctx.decide("", f"{len(kernels)} kernels in program order", "program order is topological")
    if not program.placement:
        ctx.decide("", "every buffer counted in hbm", "no placement: the allocate pass did not run")
    moves = transfers(program, kernels)
    per_route = route_bytes(moves)
    ctx.decide(
        "",
        "bytes moved: " + (", ".join(f"{r} {b}" for r, b in per_route.items()) or "none"),
        f"{len(moves)} DMA transfers; tiles: {sum(k.tile is not None for k in kernels)} of {len(kernels)} kernels",
    )
    for t in moves:
        when = f"before kernel {t.before}" if t.before >= 0 else f"after kernel {t.after}"
        ctx.decide(t.value, f"{t.src}->{t.dst} {t.bytes} B {when}", kernels[max(t.before, t.after)].name)
    return replace(program, kernels=kernels, transfers=moves)
