"""Scheduling (accelerator/compiler/schedule.py): the kernel order (program order when valid,
repaired when not, in-place writes kept between their readers) and the DMA transfers, with
bytes checked by hand on the MLP (whole tensors and tiled) and the Llama KV-cache update."""

from __future__ import annotations

from dataclasses import replace

import pytest
from accel_programs import compiled, decomposed
from hypothesis import given, settings
from hypothesis import strategies as st
from test_accel_allocate import random_programs

from accelerator.compiler.allocate import allocate
from accelerator.compiler.pipeline import CompileContext, Pipeline
from accelerator.compiler.program import Input, Kernel, Op, Output, Program, Ref, TensorType
from accelerator.compiler.schedule import order_kernels, route_bytes, schedule
from accelerator.hardware import load_accel


def scheduled(name: str, policy: str = "fp32", tiles=None):
    ctx = CompileContext(load_accel("edge-npu"))
    p = allocate(compiled(name, "edge-npu", policy).program, ctx)
    if tiles:
        p = replace(p, kernels=tuple(replace(k, tile=tiles.get(k.ops[0])) for k in p.kernels))
    return schedule(p, ctx), ctx


def by_kernel(program):
    return {(program.kernels[max(t.before, t.after)].ops[0], t.value, t.src, t.dst): t.bytes for t in program.transfers}


def test_mlp_transfers_by_hand():
    p, ctx = scheduled("mlp")
    # fp32 MLP, x (4, 32): W1 64x32, b1 64, W2 16x64, b2 16; intermediates in shared memory
    assert by_kernel(p) == {
        ("addmm", "p_fc1_bias", "hbm", "local"): 64 * 4,
        ("addmm", "x", "hbm", "local"): 4 * 32 * 4,  # 512
        ("addmm", "permute", "hbm", "local"): 64 * 32 * 4,  # 8192: W1^T, a view of W1 read through strides
        ("addmm", "addmm", "local", "shared"): 4 * 64 * 4,  # 1024
        ("gelu", "addmm", "shared", "local"): 1024,
        ("gelu", "gelu", "local", "shared"): 1024,
        ("addmm_1", "p_fc2_bias", "hbm", "local"): 16 * 4,
        ("addmm_1", "gelu", "shared", "local"): 1024,
        ("addmm_1", "permute_1", "hbm", "local"): 16 * 64 * 4,  # 4096
        ("addmm_1", "addmm_1", "local", "hbm"): 4 * 16 * 4,  # 256, the output
    }
    # the permute kernels are views: no transfer. Per route: hbm->local 256 + 512 + 8192 + 64 + 4096 = 13120
    assert route_bytes(p.transfers) == {
        "hbm->local": 13120,
        "local->shared": 2048,
        "shared->local": 2048,
        "local->hbm": 256,
    }
    assert ctx.decisions[-len(p.transfers) - 1].what == (
        "bytes moved: hbm->local 13120, local->shared 2048, shared->local 2048, local->hbm 256"
    )
    loads = [t for t in p.transfers if t.before >= 0]
    assert all(t.after == -1 and t.dst == "local" for t in loads)


def test_tiled_matmul_reads_each_operand_once_per_tile_row_or_column():
    p, _ = scheduled("mlp", tiles={"addmm": {"m": 2, "n": 16, "k": 32}})
    t = by_kernel(p)
    # addmm(b1, x, W1^T): M=4, N=64. One 2x16 output tile at a time: x (A) read ceil(64/16) = 4 times,
    # W1^T (B) and b1 ceil(4/2) = 2 times; the output written once
    assert t[("addmm", "x", "hbm", "local")] == 512 * 4
    assert t[("addmm", "permute", "hbm", "local")] == 8192 * 2
    assert t[("addmm", "p_fc1_bias", "hbm", "local")] == 256 * 2
    assert t[("addmm", "addmm", "local", "shared")] == 1024
    assert t[("gelu", "addmm", "shared", "local")] == 1024  # untiled kernels: whole tensors


