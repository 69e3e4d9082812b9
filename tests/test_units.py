"""Units of work: an op with the device work it launched, or device work alone, or a CPU op."""

from __future__ import annotations

from analysis.units import units
from profiler import load_trace
from tests.conftest import real_trace, write_trace, x
from tests.test_kineto_inline import EVENTS


def test_device_units_of_the_inline_trace(tmp_path):
    t = load_trace(write_trace(tmp_path / "t.json", EVENTS))
    u = units(t).set_index("name")
    # aten::addmm launched gemm [20,30) us; aten::relu launched relu_kernel [25,35) us;
    # the graph kernels (launched from an annotation) and the memcpy (no recorded call) stand alone.
    assert u.loc["aten::addmm", ["kind", "device", "time_ns", "work_events"]].tolist() == ["op", "gpu0", 10_000, 1]
    assert u.loc["aten::relu", "time_ns"] == 10_000
    assert u.loc["graph_k1", ["kind", "time_ns"]].tolist() == ["kernel", 5_000]
    assert u.loc["Memcpy DtoD (Device -> Device)", ["kind", "time_ns"]].tolist() == ["memcpy", 2_500]
    assert u.loc["aten::addmm", "shapes"] == ""  # addmm had no recorded shapes here
    assert len(u) == 5 and "aten::linear" not in u.index  # linear launched nothing itself


def test_cpu_units_are_ops_by_self_time(tmp_path):
    events = [
        x("ProfilerStep#1", "user_annotation", 0, 100),
        x("aten::linear", "cpu_op", 10, 50),
        x("aten::t", "cpu_op", 12, 8),
        x("aten::addmm", "cpu_op", 22, 30),
    ]
    u = units(load_trace(write_trace(tmp_path / "c.json", events))).set_index("name")
    # linear 50 us less its children t (8) and addmm (30) = 12 us of self time.
    assert u["time_ns"].to_dict() == {"aten::linear": 12_000, "aten::t": 8_000, "aten::addmm": 30_000}
    assert set(u["device"]) == {"cpu"}


def test_units_cover_all_device_work_on_real_traces():
    for folder in ("b200_eager", "vllm_graphs_mi300x", "resnet50_legacy_v100"):
        t = load_trace(real_trace(folder))
        u = units(t)
        work = t.events["kind"].isin(["kernel", "memcpy", "memset"])
        assert u["work_events"].sum() == work.sum()
        assert (u["time_ns"] <= u["end_ns"] - u["start_ns"]).all()
        assert u["unit_id"].is_unique
