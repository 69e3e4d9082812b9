"""One GEMM as a kernel on a whole chip of an `AccelSpec`: the matrix-unit cycles of
accelerator/sim/timing.py, the HBM traffic it cannot avoid, the DMA setup and the dispatch,
composed by `timing.kernel_time` into a time and a limiter (what `perf simulate --gemm --accel`
prints). A building block for the program simulator, which adds tiling and schedules.

    compute  = chip_gemm_cycles(M, N, K, R, C, dataflow, cores, macs_per_cycle[dtype] / (R x C),
                                stationary_buffers) / clock
    hbm      = (M x K + K x N + M x N) x itemsize(dtype) / min(HBM bandwidth, cores x engines x DMA bandwidth)
               (compulsory bytes: each operand read once, the output written once, in `dtype`)
    dma      = one transfer setup (the first tile's load; later ones are double-buffered behind compute)
    dispatch = dispatch_overhead_s
    total    = dispatch + dma + max(compute, hbm)
"""

from __future__ import annotations

from accelerator.hardware import AccelSpec
from accelerator.sim.timing import KernelTime, chip_gemm_cycles, kernel_time, stream_bandwidth

ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


def gemm_kernel(accel: AccelSpec, m: int, n: int, k: int, dtype: str) -> KernelTime:
    """The GEMM on all cores of one chip (see the module docstring); ValueError when the matrix
    unit has no `dtype`."""
    mx = accel.matrix
    macs = mx.macs_per_cycle.get(dtype, 0)
    if macs <= 0:
        have = ", ".join(accel.matrix_dtypes())
        raise ValueError(f"{accel.name}'s matrix unit has no {dtype} (it has {have})")
    rate = macs / (mx.rows * mx.cols)
    cycles = chip_gemm_cycles(m, n, k, mx.rows, mx.cols, mx.dataflow, accel.cores, rate, mx.stationary_buffers)
    bandwidth = stream_bandwidth(accel.cores * accel.dma.engines * accel.dma.bandwidth, accel.hbm.bandwidth, 1)
    nbytes = (m * k + k * n + m * n) * ITEMSIZE[dtype]
    return kernel_time(
        cycles / accel.clock_hz,
        {"hbm": nbytes / bandwidth},
        dma_latency_s=accel.dma.setup_latency_s,
        dispatch_s=accel.dispatch_overhead_s,
    )


def gemm_kernel_report(accel: AccelSpec, m: int, n: int, k: int, dtype: str) -> dict:
    """`gemm_kernel` as JSON: seconds, limiter, stalls (s and cycles), achieved FLOP/s and its
    share of the chip's matrix peak (2 M N K / total / peak)."""
    kt = gemm_kernel(accel, m, n, k, dtype)
    flops = 2 * m * n * k / kt.total
    return {
        "accel": accel.name,
        "dtype": dtype,
        "cores": accel.cores,
        "time_s": kt.total,
        "compute_s": kt.compute,
        "limiter": kt.limiter,
        "stalls_s": dict(kt.stalls),
        "stall_cycles": kt.stall_cycles(accel.clock_hz),
        "achieved_flops": flops,
        "peak_flops": accel.matrix_peak_flops(dtype),
        "fraction_of_peak": flops / accel.matrix_peak_flops(dtype),
    }
