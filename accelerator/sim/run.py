"""Run a compiled `Program` on the simulated accelerator: its scheduled kernels in order on one
chip (with `program.chips` > 1, the same kernels on every chip, each collective timed over the
topology), each kernel timed from accelerator/sim/timing.py. Formulas (docs/accelerator.md,
"Simulating a program"):

    matrix kernel: sum over its GEMMs of chip_gemm_cycles(M, N, K) / clock with the preset's
                   stationary_buffers (1: SCALE-Sim's closed form per GEMM; 2: the folds of all
                   `batch` GEMMs pipelined, timing.pipelined_gemm_cycles), or of the transposed
                   GEMM (N x M) if the array finishes that first, or with the batch spread over
                   the cores, ceil(batch / cores) GEMMs in turn per array (a GEMM the legaliser
                   put on the vector unit: 2 x batch x M x N x K add_mul ops there)
                   (mm/addmm/qmm: M x K times K x N; bmm: batch x GEMM; SDPA per batch x head:
                   QK^T (L x S, K=D) and PV (L x D, K=S), its softmax on the vector unit;
                   convolution: its im2col GEMM per group, M = batch x output pixels, N =
                   Cout / groups, K = Cin / groups x window, the bias add on the vector unit);
                   its other ops (the fused epilogue) on the vector unit alongside:
                   compute = max(matrix, vector)
    vector kernel: sum over its ops of vector_cycles(ceil(elements / cores), lanes,
                   ops_per_cycle[dtype][class]) / clock, class exp (exp, sigmoid, silu, gelu,
                   tanh, softmax, erf), reciprocal (rsqrt, sqrt, div, reciprocal), else add_mul;
                   elements: the op's largest tensor (a reduction reads more than it writes)
    memory:        accelerator/sim/dma.py: each transfer (program.transfers) of the kernel split
                   over the cores, each core's share at min(engines x DMA bandwidth, level
                   bandwidth / cores) (contention: what the sharing adds), summed (one DMA
                   queue), labelled by the level with the most time; setup waves of
                   ceil(transfers / engines), the first exposed, the later ones in the memory time
    busy:          tiled kernels (kernel.tile, T > 1 output tiles): dma.tile_loop, a double-
                   buffered loop on one DMA queue; untiled: max(compute, memory) (streamed)
    kernel:        dispatch + the exposed DMA setup + busy + communication (collectives:
                   timing.collective_seconds)
    limiter:       the largest of compute, memory (memory:<level>, streaming), dma_latency (every
                   setup), dispatch, communication; stalls: busy - compute as memory:<level>,
                   and the others.
    timeline:      a kernel starts once the kernels it reads from have ended and its resource
                   is free: the cores, or for a collective the chip's links, so a collective
                   overlaps the kernels after it that do not need its result.

Host kernels (run by the host, not the accelerator) and kernels of views only take no time here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from accelerator.hardware import AccelSpec
from accelerator.sim.dma import kernel_memory, streaming_seconds, tile_loop, transfer_level
from accelerator.sim.timing import (
    KernelTime,
    array_cycles,
    chip_gemm_cycles,
    collective_seconds,
    vector_cycles,
)

#: torch dtype name -> the accelerator's dtype names (accelerator/presets).
DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int8": "int8", "float8_e4m3fn": "fp8"}
ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
EXP_OPS = {"exp", "sigmoid", "silu", "gelu", "tanh", "softmax", "_softmax", "log_softmax", "_log_softmax", "erf"}
RECIPROCAL_OPS = {"rsqrt", "sqrt", "div", "reciprocal"}
#: ops that move or relabel data only: no vector work (the DMA or the addressing does them).
NO_COMPUTE = {
    "view", "_unsafe_view", "reshape", "permute", "t", "transpose", "expand", "slice", "select", "unsqueeze",
    "squeeze", "alias", "contiguous", "clone", "cat", "embedding", "index", "index_copy_", "index_put_",
    "sym_size", "getitem", "npu.cast", "_to_copy", "copy_", "detach", "split", "split_with_sizes", "stack",
}  # fmt: skip
MATMULS = {"aten.mm.default": 0, "aten.addmm.default": 1, "npu.qmm": 0, "aten.bmm.default": 0}
SDPA = "aten.scaled_dot_product_attention.default"
CONVOLUTION = "aten.convolution.default"
COLLECTIVE_OPS = {"npu.all_reduce": "all_reduce", "npu.all_gather": "all_gather"}


@dataclass(frozen=True)
class SimTransfer:
    """One DMA transfer as simulated: `start_s`/`dur_s` seconds, `route` 'src->dst'."""

    value: str
    route: str
    bytes: int
    start_s: float
    dur_s: float


@dataclass(frozen=True)
class SimKernel:
    """One kernel as simulated on one chip. `time`: its KernelTime (total, compute, limiter,
    stalls in seconds); `flops` (2 per MAC, 1 per vector op per element), `hbm_read`/`hbm_written`
    its HBM bytes, `shared_bytes` its shared-memory bytes; `family` the cost-model family
    (gemm, attention, reduction, elementwise); `matrix_s`/`vector_s` the units' busy seconds."""

    name: str
    unit: str
    ops: tuple[str, ...]
    targets: tuple[str, ...]
    chip: int
    start_s: float
    time: KernelTime
    flops: float
    hbm_read: int
    hbm_written: int
    shared_bytes: int
    dtype: str
    family: str
    matrix_s: float
    vector_s: float
    transfers: tuple[SimTransfer, ...] = ()
    collective: str = ""
    comm_elements: int = 0  # elements of the collective's message (its result), 0 for other kernels
    contention_s: float = 0.0  # of its memory time, what sharing HBM/shared among the cores adds (dma.py)
    deps: tuple[int, ...] = ()  # the kernels (positions in its chip's list) whose results it reads
    after: int = -1  # the kernel whose end it started at (-1: at 0), on its resource or of its deps
    resource: str = "cores"  # what it occupies: 'cores' (compute and DMA), 'link' (a collective)
    shared_live_bytes: int = 0  # bytes in shared memory while it runs: allocation's, its working set's
    local_bytes: int = 0  # its tiles' working set in each core's local memory (tiling's local_bytes)
    tile_loop: tuple = ()  # tiled: (tiles, compute_s, load_s, store_s, n_loads, n_stores), dma.tile_schedule's input

    @property
    def end_s(self) -> float:
        return self.start_s + self.time.total


