"""Dashboard figure builders, tables and down-sampling, without a server or a browser."""

from __future__ import annotations

import base64
import gzip

import numpy as np
import pandas as pd
import pytest

from dashboard import figures, tables
from dashboard.pages.ops import apply_query, display
from dashboard.store import LRU, TraceStore
from dashboard.timeline_data import MAX_CELLS, index_events, unit_marks, window
from profiler.model.errors import InputError
from profiler.api import analyze, load_trace
from profiler.model.hardware import load_spec
from tests.conftest import real_trace, write_trace, x


@pytest.fixture(scope="module")
def b200():
    return analyze(load_trace(real_trace("b200_eager")), top=None)


def _ops(rows: list[tuple]) -> pd.DataFrame:
    """A hand-built op table: (name, time_ns, flops_effective, bytes, bound)."""
    df = pd.DataFrame(rows, columns=["name", "time_ns", "flops_effective", "bytes", "bound"])
    df["op"], df["shapes"], df["count"] = np.arange(len(df)), "", 1
    df["intensity"] = df["flops_effective"] / df["bytes"]
    df["achieved_flops"] = df["flops_effective"] / (df["time_ns"] / 1e9)
    df["efficiency"] = 0.5
    return df


def test_roofline_one_memory_roof_per_level_and_points_where_the_numbers_say():
    spec = load_spec("v100-sxm2-32gb")  # three memory levels: hbm, l2, smem
    # 2*1024^3 FLOPs in 1 ms -> 2.147e12 FLOP/s; intensity 2*1024^3 / 6 MiB = 341.3 FLOP/B
    pts = tables.roofline_points(
        _ops(
            [
                ("mm", 1_000_000, 2 * 1024**3, 6 * 2**20, "compute"),
                ("add", 10_000, 1e6, 12e6, "memory"),
                ("view", 1_000, 0.0, 0.0, "runtime"),
            ]
        )
    )
    assert list(pts["name"]) == ["mm", "add"]  # zero FLOPs cannot sit on a log axis
    roofs = tables.ceilings(spec, ["fp16", "float32"])
    fig = figures.roofline_figure(pts, roofs, selected=1)
    memory = [t for t in fig.data if (t.meta or {}).get("roof") == "memory"]
    compute = [t for t in fig.data if (t.meta or {}).get("roof") == "compute"]
    assert [t.meta["level"] for t in memory] == [m.name for m in spec.memory]
    top = max(t.y[0] for t in compute)
    for t, m in zip(memory, spec.memory):
        assert t.y[0] == pytest.approx(m.bandwidth * t.x[0])  # y = bandwidth * intensity
        assert t.x[1] == pytest.approx(top / m.bandwidth) and t.y[1] == pytest.approx(
            top
        )  # meets the top roof at the ridge
    assert sorted(t.y[0] for t in compute) == sorted(
        {spec.peak("fp16", "matrix"), spec.peak("fp32", "matrix"), spec.peak("fp32", "vector")}
    )
    mm = next(t for t in fig.data if (t.meta or {}).get("points") == "ops" and "compute" in t.name)
    assert mm.x[0] == pytest.approx(2 * 1024**3 / (6 * 2**20)) and mm.y[0] == pytest.approx(2 * 1024**3 / 1e-3)
    ring = next(t for t in fig.data if (t.meta or {}).get("points") == "selected")
    assert ring.x[0] == pytest.approx(1e6 / 12e6)  # op 1 ('add') is the selected one
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_roofs_move_with_the_hardware():
    pts = tables.roofline_points(_ops([("mm", 1_000_000, 2e12, 1e9, "compute")]))
    a = figures.roofline_figure(pts, tables.ceilings(load_spec("b200"), ["bf16"]))
    b = figures.roofline_figure(pts, tables.ceilings(load_spec("v100-sxm2-32gb"), ["bf16"]))
    mem = [[t.meta["value"] for t in f.data if (t.meta or {}).get("roof") == "memory"] for f in (a, b)]
    assert mem == [[7.7e12], [m.bandwidth for m in load_spec("v100-sxm2-32gb").memory]]


def test_op_table_on_a_real_trace(b200):
    units = tables.focus_units(b200.units)
    ops = tables.op_table(units)
    assert ops["time_ns"].iloc[0] == ops["time_ns"].max()  # most time first
    assert ops["count"].sum() == len(units)  # every unit in exactly one op
    assert ops["time_ns"].sum() == units["time_ns"].sum()
    assert ops["share"].sum() == pytest.approx(1.0)
    known = ops[ops["time_ns"] > 0]
    assert np.allclose(known["achieved_flops"], known["flops_effective"] / (known["time_ns"] / 1e9), equal_nan=True)
    assert set(units["device"]) == {"gpu0"}  # the accelerator's units, not the host's


