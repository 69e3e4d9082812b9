"""Fusion: group the legalised program's ops into kernels (`program.kernels`) under an explicit
`FusionPlan`, automatic or read from a plan file, each decision in the compile log.

Rules of the automatic plan, applied in program order (matmuls and attention first, then
vector chains; every op left over runs alone):

- a matmul (mm, addmm, bmm, npu.qmm, convolution) absorbs its **prologue**: views and casts of
  its operands, a permute of a parameter (the weight loaded transposed), and a
  **normalisation** (RMSNorm/LayerNorm: the ops feeding the operand when they include a row
  statistic: mean, var, rsqrt, native_layer_norm); a norm several matmuls read is first
  copied per matmul (accelerator/compiler/prologue.py: recomputed in each prologue, and why);
- then its **epilogue**: the elementwise ops (bias, activation, residual add, casts,
  dequantize) and views that read its result, in program order;
- attention (SDPA) is one kernel with its operand casts and elementwise epilogue; whether its
  working set for one (batch, head) fits local memory, shared memory, or neither (then a tiled
  flash-style schedule) is recorded in the kernel's attrs (`attention`, `working_set_bytes`);
- the remaining vector ops form **chains**: elementwise ops, row reductions and views, grown
  forward from the first op, then backward over the producers only the chain reads.

Legality, for the automatic and for a user's plan (`check_group`): at most one matmul or
attention op per kernel, no host op with others, ops connected by producer-consumer edges, and
every value a kernel produces except its last op's is read only inside the kernel (the
intermediate has no other reader, so it never leaves on-chip memory); a kernel never spans an
in-place write to a buffer it reads. With one outgoing value per kernel, kernels ordered by their
last op are a topological order (an edge A -> B puts A's last op before an op of B).

A plan file (JSON or YAML) lists groups of op names; ops it does not name run alone:

    kernels:
      - name: fc1            # optional, default: the group's matmul/attention op, else its first
        ops: [addmm, gelu]
        tile: {m: 32, n: 64, k: 32}   # optional: the tiling pass's override for this kernel
    tiles: {fc2: {m: 32, n: 16, k: 64}}  # optional, tile overrides by kernel name

`perf compile --json`'s report is itself a plan file (its kernels carry `ops` and `tile`)."""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelerator.compiler.legalize import op_kind, unit_of
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Kernel, Op, Program
from profiler.model.errors import InputError

MATMUL = {"mm", "addmm", "bmm", "npu.qmm", "convolution", "linear", "matmul"}
ATTENTION = {"scaled_dot_product_attention"}
VIEWS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "alias", "expand", "getitem"}  # no data moves
LAYOUT = {"permute", "t", "transpose"}  # of a parameter: folded into the matmul's weight load
CASTS = {
    "npu.cast",
    "npu.quantize",
    "npu.dequantize",
    "_to_copy",
    "quantize_per_tensor",
    "dequantize_per_tensor",
    "quantize_per_channel",
    "dequantize_per_channel",
}
NORM = {"mean", "var", "rsqrt", "native_layer_norm"}  # row statistics: a normalisation
REDUCTIONS = {"mean", "sum", "amax", "amin", "var", "_softmax", "_log_softmax", "native_layer_norm"}
NOT_ELEMENTWISE = REDUCTIONS | {
    "avg_pool2d",
    "max_pool2d_with_indices",
    "_native_batch_norm_legit_no_training",
    "full",
    "arange",
    "zeros",
    "ones",
    "scalar_tensor",
}
PLAN_MAX_BYTES = 4 * 2**20