@dataclass(frozen=True)
class SimRun:
    """A simulated program: `kernels` in run order (chip 0's, then each other chip's), `total_s`
    the wall time of one chip (all chips run the same kernels at once)."""

    accel: AccelSpec
    program_name: str
    chips: int
    kernels: tuple[SimKernel, ...]
    total_s: float
    by_limiter: Mapping[str, float] = field(default_factory=dict)  # limiter -> seconds of chip 0's kernels


def _base(target: str) -> str:
    """'aten.mm.default' -> 'mm'; 'npu.cast' stays."""
    if target.startswith("npu."):
        return target
    parts = target.split(".")
    return parts[1] if len(parts) >= 2 else target


def _hint(types: Mapping, v: object) -> tuple[int, ...]:
    name = getattr(v, "name", None)
    t = types.get(name) if name else None
    return tuple(getattr(t, "hint", ()) or ())


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 1


def _gemms(op, types: Mapping) -> list[tuple[int, int, int, int]]:
    """(batch, M, N, K) of each GEMM `op` computes (module docstring); [] for other ops."""
    out = getattr(op.type, "hint", ())
    if op.target in MATMULS:
        a = _hint(types, op.args[MATMULS[op.target]])
        if len(out) < 2 or len(a) < 2:
            return []
        return [(_numel(out[:-2]), out[-2], out[-1], a[-1])]
    if op.target == SDPA:
        q, k = _hint(types, op.args[0]), _hint(types, op.args[1])
        if len(q) < 2 or len(k) < 2:
            return []
        batch, lq, d, s = _numel(q[:-2]), q[-2], q[-1], k[-2]
        return [(batch, lq, s, d), (batch, lq, d, s)]
    if op.target == CONVOLUTION:
        return [_conv_gemm(op, types, out)] if len(out) >= 3 else []
    return []


