"""The cost model (analysis/cost/ops.py): hand arithmetic, and FlopCounterMode on real profiler runs."""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.cost import Cost, causal_pairs, cost_table, known_ops, op_cost

F32 = ["float", "float", "float"]


# ------------------------------------------------------------------ hand arithmetic


def test_mm():
    c = op_cost("aten::mm", [[64, 256], [256, 1024]], ["float", "float"], ["", ""])
    assert c.flops == 2 * 64 * 256 * 1024 == 33_554_432  # 2*M*N*K: one MAC is two FLOPs
    assert c.bytes_read == (64 * 256 + 256 * 1024) * 4 == 1_114_112  # A + B, fp32
    assert c.bytes_written == 64 * 1024 * 4 == 262_144  # C[M, N]
    assert isinstance(c, Cost) and c.bytes == c.bytes_read + c.bytes_written
    assert (c.family, c.dtype, c.flops_effective) == ("gemm", "fp32", c.flops)


def test_out_tensor_is_written_not_read():
    # legacy ReLU: clamp_min(self, min, out) with out = [32,256,14,14] fp32 (6,422,528 B): read
    # self once and write out once; the out tensor is not an input
    n = 32 * 256 * 14 * 14
    c = op_cost("aten::clamp_min", [[32, 256, 14, 14], [], [32, 256, 14, 14]], ["float", "Int", "float"], None)
    assert (c.flops, c.bytes_read, c.bytes_written) == (n, 4 * n, 4 * n)
    # add.out(self, other, alpha, out): two reads, one write
    c = op_cost("aten::add", [[8, 8], [8, 8], [], [8, 8]], ["float", "float", "Scalar", "float"], None)
    assert (c.bytes_read, c.bytes_written) == (2 * 64 * 4, 64 * 4)
    # the functional forms are unchanged: where(cond, x, y) reads all three
    c = op_cost("aten::where", [[8], [8], [8]], ["bool", "float", "float"], None)
    assert (c.bytes_read, c.bytes_written) == (8 + 32 + 32, 32)


def test_addmm_counts_bias_bytes_not_flops():
    c = op_cost(
        "aten::addmm", [[1024], [64, 256], [256, 1024], [], []], F32 + ["Scalar", "Scalar"], ["", "", "", "1", "1"]
    )
    assert c.flops == 33_554_432  # 2*64*1024*256, bias add not counted
    assert c.bytes_read == 1_114_112 + 1024 * 4 == 1_118_208  # A + B + bias[1024]


def test_bmm_baddbmm_bf16():
    c = op_cost("aten::bmm", [[8, 16, 32], [8, 32, 64]], ["c10::BFloat16"] * 2)
    assert c.flops == 2 * 8 * 16 * 32 * 64 == 524_288  # 2*B*M*N*K
    assert c.bytes_read == (8 * 16 * 32 + 8 * 32 * 64) * 2 == 40_960
    assert c.bytes_written == 8 * 16 * 64 * 2 == 16_384
    assert c.dtype == "bf16"
    c2 = op_cost(
        "aten::baddbmm", [[8, 16, 64], [8, 16, 32], [8, 32, 64], [], []], ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"]
    )
    assert c2.flops == 524_288
    assert c2.bytes_read == 40_960 + 8 * 16 * 64 * 2 == 57_344  # + C[B, M, N]


def test_linear_and_matmul_ranks():
    c = op_cost("aten::linear", [[4, 10, 32], [16, 32], [16]], F32)
    assert c.flops == 2 * (4 * 10) * 32 * 16 == 40_960  # 2 * rows * K * N
    assert c.bytes_read == (4 * 10 * 32 + 16 * 32 + 16) * 4 == 7_232
    assert c.bytes_written == 4 * 10 * 16 * 4 == 2_560
    assert op_cost("aten::linear", [[3, 8], [4, 8], []], ["float", "float", ""]).flops == 2 * 3 * 8 * 4
    assert op_cost("aten::matmul", [[4], [4]], F32[:2]).flops == 2 * 4  # dot: 2*K
    assert op_cost("aten::matmul", [[5, 4], [4]], F32[:2]).flops == 2 * 5 * 4  # mv: 2*M*K
    assert op_cost("aten::matmul", [[3, 5, 4], [4, 2]], F32[:2]).flops == 2 * 15 * 4 * 2  # = 240
    # batch dims broadcast: [2,1] with [5] -> [2,5]; 2 * 10 * M3 * K4 * N6 = 1440
    assert op_cost("aten::matmul", [[2, 1, 3, 4], [5, 4, 6]], F32[:2]).flops == 1440
    assert op_cost("aten::matmul", [[3, 4], [5, 6]], F32[:2]) is None  # K mismatch