@dataclass(frozen=True)
class PlanGroup:
    """One kernel of a plan: its `name`, its `ops` (program order) and why each op is in it."""

    name: str
    ops: tuple[str, ...]
    why: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FusionPlan:
    """Groups of op names, one per kernel; ops in no group run alone. `source`: `auto` or the
    plan file; `tiles`: tile overrides by kernel name (the tiling pass reads them)."""

    groups: tuple[PlanGroup, ...]
    source: str = "auto"
    tiles: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    replayed: frozenset[str] = frozenset()  # groups copied from the first instance of a block
    span: str = ""  # the instances they cover, "layers.1-31"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kernels": [{"name": g.name, "ops": list(g.ops), "why": dict(g.why)} for g in self.groups],
        }

    def to_text(self) -> str:
        lines = [f"fusion plan ({self.source}): {len(self.groups)} kernels"]
        for g in self.groups:
            lines.append(f"  {g.name}: " + ", ".join(f"{o} ({g.why.get(o, 'plan')})" for o in g.ops))
        return "\n".join(lines)


def kind(op: Op) -> str:
    """The fusion class of an op: matmul, attention, view, layout, cast, reduction, elementwise,
    or the unit it runs on (dma, host) for everything else."""
    k = op_kind(op.target)
    if k in MATMUL:
        return "matmul"
    if k in ATTENTION:
        return "attention"
    if k in VIEWS:
        return "view"
    if k in CASTS:
        return "cast"
    if k in LAYOUT:
        return "layout"
    if k in REDUCTIONS:
        return "reduction"
    unit = op.attrs.get("unit") or (unit_of(op.target) or ("host",))[0]
    if unit == "vector" and k not in NOT_ELEMENTWISE:
        return "elementwise"
    return str(unit)


class Graph:
    """Index, producers and readers of a program, shared by the rules and the legality check."""

    def __init__(self, program: Program):
        self.program = program
        self.ops = {o.name: o for o in program.ops}
        self.index = {o.name: i for i, o in enumerate(program.ops)}
        self.readers: dict[str, list[str]] = {o.name: [] for o in program.ops}
        for o in program.ops:
            for r in dict.fromkeys(o.refs()):
                if r in self.readers:
                    self.readers[r].append(o.name)
        self.outputs = {o.name for o in program.outputs}
        self.params = {i.name for i in program.inputs if i.kind in ("param", "constant")}
        # in-place writes: (index, buffer written)
        self.writes = [
            (self.index[o.name], o.refs()[0])
            for o in program.ops
            if (o.attrs.get("in_place") or o.target.endswith("_.default")) and o.refs()
        ]

    def kind(self, name: str) -> str:
        op = self.ops[name]
        k = kind(op)
        if k == "layout" and not all(r in self.params for r in op.refs()):
            return "dma"  # a permute of an activation moves data: its own DMA kernel
        return k


def check_group(graph: Graph, ops: Iterable[str]) -> str | None:
    """Why `ops` cannot be one kernel, None when they can (the rules in the module docstring)."""
    group = sorted(set(ops), key=graph.index.__getitem__)
    if len(group) <= 1:
        return None
    members = set(group)
    anchors = [o for o in group if graph.kind(o) in ("matmul", "attention")]
    if len(anchors) > 1:
        return f"{anchors[0]} and {anchors[1]} are both matmuls (one matrix op per kernel)"
    host = [o for o in group if graph.kind(o) == "host"]
    if host:
        return f"{host[0]} runs on the host"
    for o in group[:-1]:
        outside = [r for r in graph.readers[o] if r not in members]
        if outside or o in graph.outputs:
            reader = f"read by {outside[0]}" if outside else "a program output"
            return f"{o} is {reader} outside the kernel (only its last op's value may leave it)"
    seen, todo = {group[-1]}, [group[-1]]
    while todo:  # connected through producer-consumer edges inside the group
        o = todo.pop()
        for n in [*graph.ops[o].refs(), *graph.readers[o]]:
            if n in members and n not in seen:
                seen.add(n)
                todo.append(n)
    if len(seen) != len(members):
        return f"{next(o for o in group if o not in seen)} is not connected to the other ops"
    first, last = graph.index[group[0]], graph.index[group[-1]]
    reads = {r for o in group for r in graph.ops[o].refs()}
    for i, buf in graph.writes:
        if first < i < last and buf in reads and graph.program.ops[i].name not in members:
            return f"{graph.program.ops[i].name} writes {buf} in place between the kernel's ops"
    return None