def _conv_gemm(op, types: Mapping, out: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(groups, M, N, K) of a convolution's im2col GEMM, one per group (timing.conv_gemm_shape's
    mapping, any number of spatial dims): M = batch x output pixels, N = Cout / groups,
    K = Cin / groups x window. A transposed convolution is the GEMM of its input pixels with the
    weight, scattered after (col2im): M = batch x input pixels, N = Cout / groups x window,
    K = Cin / groups. aten.convolution(input, weight, bias, stride, padding, dilation,
    transposed, output_padding, groups)."""
    x, w = _hint(types, op.args[0]), _hint(types, op.args[1])
    groups = int(op.args[8]) if len(op.args) > 8 else 1
    transposed = bool(op.args[6]) if len(op.args) > 6 else False
    window = _numel(w[2:])
    if transposed:  # weight (Cin, Cout / groups, *window)
        return groups, x[0] * _numel(x[2:]), w[1] * window, w[0] // groups
    return groups, out[0] * _numel(out[2:]), out[1] // groups, w[1] * window  # weight (Cout, Cin / groups, *window)


def _vector_elements(op, types: Mapping) -> tuple[int, str]:
    """(elements, op class) of one op on the vector unit; (0, '') for ops without vector work."""
    base = _base(op.target)
    if base in NO_COMPUTE or base.rstrip("_") in NO_COMPUTE or op.target in COLLECTIVE_OPS:
        return 0, ""
    sizes = [_numel(_hint(types, r)) for r in op.args if hasattr(r, "name")]
    sizes.append(_numel(getattr(op.type, "hint", ()) or ()))
    cls = "exp" if base in EXP_OPS else "reciprocal" if base in RECIPROCAL_OPS else "add_mul"
    return max(sizes), cls


def _dtype(ops: list, types: Mapping) -> str:
    """The kernel's compute dtype: its GEMM's A operand's, else its last op's result's."""
    for op in ops:
        if op.target in MATMULS or op.target == SDPA:
            t = types.get(getattr(op.args[MATMULS.get(op.target, 0)], "name", ""))
            return DTYPES.get(getattr(t, "dtype", ""), "fp32")
    for op in reversed(ops):
        d = DTYPES.get(getattr(op.type, "dtype", ""))
        if d:
            return d
    return "fp32"


def _array_cycles(accel: AccelSpec, m: int, n: int, k: int, dtype: str, count: int = 1) -> int:
    """Cycles of `count` GEMMs in turn on the chip's arrays, mapped as given or transposed (C^T =
    B^T A^T: M and N swap), whichever finishes first; both split the N x M output's larger side
    over the cores (timing.chip_gemm_cycles splits N): a compiler's choice for a GEMV (M = 1),
    which a weight-stationary array otherwise runs one row per fold. A double-buffered array
    (`stationary_buffers: 2`) pipelines the folds of all `count` GEMMs (timing.array_cycles)."""
    mx = accel.matrix
    rate = mx.macs_per_cycle[dtype] / (mx.rows * mx.cols)
    buf = mx.stationary_buffers
    as_is = chip_gemm_cycles(m, n, k, mx.rows, mx.cols, mx.dataflow, accel.cores, rate, buf, count)
    transposed = chip_gemm_cycles(n, m, k, mx.rows, mx.cols, mx.dataflow, accel.cores, rate, buf, count)
    split_rows = array_cycles(math.ceil(n / accel.cores), m, k, mx.rows, mx.cols, mx.dataflow, buf, count)
    return min(as_is, transposed, math.ceil(split_rows / rate))


def _batched_cycles(accel: AccelSpec, batch: int, m: int, n: int, k: int, dtype: str) -> int:
    """`batch` independent GEMMs (bmm, attention heads): each on all cores in turn
    (`_array_cycles(.., count=batch)`), or whole GEMMs spread over the cores (`ceil(batch /
    cores)` GEMMs in turn on one array, as given or transposed), whichever finishes first."""
    mx = accel.matrix
    rate = mx.macs_per_cycle[dtype] / (mx.rows * mx.cols)
    rounds, buf = math.ceil(batch / accel.cores), mx.stationary_buffers
    one_core = min(
        array_cycles(m, n, k, mx.rows, mx.cols, mx.dataflow, buf, rounds),
        array_cycles(n, m, k, mx.rows, mx.cols, mx.dataflow, buf, rounds),
    )
    return min(_array_cycles(accel, m, n, k, dtype, batch), math.ceil(one_core / rate))


def _vector_seconds(accel: AccelSpec, elements: int, cls: str, dtype: str) -> float:
    rates = accel.vector.ops_per_cycle.get(dtype) or accel.vector.ops_per_cycle.get("fp32") or {}
    rate = rates.get(cls) or rates.get("add_mul", 1.0)
    per_core = math.ceil(elements / accel.cores)
    return vector_cycles(per_core, accel.vector.lanes, rate) / accel.clock_hz