def test_conv_forward_from_concrete():
    # x[2,3,32,32], w[8,3,3,3], stride 2, padding 1: out = floor((32 + 2 - 2 - 1) / 2) + 1 = 16
    shapes = [[2, 3, 32, 32], [8, 3, 3, 3], [8], [], [], [], [], [], []]
    types = F32 + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"]
    conc = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    c = op_cost("aten::convolution", shapes, types, conc)
    assert c.flops == 2 * 2 * 8 * 16 * 16 * 3 * 9 == 221_184  # 2*N*Cout*out_sp*(Cin/g)*k
    assert c.bytes_read == (2 * 3 * 32 * 32 + 8 * 27 + 8) * 4 == 25_472
    assert c.bytes_written == 2 * 8 * 16 * 16 * 4 == 16_384
    assert c.family == "conv"
    # groups=2 with w[8, 2, 3, 3] on x[2, 4, 9, 10], stride 2, pad 1: out 5x5;
    # 2 * N2 * Cout8 * 25 * (Cin/g)2 * 9 = 14400
    c = op_cost(
        "aten::conv2d",
        [[2, 4, 9, 10], [8, 2, 3, 3], [8], [], [], [], []],
        F32 + ["ScalarList"] * 3 + ["Scalar"],
        ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "2"],
    )
    assert c.flops == 14_400
    # transposed, groups 2: x[2,6,3,4], w[6,2,3,3], stride 2, pad 1, output_padding 1:
    # out = (3-1)*2 - 2 + 2 + 1 + 1 = 6 by (4-1)*2 - 2 + 2 + 1 + 1 = 8, channels 2*2 = 4;
    # FLOPs (flop_counter) = 2 * N * prod(in spatial) * prod(w) = 2*2*12*108 = 5184
    t = op_cost(
        "aten::convolution",
        [[2, 6, 3, 4], [6, 2, 3, 3], []] + [[]] * 6,
        ["float", "float", ""] + types[3:],
        ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "2"],
    )
    assert (t.flops, t.bytes_written) == (5_184, 2 * 4 * 6 * 8 * 4)
    # stride/padding not recorded: never guessed
    assert op_cost("aten::convolution", shapes, types, None) is None
    assert op_cost("aten::convolution", shapes, types, [""] * 9) is None


def test_conv_backward_as_flop_counter():
    # grad_out[2,6,3,4], x[2,8,5,5], w[6,8,3,2], groups 1, mask all:
    # grad_input 2*N*prod(go_sp)*prod(w) = 2*2*12*288 = 13824; grad_weight 2*N*Cin*Cout*k*go_sp
    # = 2*2*8*6*6*12 = 13824; total 27648
    shapes = [[2, 6, 3, 4], [2, 8, 5, 5], [6, 8, 3, 2]] + [[]] * 8
    types = F32 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
    conc = ["", "", "", "[6]", "[1, 1]", "[1, 0]", "[2, 1]", "False", "[0, 0]", "1", "[True, True, True]"]
    assert op_cost("aten::convolution_backward", shapes, types, conc).flops == 27_648
    conc[-1] = "[False, True, True]"  # first layer: no grad_input
    assert op_cost("aten::convolution_backward", shapes, types, conc).flops == 13_824


