"""The simulator's memory system and timeline (accelerator/sim/dma.py, run.py) on compiled
programs, every number by hand: HBM shared among the cores streaming it at once (contention),
DMA setup waves, the double-buffered tile loop, a large GEMM at the matrix peak, and collectives
on the links overlapping the compute that does not need them, hidden up to that compute's time
and no more."""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from accelerator.compiler.pipeline import compile_model  # noqa: E402
from accelerator.hardware import load_accel  # noqa: E402
from accelerator.sim.run import simulate  # noqa: E402
from accelerator.sim.trace import timeline_ns  # noqa: E402
from accelerator.workloads.mlp import MLP  # noqa: E402


class Add(nn.Module):
    def forward(self, x, y):
        return x + y


def test_two_cores_streaming_hbm_share_its_bandwidth():
    """edge-npu cut to 2 cores: each core's 2 DMA engines give it 2 x 32 GB/s = 64 GB/s, the
    LPDDR5X 68.264 GB/s. `x + y` on 1024 x 1024 fp32: x and y loaded from HBM, the sum stored
    to HBM, 4 MiB each, split over the 2 cores (2 MiB per core per transfer), both cores at once.
    Each core gets 68.264 / 2 = 34.132 GB/s: 3 x 2097152 / 34.132e9 = 184.33 us (all of HBM's
    bandwidth: the chip's roofline floor 12 MiB / 68.264e9, to the ns); alone a core would take
    3 x 2097152 / 64e9 = 98.30 us, so sharing costs each core 3 x (2097152 / 34.132e9 -
    2097152 / 64e9) = 86.02 us, the recorded contention. Setup: 3 transfers on 2 engines = 2
    waves, the first exposed (0.5 us), the second in the memory time. Total = 5 us dispatch +
    0.5 us + 184.33 us + 0.5 us."""
    hw = replace(load_accel("edge-npu"), cores=2)
    torch.manual_seed(0)
    run = simulate(compile_model(Add(), (torch.randn(1024, 1024), torch.randn(1024, 1024)), hw, "fp32").program, hw)
    (k,) = run.kernels
    per_core = 2 * 1024 * 1024  # bytes of each 4 MiB transfer one core moves
    contended = 3 * per_core / (68.264e9 / 2)
    alone = 3 * per_core / 64e9
    assert k.hbm_read == 2 * 4 * 2**20 and k.hbm_written == 4 * 2**20
    assert contended == pytest.approx(12 * 2**20 / 68.264e9, rel=1e-12)  # the roofline floor
    assert k.contention_s == pytest.approx(contended - alone, rel=1e-12)
    assert k.contention_s == pytest.approx(86.0248e-6, rel=1e-4)
    assert k.time.limiter == "memory:hbm"
    assert k.time.total == pytest.approx(5e-6 + 5e-7 + contended + 5e-7, rel=1e-12)
    # one core alone on the same chip's HBM: 64 GB/s of engines, no contention, but 1.88x slower
    one = replace(hw, cores=1)
    (k1,) = simulate(
        compile_model(Add(), (torch.randn(1024, 1024), torch.randn(1024, 1024)), one, "fp32").program, one
    ).kernels
    assert k1.contention_s == 0
    assert k1.time.total == pytest.approx(5e-6 + 5e-7 + 12 * 2**20 / 64e9 + 5e-7, rel=1e-12)


def test_tile_loop_overlaps_loads_and_stores_with_compute():
    """fc2 of a 1024-4096-1024 MLP at batch 512 on datacenter-npu, bf16, tile m=256 n=1024: 2
    output tiles. Compute (double-buffered weights, N split over 8 cores): 128 + 31 x 512 + 512 +
    253 = 16765 cycles = 15.967 us. Loads, per core (HBM 1.2e12 / 8 = 150 GB/s each; shared
    4.8e12 / 8 = 600 GB/s = its engines' 4 x 150 GB/s): weight 8 MiB / 8 / 150e9 = 6.9905 us,
    bias 4096 B / 8 / 150e9 = 3.4 ns, gelu 4 MiB from shared / 8 / 600e9 = 0.8738 us; store 2 MiB
    fp32 to HBM / 8 / 150e9 = 1.7476 us. Per tile: half of each, plus one setup wave 0.5 us / 8
    cores (tile 0's load one wave less: its first is the exposed 0.5 us). Loop: load_0 3.9339 +
    max(7.983, 3.9339 + 0.0625) + max(7.983, 0.8738 + 0.0625) + store_1 0.9363 = 20.837 us; the
    kernel 1 us dispatch + 0.5 us setup + that = 22.337 us, where loading, computing and storing
    in turn would take 25.58 us."""
    hw = load_accel("datacenter-npu")
    torch.manual_seed(0)
    run = simulate(compile_model(MLP(1024, 4096, 1024).eval(), (torch.randn(512, 1024),), hw, "bf16").program, hw)
    fc2 = run.kernels[1]
    compute = 16765 / 1.05e9
    w, b, g, out = 8 * 2**20 / 8 / 150e9, 4096 / 8 / 150e9, 4 * 2**20 / 8 / 600e9, 2 * 2**20 / 8 / 150e9
    load, store, wave = (w + b + g) / 2, out / 2, 0.5e-6 / 8
    loop = load + max(compute / 2, load + wave) + max(compute / 2, store + wave) + store + wave
    assert fc2.time.compute == pytest.approx(compute, rel=1e-12)
    assert fc2.time.total == pytest.approx(1e-6 + 0.5e-6 + loop, rel=1e-12)
    assert fc2.time.total == pytest.approx(22.3368e-6, rel=1e-5)
    assert fc2.time.total < 1.5e-6 + (w + b + g) + compute + out  # the loop overlapped them