def _tiles(kernel, ops: list) -> int:
    """Output tiles of a tiled kernel: prod over its output dims of ceil(dim / tile)."""
    if not kernel.tile:
        return 1
    out = next((op.type.hint for op in ops if op.target in MATMULS), None) or getattr(ops[-1].type, "hint", ())
    m = out[-2] if len(out) >= 2 else 1
    n = out[-1] if out else 1
    t = kernel.tile
    return max(1, math.ceil(m / t["m"]) if t.get("m") else 1) * max(1, math.ceil(n / t["n"]) if t.get("n") else 1)


def _live_bytes(program, level: str) -> list[int]:
    """Bytes placed in `level` live at each kernel index (allocation's live ranges, inclusive)."""
    delta = [0] * (len(program.kernels) + 1)
    for p in program.placement.values():
        if p.level == level and 0 <= p.live[0] <= p.live[1] < len(program.kernels):
            delta[p.live[0]] += p.size
            delta[p.live[1] + 1] -= p.size
    out, at = [], 0
    for d in delta[:-1]:
        at += d
        out.append(at)
    return out


def simulate(program, accel: AccelSpec) -> SimRun:
    """Every scheduled kernel of `program` timed on `accel` (module docstring), chip by chip."""
    types = program.types()
    producers = program.producers()
    loads: dict[int, list] = {}
    stores: dict[int, list] = {}
    for t in program.transfers:
        (loads.setdefault(t.before, []) if t.before >= 0 else stores.setdefault(t.after, [])).append(t)
    chips = max(1, int(program.chips))
    link = accel.link
    per_chip: list[SimKernel] = []
    shared_live = _live_bytes(program, "shared")
    timeline = Timeline()
    seen: dict[str, int] = {}
    for idx, k in enumerate(program.kernels):
        ops = [producers[n] for n in k.ops if n in producers]
        if k.unit == "host" or not ops:
            timeline.skip(k)
            continue
        dtype = _dtype(ops, types)
        matrix_s = vector_s = flops = 0.0
        family = "elementwise"
        collective, comm_s, comm_elements = "", 0.0, 0
        mx = accel.matrix
        for op in ops:
            gemms = _gemms(op, types)
            if gemms:
                on_matrix = k.unit == "matrix" and mx.macs_per_cycle.get(dtype, 0) > 0
                for batch, m, n, kk in gemms:
                    flops += 2 * batch * m * n * kk
                    if on_matrix:
                        matrix_s += _batched_cycles(accel, batch, m, n, kk, dtype) / accel.clock_hz
                    else:  # legalised to the vector unit (no matrix dtype): a multiply and an add per MAC
                        vector_s += _vector_seconds(accel, 2 * batch * m * n * kk, "add_mul", dtype)
                family = {SDPA: "attention", CONVOLUTION: "conv"}.get(op.target, "gemm")
                if op.target == SDPA:  # the softmax over the L x S scores, per batch x head
                    b, lq, s, _ = gemms[0]
                    vector_s += _vector_seconds(accel, b * lq * s, "exp", dtype)
                    flops += b * lq * s
                continue
            if op.target in COLLECTIVE_OPS and chips > 1 and link is not None:
                collective = COLLECTIVE_OPS[op.target]
                comm_elements += _numel(getattr(op.type, "hint", ()))
                nbytes = _numel(getattr(op.type, "hint", ())) * ITEMSIZE.get(dtype, 4)
                comm_s += collective_seconds(collective, nbytes, chips, link.bandwidth, link.latency_s, accel.topology)
                continue
            elements, cls = _vector_elements(op, types)
            if elements:
                vector_s += _vector_seconds(accel, elements, cls, dtype)
                flops += elements
                if family == "elementwise" and _base(op.target) in ("mean", "sum", "amax", "max", "var_mean"):
                    family = "reduction"
        compute_s = max(matrix_s, vector_s)
        k_loads, k_stores = loads.get(idx, []), stores.get(idx, [])
        mem = kernel_memory(accel, k_loads, k_stores)
        mem_s, level = mem.memory_s, mem.level
        n_tiles = _tiles(k, ops)
        loop: tuple = ()
        if k.tile and n_tiles > 1:
            busy = tile_loop(accel, compute_s, mem, n_tiles, len(k_loads), len(k_stores)).total
            loop = (n_tiles, compute_s, mem.load_s, mem.store_s, len(k_loads), len(k_stores))
        else:
            busy = max(compute_s, mem_s)
        dma_lat = mem.exposed_setup_s
        dispatch = accel.dispatch_overhead_s
        stalls = {
            f"memory:{level}": busy - compute_s,
            "dma_latency": dma_lat,
            "dispatch": dispatch,
            "communication": comm_s,
        }
        setups = dma_lat + mem.setup_s  # every wave's setup: latency, not bandwidth
        parts = {
            "compute": compute_s,
            f"memory:{level}": mem_s - mem.setup_s,
            "dma_latency": setups,
            "dispatch": dispatch,
        }
        parts["communication"] = comm_s
        limiter = max(parts, key=lambda p: parts[p])
        kt = KernelTime(
            dispatch + dma_lat + busy + comm_s, compute_s, limiter, {c: s for c, s in stalls.items() if s > 0}
        )
        # the timeline: after the kernels it reads from, once its resource (the cores; the chip's
        # links for a collective) is free
        resource = "link" if collective else "cores"
        at, after, deps = timeline.place(k, resource, kt.total)
        start = at + dispatch + dma_lat
        sim_moves, load_at, store_at = [], start, start + busy - mem.store_s
        for t in (*k_loads, *k_stores):
            dur = streaming_seconds(accel, t.bytes, transfer_level(t.src, t.dst))
            when = load_at if t.dst == "local" else store_at
            sim_moves.append(SimTransfer(t.value, f"{t.src}->{t.dst}", t.bytes, when, dur))
            if t.dst == "local":
                load_at += dur
            else:
                store_at += dur
        # the tiles' working set (tiling's local_bytes): in each core's local memory, or in shared
        # memory for an attention kernel tiling kept whole there (attrs memory 'shared')
        work, in_local = int(k.attrs.get("local_bytes", 0) or 0), k.attrs.get("memory", "local") == "local"
        name = k.name if k.name not in seen else f"{k.name}@{idx}"
        seen[name] = idx
        hbm_read = sum(t.bytes for t in k_loads if t.src == "hbm")
        hbm_written = sum(t.bytes for t in k_stores if t.dst == "hbm")
        shared = sum(t.bytes for t in (*k_loads, *k_stores) if "shared" in (t.src, t.dst))
        per_chip.append(
            SimKernel(
                name, k.unit, tuple(k.ops), tuple(o.target for o in ops), 0, at, kt, flops, hbm_read,
                hbm_written, shared, dtype, family, matrix_s, vector_s, tuple(sim_moves), collective, comm_elements,
                mem.contention_s, deps, after, resource, shared_live[idx] + work * (not in_local), work * in_local,
                loop,
            )
        )  # fmt: skip
    kernels = list(per_chip)
    for chip in range(1, chips):
        kernels += [_on_chip(s, chip) for s in per_chip]
    by_limiter: dict[str, float] = {}
    for s in per_chip:
        by_limiter[s.time.limiter] = by_limiter.get(s.time.limiter, 0.0) + s.time.total
    total = max((s.end_s for s in per_chip), default=0.0)
    return SimRun(accel, program.name, chips, tuple(kernels), total, by_limiter)


