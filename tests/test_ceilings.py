"""Issue 10, "No impossible numbers": CPU cache levels, calibration sanity checks, and the
invariant that no op is shown above its ceiling as a plain efficiency."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from analysis.ceiling import above_ceiling
from analysis.memory_levels import memory_floor
from profiler.calibrate_checks import CalibrationError, check_spec
from profiler.calibrate_levels import cache_capacities
from profiler.model.hardware import load_spec


def test_cpu_small_copy_is_floored_at_the_cache_that_holds_it():
    # generic-x86-cpu: l2 1 MiB at 192 GB/s, dram 20 GB/s. A 512 KiB copy (256 KiB read + written)
    # fits L2: floor = 524288 B / 192e9 B/s = 2731 ns, not 524288 / 20e9 = 26214 ns (which a real
    # copy beat by 1.5x). A 64 MiB copy fits no cache: the DRAM floor stays.
    spec = load_spec("generic-x86-cpu")
    u = pd.DataFrame(
        {"bytes": [524288.0, 64 * 2**20], "flops": [0.0, 0.0], "family": ["copy", "copy"], "dtype": ["fp32", "fp32"]}
    )
    t, level, _ = memory_floor(u, spec)
    assert t[0] == pytest.approx(524288 / 192e9 * 1e9) and level[0] == "l2"
    assert t[1] == pytest.approx(64 * 2**20 / 20e9 * 1e9) and level[1] == "dram"


def test_gpu_keeps_the_hbm_floor():
    spec = load_spec("a100-sxm-80gb")
    u = pd.DataFrame({"bytes": [1e6], "flops": [0.0], "family": ["copy"], "dtype": ["fp32"]})
    t, level, _ = memory_floor(u, spec)
    assert level[0] == "hbm" and t[0] == pytest.approx(1e6 / spec.bandwidth() * 1e9)


def test_cache_capacities_from_sysfs(tmp_path):
    # 4 CPUs: L1d 32K private, L1i skipped, L2 1M per 2 CPUs, L3 32M shared by all
    for i, (level, kind, size, shared) in enumerate(
        [
            (1, "Data", "32K", "0"),
            (1, "Instruction", "32K", "0"),
            (2, "Unified", "1024K", "0-1"),
            (3, "Unified", "32768K", "0-3"),
        ]
    ):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{value}\n")
    assert cache_capacities(tmp_path, cpus=4) == [("l3", 32 << 20, 1), ("l2", 2 << 20, 2), ("l1", 4 * 32 << 10, 4)]


def _cpu_spec(vector: float, bw: float = 20e9):
    base = load_spec("generic-x86-cpu")
    return replace(
        base,
        peak_flops={"vector": {"fp32": vector}, "matrix": {"fp32": 100e9}},
        memory=(replace(base.memory[0], bandwidth=bw),),
    )


def test_calibration_rejects_a_vector_peak_timed_over_memory():
    # issue 10: 33.6 MFLOP/s was accepted as a 2-core vector peak; the floor is 1 GFLOP/s per core
    with pytest.raises(CalibrationError, match="physical floor"):
        check_spec(_cpu_spec(33.6e6), cores=2)
    spec, notes = check_spec(_cpu_spec(40e9), cores=2)
    assert spec.peak("fp32", "vector") == 40e9 and notes == []


def test_calibration_rejects_figures_far_from_the_matched_preset():
    # a GPU measured against its preset: 0.1x..1.5x of each figure (A100 fp32 vector 19.5 TFLOP/s)
    ref = load_spec("a100-sxm-80gb")
    bad = replace(ref, peak_flops={"vector": {"fp32": 19.5e12}, "matrix": {"bf16": 1.5e12, "fp16": 312e12}})
    spec, notes = check_spec(bad, cores=108, reference=ref)
    assert "bf16" not in spec.peak_flops["matrix"] and spec.peak_flops["matrix"]["fp16"] == 312e12
    assert notes and "0.00481x" in notes[0]  # 1.5e12 / 312e12
    with pytest.raises(CalibrationError, match="bandwidth"):
        check_spec(replace(ref, memory=(replace(ref.memory[0], bandwidth=10e9),)), cores=108, reference=ref)


def test_above_ceiling_threshold():
    assert above_ceiling([0.5, 1.1, 1.1000001, float("nan")]).tolist() == [False, False, True, False]
