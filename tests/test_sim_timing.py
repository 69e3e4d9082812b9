"""The simulator's timing model (accelerator/sim/timing.py) against SCALE-Sim's closed forms,
hand arithmetic of the alpha-beta and bandwidth-sharing formulas, and the matrix peak."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelerator.hardware import load_accel
from accelerator.sim import timing as T


def by_hand(m, n, k, r, c, dataflow):
    """The closed forms of issue 13, written out independently of the code under test."""
    if dataflow == "os":
        return -(-m // r) * -(-n // c) * (k + r + c - 2) - 1
    if dataflow == "ws":
        return -(-k // r) * -(-n // c) * (m + 2 * r + c - 2) - 1
    return -(-k // r) * -(-m // c) * (n + 2 * r + c - 2) - 1


def test_gemm_cycles_hand_examples():
    # os, 64x64x64 on 32x32: 2*2*(64+32+32-2)-1 = 4*126-1 = 503
    assert T.gemm_cycles(64, 64, 64, 32, 32, "os") == 503
    # ws, M=100 N=33 K=65 on 32x32: ceil(65/32)=3, ceil(33/32)=2, 3*2*(100+64+32-2)-1 = 6*194-1 = 1163
    assert T.gemm_cycles(100, 33, 65, 32, 32, "ws") == 1163
    # is, M=100 N=33 K=65 on 32x16: ceil(65/32)=3, ceil(100/16)=7, 21*(33+64+16-2)-1 = 21*111-1 = 2330
    assert T.gemm_cycles(100, 33, 65, 32, 16, "is") == 2330


@settings(max_examples=300, deadline=None)
@given(
    m=st.integers(1, 5000),
    n=st.integers(1, 5000),
    k=st.integers(1, 5000),
    r=st.sampled_from([1, 4, 8, 16, 32, 128, 7, 100]),
    c=st.sampled_from([1, 4, 8, 16, 32, 128, 5, 96]),
    dataflow=st.sampled_from(T.DATAFLOWS),
    multiple=st.booleans(),
)
def test_gemm_cycles_equal_the_closed_forms(m, n, k, r, c, dataflow, multiple):
    """MUST HOLD: every dataflow, on shapes that are (multiple=True) and are not multiples of the array."""
    if multiple:
        m, n, k = r * c * (m % 7 + 1), r * c * (n % 5 + 1), r * c * (k % 3 + 1)
    assert T.gemm_cycles(m, n, k, r, c, dataflow) == by_hand(m, n, k, r, c, dataflow)


def test_bad_gemm_input():
    with pytest.raises(ValueError, match="dataflow"):
        T.gemm_cycles(8, 8, 8, 4, 4, "rs")
    with pytest.raises(ValueError, match="M must be a positive integer"):
        T.gemm_cycles(0, 8, 8, 4, 4, "os")


def test_conv_im2col_shape():
    # ResNet-50 conv1: 3->64, 7x7, 224 -> 112 output: M = 112*112 = 12544, N = 64, K = 3*49 = 147
    assert T.conv_gemm_shape(1, 3, 64, 112, 112, 7, 7) == (12544, 64, 147)
    # depthwise 3x3 of 32 channels (groups=32): per group M=HW, N=1, K=9
    assert T.conv_gemm_shape(2, 32, 32, 8, 8, 3, 3, groups=32) == (128, 1, 9)


def test_vector_cycles():
    # 10000 exp on 64 lanes x 0.25/cycle = 16 per cycle: ceil(625) + 8 = 633
    assert T.vector_cycles(10_000, 64, 0.25) == 625 + T.VECTOR_PIPELINE_CYCLES
    assert T.vector_cycles(10_001, 64, 0.25) == 626 + T.VECTOR_PIPELINE_CYCLES
    assert T.vector_cycles(0, 64, 1) == 0


def test_two_cores_streaming_hbm_take_the_contended_time():
    """edge-npu: 2 DMA engines x 32 GB/s = 64 GB/s per core, DRAM 68.264 GB/s. Alone a core streams
    at 64 GB/s; two at once get 68.264/2 = 34.132 GB/s each. 64 MiB each: 67108864/34.132e9 = 1.96616 ms."""
    spec = load_accel("edge-npu")
    per_core = spec.dma.engines * spec.dma.bandwidth
    nbytes = 64 * 2**20
    each = T.stream_bandwidth(per_core, spec.hbm.bandwidth, 2)
    assert each == pytest.approx(34.132e9)
    t = T.dma_seconds(nbytes, each, spec.dma.setup_latency_s)
    assert t == pytest.approx(67108864 / 34.132e9 + 5e-7)
    # the excess over the roofline floor (all of DRAM's bandwidth for one stream's bytes):
    floor = nbytes / spec.hbm.bandwidth
    assert (t - spec.dma.setup_latency_s) - floor == pytest.approx(nbytes / spec.hbm.bandwidth)  # 2b/B - b/B
    # and over the core streaming alone: 67108864/34.132e9 - 67108864/64e9 = 0.917610 ms
    assert T.contention_seconds(nbytes, per_core, spec.hbm.bandwidth, 2) == pytest.approx(
        67108864 / 34.132e9 - 67108864 / 64e9
    )
    assert T.contention_seconds(nbytes, per_core, spec.hbm.bandwidth, 1) == 0


def test_double_buffered_tile_loop():
    # 3 tiles: compute 10, load 4, store 12. load_0 = 4; steps max(10,4,0)=10, max(10,4,12)=12,
    # max(10,0,12)=12; store_2 = 12: 4 + 34 + 12 = 50
    loop = T.double_buffered([10, 10, 10], [4, 4, 4], [12, 12, 12])
    assert loop.total == 50
    assert loop.compute == 30
    assert loop.stalls == {"load": 4, "store": 2 + 2 + 12}
    assert loop.total == loop.compute + sum(loop.stalls.values())
    # one DMA queue: load 4 and store 12 follow each other: 4 + max(10, 4) + max(10, 4 + 12)
    # + max(10, 12) + 12 = 4 + 10 + 16 + 12 + 12 = 54
    shared = T.double_buffered([10, 10, 10], [4, 4, 4], [12, 12, 12], one_queue=True)
    assert shared.total == 54 and shared.stalls == {"load": 4, "store": 6 + 2 + 12}


def test_ring_all_reduce_is_alpha_beta():
    # 1 GiB over 8 chips at 50 GB/s, alpha 1 us: 2*7/8 * 1073741824 / 50e9 + 14 * 1e-6
    #   = 1.75 * 0.02147483648 + 14e-6 = 0.03758096384 + 0.000014 = 0.03759496384 s
    assert T.ring_all_reduce(2**30, 8, 50e9, 1e-6) == pytest.approx(0.03759496384, rel=1e-12)
    assert T.ring_all_reduce(2**30, 1, 50e9, 1e-6) == 0
    # reduce-scatter + all-gather = all-reduce on a ring
    assert T.reduce_scatter(2**30, 8, 50e9, 1e-6) + T.all_gather(2**30, 8, 50e9, 1e-6) == pytest.approx(
        T.ring_all_reduce(2**30, 8, 50e9, 1e-6)
    )
    # tree, 8 chips: 2 * 3 * (1e-6 + 1e6/50e9) = 6 * 21e-6 = 126e-6
    assert T.tree_all_reduce(1e6, 8, 50e9, 1e-6) == pytest.approx(126e-6)
    # all-to-all of 8 MB on 8 chips: switch 7*1e-6 + 7/8*8e6/50e9 = 7e-6 + 140e-6 = 147e-6;
    # ring: bisection 8*8e6/(8*50e9) = 160e-6, + 7e-6 = 167e-6; fully connected 1e-6 + 1e6/50e9 = 21e-6
    assert T.all_to_all(8e6, 8, 50e9, 1e-6, "switch") == pytest.approx(147e-6)
    assert T.all_to_all(8e6, 8, 50e9, 1e-6, "ring") == pytest.approx(167e-6)
    assert T.all_to_all(8e6, 8, 50e9, 1e-6, "fully_connected") == pytest.approx(21e-6)


@pytest.mark.parametrize(
    ("compute", "comm", "total", "exposed"), [(5.0, 3.0, 5.0, 0.0), (3.0, 5.0, 5.0, 2.0), (4.0, 4.0, 4.0, 0.0)]
)
def test_overlap_hides_up_to_compute_time(compute, comm, total, exposed):
    assert T.overlapped(compute, comm) == (total, exposed)


def test_kernel_limiter_and_stalls():
    # memory-bound: compute 2, HBM 5, shared 1, dispatch 1: total 1 + 5 = 6, stall memory:hbm 3
    k = T.kernel_time(2.0, {"hbm": 5.0, "shared": 1.0}, dispatch_s=1.0)
    assert (k.total, k.limiter) == (6.0, "memory:hbm")
    assert k.stalls == {"memory:hbm": 3.0, "dispatch": 1.0}
    assert k.compute + sum(k.stalls.values()) == k.total
    # tiny kernel: dispatch bound
    assert T.kernel_time(1e-8, {"hbm": 2e-8}, dispatch_s=1e-6).limiter == "dispatch"
    # communication not overlapped: exposed in full
    k = T.kernel_time(1.0, {"hbm": 0.5}, comm_s=3.0, comm_overlapped=False)
    assert (k.total, k.limiter, k.stalls) == (4.0, "communication", {"communication": 3.0})
    # overlapped: only comm - busy = 2 shows
    k = T.kernel_time(1.0, {"hbm": 0.5}, comm_s=3.0)
    assert (k.total, k.stalls) == (3.0, {"communication": 2.0})
    assert k.stall_cycles(1e9) == {"communication": 2_000_000_000}


def test_large_gemm_reaches_90_percent_of_matrix_peak():
    """8192^3 bf16 on datacenter-npu: each of 8 cores runs 8192 x 1024 x 8192 on 128x128 ws:
    64 * 8 * (8192 + 256 + 128 - 2) - 1 = 4389887 cycles against the ideal 8192*1024*8192/16384 =
    4194304: 95.5% of 275.25 TFLOP/s."""
    spec = load_accel("datacenter-npu")
    m = n = k = 8192
    mx = spec.matrix
    cycles = T.chip_gemm_cycles(
        m, n, k, mx.rows, mx.cols, mx.dataflow, spec.cores, mx.macs_per_cycle["bf16"] / (mx.rows * mx.cols)
    )
    assert cycles == 64 * 8 * (8192 + 256 + 128 - 2) - 1
    achieved = 2 * m * n * k / (cycles / spec.clock_hz)
    assert achieved / spec.matrix_peak_flops("bf16") == pytest.approx(4194304 / 4389887)
    assert achieved >= 0.9 * spec.matrix_peak_flops("bf16")
    # int8 packs two MACs per PE: half the cycles, the int8 peak's 95.5% too
    c8 = T.chip_gemm_cycles(m, n, k, mx.rows, mx.cols, mx.dataflow, spec.cores, 2.0)
    assert c8 == math.ceil(4389887 / 2)
    assert 2 * m * n * k / (c8 / spec.clock_hz) >= 0.9 * spec.matrix_peak_flops("int8")
    # the preset's double-buffered weights: 128 + 512 x 8192 + 253 = 4194685 cycles, 99.99% of peak
    c2 = T.chip_gemm_cycles(m, n, k, mx.rows, mx.cols, mx.dataflow, spec.cores, 1.0, mx.stationary_buffers)
    assert c2 == 128 + 512 * 8192 + 253
    assert 2 * m * n * k / (c2 / spec.clock_hz) >= 0.9 * spec.matrix_peak_flops("bf16")


@settings(max_examples=200, deadline=None)
@given(
    m=st.integers(1, 20000),
    n=st.integers(1, 20000),
    k=st.integers(1, 20000),
    preset=st.sampled_from(["edge-npu", "datacenter-npu"]),
    dtype=st.sampled_from(["bf16", "int8"]),
)
def test_no_gemm_kernel_beats_its_roofline_floor(m, n, k, preset, dtype):
    """A GEMM kernel on a chip takes at least its roofline floor on the derived spec:
    max(2 M N K / matrix peak, compulsory bytes / HBM bandwidth) + the spec's min op time."""
    from accelerator.sim.kernel import ITEMSIZE, gemm_kernel
    from accelerator.sim.spec import hardware_spec

    accel = load_accel(preset)
    spec = hardware_spec(accel)
    kt = gemm_kernel(accel, m, n, k, dtype)
    floor = max(2 * m * n * k / spec.peak(dtype), (m * k + k * n + m * n) * ITEMSIZE[dtype] / spec.bandwidth("hbm"))
    assert kt.total >= floor + spec.min_op_time
    assert kt.compute + sum(kt.stalls.values()) == pytest.approx(kt.total)


