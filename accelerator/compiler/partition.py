"""Partitioning: the host cuts, and tensor parallelism over `ctx.chips` chips.

Host cuts (cuts.py): every host op's crossings of the host link, costed, at any chip count.

Tensor parallelism (Shoeybi et al. 2019, "Megatron-LM", section 3): the program becomes the one
every chip runs (SPMD), with per-chip shapes. A linear (mm/addmm of a weight from a parameter)
whose input is replicated is column-parallel: its weight split along the output features, its
result split along its last dim (q/k/v, gate/up, lm_head). A linear whose input is split along
the contracted dim is row-parallel: its weight split along the input features, each chip's
product a partial sum, followed by `npu.all_reduce` (o_proj, down_proj; a bias is added once,
after the reduction). A quantized linear (`npu.qmm` of the int8/fp8 policies) splits the same
way: its int8 weight as the fp32 one, a column-parallel one's per-channel scales and bias along
the output channels with it; a row-parallel one all-reduces its int32 partial sums (exact)
before the dequantize. Between them a split propagates through elementwise ops (operands
broadcast along the split dim), views (the split dim found by the product of the dims before
it), permutes, slices and concatenations along other dims, attention (split along heads: q,
k and v all by heads) and in-place cache writes (the cache buffer split as its new rows are).
With fewer KV heads than chips (GQA: k/v projections viewed into h < N heads, N % h == 0) the
KV heads are replicated, not gathered: k_proj/v_proj, their weights and the KV caches split into
h slices, chip c holding slice c // (N / h), the KV head its query heads read (query heads per
chip N_q / N divide the group N_q / h), and attention runs per chip with enable_gqa.
Any other op that reads a split value gets `npu.all_gather` first (a decision naming why), as
do the program's outputs. Split dims must be static and divisible by the chip count.
Collectives run on the DMA engines over the chip links (unit dma, attrs `collective`, `bytes`
per chip, by npu_ops.all_reduce_bytes / all_gather_bytes).

Order: right after legalisation, before fusion, tiling and allocation: partitioning changes
every split tensor's shape to its per-chip slice and adds collectives, and tiles, buffer sizes
and the schedule are per chip, so those passes must see the partitioned program."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from accelerator.compiler import npu_ops
from accelerator.compiler.cuts import SCALARS, host_cuts, value_bytes
from accelerator.compiler.legalize import op_kind
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Op, Program, Ref, TensorType, map_refs
from accelerator.compiler.tp_collectives import Collectives
from profiler.model.errors import InputError

LINEARS = {"mm", "addmm", "npu.qmm"}  # npu.qmm: an int8/fp8 linear (accelerator/compiler/quantize.py)
#: ops applied element by element (with broadcasting): a split passes through them
ELEMENTWISE = {
    "add", "sub", "mul", "div", "neg", "pow", "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "erf", "rsqrt",
    "sqrt", "reciprocal", "abs", "clamp", "maximum", "minimum", "where", "le", "lt", "ge", "gt", "eq", "ne",
    "logical_and", "logical_or", "logical_not", "npu.cast", "_to_copy", "clone", "alias", "contiguous",
    "npu.quantize", "npu.dequantize",
}  # fmt: skip
VIEWS = {"view", "_unsafe_view", "reshape"}
WEIGHT_CHAIN = {"permute", "t", "npu.cast", "_to_copy", "clone"}


def partition(program: Program, ctx: CompileContext) -> Program:
    program = host_cuts(program, ctx)
    n = ctx.chips
    if n < 1 or n > ctx.hardware.chips:
        raise InputError(ctx.hardware.name, f"--chips {n}: {ctx.hardware.name} has {ctx.hardware.chips} chip(s)")
    if n == 1:
        ctx.decide("", "one chip", "chips 1: nothing to split")
        return program
    return _TensorParallel(program, ctx, n).run()


def _norm(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


class _TensorParallel(Collectives):
    """One pass over the ops deciding each value's split (`split`: value -> dim of its logical
    shape split over the chips), then one emitting the per-chip program."""

    def __init__(self, program: Program, ctx: CompileContext, n: int):
        self.p, self.ctx, self.n = program, ctx, n
        self.types = program.types()
        self.producers = program.producers()
        self.users = program.users()
        self.inputs = {i.name: i for i in program.inputs}
        self.split: dict[str, int] = {}
        self.gather: dict[str, set[str]] = {}  # op -> its operands to all-gather first (and why)
        self.why: dict[str, str] = {}
        self.role: dict[str, str] = {}  # linear -> column / row
        self.read: set[str] = set()
        # KV heads fewer than chips (GQA): a value split into `parts[v]` < n distinct slices, each
        # held by n / parts chips; `kv_parts` the column linears planned so, `origin` the linear a
        # split value comes from, `wish`/`forbid` what a planning round asks of the next
        self.parts: dict[str, int] = {}
        self.origin: dict[str, str] = {}
        self.kv_parts: dict[str, int] = {}
        self.wish: dict[str, int] = {}
        self.forbid: set[str] = set()

    def ttype(self, name: str) -> TensorType | None:
        t = self.types.get(name)
        return t if isinstance(t, TensorType) and t.dtype not in SCALARS else None

    def divisible(self, name: str, d: int, parts: int | None = None) -> bool:
        t = self.ttype(name)
        p = parts or self.n
        return t is not None and 0 <= d < len(t.shape) and isinstance(t.shape[d], int) and t.shape[d] % p == 0

    def parts_of(self, names: list[str]) -> int | None:
        """The slice count the split values among `names` share, None when they differ."""
        ps = {self.parts.get(r, self.n) for r in names if r in self.split}
        return ps.pop() if len(ps) == 1 else None

    # -- planning --------------------------------------------------------------------------

    def weight_chain(self, name: str) -> list[str] | None:
        """[param input, op, ..., name] when `name` is a parameter through single-use
        layout ops (permute, t, casts), else None."""
        chain = [name]
        while name not in self.inputs:
            op = self.producers.get(name)
            if op is None or op_kind(op.target) not in WEIGHT_CHAIN or len(self.users.get(name, [])) != 1:
                return None
            name = op.refs()[0]
            chain.append(name)
        if self.inputs[name].kind != "param" or len(self.users.get(name, [])) != 1:
            return None
        return chain[::-1]

    def split_chain(self, chain: list[str], d: int, parts: int | None = None) -> None:
        """Split the last value of `chain` along `d` (into `parts` slices, n by default), and
        back through it to the parameter."""
        for name in reversed(chain):
            self.split[name] = d
            self.parts[name] = parts or self.n
            op = self.producers.get(name)
            if op is None:
                break
            k = op_kind(op.target)
            if k == "permute":
                d = op.args[1][d]
            elif k == "t":
                d = 1 - d

    def plan_linear(self, op: Op) -> bool:
        x, w = op.args[-2], op.args[-1]
        chain = self.weight_chain(w.name)
        if chain is None:
            return False
        bias = op.args[0].name if op_kind(op.target) == "addmm" else None
        sx = self.split.get(x.name)
        p = self.kv_parts.get(op.name, self.n)
        if sx is None and self.divisible(op.name, 1, p) and self.divisible(w.name, 1, p):
            bchain = self.weight_chain(bias) if bias else []
            if bchain is None:
                return False
            self.split_chain(chain, 1, p)
            if bias:
                self.split_chain(bchain, 0, p)
            self.split[op.name] = 1
            self.parts[op.name] = p
            self.origin[op.name] = op.name
            self.role[op.name] = "column"
            if op.target == "npu.qmm":
                self.split_quantized_epilogue(op.name, p)
            return True
        if sx == 1 and self.parts.get(x.name, self.n) == self.n and self.divisible(w.name, 0):
            self.split_chain(chain, 0)
            self.role[op.name] = "row"
            return True
        return False

    def split_quantized_epilogue(self, acc: str, parts: int) -> None:
        """A column-parallel npu.qmm's per-channel weight scale (read by its npu.dequantize) and
        the bias added after it, split along the output channels as the weight is."""
        users = self.users.get(acc, [])
        if len(users) != 1 or users[0].target != "npu.dequantize":
            return
        dq = users[0]
        scale = dq.args[2]
        if isinstance(scale, Ref) and scale.name in self.inputs and len(self.users.get(scale.name, [])) == 1:
            self.split[scale.name] = 0
            self.parts[scale.name] = parts
        adds = self.users.get(dq.name, [])
        if len(adds) == 1 and op_kind(adds[0].target) == "add":
            bias = next((r for r in adds[0].refs() if r != dq.name), None)
            t = self.ttype(bias) if bias else None
            chain = self.weight_chain(bias) if t is not None and len(t.shape) == 1 else None
            if chain and self.divisible(chain[-1], 0, parts):
                self.split_chain(chain, 0, parts)

    def plan_elementwise(self, op: Op) -> int | None:
        rank = len(op.type.shape) if isinstance(op.type, TensorType) else -1
        dims, replicated = set(), []
        for r in op.refs():
            t = self.ttype(r)
            if t is None:
                continue
            if r in self.split:
                dims.add(self.split[r] + rank - len(t.shape))
            else:
                replicated.append(t)
        if len(dims) != 1:
            return None
        (d,) = dims
        p = self.parts_of(op.refs())
        if p is None:
            return None
        for t in replicated:  # each replicated operand must broadcast along d
            a = d - (rank - len(t.shape))
            if a >= 0 and t.hint[a] != 1:
                return None
        return d if self.divisible(op.name, d, p) else None

    def plan_view(self, op: Op, d: int) -> int | None:
        src, out = self.ttype(op.args[0].name), self.ttype(op.name)
        if src is None or out is None:
            return None
        before = math.prod(src.hint[:d])
        x = op.args[0].name
        p = self.parts.get(x, self.n)
        for e in range(len(out.hint)):
            if math.prod(out.hint[:e]) == before and out.hint[e] > 1:
                shape = op.args[1]
                ok = self.divisible(op.name, e, p) and (not isinstance(shape[e], Ref))
                heads = out.hint[e]
                if not ok and p == self.n and heads < self.n and self.n % heads == 0 and x in self.origin:
                    self.wish[self.origin[x]] = heads  # fewer heads than chips: replicate them
                return e if ok else None
        return None

    def plan_op(self, op: Op) -> int | None:
        """The split dim of `op`'s result given its operands', or None (replicated; its split
        operands are then gathered)."""
        k = op_kind(op.target)
        refs = op.refs()
        split_args = [r for r in refs if r in self.split]
        if not split_args:
            return None
        x = op.args[0].name if op.args and isinstance(op.args[0], Ref) else None
        rank = len(op.type.shape) if isinstance(op.type, TensorType) else 0
        if k in ELEMENTWISE:
            return self.plan_elementwise(op)
        if k in VIEWS and x in self.split:
            return self.plan_view(op, self.split[x])
        if k == "permute" and x in self.split:
            return list(op.args[1]).index(self.split[x])
        if k == "transpose" and x in self.split:
            a, b = (_norm(int(v), rank) for v in op.args[1:3])
            d = self.split[x]
            return b if d == a else a if d == b else d
        if k in ("slice", "select") and x in self.split:
            dim = _norm(int(op.args[1]), len(self.types[x].shape))
            d = self.split[x]
            if dim == d:
                return None
            return d - 1 if k == "select" and dim < d else d
        if k == "unsqueeze" and x in self.split:
            dim = _norm(int(op.args[1]), rank)
            return self.split[x] + (1 if dim <= self.split[x] else 0)
        if k == "cat":
            parts = [r.name for r in op.args[0]]
            dim = _norm(int(op.args[1]) if len(op.args) > 1 else 0, rank)
            ds = {self.split.get(p) for p in parts}
            same = self.parts_of(parts) is not None
            return ds.pop() if same and len(ds) == 1 and None not in ds and dim not in ds else None
        if k == "scaled_dot_product_attention":
            q, kk, v = (r.name for r in op.args[:3])
            mask = op.args[3].name if len(op.args) > 3 and isinstance(op.args[3], Ref) else None
            mt = self.ttype(mask) if mask else None
            mask_ok = mt is None or mask not in self.split and (len(mt.shape) < 3 or mt.hint[-3] == 1)
            heads = all(self.split.get(a) == 1 for a in (q, kk, v))
            # KV heads in fewer slices than the query heads (replicated): SDPA's GQA maps each
            # chip's query heads onto the one KV slice it holds
            pq, pk, pv = (self.parts.get(a, self.n) for a in (q, kk, v))
            gqa = pk == pv and pq == self.n and self.n % pk == 0 and (pk == self.n or op.kwargs.get("enable_gqa"))
            return 1 if heads and mask_ok and gqa else None
        if k == "index_copy_":
            buf, dim, src = op.args[0].name, _norm(int(op.args[1]), rank), op.args[3].name
            d = self.split.get(src)
            if d is None or d == dim or buf not in self.inputs or self.inputs[buf].kind != "buffer":
                return None
            if (
                self.split.get(buf, d) != d
                or buf not in self.split
                and (buf in self.read or not self.divisible(buf, d, self.parts.get(src)))
            ):
                return None
            self.split[buf] = d
            self.parts[buf] = self.parts.get(src, self.n)
            if src in self.origin:
                self.origin[buf] = self.origin[src]
            return d
        return None

    def plan(self) -> None:
        """Plan rounds: a column linear whose heads turn out fewer than the chips (`wish`) is
        planned again with its heads replicated; one whose replicated value would still have to
        be gathered is planned plainly (`forbid`)."""
        for _ in range(4):
            self.plan_round()
            bad = {
                self.origin.get(v, "") for vs in self.gather.values() for v in vs if self.parts.get(v, self.n) < self.n
            } | {
                self.origin.get(o.name, "")
                for o in self.p.outputs
                if o.name in self.split and self.parts.get(o.name, self.n) < self.n
            }
            bad.discard("")
            wish = {k: v for k, v in self.wish.items() if k not in self.forbid and k not in self.kv_parts}
            if not bad and not wish:
                return
            self.forbid |= bad
            self.kv_parts = {k: v for k, v in {**self.kv_parts, **wish}.items() if k not in self.forbid}
        self.kv_parts = {}  # no replication settled: the plain plan
        self.plan_round()

    def plan_round(self) -> None:
        self.split, self.gather, self.why, self.role, self.read = {}, {}, {}, {}, set()
        self.parts, self.origin, self.wish = {}, {}, {}
        for op in self.p.ops:
            k = op_kind(op.target)
            if k in LINEARS and self.plan_linear(op):
                pass
            else:
                d = self.plan_op(op)
                if d is not None:
                    self.split[op.name] = d
                    splits = [r for r in op.refs() if r in self.split]
                    sdpa = op_kind(op.target) == "scaled_dot_product_attention"
                    self.parts.setdefault(op.name, self.n if sdpa else self.parts.get(splits[0], self.n))
                    src = next((self.origin[r] for r in splits if r in self.origin), None)
                    if src and not sdpa:
                        self.origin[op.name] = src
                else:
                    g = {r for r in op.refs() if r in self.split}
                    if g:
                        self.gather[op.name] = g
                        self.why[op.name] = f"{k} cannot run on a slice of {', '.join(sorted(g))}"
            self.read.update(op.refs())
        for o in self.p.outputs:  # gather before a cast that widens an output: fewer bytes on the links
            cast = self.producers.get(o.name)
            if o.kind != "user" or cast is None or cast.target != "npu.cast" or self.users.get(o.name):
                continue
            src = cast.refs()[0]
            if o.name in self.split and src in self.split and value_bytes(self.types[src]) < value_bytes(cast.type):
                del self.split[o.name]
                self.gather[cast.name] = {src}
                self.why[cast.name] = f"the output is gathered in {self.types[src].dtype}, before it widens"

    # -- emitting --------------------------------------------------------------------------

    def local(self, t: Any, d: int, parts: int | None = None) -> Any:
        if not isinstance(t, TensorType):
            return t
        p = parts or self.n
        shape = tuple(s // p if i == d else s for i, s in enumerate(t.shape))
        hint = tuple(s // p if i == d else s for i, s in enumerate(t.hint))
        return replace(t, shape=shape, hint=hint)

    def run(self) -> Program:
        self.plan()
        ops: list[Op] = []
        gathered: dict[str, str] = {}

        def gather(value: str, near: Op) -> str:
            if value not in gathered:
                t = self.types[value]
                name = f"{value}_gathered"
                ops.append(self.collective("all_gather", value, name, near, t, self.split[value]))
                gathered[value] = name
            return gathered[value]

        for op in self.p.ops:
            if op.name in self.gather:
                self.ctx.decide(op.name, "all-gather its operands first", self.why[op.name])
                for v in sorted(self.gather[op.name]):
                    gather(v, op)
                g = {v: gathered[v] for v in self.gather[op.name]}
                op = replace(
                    op,
                    args=map_refs(op.args, lambda r: Ref(g.get(r.name, r.name))),
                    kwargs={k: map_refs(v, lambda r: Ref(g.get(r.name, r.name))) for k, v in op.kwargs.items()},
                )
            d = self.split.get(op.name)
            role = self.role.get(op.name)
            if role == "row":
                ops += self.row_parallel(op)
                continue
            attrs = dict(op.attrs)
            if d is not None:
                attrs["split"] = d
                p = self.parts.get(op.name, self.n)
                if p < self.n:
                    attrs["replicas"] = self.n // p  # chips holding each slice
                op = replace(op, type=self.local(op.type, d, p))
                if op_kind(op.target) in VIEWS:
                    shape = list(op.args[1])
                    if shape[d] != -1:
                        shape[d] = shape[d] // p
                    op = replace(op, args=(op.args[0], shape, *op.args[2:]))
            if role == "column":
                attrs["parallel"] = "column"
                self.ctx.decide(op.name, f"column-parallel over {self.n} chips", "its input is replicated")
                if op.name in self.kv_parts:
                    p = self.kv_parts[op.name]
                    self.ctx.decide(
                        op.name,
                        f"{p} head(s) replicated: {p} slices, each on {self.n // p} chips",
                        f"{p} KV heads < {self.n} chips: each chip holds the KV head its query heads read "
                        "(no all-gather of K/V per layer)",
                    )
            ops.append(replace(op, attrs=attrs))
        outputs = []
        for o in self.p.outputs:
            if o.kind == "user" and o.name in self.split:
                near = self.producers[o.name]
                self.ctx.decide(o.name, "all-gather the output", "a program output is whole on every chip")
                outputs.append(replace(o, name=gather(o.name, near)))
            else:
                outputs.append(o)
        shards = {i: self.split[i] for i in self.inputs if i in self.split}
        replicas = {i: self.n // self.parts[i] for i in shards if self.parts.get(i, self.n) < self.n}
        inputs = tuple(
            replace(i, type=self.local(i.type, shards[i.name], self.parts.get(i.name))) if i.name in shards else i
            for i in self.p.inputs
        )
        for name, d in shards.items():
            self.ctx.decide(
                name, f"split along dim {d} over {self.n} chips", f"{self.inputs[name].target}, 1/{self.n} on each chip"
            )
        n_coll = sum(o.target in npu_ops.COLLECTIVES for o in ops)
        self.ctx.decide(
            "", f"{len(shards)} tensors split, {n_coll} collectives", f"tensor parallel over {self.n} chips"
        )
        return replace(
            self.p,
            inputs=inputs,
            ops=tuple(ops),
            outputs=tuple(outputs),
            chips=self.n,
            shards=shards,
            replicas=replicas,
        )