def test_equation_long_sums_to_each_window(b200):
    parts = tables.equation_long(b200.equation)
    for r in b200.equation.itertuples(index=False):
        assert parts.loc[parts["device"] == f"rank{r.rank}/{r.device}", "ns"].sum() == r.window_ns
    fig = figures.equation_figure(parts)
    assert sum(t.x[0] for t in fig.data) == pytest.approx(b200.equation["window_ns"].iloc[0] / 1e6)
    dev = tables.device_summary(b200)
    assert (dev["wall_ns"] == dev["busy_ns"] + dev["idle_ns"]).all()


def _events(rows: list[tuple]) -> pd.DataFrame:
    """(track, kind, name, ts, dur) rows as the categorical events columns the index reads."""
    df = pd.DataFrame(rows, columns=["track", "kind", "name", "ts", "dur"])
    for c in ("track", "kind", "name"):
        df[c] = df[c].astype("category")
    return df.astype({"ts": "int64", "dur": "int64"})


def test_timeline_events_then_buckets_with_exact_occupancy():
    ev = _events(
        [
            ("r0/gpu0/s7", "kernel", "a", 0, 100),
            ("r0/gpu0/s7", "kernel", "b", 300, 100),
            ("r0/cpu/t1", "op", "outer", 0, 1000),
            ("r0/cpu/t1", "op", "inner", 10, 50),  # nested: dropped
            ("r0/cpu/t1", "annotation", "ProfilerStep#1", 0, 1000),
        ]
    )  # a label, not drawn
    idx = index_events(ev)
    view = window(idx, detail_limit=10)
    assert view.mode == "events" and sorted(view.bars["name"]) == ["a", "b", "outer"]
    view = window(idx, 0, 400, buckets=50, detail_limit=0)  # force buckets: 50 buckets of 8 ns
    s7 = view.tracks.index("r0/gpu0/s7")
    occ = view.occupancy[s7]
    assert occ.sum() * view.bucket_ns == pytest.approx(200)  # 'a' and 'b' wholly inside [0, 400)
    assert occ[:12].tolist() == [1.0] * 12 and occ[12] == pytest.approx(0.5)  # 100 ns = 12.5 buckets
    assert view.top_name[s7, 0] == "a" and view.top_name[s7, 40] == "b" and view.top_name[s7, 20] == ""
    fig = figures.timeline_figure(view)
    assert fig.data[0].type == "heatmap" and np.asarray(fig.data[0].z).shape == (2, 50)


def test_timeline_payload_is_bounded_for_a_million_intervals():
    n = 1_000_000
    rng = np.random.default_rng(0)
    ts = np.sort(rng.integers(0, 10**10, n))
    ev = _events([("x", "kernel", "k", 0, 1)])  # categories, then the big columns
    ev = pd.DataFrame(
        {
            "track": pd.Categorical.from_codes(rng.integers(0, 8, n), [f"rank{i}/gpu0/stream7" for i in range(8)]),
            "kind": pd.Categorical(["kernel"] * n),
            "name": pd.Categorical.from_codes(rng.integers(0, 500, n), [f"kernel_{i}" for i in range(500)]),
            "ts": ts,
            "dur": rng.integers(1, 5000, n),
        }
    )
    idx = index_events(ev)
    for lo, hi in ((None, None), (0, 10**9), (5 * 10**9, 5 * 10**9 + 10**5)):
        view = window(idx, lo, hi)
        assert view.occupancy.size <= MAX_CELLS and len(view.bars) <= 2000
        size = len(figures.timeline_figure(view).to_json())
        assert size < 1_500_000, size  # bytes of figure JSON, whatever the zoom


def test_unit_marks_one_per_bucket():
    units = pd.DataFrame({"start_ns": [100, 101, 500, 5000], "time_ns": [1, 2, 3, 4]})
    m = unit_marks(units, origin_ns=0, t0=0, t1=1000, buckets=10)  # 5000 is outside the window
    assert m["count"].tolist() == [2, 1] and m["time_ns"].tolist() == [3, 3]


def test_compare_figure_colours_regressions_red():
    changes = pd.DataFrame(
        {
            "name": ["slow", "fast"],
            "shapes": ["", ""],
            "delta_ns": [2_000_000, -1_000_000],
            "change": ["time", "time"],
            "time_a_ns": [1, 3],
            "time_b_ns": [3, 2],
        }
    )
    fig = figures.compare_figure(changes)
    colours = dict(zip([y.strip() for y in fig.data[0].y], fig.data[0].marker.color))
    assert colours == {"slow": "#d62728", "fast": "#2ca02c"}


