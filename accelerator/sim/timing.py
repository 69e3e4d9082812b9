"""Timing of the simulated accelerator's units, as pure functions (issue 13, section 2).

Units: cycles (int) for the matrix and vector units, seconds (float) for DMA, collectives and
kernels. Every formula is in the docstring of its function and in docs/accelerator.md
("Simulator").

- Matrix unit: SCALE-Sim's closed forms (Samajdar et al., "A Systematic Methodology for
  Characterizing Scalability of DNN Accelerators using SCALE-Sim", ISPASS 2020, section III):
  a GEMM of M output rows, N output columns and reduction length K on an R x C array.
- Vector unit: elements / (lanes x ops per lane per cycle), plus the pipeline's fill.
- DMA: setup latency + bytes / bandwidth, the shared level's bandwidth split among the streams
  reading it at once; tile loops double-buffered.
- Collectives: the alpha-beta model (Thakur, Rabenseifner, Gropp, "Optimization of Collective
  Communication Operations in MPICH", IJHPCA 2005): alpha seconds per step, n bytes, B bytes/s.
- A kernel: dispatch + its busy time; the limiter is the largest part, and the stall of each
  other cause is what it adds over the compute time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DATAFLOWS = ("os", "ws", "is")
#: The closed form of each dataflow, as printed by `perf simulate --gemm`.
FORMULAS = {
    "os": "ceil(M/R)*ceil(N/C)*(K+R+C-2)-1",
    "ws": "ceil(K/R)*ceil(N/C)*(M+2R+C-2)-1",
    "is": "ceil(K/R)*ceil(M/C)*(N+2R+C-2)-1",
}
#: Vector pipeline depth in cycles (assumption: the order of a SIMD FMA pipeline's depth, e.g.
#: 4-6 stages on CPUs; a fill paid once per vector kernel).
VECTOR_PIPELINE_CYCLES = 8


def _positive(**dims: int) -> None:
    for name, v in dims.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")


def gemm_cycles(m: int, n: int, k: int, rows: int, cols: int, dataflow: str) -> int:
    """Cycles of a GEMM (M x K times K x N) on an R x C systolic array, SCALE-Sim's closed forms:

        os (output stationary):  ceil(M/R) * ceil(N/C) * (K + R + C - 2) - 1
        ws (weight stationary):  ceil(K/R) * ceil(N/C) * (M + 2R + C - 2) - 1
        is (input stationary):   ceil(K/R) * ceil(M/C) * (N + 2R + C - 2) - 1

    Each fold maps one R x C block of the stationary operand; a fold streams the moving operand
    through (K, M or N cycles) plus the fill and drain of the array (R + C - 2, plus R to load the
    stationary block in ws and is)."""
    _positive(M=m, N=n, K=k, R=rows, C=cols)
    c = math.ceil
    if dataflow == "os":
        return c(m / rows) * c(n / cols) * (k + rows + cols - 2) - 1
    if dataflow == "ws":
        return c(k / rows) * c(n / cols) * (m + 2 * rows + cols - 2) - 1
    if dataflow == "is":
        return c(k / rows) * c(m / cols) * (n + 2 * rows + cols - 2) - 1
    raise ValueError(f"dataflow must be one of {', '.join(DATAFLOWS)}, not {dataflow!r}")


def pipelined_gemm_cycles(m: int, n: int, k: int, rows: int, cols: int, dataflow: str, count: int = 1) -> int:
    """Cycles of `count` GEMMs (M x K times K x N) run back to back on an R x C array whose
    stationary block is double-buffered: the next fold's block shifts in (R cycles) while the
    current fold streams, and consecutive folds stream back to back, so the fill and drain of the
    array are paid once (the TPU's MXU holds "one 64 KiB tile of weights plus one for
    double-buffering (to hide the 256 cycles it takes to shift a tile in)", Jouppi et al., ISCA
    2017, section 2). With F = count x folds and s the stream of a fold:

        ws: R + (F - 1) x max(s, R) + s + (R + C - 2) - 1,  folds ceil(K/R) ceil(N/C), s = M
        is: R + (F - 1) x max(s, R) + s + (R + C - 2) - 1,  folds ceil(K/R) ceil(M/C), s = N
        os:     (F - 1) x max(s, R) + s + (R + C - 2) - 1,  folds ceil(M/R) ceil(N/C), s = K
            (its outputs drain, R cycles, into a second accumulator bank while the next fold runs)

    One fold is SCALE-Sim's closed form exactly (`gemm_cycles`); more folds cost less, never
    more: a fold waits for the next block's R-cycle load only when its stream is shorter (a
    decode GEMM, M = batch < R, runs at M / R of the array)."""
    _positive(M=m, N=n, K=k, R=rows, C=cols, count=count)
    c = math.ceil
    folds, stream, load = {
        "os": (c(m / rows) * c(n / cols), k, 0),
        "ws": (c(k / rows) * c(n / cols), m, rows),
        "is": (c(k / rows) * c(m / cols), n, rows),
    }.get(dataflow, (0, 0, 0))
    if not folds:
        raise ValueError(f"dataflow must be one of {', '.join(DATAFLOWS)}, not {dataflow!r}")
    return load + (count * folds - 1) * max(stream, rows) + stream + rows + cols - 2 - 1


def array_cycles(m: int, n: int, k: int, rows: int, cols: int, dataflow: str, buffers: int = 1, count: int = 1) -> int:
    """`count` GEMMs on one array: SCALE-Sim's `count x gemm_cycles` with a single-buffered
    stationary block (`buffers` 1), `pipelined_gemm_cycles` with a double-buffered one (2)."""
    if buffers >= 2:
        return pipelined_gemm_cycles(m, n, k, rows, cols, dataflow, count)
    return count * gemm_cycles(m, n, k, rows, cols, dataflow)


def gemm_utilisation(m: int, n: int, k: int, rows: int, cols: int, dataflow: str) -> float:
    """Share of the array's MACs doing work: M x N x K / (cycles x R x C)."""
    return m * n * k / (gemm_cycles(m, n, k, rows, cols, dataflow) * rows * cols)


