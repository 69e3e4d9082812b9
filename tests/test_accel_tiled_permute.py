"""Vector kernels reducing along dims that are not the last run tile by tile, as rows of the
reduced dims (accelerator/compiler/tiled_permute.py): a global average pool's mean over H, W of
NCHW, a variance over dim 1 used by an elementwise op after it, a softmax over dim 1."""

from __future__ import annotations

import copy

import torch
from accel_programs import compiled, fuse_and_tile, workload

from accelerator.compiler import tiled_vector
from accelerator.compiler.check import rel_error
from accelerator.compiler.execute import _call, run
from accelerator.compiler.fusion import FusionPlan, PlanGroup
from accelerator.compiler.program import Op, Ref, TensorType


def _op(name, target, args, shape, **kwargs):
    return Op(name, target, args, kwargs, TensorType(shape, "float32", shape))


def _tiles(ops, env, elements):
    """(values, rows of each tile of the last op's value)."""
    seen: list[int] = []

    def counting(op, tile_env, device):
        out = _call(op, tile_env, device)
        if device is None and op.name == ops[-1].name:
            seen.append(int(out.shape[0]))
        return out

    return tiled_vector.run_tiled(ops, env, elements, counting), seen


def test_global_average_pool_by_rows_of_h_times_w():
    # relu then mean over H, W of (2, 3, 5, 7): 6 rows of 35; a 140-element tile is 4 rows:
    # tiles of 4 and a ragged 2
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 7)
    ops = [
        _op("r", "aten.relu.default", (Ref("x"),), (2, 3, 5, 7)),
        _op("m", "aten.mean.dim", (Ref("r"), [2, 3]), (2, 3)),
    ]
    values, seen = _tiles(ops, {"x": x}, 140)
    assert seen == [4, 2]
    assert torch.allclose(values["m"], x.relu().mean([2, 3]), atol=1e-6) and values["m"].shape == (2, 3)


def test_variance_over_dim_1_then_an_elementwise_op():
    # var over the 6 channels of (2, 6, 5) kept, then x - var: rows are the 2 x 5 (n, l) pairs of
    # 6 channels; a 18-element tile is 3 rows: 3, 3, 3 and a ragged 1; x - var keeps x's layout
    torch.manual_seed(1)
    x = torch.randn(2, 6, 5)
    ops = [
        _op("v", "aten.var.correction", (Ref("x"), [1]), (2, 1, 5), correction=0, keepdim=True),
        _op("d", "aten.sub.Tensor", (Ref("x"), Ref("v")), (2, 6, 5)),
        _op("s", "aten._softmax.default", (Ref("d"), 1, False), (2, 6, 5)),
    ]
    values, seen = _tiles(ops, {"x": x}, 18)
    var = x.var(1, correction=0, keepdim=True)
    assert seen == [3, 3, 3, 1]
    assert torch.allclose(values["v"], var, atol=1e-6)
    assert torch.allclose(values["s"], torch.softmax(x - var, 1), atol=1e-6) and values["s"].stride() == (30, 5, 1)


def test_resnet_pool_as_its_own_kernel_runs_tiled():
    # ResNet fp32 with a plan that leaves the global mean out of the classifier's kernel: the
    # mean over H, W runs as a vector kernel of its own, tile by tile, within 1e-5 of eager
    model, inputs = workload("resnet")
    program = compiled("resnet", "edge-npu", "fp32").program
    mean = next(o for o in program.ops if o.target == "aten.mean.dim")
    addmm = next(o for o in program.ops if o.target == "aten.addmm.default")
    plan = FusionPlan((PlanGroup("fc", (addmm.name,)),), "test")
    p = fuse_and_tile(program, "edge-npu", "fp32", plan=plan)
    (k,) = [k for k in p.kernels if mean.name in k.ops]
    assert k.ops == (mean.name,) and k.unit == "vector" and k.tile
    whole: list[str] = []
    with torch.no_grad():
        (y,), _ = run(p, inputs, ran_whole=whole)
        ref = copy.deepcopy(model)(*inputs)
    assert whole == [] and rel_error(y, ref) <= 1e-5