def test_ops_query_filters_and_sorts_without_eval(b200):
    df = display(tables.op_table(tables.focus_units(b200.units)))
    mm = apply_query(df, '{name} icontains "ADDMM"', [])
    assert len(mm) and mm["name"].str.contains("addmm").all()
    big = apply_query(df, "{time_us} > 100", [{"column_id": "efficiency", "direction": "asc"}])
    assert (big["time_us"] > 100).all()
    eff = big["efficiency"].dropna().to_numpy()
    assert (np.diff(eff) >= 0).all() and big["efficiency"].isna().to_numpy()[len(eff) :].all()  # NaN last
    assert len(apply_query(df, "{name} = __import__('os')", [])) == 0  # text, never code


def test_lru_is_bounded():
    cache, built = LRU(2), []
    for k in (1, 2, 1, 3, 2):
        cache.get(k, lambda k=k: built.append(k) or k)
    assert len(cache) == 2 and built == [1, 2, 3, 2]  # 2 was evicted by 3 (1 was used more recently)


def test_upload_checks_size_parses_and_cleans_up(tmp_path):
    store = TraceStore(upload_cap=1000)
    good = write_trace(tmp_path / "t.json", [x("aten::mm", "cpu_op", 0, 10)]).read_bytes()
    url = "data:application/json;base64," + base64.b64encode(good).decode()
    tid = store.add_upload("../../etc/passwd", url)  # a hostile name is only a label
    entry = store.entry(tid)
    assert entry.path.parent == store.upload_dir() and entry.label == "passwd"
    with pytest.raises(InputError, match="upload limit"):
        store.add_upload("big.json", "data:;base64," + base64.b64encode(b"x" * 2000).decode())
    with pytest.raises(InputError):
        store.add_upload(
            "broken.json.gz", "data:;base64," + base64.b64encode(gzip.compress(b'{"traceEvents": [')).decode()
        )
    assert [p.name for p in store.upload_dir().iterdir()] == [entry.path.name]  # the broken one is gone
    with pytest.raises(InputError, match="hardware"):
        store.analysis(tid, "/etc/passwd")  # a path is not a preset: never read
    d = store.upload_dir()
    store.close()
    assert not d.exists()


def test_memory_figure_marks_the_peak_where_the_summary_puts_it():
    from analysis.memory import memory_summary, memory_timeline

    trace = load_trace(real_trace("resnet50_legacy_v100"))  # 2021 trace: deltas only, no totals
    summary, timeline = memory_summary(trace), memory_timeline(trace, 500)
    origin = int(trace.events["ts"].min())
    fig = figures.memory_figure(timeline, summary, origin)
    gpu = summary[summary["device"] == "gpu0"].iloc[0]
    star = next(t for t in fig.data if t.name == "peak rank0/gpu0")
    assert star.y[0] == pytest.approx(gpu["peak_above_start_bytes"] / 2**30)
    assert star.x[0] == pytest.approx((gpu["peak_above_start_ts"] - origin) / 1e6)
    curve = next(t for t in fig.data if t.name == "rank0/gpu0 allocated above start")
    assert max(curve.y) == pytest.approx(star.y[0])  # down-sampling kept the peak
    assert figures.memory_figure(timeline.iloc[0:0], summary.iloc[0:0], 0).layout.annotations  # empty: a message


def test_llm_steps_figure_one_trace_per_phase():
    from analysis.llm import llm_phases

    phases = llm_phases(load_trace(real_trace("sglang_qwen3_prefill_mi300x")))
    fig = figures.llm_steps_figure(phases)
    assert sorted(t.meta["phase"] for t in fig.data) == sorted(phases["phase"].unique())
    assert sum(len(t.x) for t in fig.data) == len(phases)


def test_what_if_units_match_a_full_analysis_on_that_hardware(tmp_path):
    from dashboard.views import units_for

    store = TraceStore()
    tid = store.add_path(real_trace("b200_eager"))
    fast = units_for(store, tid, "v100-sxm2-32gb")
    full = analyze(store.trace(tid), top=None, hardware="v100-sxm2-32gb").units
    pd.testing.assert_frame_equal(fast.reset_index(drop=True), full[fast.columns].reset_index(drop=True))
    assert set(fast.loc[fast["device"] != "cpu", "hardware"]) == {"v100-sxm2-32gb"}
    with pytest.raises(InputError):
        units_for(store, tid, "profiler/model/presets/b200.yaml")  # a path, not a preset name