class Timeline:
    """Where each kernel of one chip starts (the module docstring's timeline): once the kernels
    it reads from have ended and its resource is free. `place` it in program order."""

    def __init__(self) -> None:
        self.free = {"cores": (0.0, -1), "link": (0.0, -1)}  # resource -> (free at s, the kernel that ends then)
        self.ends: dict[str, tuple[float, int]] = {}  # value -> (written at s, the kernel that wrote it)
        self.placed = 0  # kernels placed: the next one's position in its chip's list

    def skip(self, k) -> None:
        """A kernel that takes no accelerator time (host, views): its results are there when the
        cores are free."""
        self.ends.update({v: self.free["cores"] for v in k.outputs})

    def place(self, k, resource: str, seconds: float) -> tuple[float, int, tuple[int, ...]]:
        """(start s, the kernel it started after (-1: at 0), the kernels it reads from) of kernel
        `k` lasting `seconds` on `resource`."""
        ends = self.ends
        deps = tuple(sorted({ends[v][1] for v in k.inputs if v in ends and ends[v][1] >= 0}))
        at, after = self.free[resource]
        for v in k.inputs:
            if v in ends and ends[v][0] > at:
                at, after = ends[v]
        pos, self.placed = self.placed, self.placed + 1
        self.free[resource] = (at + seconds, pos)
        for v in k.outputs or k.inputs:  # a kernel without outputs writes its inputs in place (index_copy_)
            ends[v] = (at + seconds, pos)
        return at, after, deps


def _on_chip(s: SimKernel, chip: int) -> SimKernel:
    from dataclasses import replace

    return replace(s, chip=chip)