def test_pools_as_windows_over_output_tiles(monkeypatch):
    # 3x3 pools, stride 2, padding 1 over (2, 3, 9, 11): Ho = (9 + 2 - 3) // 2 + 1 = 5,
    # Wo = (11 + 2 - 3) // 2 + 1 = 6; a 72-element tile is 72 // (2 * 3 * 6) = 2 output rows:
    # tiles of 2, 2 and a ragged 1; values and the max's indices equal torch's
    from accelerator.compiler import tiled_pool

    torch.manual_seed(2)
    x = torch.randn(2, 3, 9, 11)
    seen: list[list[int]] = []  # the output rows of each tile, per pool
    cat = torch.cat

    def spy(parts, dim=0):
        seen.append([int(p.shape[2]) for p in parts])
        return cat(parts, dim)

    monkeypatch.setattr(tiled_pool.torch, "cat", spy)
    real = torch.ops.aten.avg_pool2d.default
    mx = _op("mx", "aten.max_pool2d_with_indices.default", (Ref("x"), [3, 3], [2, 2], [1, 1]), (2, 3, 5, 6))
    get = Op("g", "getitem", (Ref("mx"), 0), {}, TensorType((2, 3, 5, 6), "float32", (2, 3, 5, 6)))
    values = tiled_vector.run_tiled([mx, get], {"x": x}, 72, _call)
    want, idx = torch.ops.aten.max_pool2d_with_indices.default(x, [3, 3], [2, 2], [1, 1])
    assert torch.equal(values["mx"][0], want) and torch.equal(values["mx"][1], idx) and torch.equal(values["g"], want)
    av = _op("av", "aten.avg_pool2d.default", (Ref("x"), [3, 3], [2, 2], [1, 1]), (2, 3, 5, 6))
    out = tiled_pool.pool2d(av.target, (x, [3, 3], [2, 2], [1, 1]), 72)
    assert torch.allclose(out, real(x, [3, 3], [2, 2], [1, 1]), atol=1e-6)
    assert seen == [[2, 2, 1]] * 3  # the max's values and indices, the average's values
    # ceil_mode is not covered: None, the kernel runs whole
    assert tiled_pool.pool2d(av.target, (x, [3, 3], [2, 2], [1, 1], True), 72) is None


def test_transposed_and_non_2d_convolutions_as_tiled_gemms():
    # 1-D, 3-D and transposed (2-D and 1-D, stride 2, padding 1, output padding 1, 2 groups,
    # dilation 2) convolutions through the implicit GEMM with tiles dividing none of M, N, K:
    # torch's convolution within 1e-5 (fp32 sums in another order)
    from accelerator.compiler import tiled

    torch.manual_seed(3)
    conv = torch.ops.aten.convolution.default
    tile = {"m": 5, "n": 3, "k": 7}
    cases = [
        (torch.randn(2, 4, 13), torch.randn(6, 2, 3), torch.randn(6), [2], [1], [2], False, [0], 2),
        (
            torch.randn(1, 3, 5, 6, 7),
            torch.randn(4, 3, 2, 3, 2),
            None,
            [1, 2, 1],
            [1, 0, 1],
            [1, 1, 2],
            False,
            [0, 0, 0],
            1,
        ),
        (torch.randn(2, 4, 5, 6), torch.randn(4, 3, 3, 3), torch.randn(6), [2, 2], [1, 1], [1, 2], True, [1, 1], 2),
        (torch.randn(2, 4, 9), torch.randn(4, 3, 4), None, [3], [2], [1], True, [2], 2),
    ]
    for args in cases:
        want = conv(*args)
        got = tiled.convolution(args, tile, None, torch.float32)
        assert got is not None and got.shape == want.shape and rel_error(got, want) < 1e-5, args[0].shape
