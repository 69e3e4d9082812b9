"""Memory allocation (accelerator/compiler/allocate.py): liveness by hand on a tiny program,
placements and peaks by hand on the MLP, spilling, an HBM that cannot hold the plan, and the
must-hold property: two buffers of one level that are live at once never share a byte."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from accel_programs import compiled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelerator.compiler.allocate import allocate, live_peak_bytes, liveness, peak_bytes
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Input, Kernel, Op, Output, Program, Ref, TensorType, default_kernels
from accelerator.hardware import PRESETS_DIR, load_accel
from profiler.model.errors import InputError


def f32(*shape: int) -> TensorType:
    return TensorType(shape, "float32", shape)


def op(name: str, target: str, *args, t: TensorType, unit: str = "vector") -> Op:
    return Op(name, target, args, {}, t, attrs={"unit": unit})


def tiny() -> Program:
    """x (4x8, user) and w (8x16, param): a = relu(x); b = mm(a, w); c = add(b, b); d = neg(c) -> output."""
    ops = (
        op("a", "aten.relu.default", Ref("x"), t=f32(4, 8)),  # 128 B
        op("b", "aten.mm.default", Ref("a"), Ref("w"), t=f32(4, 16), unit="matrix"),  # 256 B
        op("c", "aten.add.Tensor", Ref("b"), Ref("a"), t=f32(4, 16)),  # 256 B (a broadcast: shapes do not matter here)
        op("d", "aten.neg.default", Ref("c"), t=f32(4, 16)),  # 256 B
    )
    inputs = (Input("w", "param", "w", f32(8, 16)), Input("x", "user", "", f32(4, 8)))  # 512 B, 128 B
    return Program("tiny", inputs, ops, (Output("d"),), {})


def spec(tmp_path: Path, **memory: int) -> Path:
    """edge-npu with chip.<level>.capacity_bytes replaced (hbm=..., shared_memory=...)."""
    doc = yaml.safe_load((PRESETS_DIR / "edge-npu.yaml").read_text())
    for level, cap in memory.items():
        doc["chip"][level]["capacity_bytes"] = cap
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_liveness_by_hand():
    p = tiny()
    kernels = default_kernels(p)  # k0 a, k1 b, k2 c, k3 d
    assert liveness(p, kernels) == {
        "w": (0, 1),  # an input: from the start to its last reader (k1)
        "x": (0, 0),
        "a": (0, 2),  # produced by k0, last read by k2
        "b": (1, 2),
        "c": (2, 3),
        "d": (3, 3),  # a program output: to the last kernel
    }


def test_tiny_placement_by_hand():
    ctx = CompileContext(load_accel("edge-npu"))
    p = allocate(tiny(), ctx).placement
    # shared, largest first (ties: first use): b 256 @0; c 256 overlaps b -> @256; a 128 overlaps both -> @512
    assert {v: (p[v].level, p[v].offset) for v in "abc"} == {
        "a": ("shared", 512),
        "b": ("shared", 0),
        "c": ("shared", 256),
    }
    # hbm: w 512 (a param: live over all 4 kernels) @0; d 256 (3..3) @512; x 128 (0..0) does not overlap d -> @512 too
    assert {v: (p[v].level, p[v].offset, p[v].live) for v in "wxd"} == {
        "w": ("hbm", 0, (0, 3)),
        "x": ("hbm", 512, (0, 0)),
        "d": ("hbm", 512, (3, 3)),
    }
    assert peak_bytes(p, "shared") == 512 + 128 and peak_bytes(p, "hbm") == 512 + 256
    assert any(d.what == "peak shared 640 B of 4.0 MiB" for d in ctx.decisions)


def test_mlp_placement_by_hand():
    ctx = CompileContext(load_accel("edge-npu"))
    p = allocate(compiled("mlp", "edge-npu", "fp32").program, ctx).placement
    # fp32 MLP, x (4, 32): kernels permute(W1) | addmm | gelu | permute_1(W2) | addmm_1.
    # The transposes are views of the weights: their memory, no copy
    assert p["permute"] == p["p_fc1_weight"] and p["permute_1"] == p["p_fc2_weight"]
    # shared: addmm 1024 B (1..2) @0; gelu 1024 B (2..4) overlaps it at kernel 2 -> @1024
    assert {v: (p[v].level, p[v].offset, p[v].live) for v in ("addmm", "gelu")} == {
        "addmm": ("shared", 0, (1, 2)),
        "gelu": ("shared", 1024, (2, 4)),
    }
    assert peak_bytes(p, "shared") == 2048
    # hbm by size: W1 8192 @0, W2 4096 @8192, x 512 (0..1) @12288, b1 256 @12800, the output 256 (4..4)
    # in x's space (x is dead after kernel 1), b2 64 @13056
    assert (p["addmm_1"].level, p["addmm_1"].offset) == ("hbm", 12288) and p["x"].offset == 12288
    assert peak_bytes(p, "hbm") == 13056 + 64
    assert any(d.op == "permute" and d.what == "hbm @0: a view of p_fc1_weight" for d in ctx.decisions)


def test_llama_reuses_shared_memory():
    p = allocate(compiled("llama", "edge-npu", "fp32").program, CompileContext(load_accel("edge-npu"))).placement
    shared = {(q.offset, q.size, q.live) for q in p.values() if q.level == "shared"}  # views counted once
    # 2 decoder layers of intermediates: far more bytes than are ever live at once, and the plan
    # needs no more than that lower bound (the most bytes live at one kernel)
    assert peak_bytes(p, "shared") == live_peak_bytes(p, "shared") < sum(size for _, size, _ in shared) / 5
    assert_no_overlap(p)


def test_spill_to_hbm_when_shared_memory_is_full(tmp_path):
    ctx = CompileContext(load_accel(spec(tmp_path, shared_memory=1024)))
    p = allocate(compiled("mlp", "edge-npu", "fp32").program, ctx).placement
    # addmm 1024 B fills shared memory over kernels 1..2; gelu (2..4) would end at 2048 > 1024
    assert p["addmm"].level == "shared" and p["gelu"].level == "hbm"
    assert any(d.op == "gelu" and d.what == "spilled to hbm (1.0 KiB)" for d in ctx.decisions)


def test_a_plan_that_does_not_fit_hbm_names_the_buffer_and_its_size(tmp_path):
    ctx = CompileContext(load_accel(spec(tmp_path, hbm=10000)))
    with pytest.raises(InputError) as e:
        allocate(compiled("mlp", "edge-npu", "fp32").program, ctx)
    # W1 8192 B @0 fits; W2 4096 B would end at 12288 > 10000; all of HBM's buffers are live at
    # kernel 1: 8192 + 4096 + 512 (x) + 256 + 64 (biases) = 13120 B
    assert "buffer p_fc2_weight (4096 B, live over kernels 0..4) does not fit in edge-npu's HBM of 10000 B" in str(
        e.value
    )
    assert "needs at least 13120 B" in str(e.value)


def test_llama_kv_cache_write_shares_the_cache_buffer():
    p = allocate(compiled("llama", "edge-npu", "bf16").program, CompileContext(load_accel("edge-npu"))).placement
    assert p["index_copy"] == p["b_layers_0_attn_k_cache"] and p["index_copy"].level == "hbm"
    assert_no_overlap(p)


def assert_no_overlap(placement):
    """No two distinct buffers of one level, live at once, share a byte (aliases of one buffer excepted)."""
    items = list({(p.level, p.offset, p.size, p.live): n for n, p in placement.items()}.items())
    for i, ((level, off, size, live), a) in enumerate(items):
        for (level2, off2, size2, live2), b in items[i + 1 :]:
            if level == level2 and live[0] <= live2[1] and live2[0] <= live[1] and size and size2:
                assert off + size <= off2 or off2 + size2 <= off, f"{a} and {b} overlap in {level}"


@st.composite
def random_programs(draw):
    """A random DAG of elementwise ops (each reads 1-2 earlier values, random sizes), grouped
    into random runs of consecutive ops as fused kernels, with random program outputs."""
    n_in = draw(st.integers(1, 3))
    inputs = tuple(
        Input(f"in{i}", draw(st.sampled_from(["user", "param"])), "", f32(draw(st.integers(1, 512))))
        for i in range(n_in)
    )
    names = [i.name for i in inputs]
    ops = []
    for j in range(draw(st.integers(1, 20))):
        reads = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2))
        ops.append(op(f"v{j}", "aten.add.Tensor", *(Ref(r) for r in reads), t=f32(draw(st.integers(1, 512)))))
        names.append(f"v{j}")
    outs = {ops[-1].name} | set(draw(st.lists(st.sampled_from([o.name for o in ops]), max_size=3)))
    program = Program("random", inputs, tuple(ops), tuple(Output(n) for n in sorted(outs)), {})
    cuts = sorted(set(draw(st.lists(st.integers(1, len(ops) - 1), max_size=len(ops)))) if len(ops) > 1 else [])
    groups = [ops[a:b] for a, b in zip([0, *cuts], [*cuts, len(ops)], strict=True)]
    users = program.users()
    kernels = []
    for g in groups:
        mine = {o.name for o in g}
        reads = [r for o in g for r in o.refs() if r not in mine]
        read_outside = [o.name for o in g if o.name in outs or any(u.name not in mine for u in users.get(o.name, []))]
        kernels.append(
            Kernel(
                f"k{len(kernels)}", tuple(o.name for o in g), "vector", tuple(dict.fromkeys(reads)), tuple(read_outside)
            )
        )
    return Program("random", inputs, tuple(ops), program.outputs, {}, kernels=tuple(kernels)), draw(
        st.integers(0, 8192)
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_programs())
def test_live_buffers_never_overlap(case):
    program, shared_cap = case
    edge = load_accel("edge-npu")
    hw = replace(edge, shared_memory=replace(edge.shared_memory, capacity_bytes=shared_cap))  # 0: all spill
    out = allocate(program, CompileContext(hw))
    placement = out.placement
    assert_no_overlap(placement)
    assert peak_bytes(placement, "shared") <= hw.shared_memory.capacity_bytes
    # every buffer is live over every kernel that produces or reads it (computed here independently)
    for idx, k in enumerate(out.kernels):
        for v in (*k.inputs, *k.outputs):
            first, last = placement[v].live
            assert first <= idx <= last, (v, idx, placement[v])
    for o in program.outputs:
        assert placement[o.name].level == "hbm" and placement[o.name].live[1] == len(out.kernels) - 1
