"""Graph-replayed kernels costed from the ops recorded at capture (analysis.cost.graphs), on a
Kineto trace built here as the PyTorch profiler writes a CUDA-graph capture and its replays: the
capture's ops with their shapes and their cudaLaunchKernel calls (no kernel runs while
capturing), between cudaStreamBeginCapture and cudaStreamEndCapture; then cudaGraphLaunch calls
whose kernels share the launch's correlation id and carry 'graph id' / 'graph node id'."""

from __future__ import annotations

from profiler import analyze, load_trace
from tests.conftest import write_trace, x


def _op(name, ts, dur, ext, dims, types, concrete=None):
    args = {"External id": ext, "Input Dims": dims, "Input type": types}
    args["Concrete Inputs"] = concrete or [""] * len(dims)
    return x(name, "cpu_op", ts, dur, **args)


def _kernel(name, ts, dur, corr, node):
    return x(
        name, "kernel", ts, dur, pid=0, tid=7, device=0, stream=7, correlation=corr,
        **{"graph id": 1, "graph node id": node},
    )  # fmt: skip


def _events(capture: bool, mm_launches: int = 1) -> list[dict]:
    ev = [x("ProfilerStep#1", "user_annotation", 0, 2000)]
    if capture:
        ev += [
            x("cudaStreamBeginCapture", "cuda_runtime", 5, 1, correlation=90),
            # aten::mm [64, 128] x [128, 256] fp32, then aten::add [64, 256] + [64, 256]
            _op("aten::mm", 10, 20, 1, [[64, 128], [128, 256]], ["float", "float"]),
            *[x("cudaLaunchKernel", "cuda_runtime", 12 + i, 0.5, correlation=91 + i) for i in range(mm_launches)],
            _op("aten::add", 40, 20, 2, [[64, 256], [64, 256], []], ["float", "float", "Scalar"], ["", "", "1"]),
            x("cudaLaunchKernel", "cuda_runtime", 42, 5, correlation=99),
            x("cudaStreamEndCapture", "cuda_runtime", 70, 1, correlation=100),
            x("cudaGraphInstantiate", "cuda_runtime", 80, 10, correlation=101),
        ]
    for r, t0 in enumerate((200, 800)):  # two replays of the graph
        corr = 200 + r
        ev += [
            x("cudaGraphLaunch", "cuda_runtime", t0, 10, correlation=corr),
            _kernel("ampere_sgemm_64x64_nn", t0 + 100, 50, corr, 1),
            _kernel("vectorized_elementwise_kernel", t0 + 160, 5, corr, 2),
        ]
        if mm_launches > 1:  # the GEMM's split-K reduction, between the GEMM and the add
            ev.append(_kernel("splitk_reduce_kernel", t0 + 152, 3, corr, 3))
    return ev


def _units(tmp_path, events):
    a100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_031_845_888, "computeMajor": 8}
    a100 |= {"computeMinor": 0, "numSms": 108}
    path = write_trace(
        tmp_path / "t.json", events, distributedInfo={"rank": 0, "world_size": 1}, deviceProperties=[a100]
    )
    a = analyze(load_trace(path), sections=("roofline",))
    return a, a.units.set_index("name")


def test_replayed_kernels_take_the_cost_of_their_captured_op(tmp_path):
    a, u = _units(tmp_path, _events(capture=True))
    gemm = u.loc["ampere_sgemm_64x64_nn"]
    # aten::mm: 2 * 64 * 128 * 256 = 4,194,304 FLOPs; reads (64*128 + 128*256) * 4 = 163,840 bytes,
    # writes 64*256*4 = 65,536
    assert (gemm["flops"] == 4_194_304).all() and len(gemm) == 2
    assert (gemm["bytes_read"] == 163_840).all() and (gemm["bytes_written"] == 65_536).all()
    add = u.loc["vectorized_elementwise_kernel"]
    # aten::add: 64 * 256 = 16,384 FLOPs; reads 2 * 65,536, writes 65,536
    assert (add["flops"] == 16_384).all() and (add["bytes_read"] == 131_072).all()
    assert a.unknown_share == 0


def test_without_the_capture_the_reason_says_so(tmp_path):
    a, u = _units(tmp_path, _events(capture=False))
    assert u["flops"].isna().all()
    assert a.unknown_share == 1
    assert set(a.unknown["reason"]) == {"replayed from a CUDA/HIP graph; capture not in trace"}


def test_an_op_with_two_captured_launches_is_not_split(tmp_path):
    # aten::mm launched two kernels at capture (a GEMM and a split-K reduction): its one cost is
    # not divided between them; aten::add's kernel is still costed
    a, u = _units(tmp_path, _events(capture=True, mm_launches=2))
    assert u.loc["ampere_sgemm_64x64_nn", "flops"].isna().all()
    assert (u.loc["vectorized_elementwise_kernel", "flops"] == 16_384).all()
    reasons = dict(zip(a.unknown["name"], a.unknown["reason"]))
    assert reasons["ampere_sgemm_64x64_nn"] == "replayed from a CUDA/HIP graph; its captured op launched 2 kernels"
