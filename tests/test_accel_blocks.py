"""Identical blocks compiled once and reused (accelerator/compiler/blocks.py)."""

from __future__ import annotations

from functools import cache

import pytest
import torch

from accelerator.compiler.blocks import find_repeat
from accelerator.compiler.check import BOUNDS, check
from accelerator.compiler.pipeline import compile_model
from accelerator.hardware import load_accel
from accelerator.workloads.llama import LlamaConfig, tiny_llama

LAYERS = 4


@cache
def four_layers():
    model, inputs = tiny_llama(cfg=LlamaConfig(n_layers=LAYERS))
    hw = load_accel("datacenter-npu")
    reused = compile_model(model, inputs, hw, "fp32")
    whole = compile_model(model, inputs, hw, "fp32", reuse_blocks=False)
    return model, inputs, reused, whole


def _layer_ops(program, k: int) -> int:
    return sum(o.module == f"layers.{k}" or o.module.startswith(f"layers.{k}.") for o in program.ops)


def test_finds_the_decoder_layers_and_not_a_two_layer_model():
    model, _ = tiny_llama(cfg=LlamaConfig(n_layers=LAYERS))
    rep = find_repeat(model)
    assert rep is not None and (rep.path, rep.count, rep.cls) == ("layers", LAYERS, "DecoderLayer")
    # 2 layers: nothing to reuse (block 1 is traced to check block 0 anyway)
    assert find_repeat(tiny_llama()[0]) is None


def test_a_block_that_differs_is_not_reused():
    model, _ = tiny_llama(cfg=LlamaConfig(n_layers=LAYERS))
    model.layers[3].input_norm.eps = 1e-3  # a plain attribute the ops bake in as a constant
    assert find_repeat(model) is None
    model, _ = tiny_llama(cfg=LlamaConfig(n_layers=LAYERS))
    model.layers[2].mlp.up_proj = torch.nn.Linear(64, 176, bias=True)  # one more parameter
    assert find_repeat(model) is None


def test_log_says_compiled_once_and_reused():
    _, _, reused, whole = four_layers()
    capture, decompose = reused.log[0], reused.log[1]
    assert any("compiled once, reused x3" in d.what for d in capture.decisions)
    assert any("decomposed once" in d.what and "reused x3" in d.what for d in decompose.decisions)
    assert not any("reused" in d.what for r in whole.log for d in r.decisions)


def test_op_count_is_blocks_times_block_ops_plus_the_rest():
    _, _, reused, whole = four_layers()
    for name in ("capture", "decompose", "legalize"):
        program = reused.programs[name]
        block = _layer_ops(program, 0)
        per_layer = [_layer_ops(program, k) for k in range(LAYERS)]
        rest = len(program.ops) - sum(per_layer)
        assert per_layer == [block] * LAYERS
        # the rest: embedding, rope tables, mask, final norm, lm_head (ops outside layers.*)
        assert rest == sum(not o.module.startswith("layers.") for o in whole.programs[name].ops)
        # and the whole-model export has the same ops: LAYERS x block + rest
        assert len(program.ops) == LAYERS * block + rest == len(whole.programs[name].ops)
        assert program.op_counts() == whole.programs[name].op_counts()


def test_instances_read_their_own_layer_weights_and_the_previous_layer():
    _, _, reused, _ = four_layers()
    program = reused.programs["decompose"]
    targets = {i.name: i.target for i in program.inputs}
    for k in range(LAYERS):
        ops = [o for o in program.ops if o.module.startswith(f"layers.{k}.")]
        weights = {targets[r] for o in ops for r in o.refs() if r in targets and targets[r].startswith("layers.")}
        assert weights and all(t.startswith(f"layers.{k}.") for t in weights)
    # every layer's KV cache is written in place (2 caches per layer)
    assert program.op_counts()["aten.index_copy_.default"] == 2 * LAYERS


@pytest.mark.parametrize("policy", ["fp32", "bf16"])
def test_reused_program_matches_eager_within_the_bound(policy):
    model, inputs, reused, _ = four_layers()
    c = reused if policy == "fp32" else compile_model(model, inputs, load_accel("datacenter-npu"), policy)
    result = check(c.program, model, inputs, c.programs["decompose"], BOUNDS[policy])
    assert result.ok, result.to_dict()
    # every layer's module path is checked, the last layer's too
    assert any(x.name.startswith(f"layers.{LAYERS - 1}.") for x in result.layers)


def test_reused_and_whole_programs_give_the_same_logits():
    _, inputs, reused, whole = four_layers()
    from accelerator.compiler.execute import run

    with torch.no_grad():
        (a,), _ = run(reused.program, inputs)
        (b,), _ = run(whole.program, inputs)
    assert torch.equal(a, b)


