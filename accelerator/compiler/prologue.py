"""Normalisation prologues for a norm that feeds several matmuls (RMSNorm/LayerNorm before the
q/k/v projections, before gate/up in SwiGLU): the norm is recomputed in each consumer's
prologue, not computed once and stored.

Why recompute rather than fuse it into one consumer and let the others read its output: on the
accelerator a kernel's intermediates live in on-chip memory and only its last value leaves it
(fusion.check_group), so a norm fused into the q kernel would have to be stored to HBM for k and
v anyway, which is what running it alone costs. The norm is O(D) vector work per row against
the matmul's O(D x N) matrix work, and the matmul's K loop already streams the row it needs;
recomputing it costs c - 1 extra passes of vector work (c consumers) and saves the normalised
activation's HBM store and its c loads (c + 1 transfers of rows x D elements) and one launch.

`recompute_norms(program, ctx)`: for every value read by several readers, each of which reaches
a matmul through views and casts only, and produced by a chain (elementwise ops, casts, views,
row reductions) that includes a row statistic (mean, var, rsqrt, native_layer_norm) and whose
intermediates only the chain reads, every reader after the first gets its own copy of the
chain (ops named `<op>_for_<matmul>`), placed just before it. The automatic fusion plan then
finds each copy read by one matmul only and fuses it as that matmul's normalisation prologue."""

from __future__ import annotations

import heapq
from dataclasses import replace

from accelerator.compiler.legalize import op_kind
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Op, Program, Ref, map_refs

CHAIN = {"view", "cast", "elementwise", "reduction"}
NORM = {"mean", "var", "rsqrt", "native_layer_norm"}


def _chain(graph, value: str) -> list[str]:
    """`value`'s producer and the producers (in CHAIN classes) that only the chain reads, in
    program order."""
    added = {value}
    heap = [(-graph.index[r], r) for r in graph.ops[value].refs() if r in graph.ops]
    heapq.heapify(heap)
    while heap:
        _, p = heapq.heappop(heap)
        if p in added or p in graph.outputs or graph.kind(p) not in CHAIN:
            continue
        if all(r in added for r in graph.readers[p]):
            added.add(p)
            for r in graph.ops[p].refs():
                if r in graph.ops:
                    heapq.heappush(heap, (-graph.index[r], r))
    return sorted(added, key=graph.index.__getitem__)


def _matmul_reached(graph, reader: str) -> str | None:
    """The matmul `reader` feeds through single-reader views and casts, or None."""
    while True:
        k = graph.kind(reader)
        if k == "matmul":
            return reader
        if k not in ("view", "cast") or reader in graph.outputs or len(graph.readers[reader]) != 1:
            return None
        reader = graph.readers[reader][0]


def recompute_norms(program: Program, ctx: CompileContext) -> Program:
    """`program` with each shared normalisation copied per matmul consumer (module docstring)."""
    from accelerator.compiler.fusion import Graph

    graph = Graph(program)
    before: dict[str, list[Op]] = {}  # reader -> the copy placed just before it
    renamed: dict[str, tuple[str, str]] = {}  # reader -> (value, its copy) it reads instead
    for op in program.ops:
        readers = graph.readers[op.name]
        if len(readers) < 2 or op.name in graph.outputs or graph.kind(op.name) not in CHAIN:
            continue
        mms = [_matmul_reached(graph, r) for r in readers]
        if None in mms:
            continue
        chain = _chain(graph, op.name)
        if not any(op_kind(graph.ops[o].target) in NORM for o in chain):
            continue
        for reader, mm in zip(readers[1:], mms[1:]):
            names = {o: f"{o}_for_{mm}" for o in chain}

            def fn(r: Ref, names: dict[str, str] = names) -> Ref:
                return Ref(names.get(r.name, r.name))

            before[reader] = [
                replace(
                    graph.ops[o],
                    name=names[o],
                    args=map_refs(graph.ops[o].args, fn),
                    kwargs={k: map_refs(v, fn) for k, v in graph.ops[o].kwargs.items()},
                )
                for o in chain
            ]
            renamed[reader] = (op.name, names[op.name])
        ctx.decide(
            op.name,
            f"normalisation recomputed in the prologue of each of {', '.join(mms)} ({len(chain)} ops each)",
            f"{len(mms)} matmuls read it: recomputing the O(D)-per-row norm in each prologue saves storing "
            f"the normalised rows to HBM and loading them {len(mms)} times (only a kernel's last value leaves it)",
        )
    if not before:
        return program
    ops: list[Op] = []
    for op in program.ops:
        ops += before.get(op.name, [])
        if op.name in renamed:
            old, new = renamed[op.name]

            def fn(r: Ref, old: str = old, new: str = new) -> Ref:
                return Ref(new if r.name == old else r.name)

            op = replace(op, args=map_refs(op.args, fn), kwargs={k: map_refs(v, fn) for k, v in op.kwargs.items()})
        ops.append(op)
    return program.with_ops(ops)
