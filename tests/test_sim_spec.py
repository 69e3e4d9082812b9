"""The roofline HardwareSpec derived from an AccelSpec (accelerator/sim/spec.py): peaks, memory
levels and link by hand arithmetic from the presets' numbers, and `--hardware edge-npu` resolving."""

from __future__ import annotations

import pytest

from accelerator.hardware import load_accel
from accelerator.sim.spec import hardware_dict, hardware_spec
from profiler.api import load_hardware, load_trace, spec_resolver
from profiler.model.hardware import from_dict, load_spec


def test_datacenter_npu_spec_by_hand():
    s = hardware_spec(load_accel("datacenter-npu"))
    assert s.kind == "npu"
    # 8 cores x 16384 MACs x 2 x 1.05e9 = 275.2512e12 (TPU v4's 275 TFLOP/s); int8/fp8 2x; fp32 4096 MACs
    assert s.peak("bf16") == pytest.approx(275.2512e12)
    assert s.peak("int8") == s.peak("fp8") == pytest.approx(550.5024e12)
    assert s.peak("fp32") == pytest.approx(8 * 4096 * 2 * 1.05e9)
    # vector: 8 cores x 1024 lanes x 1 op x 1.05e9 = 8.6016e12
    assert s.peak("fp32", "vector") == pytest.approx(8.6016e12)
    assert [m.name for m in s.memory] == ["hbm", "shared", "local"]
    assert s.bandwidth("hbm") == 1.2e12 and s.bandwidth("shared") == 4.8e12
    local = s.memory[2]
    # 8 x 4 MiB, 8 x 1.075e12 B/s, one partition per core
    assert (local.capacity_bytes, local.bandwidth, local.partitions) == (8 * 4194304, 8 * 1.075e12, 8)
    (link,) = s.links
    assert (link.bandwidth, link.latency, link.hop_latency, link.topology) == (50e9, 0.0, 1e-6, "ring")
    assert s.min_op_time == 1e-6
    assert from_dict(s.to_dict()) == s  # a valid spec, round-trips like a preset


def test_edge_npu_spec_by_hand():
    s = hardware_spec(load_accel("edge-npu"))
    # int8: 4 x 1024 x 2 x 1e9 = 8.192e12 OP/s; fp16 half; no fp32 matrix: falls back to the vector fp32
    assert s.peak("int8") == pytest.approx(8.192e12)
    assert s.peak("fp16") == s.peak("bf16") == pytest.approx(4.096e12)
    assert s.peak_source("fp32") == "vector fp32"
    assert s.peak("fp32") == pytest.approx(4 * 64 * 1 * 1e9)  # 256 GFLOP/s
    assert s.peak("fp16", "vector") == pytest.approx(4 * 64 * 2 * 1e9)
    assert s.bandwidth("hbm") == 68.264e9
    assert s.links == ()  # one chip
    assert hardware_dict(load_accel("edge-npu"))["min_op_time"] == 5e-6


def test_hardware_option_takes_an_accelerator_preset():
    assert load_hardware("edge-npu") == hardware_spec(load_accel("edge-npu"))
    assert load_hardware("Datacenter_NPU").name == "datacenter-npu"
    assert load_hardware("h100-sxm") == load_spec("h100-sxm")  # roofline presets as before
    trace = load_trace("examples/traces/mlp_cpu.json.gz")
    assert spec_resolver(trace, "edge-npu")(0, "cpu").name == "edge-npu"