def test_dma_setup_waves():
    """A kernel's transfers go out over a core's engines in waves: datacenter-npu has 4 engines
    per core, so the tiny Llama's RoPE kernel `mul_90` (4 loads and a store: 5 transfers) pays
    2 setup waves of 0.5 us: the first exposed, the second in its memory time (its few ns of
    bytes wait for it). Its limiter is a fixed cost: 1 us of setups against 1 us of dispatch."""
    from accelerator.workloads import WORKLOADS

    hw = load_accel("datacenter-npu")
    program = compile_model(*WORKLOADS["llama"](), hw, "bf16").program
    run = simulate(program, hw)
    k = next(s for s in run.kernels if s.name == "mul_90")
    assert len(k.transfers) == 5
    assert k.time.stalls["dma_latency"] == 5e-7
    streaming = sum(t.dur_s for t in k.transfers)
    assert k.time.total == pytest.approx(1e-6 + 5e-7 + max(k.time.compute, streaming + 5e-7), rel=1e-12)
    assert k.time.limiter in ("dma_latency", "dispatch") and streaming < 5e-7


def test_large_gemm_in_a_program_reaches_90_percent_of_the_matrix_peak():
    """An 8192 x 8192 x 8192 bf16 linear (meta weights: compiled, not run) simulated on
    datacenter-npu: 2 x 8192^3 FLOP in its kernel time, at least 90% of 8 x 16384 x 2 x 1.05e9
    = 275.25 TFLOP/s, its DMA hidden under the compute of the tiles."""
    hw = load_accel("datacenter-npu")
    with torch.device("meta"):
        model = nn.Linear(8192, 8192, bias=False).to(torch.bfloat16)
        x = torch.zeros(8192, 8192, dtype=torch.bfloat16)
    run = simulate(compile_model(model, (x,), hw, "bf16").program, hw)
    (k,) = [s for s in run.kernels if s.unit == "matrix"]
    assert k.flops == 2 * 8192**3
    assert k.time.limiter == "compute"
    assert k.flops / k.time.total >= 0.9 * hw.matrix_peak_flops("bf16")


class TwoBranches(nn.Module):
    """Two independent MLPs: tensor parallel, each ends in an all-reduce, and the second
    branch's matmuls need nothing of the first's all-reduce."""

    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.a, self.b = MLP(d, hidden, d), MLP(d, hidden, d)

    def forward(self, x, y):
        return self.a(x), self.b(y)


@pytest.mark.parametrize(("batch", "hidden", "fully_hidden"), [(64, 4096, True), (4096, 1024, False)])
def test_collective_overlaps_independent_compute(batch, hidden, fully_hidden):
    """On 2 datacenter-npu chips the kernels run: a.fc1, a.fc2 (partial), all-reduce(a),
    b.fc1, b.fc2 (partial), all-reduce(b), a's bias add, b's bias add. The all-reduce of a
    runs on the link while b's matmuls run on the cores (they do not read it), so it costs
    only what the compute does not hide: the run ends at
        e2 = E1 + t2,  e4 = E1 + t3 + t4,  e5 = max(e2, e4) + t5,  e6 = max(e2, e4) + t6,
        end = max(e6, e5) + t7       (E1 = t0 + t1, t_i each kernel's own time)
    and the all-reduce's exposed time, max(e2, e4) - e4 = max(0, t2 - (t3 + t4)), is its time
    less the compute beside it, never below 0. Batch 64, hidden 4096: the all-reduce (2 x 1 us
    hops + 32 KiB / 50 GB/s, 4.2 us) hides under b's two matmuls (6.2 us); batch 4096, hidden
    1024: its 2 MiB message takes 2(p-1)/p x 2 MiB / 50 GB/s = 41.9 us + 2 us, and only the
    13.6 us of b's matmuls hide it: the rest shows."""
    hw = load_accel("datacenter-npu")
    torch.manual_seed(0)
    xs = (torch.randn(batch, 256), torch.randn(batch, 256))
    run = simulate(compile_model(TwoBranches(256, hidden).eval(), xs, hw, "bf16", chips=2).program, hw)
    chip0 = [s for s in run.kernels if s.chip == 0]
    assert [s.collective for s in chip0] == ["", "", "all_reduce", "", "", "all_reduce", "", ""]
    t = [s.time.total for s in chip0]
    e1 = t[0] + t[1]
    e2, e4 = e1 + t[2], e1 + t[3] + t[4]
    e5, e6 = max(e2, e4) + t[5], max(e2, e4) + t[6]
    end = max(e6, e5) + t[7]
    assert chip0[2].resource == "link" and chip0[3].start_s == pytest.approx(e1, rel=1e-12)  # b starts at once
    assert run.total_s == pytest.approx(end, rel=1e-12)
    exposed = max(e2, e4) - e4
    assert exposed == pytest.approx(max(0.0, t[2] - (t[3] + t[4])), abs=1e-15)
    assert (exposed == 0) == fully_hidden and (t[2] < t[3] + t[4]) == fully_hidden
    assert run.total_s < sum(t)  # overlapped: faster than in turn by what was hidden
    assert sum(t) - run.total_s >= min(t[2], t[3] + t[4]) - 1e-12
    # the trace's timeline keeps the overlap, kernels on one resource back to back in whole ns
    spans = timeline_ns(run)[: len(chip0)]
    assert spans[3][0] == spans[1][0] + spans[1][1]  # b.fc1 right after a.fc2, beside the all-reduce
    assert spans[2][0] == spans[3][0]