# --- issue 10, section 6: reading it ------------------------------------------------------------


def test_op_table_shows_cpu_self_time_beside_total_and_demangled_names(tmp_path):
    """A CPU op of 10 µs with a 4 µs child: time (self) 6 µs, total 10 µs; the child 4 and 4.
    A HIP kernel name recorded mangled is shown demangled (c++filt's spelling), its key unchanged."""
    mangled = "_ZN5aiter6kernelIfEEvPT_"
    t = load_trace(
        write_trace(
            tmp_path / "t.json",
            [x("aten::linear", "cpu_op", 0, 10), x("aten::addmm", "cpu_op", 3, 4), x(mangled, "cpu_op", 20, 1)],
        )
    )
    ops = tables.op_table(tables.focus_units(analyze(t, top=None, sections=("roofline",)).units)).set_index("name")
    assert ops.loc["aten::linear", ["time_ns", "total_ns"]].tolist() == [6_000, 10_000]
    assert ops.loc["aten::addmm", ["time_ns", "total_ns"]].tolist() == [4_000, 4_000]
    assert ops.loc[mangled, "label"] == "void aiter::kernel<float>(float*)"
    shown = display(ops.reset_index())
    assert "void aiter::kernel<float>(float*)" in set(shown["name"]) and set(shown["total_us"]) >= {10.0, 4.0}


def test_roofs_are_labelled_lines_and_points_above_their_ceiling_are_marked():
    spec = load_spec("v100-sxm2-32gb")
    ops = _ops([("fast", 1_000_000, 2 * 1024**3, 6 * 2**20, "compute"), ("ok", 1_000_000, 2**30, 2**30, "memory")])
    ops["efficiency"] = [1.5, 0.5]  # 'fast' ran in 1/1.5 of its own floor: above its ceiling
    fig = figures.roofline_figure(tables.roofline_points(ops), tables.ceilings(spec, ["fp16"]))
    roofs = [t for t in fig.data if t.meta and "roof" in t.meta]
    assert len(roofs) == len(tables.ceilings(spec, ["fp16"]))  # one line per memory level and compute dtype
    for t in roofs:
        assert t.mode == "lines+text" and t.text[-1] and t.text[-1] in t.name  # each line carries its own label
    above = [t for t in fig.data if (t.meta or {}).get("points") == "above-ceiling"]
    assert len(above) == 1 and list(above[0].customdata[:, 1]) == ["fast"] and list(above[0].customdata[:, 0]) == [0]


def test_one_mfu_in_the_text_json_table_and_chart():
    """resnet50_legacy_v100 on a V100 (fp32 matrix peak 15.7 TFLOP/s, its preset): 6 ProfilerSteps
    of 176.078 + 173.992 + 176.918 + 181.259 + 176.468 + 164.261 = 1048.976 ms wall time, each
    launching 7.839888e11 effective FLOPs (4.703933e12 in all). MFU = 4.703933e12 / (15.7e12 *
    1.048976 s) = 28.56%: the one figure the text report, the JSON, the devices table and the
    chart's device line show (not the 42% over the steps' device windows, nor 30% over the trace
    window)."""
    import io

    from rich.console import Console

    from profiler.render.json import to_dict
    from profiler.render.roofline import render_equation

    a = analyze(load_trace(real_trace("resnet50_legacy_v100")), top=None)
    u = a.utilization.iloc[0]
    assert u["time_ns"] == 1_048_976_000 and u["time_base"] == "6 steps' wall time"
    assert u["compute_util"] == pytest.approx(4.703933e12 / (15.7e12 * 1.048976), rel=1e-6)
    dev = tables.device_summary(a).iloc[0]
    assert dev["mfu"] == u["compute_util"] and dev["mfu_over"] == "6 steps' wall time"
    line = next(t for t in figures.iterations_figure(a.iterations, a.utilization).data if (t.meta or {}).get("mfu"))
    assert line.y[0] == pytest.approx(100 * u["compute_util"], rel=1e-12)
    # each step's MFU is its FLOPs over its own wall time; weighted by those, the device's
    it = a.iterations
    assert np.average(it["mfu"], weights=it["wall_ns"]) == pytest.approx(u["compute_util"], rel=1e-9)
    assert to_dict(a, {})["summary"]["utilization"][0]["compute_util"] == pytest.approx(u["compute_util"], rel=1e-12)
    text = io.StringIO()
    render_equation(a, Console(file=text, width=200))
    out = text.getvalue()
    assert "over 6 steps' wall time" in out and "1.05 s" in out and "28.6% fp32" in out