def conv_gemm_shape(
    batch: int,
    in_channels: int,
    out_channels: int,
    out_h: int,
    out_w: int,
    kernel_h: int,
    kernel_w: int,
    groups: int = 1,
) -> tuple[int, int, int]:
    """The im2col GEMM of a convolution, per group (SCALE-Sim's mapping): M = batch x out_h x
    out_w (output pixels), N = out_channels / groups (filters), K = in_channels / groups x
    kernel_h x kernel_w (the window)."""
    _positive(batch=batch, in_channels=in_channels, out_channels=out_channels, out_h=out_h, out_w=out_w)
    _positive(kernel_h=kernel_h, kernel_w=kernel_w, groups=groups)
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"groups={groups} must divide in_channels={in_channels} and out_channels={out_channels}")
    return batch * out_h * out_w, out_channels // groups, in_channels // groups * kernel_h * kernel_w


def vector_cycles(elements: int, lanes: int, ops_per_lane_cycle: float, pipeline: int = VECTOR_PIPELINE_CYCLES) -> int:
    """Cycles of an elementwise op class on the vector unit:
    ceil(elements / (lanes x ops per lane per cycle)) + pipeline fill. Zero elements cost 0."""
    if ops_per_lane_cycle <= 0:
        raise ValueError("the vector unit has no rate for this dtype and op class")
    if elements <= 0:
        return 0
    return math.ceil(elements / (lanes * ops_per_lane_cycle)) + pipeline


def stream_bandwidth(per_stream: float, shared: float, streams: int) -> float:
    """Bandwidth one of `streams` concurrent streams gets from a level of `shared` bytes/s whose
    own engines give at most `per_stream` bytes/s: min(per_stream, shared / streams)."""
    _positive(streams=streams)
    return min(per_stream, shared / streams)


def dma_seconds(nbytes: float, bandwidth: float, setup_s: float) -> float:
    """One transfer: setup latency + bytes / bandwidth (0 for no bytes)."""
    return 0.0 if nbytes <= 0 else setup_s + nbytes / bandwidth