def test_llama_cache_update_moves_only_the_written_rows_and_the_embedding_only_its_rows():
    p, _ = scheduled("llama", "bf16")
    t = by_kernel(p)
    # bf16 KV cache (1, 2, 32, 16) = 2048 B; prefill of 8 tokens writes (1, 2, 8, 16) x 2 B = 512 B
    assert t[("index_copy", "b_layers_0_attn_k_cache", "local", "hbm")] == 512
    assert ("index_copy", "b_layers_0_attn_k_cache", "hbm", "local") not in t  # the write does not read the cache
    # attention reads the whole cache afterwards
    assert t[("scaled_dot_product_attention", "b_layers_0_attn_k_cache", "hbm", "local")] == 2048
    # the embedding gathers 8 rows of 64 fp32: 2048 B of the 128 x 64 x 4 = 32768 B table
    assert t[("embedding", "p_embed_weight", "hbm", "local")] == 8 * 64 * 4
    # the write happens before attention reads the cache, in the schedule
    order = [k.ops[0] for k in p.kernels]
    assert order.index("index_copy") < order.index("scaled_dot_product_attention")


def f32(*shape: int) -> TensorType:
    return TensorType(shape, "float32", shape)


def test_order_repairs_a_kernel_that_reads_before_its_producer_and_keeps_in_place_writes_between_readers():
    ops = (
        Op("a", "aten.relu.default", (Ref("x"),), {}, f32(4)),
        Op("b", "aten.neg.default", (Ref("a"),), {}, f32(4)),
        Op("read_old", "aten.neg.default", (Ref("cache"),), {}, f32(4)),
        Op(
            "w",
            "aten.index_copy_.default",
            (Ref("cache"), 0, Ref("i"), Ref("b")),
            {},
            f32(4),
            attrs={"in_place": "cache"},
        ),
        Op("read_new", "aten.neg.default", (Ref("cache"),), {}, f32(4)),
    )
    inputs = (Input("x", "user", "", f32(4)), Input("cache", "buffer", "", f32(4)), Input("i", "user", "", f32(1)))
    program = Program("p", inputs, ops, (Output("b"), Output("read_old"), Output("read_new")), {})

    def k(name, reads, writes):
        return Kernel(name, (name,), "vector", reads, writes)

    # given out of order: b before its producer a; the write w before the old read; the new read first
    given = (
        k("read_new", ("cache",), ("read_new",)),
        k("b", ("a",), ("b",)),
        k("w", ("cache", "i", "b"), ()),
        k("a", ("x",), ("a",)),
        k("read_old", ("cache",), ("read_old",)),
    )
    order = [x.name for x in order_kernels(program, given)]
    # the program order of the in-place write: read_old before w, read_new after it; b after a
    assert order.index("a") < order.index("b") < order.index("w")
    assert order.index("read_old") < order.index("w") < order.index("read_new")
    cycle = (k("a", ("b",), ("a",)), k("b", ("a",), ("b",)))
    with pytest.raises(ValueError, match="dependency cycle"):
        order_kernels(program, cycle)


def test_pipeline_runs_allocate_and_schedule_last_and_each_can_be_skipped():
    ctx = CompileContext(load_accel("edge-npu"))
    c = Pipeline().run_program(decomposed("mlp"), ctx)
    assert [r.name for r in c.log][-2:] == ["allocate", "schedule"]
    # fused fp32 MLP, 2 kernels: fc1 loads its weight, bias and x and stores the GELU; fc2 loads
    # its weight, bias and the GELU and stores the output: 3 + 1 + 3 + 1 = 8 transfers
    assert c.program.placement and len(c.program.transfers) == 8
    skipped = Pipeline(skip=["allocate"]).run_program(decomposed("mlp"), CompileContext(load_accel("edge-npu")))
    assert not skipped.program.placement
    # without a placement every buffer counts in HBM: nothing goes to shared memory
    assert {t.src for t in skipped.program.transfers} | {t.dst for t in skipped.program.transfers} == {"hbm", "local"}
    assert any(d.what == "every buffer counted in hbm" for d in skipped.log[-1].decisions)


@settings(max_examples=100, deadline=None)
@given(random_programs(), st.randoms(use_true_random=False))
def test_order_is_topological_and_keeps_a_valid_order(case, rnd):
    program, _ = case
    kernels = list(program.kernels)
    assert order_kernels(program, program.kernels) == program.kernels  # program order is valid: kept
    rnd.shuffle(kernels)
    order = order_kernels(program, tuple(kernels))
    assert sorted(k.name for k in order) == sorted(k.name for k in kernels)
    made = {v: i for i, k in enumerate(order) for v in k.ops}
    for i, k in enumerate(order):
        assert all(made.get(v, -1) < i for v in k.inputs), k.name  # every input made before (or a program input)
