"""Partitioning (accelerator/compiler/partition.py): tensor parallelism over chips with the
collectives inserted, simulated shard by shard in functional mode, and the host cuts."""

from __future__ import annotations

import copy
from functools import cache

import pytest
import torch

from accelerator.compiler.check import BOUNDS, check
from accelerator.compiler.execute import run
from accelerator.compiler.pipeline import CompileContext, Pipeline, compile_model
from accelerator.hardware import load_accel
from accelerator.workloads import WORKLOADS
from accelerator.workloads.llama import LlamaConfig, tiny_llama
from accelerator.workloads.mlp import tiny_mlp
from profiler.model.errors import InputError

HW = "datacenter-npu"  # 8 chips in a ring


@cache
def compiled(name: str, policy: str, chips: int):
    model, inputs = {"mlp": tiny_mlp, "llama": tiny_llama}[name]()
    return model, inputs, compile_model(model, inputs, load_accel(HW), policy, chips=chips)


def collectives(program, kind: str):
    return [o for o in program.ops if o.target == f"npu.{kind}"]


def test_partition_runs_right_after_legalisation():
    names = Pipeline().names()
    assert names.index("partition") == names.index("legalize") + 1


@pytest.mark.parametrize("name", ["mlp", "llama"])
@pytest.mark.parametrize("policy", ["fp32", "bf16"])
def test_two_chips_match_eager_within_the_bound(name, policy):
    model, inputs, c = compiled(name, policy, 2)
    assert c.program.chips == 2
    result = check(c.program, model, inputs, c.programs["decompose"], BOUNDS[policy])
    assert result.ok, result.to_dict()
    assert len(result.layers) > 2  # the layers are compared too (their values merged over the chips)


@pytest.mark.parametrize("name,chips", [("vit", 2), ("resnet", 2)])
def test_splits_that_do_not_divide_are_gathered_and_still_match_eager(name, chips):
    # ViT's fused qkv (3 x heads) cannot stay split through its reshape: the split values are
    # all-gathered (a decision) and the op runs whole
    model, inputs = WORKLOADS[name]()
    c = compile_model(model, inputs, load_accel(HW), "fp32", chips=chips)
    result = check(c.program, model, inputs, c.programs["decompose"], BOUNDS["fp32"])
    assert result.ok, result.to_dict()
    if name != "resnet":
        assert collectives(c.program, "all_gather")
        partition = next(r for r in c.log if r.name == "partition")
        assert any(d.what == "all-gather its operands first" for d in partition.decisions)


def test_fewer_kv_heads_than_chips_are_replicated_not_gathered():
    # tiny Llama: 4 query heads, 2 KV heads (head_dim 16) on 4 chips. Each chip holds 1 query
    # head; chip c's query head c reads KV head c // 2 (group 4 / 2 = 2), so k_proj/v_proj, their
    # weights and the caches split into 2 slices, each held by 2 chips: no all-gather per layer
    model, (tokens, pos) = tiny_llama()
    c = compile_model(model, (tokens, pos), load_accel(HW), "fp32", chips=4)
    p = c.program
    # the only gather is the vocab-split logits'; 2 layers x (o_proj + down_proj) all-reduces
    (gather,) = collectives(p, "all_gather")
    assert gather.name == p.outputs[0].name and len(collectives(p, "all_reduce")) == 4
    types = {i.name: i.type.hint for i in p.inputs}
    # k_proj weight (2 x 16, 64) -> 16 rows a chip; the cache (1, 2, 32, 16) -> 1 head a chip
    assert types["p_layers_0_attn_k_proj_weight"] == (16, 64) and types["b_layers_0_attn_k_cache"] == (1, 1, 32, 16)
    assert p.replicas["p_layers_0_attn_k_proj_weight"] == 2 and p.replicas["b_layers_1_attn_v_cache"] == 2
    assert "p_layers_0_attn_q_proj_weight" not in p.replicas and types["p_layers_0_attn_q_proj_weight"] == (16, 64)
    sdpa = [o for o in p.ops if o.target == "aten.scaled_dot_product_attention.default"]
    assert {o.type.hint for o in sdpa} == {(1, 1, 8, 16)}
    part = next(r for r in c.log if r.name == "partition")
    assert not any(d.what == "all-gather its operands first" for d in part.decisions)
    assert sum("head(s) replicated: 2 slices, each on 2 chips" in d.what for d in part.decisions) == 4  # k, v x 2
    result = check(p, model, (tokens, pos), c.programs["decompose"], BOUNDS["fp32"])
    assert result.ok, result.to_dict()
    # a decode step through the replicated caches (each of a slice's 2 chips writes the same row)
    eager = copy.deepcopy(model)
    state = {k: v.clone() for k, v in p.state.items()}
    with torch.no_grad():
        run(p, (tokens, pos), state=state)
        (y,), _ = run(p, (torch.tensor([[5]]), torch.tensor([8])), state=state)
        eager(tokens, pos)
        ref = eager(torch.tensor([[5]]), torch.tensor([8]))
    assert float((y - ref).norm() / ref.norm()) < BOUNDS["fp32"]


