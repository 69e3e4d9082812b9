"""A vector kernel whose reductions (mean, sum, amax, amin, var, softmax) work along dims that are
not the last, run tile by tile as rows: a global average pool's mean over H, W of NCHW, a
variance over the channels of (N, C, L).

Every reduction of the kernel must reduce the same dims D of values of one rank r. The kernel is
laid out with the kept dims first (in their order) and D last, flattened into one dim of
P = prod(S[d] for d in D) (the DMA reads the permuted tile; on the vector unit each row is one
reduction): each tensor the kernel reads is right-aligned to rank r and, when it spans D (size
S[d] along every d in D) or is 1 along all of D, permuted and reshaped to (kept..., P) or
(kept..., 1) (a getitem of a tuple from outside, a batch norm's result, is such a tensor);
the reductions then run along dim -1, keeping it (one that drops D keeps it too, and only ops
reading nothing but its chain and scalars may follow it). tiled_vector.run_tiled runs that by
rows of P, and every value is laid out back: (kept..., P) reshaped to the kept and D sizes and permuted back, a reduced
value reshaped (its D dims are 1 or gone, the kept order unchanged), each with the strides the
op gives it. None (the kernel runs whole) for views, slices, concatenations, norms, different
D or ranks, or an input that is neither full nor 1 along D."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import torch

from accelerator.compiler.program import Op, Ref

REDUCE = {"mean", "sum", "amax", "amin", "var"}  # (x, dims, ...) with a keepdim
SOFTMAX = {"_softmax", "_log_softmax"}  # (x, dim, half_to_float): the shape kept


def _name(target: str) -> str:
    return target.split(".")[1] if target.startswith("aten.") else target


def _keepdim(op: Op) -> bool:
    if "keepdim" in op.kwargs:
        return bool(op.kwargs["keepdim"])
    return bool(op.args[2]) if len(op.args) > 2 and isinstance(op.args[2], bool) else False


def _as_row(op: Op) -> Op:
    """`op` along dim -1, a reduction keeping it (1 wide)."""
    args = list(op.args)
    if _name(op.target) in SOFTMAX:
        args[1] = -1
        return replace(op, args=tuple(args))
    args[1] = [-1]
    if "keepdim" in op.kwargs or _name(op.target) == "var":
        return replace(op, args=tuple(args), kwargs={**op.kwargs, "keepdim": True})
    args += [False] * (3 - len(args))
    args[2] = True
    return replace(op, args=tuple(args))


def run_permuted(
    ops: list[Op], env: dict[str, Any], meta: Mapping[str, Any], rows: Callable[[list[Op], dict[str, Any]], Any]
) -> dict[str, Any] | None:
    """Every value of the kernel `ops` computed by `rows` over the permuted layout, or None."""
    dims: set[tuple[int, ...]] = set()
    rank = -1
    dropped: set[str] = set()  # values after a reduction that drops its dims
    for op in ops:
        k = _name(op.target)
        if k in {"slice", "cat", "native_layer_norm", "view", "_unsafe_view", "reshape", "squeeze", "unsqueeze"}:
            return None
        tensors = [r for r in op.refs() if isinstance(meta.get(r), torch.Tensor) and meta[r].dim() > 0]
        if dropped and any(r in dropped for r in tensors):
            if not all(r in dropped for r in tensors) or k in REDUCE or k in SOFTMAX:
                return None  # a reduced value's dims would no longer line up with the others'
            dropped.add(op.name)
            continue
        if k in REDUCE or k in SOFTMAX:
            src = meta[op.args[0].name] if isinstance(op.args[0], Ref) else None
            given = op.args[1] if len(op.args) > 1 else None
            if not isinstance(src, torch.Tensor) or given is None or (rank >= 0 and src.dim() != rank):
                return None
            rank = src.dim()
            listed = given if isinstance(given, (list, tuple)) else [given]
            dims.add(tuple(sorted({int(d) % rank for d in listed})))
            if k in REDUCE and not _keepdim(op):
                dropped.add(op.name)  # kept (as 1) in the rows; only its own chain may follow
    if len(dims) != 1 or rank <= 0:
        return None
    (red,) = dims
    kept = [d for d in range(rank) if d not in red]
    perm = kept + list(red)
    full = next(meta[o.args[0].name] for o in ops if _name(o.target) in REDUCE | SOFTMAX).shape
    width = 1
    for d in red:
        width *= full[d]
    # a getitem of a tuple from outside (a batch norm's result) names a tensor the kernel reads
    picked = {o.name: env[o.args[0].name][o.args[1]] for o in ops if o.target == "getitem" and o.args[0].name in env}
    ops = [o for o in ops if o.name not in picked]
    inside = {o.name for o in ops}
    local = {**env, **picked}
    for r in dict.fromkeys(r for o in ops for r in o.refs() if r not in inside):
        t = local[r]
        if isinstance(t, (tuple, list)):
            return None  # its tensors (a batch norm's result) would keep the layout
        if not isinstance(t, torch.Tensor) or t.dim() == 0:
            continue
        if t.dim() > rank:
            return None
        t = t.reshape((1,) * (rank - t.dim()) + tuple(t.shape))
        along = [t.shape[d] for d in red]
        if along != [full[d] for d in red] and any(n != 1 for n in along):
            return None
        spans = any(n != 1 for n in along)
        local[r] = t.permute(perm).reshape(*(t.shape[d] for d in kept), width if spans else 1)
    runs = [_as_row(o) if _name(o.target) in REDUCE | SOFTMAX else o for o in ops]
    values = rows(runs, local)
    if values is None:
        return None
    inverse = [perm.index(d) for d in range(rank)]
    out: dict[str, Any] = dict(picked)
    for op in ops:
        v, like = values[op.name], meta[op.name]
        if not isinstance(v, torch.Tensor) or not isinstance(like, torch.Tensor) or v.numel() != like.numel():
            return None
        if like.dim() == rank and v.shape[-1] == width and width > 1:  # spans D: back to its layout
            v = v.reshape(*v.shape[:-1], *(full[d] for d in red)).permute(inverse)
        laid = torch.empty_strided(like.shape, like.stride(), dtype=v.dtype)
        out[op.name] = laid.copy_(v.reshape(like.shape))
    return out
