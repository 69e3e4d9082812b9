"""Fusion: the automatic plan's kernels on the MLP and the Llama decoder (counted by hand), a
plan file (JSON/YAML) that overrides it and its errors, the printable plan, the MLIR text of a
fused program, and the must-hold property: fusion and tiling never change the numerics beyond
the precision bound (hypothesis over random plans and tile sizes on the MLP and an attention block)."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import torch
from accel_programs import compiled, fuse_and_tile, fused, workload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelerator.compiler.check import BOUNDS, rel_error
from accelerator.compiler.execute import run
from accelerator.compiler.fusion import FusionPlan, Graph, PlanGroup, auto_plan, check_group, load_plan
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.tiling import attention_dims
from accelerator.hardware import load_accel
from profiler.model.errors import InputError


def _kernels(program):
    return {k.name: k for k in program.kernels}


def test_mlp_epilogue_fused_into_the_matmul():
    # fp32 MLP: permute(W1), addmm (x W1^T + b1), gelu, permute(W2), addmm = 5 ops. The GELU is
    # the only reader of addmm: an epilogue; each weight permute is read only by its addmm: the
    # weight loaded transposed. 5 ops -> 2 kernels.
    p = fused("mlp", "edge-npu", "fp32")
    assert len(p.ops) == 5 and [k.ops for k in p.kernels] == [("permute", "addmm", "gelu"), ("permute_1", "addmm_1")]
    why = p.kernels[0].attrs["fused"]
    assert why["gelu"] == "epilogue: elementwise" and why["permute"].startswith("prologue: weight layout")
    assert set(p.kernels[0].inputs) == {"p_fc1_weight", "x", "p_fc1_bias"}
    assert p.kernels[0].outputs == ("gelu",) and p.kernels[1].outputs == ("addmm_1",)
    # bf16 adds the cast of x (a prologue) and of the result back to fp32 (an epilogue): 7 -> 2
    b = fused("mlp", "edge-npu", "bf16")
    assert len(b.ops) == 7 and [len(k.ops) for k in b.kernels] == [4, 3]
    assert b.kernels[1].attrs["fused"]["addmm_1_to_float32"] == "epilogue: cast"


def test_llama_kernel_counts():
    # tiny Llama at bf16 on the edge NPU: 174 ops, + 36 recomputed norm ops = 210 ops -> 57 kernels.
    # Each layer's input RMSNorm (6 ops: pow, mean, add, rsqrt, 2 mul) feeds q, k and v: copied
    # for k and v (12 ops); the post-attention one feeds gate and up: copied for up (6): 18 x 2 layers.
    # matrix 17: per layer q, k, v, o, gate, up, down (7 mm) + SDPA = 8, x 2 layers, + lm_head.
    # vector 9: the causal mask (le); per layer rotary q and k chains, 2 negs: 4 x 2 (every
    #   RMSNorm is a normalisation prologue of the matmuls it feeds).
    # dma 30: embedding, 2 rope-table gathers, 2 unsqueezes and a slice of the positions (6);
    #   per layer 3 head splits (permute), 4 slices + 2 cats (rotate-half), 2 cache writes,
    #   1 head merge (permute) = 12, x 2.  host 1: the sequence length (sym_size).
    p = fused("llama", "edge-npu", "bf16")
    assert len(p.ops) == 174 + 36 and len(p.kernels) == 57
    assert Counter(k.unit for k in p.kernels) == {"matrix": 17, "vector": 9, "dma": 30, "host": 1}
    k = _kernels(p)
    # every op in exactly one kernel; one matmul or attention op per matrix kernel
    assert sorted(o for x in p.kernels for o in x.ops) == sorted(o.name for o in p.ops)
    # SwiGLU: silu(gate) * up fused into the gate projection (its output feeds down_proj)
    assert {"sigmoid", "mul_213", "mul_231"} <= set(k["mm_4"].ops)
    # the residual add is the o_proj's epilogue
    assert k["mm_3"].attrs["fused"]["add_161"] == "epilogue: elementwise"
    # the final RMSNorm feeds only the LM head: a normalisation prologue
    assert k["mm_14"].attrs["fused"]["mean_4"] == "normalisation prologue: row reduction"
    assert {"pow_5", "mean_4", "add_431", "rsqrt_4", "mul_509", "mul_513"} <= set(k["mm_14"].ops)
    # attention whole: its working set for one head fits the 512 KiB local memory
    assert k["scaled_dot_product_attention"].attrs["attention"] == "whole"
    assert k["scaled_dot_product_attention"].ops == ("add_104_to_bfloat16", "scaled_dot_product_attention")
    # kernel order is a topological order: every input is a program input or an earlier kernel's output
    done = {i.name for i in p.inputs}
    for x in p.kernels:
        assert set(x.inputs) <= done, x.name
        done.update(x.ops)


def test_a_norm_feeding_several_matmuls_is_recomputed_in_each_prologue():
    # layer 0's input RMSNorm (pow_1, mean, add_23, rsqrt, mul_19, mul_23) feeds q (mm), k (mm_1)
    # and v (mm_2); the post-attention one (pow_2 ... mul_192) feeds gate (mm_4) and up (mm_5)
    p = fused("llama", "edge-npu", "bf16")
    k = _kernels(p)
    norm = ["pow_1", "mean", "add_23", "rsqrt", "mul_19", "mul_23"]
    assert set(norm) <= set(k["mm"].ops)
    for mm in ("mm_1", "mm_2"):
        assert {f"{o}_for_{mm}" for o in norm} <= set(k[mm].ops)
        assert k[mm].attrs["fused"][f"mean_for_{mm}"] == "normalisation prologue: row reduction"
    post = ["pow_2", "mean_1", "add_171", "rsqrt_1", "mul_188", "mul_192"]
    assert set(post) <= set(k["mm_4"].ops) and {f"{o}_for_mm_5" for o in post} <= set(k["mm_5"].ops)
    # no kernel runs a norm alone, and no norm value leaves its kernel: each matmul kernel reads
    # the residual stream (embedding / add_161) and its norm weight, not a normalised activation
    assert not [x for x in p.kernels if x.unit == "vector" and {"mean", "rsqrt"} & {o.split("_")[0] for o in x.ops}]
    assert {"embedding", "p_layers_0_input_norm_weight"} <= set(k["mm_2"].inputs)
    # the decision names the consumers and why
    ctx = CompileContext(load_accel("edge-npu"), "bf16")
    from accelerator.compiler.fusion import fuse

    fuse(compiled("llama", "edge-npu", "bf16").program, ctx)
    (d,) = [d for d in ctx.decisions if d.op == "mul_23"]
    assert d.what == "normalisation recomputed in the prologue of each of mm, mm_1, mm_2 (6 ops each)"
    assert "HBM" in d.why


def test_attention_working_set_decides_whole_or_flash():
    from dataclasses import replace

    from accelerator.compiler.fusion import fuse

    p = compiled("llama", "edge-npu", "bf16").program
    sdpa = next(o for o in p.ops if o.target == "aten.scaled_dot_product_attention.default")
    d = attention_dims(p, sdpa)
    assert (d["lq"], d["lk"], d["e"], d["ev"], d["a"], d["mask"]) == (8, 32, 16, 16, 2, 1)
    # 2*(8*16 + 32*16 + 32*16)*2 + 2*8*32*1 (mask) + 8*32*4 (scores) + 8*16*4 (out) + 2*8*4 = 6720
    hw = load_accel("edge-npu")
    for local, shared, want in [
        (8192, 8192, ("whole", "local")),
        (4096, 8192, ("whole", "shared")),
        (4096, 6000, ("flash", "local")),
    ]:
        small = replace(
            hw,
            local_memory=replace(hw.local_memory, capacity_bytes=local),
            shared_memory=replace(hw.shared_memory, capacity_bytes=shared),
        )
        ctx = CompileContext(small, "bf16")
        k = _kernels(fuse(p, ctx))["scaled_dot_product_attention"]
        assert (k.attrs["attention"], k.attrs["memory"], k.attrs["working_set_bytes"]) == (*want, 6720)
        assert any(dec.what == f"attention {want[0]}" for dec in ctx.decisions)


def test_plan_file_overrides_and_prints(tmp_path):
    program = compiled("mlp", "edge-npu", "fp32").program
    plan = tmp_path / "plan.yaml"
    plan.write_text("kernels:\n  - name: fc1_act\n    ops: [addmm, gelu]\n")
    p = fuse_and_tile(program, "edge-npu", "fp32", plan=load_plan(plan))
    # the plan names one group; the 3 ops it does not name run alone: 4 kernels
    assert [k.ops for k in p.kernels] == [("permute",), ("addmm", "gelu"), ("permute_1",), ("addmm_1",)]
    assert _kernels(p)["fc1_act"].attrs["fused"] == {"addmm": "plan file", "gelu": "plan file"}
    auto = auto_plan(program, CompileContext(load_accel("edge-npu")))
    text = auto.to_text()
    assert text.splitlines()[0] == "fusion plan (auto): 2 kernels"
    assert "gelu (epilogue: elementwise)" in text
    # the printed JSON plan reads back as a plan file with the same kernels
    (tmp_path / "auto.json").write_text(json.dumps(auto.to_dict()))
    again = fuse_and_tile(program, "edge-npu", "fp32", plan=load_plan(tmp_path / "auto.json"))
    assert [k.ops for k in again.kernels] == [k.ops for k in fused("mlp", "edge-npu", "fp32").kernels]


@pytest.mark.parametrize(
    "groups,message",
    [
        ([["addmm", "nope"]], "the plan names op 'nope', which"),
        ([["addmm", "addmm_1"]], "kernel addmm: addmm and addmm_1 are both matmuls"),
        ([["permute", "gelu"]], "kernel permute: permute is read by addmm outside the kernel"),
        ([["addmm", "gelu"], ["gelu", "addmm_1"]], "op 'gelu' is in two kernels"),
    ],
)
def test_bad_plan_is_one_line(tmp_path, groups, message):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"kernels": [{"ops": g} for g in groups]}))
    with pytest.raises(InputError) as e:
        fuse_and_tile(compiled("mlp", "edge-npu", "fp32").program, "edge-npu", "fp32", plan=load_plan(path))
    assert message in str(e.value) and "\n" not in str(e.value) and e.value.path == str(path)


def test_intermediate_read_outside_the_kernel_is_refused():
    # the input RMSNorm of layer 0 feeds q, k and v: its last op (mul_23) cannot stay inside a
    # kernel with the q projection's view
    p = compiled("llama", "edge-npu", "bf16").program
    problem = check_group(Graph(p), ["pow_1", "mean", "add_23", "rsqrt", "mul_19", "mul_23", "view"])
    assert problem == "mul_23 is read by view_3 outside the kernel (only its last op's value may leave it)"
    # two cache writes share no producer-consumer edge
    assert check_group(Graph(p), ["index_copy", "index_copy_1"]) == "index_copy is not connected to the other ops"


def test_cli_plan(tmp_path):
    from typer.testing import CliRunner

    from profiler.cli import app

    runner = CliRunner()
    bad = tmp_path / "bad.json"
    bad.write_text('[["addmm", "gelu_typo"]]')
    r = runner.invoke(app, ["compile", "mlp", "--accel", "edge-npu", "--plan", str(bad)])
    assert r.exit_code == 2 and r.stderr.strip().count("\n") == 0
    assert "gelu_typo" in r.stderr and str(bad) in r.stderr
    # the JSON report is a plan file: its kernels' ops and tiles come back
    r = runner.invoke(app, ["compile", "mlp", "--accel", "edge-npu", "--json"])
    (tmp_path / "report.json").write_text(r.stdout)
    r2 = runner.invoke(
        app, ["compile", "mlp", "--accel", "edge-npu", "--json", "--plan", str(tmp_path / "report.json")]
    )
    assert r2.exit_code == 0, r2.output
    strip = [{k: v for k, v in x.items() if k != "why"} for x in json.loads(r.stdout)["kernels"]]
    assert [{k: v for k, v in x.items() if k != "why"} for x in json.loads(r2.stdout)["kernels"]] == strip


def test_fused_program_prints_as_mlir():
    from accelerator.compiler.mlir import parse_mlir, print_module, to_mlir

    text = to_mlir(fused("llama", "edge-npu", "bf16"))
    assert print_module(parse_mlir(text)) == text
    mm = next(t for t in text.splitlines() if t.strip().startswith("%mm ="))
    assert 'kernel = "mm"' in mm and 'tile = "m=8 n=64 k=64"' in mm  # M = 8 prefill tokens


# --- must hold: fusion and tiling never change numerics beyond the precision bound -------------


def _random_plan(program, draw) -> FusionPlan:
    """Random legal groups: each op, on a coin flip, joins the group of one of its producers
    when check_group accepts the union."""
    graph = Graph(program)
    group_of: dict[str, int] = {}
    groups: list[list[str]] = []
    for op in program.ops:
        producers = [r for r in op.refs() if r in group_of]
        if producers and draw(st.booleans()):
            g = group_of[draw(st.sampled_from(producers))]
            if check_group(graph, groups[g] + [op.name]) is None:
                groups[g].append(op.name)
                group_of[op.name] = g
                continue
        group_of[op.name] = len(groups)
        groups.append([op.name])
    return FusionPlan(tuple(PlanGroup("", tuple(g)) for g in groups if len(g) > 1), "random")


def _random_tiles(program, draw) -> dict:
    """Each matmul and attention kernel a tile of ceil(dim / parts), parts 1..3 per dim; each
    vector kernel ceil(elements / parts) elements, parts 1..5 (ragged tiles run tile by tile)."""
    from accelerator.compiler.program import tensor_types

    tiles = {}
    for k in program.kernels:
        if k.unit == "vector" and k.tile and "elements" in k.tile:
            last = next(o for o in program.ops if o.name == k.ops[-1])
            numel = next(tensor_types(last.type)).numel
            tiles[k.name] = {"elements": max(1, math.ceil(numel / draw(st.integers(1, 5))))}
        elif k.tile and set(k.tile) & {"m", "q"}:
            if "m" in k.tile:
                dims = _matmul_extent(program, k)
                tiles[k.name] = {d: math.ceil(n / draw(st.integers(1, 3))) for d, n in dims.items()}
            else:
                sdpa = next(o for o in program.ops if o.name in k.ops and "scaled_dot" in o.target)
                d = attention_dims(program, sdpa)
                tiles[k.name] = {
                    "q": math.ceil(d["lq"] / draw(st.integers(1, 3))),
                    "kv": math.ceil(d["lk"] / draw(st.integers(1, 4))),
                }
    return tiles


def _matmul_extent(program, kernel):
    from accelerator.compiler.fusion import kind
    from accelerator.compiler.tiling import matmul_dims

    op = next(o for o in program.ops if o.name in kernel.ops and kind(o) == "matmul")
    d = matmul_dims(program, op)
    return {"m": d["m"], "n": d["n"], "k": d["k"]}


CASES = [
    ("mlp", "edge-npu", "fp32"),
    ("mlp", "datacenter-npu", "bf16"),
    ("vit", "datacenter-npu", "fp32"),
    ("llama", "edge-npu", "bf16"),
]


@pytest.fixture(scope="module")
def references():
    """Unfused outputs of each case, computed once."""
    out = {}
    with torch.no_grad():
        for name, preset, policy in CASES:
            out[name, preset, policy] = run(compiled(name, preset, policy).program, workload(name)[1])[0]
    return out


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fusion_and_tiling_keep_numerics(references, case, data):
    name, preset, policy = case
    program = compiled(name, preset, policy).program
    plan = _random_plan(program, data.draw)
    planned = fuse_and_tile(program, preset, policy, plan=plan)
    tiled = fuse_and_tile(program, preset, policy, plan=plan, tiles=_random_tiles(planned, data.draw))
    with torch.no_grad():
        outs, _ = run(tiled, workload(name)[1])
    for y, ref in zip(outs, references[case]):
        assert rel_error(y, ref) <= BOUNDS[policy]


def test_fusion_and_tiling_are_skippable_and_overridable():
    from dataclasses import replace

    from accel_programs import decomposed

    from accelerator.compiler.pipeline import Pipeline, default_passes
    from accelerator.compiler.program import default_kernels
    from accelerator.compiler.report import kernel_entries

    passes = [p for p in default_passes() if p[0] != "decompose"]
    ctx = CompileContext(load_accel("edge-npu"), "fp32")
    c = Pipeline(passes, skip=["fusion", "tiling"]).run_program(decomposed("mlp"), ctx)
    assert [r.skipped for r in c.log] == [False, False, False, True, True, False, False]
    # no fusion: allocation places one kernel per op (default_kernels), in program order
    assert c.program.kernels == default_kernels(c.program)
    # the report then lists one kernel per op: 2 permutes (dma), 2 addmm and the GELU (vector: no fp32 matrix)
    assert [(k["ops"], k["tile"]) for k in kernel_entries(c.program)][:2] == [(["permute"], None), (["addmm"], None)]

    def one_per_op(program, ctx):
        return replace(program, kernels=default_kernels(program))

    c = Pipeline(passes, override={"fusion": one_per_op}).run_program(decomposed("mlp"), ctx)
    assert len(c.program.kernels) == 5 and all(k.tile for k in c.program.kernels)


ALL = [
    (w, preset, policy)
    for w in ("mlp", "resnet", "vit", "llama")
    for preset in ("edge-npu", "datacenter-npu")
    for policy in ("fp32", "bf16", "int8", "fp8")
    if not (preset == "edge-npu" and policy == "fp8")
]


@pytest.mark.parametrize("name,preset,policy", ALL)
def test_every_workload_fused_and_tiled_within_the_bound(name, preset, policy):
    from accelerator.compiler.check import check

    from accel_programs import decomposed

    model, inputs = workload(name)
    program = fused(name, preset, policy)
    assert program.kernels and all(k.tile for k in program.kernels if k.unit != "host")
    result = check(program, model, inputs, decomposed(name), BOUNDS[policy])
    assert result.max_rel_error <= BOUNDS[policy], result.to_dict()


def test_fused_decode_after_prefill():
    # kernel order keeps the cache writes before the attention that reads them: prefill 8 tokens,
    # then decode one at position 8 on the same state, flash attention (kv tile 8 of the 32-entry
    # cache) and tiled matmuls, against eager within the bf16 bound
    import copy

    model, (tokens, pos) = workload("llama")
    program = compiled("llama", "edge-npu", "bf16").program
    tiles = {"scaled_dot_product_attention": {"q": 4, "kv": 8}, "mm_4": {"m": 4, "n": 64, "k": 32}}
    p = fuse_and_tile(program, "edge-npu", "bf16", tiles=tiles)
    assert next(k for k in p.kernels if k.name == "scaled_dot_product_attention").attrs["attention"] == "flash"
    eager = copy.deepcopy(model)
    state = {k: v.clone() for k, v in p.state.items()}
    with torch.no_grad():
        run(p, (tokens, pos), state=state)
        eager(tokens, pos)
        step = (torch.tensor([[5]]), torch.tensor([8]))
        (out,), _ = run(p, step, state=state)
        ref = eager(*step)
    assert rel_error(out, ref) <= BOUNDS["bf16"]
