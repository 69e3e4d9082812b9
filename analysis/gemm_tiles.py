"""Macro-tile padding of a GEMM kernel: why its measured FLOPs exceed 2*M*N*K.

A tiled GEMM computes whole output tiles: with an MT0 x MT1 macro tile, C[M, N] is computed as
ceil(M/MT0)*MT0 x ceil(N/MT1)*MT1, so the matrix pipe runs

    padded FLOPs = 2 * ceil(M/MT0)*MT0 * ceil(N/MT1)*MT1 * ceil(K/KT)*KT * batch

and the launch has ceil(M/MT0) * ceil(N/MT1) * batch tiles (workgroups, times the split-K
factor). The tile is read from the kernel name: Tensile / hipBLASLt 'MT256x224x64' (MT0 x MT1 x
DepthU), cuBLAS 'sgemm_128x64', CUTLASS 'gemm_f16_32x32_128x2'. BLAS libraries see PyTorch's
row-major C = A @ B as column-major C^T = B^T @ A^T, so the tile's first edge may lie along N:
both orientations are tried, and the one whose padded FLOPs equal the measured ones is the reason.
K is padded to the depth tile KT when the name gives one (Tensile's DepthU, 'MT256x224x64': 64); a
name without one is tried with KT = 1 (no K padding), then the power-of-two depths 4 to 64 (an
unrolled inner loop over K): the first that makes the FLOPs equal is reported.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

#: Relative difference within which measured FLOPs 'equal' the padded ones (counter exactness:
#: MFMA/MMA counts are exact; 1% leaves room for a few non-GEMM instructions on the same pipe).
MATCH = 0.01


@dataclass(frozen=True)
class Padding:
    """The tile padding that explains a GEMM launch's measured FLOPs."""

    tile: tuple[int, int]  # (along M, along N) as PyTorch sees the product
    dims: tuple[int, int, int, int]  # (batch, M, N, K)
    padded: tuple[int, int, int]  # (M, N, K) rounded up to whole tiles
    tiles: int  # ceil(M/tile_m) * ceil(N/tile_n) * batch
    flops: float  # 2 * padded M * padded N * K * batch

    def reason(self, model_flops: float) -> str:
        b, m, n, k = self.dims
        ratio = self.flops / model_flops if model_flops else float("nan")
        batch = f"{b} x " if b > 1 else ""
        pm, pn, pk = self.padded
        depth = f"K={k}" if pk == k else f"K={k} padded to {pk}"
        return (
            f"macro-tile padding: {batch}{m}x{n} output computed as {self.tiles // b} "
            f"tile{'s' if self.tiles // b != 1 else ''} of "
            f"{self.tile[0]}x{self.tile[1]} = {pm}x{pn} ({depth}): "
            f"2*{pm}*{pn}*{pk}{'*' + str(b) if b > 1 else ''} = {self.flops:.6g} FLOPs, "
            f"{ratio:.8g}x the model's 2*M*N*K"
        )


def depth_of(kernel: str) -> int | None:
    """Tensile's DepthU (the K tile) from 'MT256x224x64'; None for other names."""
    m = re.search(r"_MT\d+x\d+x(\d+)", kernel)
    return int(m[1]) if m else None


def tile_of(kernel: str) -> tuple[int, int] | None:
    """(MT0, MT1) from a GEMM kernel's name; None when the name carries no tile."""
    m = re.search(r"_MT(\d+)x(\d+)x\d+", kernel)  # Tensile / hipBLASLt
    if m is None:
        m = re.search(r"gemm_(?:[a-z0-9]+_)?(\d+)x(\d+)", kernel)  # cuBLAS sgemm_128x64, cutlass gemm_f16_32x32
    return (int(m[1]), int(m[2])) if m else None


def gemm_dims(op: str, shapes: str) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of a GEMM op from its recorded input shapes (the operand order of
    analysis.cost.compute: mm/addmm/bmm/baddbmm, linear, matmul); None when not a 2-operand GEMM."""
    try:
        s = json.loads(shapes) if shapes else None
    except ValueError:
        return None
    if not isinstance(s, list):
        return None
    name = op.split("::")[-1]
    try:
        if name in ("mm", "addmm", "bmm", "baddbmm"):
            o = 1 if name.startswith(("addmm", "baddbmm")) else 0
            a, b = s[o], s[o + 1]
            if len(a) == 3:
                return a[0], a[1], b[2], a[2]
            return 1, a[0], b[1], a[1]
        if name == "linear":
            x, w = s[0], s[1]
            return 1, math.prod(x[:-1]), w[0], x[-1]
        if name == "matmul" and len(s[0]) >= 2 and len(s[1]) == 2:
            return 1, math.prod(s[0][:-1]), s[1][1], s[0][-1]
    except (IndexError, TypeError):
        return None
    return None


def padding(kernel: str, op: str, shapes: str, measured_flops: float) -> Padding | None:
    """The tile padding of `kernel` (launched by `op` with `shapes`) whose padded FLOPs equal
    `measured_flops` (within MATCH); None when the name has no tile or no orientation fits."""
    tile, dims = tile_of(kernel), gemm_dims(op, shapes)
    if tile is None or dims is None or not measured_flops:
        return None
    b, m, n, k = dims
    depth = depth_of(kernel)
    for kt in (depth,) if depth else (1, 4, 8, 16, 32, 64):
        pk = math.ceil(k / kt) * kt
        for tm, tn in (tile, tile[::-1]):
            pm, pn = math.ceil(m / tm) * tm, math.ceil(n / tn) * tn
            flops = 2.0 * pm * pn * pk * b
            if abs(flops / measured_flops - 1) <= MATCH:
                return Padding((tm, tn), dims, (pm, pn, pk), math.ceil(m / tm) * math.ceil(n / tn) * b, flops)
    return None


def tiles_in_launch(kernel: str, grid: str, block: str, matrix_flops: float) -> str:
    """Without the op's shapes: what the launch's matrix FLOPs say per tile. rocprof's Grid_Size
    counts work-items, so workgroups = grid / block; with the tile from the name,
    K = FLOPs / (2 * workgroups * MT0 * MT1) (split-K would divide it)."""
    tile = tile_of(kernel)
    try:
        g, b = float(grid), float(block)
    except ValueError:
        return ""
    if tile is None or not b or not matrix_flops:
        return ""
    groups = g / b
    k = matrix_flops / (2 * groups * tile[0] * tile[1])
    return f"{groups:.0f} workgroups x {tile[0]}x{tile[1]} tiles, K = FLOPs / (2 * tiles * tile area) = {k:.6g}"
