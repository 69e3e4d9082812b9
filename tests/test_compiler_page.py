"""torch.compile end to end: `perf profile --model ... --compile` writes the compile passes and
tables into its trace file, the Kineto reader reads them back on the compiler track, and the
dashboard's Compiler page shows the phases and the fusion map joined to kernel times.

The compile runs once per test session (`shared_compile`, also used by
tests/test_compile_report_cli.py, which reads the TORCH_TRACE directory the same run wrote):
torch.compile costs tens of seconds here.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.api import compile_tables, load_trace
from profiler.model.schema import Kind

ROOT = Path(__file__).resolve().parents[1]
GELU_OPS = ("aten::add", "aten::erf", "aten::mul")  # exact GELU: x * 0.5 * (1 + erf(x / sqrt(2)))


def shared_compile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run `perf profile --model examples.models:mlp --input 8x256 --compile --steps 2` once per
    test session (xdist workers share it through a lock file), with TORCH_TRACE set so the same
    compile also leaves torch's structured logs, and a fresh Inductor cache (a cold compile:
    every phase runs). Returns the trace file, the TORCH_TRACE directory and perf's stdout."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's directory, above the workers' own
    d = root / "perf-compile-mlp"
    out = {"trace": d / "mlp.json.gz", "torch_trace": d / "torch_trace", "stdout": d / "stdout.txt"}
    with open(root / "perf-compile-mlp.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / "done").exists():
            d.mkdir(exist_ok=True)
            env = {
                **os.environ,
                "TORCH_TRACE": str(out["torch_trace"]),
                "TORCHINDUCTOR_CACHE_DIR": str(d / "inductor_cache"),
            }
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "profiler",
                    "profile",
                    "--model",
                    "examples.models:mlp",
                    "--input",
                    "8x256",
                    "--compile",
                    "--steps",
                    "2",
                    "-o",
                    str(out["trace"]),
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert r.returncode == 0, r.stderr[-3000:]
            out["stdout"].write_text(r.stdout)
            (d / "done").write_text("ok")
    return out


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return shared_compile(tmp_path_factory)


def test_trace_file_carries_the_compile_passes_before_the_steps(compiled):
    trace = load_trace(compiled["trace"])
    ev = trace.events
    passes = ev[ev["kind"] == Kind.COMPILE_PASS.value]
    assert len(passes) >= 10 and set(passes["source"].astype(str)) == {"compiler"}
    tracks = set(passes["track"].astype(str))
    assert "rank0/compiler" in tracks and tracks <= {"rank0/compiler"} | {
        t for t in tracks if t.startswith("rank0/compiler/worker")
    }
    assert {"entire_frame_compile", "inductor_compile"} <= set(passes["name"].astype(str))
    steps = ev[ev["name"].astype(str).str.startswith("ProfilerStep#")]
    assert len(steps) == 2
    # compiled in the unrecorded warm-up: every pass ends before the first recorded step starts
    assert int((passes["ts"] + passes["dur"]).max()) <= int(steps["ts"].min())
    assert not passes["step"].ge(0).any() and not trace.problems  # no step claims them; nothing was skipped reading
    # the runtime events are untouched: host ops on their threads, the compiled kernel's range among them
    assert any(n.startswith("graph_") and "cpp_fused_gelu" in n for n in ev.loc[ev["kind"] == "op", "name"].astype(str))


def test_compile_tables_from_the_trace_and_the_summary(compiled):
    trace = load_trace(compiled["trace"])
    t = compile_tables(trace)
    phases = t["phases"]
    assert {"dynamo_tracing", "aot_autograd", "inductor_lowering", "codegen"} <= set(phases["phase"])
    assert phases["share"].sum() == pytest.approx(1.0)
    # phase self times sum to the compile's wall time on the compiling thread (one frame compile here)
    ev = trace.events
    main = ev[(ev["track"] == "rank0/compiler")]
    outer = main[main["ts"] == main["ts"].min()]
    workers = ev[ev["track"].astype(str).str.startswith("rank0/compiler/worker")]
    assert int(phases["time_ns"].sum()) == int(outer["dur"].max()) + int(workers[workers["depth"] == 0]["dur"].sum())
    # the tables perf profile carried in the file: one frame compile, the caches it missed (fresh cache dir)
    assert len(t["compiles"]) == 1 and t["compiles"]["duration_ns"].iloc[0] > 0
    assert set(t["caches"]["state"]) == {"miss"} and t["graph_breaks"].empty and t["recompiles"].empty
    fused = t["fusion"][t["fusion"]["kind"] == "cpp"]
    assert len(fused) == 1 and fused["aten_ops"].iloc[0] == GELU_OPS
    k = fused.iloc[0]
    # joined to the trace: the kernel's range ran once per recorded step; 8x1024 fp32 in and out
    assert k["calls"] == 2 and k["runs"] == 2 and k["time_ns"] > 0 and k["bound"] in ("memory", "compute", "runtime")
    assert k["bytes_read"] == 8 * 1024 * 4 and k["bytes_written"] == 8 * 1024 * 4
    assert k["per_run_ns"] == pytest.approx(k["time_ns"] / 2)
    assert k["efficiency"] == pytest.approx(
        max(k["t_compute_ns"], k["t_memory_ns"], k["t_runtime_ns"]) / k["per_run_ns"]
    )
    mm = t["fusion"][t["fusion"]["kind"] == "extern"].iloc[0]
    assert mm["calls"] == 4 and mm["runs"] == 2  # two addmm calls per run of the graph
    summary = compiled["stdout"].read_text()
    assert "torch.compile" in summary and "kernel_compile" in summary and "graph breaks" in summary
    assert "fx_graph miss" in summary


def test_compiler_page_shows_phases_and_the_fusion_map(compiled, tmp_path):
    pytest.importorskip("selenium")
    from dashboard.testing import CHROMEDRIVER, CHROMIUM, chromium, pick, serving, wait_for

    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip("needs Debian's chromium and chromium-driver (make browser)")
    from selenium.webdriver.common.by import By

    from dashboard.app import create_app
    from tests.conftest import write_trace, x

    eager = write_trace(tmp_path / "eager.json", [x("aten::mm", "cpu_op", 0, 50)])
    app = create_app([compiled["trace"], eager])
    expected = compile_tables(load_trace(compiled["trace"]))["phases"]
    try:
        with serving(app) as url, chromium() as d:
            d.get(url + "/compiler")
            wait_for(lambda: d.find_elements(By.CSS_SELECTOR, "#compiler-fusion td"), 60, what="the fusion map")
            bars = wait_for(
                lambda: d.execute_script(
                    "const gd = document.querySelector('#compiler-phases .js-plotly-plot');"
                    # _fullData: arrays decoded (plotly ships typed arrays as base64)
                    "if (!gd || !gd._fullData) return null;"
                    "return gd._fullData.map(t => ({type: t.type, x: Array.from(t.x), y: Array.from(t.y)}));"
                ),
                30,
                what="the phases chart",
            )
            assert len(bars) == 1 and bars[0]["type"] == "bar"
            assert list(reversed(bars[0]["y"])) == expected["phase"].tolist()
            assert [round(v * 1e9) for v in reversed(bars[0]["x"])] == expected["time_ns"].tolist()
            rows = [
                [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                for tr in d.find_elements(By.CSS_SELECTOR, "#compiler-fusion tbody tr")
            ]
            header = [th.text for th in d.find_elements(By.CSS_SELECTOR, "#compiler-fusion th")]
            gelu = [dict(zip(header, r)) for r in rows if r[1].startswith("cpp_fused") and "gelu" in r[1]]
            assert len(gelu) == 1, rows
            g = gelu[0]
            assert g["ATen ops"] == " + ".join(GELU_OPS) and g["runs as"].endswith(g["kernel"]) and g["calls"] == "2"
            assert g["bound"] in ("memory", "compute", "runtime") and g["time"] != "–"
            assert (
                "fx_graph" in d.find_element(By.ID, "compiler-caches").text
                and "cache miss" in d.find_element(By.ID, "compiler-caches").text
            )
            assert "None" in d.find_element(By.ID, "compiler-breaks").text
            # a trace without compiler data says so
            pick(d, "trace-select", "eager.json")
            wait_for(lambda: d.find_elements(By.ID, "compiler-empty"), 60, what="the no-data message")
            assert "No compiler data in this trace" in d.find_element(By.ID, "compiler-empty").text
    finally:
        app.perf_store.close()


def test_perfetto_export_keeps_the_compiler_track(compiled, tmp_path):
    from profiler.api import perfetto_bytes

    trace = load_trace(compiled["trace"])
    out = tmp_path / "mlp.pftrace"
    out.write_bytes(perfetto_bytes(trace))
    back = load_trace(out)
    cols = ["name", "ts", "dur", "track", "source"]

    def passes(t):
        ev = t.events
        p = ev.loc[ev["kind"] == Kind.COMPILE_PASS.value, cols].astype({"name": str, "track": str, "source": str})
        return p.sort_values(cols).reset_index(drop=True)

    assert len(passes(trace)) > 10 and passes(back).equals(passes(trace))
    a, b = compile_tables(trace), compile_tables(back)
    assert b["phases"].equals(a["phases"]) and b["fusion"]["kernel"].tolist() == a["fusion"]["kernel"].tolist()


def test_chrome_json_export_keeps_the_compiler_track(compiled, tmp_path):
    from collectors.perfetto.chrome import write_chrome_json

    trace = load_trace(compiled["trace"])
    (out,) = write_chrome_json(trace, tmp_path / "mlp.json")
    back = load_trace(out)
    cols = ["name", "ts", "dur", "track", "source"]

    def passes(t):
        ev = t.events
        p = ev.loc[ev["kind"] == Kind.COMPILE_PASS.value, cols].astype({"name": str, "track": str, "source": str})
        return p.sort_values(cols).reset_index(drop=True)

    assert len(passes(trace)) > 10 and passes(back).equals(passes(trace))
