"""Functional mode: every workload at every policy on both presets runs op by op in its assigned
dtypes within the policy's bound of the eager model, per output and per layer (and, through every
pass, kernel by kernel and tile by tile); a pass that
breaks numerics is caught."""

from __future__ import annotations

from dataclasses import replace

import pytest
from accel_programs import compile_from_decomposed, compiled, decomposed, workload

from accelerator.compiler.check import BOUNDS, check, rel_error

CASES = [
    (w, preset, policy)
    for w in ("mlp", "resnet", "vit", "llama")
    for preset in ("edge-npu", "datacenter-npu")
    for policy in ("fp32", "bf16", "int8", "fp8")
    if not (preset == "edge-npu" and policy == "fp8")  # the edge NPU has no fp8 (test_accel_precision)
]


@pytest.mark.parametrize("name,preset,policy", CASES)
def test_error_within_the_policy_bound(name, preset, policy):
    model, inputs = workload(name)
    result = check(compiled(name, preset, policy).program, model, inputs, decomposed(name), BOUNDS[policy])
    assert result.layers and result.outputs
    assert result.max_rel_error <= BOUNDS[policy], result.to_dict()
    if policy == "fp32":
        assert result.max_rel_error <= 1e-5
    else:
        # the reduced precision really ran: bf16 rounds at 2^-9, int8/fp8 steps are coarser
        assert result.max_rel_error > 1e-4
    units = {o.attrs["unit"] for o in compiled(name, preset, policy).program.ops}
    assert units <= {"matrix", "vector", "dma", "host"}


def test_layers_are_named_by_module_path():
    model, inputs = workload("llama")
    result = check(compiled("llama", "edge-npu", "bf16").program, model, inputs, decomposed("llama"), BOUNDS["bf16"])
    names = [x.name for x in result.layers]
    assert {"layers.0.attn.q_proj", "layers.1.mlp.down_proj", "lm_head", "embed"} <= set(names)
    assert result.to_dict()["layers"][0].keys() == {"name", "rel_error"}


def test_rel_error_is_normwise():
    import torch

    # ||(3,4) - (0,0)|| / ||(3,4)|| = 1;  ||(3,4.5) - (3,4)|| / 5 = 0.1
    assert rel_error(torch.tensor([0.0, 0.0]), torch.tensor([3.0, 4.0])) == 1.0
    assert rel_error(torch.tensor([3.0, 4.5]), torch.tensor([3.0, 4.0])) == pytest.approx(0.1)


def test_a_pass_that_breaks_numerics_is_caught():
    """A precision pass that swaps GELU for ReLU: the check names the layer that broke."""

    from accelerator.compiler.pipeline import CompileContext, Pipeline
    from accelerator.compiler.precision import assign_precision
    from accelerator.hardware import load_accel

    def broken(program, ctx):
        p = assign_precision(program, ctx)
        return p.with_ops(
            [replace(o, target="aten.relu.default") if o.target == "aten.gelu.default" else o for o in p.ops]
        )

    model, inputs = workload("mlp")
    c = Pipeline([("precision", broken)]).run_program(decomposed("mlp"), CompileContext(load_accel("edge-npu")))
    result = check(c.program, model, inputs, decomposed("mlp"), BOUNDS["fp32"])
    assert not result.ok
    worst = max(result.layers, key=lambda x: x.rel_error)
    assert worst.name == "act" and worst.rel_error > 0.01
    ok = compile_from_decomposed("mlp", "edge-npu", "fp32")
    assert check(ok.program, model, inputs, decomposed("mlp"), BOUNDS["fp32"]).ok


def test_the_first_pass_that_breaks_numerics_is_named():
    from accel_programs import captured

    from accelerator.compiler.check import first_divergent_pass
    from accelerator.compiler.legalize import legalize
    from accelerator.compiler.pipeline import CompileContext, Pipeline
    from accelerator.compiler.precision import assign_precision
    from accelerator.hardware import load_accel

    def flips_gelu(program, ctx):  # a "fusion" that gets GELU wrong
        return program.with_ops(
            [replace(o, target="aten.relu.default") if o.target == "aten.gelu.default" else o for o in program.ops]
        )

    model, inputs = workload("mlp")
    passes = [("precision", assign_precision), ("bad_fusion", flips_gelu), ("legalize", legalize)]
    ctx = CompileContext(load_accel("edge-npu"), "bf16")
    c = Pipeline(passes).run_program(decomposed("mlp"), ctx, programs={"capture": captured("mlp")})
    name, result = first_divergent_pass(c.programs, model, inputs, BOUNDS["bf16"])
    assert name == "bad_fusion" and max(result.outputs) > BOUNDS["bf16"]
    good = Pipeline(passes[:1] + passes[2:]).run_program(decomposed("mlp"), ctx, programs={"capture": captured("mlp")})
    assert first_divergent_pass(good.programs, model, inputs, BOUNDS["bf16"]) is None


def test_conv_and_encoder_workloads_compile_whole():
    # ResNet: 6 convolutions (stem, 2 per block, the strided block's 1x1 projection), 6 BN; ViT:
    # the patch convolution, 5 LayerNorms (2 per block + the final), 9 linears (4 per block + head)
    resnet, vit = decomposed("resnet").op_counts(), decomposed("vit").op_counts()
    assert resnet["aten.convolution.default"] == 6
    assert resnet["aten._native_batch_norm_legit_no_training.default"] == 6
    assert vit["aten.convolution.default"] == 1 and vit["aten.native_layer_norm.default"] == 5
    assert vit["aten.addmm.default"] == 9 and vit["aten.scaled_dot_product_attention.default"] == 2
    # no op of either falls back to the host except size arithmetic on the dynamic batch
    for name in ("resnet", "vit"):
        host = {o.target for o in compiled(name, "edge-npu", "bf16").program.ops if o.attrs["unit"] == "host"}
        assert host <= {"aten.sym_size.int", "operator.floordiv", "operator.mul", "operator.add"}, host
    conv = [o for o in compiled("resnet", "edge-npu", "int8").program.ops if o.target == "aten.convolution.default"]
    assert {o.attrs["unit"] for o in conv} == {"vector"}  # fp32 (no int8 conv yet) on a matrix unit without fp32


@pytest.mark.parametrize("name,preset,policy", CASES)
def test_every_workload_through_every_pass_within_the_bound(name, preset, policy):
    # issue 12's first must-hold, end to end: the whole default pipeline after decomposition
    # (precision, legalize, partition over 2 chips of the datacenter NPU, fusion, tiling,
    # allocate, schedule), then functional mode kernel by kernel and tile by tile
    from accelerator.compiler.pipeline import CompileContext, Pipeline, default_passes
    from accelerator.hardware import load_accel

    chips = 2 if preset == "datacenter-npu" else 1
    passes = [p for p in default_passes() if p[0] != "decompose"]
    c = Pipeline(passes).run_program(decomposed(name), CompileContext(load_accel(preset), policy, chips=chips))
    p = c.program
    assert [r.name for r in c.log] == [n for n, _ in passes] and not any(r.skipped for r in c.log)
    assert p.chips == chips and p.kernels and p.placement and p.transfers
    assert all(k.tile for k in p.kernels if k.unit != "host")
    model, inputs = workload(name)
    result = check(p, model, inputs, decomposed(name), BOUNDS[policy])
    assert result.layers and result.max_rel_error <= BOUNDS[policy], result.to_dict()