def test_partitioned_program_prints_as_mlir_that_parses_back():
    from accelerator.compiler.mlir import parse_mlir, print_module, to_mlir

    _, _, c = compiled("llama", "fp32", 2)
    text = to_mlir(c.program)
    assert text.count('"npu.all_reduce"') == 4 and text.count('"npu.all_gather"') == 1
    assert 'collective = "all_reduce", bytes = "2048", chips = "2"' in text
    assert print_module(parse_mlir(text)) == text


def test_mlp_column_then_row_parallel_with_one_all_reduce():
    _, _, c = compiled("mlp", "fp32", 2)
    p = c.program
    # fc1 column-parallel: weight (64, 32) split along its 64 outputs, bias too; fc2 row-parallel:
    # weight (16, 64) split along its 64 inputs; fc2's bias stays whole (added once, after the sum)
    assert p.shards == {"p_fc1_weight": 0, "p_fc1_bias": 0, "p_fc2_weight": 1}
    types = {i.name: i.type.hint for i in p.inputs}
    assert types["p_fc1_weight"] == (32, 32) and types["p_fc2_weight"] == (16, 32) and types["p_fc2_bias"] == (16,)
    (ar,) = collectives(p, "all_reduce")
    # fc2's output: 4 rows x 16 fp32 = 256 B; a ring all-reduce sends 2 (N-1)/N x 256 = 256 B per chip
    assert ar.attrs["bytes"] == 256 and ar.type.hint == (4, 16)
    assert not collectives(p, "all_gather")
    # the bias is added after the reduction, on the name fc2's readers read
    last = p.producers()["addmm_1"]
    assert last.target == "aten.add.Tensor" and [r for r in last.refs()] == [ar.name, "p_fc2_bias"]


def test_llama_all_reduces_after_o_proj_and_down_proj():
    _, _, c = compiled("llama", "fp32", 2)
    p = c.program
    reduces = collectives(p, "all_reduce")
    # 2 layers x (o_proj + down_proj)
    assert [o.module for o in reduces] == [f"layers.{k}.{m}" for k in (0, 1) for m in ("attn.o_proj", "mlp.down_proj")]
    # each reduces (8 tokens x 64) fp32 = 2048 B: 2 x (2 - 1) / 2 x 2048 = 2048 B per chip
    assert {o.attrs["bytes"] for o in reduces} == {2048}
    # the logits leave vocab-split (lm_head column-parallel): one all-gather of 8 x 128 fp32 = 4096 B,
    # (2 - 1) / 2 x 4096 = 2048 B per chip
    (gather,) = collectives(p, "all_gather")
    assert gather.attrs["bytes"] == 2048 and gather.name == p.outputs[0].name
    # heads split: q (4 heads) and the KV caches (2 heads) hold half on each chip
    types = {i.name: i.type.hint for i in p.inputs}
    assert types["b_layers_0_attn_k_cache"] == (1, 1, 32, 16)
    sdpa = [o for o in p.ops if o.target == "aten.scaled_dot_product_attention.default"]
    assert {o.type.hint for o in sdpa} == {(1, 2, 8, 16)}


def test_int8_linears_split_like_fp32_ones():
    # the int8 policy's quantized linears (npu.qmm) split as the fp32 ones do: fc1 column-parallel
    # (its int8 weight (64, 32) along the 64 output channels, their 64 per-channel scales and the
    # bias with it), fc2 row-parallel (its int8 weight (16, 64) along the 64 inputs); the int32
    # partial sums all-reduced before the dequantize: 4 rows x 16 int32 = 256 B, 2 (2-1)/2 x 256 = 256 B
    model, inputs, c = compiled("mlp", "int8", 2)
    p = c.program
    assert p.shards == {"p_fc1_weight_int8": 0, "p_fc1_weight_scale": 0, "p_fc1_bias": 0, "p_fc2_weight_int8": 1}
    types = {i.name: i.type for i in p.inputs}
    assert types["p_fc1_weight_int8"].hint == (32, 32) and types["p_fc1_weight_int8"].dtype == "int8"
    assert types["p_fc1_weight_scale"].hint == (32,) and types["p_fc2_weight_int8"].hint == (16, 32)
    (ar,) = collectives(p, "all_reduce")
    assert ar.name == "addmm_1_acc" and ar.type.dtype == "int32" and ar.attrs["bytes"] == 256
    assert p.producers()["addmm_1_acc_partial"].target == "npu.qmm"
    assert not collectives(p, "all_gather")
    # int32 sums are exact: the same error as on one chip, within the int8 budget
    one = compiled("mlp", "int8", 1)[2]
    err = check(p, model, inputs, c.programs["decompose"], BOUNDS["int8"])
    assert err.ok and err.max_rel_error == check(one.program, model, inputs, one.programs["decompose"], 1).max_rel_error


