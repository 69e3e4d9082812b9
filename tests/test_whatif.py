"""What-if: other hardware and other precision re-floor the same trace."""

from __future__ import annotations

import pytest

from profiler import analyze, load_trace
from profiler.model.hardware import load_spec
from tests.conftest import real_trace


@pytest.fixture(scope="module")
def b200():
    return load_trace(real_trace("b200_eager"))


def test_dtype_whatif_refloors_gemms_only(b200):
    base, fp8 = analyze(b200), analyze(b200, dtype="fp8")
    family = base.units["family"]
    gemm = (family == "gemm") & (base.units["dtype"] == "bf16")
    spec = load_spec("b200")
    ratio = spec.peak("bf16", "matrix") / spec.peak("fp8", "matrix")  # 2.25 / 4.5 PFLOP/s dense = 0.5
    got = fp8.units.loc[gemm, "t_compute_ns"].to_numpy() / base.units.loc[gemm, "t_compute_ns"].to_numpy()
    assert got == pytest.approx([ratio] * int(gemm.sum())) and gemm.sum() == 109
    # the 36 MoE layers already run MXFP4 x MXFP8 GEMMs, judged at the fp8 peak: nothing to gain
    moe = (family == "gemm") & (base.units["dtype"] == "fp8")
    assert moe.sum() == 36
    assert (fp8.units.loc[moe, "t_compute_ns"] == base.units.loc[moe, "t_compute_ns"]).all()
    other = (family != "gemm") & base.units["t_compute_ns"].notna()
    assert (fp8.units.loc[other, "t_compute_ns"] == base.units.loc[other, "t_compute_ns"]).all()
    assert fp8.whatif_dtype == "fp8"


def test_hardware_whatif_lowers_the_floor_total():
    trace = load_trace(real_trace("resnet50_legacy_v100"))
    v100, h100 = analyze(trace), analyze(trace, hardware="h100-sxm")
    assert v100.hardware["rank0/gpu0"] == "v100-sxm2-32gb" and h100.hardware["rank0/gpu0"] == "h100-sxm"
    # the same units at their floors: H100 has 3.7x V100's HBM bandwidth (3.35 vs 0.9 TB/s), and
    # these units are memory bound, so their total floor shrinks by about that much
    ratio = h100.utilization["floor_ns"].iloc[0] / v100.utilization["floor_ns"].iloc[0]
    assert 0.2 < ratio < 0.35
    assert h100.utilization["unknown_ns"].iloc[0] == v100.utilization["unknown_ns"].iloc[0]


def test_utilization_is_achieved_over_peak(b200):
    a = analyze(b200)
    u = a.utilization.set_index("device").loc["gpu0"]
    spec = load_spec("b200")
    window_s = a.equation.set_index("device").loc["gpu0", "window_ns"] / 1e9
    assert u["time_base"] == "trace window" and u["time_ns"] == window_s * 1e9  # no ProfilerStep annotations
    assert u["compute_util"] == pytest.approx(u["flops"] / window_s / spec.peak(u["compute_dtype"], "matrix"))
    assert u["memory_util"] == pytest.approx(u["bytes"] / window_s / spec.bandwidth())
    assert 0 < u["memory_util"] < 1 and 0 < u["compute_util"] < 1


def test_hardware_whatif_projects_each_op_and_the_step():
    """Issue 10: a what-if projects time (measured x the floor ratio of the op's bound), never an
    efficiency of the target's floor over the source's time (that read 1.6)."""
    trace = load_trace(real_trace("resnet50_legacy_v100"))
    v100, h100 = analyze(trace, sections=("roofline",)), analyze(trace, hardware="h100-sxm", sections=("roofline",))
    src, dst = v100.units, h100.units
    assert dst["efficiency"].isna().all() and not dst["above_ceiling"].any()
    comp = (src["bound"] == "compute").to_numpy()
    # compute bound: time * t_compute(H100) / t_compute(V100); an fp32 conv: 15.7 / 67 TFLOP/s (vector fp32 on both)
    expect = src["time_ns"][comp] * dst["t_compute_ns"][comp] / src["t_compute_ns"][comp]
    assert dst["projected_ns"][comp].to_numpy() == pytest.approx(expect.to_numpy())
    runtime = (src["bound"].isin(["runtime", "unknown"])).to_numpy()
    assert (dst["projected_ns"][runtime] == src["time_ns"][runtime]).all()  # dispatch and unknown time stay
    w = h100.whatif.iloc[0]
    assert (w["source"], w["target"]) == ("v100-sxm2-32gb", "h100-sxm")
    assert w["projected_ns"] == pytest.approx(w["window_ns"] - (dst["time_ns"] - dst["projected_ns"]).sum())
    assert w["projected_ns"] < w["window_ns"]


def test_precision_whatif_changes_bytes_and_labels_a_fallback(b200):
    base, fp8 = analyze(b200, sections=("roofline",)), analyze(b200, dtype="fp8", sections=("roofline",))
    gemm = (base.units["family"] == "gemm") & (base.units["dtype"] == "bf16")
    # bf16 -> fp8: every tensor of the GEMM 2 -> 1 byte per element
    assert fp8.units.loc[gemm, "bytes"].to_numpy() == pytest.approx(base.units.loc[gemm, "bytes"].to_numpy() / 2)
    assert fp8.whatif.iloc[0]["peak_used"] == "matrix fp8"
    v100 = analyze(load_trace(real_trace("resnet50_legacy_v100")), dtype="bf16", sections=("roofline",))
    # V100 has no bf16 unit: its fp32 figure is used, and the output says so
    assert (
        v100.whatif.iloc[0]["peak_used"]
        == "bf16 on v100-sxm2-32gb: no bf16 matrix unit, vector fp32 peak used (fallback)"
    )