def test_attention_dense_causal_gqa():
    b, h, length, d = 2, 4, 128, 64
    q = [b, h, length, d]
    shapes = [q, q, q, [], [], [], [], []]
    types = F32 + ["", "Scalar", "Scalar", "", "Scalar"]
    dense = op_cost("aten::scaled_dot_product_attention", shapes, types, ["", "", "", "", "0.", "False", "", "False"])
    assert dense.flops == 4 * b * h * length * length * d == 33_554_432  # QK^T + PV, 2 FLOPs/MAC
    assert dense.flops_effective == dense.flops
    causal = op_cost("aten::scaled_dot_product_attention", shapes, types, ["", "", "", "", "0.", "True", "", "False"])
    assert causal.flops == dense.flops  # dense, as flop_counter
    # causal keeps L*(L+1)/2 of L*L pairs: 33554432 * 129/256 = 16908288
    assert causal.flops_effective == 16_908_288
    # GQA: 8 query heads, 2 KV heads, fp16 -> FLOPs per query head, fewer K/V bytes
    qs, kv = [2, 8, 16, 32], [2, 2, 16, 32]
    g = op_cost(
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        [qs, kv, kv, [], [], [], []],
        ["c10::Half"] * 3 + ["Scalar", "Scalar", "", ""],
        ["", "", "", "0.", "False", "", ""],
    )
    assert g.flops == 4 * 2 * 8 * 16 * 16 * 32 == 524_288
    assert g.bytes_read == (2 * 8 * 16 * 32 + 2 * 2 * 2 * 16 * 32) * 2 == 24_576  # q + k + v
    # out [2,8,16,32] fp16 + logsumexp [2,8,16] fp32
    assert g.bytes_written == 2 * 8 * 16 * 32 * 2 + 2 * 8 * 16 * 4 == 17_408
    # backward: 2*B*H*Lq*Lk*(3*D + 2*D) = 10*B*H*L*L*D
    bw = op_cost(
        "aten::_scaled_dot_product_flash_attention_backward",
        [q, q, q, q, q, [b, h, length]] + [[]] * 9,
        ["float"] * 6 + [""] * 4 + ["Scalar", "Scalar", "float", "float", "Scalar"],
        [""] * 11 + ["True"] + [""] * 3,
    )
    assert bw.flops == 10 * b * h * length * length * d
    assert bw.flops_effective == bw.flops * 129 / 256
    # the raw flash kernel takes [B, L, H, D]
    raw = op_cost(
        "aten::_flash_attention_forward",
        [[b, length, h, d]] * 3 + [[]] * 12,
        ["float"] * 3 + [""] * 4 + ["Scalar", "Scalar"] + [""] * 6,
        [""] * 8 + ["True"] + [""] * 6,
    )
    assert (raw.flops, raw.flops_effective) == (dense.flops, 16_908_288)


def test_causal_pairs():
    assert causal_pairs(4, 4) == 4 * 5 // 2  # L*(L+1)/2
    assert causal_pairs(2, 6) == 1 + 2  # top-left: row i sees i+1 keys
    assert causal_pairs(2, 6, bottom_right=True) == 5 + 6  # row i sees i+1+(Lk-Lq) keys
    assert causal_pairs(6, 2, bottom_right=True) == 0 + 0 + 0 + 0 + 1 + 2
    from analysis.cost.compute import pairs_closed

    for lq in (1, 3, 7, 16):
        for lk in (1, 2, 7, 20):
            for br in (False, True):
                assert pairs_closed(lq, lk, lk - lq if br else 0) == causal_pairs(lq, lk, br)


def test_elementwise_broadcast_and_dtypes():
    # [4,1,8] + [3,1] -> [4,3,8] = 96 elements, 1 FLOP each
    c = op_cost("aten::add", [[4, 1, 8], [3, 1], []], ["float", "float", "Scalar"], ["", "", "1"])
    assert c.flops == 96
    assert c.bytes_read == (32 + 3) * 4 == 140
    assert c.bytes_written == 96 * 4 == 384
    assert op_cost("aten::gt", [[5, 4], []], ["float", "Scalar"]).dtype == "bool"
    assert op_cost("aten::gt", [[5, 4], []], ["float", "Scalar"]).bytes_written == 20  # 1 byte each
    # in-place variant; a 0-d tensor operand does not set the output dtype
    c = op_cost("aten::mul_", [[4, 8], []], ["c10::BFloat16", "float"])
    assert (c.flops, c.dtype, c.bytes_read, c.bytes_written) == (32, "bf16", 32 * 2 + 4, 32 * 2)
    assert op_cost("aten::add", [[4, 2], [3]], F32[:2]) is None  # shapes do not broadcast
    assert op_cost("aten::where", [[4, 2]], ["bool"]) is None  # nonzero: data-dependent
    mx = op_cost("aten::max", [[4, 2], [2]], F32[:2])  # binary max: elementwise
    assert (mx.family, mx.flops, mx.bytes_written) == ("elementwise", 8, 32)
    # dropout is a wrapper: identity in eval, native_dropout beneath it in training
    assert op_cost("aten::dropout", [[4, 2], [], []], ["float", "Scalar", "Scalar"], ["", "0.1", "False"]).bytes == 0


