"""The dashboard in a real headless Chromium (selenium + chromedriver), on real traces.

One server (a thread on a free port) and one browser for the module. Screenshots go to
tests/artifacts/dashboard/ (gitignored).
"""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import pytest

from dashboard.app import create_app
from dashboard.pages.ops import apply_query, display
from dashboard.testing import CHROMEDRIVER, CHROMIUM, chromium, graph_data, pick, serving, update_sizes, wait_for
from dashboard.views import ops_for
from profiler.api import load_trace
from profiler.model.hardware import load_spec
from tests.conftest import real_trace, write_trace, x

# a real browser waiting on callbacks: under a loaded parallel run its waits time out, so these
# run in the serial phase, alone (make test)
pytestmark = pytest.mark.serial

pytest.importorskip("selenium")
if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip("needs Debian's chromium and chromium-driver (make browser)", allow_module_level=True)

ART = Path(__file__).resolve().parent / "artifacts" / "dashboard"
SECRET = "hf_abcdefghijklmnopqrstu"
CAP = 4 * 2**20  # the upload cap of the app under test, small so the over-cap file stays small


def _slow_copy(src: Path, out: Path) -> tuple[str, int]:
    """Copy of a trace with the kernel that takes most time twice as long; (its name, its total µs)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    totals: dict[str, float] = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            totals[e["name"]] = totals.get(e["name"], 0.0) + float(e["dur"])
    name = max(totals, key=totals.get)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("name") == name:
            e["dur"] = float(e["dur"]) * 2
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return name, round(totals[name])


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("dash")
    b200 = real_trace("b200_eager")
    slow = d / "b200_slow.json.gz"
    kernel, total_us = _slow_copy(b200, slow)
    secret = write_trace(
        d / "secret_run.json",
        [x("aten::mm", "cpu_op", 0, 50, **{"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]})],
        env={"HF_TOKEN": SECRET},
        traceName=f"run with HF_TOKEN={SECRET}",
    )
    app = create_app(
        [
            b200,
            real_trace("dlrm_8rank_v100"),
            slow,
            secret,
            real_trace("resnet50_legacy_v100"),
            real_trace("sglang_qwen3_prefill_mi300x"),
        ],
        upload_cap=CAP,
    )
    ART.mkdir(parents=True, exist_ok=True)  # shared by xdist workers: screenshots only, each under its own name
    downloads = d / "downloads"
    with serving(app) as url, chromium(download_dir=downloads) as driver:
        yield {
            "url": url,
            "driver": driver,
            "app": app,
            "store": app.perf_store,
            "kernel": kernel,
            "slow_us": total_us,
            "dir": d,
            "downloads": downloads,
        }
    app.perf_store.close()


def _open(env, path: str, ready: str):
    from selenium.webdriver.common.by import By

    d = env["driver"]
    d.get(env["url"] + path)
    wait_for(lambda: d.find_elements(By.CSS_SELECTOR, ready), 60, what=ready)
    return d


def _shot(env, name: str) -> None:
    time.sleep(0.3)  # let plotly finish its transition before the picture
    env["driver"].save_screenshot(str(ART / f"{name}.png"))


def _cells(d, table: str, column: str) -> list:
    """The body cells of one column of a DataTable, top row first."""
    from selenium.webdriver.common.by import By

    return d.find_elements(By.CSS_SELECTOR, f"#{table} td[data-dash-column={column}]")


def _text(d, css: str) -> str:
    from selenium.webdriver.common.by import By

    return d.find_element(By.CSS_SELECTOR, css).text


def test_overview_shows_the_trace_and_its_split(env):
    d = _open(env, "/", "#overview-devices")
    what = _text(d, "#overview-what")
    assert "NVIDIA B200" in what and "b200" in what and "eager_trace.json.gz" in what
    devices = _text(d, "#overview-devices")
    assert "rank0/gpu0" in devices and "MFU" in devices
    assert len(d.find_elements("css selector", "#overview-advice li")) >= 1
    eq = wait_for(lambda: graph_data(d, "overview-equation"), what="equation figure")
    assert {t["name"] for t in eq} >= {"compute", "memory", "idle_host"}
    _shot(env, "overview")


def _roofs(d, kind: str) -> list[dict]:
    return [t for t in (graph_data(d, "roofline-graph") or []) if (t["meta"] or {}).get("roof") == kind]


def test_roofline_points_roofs_click_and_hardware_switch(env):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    d = _open(env, "/roofline", "#roofline-ceilings li")
    wait_for(lambda: _roofs(d, "memory"), what="roofs")
    b200 = load_spec("b200")
    assert [t["meta"]["level"] for t in _roofs(d, "memory")] == [m.name for m in b200.memory]
    points = [t for t in graph_data(d, "roofline-graph") if (t["meta"] or {}).get("points") == "ops"]
    assert sum(t["n"] for t in points) > 0
    _shot(env, "roofline")

    def click_last_point() -> bool:  # found afresh each try: Plotly may redraw the graph under us
        dot = d.find_elements(By.CSS_SELECTOR, "#roofline-graph .scatterlayer path.point")[-1]
        ActionChains(d).move_to_element(dot).pause(0.3).click().perform()
        return True

    wait_for(click_last_point, 20, what="a click on a point of the graph")
    # the text read inside the retried predicate: the details panel may be re-rendered between
    # finding it and reading it (a stale element, seen once in a full serial run)
    details = wait_for(lambda: d.find_elements(By.CSS_SELECTOR, "#op-details")[0].text, 20, what="op details")
    names = d.execute_script(
        "return document.querySelector('#roofline-graph .js-plotly-plot')._fullData"
        ".filter(t => t.meta && t.meta.points === 'ops').flatMap(t => t.customdata.map(c => c[1]));"
    )
    assert any(n in details for n in names) and "efficiency" in details
    wait_for(
        lambda: any((t["meta"] or {}).get("points") == "selected" for t in graph_data(d, "roofline-graph")), what="ring"
    )
    _shot(env, "roofline-selected")

    before = [t["y"] for t in _roofs(d, "memory")]
    pick(d, "hw-select", "v100-sxm2-32gb")
    v100 = load_spec("v100-sxm2-32gb")
    wait_for(lambda: len(_roofs(d, "memory")) == len(v100.memory), what="the V100's three memory roofs")
    assert [t["meta"]["value"] for t in _roofs(d, "memory")] == [m.bandwidth for m in v100.memory]
    assert _roofs(d, "memory")[0]["y"] != before[0]  # the roof moved
    assert "memory: l2 = 3.13 TB/s" in _text(d, "#roofline-ceilings")  # a level the B200 preset does not have
    assert "v100-sxm2-32gb" in _text(d, "#roofline-caption")
    _shot(env, "roofline-v100")


def test_ops_table_first_row_and_sort_by_efficiency(env):
    from selenium.webdriver.common.by import By

    d = _open(env, "/ops", "#ops-table td[data-dash-column=name]")
    store = env["store"]
    tid = store.entries()[0].trace_id
    ops = ops_for(store, tid, None)
    first = _cells(d, "ops-table", "name")[0].text
    assert first == ops.iloc[0]["name"] and ops.iloc[0]["time_ns"] == ops["time_ns"].max()
    expected = {
        dirn: apply_query(display(ops), "", [{"column_id": "efficiency", "direction": dirn}])["id"].head(25).tolist()
        for dirn in ("asc", "desc")
    }

    def ids() -> list[int]:
        return [int(c.text) for c in _cells(d, "ops-table", "op")]

    header = "#ops-table th[data-dash-column=efficiency] .column-header--sort"
    seen = []
    for _ in range(2):  # two clicks: one direction, then the other
        d.find_element(By.CSS_SELECTOR, header).click()
        seen.append(
            wait_for(
                lambda: ids() if ids() in expected.values() and ids() not in seen else None,
                20,
                what="rows sorted by efficiency",
            )
        )
    assert sorted(map(tuple, seen)) == sorted(map(tuple, expected.values()))
    _shot(env, "ops-sorted")

    _cells(d, "ops-table", "name")[1].click()
    name = _cells(d, "ops-table", "name")[1].text
    wait_for(lambda: name in _text(d, "#ops-details"), 20, what="op details")
    time.sleep(0.5)
    bg = _cells(d, "ops-table", "shapes")[1].value_of_css_property("background-color")
    assert bg.replace(" ", "") in ("rgba(255,232,168,1)", "rgb(255,232,168)")  # the selected row is highlighted


def test_timeline_tracks_zoom_and_export(env):
    from selenium.webdriver.common.by import By

    d = _open(env, "/timeline", "#timeline-caption")
    pick(d, "trace-select", "dlrm_8rank_v100")
    wait_for(
        lambda: (
            "rank7"
            in json.dumps(
                d.execute_script(
                    "const g = document.querySelector('#timeline-graph .js-plotly-plot'); "
                    "return g && g.layout.yaxis.categoryarray;"
                )
            )
        ),
        60,
        what="the 8 ranks' tracks",
    )
    rows = d.execute_script(
        "return document.querySelector('#timeline-graph .js-plotly-plot').layout.yaxis.categoryarray;"
    )
    assert {r.split("/")[0] for r in rows} == {f"rank{i}" for i in range(8)}
    assert any("/gpu" in r for r in rows) and any("/cpu/" in r for r in rows)
    _shot(env, "timeline")
    full = _text(d, "#timeline-caption")
    d.execute_script(
        "const g = document.querySelector('#timeline-graph .js-plotly-plot');"
        "Plotly.relayout(g, {'xaxis.range[0]': 1.0, 'xaxis.range[1]': 1.5});"
    )
    wait_for(
        lambda: _text(d, "#timeline-caption") != full and "1 ms to 1.5 ms" in _text(d, "#timeline-caption"),
        30,
        what="the zoomed window re-queried",
    )
    xr = d.execute_script("return document.querySelector('#timeline-graph .js-plotly-plot').layout.xaxis.range;")
    assert xr == pytest.approx([1.0, 1.5])
    _shot(env, "timeline-zoomed")
    assert max(update_sizes(d)) < 2_000_000  # callback responses stay small: aggregated, never raw events

    d.find_element(By.ID, "export-btn").click()
    out = wait_for(
        lambda: [p for p in env["downloads"].glob("dlrm_8rank_v100*.perfetto-trace.gz")], 60, what="the export download"
    )[0]
    wait_for(lambda: not list(env["downloads"].glob("*.crdownload")), 30, what="the download to finish")
    # a native Perfetto trace (profiler.api.perfetto_bytes): it reads back with every event
    pftrace = env["dir"] / "export.pftrace"
    pftrace.write_bytes(gzip.decompress(out.read_bytes()))
    back = load_trace(pftrace)
    trace = env["store"].trace(next(e.trace_id for e in env["store"].entries() if e.label == "dlrm_8rank_v100"))
    assert len(back.events) == len(trace.events) and back.ranks == trace.ranks


def _upload(d, path: Path) -> None:
    from selenium.webdriver.common.by import By

    d.find_element(By.CSS_SELECTOR, "#upload input[type=file]").send_keys(str(path))


def test_upload_good_broken_and_too_big(env):
    from selenium.webdriver.common.by import By

    d = _open(env, "/", "#overview-devices")
    _upload(d, real_trace("nccl_meta_a100"))
    wait_for(lambda: d.find_elements(By.ID, "upload-ok"), 60, what="upload accepted")
    wait_for(lambda: "nccl_data.json.gz" in _text(d, "#overview-what"), 60, what="the uploaded trace's overview")
    _shot(env, "upload-ok")

    broken = env["dir"] / "broken.json.gz"
    broken.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": ')[:-9])  # truncated gzip
    _upload(d, broken)
    err = wait_for(lambda: d.find_elements(By.ID, "upload-error"), 30, what="the upload error")[0].text
    assert err.startswith("broken.json.gz:") and "perf-dashboard-" not in err  # no server path leaks
    _shot(env, "upload-broken")
    assert all(p.name.endswith((".json", ".json.gz")) for p in env["store"].upload_dir().iterdir())
    assert len(list(env["store"].upload_dir().iterdir())) == 1  # the broken file was removed

    big = env["dir"] / "big.json"
    big.write_bytes(b" " * (CAP + 2**20))
    _upload(d, big)
    wait_for(lambda: "upload limit" in _text(d, "#upload-msg"), 30, what="the size error")
    _shot(env, "upload-too-big")
    d = _open(env, "/ops", "#ops-table td[data-dash-column=name]")  # still serving
    assert _cells(d, "ops-table", "name")[0].text


def test_compare_shows_the_slowed_kernel_as_a_regression(env):
    from selenium.webdriver.common.by import By

    d = _open(env, "/compare", "#compare-table")
    pick(d, "compare-a", "eager_trace")
    pick(d, "compare-b", "b200_slow")
    kernel = env["kernel"]

    def row():
        for tr in d.find_elements(By.CSS_SELECTOR, "#compare-table tr"):
            cells = {td.get_attribute("data-dash-column"): td for td in tr.find_elements(By.CSS_SELECTOR, "td")}
            if "name" in cells and cells["name"].text == kernel and cells["kind"].text == "kernel":
                return cells
        return None

    cells = wait_for(row, 60, what="the slowed kernel's row")
    assert float(cells["delta_us"].text) == pytest.approx(env["slow_us"], rel=1e-3)  # twice as long: + its old time
    assert cells["change"].text == "time"
    bg = cells["name"].value_of_css_property("background-color").replace(" ", "")
    assert bg in ("rgba(253,224,220,1)", "rgb(253,224,220)")  # the regression colour
    assert "B - A" in _text(d, "#compare-summary")
    _shot(env, "compare")


def test_secrets_in_metadata_never_reach_the_page(env):
    d = _open(env, "/", "#overview-devices")
    pick(d, "trace-select", "secret_run")
    wait_for(lambda: "secret_run.json" in _text(d, "#overview-what"), 60, what="the secret trace's overview")
    d.execute_script("document.querySelector('#page details').open = true;")
    meta = _text(d, "#overview-meta")
    assert "HF_TOKEN" in meta  # the metadata is shown, its value is not
    pages = {
        "/": "#overview-devices",
        "/roofline": "#roofline-caption",
        "/timeline": "#timeline-caption",
        "/ops": "#ops-count",
        "/compare": "#compare-body",
        "/memory": "#memory-body",
        "/llm": "#llm-body",
    }
    for path, ready in pages.items():
        d = _open(env, path, ready)
        if path != "/compare":
            pick(d, "trace-select", "secret_run")
        time.sleep(1.0)
        assert SECRET not in d.page_source, path
    _shot(env, "secret-redacted")


def test_memory_page_shows_the_allocator_curve_and_its_peak(env):
    d = _open(env, "/memory", "#memory-body")
    pick(d, "trace-select", "worker0.1623143089861")
    wait_for(lambda: "rank0/gpu0" in _text(d, "#memory-summary"), 60, what="the memory summary")
    traces = wait_for(lambda: graph_data(d, "memory-graph"), 30, what="the memory figure")
    assert {t["name"] for t in traces} >= {"rank0/gpu0 allocated above start", "peak rank0/gpu0"}
    from analysis.memory import memory_summary
    from dashboard.components import fmt_si

    trace = env["store"].trace(next(e.trace_id for e in env["store"].entries() if e.label.startswith("worker0")))
    gpu = memory_summary(trace).set_index("device").loc["gpu0"]
    assert fmt_si(gpu["peak_above_start_bytes"], "B") in _text(d, "#memory-summary")  # 2,791,636,480 B -> '2.79 GB'
    _shot(env, "memory")


def test_llm_page_shows_the_serving_steps(env):
    from analysis.llm import llm_phases, llm_summary

    d = _open(env, "/llm", "#llm-body")
    pick(d, "trace-select", "sglang_Qwen3-8B_prefilldecode")
    steps = llm_phases(
        env["store"].trace(next(e.trace_id for e in env["store"].entries() if e.label.startswith("sglang")))
    )
    expected = llm_summary(steps)
    summary = wait_for(
        lambda: "tokens/s" in _text(d, "#llm-summary") and _text(d, "#llm-summary"), 60, what="the LLM summary"
    )
    for r in expected.itertuples(
        index=False
    ):  # one row per (rank, phase): steps, tokens and tokens/s as analysis.llm says
        assert f"{r.rank} {r.phase} {r.steps} {r.tokens:,.0f}" in summary and f"{r.tokens_per_s:,.1f}" in summary
    if len(steps) == 1:  # this trace holds one prefill step: a sentence, not a chart of one point (issue 10)
        assert wait_for(lambda: "One serving step" in _text(d, "#llm-graph"), 30, what="the one-step sentence")
    else:
        phases = {
            (t["meta"] or {}).get("phase")
            for t in wait_for(lambda: graph_data(d, "llm-graph"), 30, what="steps figure")
        }
        assert phases == set(expected["phase"])
    _shot(env, "llm")