def contention_seconds(nbytes: float, per_stream: float, shared: float, streams: int) -> float:
    """What sharing costs one stream of `nbytes`: nbytes / stream_bandwidth(.., streams) -
    nbytes / stream_bandwidth(.., 1). Two streams on a level that one could fill: nbytes / shared."""
    return nbytes / stream_bandwidth(per_stream, shared, streams) - nbytes / stream_bandwidth(per_stream, shared, 1)


@dataclass(frozen=True)
class TileLoop:
    """A double-buffered tile loop (seconds): `total` = `prologue` (load of tile 0) + sum over
    tiles of max(compute_i, load_{i+1}, store_{i-1}) + `epilogue` (store of the last tile);
    `stalls` the time each step waited beyond its compute, by the cause that bound it."""

    total: float
    compute: float
    prologue: float
    epilogue: float
    stalls: Mapping[str, float]


def double_buffered(
    compute: Sequence[float], load: Sequence[float], store: Sequence[float], one_queue: bool = False
) -> TileLoop:
    """Compute on tile i overlaps the load of tile i+1 and the store of tile i-1:
    total = load_0 + sum_i max(compute_i, load_{i+1}, store_{i-1}) + store_{n-1}; with
    `one_queue` the load and the store share one DMA queue (or one level's bandwidth) and follow
    each other: max(compute_i, load_{i+1} + store_{i-1})."""
    n = len(compute)
    if not (len(load) == len(store) == n):
        raise ValueError("compute, load and store need one entry per tile")
    if n == 0:
        return TileLoop(0.0, 0.0, 0.0, 0.0, {"load": 0.0, "store": 0.0})
    stalls = {"load": 0.0, "store": 0.0}
    body = 0.0
    for i in range(n):
        nxt = load[i + 1] if i + 1 < n else 0.0
        prev = store[i - 1] if i > 0 else 0.0
        step = max(compute[i], nxt + prev) if one_queue else max(compute[i], nxt, prev)
        body += step
        if step > compute[i]:
            stalls["load" if nxt >= prev else "store"] += step - compute[i]
    stalls["load"] += load[0]
    stalls["store"] += store[-1]
    return TileLoop(load[0] + body + store[-1], float(sum(compute)), load[0], store[-1], stalls)


def tile_intervals(
    compute: Sequence[float], load: Sequence[float], store: Sequence[float], one_queue: bool = False
) -> list[tuple[int, str, float, float]]:
    """(tile, 'compute'|'load'|'store', start, duration) of every step of `double_buffered`'s
    loop, in its order: load_0 at 0; step i starts at s_i = load_0 + sum_{j<i} step_j and runs
    compute_i, the load of tile i+1 and the store of tile i-1 from s_i (with `one_queue` the
    store after that load); the last store at load_0 + body. The last end is its `total`."""
    n = len(compute)
    if n == 0:
        return []
    out = [(0, "load", 0.0, load[0])]
    at = load[0]
    for i in range(n):
        nxt = load[i + 1] if i + 1 < n else 0.0
        prev = store[i - 1] if i > 0 else 0.0
        out.append((i, "compute", at, compute[i]))
        if i + 1 < n:
            out.append((i + 1, "load", at, nxt))
        if i > 0:
            out.append((i - 1, "store", at + nxt if one_queue else at, prev))
        at += max(compute[i], nxt + prev) if one_queue else max(compute[i], nxt, prev)
    out.append((n - 1, "store", at, store[-1]))
    return out


def ring_all_reduce(nbytes: float, p: int, bandwidth: float, alpha: float) -> float:
    """Ring all-reduce of n bytes over p chips: 2(p-1)/p x n / B + 2(p-1) x alpha
    (a reduce-scatter then an all-gather, p-1 steps each, n/p bytes per step)."""
    _positive(p=p)
    return 2 * (p - 1) / p * nbytes / bandwidth + 2 * (p - 1) * alpha