def test_softmax_norms_reductions():
    c = op_cost("aten::_softmax", [[8, 128], [], []], ["c10::BFloat16", "Scalar", "Scalar"], ["", "-1", "False"])
    assert c.flops == 5 * 8 * 128 == 5_120  # 5 per element
    assert (c.bytes_read, c.bytes_written) == (2_048, 2_048)  # 1024 elements * 2 bytes
    # layer_norm [4,16,64] with weight and bias: 5 + 1 + 1 = 7 per element
    c = op_cost(
        "aten::native_layer_norm",
        [[4, 16, 64], [], [64], [64], []],
        ["float", "ScalarList", "float", "float", "Scalar"],
        ["", "[64]", "", "", "1e-05"],
    )
    assert c.flops == 7 * 4096 == 28_672
    assert c.bytes_read == (4096 + 64 + 64) * 4 == 16_896  # x, weight, bias
    assert c.bytes_written == 4096 * 4 == 16_384
    # rms_norm without weight: 3 per element
    assert (
        op_cost("aten::rms_norm", [[2, 4, 3], [], [], []], ["float", "ScalarList", "", ""], ["", "[3]", "", ""]).flops
        == 3 * 24
    )
    # sum over dim 1 of [5, 4]: 20 FLOPs, reads 80 bytes, writes 5 fp32
    s = op_cost("aten::sum", [[5, 4], [], [], []], ["float", "ScalarList", "Scalar", ""], ["", "[1]", "True", ""])
    assert (s.flops, s.bytes_read, s.bytes_written) == (20, 80, 20)
    # max(dim) also writes int64 indices: 4 values * (4 + 8)
    m = op_cost("aten::max", [[5, 4], [], []], ["float", "Scalar", "Scalar"], ["", "0", "False"])
    assert m.bytes_written == 4 * 12
    # a dim passed but not recorded: unknown
    assert op_cost("aten::sum", [[5, 4], [], [], []], ["float", "ScalarList", "Scalar", ""]) is None
    assert op_cost("aten::sum", [[5, 4], []], ["float", ""]).bytes_written == 4  # full reduction


def test_memory_ops():
    e = op_cost("aten::embedding", [[10, 4], [2, 2], [], [], []], ["float", "long int", "Scalar", "Scalar", "Scalar"])
    assert e.flops == 0
    assert e.bytes_read == 4 * 8 + 4 * 4 * 4 == 96  # indices + 4 gathered rows of 4
    assert e.bytes_written == 4 * 4 * 4 == 64
    cast = op_cost("aten::copy_", [[3, 8], [3, 8], []], ["c10::BFloat16", "float", "Scalar"])
    assert (cast.family, cast.bytes_read, cast.bytes_written) == ("quant/cast", 96, 48)
    to = op_cost(
        "aten::_to_copy",
        [[3, 8]] + [[]] * 6,
        ["float", "Scalar", "", "", "", "Scalar", ""],
        ["", "15", "", "", "", "False", ""],
    )  # ScalarType 15 = bfloat16
    assert (to.dtype, to.bytes_written) == ("bf16", 48)
    # the same call without Concrete Inputs: the target dtype is not known, so neither is the cost
    assert op_cost("aten::_to_copy", [[3, 8]] + [[]] * 6, ["float", "Scalar", "", "", "", "Scalar", ""], None) is None
    # to(device, dtype) keeping the dtype: a no-op (a device move is costed by its _to_copy child)
    assert (
        op_cost(
            "aten::to",
            [[2, 2]] + [[]] * 5,
            ["long int", "", "Scalar", "Scalar", "Scalar", ""],
            ["", "", "4", "False", "False", ""],
        ).bytes
        == 0
    )
    q = op_cost(
        "aten::quantize_per_tensor", [[5, 4], [], [], []], ["float"] + ["Scalar"] * 3, ["", "0.1", "3", "12"]
    )  # 12 = qint8
    assert (q.flops, q.bytes_read, q.bytes_written, q.dtype) == (40, 80, 20, "int8")


