"""Functional mode runs every kernel the tiling pass tiled tile by tile: the data-movement
kernels (permute, slice, cat, expand, index, embedding, getitem, the KV cache's index_copy_)
move their output `elements` at a time (accelerator/compiler/tiled_dma.py), and no kernel with
a tile of any workload on either preset runs whole."""

from __future__ import annotations

import copy

import pytest
import torch
from accel_programs import compiled, fuse_and_tile, fused, workload

from accelerator.compiler import tiled_dma
from accelerator.compiler.check import BOUNDS, rel_error
from accelerator.compiler.execute import run
from accelerator.compiler.program import Op, Ref, TensorType


def _eager(name):
    model, inputs = workload(name)
    with torch.no_grad():
        ref = copy.deepcopy(model)(*inputs)
    return inputs, ref if isinstance(ref, (tuple, list)) else (ref,)


@pytest.mark.parametrize("name", ["mlp", "resnet", "vit", "llama"])
@pytest.mark.parametrize("preset", ["edge-npu", "datacenter-npu"])
@pytest.mark.parametrize("policy", ["fp32", "bf16", "int8"])
def test_every_tiled_kernel_runs_tile_by_tile(name, preset, policy):
    # before tiled_dma, the DMA kernels (ViT: 15, Llama: 30, ResNet: the 4 batch-norm getitems)
    # ran whole; now none with a tile does (ViT bf16's cat of the fp32 class token with bf16
    # patches too), and the error stays within the policy's bound (fp32 1e-5, bf16 1e-2, int8 5e-2)
    p = fused(name, preset, policy)
    inputs, ref = _eager(name)
    whole: list[str] = []
    with torch.no_grad():
        out, _ = run(p, inputs, ran_whole=whole)
    assert whole == []
    assert all(k.tile or k.unit == "host" for k in p.kernels)  # untiled: only host (size arithmetic)
    assert max(rel_error(a.float(), b) for a, b in zip(out, ref)) <= BOUNDS[policy]


def test_dma_kernels_with_ragged_tiles(monkeypatch):
    # tiny Llama, fp32, every DMA kernel (KV-cache index_copy_, rotary cat and slices, permutes,
    # the embedding) with 7-element tiles: none a divisor of 1024 (the index_copy_ of
    # 1 x 2 x 8 x 16 ... elements: 146 tiles of 7 and a last of 2); still eager's result
    seen: dict[int, list[int]] = {}
    real = tiled_dma._fill

    def spy(out, flat, src, elements):
        seen.setdefault(src.numel(), []).append(elements)
        return real(out, flat, src, elements)

    monkeypatch.setattr(tiled_dma, "_fill", spy)
    base = fused("llama", "edge-npu", "fp32")
    tiles = {k.name: {"elements": 7} for k in base.kernels if k.unit == "dma"}
    p = fuse_and_tile(compiled("llama", "edge-npu", "fp32").program, "edge-npu", "fp32", tiles=tiles)
    inputs, ref = _eager("llama")
    whole: list[str] = []
    with torch.no_grad():
        out, _ = run(p, inputs, ran_whole=whole)
    assert whole == [] and 1024 in seen and set(seen[1024]) == {7}
    assert rel_error(out[0], ref[0]) <= 1e-5


def _op(name, target, args, shape):
    return Op(name, target, args, {}, TensorType(shape, "float32", shape))