def tree_all_reduce(nbytes: float, p: int, bandwidth: float, alpha: float) -> float:
    """Binary-tree all-reduce (reduce to the root, then broadcast), unpipelined:
    2 x ceil(log2 p) x (alpha + n / B)."""
    _positive(p=p)
    return 2 * math.ceil(math.log2(p)) * (alpha + nbytes / bandwidth) if p > 1 else 0.0


def all_gather(nbytes: float, p: int, bandwidth: float, alpha: float) -> float:
    """Ring all-gather producing n bytes on each chip: (p-1)/p x n / B + (p-1) x alpha."""
    _positive(p=p)
    return (p - 1) / p * nbytes / bandwidth + (p - 1) * alpha


def reduce_scatter(nbytes: float, p: int, bandwidth: float, alpha: float) -> float:
    """Ring reduce-scatter of n bytes on each chip: (p-1)/p x n / B + (p-1) x alpha."""
    _positive(p=p)
    return (p - 1) / p * nbytes / bandwidth + (p - 1) * alpha


def all_to_all(nbytes: float, p: int, bandwidth: float, alpha: float, topology: str = "switch") -> float:
    """All-to-all, each chip holding n bytes, n/p for each chip:

    - switch (one port of B per chip), pairwise exchange: (p-1) x alpha + (p-1)/p x n / B;
    - fully_connected (a link of B to every other chip, all at once): alpha + n/p / B;
    - ring (bidirectional, B per direction): as switch, but no faster than its bisection allows:
      p/2 x p/2 x n/p bytes cross each way over 2 links, max(.., (p-1) alpha + p x n / (8 B))."""
    _positive(p=p)
    if p == 1:
        return 0.0
    port = (p - 1) * alpha + (p - 1) / p * nbytes / bandwidth
    if topology == "fully_connected":
        return alpha + nbytes / p / bandwidth
    if topology == "ring":
        return max(port, (p - 1) * alpha + p * nbytes / (8 * bandwidth))
    return port


def overlapped(compute_s: float, comm_s: float) -> tuple[float, float]:
    """Communication overlapped with compute: (total, exposed communication), where
    exposed = max(0, comm - compute) and total = compute + exposed: hidden up to the compute time."""
    exposed = max(0.0, comm_s - compute_s)
    return compute_s + exposed, exposed


LIMITERS = ("compute", "memory", "dma_latency", "dispatch", "communication")


@dataclass(frozen=True)
class KernelTime:
    """One kernel's time (seconds) and what bound it.

    total = dispatch + dma_latency + max(compute, memory time of each level) + exposed comm.
    `limiter`: 'compute', 'memory:<level>', 'dma_latency', 'dispatch' or 'communication', the
    largest of compute, each level's time, dma_latency, dispatch and exposed communication.
    `stalls`: seconds beyond compute by cause (memory:<level>, dma_latency, dispatch,
    communication); compute + sum(stalls) = total."""

    total: float
    compute: float
    limiter: str
    stalls: Mapping[str, float] = field(default_factory=dict)

    def stall_cycles(self, clock_hz: float) -> dict[str, int]:
        """Stalls in cycles of `clock_hz`, rounded."""
        return {k: round(v * clock_hz) for k, v in self.stalls.items()}


def kernel_time(
    compute_s: float,
    memory_s: Mapping[str, float],
    dma_latency_s: float = 0.0,
    dispatch_s: float = 0.0,
    comm_s: float = 0.0,
    comm_overlapped: bool = True,
) -> KernelTime:
    """Compose a kernel from its parts (see KernelTime). `memory_s`: level -> bytes / bandwidth."""
    level, mem = max(memory_s.items(), key=lambda kv: kv[1], default=("", 0.0))
    busy = max(compute_s, mem)
    if comm_overlapped:
        _, exposed = overlapped(busy, comm_s)
    else:
        exposed = comm_s
    stalls = {
        f"memory:{level}": max(0.0, mem - compute_s) if level else 0.0,
        "dma_latency": dma_latency_s,
        "dispatch": dispatch_s,
        "communication": exposed,
    }
    stalls = {k: v for k, v in stalls.items() if v > 0}
    parts = {
        "compute": compute_s,
        **({f"memory:{level}": mem} if level else {}),
        "dma_latency": dma_latency_s,
        "dispatch": dispatch_s,
        "communication": exposed,
    }
    limiter = max(parts, key=lambda k: parts[k])
    return KernelTime(dispatch_s + dma_latency_s + busy + exposed, compute_s, limiter, stalls)


