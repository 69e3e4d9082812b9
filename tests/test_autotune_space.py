"""The space built from a compiled program (tiles that fit, fusion regions, per-layer precision)
and the simulator runner: a candidate compiles through the compiler's pipeline, is checked in
functional mode before its time counts, and a wrong result is a failed trial with its reason."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

pytest.importorskip("torch")

from accelerator.hardware import load_accel  # noqa: E402
from accelerator.workloads import tiny_mlp  # noqa: E402
from accelerator.workloads.llama import LlamaConfig, tiny_llama  # noqa: E402
from profiler.autotune.build import build_space, compile_candidate, load_workload  # noqa: E402
from profiler.autotune.runner import SimulatorRunner  # noqa: E402


@pytest.fixture(scope="module")
def mlp():
    m, xs = tiny_mlp()
    w = load_workload("mlp", m, xs, load_accel("edge-npu"), "bf16")
    return w, build_space(w, ("tile", "fusion", "precision", "chips"))


def test_mlp_space_from_its_compiled_program(mlp):
    w, space = mlp
    dims = {d.name: d.options for d in space.dimensions}
    # fc1 (x 4x32 @ W^T 32x64) on 32x32 arrays: m = 4 (shorter than the array), k = 32, n 64 or
    # its one smaller power-of-two multiple of 32. Local bytes (tiling.py, a = 4: x is loaded
    # fp32 and cast on chip, b = 2, acc = 4, out = 2 the bf16 GELU, bias 2 x min(64, 4 x n) x 2):
    #   n 64: 2*(4*32*4 + 32*64*2) + 4*64*4 + 2*4*64*2 + 256 = 11520 B (docs/accelerator.md)
    #   n 32: 2*(4*32*4 + 32*32*2) + 4*32*4 + 2*4*32*2 + 256 = 6400 B; both under 512 KiB
    assert dims["tile:addmm"] == ((("k", 32), ("m", 4), ("n", 64)), (("k", 32), ("m", 4), ("n", 32)))
    # fc2 (4x64 @ 64x16): n = 16 (shorter than 32), k 64 (the compiler's) or 32
    assert dims["tile:addmm_1"] == ((("k", 64), ("m", 4), ("n", 16)), (("k", 32), ("m", 4), ("n", 16)))
    assert dims["fusion:addmm"] == ("fused", "split") and dims["fusion:addmm_1"] == ("fused", "split")
    # per layer, the baseline's policy first; edge-npu's matrix unit has no fp8
    assert dims["precision:fc1"] == ("bf16", "fp32", "int8") and dims["precision:fc2"] == ("bf16", "fp32", "int8")
    assert "chips" not in dims  # one chip
    assert space.size == 2 * 2 * 2 * 2 * 3 * 3


def test_split_region_costs_one_dispatch_and_keeps_the_numerics(mlp):
    w, space = mlp
    runner = SimulatorRunner(w, space)
    base = runner.run(space.candidate({}))
    split = runner.run(space.candidate({"fusion:addmm": "split"}))
    assert base.failure == "" and split.failure == ""
    kernels = {k["name"]: k["time_ns"] for k in split.summary["kernels"]}
    # fc1's GELU leaves its kernel: one more kernel, each paying edge-npu's 5 us dispatch
    # (accelerator/presets/edge-npu.yaml, dispatch_overhead_s); the matmuls' times are unchanged
    assert list(kernels) == ["addmm", "gelu", "addmm_1"] and kernels["gelu"] >= 5000
    assert split.time_ns == base.time_ns + kernels["gelu"]
    assert base.time_ns == sum(k["time_ns"] for k in base.summary["kernels"])
    # same arithmetic, the bf16 GELU is stored and reloaded: the error stays the policy's
    assert split.accuracy_error == pytest.approx(base.accuracy_error, rel=1e-6) and base.accuracy_error < 1e-2


def test_a_wrong_result_is_a_failed_trial_never_timed(mlp):
    w, space = mlp

    class Broken(SimulatorRunner):
        def compile(self, c):  # type: ignore[no-untyped-def]
            compiled = super().compile(c)
            program = compiled.program
            ops = [replace(o, target="aten.relu.default") if o.name == "gelu" else o for o in program.ops]
            return replace(compiled, program=program.with_ops(ops, kernels=program.kernels))

    r = Broken(w, space).run(space.candidate({}))
    assert r.time_ns is None and r.failure.startswith("functional check: relative error")
    assert r.accuracy_error > 1e-2 and "over the bound 0.01" in r.failure


def test_precision_is_gated_by_the_accuracy_budget(mlp):
    w, space = mlp
    c = space.candidate({"precision:fc1": "int8", "precision:fc2": "int8"})
    loose = SimulatorRunner(w, space, accuracy_budget=5e-2).run(c)
    assert loose.failure == "" and 1e-2 < loose.accuracy_error <= 5e-2  # int8 MLP: 1.3e-2 (docs)
    tight = SimulatorRunner(w, space, accuracy_budget=1e-2).run(c)
    assert tight.time_ns is None and "over the bound 0.01" in tight.failure


def test_decoder_block_space_is_joint_and_every_tile_fits():
    m, xs = tiny_llama(cfg=LlamaConfig(n_layers=1))
    hw = load_accel("edge-npu")
    w = load_workload("llama", m, xs, hw, "bf16")
    space = build_space(w, ("tile", "fusion", "chips"))
    assert space.size == math.prod(len(d.options) for d in space.dimensions) >= 1000
    names = {d.name for d in space.dimensions}
    assert {"tile:mm_4", "fusion:mm_4", "tile:scaled_dot_product_attention"} <= names
    cap = hw.local_memory.capacity_bytes
    for option in space.dimension("tile:mm_4").options:
        for fusion in ("fused", "split"):  # the tile fits the kernel fused and split
            c = space.candidate({"tile:mm_4": option, "fusion:mm_4": fusion})
            k = next(k for k in compile_candidate(w, space, c).program.kernels if k.name == "mm_4")
            assert k.tile == dict(option) and k.attrs["local_bytes"] <= cap