class _Wrapped(torch.nn.Module):
    """The decoder one level down (`model.layers`, as Hugging Face nests it)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens, pos):
        return self.model(tokens, pos)


class _Parallel(torch.nn.Module):
    """Three identical Linears whose outputs are summed (not a sequence of blocks), or, with
    `indexed`, a forward that names the third block (two blocks cannot be exported)."""

    def __init__(self, indexed: bool):
        super().__init__()
        self.indexed = indexed
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        if self.indexed:
            return self.layers[0](x) + self.layers[1](x) + self.layers[2](x)
        outs = [layer(x) for layer in self.layers]
        return torch.stack(outs).sum(0)


def test_nested_block_list_is_reused_and_matches_eager():
    model, inputs = tiny_llama(cfg=LlamaConfig(n_layers=3))
    wrapped = _Wrapped(model).eval()
    c = compile_model(wrapped, inputs, load_accel("datacenter-npu"), "fp32")
    assert any("reused x2" in d.what for d in c.log[0].decisions)
    assert any(i.target == "model.layers.2.attn.q_proj.weight" for i in c.program.inputs)
    assert check(c.program, wrapped, inputs, c.programs["decompose"], BOUNDS["fp32"]).ok


@pytest.mark.parametrize(
    "indexed,why", [(False, "ops after the blocks read layers.0"), (True, "index 2 is out of range")]
)
def test_blocks_that_two_cannot_stand_for_fall_back_to_the_whole_export(indexed, why):
    torch.manual_seed(0)
    model, x = _Parallel(indexed).eval(), torch.randn(2, 8)
    c = compile_model(model, (x,), load_accel("datacenter-npu"), "fp32")
    (fallback,) = [d for d in c.log[0].decisions if "exported one by one" in d.what]
    assert why in fallback.why
    assert c.program.op_counts()["aten.addmm.default"] == 3
    assert len(model.layers) == 3  # the model is given back as it came
    assert check(c.program, model, (x,), c.programs["decompose"], BOUNDS["fp32"]).ok


def _fuse_and_tile(program, replay: bool, **kw):
    """(tiled program, fusion decisions, tiling decisions) with or without the replay."""
    from accelerator.compiler.fusion import fuse
    from accelerator.compiler.pipeline import CompileContext
    from accelerator.compiler.tiling import tile_kernels

    ctx = CompileContext(load_accel("datacenter-npu"), "fp32", replay_blocks=replay, **kw)
    fused = fuse(program, ctx)
    fusion = list(ctx.decisions)
    ctx.decisions = []
    return tile_kernels(fused, ctx), fusion, list(ctx.decisions)


def test_fusion_and_tiling_decide_for_layer_0_and_replay_it():
    # the 4-layer Llama: layers 1-3 get layer 0's groups and tiles copied op by op; the program
    # is the one fusing and tiling every layer gives (same kernels, fused ops, tiles, attrs) and
    # each pass logs layer 0's decisions once plus one "layers.1-3: as layers.0" line
    _, _, reused, _ = four_layers()
    program = reused.programs["partition"]
    once, fusion1, tiling1 = _fuse_and_tile(program, True)
    every, fusion4, tiling4 = _fuse_and_tile(program, False)
    assert once.kernels == every.kernels and once.ops == every.ops
    in_layer = {
        k: [kn for kn in every.kernels if kn.tile and all(_in(every, o, k) for o in kn.ops)] for k in range(LAYERS)
    }
    per_layer = len(in_layer[0])
    assert per_layer > 0 and all(len(v) == per_layer for v in in_layer.values())
    # tiling: one decision per tiled kernel; 3 layers' worth replaced by one line
    assert len(tiling1) == len(tiling4) - 3 * per_layer + 1
    (line,) = [d for d in tiling1 if d.op == "layers.1-3"]
    assert line.what == f"as layers.0: {3 * per_layer} kernels' tiles"
    # fusion: a decision per multi-op kernel (and per attention kernel) of layer 0, not of 1-3
    names0 = {k.name for k in in_layer[0]}
    per_layer_fusion = sum(d.op in names0 for d in fusion4)
    assert per_layer_fusion > 0 and len(fusion1) == len(fusion4) - 3 * per_layer_fusion + 1
    assert any(d.op == "layers.1-3" and d.what.startswith("as layers.0") for d in fusion1)


def _in(program, op_name: str, k: int) -> bool:
    module = next(o.module for o in program.ops if o.name == op_name)
    return module == f"layers.{k}" or module.startswith(f"layers.{k}.")


def test_a_layer_compiled_differently_is_not_replayed():
    # layer 2 at bf16 (a precision override): its ops' types differ from layer 0's, so no layer
    # corresponds and every one is fused and tiled on its own, as without the replay
    model, inputs, _, _ = four_layers()
    c = compile_model(model, inputs, load_accel("datacenter-npu"), "fp32", precision_overrides={"layers.2": "bf16"})
    program = c.programs["partition"]
    once, fusion1, tiling1 = _fuse_and_tile(program, True)
    every, fusion4, tiling4 = _fuse_and_tile(program, False)
    assert once.kernels == every.kernels and (len(fusion1), len(tiling1)) == (len(fusion4), len(tiling4))
    assert not any("as layers.0" in d.what for d in fusion1 + tiling1)