def test_zero_work_ops_legacy_types_and_pad():
    v = op_cost("aten::view", [[2, 4, 6, 8], []], ["float", "ScalarList"], ["", "[8, 6, 8]"])
    assert (v.flops, v.bytes, v.family, v.dtype) == (0, 0, "other", "fp32")
    assert (
        op_cost(
            "aten::empty",
            [[]] * 6,
            ["ScalarList", "Scalar", "Scalar", "", "", "Scalar"],
            ["[3, 4]", "6", "0", "", "", "0"],
        ).bytes
        == 0
    )
    # older Kineto writes 'Int'/'Bool'/'GenericList' for non-tensor arguments
    c = op_cost("aten::add_", [[32, 256, 56, 56], [32, 256, 56, 56], []], ["float", "float", "Int"])
    assert c.flops == 32 * 256 * 56 * 56 and c.bytes_read == 2 * c.bytes_written
    # pad [0, 192] on the last dim: [888, 2880] -> [888, 3072], bf16
    p = op_cost(
        "aten::constant_pad_nd",
        [[888, 2880], [], []],
        ["c10::BFloat16", "ScalarList", "Scalar"],
        ["", "[0, 192]", "0."],
    )
    assert (p.bytes_read, p.bytes_written) == (888 * 2880 * 2, 888 * 3072 * 2)
    # creation ops write only: zeros([4, 8], dtype=bf16 (15)) = 32 * 2 bytes
    z = op_cost("aten::zeros", [[]] * 5, ["ScalarList", "Scalar", "", "", ""], ["[4, 8]", "15", "", "", ""])
    assert (z.bytes_read, z.bytes_written, z.dtype) == (0, 64, "bf16")
    assert op_cost("aten::zeros", [[]] * 5, ["ScalarList", "", "", "", ""], ["[4]", "", "", "", ""]) is None
    zl = op_cost("aten::zeros_like", [[3, 5]] + [[]] * 5, ["long int"] + [""] * 5, [""] * 6)
    assert zl.bytes_written == 15 * 8


def test_unknown_and_tensorlists():
    assert op_cost("aten::frobnicate", [[2, 2]], ["float"]) is None
    assert op_cost("mm", [[2, 3], [3, 4]], F32[:2]) is None  # not an ATen name
    assert op_cost("aten.mm.default", [[2, 3], [3, 4]], F32[:2]).flops == 48
    assert op_cost("aten::mm", [], []) is None
    assert op_cost("aten::mm", None, None) is None
    cat = ([[[5, 4], [5, 4]], []], ["TensorList", "Scalar"], ["", "1"])
    assert op_cost("aten::cat", *cat) is None  # Kineto records no element dtype
    c = op_cost("aten::cat", *cat, list_dtype="c10::Half")
    assert (c.bytes_read, c.bytes_written) == (80, 80)  # 40 elements * 2 bytes
    adam = op_cost(
        "aten::_fused_adamw_",
        [[[4, 8], [4]]] * 4 + [[], [[], []]] + [[]] * 9,
        ["TensorList"] * 6 + ["Scalar"] * 7 + ["", ""],
        None,
        list_dtype="float",
    )
    assert adam.flops == 13 * 36  # 13 per parameter element
    assert (adam.bytes_read, adam.bytes_written) == (4 * 36 * 4, 3 * 36 * 4)
    assert adam.family == "optimizer"
    f = op_cost(
        "aten::_foreach_add_",
        [[[4, 8], [4]], [[4, 8], [4]], []],
        ["TensorList", "TensorList", "Scalar"],
        None,
        list_dtype="bf16",
    )
    assert (f.flops, f.bytes_read, f.bytes_written) == (36, 2 * 36 * 2, 36 * 2)


def test_einsum_only_when_resolvable_and_out_variants():
    shapes, types = [[], [[2, 3, 4], [2, 4, 5]], []], ["", "TensorList", ""]
    assert op_cost("aten::einsum", shapes, types, ["", "", ""], list_dtype="float") is None  # no equation
    e = op_cost("aten::einsum", shapes, types, ["bij,bjk->bik", "", ""], list_dtype="float")
    assert e.flops == 2 * 2 * 3 * 4 * 5 == 240  # 2 * prod(b, i, j, k)
    assert (e.bytes_read, e.bytes_written) == ((24 + 40) * 4, 30 * 4)
    # mm with an out= tensor is still mm, not addmm
    assert op_cost("aten::mm", [[2, 3], [3, 4], [2, 4]], F32).flops == 2 * 2 * 3 * 4


