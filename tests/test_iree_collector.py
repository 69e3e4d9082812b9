"""The IREE collector end to end on two tiny models (tests/iree_models.py), one compile each:
the pass tree, the dispatches with their fused ops, FLOPs and source locations, the per-dispatch
times and the trace file. Skipped when IREE is not installed (pip install '.[iree]')."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("iree.turbine.aot")
pytest.importorskip("iree.runtime")

import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from collectors.iree.passes import RESOLUTION_NS  # noqa: E402
from profiler.api.iree import profile_iree  # noqa: E402
from profiler.cli import app  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import iree_models as M  # noqa: E402

MODEL_FILE = str(Path(M.__file__).resolve())
RUNS = 5


def _run(factory, shape, tmp_path_factory):
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("iree") / "trace.json.gz"
    return profile_iree(factory().eval(), [torch.randn(*shape)], out=out, runs=RUNS)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    return _run(M.mlp, (M.B, M.D_IN), tmp_path_factory)


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    return _run(M.attention, (M.AB, M.AS, M.AD), tmp_path_factory)


@pytest.fixture(params=["mlp", "attention"])
def run(request):
    return request.getfixturevalue(request.param)


def test_pass_tree_sums_to_the_compile_within_the_stated_rest(run):
    tree = run.passes
    roots = sum(r.wall_ns for r in tree.roots)
    assert roots + tree.rest_ns == tree.total_ns
    assert 0 <= tree.rest_ns < tree.total_ns  # no pass counted twice: the roots fit in the Total
    assert tree.total_ns <= run.compile_ns  # the compiler's Total lies inside the process's wall time
    for r in tree.roots:
        for node, _ in r.walk():  # re-nested pipelines fit in the time MLIR's own children leave, to 0.1 ms a timer
            hosted = sum(c.wall_ns for c in node.children) - node.timed_children_ns
            assert hosted <= max(node.wall_ns - node.timed_children_ns, 0) + RESOLUTION_NS * len(node.children)
    names = {n.name for r in tree.roots for n, _ in r.walk()}
    assert "TranslateAllExecutablesPass" in names or "SerializeAllExecutablesPass" in names


def test_each_dispatch_names_fused_ops_and_a_line_of_the_model(run):
    lines = Path(MODEL_FILE).read_text().splitlines()
    assert len(run.dispatches) >= 2
    for d in run.dispatches.itertuples(index=False):
        assert d.fused_ops and all(op.startswith(("linalg.", "iree_linalg_ext.")) for op in d.fused_ops)
        ours = [loc for loc in d.locations if loc.split(" ", 1)[1].rsplit(":", 1)[0] == MODEL_FILE]
        assert ours, d.locations
        for loc in ours:  # the line is a line of the forward; a module's line calls that module
            module, where = loc.split(" ", 1)
            text = lines[int(where.rsplit(":", 1)[1]) - 1]
            if module != "<top>":
                assert f"self.{module}(" in text, (loc, text)


def test_matmul_flops_are_2mnk_of_the_layers(mlp):
    # fc1: M=B=16 rows, N=D_HID=128, K=D_IN=64 -> 2*16*128*64 = 262,144; fc2: 2*16*32*128 = 131,072;
    # the fused bias add is one addf per output element (16*128 = 2,048 and 16*32 = 512); relu 0
    fc1 = 2 * M.B * M.D_HID * M.D_IN
    fc2 = 2 * M.B * M.D_OUT * M.D_HID
    got = sorted(mlp.dispatches["flops"].tolist())
    assert got == [fc2 + M.B * M.D_OUT, fc1 + M.B * M.D_HID]
    assert set(mlp.dispatches["family"]) == {"gemm"}
    # bytes: the bindings, fp32: fc1 reads x (16x64), W1 (128x64), b1 (128), writes 16x128
    d = mlp.dispatches.sort_values("flops").iloc[-1]
    assert d["bytes"] == 4 * (M.B * M.D_IN + M.D_HID * M.D_IN + M.D_HID + M.B * M.D_HID)


def test_attention_matmuls(attention):
    t = attention.dispatches
    bh, s, hd = M.AB * M.AH, M.AS, M.AD // M.AH
    proj = 2 * (M.AB * M.AS) * M.AD * M.AD  # a projection: M = B*S = 16 rows, N = K = 32
    scores = 2 * bh * s * s * hd  # q @ k^T per head: 2 * 4 * 8 * 8 * 16 = 8,192
    ops = " ".join(op for ops in t["fused_ops"] for op in ops)
    assert "batch_matmul" in ops and "softmax" in ops
    gemm = t[t["family"] == "gemm"]
    # each gemm dispatch's FLOPs: its contraction's 2MNK plus at most one op per output element
    assert any(proj <= f <= proj + M.AB * M.AS * M.AD for f in gemm["flops"])
    assert any(scores <= f <= scores + bh * s * s for f in gemm["flops"])
    # q, k and v are the same shape: one executable, run three times a call
    assert t["per_call"].max() == 3


def test_dispatch_times_joined_and_roofline(run):
    t = run.dispatches
    assert (t["runs"] >= RUNS).all() and (t["mean_ns"] > 0).all()
    assert run.iree_ns == pytest.approx(t["per_call_ns"].sum())
    assert set(t["bound"]) <= {"compute", "memory", "runtime"}
    assert (t["floor_ns"] > 0).all() and (t["hardware"] == "generic-x86-cpu").all()


def test_trace_reads_back_and_exports(mlp, tmp_path):
    from profiler.api import analyze, load_trace

    trace = load_trace(mlp.trace)
    kinds = trace.events["kind"].astype(str).value_counts()
    timers = sum(1 for r in mlp.passes.roots for _ in r.walk())
    assert kinds["compile_pass"] == timers
    assert kinds["kernel"] == int(mlp.dispatches["runs"].sum())
    # the dispatches ran on the host CPU: device 'cpu0', floored on the CPU spec, each with the
    # FLOPs and bytes profile_iree counted (fc1's 2*16*128*64 + 16*128 = 264,192, fc2's 131,584)
    kernels = trace.events[trace.events["kind"] == "kernel"]
    assert set(kernels["device"].astype(str)) == {"cpu0"}
    a = analyze(trace)
    assert a.hardware["rank0/cpu0"] == "generic-x86-cpu"
    units = a.units[a.units["device"].astype(str) == "cpu0"]
    assert len(units) == len(kernels) and (units["floor_ns"] > 0).all() and (units["efficiency"] > 0).all()
    assert set(units["bound"].astype(str)) <= {"compute", "memory", "runtime"}
    assert sorted(units.groupby("name", observed=True)["flops"].first()) == sorted(mlp.dispatches["flops"])
    out = tmp_path / "t.perfetto-trace"
    r = CliRunner().invoke(app, ["export", str(mlp.trace), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0
    r = CliRunner().invoke(app, ["analyze", str(mlp.trace), "--json"])
    assert r.exit_code == 0, r.output


def test_eager_comparison_by_source_line(run):
    """Each dispatch's line is a row with the eager time of the torch calls on that line; the IREE
    column adds up to the dispatches' time per call (shared executables' other runs included)."""
    c = run.compare
    lines = c[c["location"].str.startswith(MODEL_FILE)]
    assert run.iree_ns == pytest.approx(c["iree_ns"].sum())
    located = lines[lines["iree_ns"].notna()]
    assert len(located) >= 2 and (located["eager_ns"] > 0).all()
    text = Path(MODEL_FILE).read_text().splitlines()
    for r in located.itertuples(index=False):  # a row's modules are called on its line
        line = text[int(r.location.rsplit(":", 1)[1]) - 1]
        assert all(m == "<top>" or f"self.{m}(" in line for m in r.modules.split(",")), (r, line)


def test_dashboard_compiler_page_shows_the_pass_tree_and_dispatches(mlp):
    pytest.importorskip("selenium")
    import os

    from dashboard.testing import CHROMEDRIVER, CHROMIUM, chromium, serving, wait_for

    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip("needs Debian's chromium and chromium-driver (make browser)")
    from selenium.webdriver.common.by import By

    from dashboard.app import create_app

    def table(d, id):
        header = [th.text for th in d.find_elements(By.CSS_SELECTOR, f"#{id} th")]
        return [
            dict(zip(header, [td.text for td in tr.find_elements(By.TAG_NAME, "td")]))
            for tr in d.find_elements(By.CSS_SELECTOR, f"#{id} tbody tr")
        ]

    app = create_app([mlp.trace])
    try:
        with serving(app) as url, chromium() as d:
            d.get(url + "/compiler")
            wait_for(lambda: d.find_elements(By.CSS_SELECTOR, "#compiler-iree-dispatches td"), 60, what="dispatches")
            passes = table(d, "compiler-iree-passes")
            largest = max(mlp.passes.roots, key=lambda r: r.wall_ns)
            assert passes[0]["pass"] == largest.name  # largest root first, then its children, indented
            assert passes[-1]["pass"].startswith("(rest")
            rows = {r["dispatch"]: r for r in table(d, "compiler-iree-dispatches")}
            assert set(rows) == set(mlp.dispatches["name"])
            fc1 = mlp.dispatches.sort_values("flops").iloc[-1]
            shown = rows[fc1["name"]]
            # fc1: 2*16*128*64 + 16*128 = 264,192 FLOP, shown to 3 digits; linalg ops it fused; its line
            assert shown["FLOPs"] == "264 kFLOP" and "linalg.matmul" in shown["fused ops"]
            assert "fc1 iree_models.py:" in shown["from"] and shown["bound"] in ("compute", "memory", "runtime")
            lines = table(d, "compiler-iree-compare")
            assert any(r["modules"].startswith("fc1") and r["eager"] != "–" and r["IREE"] != "–" for r in lines)
    finally:
        app.perf_store.close()


def test_cli_json(tmp_path):
    out = tmp_path / "m.json.gz"
    r = CliRunner().invoke(
        app,
        [
            "profile",
            f"{MODEL_FILE}:mlp",
            "--backend",
            "iree",
            "--input",
            f"{M.B}x{M.D_IN}",
            "-o",
            str(out),
            "--json",
            "--steps",
            "3",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["compile_ns"] > 0 and doc["passes"] and out.exists()
    for key in ("name", "wall_ns", "children"):
        assert key in doc["passes"][0]
    for d in doc["dispatches"]:
        assert {"name", "fused_ops", "locations", "flops", "bytes", "mean_ns"} <= set(d)
    assert {"location", "modules", "iree_ns", "eager_ns", "ratio"} <= set(doc["compare"][0])
