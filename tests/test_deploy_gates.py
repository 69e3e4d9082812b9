"""`perf gate --latency` (the candidate profiled in repeated runs, gated against a baseline with
analysis.gate's statistics) and `perf gate --config gates.toml` (the pipeline file)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("onnxruntime_qnn")
pytest.importorskip("onnxscript")

from typer.testing import CliRunner  # noqa: E402

from profiler.api.deploy_gates import gate_traces  # noqa: E402
from profiler.cli import app  # noqa: E402

HEADER = "Msg Timestamp,Message,Time,Unit of Measurement,Timing Source,Event Level,Event Identifier\n"
MODEL = ["tests.deploy_models:convnet", "--input", "2x3x8x8"]


def write_runs(folder, cycles: list[list[int]]):
    """One bare QNN CSV per run; run r holds one execute per entry of cycles[r] (one NODE each)."""
    folder.mkdir(parents=True, exist_ok=True)
    for r, steps in enumerate(cycles):
        rows = [HEADER]
        for c in steps:
            rows.append(f"0,BACKEND,{c},CYCLES,BACKEND,ROOT,Accelerator (execute) time (cycles)\n")
            rows.append(f"0,NODE,{c},CYCLES,BACKEND,SUB-EVENT,node_conv2d:OpId_1 (cycles)\n")
        (folder / f"run{r}.csv").write_text("".join(rows))
    return folder


def test_gate_traces_statistics_on_known_cycles(tmp_path):
    # base: 1000 +- 10 cycles a step; slow: 1500 +- 10 (ratio 1.5 - 1 = +50%); same: the base again
    base = write_runs(tmp_path / "base", [[990, 1000, 1010]] * 3)
    slow = write_runs(tmp_path / "slow", [[1490, 1500, 1510]] * 3)
    g = gate_traces([base], [slow], 10.0)
    wall = next(v for v in g.verdicts if v.name == "(wall)")
    assert g.statistical and g.runs == (3, 3)
    assert wall.ratio == pytest.approx(0.5) and wall.regression and wall.low > 0
    g = gate_traces([base], [base], 10.0)
    assert not g.regression


def test_latency_gate_cli(tmp_path):
    """The candidate (convnet on the HTP simulator, measured 130k-250k cycles an inference) against
    a baseline of 10 cycles an inference fails; against 1e9 cycles (1 s at the assumed 1 GHz) passes."""
    fast = write_runs(tmp_path / "fast", [[10, 10]] * 3)
    slow = write_runs(tmp_path / "slow", [[10**9, 10**9]] * 3)
    args = ["gate", *MODEL, "--candidate", "qnn-sim", "--repeats", "3", "--steps", "2", "--json"]
    r = CliRunner().invoke(app, [*args, "--latency", str(fast), "--keep", str(tmp_path / "kept")])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "perf.latency_gate" and doc["passed"] is False
    assert doc["mode"] == "bootstrap" and doc["gate"]["runs"] == [3, 3]
    assert doc["base_mean_ns"] == 10 and doc["new_mean_ns"] > 10_000
    assert len(doc["candidate_runs"]) == 3 and all((tmp_path / "kept" / f"run{k}.json").is_file() for k in range(3))
    r = CliRunner().invoke(app, [*args, "--latency", str(slow)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["passed"] is True
    r = CliRunner().invoke(app, [*args, "--latency", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "no such baseline" in r.output


def test_pipeline_file(tmp_path):
    write_runs(tmp_path / "baseline", [[10**9, 10**9]] * 3)
    cfg = tmp_path / "gates.toml"
    cfg.write_text(
        '[model]\nfactory = "tests.deploy_models:convnet"\ninput = ["2x3x8x8"]\n'
        '[candidate]\ntarget = "qnn-sim:int8-qnn"\n'
        "[accuracy]\nbudget = 0.0\n"  # int8 is never exact: this gate must fail
        '[latency]\nbaseline = "baseline"\nrepeats = 3\nsteps = 2\n'
    )
    r = CliRunner().invoke(app, ["gate", "--config", str(cfg), "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "perf.gate_pipeline" and doc["passed"] is False
    assert doc["accuracy"]["passed"] is False and doc["accuracy"]["value"] > 0
    assert doc["latency"]["passed"] is True  # the baseline is relative to the file's folder
    assert len(doc["seconds"]) == 2


@pytest.mark.parametrize(
    "text,problem",
    [
        ('[model]\nfactory = "m:f"\n[candidate]\ntarget = "qnn-sim"\n', "no gate"),
        ('[model]\nfactory = "m:f"\nbatch = 3\n[candidate]\ntarget = "qnn-sim"\n', "unknown key 'batch'"),
        ('[model]\nfactory = "m:f"\n[candidate]\ntarget = "qnn-sim"\n[latency]\nrepeats = 3\n', "needs baseline"),
        ("[model\n", "not a readable TOML"),
        ('[model]\nfactory = "m:f"\n[candidate]\ntarget = "tvm"\n[accuracy]\nbudget = 0.1\n', "backend 'tvm'"),
    ],
)
def test_bad_pipeline_file_one_line(tmp_path, text, problem):
    cfg = tmp_path / "gates.toml"
    cfg.write_text(text)
    r = CliRunner().invoke(app, ["gate", "--config", str(cfg)])
    assert r.exit_code == 2 and problem in r.output, r.output
    assert "Traceback" not in r.output and cfg.read_text() == text
