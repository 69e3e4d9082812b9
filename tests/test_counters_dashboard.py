"""The dashboard's Counters page: the measured hierarchical roofline and the per-kernel table from
`perf dashboard --counters`; a bad counter file is one line, exit 2, before anything is served."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from profiler.api import counters_report, load_counters
from profiler.cli import app as cli
from tests.conftest import COUNTERS


@pytest.fixture(scope="module")
def report():
    return counters_report(load_counters(COUNTERS / "rocprof_mi325x_gemm"), hardware="mi325x")


def test_measured_roofline_figure_has_a_roof_per_level_and_the_kernels(report):
    from dashboard.pages.counters import body, per_kernel

    content = body(report)
    graph = next(c for c in content if getattr(c, "id", None) == "counters-roofline")
    names = [t.name for t in graph.figure.data]
    # mi325x levels the counters measure: hbm (dram), l2, lds (the vector L1 has no preset level)
    assert {"memory: dram (hbm)", "memory: l2 (l2)", "memory: lds (lds)"} <= set(names)
    assert "compute: bf16 matrix" in names  # the GEMMs' peak, 1307.4e12 (AMD MI325X data sheet)
    dram = next(t for t in graph.figure.data if t.name == "kernels at dram")
    k = per_kernel(report)
    assert len(k) == report.counters.launches["kernel"].nunique() == 32
    gemm = k[k["kernel"].str.startswith("micro_tk")].iloc[0]
    # its points: mean FLOPs / mean DRAM bytes and mean FLOP/s over its 60 launches
    assert gemm["achieved_flops_per_s"] in list(dram.y)
    table = next(c for c in content if getattr(c, "id", None) == "counters-table")
    assert len(table.children[1].children) == 32


def test_page_without_counters_says_how_to_load_them():
    from dashboard.pages.counters import body

    assert "perf dashboard --counters FILE_OR_DIR" in body(None)[0].children


def test_app_carries_the_report(report):
    from dashboard.app import PAGES, create_app

    app = create_app([], counters_report=report)
    assert app.perf_store.counters_report is report
    assert "/counters" in [p.PATH for p in PAGES]


def test_dashboard_with_a_bad_counter_file_exits_2(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n")
    r = CliRunner().invoke(cli, ["dashboard", "--counters", str(bad)])
    assert r.exit_code == 2
    assert len(r.output.strip().splitlines()) == 1 and str(bad) in r.output
