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
    """A 2-D convolution as the implicit GEMM the tiling pass tiled (M = N*Ho*Wo, N = Cout/groups
    per group, K = Cin/groups*kh*kw): the input's patches (im2col, torch's unfold) times the
    weight as (K, Cout) per group, by `matmul` over tm x tn output tiles and tk steps, the bias
    added to the accumulator; None for what this does not cover (transposed, not 2-D)."""
    x, w, bias, stride, padding, dilation, transposed, _, groups = args[:9]
    if transposed or x.dim() != 4 or w.dim() != 4:
        return None
    n, _, h, wd = x.shape
    co, cig, kh, kw = w.shape
    ho = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    cols = torch.nn.functional.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
    k, cog = cig * kh * kw, co // groups
    outs = []
    for g in range(groups):
        a = cols[:, g * k : (g + 1) * k, :].transpose(1, 2).reshape(n * ho * wo, k)  # (M, K)
        b = w[g * cog : (g + 1) * cog].reshape(cog, k).t()  # (K, N)
        if bias is None:
            y = matmul("aten.mm.default", (a, b), {}, tile, accumulate, out_dtype)
        else:
            y = matmul("aten.addmm.default", (bias[g * cog : (g + 1) * cog], a, b), {}, tile, accumulate, out_dtype)
        outs.append(y.reshape(n, ho, wo, cog).permute(0, 3, 1, 2))
    return torch.cat(outs, 1).contiguous()