def test_int8_llama_on_two_chips():
    model, inputs, c = compiled("llama", "int8", 2)
    p = c.program
    # 2 layers x (o_proj + down_proj) int32 all-reduces, the vocab-split logits gathered once
    reduces = collectives(p, "all_reduce")
    assert [o.name for o in reduces] == ["mm_3_acc", "mm_6_acc", "mm_10_acc", "mm_13_acc"]
    assert {o.type.dtype for o in reduces} == {"int32"} and len(collectives(p, "all_gather")) == 1
    assert p.shards["p_layers_0_attn_q_proj_weight_int8"] == 0 and p.shards["p_lm_head_weight_scale"] == 0
    result = check(p, model, inputs, c.programs["decompose"], BOUNDS["int8"])
    assert result.ok, result.to_dict()


def test_bf16_logits_are_gathered_before_the_cast_to_fp32():
    _, _, c = compiled("llama", "bf16", 2)
    (gather,) = collectives(c.program, "all_gather")
    # 8 x 128 bf16 logits = 2048 B, (2 - 1) / 2 x 2048 = 1024 B per chip (fp32 after the cast would be 2048)
    assert gather.type.dtype == "bfloat16" and gather.attrs["bytes"] == 1024
    assert c.program.producers()[c.program.outputs[0].name].target == "npu.cast"


def test_four_chips_on_a_repeated_llama_with_a_decode_step():
    cfg = LlamaConfig(n_layers=4, n_heads=4, n_kv_heads=4)
    model, (tokens, pos) = tiny_llama(cfg=cfg)
    c = compile_model(model, (tokens, pos), load_accel(HW), "fp32", chips=4)
    assert len(collectives(c.program, "all_reduce")) == 2 * 4
    # prefill then one decode step through the split KV caches, against eager doing the same
    eager = copy.deepcopy(model)
    state = {k: v.clone() for k, v in c.program.state.items()}
    nxt = torch.tensor([[5]])
    with torch.no_grad():
        run(c.program, (tokens, pos), state=state)
        (y,), _ = run(c.program, (nxt, torch.tensor([8])), state=state)
        eager(tokens, pos)
        ref = eager(nxt, torch.tensor([8]))
    assert float((y - ref).norm() / ref.norm()) < BOUNDS["fp32"]


def test_more_chips_than_the_preset_has_is_an_input_error():
    model, inputs = tiny_mlp()
    with pytest.raises(InputError, match="edge-npu has 1 chip"):
        compile_model(model, inputs, load_accel("edge-npu"), "fp32", chips=2)


class _HostInTheMiddle(torch.nn.Module):
    """Linear -> cumsum (no unit of the NPU runs it: the host) -> Linear."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.b(torch.cumsum(self.a(x), dim=-1))


def test_host_cut_costs_the_bytes_over_the_host_link():
    torch.manual_seed(0)
    model, x = _HostInTheMiddle().eval(), torch.randn(4, 32)
    hw = load_accel(HW)
    c = Pipeline().run(model, (x,), CompileContext(hw, "fp32"))
    (host,) = [o for o in c.program.ops if o.attrs.get("unit") == "host" and o.target == "aten.cumsum.default"]
    # in: a's output 4 x 64 fp32 = 1024 B to the host; out: cumsum's 4 x 64 fp32 = 1024 B back
    assert host.attrs["cut_in_bytes"] == 1024 and host.attrs["cut_out_bytes"] == 1024
    cuts = [d for d in next(r for r in c.log if r.name == "partition").decisions if d.what.startswith("cut:")]
    assert len(cuts) == 2
    # 1024 B / 31.5 GB/s (PCIe 4.0 x16) + 1 us = 1.0325 us
    assert all("1.03 us" in d.why for d in cuts), cuts
    # and the two-chip program still runs it (the host op on the gathered value) within the bound
    c2 = compile_model(model, (x,), hw, "fp32", chips=2)
    assert check(c2.program, model, (x,), c2.programs["decompose"], BOUNDS["fp32"]).ok


def test_perf_compile_chips_json_and_bad_chip_count():
    import json

    from typer.testing import CliRunner

    from profiler.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["compile", "mlp", "--accel", HW, "--chips", "2", "--check", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert "partition" in [p["name"] for p in doc["passes"]] and doc["chips"] == 2
    # one all-reduce of fc2's 4 x 16 fp32 output: 2 x (2 - 1) / 2 x 256 B = 256 B per chip
    assert doc["collectives"] == [{"name": "addmm_1_reduced", "op": "all_reduce", "bytes": 256, "module": "fc2"}]
    assert doc["check"]["max_rel_error"] <= BOUNDS["fp32"]
    r = runner.invoke(app, ["compile", "llama2-7b", "--accel", HW, "--check"])  # meta weights: compile only
    assert r.exit_code == 2 and "--check needs real weights" in r.stderr
    r = runner.invoke(app, ["compile", "mlp", "--accel", HW, "--chips", "9"])
    assert r.exit_code == 2 and "datacenter-npu has 8 chip(s)" in r.stderr and r.stderr.strip().count("\n") == 0