def test_a_single_step_is_a_sentence_not_a_chart():
    import dataclasses

    from dashboard.pages import overview

    a = analyze(load_trace(real_trace("resnet50_legacy_v100")), top=None)
    one = dataclasses.replace(a, iterations=a.iterations.head(1))
    body = overview.body(one, "t", {})
    it = next(c for c in body if getattr(c, "id", None) == "overview-iterations")
    assert type(it).__name__ == "P" and "One profiled step" in it.children
    body = overview.body(a, "t", {})
    assert type(next(c for c in body if getattr(c, "id", None) == "overview-iterations")).__name__ == "Graph"


def test_timeline_has_a_legend(tmp_path):
    ev = [x("kernel_a", "kernel", 0, 5, pid=0, tid=7), x("aten::mm", "cpu_op", 0, 3)]
    t = load_trace(write_trace(tmp_path / "t.json", ev))
    from dashboard.timeline_data import build_index

    idx = build_index(t)
    bars = figures.timeline_figure(window(idx))
    assert bars.layout.showlegend and {d.name for d in bars.data} == {
        "device work (kernels, copies)",
        "host work (CPU ops, runtime calls)",
    }
    heat = figures.timeline_figure(window(idx, detail_limit=1))  # two intervals > 1: occupancy buckets
    assert heat.data[0].type == "heatmap" and heat.data[0].showscale  # its colour scale is its legend


@pytest.mark.parametrize("preset", ["mi300x", "a100-sxm-80gb", "h100-sxm", "mi250x"])
def test_every_memory_level_and_compute_dtype_is_its_own_labelled_roof(preset):
    spec = load_spec(preset)  # MI300X: hbm, infinity_cache, l2, lds; H100: hbm only
    roofs = tables.ceilings(spec, ["bf16", "fp32"])
    assert list(roofs.loc[roofs["kind"] == "memory", "name"]) == [m.name for m in spec.memory]
    fig = figures.roofline_figure(tables.roofline_points(_ops([("mm", 1_000_000, 2e12, 1e9, "compute")])), roofs)
    lines = {t.meta["level"]: t for t in fig.data if t.meta and "roof" in t.meta}
    assert set(lines) == set(roofs["name"])
    for m in spec.memory:  # each level: its name and bandwidth written at its end, e.g. 'l2 34.4 TB/s'
        assert lines[m.name].text[-1] == f"{m.name} {m.bandwidth / 1e12:.3g} TB/s"


def test_ops_above_their_ceiling_are_circled_on_a_real_trace():
    """resnet50_legacy_v100: gradient accumulations and ReLUs on data still in L2 run faster than
    the HBM floor (docs/roofline.md, "Cold memory"); analysis.ceiling flags them and the roofline
    circles exactly those points."""
    a = analyze(load_trace(real_trace("resnet50_legacy_v100")), top=None)
    ops = tables.op_table(a.units)
    points = tables.roofline_points(ops)
    flagged = set(points.loc[points["above_ceiling"].astype(bool), "op"])
    assert flagged  # the trace has some
    fig = figures.roofline_figure(points, tables.ceilings(load_spec("v100-sxm2-32gb"), ["fp32"]))
    circled = next(t for t in fig.data if (t.meta or {}).get("points") == "above-ceiling")
    assert set(circled.customdata[:, 0]) == flagged


def test_one_point_is_a_sentence_on_the_compare_memory_and_compiler_pages():
    from dashboard.pages.compare import changes_chart
    from dashboard.pages.compiler import _phases
    from dashboard.pages.memory import memory_chart

    one = pd.DataFrame(
        {
            "name": ["mm"],
            "shapes": ["[[2,2]]"],
            "delta_ns": [1000],
            "change": ["time"],
            "time_a_ns": [1000],
            "time_b_ns": [2000],
        }
    )
    assert type(changes_chart(one)).__name__ == "P" and "One op changed: mm" in changes_chart(one).children
    assert type(changes_chart(pd.concat([one, one]))).__name__ == "Graph"
    phase = pd.DataFrame({"phase": ["codegen"], "time_ns": [5_000_000], "steps": [3], "share": [1.0]})
    assert type(_phases(phase)).__name__ == "P" and "One compile phase: codegen" in _phases(phase).children
    timeline = pd.DataFrame(
        {"rank": [0], "device": ["gpu0"], "ts": [0], "allocated_bytes": [1.0], "reserved_bytes": [2.0]}
    )
    assert type(memory_chart(timeline, pd.DataFrame(), 0)).__name__ == "P"
