"""Tile-by-tile execution of a 2-D pooling kernel (avg_pool2d, max_pool2d_with_indices and the
getitems of its result; tile {elements}): windows over output tiles.

A tile is r output rows of every (n, c) plane, r = max(1, elements // (N * C * Wo)) (the last
tile the shorter ragged one). Output rows [h0, h1) read input rows [h0 * sh, (h1 - 1) * sh +
dh * (kh - 1) + 1) of the input padded explicitly (zeros for an average counting the padding,
-inf for a max, which never wins a window holding a real element), and pool them without
padding: the same windows, so the same values. A max's indices (flat h * W + w in the
unpadded input, as torch gives them) are the window's index moved back by the tile's first row
and the padding. A pool this does not cover runs whole (`run_tiled` returns None): ceil_mode,
an average excluding the padding from its count, an input that is not 4-D."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from accelerator.compiler.program import Op, map_refs

POOLS = {"aten.avg_pool2d.default", "aten.max_pool2d_with_indices.default"}

Call = Callable[[Op, dict[str, Any], "str | None"], Any]


def _pair(v: Any, default: Any = None) -> tuple[int, int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    if isinstance(v, int):
        return v, v
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def pool2d(target: str, args: tuple, elements: int) -> Any | None:
    """The pool's result computed over output tiles of rows, None when not covered."""
    x, kernel = args[0], _pair(args[1])
    stride = _pair(args[2] if len(args) > 2 else None, kernel)
    pad = _pair(args[3] if len(args) > 3 else 0)
    is_max = target == "aten.max_pool2d_with_indices.default"
    dil = _pair(args[4] if is_max and len(args) > 4 else 1)
    ceil = bool(args[5] if is_max and len(args) > 5 else args[4] if not is_max and len(args) > 4 else False)
    include_pad = bool(args[5]) if not is_max and len(args) > 5 else True
    divisor = args[6] if not is_max and len(args) > 6 else None
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or ceil or (not include_pad and any(pad)):
        return None
    n, c, h, w = x.shape
    ho = (h + 2 * pad[0] - dil[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    wo = (w + 2 * pad[1] - dil[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    xp = F.pad(x, (pad[1], pad[1], pad[0], pad[0]), value=-torch.inf if is_max else 0.0)
    rows = max(1, elements // max(1, n * c * wo))
    values, indices = [], []
    for h0 in range(0, ho, rows):
        h1 = min(ho, h0 + rows)
        start = h0 * stride[0]
        win = xp[:, :, start : (h1 - 1) * stride[0] + dil[0] * (kernel[0] - 1) + 1]
        if is_max:
            y, idx = torch.ops.aten.max_pool2d_with_indices.default(win, list(kernel), list(stride), [0, 0], list(dil))
            row, col = idx // xp.shape[-1], idx % xp.shape[-1]
            indices.append((row + start - pad[0]) * w + (col - pad[1]))
        else:
            y = torch.ops.aten.avg_pool2d.default(win, list(kernel), list(stride), [0, 0], False, True, divisor)
        values.append(y)
    out = torch.cat(values, 2)
    return (out, torch.cat(indices, 2)) if is_max else out


def run_tiled(ops: list[Op], env: dict[str, Any], elements: int, call: Call) -> dict[str, Any] | None:
    """Every value of a pooling kernel (the pool, then getitems of it), or None."""
    if not ops or ops[0].target not in POOLS or any(o.target != "getitem" for o in ops[1:]) or ops[0].kwargs:
        return None
    y = pool2d(ops[0].target, map_refs(ops[0].args, lambda r: env[r.name]), elements)
    if y is None:
        return None
    out: dict[str, Any] = {ops[0].name: y}
    for g in ops[1:]:
        out[g.name] = call(g, {**env, **out}, None)
    return out
