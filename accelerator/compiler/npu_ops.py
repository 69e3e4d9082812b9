"""The compiler's own ops (`npu.*`), as the functional executor runs them on torch tensors.
Each is the reference semantics the simulator's kernels must match.

    npu.cast(x, dtype)                      x rounded to `dtype` (a torch dtype name)
    npu.quantize(x, scale, dtype, qmax)     clamp(round(x / scale), -qmax, qmax) stored as dtype
                                            (int8: qmax 127; float8_e4m3fn: 448, rounding by the cast)
    npu.qmm(a, b)                           a @ b of quantized operands with a wide accumulator:
                                            int8 -> exact integer sums (int32 result), fp8 -> fp32
    npu.dequantize(acc, scale_a, scale_b)   acc x scale_a x scale_b (scale_b per output column)
                                            in fp32

`scale` is per tensor (a float) or per channel (a 1-D tensor along the last dim).

Collectives over the chips of a partitioned program (accelerator/compiler/partition.py); the
executor hands them every chip's operand, in chip order:

    npu.all_reduce(x, chips)                the sum of the chips' x (partial sums of a
                                            row-parallel matmul), the same on every chip
    npu.all_gather(x, dim, chips)           the chips' x concatenated along `dim`

Bytes each chip sends, by the ring algorithms (Patarasuk & Yuan 2009, bandwidth-optimal: no
all-reduce sends less per chip), S the bytes of the full result:
all_reduce 2 (N-1)/N x S (a reduce-scatter and an all-gather), all_gather (N-1)/N x S."""

from __future__ import annotations

import torch


def dtype_of(name: str) -> torch.dtype:
    d = getattr(torch, name, None)
    if not isinstance(d, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return d


def cast(x: torch.Tensor, dtype: str) -> torch.Tensor:
    return x.to(dtype_of(dtype))


def quantize(x: torch.Tensor, scale: float | torch.Tensor, dtype: str, qmax: float) -> torch.Tensor:
    q = torch.clamp(x.float() / scale, -qmax, qmax)
    if dtype_of(dtype).is_floating_point:
        return q.to(dtype_of(dtype))
    return torch.round(q).to(dtype_of(dtype))


def qmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype == torch.int8:
        # float64 holds every int8 x int8 sum exactly while K < 2**53 / 127**2 (5.6e11): an int32 accumulator's result
        return (a.to(torch.float64) @ b.to(torch.float64)).to(torch.int32)
    return a.float() @ b.float()


def dequantize(acc: torch.Tensor, scale_a: float | torch.Tensor, scale_b: float | torch.Tensor) -> torch.Tensor:
    return acc.float() * (scale_a * scale_b)


def all_reduce(parts: list[torch.Tensor], chips: int) -> torch.Tensor:
    out = parts[0]
    for p in parts[1:]:
        out = out + p  # in the operands' dtype, in ring order, as the chips add them
    return out


def all_gather(parts: list[torch.Tensor], dim: int, chips: int) -> torch.Tensor:
    return torch.cat(parts, dim)


def all_reduce_bytes(nbytes: int, chips: int) -> int:
    """Bytes each chip sends in a ring all-reduce of an `nbytes` tensor."""
    return 2 * (chips - 1) * nbytes // chips


def all_gather_bytes(nbytes: int, chips: int) -> int:
    """Bytes each chip sends in a ring all-gather whose result has `nbytes`."""
    return (chips - 1) * nbytes // chips


COLLECTIVES = {"npu.all_reduce": all_reduce, "npu.all_gather": all_gather}
OPS = {"npu.cast": cast, "npu.quantize": quantize, "npu.qmm": qmm, "npu.dequantize": dequantize}