def _prologue(graph: Graph, group: set[str], allowed: set[str], taken: set[str]) -> set[str]:
    """The producers of `group`'s operands (in `allowed` classes, recursively) that only the
    group reads: descending program order visits every reader before its producer."""
    added: set[str] = set()
    heap: list[tuple[int, str]] = []

    def push(o: str) -> None:
        for r in graph.ops[o].refs():
            if r in graph.ops:
                heapq.heappush(heap, (-graph.index[r], r))

    for o in group:
        push(o)
    while heap:
        _, p = heapq.heappop(heap)
        if p in added or p in group or p in taken or p in graph.outputs or graph.kind(p) not in allowed:
            continue
        if all(r in group or r in added for r in graph.readers[p]):
            added.add(p)
            push(p)
    return added


def _grow(graph: Graph, group: list[str], allowed: set[str], taken: set[str]) -> list[str]:
    """`group` grown forward in program order by the readers of its values in `allowed`
    classes, up to the last state that `check_group` accepts."""
    best = list(group)
    members = set(group)
    horizon = max((graph.index[r] for o in members for r in graph.readers[o]), default=-1)
    for op in graph.program.ops[graph.index[group[-1]] + 1 :]:
        i = graph.index[op.name]
        if i > horizon:
            break
        if not any(r in members for r in op.refs()):
            continue
        if op.name in taken or graph.kind(op.name) not in allowed or op.name in members:
            break
        group.append(op.name)
        members.add(op.name)
        horizon = max([horizon, *(graph.index[r] for r in graph.readers[op.name])])
        if check_group(graph, group) is None:
            best = list(group)
    return best


_WHY = {
    "view": "view (no data moves)",
    "cast": "cast",
    "layout": "weight layout folded into the load",
    "elementwise": "elementwise",
    "reduction": "row reduction",
}


def auto_plan(program: Program, ctx: CompileContext) -> FusionPlan:
    """The automatic plan (rules in the module docstring). With identical blocks
    (accelerator/compiler/instances.py) a group an op of instance k > 0 starts is instance 0's
    group mapped op by op, when that group lies inside instance 0 and its copy is legal: the
    rules ran once per block, not once per instance."""
    from accelerator.compiler.instances import instances

    graph = Graph(program)
    taken: set[str] = set()
    groups: list[PlanGroup] = []
    inst = instances(program) if ctx.reuse_blocks and ctx.replay_blocks else None
    started: dict[str, PlanGroup] = {}  # instance 0's op -> the group it started
    replayed: set[str] = set()

    def replay(name: str) -> PlanGroup | None:
        k = inst.of.get(name, 0) if inst else 0
        g0 = started.get(inst.back[name]) if inst and k else None
        if g0 is None or any(inst.of.get(o) != 0 for o in g0.ops):  # type: ignore[union-attr]
            return None
        to = inst.to[k]  # type: ignore[union-attr]
        ops = tuple(to[o] for o in g0.ops)
        if any(o in taken for o in ops) or check_group(graph, ops) is not None:
            return None
        replayed.add(name)
        return PlanGroup(name, ops, {to[o]: w for o, w in g0.why.items()})

    def add(group: PlanGroup) -> None:
        taken.update(group.ops)
        groups.append(group)
        if inst and inst.of.get(group.name) == 0:
            started[group.name] = group

    epilogue = {"view", "cast", "elementwise"}
    for op in program.ops:
        k = graph.kind(op.name)
        if k not in ("matmul", "attention") or op.name in taken:
            continue
        again = replay(op.name)
        if again:
            add(again)
            continue
        why = {op.name: k}
        pro = _prologue(graph, {op.name}, {"view", "cast", "layout", "elementwise", "reduction"}, taken)
        norm = any(op_kind(graph.ops[p].target) in NORM for p in pro)
        if not norm:
            pro = _prologue(graph, {op.name}, {"view", "cast", "layout"}, taken)
        for p in pro:
            why[p] = f"normalisation prologue: {_WHY[graph.kind(p)]}" if norm else f"prologue: {_WHY[graph.kind(p)]}"
        ops = sorted({op.name, *pro}, key=graph.index.__getitem__)
        grown = _grow(graph, ops, epilogue, taken | pro)
        for e in grown:
            if e not in why:
                why[e] = f"epilogue: {_WHY[graph.kind(e)]}"
        add(PlanGroup(op.name, tuple(grown), why))
    chain = {"view", "cast", "elementwise", "reduction"}
    for op in program.ops:
        if op.name in taken or graph.kind(op.name) not in ("cast", "elementwise", "reduction"):
            continue
        again = replay(op.name)
        if again:
            add(again)
            continue
        grown = _grow(graph, [op.name], chain, taken)
        pro = _prologue(graph, set(grown), chain - {"view"}, taken)
        ops = sorted({*grown, *pro}, key=graph.index.__getitem__)
        if check_group(graph, ops) is not None:
            ops = grown
        add(PlanGroup(op.name, tuple(ops), {o: f"vector chain: {_WHY[graph.kind(o)]}" for o in ops}))
    return FusionPlan(tuple(groups), replayed=frozenset(replayed), span=inst.span() if inst else "")