@pytest.mark.parametrize("tile", [1, 5, 7, 64])
def test_moves_match_torch_tile_by_tile(tile):
    # a permute, a strided slice, a cat of two inputs and an index_copy_ into a cache,
    # each filled 5 or 7 elements at a time (ragged last tiles of 60 elements), equal torch exactly
    torch.manual_seed(0)
    x, y = torch.randn(3, 4, 5), torch.randn(3, 2, 5)
    cache, idx = torch.zeros(6, 4, 5), torch.tensor([1, 4])
    env = {"x": x, "y": y, "cache": cache.clone(), "src": x[:2], "idx": idx}
    cases = [
        (_op("p", "aten.permute.default", (Ref("x"), [2, 0, 1]), (5, 3, 4)), x.permute(2, 0, 1)),
        (_op("s", "aten.slice.Tensor", (Ref("x"), 1, 1, 4, 2), (3, 2, 5)), x[:, 1:4:2]),
        (_op("c", "aten.cat.default", ([Ref("x"), Ref("y")], 1), (3, 6, 5)), torch.cat([x, y], 1)),
        (
            _op("i", "aten.index_copy_.default", (Ref("cache"), 0, Ref("idx"), Ref("src")), (6, 4, 5)),
            cache.clone().index_copy_(0, idx, x[:2]),
        ),
    ]
    from accelerator.compiler.execute import _call

    for op, want in cases:
        got = tiled_dma.run_tiled([op], env, tile, _call)[op.name]
        assert torch.equal(got, want) and got.stride() == want.stride(), op.name
    assert torch.equal(env["cache"], cases[-1][1])  # in place: the cache itself was written


def test_matmul_epilogue_runs_over_output_tiles(monkeypatch):
    # tiny Llama fp32, the gate projection mm_4 (M = 8 tokens, N = 176) with a 3 x 5 output tile:
    # its epilogue (view, SiLU = x * sigmoid(x), the product with up_proj, view) runs after the
    # tiled matmul over 15 elements a tile: 8 x 176 = 1408 = 93 x 15 + 13, a ragged last of 13
    from accelerator.compiler import tiled_vector

    seen: list[int] = []
    real = tiled_vector.run_tiled

    def spy(ops, env, elements, call):
        def counting(op, tile_env, device):
            out = call(op, tile_env, device)
            if device is None and op.name == "sigmoid" and ops[0].name == "view_13":
                seen.append(int(out.shape[0]))
            return out

        return real(ops, env, elements, counting)

    monkeypatch.setattr(tiled_vector, "run_tiled", spy)
    program = compiled("llama", "edge-npu", "fp32").program
    p = fuse_and_tile(program, "edge-npu", "fp32", tiles={"mm_4": {"m": 3, "n": 5, "k": 64}})
    (k,) = [k for k in p.kernels if k.name == "mm_4"]
    assert k.ops[k.ops.index("mm_4") + 1] == "view_13"
    inputs, ref = _eager("llama")
    whole: list[str] = []
    with torch.no_grad():
        out, _ = run(p, inputs, ran_whole=whole)
    assert whole == [] and seen == [15] * 93 + [13]
    assert rel_error(out[0], ref[0]) <= 1e-5


def test_matmul_prologue_norm_runs_tm_rows_a_tile(monkeypatch):
    # tiny Llama fp32, the q projection mm (its RMSNorm prologue: pow, mean, add, rsqrt, mul,
    # mul by the norm weight, view to (8, 64)) with tm = 3: the norm runs over 3 of the 8 token
    # rows a tile (3, 3 and a ragged 2); the weight's permute runs whole as its load
    from accelerator.compiler import tiled_vector

    seen: list[int] = []
    real = tiled_vector.run_tiled

    def spy(ops, env, elements, call):
        def counting(op, tile_env, device):
            out = call(op, tile_env, device)
            if device is None and op.name == "rsqrt":
                seen.append(int(out.shape[0]))
            return out

        return real(ops, env, elements, counting)

    monkeypatch.setattr(tiled_vector, "run_tiled", spy)
    program = compiled("llama", "edge-npu", "fp32").program
    p = fuse_and_tile(program, "edge-npu", "fp32", tiles={"mm": {"m": 3, "n": 16, "k": 64}})
    (k,) = [k for k in p.kernels if k.name == "mm"]
    assert "rsqrt" in k.ops and k.ops.index("rsqrt") < k.ops.index("mm")
    inputs, ref = _eager("llama")
    whole: list[str] = []
    with torch.no_grad():
        out, _ = run(p, inputs, ran_whole=whole)
    assert whole == [] and seen == [3, 3, 2]
    assert rel_error(out[0], ref[0]) <= 1e-5
