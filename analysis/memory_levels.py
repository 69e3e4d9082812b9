"""Bytes each unit moves at each memory level (the hierarchical roofline: Yang et al. 2020).

Levels are a HardwareSpec's `memory`, outermost first (HBM, L2, shared memory). The traffic at
level i is what crosses from level i toward the compute units; what can stay resident inside
depends on the capacity of the next level in, S (per instance: capacity / partitions, in
elements of the unit's dtype), and P = that level's partitions (one shared memory per SM):

    streaming ops (everything but GEMMs):  bytes_i = compulsory bytes (inputs read + outputs
        written once; each byte passes every level once)
    GEMM (C = A @ B, 2*M*N*K FLOPs):       bytes_i = max(compulsory, e * (FLOPs / sqrt(S) - 2*S*P))

The GEMM term is the I/O lower bound for classical matrix multiplication with a fast memory of S
elements, 2*M*N*K/sqrt(S) - 2*S (T. M. Smith, B. Lowery, J. Langou, R. A. van de Geijn, "A
Tight I/O Lower Bound for Matrix Multiplication", arXiv:1702.02017, 2019; after Hong and Kung
1981), summed over the P instances that each hold S elements; e = bytes per element. It holds
for any schedule, so the floor it gives is still a floor. The innermost level (no capacity
known inside it) and levels whose inner capacity is unknown get the compulsory bytes.

    t_memory = max over levels of bytes_i / bandwidth_i;  the level attaining it is `memory_level`.

On a CPU, caches keep data between ops (the producer's output sits in the cache the consumer
reads), so an op whose compulsory bytes fit a cache level's capacity puts no bytes on the levels
outside it: bytes_outer = 0 and its floor is bytes / bandwidth of the innermost level holding
them. On a GPU the L2 is shared by every SM and other kernels' traffic evicts it, so the
outermost level keeps every op's compulsory bytes; an op beating that floor is flagged above its
ceiling (analysis.ceiling), cause "data served from a cache".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.model.dtypes import ELEMENT_BYTES
from profiler.model.hardware import HardwareSpec


def level_bytes(u: pd.DataFrame, spec: HardwareSpec) -> np.ndarray:
    """Bytes at each of `spec.memory`'s levels, shape (len(u), levels); NaN where the cost is unknown.

    Reads u's columns `bytes` (compulsory, byte), `flops` (dense, FLOP), `family`, `dtype`.
    """
    compulsory = u["bytes"].to_numpy(dtype=np.float64)
    out = np.repeat(compulsory[:, None], len(spec.memory), axis=1)
    if spec.kind == "cpu":
        _resident(out, compulsory, spec)
    gemm = (u["family"] == "gemm").to_numpy()
    if not gemm.any():
        return out
    e = u["dtype"].map(ELEMENT_BYTES).to_numpy(dtype=np.float64)  # NaN for unknown dtypes
    flops = u["flops"].to_numpy(dtype=np.float64)
    for i in range(len(spec.memory) - 1):
        inner = spec.memory[i + 1]
        if not inner.capacity_bytes:
            continue
        s = inner.capacity_bytes / inner.partitions / e  # elements one instance holds
        with np.errstate(invalid="ignore"):
            bound = e * (flops / np.sqrt(s) - 2 * s * inner.partitions)
        take = gemm & ~np.isnan(bound) & (bound > compulsory)
        out[take, i] = bound[take]
    return out


def _resident(out: np.ndarray, compulsory: np.ndarray, spec: HardwareSpec) -> None:
    """On a CPU, an op whose working set (its compulsory bytes) fits a cache level may find it
    all there (its producer, on the same cores, just wrote it): the levels outside that cache
    carry none of its bytes (set to 0 in `out`, in place). The innermost level that holds it wins."""
    for i in range(len(spec.memory) - 1, 0, -1):  # innermost first
        cap = spec.memory[i].capacity_bytes
        if not cap:
            continue
        fits = compulsory <= cap
        out[fits, :i] = 0.0
        compulsory = np.where(fits, np.inf, compulsory)  # settled: outer levels must not touch it again


def memory_floor(u: pd.DataFrame, spec: HardwareSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t_memory in ns, the binding level's name, bytes per level) for the units of one device."""
    per_level = level_bytes(u, spec)
    bw = np.array([m.bandwidth for m in spec.memory])
    times = per_level / bw * 1e9
    filled = np.where(np.isnan(times), -1.0, times)
    worst = filled.argmax(axis=1) if len(u) else np.zeros(0, dtype=np.int64)
    t = np.where(np.isnan(times).all(axis=1), np.nan, filled.max(axis=1)) if len(u) else np.zeros(0)
    names = np.array([m.name for m in spec.memory], dtype=object)[worst]
    names[np.isnan(t)] = ""
    return t, names, per_level