_SHAPES = st.recursive(st.lists(st.integers(0, 6), max_size=4), lambda inner: st.lists(inner, max_size=3), max_leaves=8)
_TYPES = st.sampled_from(
    [
        "float",
        "c10::BFloat16",
        "long int",
        "bool",
        "Scalar",
        "ScalarList",
        "TensorList",
        "",
        "Int",
        "GenericList",
        "c10::complex<float>",
        "weird",
    ]
)
_CONC = st.sampled_from(
    [
        "",
        "1",
        "-1",
        "0.",
        "True",
        "False",
        "[1, 1]",
        "[]",
        "[True, False, True]",
        "same",
        "valid",
        "[0, 192]",
        "nan",
        "bij,bjk->bik",
        "15",
        "99",
        "[[1]]",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(known_ops() + ["aten::_foreach_mul_", "aten::relu_", "aten::nope"]),
    shapes=st.lists(_SHAPES, max_size=12),
    types=st.lists(_TYPES, max_size=12),
    conc=st.one_of(st.none(), st.lists(_CONC, max_size=12)),
    list_dtype=st.sampled_from([None, "float", "bf16", "junk"]),
)
def test_fuzz_never_raises_and_stays_consistent(name, shapes, types, conc, list_dtype):
    c = op_cost(name, shapes, types, conc, list_dtype)
    if c is not None:
        assert c.flops >= 0 and c.bytes_read >= 0 and c.bytes_written >= 0
        assert c.flops_effective <= c.flops


def test_cost_table_aligned_and_deduplicated():
    ev = pd.DataFrame(
        {
            "name": pd.Categorical(["aten::mm", "aten::relu", "aten::mm", "aten::nope", "aten::mm"]),
            "shapes": pd.Categorical(["[[2,3],[3,4]]", "[[5]]", "[[2,3],[3,4]]", "[[1]]", ""]),
            "dtypes": pd.Categorical(['["float","float"]', '["float"]', '["float","float"]', '["float"]', ""]),
        },
        index=[10, 11, 12, 13, 14],
    )
    t = cost_table(ev)
    assert list(t.columns) == ["flops", "flops_effective", "bytes_read", "bytes_written", "family", "dtype"]
    assert list(t.index) == [10, 11, 12, 13, 14]
    assert t["flops"].dtype == "float64"
    assert t.loc[10, "flops"] == t.loc[12, "flops"] == 2 * 2 * 3 * 4  # 48
    assert t.loc[11, "bytes_read"] == 20
    assert math.isnan(t.loc[13, "flops"]) and t.loc[13, "family"] == "unknown"
    assert math.isnan(t.loc[14, "bytes_written"]) and t.loc[14, "dtype"] == "unknown"
    conv = pd.DataFrame(
        {
            "name": ["aten::convolution"],
            "shapes": ["[[2,3,32,32],[8,3,3,3],[8],[],[],[],[],[],[]]"],
            "dtypes": [
                '["float","float","float","ScalarList","ScalarList","ScalarList","Scalar","ScalarList","Scalar"]'
            ],
            "concrete": ['["","","","[2, 2]","[1, 1]","[1, 1]","False","[0, 0]","1"]'],
        }
    )
    assert cost_table(conv)["flops"].tolist() == [221_184.0]
    assert len(cost_table(ev.iloc[:0])) == 0


@pytest.mark.parametrize(
    "folder", ["b200_eager", "dlrm_8rank_v100", "resnet50_legacy_v100", "sglang_qwen3_prefill_mi300x"]
)
def test_cost_table_on_real_traces(folder):
    from analysis.cost import FAMILIES
    from profiler.api import load_trace
    from tests.conftest import TRACES, real_trace

    if not (TRACES / folder).is_dir():
        pytest.skip("real traces not available")
    ev = load_trace(real_trace(folder)).events
    t = cost_table(ev)
    assert t.index.equals(ev.index)
    assert set(t["family"]) <= set(FAMILIES) | {"unknown"}
    known = t["family"] != "unknown"
    assert known.sum() > 0
    assert t.loc[known, ["flops", "bytes_read", "bytes_written"]].ge(0).all().all()
    assert (t.loc[known, "flops_effective"] <= t.loc[known, "flops"]).all()
    assert t.loc[~known, "flops"].isna().all()
    # rows without recorded shapes are never costed
    assert (t.loc[ev["shapes"].astype(str).eq(""), "family"] == "unknown").all()


# ------------------------------------------------------------------ against FlopCounterMode

torch = pytest.importorskip("torch")
COUNTED = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::convolution",
    "aten::convolution_backward",
}  # the innermost ops FlopCounterMode registers
FAMILY = {
    "mm": "gemm",
    "addmm": "gemm",
    "bmm": "gemm",
    "baddbmm": "gemm",
    "convolution": "conv",
    "convolution_backward": "conv",
}