def chip_gemm_cycles(
    m: int,
    n: int,
    k: int,
    rows: int,
    cols: int,
    dataflow: str,
    cores: int,
    rate: float = 1.0,
    buffers: int = 1,
    count: int = 1,
) -> int:
    """A GEMM spread over a chip's cores, output columns split: each core runs M x ceil(N/cores)
    x K, all at once, so cycles = ceil(array_cycles(M, ceil(N/cores), K, buffers, count) / rate),
    where rate = macs_per_cycle[dtype] / (R x C) (2 for int8 on an array doing two int8 MACs per
    PE a cycle); `count` such GEMMs back to back (1: gemm_cycles, SCALE-Sim's form, when single-buffered)."""
    _positive(cores=cores)
    return math.ceil(array_cycles(m, math.ceil(n / cores), k, rows, cols, dataflow, buffers, count) / rate)


def parse_dims(text: str, count: int, what: str) -> tuple[int, ...]:
    """'64x128x32' -> (64, 128, 32); ValueError naming `what` when it is not `count` positive integers."""
    parts = text.lower().replace("*", "x").split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if len(dims) != count or min(dims) < 1:
        shape = "x".join("MNK"[:count] if count == 3 else "RC")
        raise ValueError(f"{what} {text!r}: expected {shape}, positive integers (e.g. {'x'.join(['64'] * count)})")
    return dims


def gemm_report(m: int, n: int, k: int, rows: int, cols: int, dataflow: str) -> dict:
    """What `perf simulate --gemm` prints: compute_cycles (the closed form of `dataflow`),
    ideal_cycles = ceil(M x N x K / (R x C)) (every PE busy every cycle), utilisation =
    M x N x K / (compute_cycles x R x C), folds (stationary blocks mapped), and the formula."""
    cycles = gemm_cycles(m, n, k, rows, cols, dataflow)
    c = math.ceil
    folds = {"os": c(m / rows) * c(n / cols), "ws": c(k / rows) * c(n / cols), "is": c(k / rows) * c(m / cols)}[
        dataflow
    ]
    return {
        "compute_cycles": cycles,
        "utilisation": m * n * k / (cycles * rows * cols),
        "ideal_cycles": c(m * n * k / (rows * cols)),
        "folds": folds,
        "macs": m * n * k,
        "formula": FORMULAS[dataflow],
        "dataflow": dataflow,
        "gemm": {"M": m, "N": n, "K": k},
        "array": {"rows": rows, "cols": cols},
    }


COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def collective_seconds(kind: str, nbytes: float, p: int, bandwidth: float, alpha: float, topology: str) -> float:
    """A collective of `kind` over p chips of `topology` (accelerator/hardware.TOPOLOGIES):
    all_reduce on a ring (or a 2-D mesh, walked as a ring) is the ring all-reduce; on a switch or
    fully connected chips the faster of ring and tree (small messages: the tree's log2 p
    latency steps win); all_gather and reduce_scatter are the ring forms; all_to_all as
    `all_to_all` for the topology. One chip ('single'): 0."""
    if topology == "single" or p == 1:
        return 0.0
    if kind == "all_reduce":
        ring = ring_all_reduce(nbytes, p, bandwidth, alpha)
        return ring if topology in ("ring", "mesh2d") else min(ring, tree_all_reduce(nbytes, p, bandwidth, alpha))
    if kind == "all_gather":
        return all_gather(nbytes, p, bandwidth, alpha)
    if kind == "reduce_scatter":
        return reduce_scatter(nbytes, p, bandwidth, alpha)
    if kind == "all_to_all":
        return all_to_all(nbytes, p, bandwidth, alpha, topology)
    raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, not {kind!r}")
