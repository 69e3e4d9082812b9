"""Issue 10, TF32: an fp32 matmul that ran a TF32 tensor-core kernel is judged against the TF32
peak and shown as its own dtype, on a generated A100 trace."""

from __future__ import annotations

from profiler import analyze, load_trace
from tests.conftest import write_trace, x

A100 = [
    {
        "id": 0,
        "name": "NVIDIA A100-SXM4-80GB",
        "totalGlobalMem": 85_100_000_000,
        "computeMajor": 8,
        "computeMinor": 0,
        "numSms": 108,
    }
]


def _trace(tmp_path, kernel: str, **top):
    # one fp32 mm [4096,4096] x [4096,4096]: 2*4096^3 = 137.4 GFLOP, its kernel 1 ms on the GPU
    mm = {"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["float", "float"], "External id": 1}
    events = [
        x("aten::mm", "cpu_op", 10, 20, **mm),
        x("cudaLaunchKernel", "cuda_runtime", 12, 5, correlation=100, **{"External id": 1}),
        x(kernel, "kernel", 20, 1000, pid=0, tid=7, device=0, stream=7, correlation=100),
    ]
    return load_trace(write_trace(tmp_path / "t.json", events, deviceProperties=A100, **top))


def test_tf32_kernel_is_floored_at_the_tf32_peak(tmp_path):
    a = analyze(_trace(tmp_path, "ampere_tf32_s1688gemm_tf32_256x128_16x3_nn"))
    mm = a.units[a.units["name"] == "aten::mm"].iloc[0]
    assert mm["dtype"] == "tf32"
    # A100 TF32 dense 156 TFLOP/s (datasheet 312 with sparsity): 2*4096^3 / 156e12 s = 881 us
    assert abs(mm["t_compute_ns"] - 2 * 4096**3 / 156e12 * 1e9) < 1e-6
    assert 0.85 < mm["efficiency"] < 0.9  # 881 us / 1000 us; against fp32's 19.5 TFLOP/s it read 7.05
    assert "tf32" in a.by_dtype["dtype"].tolist()
    assert not [x for x in a.advice if x.kind == "precision"]  # no "use bf16" for what already ran TF32


def test_plain_sgemm_stays_fp32(tmp_path):
    a = analyze(_trace(tmp_path, "ampere_sgemm_128x64_nn"))
    mm = a.units[a.units["name"] == "aten::mm"].iloc[0]
    assert mm["dtype"] == "fp32" and mm["above_ceiling"]  # 137 GFLOP in 1 ms beats fp32's 19.5 TFLOP/s: flagged


def test_allow_tf32_in_metadata(tmp_path):
    a = analyze(_trace(tmp_path, "cutlass_gemm_kernel", allow_tf32=True))
    assert a.units.loc[a.units["name"] == "aten::mm", "dtype"].iloc[0] == "tf32"