def test_decode_gemm_is_memory_bound_once_the_weights_are_double_buffered():
    """16 x 8192 x 8192 bf16 on datacenter-npu (8 cores of 128 x 128 ws arrays, 1.05 GHz, HBM
    1.2 TB/s). Per core N = 1024: 64 x 8 = 512 folds of a 128 x 128 weight block for 16 rows.
    SCALE-Sim's single-buffered form: 512 x (16 + 256 + 128 - 2) - 1 = 203775 cycles = 194.07 us,
    more than the (16*8192*2 + 8192^2) * 2 B / 1.2e12 = 112.07 us of HBM traffic: fill bound.
    With the preset's second weight buffer (the TPU MXU's) the next block shifts in while 16 rows
    stream, so a fold costs max(16, 128) = 128 cycles: 128 + 511 x 128 + 16 + (128 + 128 - 2) - 1
    = 65805 cycles = 62.67 us, and HBM (112.07 us) limits the decode GEMM, as the roofline says."""
    from dataclasses import replace

    from accelerator.sim.kernel import gemm_kernel

    accel = load_accel("datacenter-npu")
    assert accel.matrix.stationary_buffers == 2
    kt = gemm_kernel(accel, 16, 8192, 8192, "bf16")
    assert kt.compute == pytest.approx(65805 / 1.05e9)
    assert kt.limiter == "memory:hbm"
    hbm = (16 * 8192 * 2 + 8192**2) * 2 / 1.2e12
    assert kt.total == pytest.approx(1e-6 + 5e-7 + hbm)
    single = replace(accel, matrix=replace(accel.matrix, stationary_buffers=1))
    kt1 = gemm_kernel(single, 16, 8192, 8192, "bf16")
    assert kt1.compute == pytest.approx(203775 / 1.05e9)
    assert kt1.limiter == "compute"
    assert kt1.stalls == {"dma_latency": 5e-7, "dispatch": 1e-6}


