"""Tile-by-tile execution of the kernels the tiling pass tiled, as the accelerator runs them: the
functional mode's reference for the simulator.

`matmul(target, args, kwargs, tile, accumulate, out_dtype)`: mm, addmm, bmm and npu.qmm over
output tiles (tm x tn), each the sum over K tiles of A[tm x tk] @ B[tk x tn] in the accumulate
dtype (fp32 for bf16/fp8 operands; int8 exactly, in float64 as npu_ops.qmm does; the result
dtype otherwise), then (addmm) beta * bias + alpha * acc, rounded once to the result dtype.
Ragged edges (a dimension not a multiple of the tile) are the shorter last tiles.

`convolution(args, tile, accumulate, out_dtype)`: a 2-D convolution as its implicit GEMM (im2col
patches x the weight as (K, Cout) per group) through `matmul`, tile {m, n, k} as tiled.

Vector kernels run tile by tile in accelerator/compiler/tiled_vector.py.

`attention(args, kwargs, bq, bk)`: scaled_dot_product_attention as a flash-style schedule:
per q block, an online softmax over kv blocks in fp32 (running max m, sum l, output o:
m' = max(m, rowmax(s)), o = o * e^(m - m') + e^(s - m') @ v, l = l * e^(m - m') + rowsum e^(s - m')),
the result o / l in q's dtype, laid out as torch's CPU kernel lays out its result."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from accelerator.compiler import npu_ops


def _acc_dtype(a: torch.Tensor, accumulate: str | None, out_dtype: torch.dtype) -> torch.dtype:
    if a.dtype == torch.int8:
        return torch.float64  # exact int8 x int8 sums while K < 5.6e11 (npu_ops.qmm)
    if accumulate and accumulate != "int32":
        return npu_ops.dtype_of(accumulate)
    return out_dtype if out_dtype.is_floating_point else torch.float32


def matmul(
    target: str,
    args: tuple,
    kwargs: Mapping[str, Any],
    tile: Mapping[str, int],
    accumulate: str | None,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    bias = None
    if target == "aten.addmm.default":
        bias, a, b = args[0], args[1], args[2]
    else:
        a, b = args[0], args[1]
    acc_dtype = _acc_dtype(a, accumulate, out_dtype)
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    tm, tn, tk = tile["m"], tile["n"], tile["k"]
    out = torch.empty((*a.shape[:-2], m, n), dtype=acc_dtype)
    for i in range(0, m, tm):
        for j in range(0, n, tn):
            acc = torch.zeros((*a.shape[:-2], min(tm, m - i), min(tn, n - j)), dtype=acc_dtype)
            for p in range(0, k, tk):
                acc += a[..., i : i + tm, p : p + tk].to(acc_dtype) @ b[..., p : p + tk, j : j + tn].to(acc_dtype)
            out[..., i : i + tm, j : j + tn] = acc
    if bias is not None:
        out = kwargs.get("beta", 1) * bias.to(acc_dtype) + kwargs.get("alpha", 1) * out
    return out.to(out_dtype)


def attention(args: tuple, kwargs: Mapping[str, Any], bq: int, bk: int) -> torch.Tensor:
    q, k, v = args[:3]
    mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
    causal = args[5] if len(args) > 5 else kwargs.get("is_causal", False)
    scale = kwargs.get("scale") or 1.0 / math.sqrt(q.shape[-1])
    if kwargs.get("enable_gqa") and k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    lq, lk = q.shape[-2], k.shape[-2]
    if causal:
        mask = torch.ones(lq, lk, dtype=torch.bool).tril()
    out = torch.empty((*q.shape[:-1], v.shape[-1]), dtype=torch.float32)
    for i in range(0, lq, bq):
        qi = q[..., i : i + bq, :].float()
        rows = qi.shape[-2]
        m = torch.full((*qi.shape[:-1],), -math.inf)
        lsum = torch.zeros_like(m)
        o = torch.zeros((*qi.shape[:-1], v.shape[-1]))
        for j in range(0, lk, bk):
            s = (qi @ k[..., j : j + bk, :].float().transpose(-1, -2)) * scale
            if mask is not None:
                mij = mask[..., i : i + rows, j : j + bk]
                s = s.masked_fill(~mij, -math.inf) if mij.dtype == torch.bool else s + mij.float()
            m_new = torch.maximum(m, s.amax(-1))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - safe[..., None])
            alpha = torch.exp(m - safe)
            lsum = lsum * alpha + p.sum(-1)
            o = o * alpha[..., None] + p @ v[..., j : j + bk, :].float()
            m = m_new
        out[..., i : i + bq, :] = o / lsum[..., None]
    if out.dim() == 4:  # laid out (B, L, H, E) as torch's CPU kernel lays it: the traced permute + view relies on it
        return out.to(q.dtype).transpose(1, 2).contiguous().transpose(1, 2)
    return out.to(q.dtype)


def convolution(
    args: tuple, tile: Mapping[str, int], accumulate: str | None, out_dtype: torch.dtype
) -> torch.Tensor | None:
    """A convolution as the implicit GEMM the tiling pass tiled (M = N*prod(output spatial),
    N = Cout/groups per group, K = Cin/groups*prod(kernel)): the input's patches (im2col) times
    the weight as (K, Cout) per group, by `matmul` over tm x tn output tiles and tk steps, the
    bias added to the accumulator. 2-D patches by torch's unfold, 1-D and 3-D by unfolding each
    spatial dim (every `dilation`-th element of a window of d*(k-1)+1). A transposed convolution
    runs as the direct one it equals: the input spread `stride` apart (zeros between), padded by
    d*(k-1) - p each side (plus output_padding at the end; a negative pad crops), the weight's
    in/out channels swapped per group and flipped along every spatial dim, stride 1. None for an
    input without spatial dims."""
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = args[:9]
    sp = x.dim() - 2
    if sp < 1 or w.dim() != x.dim():
        return None
    stride, padding, dilation = (list(v) * (sp if len(v) == 1 else 1) for v in (stride, padding, dilation))
    if transposed:
        extra = list(output_padding) * (sp if len(output_padding) == 1 else 1)
        x, w = _as_direct(x, w, stride, padding, dilation, extra, groups)
        stride, padding = [1] * sp, [0] * sp
    n = x.shape[0]
    co, cig, *ks = w.shape
    if sp == 2:
        cols = torch.nn.functional.unfold(
            x, tuple(ks), dilation=tuple(dilation), padding=tuple(padding), stride=tuple(stride)
        )  # (N, C*kh*kw, L)
        outs = [
            (h + 2 * p - d * (q - 1) - 1) // s + 1 for h, p, d, q, s in zip(x.shape[2:], padding, dilation, ks, stride)
        ]
        patches = cols.reshape(n, x.shape[1], -1, cols.shape[-1]).transpose(2, 3)  # (N, C, L, K/C)
    else:
        pads = [q for p in reversed(padding) for q in (p, p)]
        t = torch.nn.functional.pad(x, pads)
        for i in range(sp):
            t = t.unfold(2 + i, dilation[i] * (ks[i] - 1) + 1, stride[i])[..., :: dilation[i]]
        outs = list(t.shape[2 : 2 + sp])
        patches = t.reshape(n, x.shape[1], -1, math.prod(ks))  # (N, C, prod(outs), prod(ks))
    k, cog = cig * math.prod(ks), co // groups
    m = n * math.prod(outs)
    results = []
    for g in range(groups):
        a = patches[:, g * cig : (g + 1) * cig].permute(0, 2, 1, 3).reshape(m, k)  # (M, K): C then kernel
        b = w[g * cog : (g + 1) * cog].reshape(cog, k).t()  # (K, N)
        if bias is None:
            y = matmul("aten.mm.default", (a, b), {}, tile, accumulate, out_dtype)
        else:
            y = matmul("aten.addmm.default", (bias[g * cog : (g + 1) * cog], a, b), {}, tile, accumulate, out_dtype)
        results.append(y.reshape(n, *outs, cog).permute(0, sp + 1, *range(1, sp + 1)))
    return torch.cat(results, 1).contiguous()


def _as_direct(
    x: torch.Tensor, w: torch.Tensor, stride: list, padding: list, dilation: list, output_padding: list, groups: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input, weight) of the direct convolution a transposed one equals (`convolution`)."""
    sp = x.dim() - 2
    size = [(h - 1) * s + 1 for h, s in zip(x.shape[2:], stride)]
    spread = x.new_zeros(*x.shape[:2], *size)
    spread[(slice(None), slice(None), *(slice(None, None, s) for s in stride))] = x
    pads: list[int] = []
    for i in reversed(range(sp)):
        edge = dilation[i] * (w.shape[2 + i] - 1) - padding[i]
        pads += [edge, edge + output_padding[i]]
    spread = torch.nn.functional.pad(spread, pads)
    cig = w.shape[0] // groups
    flipped = torch.cat([w[g * cig : (g + 1) * cig].transpose(0, 1) for g in range(groups)], 0)
    return spread, flipped.flip(list(range(2, 2 + sp)))