def load_plan(path: str | Path) -> FusionPlan:
    """A plan file (JSON, or YAML by its suffix) as a FusionPlan; InputError(path, one line) when
    it is not a list of groups of op names."""
    from profiler.model.files import read_bounded

    path = Path(path)
    raw = read_bounded(path, PLAN_MAX_BYTES)  # InputError naming the file when it cannot be read
    try:
        text = raw.decode()
        if path.suffix in (".yaml", ".yml"):
            import yaml

            doc = yaml.safe_load(text)
        else:
            doc = json.loads(text)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read the fusion plan: {str(e).splitlines()[0] if str(e) else e}") from None
    except Exception as e:  # yaml.YAMLError
        raise InputError(path, f"not a YAML fusion plan: {str(e).splitlines()[0]}") from None
    entries = doc.get("kernels") if isinstance(doc, Mapping) else doc
    if not isinstance(entries, list):
        raise InputError(path, "a fusion plan is a list of kernels (or a mapping with `kernels: [...]`)")
    groups, tiles = [], dict(doc.get("tiles") or {}) if isinstance(doc, Mapping) else {}
    for n, e in enumerate(entries):
        ops = e.get("ops") if isinstance(e, Mapping) else e
        if not isinstance(ops, list) or not ops or not all(isinstance(o, str) for o in ops):
            raise InputError(path, f"kernel {n}: `ops` must be a non-empty list of op names")
        name = str(e.get("name") or "") if isinstance(e, Mapping) else ""
        groups.append(PlanGroup(name, tuple(ops), {o: "plan file" for o in ops}))
        if isinstance(e, Mapping) and isinstance(e.get("tile"), Mapping):
            tiles[name or ops[0]] = e["tile"]
    return FusionPlan(tuple(groups), str(path), tiles)