def test_pipelined_gemm_cycles_by_hand():
    # ws, M=512 N=256 K=256 on 128x128, 3 GEMMs: 128 + (3 x 2 x 2 - 1) x 512 + 512 + 253 = 6525
    assert T.pipelined_gemm_cycles(512, 256, 256, 128, 128, "ws", 3) == 128 + 3 * 4 * 512 + 253
    # os, M=N=64 K=16 on 32x32: 3 folds x max(16, 32) + 16 + 62 - 1 = 173 (SCALE-Sim: 4 x 78 - 1 = 311)
    assert T.pipelined_gemm_cycles(64, 64, 16, 32, 32, "os") == 173
    assert T.gemm_cycles(64, 64, 16, 32, 32, "os") == 311
    # is, M=100 N=33 K=65 on 32x16: 32 + (3 x 7 - 1) folds x max(33, 32) + 33 + 46 - 1 = 770
    assert T.pipelined_gemm_cycles(100, 33, 65, 32, 16, "is") == 770
    # a single fold is SCALE-Sim's form even with a short stream: ws M=16: 16 + 256 + 126 - 1 = 397
    assert T.pipelined_gemm_cycles(16, 128, 128, 128, 128, "ws") == T.gemm_cycles(16, 128, 128, 128, 128, "ws") == 397


