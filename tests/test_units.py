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


def test_cpu_self_time_is_exact_at_real_epoch_timestamps(tmp_path):
    # Kineto writes epoch-based µs with ns digits; 1.8e18 ns is past a float64's 53-bit mantissa,
    # so any float step would round these times by up to 256 ns. The text is written by hand:
    # json.dumps of a Python float would itself drop the digits.
    def ev(name: str, ts: str, dur: str) -> str:
        return f'{{"ph":"X","cat":"cpu_op","name":"{name}","pid":1,"tid":1,"ts":{ts},"dur":{dur}}}'

    events = [
        ev("aten::empty", "1796228307704038.559", "0.130"),  # leaf: self = 130 ns
        ev("aten::linear", "1796228307704039.561", "0.997"),  # 997 ns, with a child of 333 ns
        ev("aten::t", "1796228307704039.861", "0.333"),  # leaf: self = 333 ns
    ]
    path = tmp_path / "t.json"
    path.write_text('{"schemaVersion":1,"traceEvents":[' + ",".join(events) + "]}")
    u = units(load_trace(path)).set_index("name")
    assert u.loc["aten::empty", "time_ns"] == 130
    assert u.loc["aten::t", "time_ns"] == 333
    assert u.loc["aten::linear", "time_ns"] == 997 - 333
