"""`perf calibrate` writes a spec that `--hardware` can load, and its sanity checks reject what no
machine can measure. What the figures are on this machine is a measurement, not a test: see
benchmarks/bench_roofline_cpu.py, which calibrates and prints them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from typer.testing import CliRunner

from profiler.calibrate import _fit_line
from profiler.calibrate_checks import CalibrationError, check_spec
from profiler.calibrate_levels import cache_capacities
from profiler.cli import app
from profiler.model.hardware import MemoryLevel, load_spec

pytestmark = pytest.mark.serial  # it runs the measurements: alone, after the parallel suite


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "spec.yaml"
    r = CliRunner().invoke(app, ["calibrate", "--quick", "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_spec_round_trips_with_its_structure(spec_file):
    spec = load_spec(spec_file)
    assert spec.kind == "cpu"
    assert spec.peak("fp32", "vector") > 0 and spec.bandwidth() > 0 and spec.min_op_time > 0
    # cache levels: capacities exactly as sysfs gives them (the bandwidths are measurements)
    sysfs = {name: cap for name, cap, _ in cache_capacities()}
    assert [lvl.name for lvl in spec.memory[1:]] and all(
        lvl.capacity_bytes == sysfs[lvl.name] for lvl in spec.memory[1:]
    )
    assert spec.links and spec.links[0].topology == "host"


def test_hardware_show_reads_it(spec_file):
    r = CliRunner().invoke(app, ["hardware", "show", str(spec_file)])
    assert r.exit_code == 0 and "peak matrix fp32" in r.output


def test_fit_line_recovers_alpha_beta():
    # t = 50 us + bytes / 2 GB/s, exactly
    xs = [1e3, 1e5, 1e7]
    ys = [50e-6 + x / 2e9 for x in xs]
    a, b = _fit_line(xs, ys)
    assert a == pytest.approx(50e-6) and 1 / b == pytest.approx(2e9)


def _cpu(vector_fp32: float, matrix_fp32: float, dram: float):
    base = load_spec("generic-x86-cpu")
    # bf16 at 0.4 GFLOP/s stays: a CPU without bf16 units emulates it that slowly (no floor for it)
    return replace(
        base,
        peak_flops={"vector": {"fp32": vector_fp32}, "matrix": {"fp32": matrix_fp32, "bf16": 0.4e9}},
        memory=(MemoryLevel("dram", None, dram),),
    )


def test_sanity_checks_keep_plausible_figures_and_reject_impossible_ones():
    # 2 cores: the floor is 1 GFLOP/s per core = 2 GFLOP/s; the ceiling 1.5 x 256 GFLOP/s per core = 768 GFLOP/s
    ok, notes = check_spec(_cpu(50e9, 20e9, 20e9), cores=2)
    assert notes == [] and ok.peak_flops["matrix"] == {"fp32": 20e9, "bf16": 0.4e9}
    # an fp32 matrix figure of 0.5 GFLOP/s is below the physical floor: left out, with a message
    kept, notes = check_spec(_cpu(50e9, 0.5e9, 20e9), cores=2)
    assert "fp32" not in kept.peak_flops["matrix"] and any("matrix fp32" in n for n in notes)
    # the 33.6 MFLOP/s vector peak (an elementwise op over memory) stops calibration
    with pytest.raises(CalibrationError):
        check_spec(_cpu(33.6e6, 20e9, 20e9), cores=2)
    # above 1.5 x the per-core maximum (1 TFLOP/s fp32 vector on 2 cores) is no measurement either
    with pytest.raises(CalibrationError):
        check_spec(_cpu(1e12, 20e9, 20e9), cores=2)
    # a bandwidth under 1 GB/s is rejected
    with pytest.raises(CalibrationError):
        check_spec(_cpu(50e9, 20e9, 0.2e9), cores=2)
