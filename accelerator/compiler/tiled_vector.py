"""Tile-by-tile execution of a vector kernel (a fused chain of elementwise ops, casts, views and
row reductions; tile {elements}, accelerator/compiler/tiling.py), as the vector unit runs it:
the whole chain over one tile of rows, then the next.

The kernel's iteration space is its last value's shape S. A kernel with an op that works along
a dimension (a row reduction, softmax, layer norm, a slice or concatenation) is tiled by rows of
S's last dim (C = S[-1], R = numel(S) / C rows, max(1, elements // C) rows a tile: the tiling pass
makes `elements` whole rows when the kernel reduces rows); any other kernel by elements (C = 1,
`elements` a tile). Each tensor the kernel reads is broadcast to S's leading dims (keeping its
own last dim) and viewed as (R, last) rows; a tile is rows [r0, r1) of every value; the last
tile is the shorter ragged one. Reductions and dims then run along the row (dim -1).

A batch norm (inference) runs by elements as torch's CPU kernel computes it: x * alpha + beta,
alpha = w / sqrt(var + eps), beta = b - mean * alpha per channel, broadcast to every element.

A kernel whose row ops work along other dims (a mean over H, W of NCHW, a var over dim 1) is
first laid out with those dims last and flattened into one (accelerator/compiler/tiled_permute.py).
A pooling kernel runs as windows over output tiles (accelerator/compiler/tiled_pool.py).
A kernel this cannot express (an op outside the sets below, a view that changes the last dim, a
value that is not R rows) runs whole: `run_tiled` returns None."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import torch

from accelerator.compiler.program import Op, Ref

#: ATen ops (by their name before the overload) applied element by element, with broadcasting
ELEMENTWISE = {
    "add", "sub", "mul", "div", "neg", "pow", "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "erf",
    "rsqrt", "sqrt", "reciprocal", "abs", "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "where",
    "le", "lt", "ge", "gt", "eq", "ne", "logical_and", "logical_or", "logical_not", "_to_copy", "clone",
    "alias", "hardtanh", "leaky_relu", "sin", "cos", "square", "fill", "masked_fill", "bitwise_not",
}  # fmt: skip
NPU = {"npu.cast", "npu.quantize", "npu.dequantize", "getitem"}
VIEWS = {"view", "_unsafe_view", "reshape", "alias", "squeeze", "unsqueeze"}
#: ops with a dim argument, and the position of their dim(s): a tile holds whole rows of them
DIM_OPS = {"mean": 1, "sum": 1, "amax": 1, "amin": 1, "var": 1, "_softmax": 1, "_log_softmax": 1, "slice": 1, "cat": 1}
ROW_OPS = set(DIM_OPS) | {"native_layer_norm"}
BATCH_NORM = "_native_batch_norm_legit_no_training"  # per channel: x * alpha[c] + beta[c], by elements

Call = Callable[[Op, dict[str, Any], "str | None"], Any]


def _name(target: str) -> str:
    return target.split(".")[1] if target.startswith("aten.") else target


def _rows_of(t: Any, lead: tuple[int, ...], by_rows: bool) -> torch.Tensor | None:
    """`t` broadcast to `lead` leading dims and viewed as (rows, its last dim) (by rows), or
    broadcast to the whole `lead` shape as (elements, 1); None when it does not broadcast."""
    if t.dim() == 0:
        return t
    head, last = (tuple(t.shape[:-1]), t.shape[-1]) if by_rows else (tuple(t.shape), 1)
    try:
        fits = torch.broadcast_shapes(head, lead) == lead
    except RuntimeError:
        fits = False
    if not fits:
        # a value of as many rows (or elements) as the kernel's, of other leading dims, is read
        # through a view (an epilogue's reshape of a matmul result, a norm's (1, S, D) viewed as
        # the matmul's (S, D)): its rows in logical order are the view's (run_tiled checks that
        # every value has that many rows)
        return t.reshape(-1, last) if t.numel() == math.prod(lead) * last else None
    if not by_rows:
        return t.expand(lead).reshape(-1, 1)
    return t.expand(*lead, last).reshape(-1, last)


def _row_dim(op: Op, meta: Mapping[str, Any]) -> Op | None:
    """`op` with its dim argument(s) rewritten to -1 (the row), None when a dim is not the last."""
    pos = DIM_OPS[_name(op.target)]
    src = op.args[0][0] if _name(op.target) == "cat" else op.args[0]
    rank = meta[src.name].dim() if isinstance(src, Ref) else 0
    dims = op.args[pos] if len(op.args) > pos else (0 if _name(op.target) == "cat" else None)
    if dims is None:
        return None  # a reduction over every dim
    listed = isinstance(dims, (list, tuple))
    if not all(isinstance(d, int) and d % rank == rank - 1 for d in (dims if listed else [dims])):
        return None
    args = list(op.args) + [None] * (pos + 1 - len(op.args))
    args[pos] = [-1] if listed else -1
    return replace(op, args=tuple(args))


def run_tiled(ops: list[Op], env: dict[str, Any], elements: int, call: Call) -> dict[str, Any] | None:
    """Every value of the kernel `ops` (by name) computed tile by tile, or None (module docstring)."""
    from accelerator.compiler import tiled_pool

    if ops and ops[0].target in tiled_pool.POOLS:  # windows over output tiles
        return tiled_pool.run_tiled(ops, env, elements, call)
    # a getitem of a tuple from outside (a norm's result) names a tensor the kernel reads
    picked = {
        o.name: env[o.args[0].name][o.args[1]]
        for o in ops
        if o.target == "getitem" and isinstance(o.args[0], Ref) and isinstance(env.get(o.args[0].name), tuple)
    }
    if picked:
        rest = [o for o in ops if o.name not in picked]
        values = run_tiled(rest, {**env, **picked}, elements, call) if rest else {}
        return None if values is None else {**picked, **values}
    meta: dict[str, Any] = {}
    inside = {o.name for o in ops}
    reads = [r for o in ops for r in o.refs() if r not in inside]
    for r in reads:
        v = env[r]
        meta[r] = (
            torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor) else v
        )
    plan: list[tuple[Op, str]] = []  # (op as it runs on a tile, how: op, view, row)
    for op in ops:
        k = _name(op.target)
        how = "row" if k in ROW_OPS else "view" if k in VIEWS else "op" if k in ELEMENTWISE or k in NPU else ""
        how = "bn" if k == BATCH_NORM else how
        if not how:
            return None
        try:
            meta[op.name] = call(op, meta, "meta")
        except Exception:
            return None
        plan.append((op, how))
    if any(how == "row" and _name(o.target) in DIM_OPS and _row_dim(o, meta) is None for o, how in plan):
        from accelerator.compiler.tiled_permute import run_permuted  # along other dims: made the row

        return run_permuted(ops, env, meta, lambda o, e: run_tiled(o, e, elements, call))
    last = meta[ops[-1].name]
    last = last[0] if isinstance(last, tuple) and plan[-1][1] == "bn" else last
    if not isinstance(last, torch.Tensor) or last.dim() == 0:
        return None
    by_rows = any(how == "row" for _, how in plan)
    lead = tuple(last.shape[:-1]) if by_rows else tuple(last.shape)
    rows = 1
    for d in lead:
        rows *= d

    def width(t: Any) -> int:
        return t.shape[-1] if by_rows else 1

    runs: list[tuple[Op, str]] = []
    for op, how in plan:
        v = meta[op.name]
        if how == "bn" and (by_rows or v[0].numel() != rows or meta[op.args[0].name].dim() < 2):
            return None
        for t in (v[:1] if how == "bn" else v) if isinstance(v, tuple) else (v,):
            if not isinstance(t, torch.Tensor) or t.numel() != rows * width(t):
                return None
        if how == "view":
            src = meta[op.args[0].name]
            if not isinstance(src, torch.Tensor) or width(src) != width(v):
                return None
        if how == "row" and _name(op.target) in DIM_OPS:
            op = _row_dim(op, meta)
            if op is None:
                return None
        if how == "row" and _name(op.target) == "native_layer_norm" and len(op.args[1]) != 1:
            return None
        runs.append((op, how))
    # a layer norm's weight and bias stay whole (1-D over the row), as do a batch norm's parameters
    whole = {
        a.name for o, _ in runs if _name(o.target) == "native_layer_norm" for a in o.args[2:4] if isinstance(a, Ref)
    }
    whole |= {a.name for o, how in runs if how == "bn" for a in o.args[1:5] if isinstance(a, Ref)}
    # by elements, an input is broadcast to the shape of the value its reader makes (across a
    # view that changes the shape, a per-channel scale broadcasts to the matmul's result, not
    # to the kernel's last value); read by values of two shapes, to the kernel's last
    target: dict[str, tuple[int, ...]] = {}
    for o, how in runs:
        made = meta[o.name]
        for a in o.refs() if how == "op" and isinstance(made, torch.Tensor) and not by_rows else ():
            target[a] = tuple(made.shape) if target.get(a, tuple(made.shape)) == tuple(made.shape) else lead
    sources: dict[str, Any] = {}
    rowed: set[str] = set()
    for r in reads:
        v = env[r]
        if isinstance(v, torch.Tensor) and r not in whole:
            t = _rows_of(v, target.get(r, lead), by_rows)
            if t is None:
                return None
            sources[r] = t
            rowed.add(r)
        else:
            sources[r] = v
    for op, how in runs:  # a batch norm's per-channel alpha, beta (as torch's CPU kernel folds them) per element
        if how == "bn":
            x, w, b, mean, var = (env[a.name] if isinstance(a, Ref) else a for a in op.args[:5])
            alpha = torch.rsqrt(var + op.args[6]) * (w if w is not None else 1)
            beta = (b if b is not None else 0) - mean * alpha
            shape = (1, -1) + (1,) * (x.dim() - 2)
            for key, t in (("alpha", alpha), ("beta", beta)):
                sources[f"{op.name}#{key}"] = t.reshape(shape).expand(x.shape).reshape(-1, 1)
                rowed.add(f"{op.name}#{key}")
    # a tile holds `elements` of the widest row (a reduction's input, not its 1-wide result)
    widest = max((sources[r].shape[-1] for r in rowed if sources[r].dim() == 2), default=1)
    step = max(1, elements // (max(widest, last.shape[-1]) if by_rows else 1))
    pieces: dict[str, list[Any]] = {o.name: [] for o, _ in runs}
    for r0 in range(0, rows, step):
        tile = {k: v[r0 : r0 + step] if k in rowed and v.dim() == 2 else v for k, v in sources.items()}
        for op, how in runs:
            if how == "bn":
                x = tile[op.args[0].name]
                y = (x * tile[f"{op.name}#alpha"] + tile[f"{op.name}#beta"]).to(x.dtype)
                tile[op.name] = (y, *(y.new_empty(0) for _ in meta[op.name][1:]))  # as the CPU kernel: no saved stats
            else:
                tile[op.name] = tile[op.args[0].name] if how == "view" else call(op, tile, None)
            pieces[op.name].append(tile[op.name])
    out: dict[str, Any] = {}
    for op, how in runs:
        v, parts = meta[op.name], pieces[op.name]
        if how == "bn":
            out[op.name] = (_laid_out(torch.cat([p[0] for p in parts]), v[0]), *parts[0][1:])
        elif isinstance(v, tuple):
            out[op.name] = tuple(_laid_out(torch.cat([p[i] for p in parts]), t) for i, t in enumerate(v))
        else:
            out[op.name] = _laid_out(torch.cat(parts), v)
    return out


def _laid_out(rows: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`rows` as a tensor of `like`'s shape and strides (an elementwise op on a permuted input
    keeps its layout, and a view after it may rely on that, as the traced program does)."""
    out = torch.empty_strided(like.shape, like.stride(), dtype=rows.dtype)
    return out.copy_(rows.reshape(like.shape))