def _resolve(program: Program, plan: FusionPlan) -> list[PlanGroup]:
    """The plan's groups checked against the program and completed: every op the plan does not
    name is a group of its own; group names default to the matmul/attention op, else the first."""
    graph = Graph(program)
    named: dict[str, str] = {}
    out: list[PlanGroup] = []
    for g in plan.groups:
        for o in g.ops:
            if o not in graph.ops:
                raise InputError(plan.source, f"the plan names op {o!r}, which {program.name} does not have")
            if o in named:
                raise InputError(plan.source, f"op {o!r} is in two kernels ({named[o]!r} and {g.name or g.ops[0]!r})")
            named[o] = g.name or g.ops[0]
        ops = tuple(sorted(g.ops, key=graph.index.__getitem__))
        anchor = next((o for o in ops if graph.kind(o) in ("matmul", "attention")), ops[0])
        problem = check_group(graph, ops)
        if problem:
            raise InputError(plan.source, f"kernel {g.name or anchor}: {problem}")
        why = {o: g.why.get(o, f"plan {plan.source}") for o in ops}
        out.append(replace(g, name=g.name or anchor, ops=ops, why=why))
    for o in program.ops:
        if o.name not in named:
            out.append(PlanGroup(o.name, (o.name,), {o.name: "alone"}))
    names = [g.name for g in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise InputError(plan.source, f"two kernels are named {dup!r}")
    return sorted(out, key=lambda g: graph.index[g.ops[-1]])


def kernels_of(program: Program, groups: list[PlanGroup]) -> tuple[Kernel, ...]:
    """One Kernel per group: unit matrix when it holds a matrix op, else its ops' unit; inputs
    the values it reads from outside, outputs its last op's value when read or returned."""
    graph = Graph(program)
    kernels = []
    for g in groups:
        members = set(g.ops)
        units = [graph.ops[o].attrs.get("unit") or (unit_of(graph.ops[o].target) or ("host",))[0] for o in g.ops]
        unit = next((u for u in ("matrix", "vector", "dma", "host") if u in units), "host")
        inputs = tuple(dict.fromkeys(r for o in g.ops for r in graph.ops[o].refs() if r not in members))
        last = g.ops[-1]
        read = bool([r for r in graph.readers[last] if r not in members]) or last in graph.outputs
        attrs = {"fused": dict(g.why)} if len(g.ops) > 1 else {}
        kernels.append(Kernel(g.name, g.ops, str(unit), inputs, (last,) if read else (), attrs=attrs))
    return tuple(kernels)


def fuse(program: Program, ctx: CompileContext) -> Program:
    """The fusion pass: `program.kernels` from ctx.plan (a FusionPlan) or the automatic plan;
    every op gets attrs['kernel'] (printed in the MLIR text); attention kernels get their
    on-chip decision (accelerator/compiler/tiling.py: attention_working_set)."""
    from accelerator.compiler.prologue import recompute_norms
    from accelerator.compiler.tiling import attention_decision

    if not isinstance(ctx.plan, FusionPlan):
        program = recompute_norms(program, ctx)  # a norm shared by matmuls: one copy per prologue
    plan = ctx.plan if isinstance(ctx.plan, FusionPlan) else auto_plan(program, ctx)
    groups = _resolve(program, plan)
    kernels = list(kernels_of(program, groups))
    ops = {o.name: o for o in program.ops}
    for i, k in enumerate(kernels):
        anchor = next((o for o in k.ops if kind(ops[o]) == "attention"), None)
        again = k.name in plan.replayed
        if anchor:
            decision = attention_decision(program, ops[anchor], ctx.hardware)
            kernels[i] = replace(k, attrs={**k.attrs, **decision})
            if not again:
                ctx.decide(k.name, f"attention {decision['attention']}", decision["why"])
        if len(k.ops) > 1 and not again:
            why = k.attrs["fused"]
            ctx.decide(
                k.name, f"fused {len(k.ops)} ops: {', '.join(k.ops)}", "; ".join(f"{o}: {why[o]}" for o in k.ops)
            )
    kernel_of = {o: k.name for k in kernels for o in k.ops}
    new_ops = [replace(o, attrs={**o.attrs, "kernel": kernel_of[o.name]}) for o in program.ops]
    if plan.replayed:
        ctx.decide(
            plan.span,
            f"as {plan.span.rsplit('.', 1)[0]}.0: {len(plan.replayed)} kernels",
            "identical blocks: the first instance's groups copied op by op (accelerator/compiler/instances.py)",
        )
    ctx.decide("", f"{len(program.ops)} ops -> {len(kernels)} kernels", f"plan: {plan.source}")
    return program.with_ops(new_ops, kernels=tuple(kernels))