def _profile_ops(fn, tmp_path: Path) -> list[tuple[str, list, list, list | None]]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    out = []
    for e in doc["traceEvents"]:
        a = e.get("args") or {}
        if e.get("ph") == "X" and "Input Dims" in a:
            out.append((e["name"], a["Input Dims"], a["Input type"], a.get("Concrete Inputs")))
    return out


def _ours_by_family(ops) -> dict[str, float]:
    tot: dict[str, float] = defaultdict(float)
    for name, shapes, types, conc in ops:
        if name in COUNTED:
            c = op_cost(name, shapes, types, conc)
            assert c is not None, (name, shapes, conc)
            tot[c.family] += c.flops
    return dict(tot)


def _counter_by_family(fn) -> dict[str, float]:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        fn()
    tot: dict[str, float] = defaultdict(float)
    for op, n in fc.get_flop_counts()["Global"].items():
        tot[FAMILY[str(op).split(".")[-1]]] += n
    return dict(tot)


def _check(fn, tmp_path):
    ours = _ours_by_family(_profile_ops(fn, tmp_path))
    theirs = _counter_by_family(fn)
    assert ours == theirs and sum(theirs.values()) > 0


def test_mlp_forward_backward_equals_flop_counter(tmp_path):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(3, 8)

    def step():
        mlp(x).sum().backward()  # addmm forward, mm backward

    _check(step, tmp_path)


def test_convnet_forward_backward_equals_flop_counter(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 6, (3, 2), padding=(1, 0), dilation=(2, 1)),
        torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1, groups=2),
    )
    x = torch.randn(2, 4, 9, 10)
    _check(lambda: net(x), tmp_path)  # forward only
    _check(lambda: net(x).sum().backward(), tmp_path)  # + convolution_backward
    c1 = torch.nn.Conv1d(3, 6, 5, stride=3, padding=2)
    _check(lambda: c1(torch.randn(2, 3, 17)).sum().backward(), tmp_path)


