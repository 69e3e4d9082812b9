"""`perf calibrate` measures this machine and writes a spec that `--hardware` can load."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from profiler.calibrate import _fit_line
from profiler.calibrate_levels import cache_capacities
from profiler.cli import app
from profiler.model.hardware import load_spec

pytestmark = pytest.mark.serial  # it measures the machine: alone, after the parallel suite


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "spec.yaml"
    r = CliRunner().invoke(app, ["calibrate", "--quick", "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_spec_round_trips_and_is_plausible(spec_file):
    spec = load_spec(spec_file)
    assert spec.kind == "cpu"
    for dtype in ("fp32", "bf16", "fp16", "fp64"):
        # a CPU core does at least 1 GFLOP/s and no 2-core machine does 100 TFLOP/s
        assert 1e9 < spec.peak(dtype, "matrix") < 1e14
    # the vector peak is a chain of FMAs on cache-resident data: at least 1 GFLOP/s per core
    # (profiler.calibrate_checks' floor; the old elementwise-over-memory figure was 33.6 MFLOP/s)
    assert 1e9 * (os.cpu_count() or 1) <= spec.peak("fp32", "vector")
    # cache levels: capacities as sysfs gives them, each faster than the DRAM outside it
    sysfs = {name: cap for name, cap, _ in cache_capacities()}
    for level in spec.memory[1:]:
        assert level.capacity_bytes == sysfs[level.name] and level.bandwidth > spec.memory[0].bandwidth
    assert 1e9 < spec.bandwidth() < 1e12  # 1 GB/s .. 1 TB/s of DRAM bandwidth
    assert 1e-8 < spec.min_op_time < 1e-3  # 10 ns .. 1 ms per dispatch
    link = spec.links[0]
    assert link.topology == "host" and link.bandwidth > 1e7 and 0 < link.latency < 1.0


def test_hardware_show_reads_it(spec_file):
    r = CliRunner().invoke(app, ["hardware", "show", str(spec_file)])
    assert r.exit_code == 0 and "peak matrix fp32" in r.output


def test_fit_line_recovers_alpha_beta():
    # t = 50 us + bytes / 2 GB/s, exactly
    xs = [1e3, 1e5, 1e7]
    ys = [50e-6 + x / 2e9 for x in xs]
    a, b = _fit_line(xs, ys)
    assert a == pytest.approx(50e-6) and 1 / b == pytest.approx(2e9)