@settings(max_examples=300, deadline=None)
@given(
    m=st.integers(1, 3000),
    n=st.integers(1, 3000),
    k=st.integers(1, 3000),
    r=st.sampled_from([1, 4, 8, 16, 32, 128, 7, 100]),
    c=st.sampled_from([1, 4, 8, 16, 32, 128, 5, 96]),
    dataflow=st.sampled_from(T.DATAFLOWS),
    count=st.integers(1, 5),
)
def test_double_buffering_is_scalesim_for_one_fold_and_never_slower(m, n, k, r, c, dataflow, count):
    """One fold is SCALE-Sim's closed form exactly; any GEMM, any
    count, costs no more than `count` SCALE-Sim GEMMs, and no less than the ideal MNK / (R C)
    (each within the closed forms' final "- 1" cycle)."""
    pipelined = T.pipelined_gemm_cycles(m, n, k, r, c, dataflow, count)
    assert pipelined <= count * (by_hand(m, n, k, r, c, dataflow) + 1) - 1
    assert pipelined >= count * m * n * k / (r * c) - 1
    folds = {"ws": -(-k // r) * -(-n // c), "is": -(-k // r) * -(-m // c), "os": -(-m // r) * -(-n // c)}[dataflow]
    if folds == 1 and count == 1:
        assert pipelined == by_hand(m, n, k, r, c, dataflow)
    assert T.array_cycles(m, n, k, r, c, dataflow, 1, count) == count * by_hand(m, n, k, r, c, dataflow)
    assert T.array_cycles(m, n, k, r, c, dataflow, 2, count) == pipelined


def test_collective_over_the_presets_topology():
    """datacenter-npu: 8 chips in a ring, 50 GB/s, 1 us a step. A 1 GiB all-reduce is the ring's
    0.03759496384 s (by hand above); on a switch, 8 KiB: ring 1.75 * 8192/50e9 + 14e-6 = 14.287 us
    against the tree's 6 * (1e-6 + 8192/50e9) = 6.983 us: the tree."""
    spec = load_accel("datacenter-npu")
    bw, alpha, p = spec.link.bandwidth, spec.link.latency_s, spec.chips
    assert T.collective_seconds("all_reduce", 2**30, p, bw, alpha, spec.topology) == pytest.approx(0.03759496384)
    assert T.collective_seconds("all_reduce", 8192, p, bw, alpha, "switch") == pytest.approx(6 * (1e-6 + 8192 / 50e9))
    assert T.collective_seconds("all_reduce", 8192, p, bw, alpha, "ring") == pytest.approx(1.75 * 8192 / 50e9 + 14e-6)
    assert T.collective_seconds("all_gather", 8e6, 1, bw, alpha, "single") == 0
    with pytest.raises(ValueError, match="collective must be one of"):
        T.collective_seconds("broadcast", 1, p, bw, alpha, "ring")