def test_gemm_calls_equal_flop_counter(tmp_path):
    torch.manual_seed(0)
    a, b, c = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(2, 3, 5)

    def calls():
        torch.bmm(a, b)
        torch.baddbmm(c, a, b)
        torch.addmm(torch.randn(5), torch.randn(3, 4), torch.randn(4, 5))
        torch.matmul(torch.randn(2, 3, 6, 8), torch.randn(8, 6))  # matmul -> mm/bmm beneath

    _check(calls, tmp_path)


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_cpu_dense_and_causal(tmp_path, causal):
    torch.manual_seed(0)
    b, h, length, d = 2, 4, 6, 8
    q, k, v = (torch.randn(b, h, length, d, requires_grad=True) for _ in range(3))
    ops = _profile_ops(
        lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward(), tmp_path
    )
    names = {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu"}
    costs = [op_cost(*op) for op in ops if op[0] in names]
    assert len(costs) == 2 and all(c is not None for c in costs)
    for c in costs:
        assert c.flops == 4 * b * h * length * length * d == 9_216  # 4*B*H*L*L*D
        # causal keeps L*(L+1)/2 = 21 of 36 pairs: 9216 * 21/36 = 5376
        assert c.flops_effective == (5_376 if causal else 9_216)
    bw = [op_cost(*op) for op in ops if op[0] == "aten::_scaled_dot_product_flash_attention_for_cpu_backward"]
    assert len(bw) == 1
    assert bw[0].flops == 10 * b * h * length * length * d == 23_040  # 5 bmms: 2*B*H*L*L*(3D + 2D)
    assert bw[0].flops_effective == (23_040 * 21 / 36 if causal else 23_040)  # 13440 causal


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_matmul_ranks_match_flop_counter(data):
    # random ranks 1..4 with broadcastable batch dims: our aten::matmul equals FlopCounterMode
    from torch.utils.flop_counter import FlopCounterMode

    m, k, n = (data.draw(st.integers(1, 5)) for _ in range(3))
    batch = data.draw(st.lists(st.integers(1, 3), max_size=2))
    ra, rb = data.draw(st.integers(1, 2 + len(batch))), data.draw(st.integers(1, 2 + len(batch)))

    def batch_dims(rank):  # trailing batch dims, some 1
        dims = [1 if data.draw(st.booleans()) else b for b in batch]
        return dims[len(dims) - (rank - 2) :] if rank > 2 else []

    xa = [k] if ra == 1 else batch_dims(ra) + [m, k]
    xb = [k] if rb == 1 else batch_dims(rb) + [k, n]
    y = torch.matmul(torch.zeros(xa), torch.zeros(xb))
    with FlopCounterMode(display=False) as fc:
        torch.matmul(torch.zeros(xa), torch.zeros(xb))
    c = op_cost("aten::matmul", [xa, xb], ["float", "float"])
    assert c.flops == 2 * y.numel() * k  # 2 * K per output element
    if fc.get_total_flops():  # dot/mv are not counted there
        assert c.flops == fc.get_total_flops()
    assert c.bytes_written == y.numel() * 4


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_conv_configs_match_flop_counter_and_output_shape(data):
    from torch.utils.flop_counter import FlopCounterMode

    nd = data.draw(st.integers(1, 2))
    groups = data.draw(st.sampled_from([1, 2]))
    cin, cout = 2 * data.draw(st.integers(1, 2)), 2 * data.draw(st.integers(1, 2))
    k = [data.draw(st.integers(1, 3)) for _ in range(nd)]
    stride = [data.draw(st.integers(1, 3)) for _ in range(nd)]
    pad = [data.draw(st.integers(0, 2)) for _ in range(nd)]
    dil = [data.draw(st.integers(1, 2)) for _ in range(nd)]
    transposed = data.draw(st.booleans())
    opad = [data.draw(st.integers(0, min(s, d) - 1)) for s, d in zip(stride, dil)] if transposed else [0] * nd
    x = [2, cin] + [data.draw(st.integers(5, 9)) for _ in range(nd)]
    w = [cin, cout // groups] + k if transposed else [cout, cin // groups] + k
    args = (torch.randn(x), torch.randn(w), None, stride, pad, dil, transposed, opad, groups)
    try:
        y = torch.ops.aten.convolution(*args)
    except RuntimeError:
        return  # e.g. output size <= 0
    with FlopCounterMode(display=False) as fc:
        torch.ops.aten.convolution(*args)
    conc = ["", "", "", str(stride), str(pad), str(dil), str(transposed), str(opad), str(groups)]
    c = op_cost(
        "aten::convolution",
        [x, w, []] + [[]] * 6,
        ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
        conc,
    )
    assert c.flops == fc.get_total_flops()
    assert c.bytes_written == y.numel() * 4


def test_costs_add_as_values():
    """A cost is a value that adds (tinygrad's Estimates): the sum of a GEMM and the elementwise
    op after it is one fused kernel's work; family and dtype follow the larger FLOPs."""
    from analysis.cost import Cost

    # mm [64,128] @ [128,32] fp32: 2*64*128*32 = 524,288 FLOPs; reads (64*128 + 128*32)*4 =
    # 49,152 B, writes 64*32*4 = 8,192 B. relu over its output: 2,048 FLOPs, 8,192 B each way.
    mm = op_cost("aten::mm", [[64, 128], [128, 32]], ["float", "float"])
    relu = op_cost("aten::relu", [[64, 32]], ["float"])
    both = mm + relu
    assert (both.flops, both.bytes_read, both.bytes_written) == (526_336.0, 57_344.0, 16_384.0)
    assert (both.family, both.dtype) == ("gemm", "fp32") == ((relu + mm).family, (relu + mm).dtype)
    assert sum([mm, relu], Cost.ZERO) == both and mm + Cost.ZERO == mm == Cost.ZERO + mm
    assert (3 * relu).flops == 6_144.0 and (relu * 0.5).bytes == 8_192.0
