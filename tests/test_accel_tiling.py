"""Tiling: tile sizes from local memory with double buffering (the heuristic's arithmetic by
hand), per-kernel overrides, a tile that does not fit (one line naming the kernel, the tile and
the bytes against the capacity), and the tile-by-tile functional mode."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
from accel_programs import compiled, fuse_and_tile, fused, workload

from accelerator.compiler import tiled
from accelerator.compiler.check import rel_error
from accelerator.compiler.execute import run
from accelerator.hardware import load_accel
from profiler.model.errors import InputError


def _kernel(program, name):
    return next(k for k in program.kernels if k.name == name)


def test_matmul_tile_and_its_local_bytes():
    # bf16 MLP fc1 on the edge NPU (32 x 32 arrays): M = 4 (shorter than the array: not padded),
    # N = 64, K = 32. a = 4 (x is loaded fp32 and cast on chip), b = 2 (bf16 weight),
    # acc = 4 (fp32), out = 2 (bf16 GELU), bias 64 bf16 (min(64, 4*64) per buffer):
    # 2*(4*32*4 + 32*64*2) + 4*64*4 + 2*4*64*2 + 2*64*2 = 9216 + 1024 + 1024 + 256 = 11520
    k = _kernel(fused("mlp", "edge-npu", "bf16"), "addmm")
    assert k.tile == {"m": 4, "n": 64, "k": 32} and k.attrs["local_bytes"] == 11520


def test_heuristic_shrinks_the_tile_to_the_capacity():
    # with 8 KiB of local memory the 4x64 output tile (11520 B) no longer fits; 4x32 does:
    # 2*(4*32*4 + 32*32*2) + 4*32*4 + 2*4*32*2 + 2*64*2 = 5120 + 512 + 512 + 256 = 6400
    hw = load_accel("edge-npu")
    small = replace(hw, local_memory=replace(hw.local_memory, capacity_bytes=8192))
    from accelerator.compiler.fusion import fuse
    from accelerator.compiler.pipeline import CompileContext
    from accelerator.compiler.tiling import tile_kernels

    ctx = CompileContext(small, "bf16")
    p = tile_kernels(fuse(compiled("mlp", "edge-npu", "bf16").program, ctx), ctx)
    k = _kernel(p, "addmm")
    assert k.tile == {"m": 4, "n": 32, "k": 32} and k.attrs["local_bytes"] == 6400
    assert any(
        d.op == "addmm" and d.what == "tile m=4 n=32 k=32" and "6400 B of 8192 B" in d.why for d in ctx.decisions
    )
    # 4 KiB: not even the smallest tile fits -> one line naming the kernel, tile and bytes
    ctx = CompileContext(replace(hw, local_memory=replace(hw.local_memory, capacity_bytes=4096)), "bf16")
    with pytest.raises(
        InputError, match=r"kernel addmm: tile m=4 n=32 k=32 needs 6400 B of local memory, over the 4096 B"
    ):
        tile_kernels(fuse(compiled("mlp", "edge-npu", "bf16").program, ctx), ctx)


def test_fitting_tiles_are_the_pass_candidates_that_fit_in_its_order():
    # MLP fc1 (M 4, N 64, K 32 on 32 x 32 arrays): m in {4}, n in {32, 64}, k in {32}; local
    # bytes (test above) 4x64x32: 11520 B, 4x32x32: 6400 B
    from accelerator.compiler.fusion import fuse
    from accelerator.compiler.pipeline import CompileContext
    from accelerator.compiler.tiling import fitting_tiles, tile_kernels

    hw = load_accel("edge-npu")
    program = fused("mlp", "edge-npu", "bf16")
    k = _kernel(program, "addmm")
    tiles = fitting_tiles(program, k, hw)
    assert tiles == [{"m": 4, "n": 64, "k": 32}, {"m": 4, "n": 32, "k": 32}] and tiles[0] == k.tile
    small = replace(hw, local_memory=replace(hw.local_memory, capacity_bytes=8192))  # 11520 B no longer fits
    ctx = CompileContext(small, "bf16")
    p = tile_kernels(fuse(compiled("mlp", "edge-npu", "bf16").program, ctx), ctx)
    assert fitting_tiles(p, _kernel(p, "addmm"), small) == [{"m": 4, "n": 32, "k": 32}]


def test_vector_kernel_tile():
    # layer 0's rotary chain for q (mul_90, mul_107, add_104): streams permute_1 (bf16), the cos
    # and sin tables index/index_1 (fp32), cat (bf16), output add_104 (fp32): 2+4+2+4+4 = 16 B per
    # element, double buffered 32 B; 524288 / 32 = 16384 elements, a multiple of the lanes, capped
    # at the 1 x 4 x 8 x 16 = 512 elements there are
    k = _kernel(fused("llama", "edge-npu", "bf16"), "mul_90")
    assert k.unit == "vector" and k.tile == {"elements": 512} and k.attrs["local_bytes"] == 2 * 512 * 16


def test_attention_tile_whole_then_flash():
    p = fused("llama", "edge-npu", "bf16")
    k = _kernel(p, "scaled_dot_product_attention")
    assert k.tile == {"q": 8, "kv": 32} and k.attrs["local_bytes"] == 6720  # test_accel_fusion has the sum
    # 4 KiB local, 6000 B shared: flash. ws(bq, bk) = 2*(16bq + 32bk)*2 + 2bq*bk (mask) + 4bq*bk
    # + 64bq + 8bq = 136bq + 128bk + 6bq*bk; the largest bq*bk within 4096 B: (8, 16) = 3904 B
    hw = load_accel("edge-npu")
    small = replace(
        hw,
        local_memory=replace(hw.local_memory, capacity_bytes=4096),
        shared_memory=replace(hw.shared_memory, capacity_bytes=6000),
    )
    from accelerator.compiler.fusion import fuse
    from accelerator.compiler.pipeline import CompileContext
    from accelerator.compiler.tiling import tile_kernels

    ctx = CompileContext(small, "bf16", tiles={})
    program = compiled("llama", "edge-npu", "bf16").program
    fused_small = fuse(program, ctx)
    # the matmuls' tiles do not fit 4 KiB either; give them small ones to reach the attention
    ctx.tiles = {
        k.name: {"m": 8, "n": 8, "k": 8}
        for k in fused_small.kernels
        if k.unit == "matrix" and "scaled_dot" not in k.name
    }
    ctx.tiles |= {k.name: {"elements": 16} for k in fused_small.kernels if k.unit in ("vector", "dma")}
    t = tile_kernels(fused_small, ctx)
    k = _kernel(t, "scaled_dot_product_attention")
    assert (k.tile, k.attrs["attention"], k.attrs["local_bytes"]) == ({"q": 8, "kv": 16}, "flash", 3904)


def test_overrides_and_their_errors():
    program = compiled("mlp", "edge-npu", "fp32").program
    p = fuse_and_tile(program, "edge-npu", "fp32", tiles={"addmm": {"m": 2, "n": 16, "k": 8}})
    assert _kernel(p, "addmm").tile == {"m": 2, "n": 16, "k": 8}
    # fp32 on the vector unit: a = b = acc = out = 4; bias 64 fp32 (min(64, 2*16) = 32 per buffer):
    # 2*(2*8*4 + 8*16*4) + 2*16*4 + 2*2*16*4 + 2*32*4 = 1152 + 128 + 256 + 256 = 1792
    assert _kernel(p, "addmm").attrs["local_bytes"] == 1792
    # 1024^3 needs 2*(1024*1024*4*2) + 1024*1024*4 + 2*1024*1024*4 + 2*64*4
    #   = 16777216 + 4194304 + 8388608 + 512 = 29360640
    with pytest.raises(InputError) as e:
        fuse_and_tile(program, "edge-npu", "fp32", tiles={"addmm": {"m": 1024, "n": 1024, "k": 1024}})
    assert str(e.value) == (
        "kernel addmm: tile m=1024 n=1024 k=1024 needs 29360640 B of local memory, over the 524288 B of edge-npu"
    )
    with pytest.raises(InputError, match="tile override names kernel 'fc9', which the program does not have"):
        fuse_and_tile(program, "edge-npu", "fp32", tiles={"fc9": {"m": 32, "n": 32, "k": 32}})
    with pytest.raises(InputError, match=r"kernel addmm: tile \{'m': 32\} must give positive integers for m, n, k"):
        fuse_and_tile(program, "edge-npu", "fp32", tiles={"addmm": {"m": 32}})


def test_plan_file_tiles_name_the_file(tmp_path):
    from accelerator.compiler.fusion import load_plan

    plan = tmp_path / "plan.yaml"
    plan.write_text("kernels: [[addmm, gelu]]\ntiles:\n  addmm: {m: 4096, n: 4096, k: 4096}\n")
    with pytest.raises(InputError) as e:
        fuse_and_tile(compiled("mlp", "edge-npu", "fp32").program, "edge-npu", "fp32", plan=load_plan(plan))
    assert e.value.path == str(plan) and "kernel addmm: tile m=4096 n=4096 k=4096 needs" in e.value.problem


def test_tiled_matmul_accumulates_every_k_tile():
    # ragged tiles (5 does not divide 12, 7 does not divide 10): the same product as one matmul
    torch.manual_seed(0)
    a, b, bias = torch.randn(12, 10), torch.randn(10, 9), torch.randn(9)
    out = tiled.matmul("aten.addmm.default", (bias, a, b), {}, {"m": 5, "n": 4, "k": 7}, None, torch.float32)
    assert torch.allclose(out, torch.addmm(bias, a, b), atol=1e-5)
    # int8 sums exactly (an int32 accumulator): 127*127*10 = 161290 in every entry
    q = torch.full((3, 10), 127, dtype=torch.int8)
    w = torch.full((10, 2), 127, dtype=torch.int8)
    assert tiled.matmul("npu.qmm", (q, w), {}, {"m": 2, "n": 1, "k": 3}, "int32", torch.int32).eq(161290).all()


def test_flash_attention_matches_sdpa():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 32, 16), torch.randn(1, 2, 32, 16)
    mask = torch.ones(8, 32, dtype=torch.bool).tril(diagonal=24)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    out = tiled.attention((q, k, v, mask), {"enable_gqa": True}, 3, 5)
    assert rel_error(out, ref) < 1e-6


def test_functional_mode_runs_tile_by_tile():
    # a wrong tile loop must show: the same program with tiles forced tiny differs from op by op
    # by float rounding only (fp32: < 1e-6), and running it op by op (tiled=False) is exact
    program = compiled("mlp", "datacenter-npu", "fp32").program
    p = fuse_and_tile(
        program,
        "datacenter-npu",
        "fp32",
        tiles={"addmm": {"m": 1, "n": 3, "k": 5}, "addmm_1": {"m": 3, "n": 2, "k": 7}},
    )
    x = workload("mlp")[1]
    with torch.no_grad():
        ref, _ = run(program, x)
        out, _ = run(p, x)
        flat, _ = run(p, x, tiled=False)
    assert 0 < rel_error(out[0], ref[0]) < 1e-6 and rel_error(flat[0], ref[0]) == 0


def _spy_vector(monkeypatch):
    """Record, per vector kernel run tile by tile, the rows of each tile of its last value."""
    from accelerator.compiler import tiled_vector

    seen: dict[str, list[int]] = {}
    real = tiled_vector.run_tiled

    def spy(ops, env, elements, call):
        def counting(op, tile_env, device):
            out = call(op, tile_env, device)
            if device is None and op.name == ops[-1].name:
                seen.setdefault(op.name, []).append(int(out.shape[0]))
            return out

        values = real(ops, env, elements, counting)
        assert values is not None, [o.name for o in ops]  # every vector kernel here runs tiled
        return values

    monkeypatch.setattr(tiled_vector, "run_tiled", spy)
    return seen


def test_vector_kernels_run_tile_by_tile_with_ragged_edges(monkeypatch):
    # tiny Llama, fp32: the rotary chain of layer 0's q (mul_90, mul_107, add_104: elementwise
    # only, tiled by elements) over 1 x 4 x 8 x 16 = 512 elements: 48-element tiles are 10 of 48
    # and a ragged last of 32; the neg kernel over the 1 x 4 x 8 x 8 = 256 elements of the rotated
    # half: tiles of 40, 6 of 40 and a last of 16
    seen = _spy_vector(monkeypatch)
    model, inputs = workload("llama")
    tiles = {"mul_90": {"elements": 48}, "neg": {"elements": 40}}
    p = fuse_and_tile(compiled("llama", "edge-npu", "fp32").program, "edge-npu", "fp32", tiles=tiles)
    with torch.no_grad():
        (y,), _ = run(p, inputs)
        ref = copy.deepcopy(model)(*inputs)
    assert seen["add_104"] == [48] * 10 + [32] and seen["neg"] == [40] * 6 + [16]
    assert rel_error(y, ref) <= 1e-5


def test_a_row_kernel_runs_whole_rows_per_tile(monkeypatch):
    # ViT, fp32: the final LayerNorm kernel (native_layer_norm + getitem) reduces rows of D = 64:
    # a 192-element tile is 3 whole rows; the rows (batch x tokens) in tiles of 3, the last ragged
    seen = _spy_vector(monkeypatch)
    model, inputs = workload("vit")
    program = compiled("vit", "datacenter-npu", "fp32").program
    ln = [o for o in program.ops if o.target == "aten.native_layer_norm.default"][-1]
    out = ln.type[0].hint
    rows = out[0] * out[1]
    p = fuse_and_tile(program, "datacenter-npu", "fp32", tiles={ln.name: {"elements": 3 * out[-1]}})
    with torch.no_grad():
        (y,), _ = run(p, inputs)
        ref = copy.deepcopy(model)(*inputs)
    (last,) = [k.ops[-1] for k in p.kernels if k.name == ln.name]
    assert rows % 3 and seen[last] == [3] * (rows // 3) + [rows % 3]
    assert rel_error(y, ref) <= 1e-5


def test_conv_and_batch_norm_run_tile_by_tile_with_ragged_edges(monkeypatch):
    # the ResNet-style net, fp32: its first convolution as an implicit GEMM with tiles that do
    # not divide M = N*Ho*Wo, Cout or K = Cin*kh*kw, and the batch norm after it tiled by 1000
    # elements (not a multiple of a channel plane), the ReLU too: still eager's result within 1e-5
    from accelerator.compiler import tiled as tiled_exec

    seen = _spy_vector(monkeypatch)
    convs: list[tuple[int, ...]] = []
    real_conv = tiled_exec.convolution

    def conv_spy(args, tile, accumulate, out_dtype):
        out = real_conv(args, tile, accumulate, out_dtype)
        assert out is not None
        convs.append(tuple(out.shape))
        return out

    monkeypatch.setattr(tiled_exec, "convolution", conv_spy)
    model, inputs = workload("resnet")
    program = compiled("resnet", "edge-npu", "fp32").program
    first = next(o for o in program.ops if o.target == "aten.convolution.default")
    bn = next(o for o in program.ops if "batch_norm" in o.target)
    relu = next(o for o in program.ops if o.target == "aten.relu.default")
    tiles = {first.name: {"m": 50, "n": 12, "k": 20}, bn.name: {"elements": 1000}, relu.name: {"elements": 1000}}
    p = fuse_and_tile(program, "edge-npu", "fp32", tiles=tiles)
    with torch.no_grad():
        (y,), _ = run(p, inputs)
        ref = copy.deepcopy(model)(*inputs)
    n_conv = sum(o.target == "aten.convolution.default" for o in program.ops)
    assert len(convs) == n_conv  # every convolution through the tiled implicit GEMM
    numel = 1
    for d in bn.type[0].hint:
        numel *= d
    # the ReLU after it (the batch norm computes its tiles directly, not through `call`)
    assert seen[relu.name] == [1000] * (numel // 1000) + ([numel % 1000] if numel % 1000 else [])
    assert rel_error(y, ref) <= 1e-5
