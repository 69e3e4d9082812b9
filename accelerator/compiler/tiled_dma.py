"""Tile-by-tile execution of a data-movement (DMA) kernel: a permute, slice, select, cat, expand,
index, embedding, getitem or an in-place index_copy_ of activations (tile {elements},
accelerator/compiler/tiling.py), as the DMA engine runs it: one tile of output elements after
the other, each element read from where the kernel's address pattern says.

Every output element of such an op is a copy of one input element, so its address pattern is
the op applied to element ids: each data input replaced by the ids of its elements (an int64
tensor of its shape and strides, offset past the inputs before it; index arguments stay as
they are), the op run on those ids gives, for every output element, the id it reads. The output
is then filled `elements` ids at a time from the inputs' elements (the last tile the shorter
ragged one), laid out with the strides the op gives its result. An in-place op
(index_copy_) writes its tiles into its first argument, which it returns.

A kernel of several ops runs op after op, each tile by tile; `run_tiled` returns None for a
kernel with an op outside `MOVES` (it runs whole). Inputs of several dtypes are read as the
promoted one, as cat promotes them; an in-place op's source as its target's dtype."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import torch

from accelerator.compiler.program import Op, Ref, map_refs

#: data-movement ops (name before the overload) -> positions of their index (not data) arguments
MOVES: dict[str, tuple[int, ...]] = {
    "permute": (), "transpose": (), "t": (), "slice": (), "select": (), "cat": (), "expand": (),
    "unsqueeze": (), "squeeze": (), "view": (), "_unsafe_view": (), "reshape": (), "alias": (),
    "clone": (), "contiguous": (), "index": (1,), "embedding": (1,), "index_select": (2,),
    "index_copy_": (2,), "index_copy": (2,), "getitem": (),
}  # fmt: skip

Call = Callable[[Op, dict[str, Any], "str | None"], Any]


def _name(target: str) -> str:
    return target.split(".")[1] if target.startswith("aten.") else target


def _ids(t: torch.Tensor, offset: int) -> torch.Tensor:
    """Element ids offset..offset+numel of `t` in its logical order, with `t`'s shape and strides."""
    ids = torch.empty_strided(t.shape, t.stride(), dtype=torch.int64)
    return ids.copy_(torch.arange(offset, offset + t.numel()).reshape(t.shape))


def _move(op: Op, env: dict[str, Any], elements: int, call: Call) -> Any | None:
    """`op`'s value filled tile by tile from its data inputs, None when it is not a plain move."""
    index_args = MOVES[_name(op.target)]
    data: list[torch.Tensor] = []
    id_env: dict[str, Any] = {}

    def as_ids(r: Ref, pos: int) -> Any:
        v = env[r.name]
        if pos in index_args or not isinstance(v, torch.Tensor):
            return v
        offset = sum(t.numel() for t in data)
        data.append(v)
        return _ids(v, offset)

    args = tuple(map_refs(a, partial(as_ids, pos=i)) for i, a in enumerate(op.args))
    if op.kwargs or not data:
        return None
    for i, a in enumerate(args):
        id_env[f"#arg{i}"] = a
    spelled = replace(op, args=tuple(Ref(f"#arg{i}") for i in range(len(args))))
    pattern = call(spelled, id_env, None)  # the id each output element reads
    if not isinstance(pattern, torch.Tensor) or pattern.dtype != torch.int64:
        return None
    dtype = data[0].dtype  # an in-place op keeps its target's; cat promotes (bf16 with fp32: fp32)
    for t in data[1:] if not op.target.endswith("_.default") else ():
        dtype = torch.promote_types(dtype, t.dtype)
    flat = torch.cat([t.reshape(-1).to(dtype) for t in data])
    if op.target.endswith("_.default"):  # in place: the tiles land in the first argument
        return _fill(data[0], flat, pattern.reshape(-1), elements)
    overlapping = any(st == 0 and n > 1 for st, n in zip(pattern.stride(), pattern.shape))  # an expand
    stride = torch.empty(pattern.shape).stride() if overlapping else pattern.stride()  # then stored dense
    return _fill(torch.empty_strided(pattern.shape, stride, dtype=flat.dtype), flat, pattern.reshape(-1), elements)


def _fill(out: torch.Tensor, flat: torch.Tensor, src: torch.Tensor, elements: int) -> torch.Tensor:
    """`out` (in logical order) = flat[src], `elements` at a time."""
    dst = out.view(-1) if out.is_contiguous() else None
    parts = []
    for e0 in range(0, src.numel(), elements):
        tile = flat[src[e0 : e0 + elements]]
        if dst is not None:
            dst[e0 : e0 + elements] = tile
        else:
            parts.append(tile)
    if dst is None:
        out.copy_(torch.cat(parts).reshape(out.shape))
    return out


def run_tiled(ops: list[Op], env: dict[str, Any], elements: int, call: Call) -> dict[str, Any] | None:
    """Every value of the DMA kernel `ops` (by name) moved tile by tile, or None (module docstring)."""
    if not all(_name(o.target) in MOVES for o in ops):
        return None
    local = dict(env)
    out: dict[str, Any] = {}
    for op in ops:
        if op.target == "getitem":  # one tensor of a tuple (a batch norm's result), copied out
            t = call(op, local, None)
            v = None
            if isinstance(t, torch.Tensor):
                v = _fill(
                    torch.empty_strided(t.shape, t.stride(), dtype=t.dtype),
                    t.reshape(-1),
                    torch.arange(t.numel()),
                    elements,
                )
        else:
            v = _move(op, local, elements, call)
        if v is None:
            return None
        local[op.name] = out[op.name] = v
    return out
