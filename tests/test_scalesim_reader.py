"""SCALE-Sim's real report folders (tests/data/scalesim, provenance in its README.md) read into a
Trace (collectors/scalesim): kernel cycles equal our closed forms (accelerator/sim/timing.py) for
every layer and dataflow, the timeline follows the reports' numbers, `perf analyze` runs on a
folder, and a bad report is one line, exit 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelerator.sim.timing import gemm_cycles
from collectors.scalesim import load_scalesim
from profiler.api import load_trace
from profiler.cli import app

DATA = Path(__file__).parent / "data" / "scalesim"
runner = CliRunner()


def topology(folder: Path) -> list[tuple[str, int, int, int]]:
    rows = [r.split(",") for r in (folder / "gemm.csv").read_text().splitlines()[1:] if r.strip()]
    return [(r[0].strip(), int(r[1]), int(r[2]), int(r[3])) for r in rows]


@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
def test_real_scalesim_cycles_equal_the_closed_forms(dataflow):
    """MUST HOLD, cross-checked against SCALE-Sim 3.0.0 itself: 4 layers (multiples of the 32x16
    array and not) per dataflow; each kernel lasts SCALE-Sim's 'Total Cycles' at 1 GHz."""
    t = load_scalesim(DATA / dataflow)
    k = t.events[t.events["kind"] == "kernel"]
    layers = topology(DATA / dataflow)
    assert list(k["name"]) == [n for n, *_ in layers]
    assert list(k["dur"]) == [gemm_cycles(m, n, kk, 32, 16, dataflow) for _, m, n, kk in layers]
    assert t.metadata["array"] == "32x16" and t.metadata["dataflow"] == dataflow


def test_ws_timeline_from_the_report_numbers():
    t = load_scalesim(DATA / "ws")
    ev = t.events
    k = ev[ev["kind"] == "kernel"].reset_index(drop=True)
    # layer 0: DRAM prefetch from cycle -6292 (DETAILED_ACCESS_REPORT) -> compute starts at 6292 ns,
    # lasts 1135 (COMPUTE_REPORT 'Total Cycles'); layer 1 starts after layer 0's 7938 cycles incl. prefetch
    assert (k.loc[0, "ts"], k.loc[0, "dur"]) == (6292, 1135)
    assert k.loc[1, "ts"] == 7938 + 6292
    ofmap = ev[ev["track"] == "rank0/npu0/dram_ofmap"].reset_index(drop=True)
    # OFMAP write of layer 0: cycles 1135..1646 after compute start, 8192 words
    assert (ofmap.loc[0, "ts"], ofmap.loc[0, "dur"], ofmap.loc[0, "name"]) == (
        6292 + 1135,
        511,
        "DRAM OFMAP write, 8192 words",
    )
    util = t.counters[t.counters["name"] == "compute_util (%)"]
    assert util["value"].iloc[0] == pytest.approx(40.76433121019108)  # COMPUTE_REPORT layer 0
    bw = t.counters[t.counters["name"] == "ifmap_sram_bw (words/cycle)"]
    assert len(bw) == 8  # 4 layers x (start, end)
    assert t.devices["name"].iloc[0] == "SCALE-Sim systolic array 32x16 (ws)"


def test_clock_scales_and_is_stated():
    fast = load_scalesim(DATA / "os", clock_hz=2e9)
    k = fast.events[fast.events["kind"] == "kernel"]
    assert k["dur"].iloc[0] == round(879 / 2)  # 879 cycles at 2 GHz
    assert "1 GHz" in load_scalesim(DATA / "os").metadata["clock_note"]


def test_load_trace_and_perf_analyze_take_the_folder():
    assert load_trace(DATA / "is" / "COMPUTE_REPORT.csv").metadata["format"] == "scalesim"
    r = runner.invoke(app, ["analyze", str(DATA / "is"), "--json"])
    assert r.exit_code == 0, r.output
    assert '"SCALE-Sim report, array 32x16, dataflow is"' in r.stdout


@pytest.mark.parametrize(
    ("file", "edit", "needle"),
    [
        (
            "COMPUTE_REPORT.csv",
            lambda s: s.replace("879", "eight"),
            "COMPUTE_REPORT.csv: line 2: Total Cycles is 'eight'",
        ),
        ("COMPUTE_REPORT.csv", lambda s: s.replace("Stall Cycles", "Stalls"), "no column 'Stall Cycles'"),
        ("COMPUTE_REPORT.csv", lambda s: s.splitlines()[0] + "\n", "header but no layers"),
        ("BANDWIDTH_REPORT.csv", lambda s: "\n".join(s.splitlines()[:2]) + "\n", "do not match"),
        ("DETAILED_ACCESS_REPORT.csv", lambda s: "", "DETAILED_ACCESS_REPORT.csv: "),
    ],
)
def test_bad_report_is_one_line_exit_2(tmp_path, file, edit, needle):
    folder = tmp_path / "rep"
    shutil.copytree(DATA / "os", folder)
    (folder / file).write_text(edit((folder / file).read_text()))
    r = runner.invoke(app, ["analyze", str(folder)])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_a_secret_in_a_layer_name_is_redacted(tmp_path):
    folder = tmp_path / "rep"
    shutil.copytree(DATA / "os", folder)
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # a GitHub token's shape
    topo = folder / "gemm.csv"
    topo.write_text(topo.read_text().replace("g64,", f"{token},", 1))
    names = list(load_scalesim(folder).events["name"])
    assert not any(token in n for n in names)
