"""Custom serving-stack ops and legacy ATen ops in the cost model (analysis/cost/custom.py).

Hand arithmetic on records copied from the real traces; the eager torch equivalents recorded
with torch.profiler and costed by the existing ATen formulas; the parent join of the legacy
cuDNN convolution backward halves (against FlopCounterMode); and the unknown share of unit time
on every real trace before and after.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.cost import comm as cost_comm
from analysis.cost import ops as cost
from analysis.cost import Cost, cost_table, op_cost
from analysis.cost.custom import CUSTOM_OPS, LEGACY_ATEN
from analysis.cost.joins import joined_costs
from analysis.comm_patterns import Patterns, bundled

BF16 = '"c10::BFloat16"'


def _c(name: str, shapes: str, dtypes: str, concrete: str | None = None) -> Cost | None:
    return op_cost(name, json.loads(shapes), json.loads(dtypes), json.loads(concrete) if concrete else None)


def _is(c: Cost | None, flops: float, read: float, written: float, family: str, dtype: str) -> None:
    assert c is not None
    assert (c.flops, c.flops_effective, c.bytes_read, c.bytes_written, c.family, c.dtype) == (
        flops,
        flops,
        read,
        written,
        family,
        dtype,
    )


# ------------------------------------------------------------------ records from the real traces


def test_vllm_norms_b200():
    # b200_eager, _C::fused_add_rms_norm(input!, residual!, weight, eps): n = 888*2880 = 2,557,440
    c = _c(
        "_C::fused_add_rms_norm",
        "[[888,2880],[888,2880],[2880],[]]",
        f'[{BF16},{BF16},{BF16},"Scalar"]',
        '["","","","1.0000000000000001e-05"]',
    )
    # 5n = 12,787,200; read input + residual 2*2n = 10,229,760 + weight 2*2880 = 5,760; written 2*2n
    _is(c, 12_787_200, 10_235_520, 10_229_760, "norm", "bf16")
    # _C::rms_norm(result!, input, weight, eps): 4n = 10,229,760; read 2n + 5,760; written 2n
    c = _c(
        "_C::rms_norm",
        "[[888,2880],[888,2880],[2880],[]]",
        f'[{BF16},{BF16},{BF16},"Scalar"]',
        '["","","","1.0000000000000001e-05"]',
    )
    _is(c, 10_229_760, 5_120_640, 5_114_880, "norm", "bf16")


def test_aiter_norms_sglang_prefill():
    # aiter::rmsnorm(out, input, weight, eps) on Qwen3's q-norm rows: n = 122880*128 = 15,728,640
    c = _c(
        "aiter::rmsnorm",
        "[[122880,128],[122880,128],[128],[]]",
        f'[{BF16},{BF16},{BF16},"Scalar"]',
        '["","","","9.9999999999999995e-07"]',
    )
    _is(c, 62_914_560, 31_457_536, 31_457_280, "norm", "bf16")  # 4n; 2n + 2*128; 2n
    # aiter::add_rmsnorm(out, input, residual_in, residual_out, weight, eps): n = 15360*4096
    c = _c(
        "aiter::add_rmsnorm",
        "[[15360,4096],[15360,4096],[15360,4096],[15360,4096],[4096],[]]",
        f'[{BF16},{BF16},{BF16},{BF16},{BF16},"Scalar"]',
        '["","","","","","9.9999999999999995e-07"]',
    )
    # n = 62,914,560: 5n = 314,572,800; read 2*2n + 2*4096 = 251,666,432; written 2*2n
    _is(c, 314_572_800, 251_666_432, 251_658_240, "norm", "bf16")


def test_silu_and_mul_sglang_prefill():
    # sgl_kernel::silu_and_mul(out [15360,12288], input [15360,24576]): 2 per output element
    c = _c("sgl_kernel::silu_and_mul", "[[15360,12288],[15360,24576]]", f"[{BF16},{BF16}]", '["",""]')
    # out n = 188,743,680: 377,487,360 FLOPs; read 15360*24576*2 = 754,974,720; written 2n
    _is(c, 377_487_360, 754_974_720, 377_487_360, "elementwise", "bf16")
    assert _c("_C::silu_and_mul", "[[4,3],[4,7]]", f"[{BF16},{BF16}]") is None  # 7 != 2*3


def test_rotary_embedding_both_stacks():
    # b200_eager _C::rotary_embedding(positions [888], query [888,512], key [888,64],
    # head_size 64, cos_sin_cache [131072,64], is_neox): Hq = 512/64 = 8, Hk = 1, rot_dim = 64
    c = _c(
        "_C::rotary_embedding",
        "[[888],[888,512],[888,64],[],[131072,64],[]]",
        f'["long int",{BF16},{BF16},"Scalar",{BF16},"Scalar"]',
        '["","","","64","","True"]',
    )
    # rotated = 9 heads * 888 * 64 = 511,488: 3 FLOPs each = 1,534,464;
    # read positions 888*8 = 7,104 + cache rows 888*64*2 = 113,664 + 2*511,488; written 2*511,488
    _is(c, 1_534_464, 1_143_744, 1_022_976, "elementwise", "bf16")
    # sglang prefill sgl_kernel::rotary_embedding: 15360 tokens, Hq = 32, Hk = 8, rot_dim 128
    c = _c(
        "sgl_kernel::rotary_embedding",
        "[[15360],[15360,4096],[15360,1024],[],[41216,128],[]]",
        f'["long int",{BF16},{BF16},"Scalar",{BF16},"Scalar"]',
        '["","","","128","","True"]',
    )
    # rotated = 40*15360*128 = 78,643,200 -> 235,929,600 FLOPs;
    # read 15360*8 = 122,880 + 15360*128*2 = 3,932,160 + 157,286,400
    _is(c, 235_929_600, 161_341_440, 157_286_400, "elementwise", "bf16")
    # head_size not recorded: the head count is not derivable
    assert (
        _c(
            "_C::rotary_embedding",
            "[[888],[888,512],[888,64],[],[131072,64],[]]",
            f'["long int",{BF16},{BF16},"Scalar",{BF16},"Scalar"]',
        )
        is None
    )


def test_static_fp8_quant_b200():
    # _C::static_scaled_fp8_quant(result fp8 [888,512], input bf16, scale fp32 0-d): n = 454,656
    c = _c(
        "_C::static_scaled_fp8_quant",
        "[[888,512],[888,512],[]]",
        f'["c10::Float8_e4m3fn",{BF16},"float"]',
        '["","",""]',
    )
    _is(c, 909_312, 909_316, 454_656, "quant/cast", "fp8")  # 2n; 2n + 4; 1n


def test_kv_cache_writes():
    # b200_eager: fp8 cache stored as uint8; 888 tokens of 1*64 for key and value
    c = _c(
        "_C_cache_ops::reshape_and_cache_flash",
        "[[888,1,64],[888,1,64],[4213816,16,1,64],[4213816,16,1,64],[888],[],[],[]]",
        f'[{BF16},{BF16},"unsigned char","unsigned char","long int","","float","float"]',
        '["","","","","","","",""]',
    )
    # elements 2*56,832: 1 FLOP each (scale, convert); read 2*56,832*2 + slots 888*8 + scales 2*4
    _is(c, 113_664, 234_440, 113_664, "quant/cast", "bf16")
    # vllm_graphs_mi300x: bf16 cache, 8192 tokens of 8*64: a copy
    c = _c(
        "_C_cache_ops::reshape_and_cache_flash",
        "[[8192,8,64],[8192,8,64],[224304,32,8,64],[224304,32,8,64],[8192],[],[],[]]",
        f'[{BF16},{BF16},{BF16},{BF16},"long int","","float","float"]',
        '["","","","","","","",""]',
    )
    # 2*4,194,304 elements * 2 bytes = 16,777,216 each way; + slots 65,536 + scales 8 read
    _is(c, 0, 16_842_760, 16_777_216, "copy", "bf16")
    # sglang::store_cache(k, v, k_cache, v_cache, indices, row_bytes=2048, num_split=0)
    c = _c(
        "sglang::store_cache",
        "[[15360,1024],[15360,1024],[835874,1024],[835874,1024],[15360],[],[]]",
        f'[{BF16},{BF16},{BF16},{BF16},"long int","Scalar","Scalar"]',
        '["","","","","","2048","0"]',
    )
    # 2 * 15360 rows * 2048 bytes = 62,914,560; + indices 15360*8 = 122,880 read
    _is(c, 0, 63_037_440, 62_914_560, "copy", "bf16")


def test_legacy_batch_norm_and_max_pool_backward():
    # resnet50_legacy_v100 aten::cudnn_batch_norm_backward(input, grad_output, weight,
    # running_mean, running_var, save_mean, save_var, epsilon, reserveSpace): n = 32*256*196
    c = _c(
        "aten::cudnn_batch_norm_backward",
        "[[32,256,14,14],[32,256,14,14],[256],[256],[256],[256],[256],[],[0]]",
        '["float","float","float","float","float","float","float","Double","unsigned char"]',
    )
    # n = 1,605,632: 8n = 12,845,056; read 2*4n + 5*256*4 = 12,850,176; written 4n + 2*256*4
    _is(c, 12_845_056, 12_850_176, 6_424_576, "norm", "fp32")
    # aten::max_pool2d_with_indices_backward(grad_output, self, k, s, p, d, ceil, indices)
    c = _c(
        "aten::max_pool2d_with_indices_backward",
        "[[32,64,56,56],[32,64,112,112],[],[],[],[],[],[32,64,56,56]]",
        '["float","float","GenericList","GenericList","GenericList","GenericList","Bool","long int"]',
    )
    # n = 32*64*56*56 = 6,422,528 adds; read grad 4n + indices 8n; written 32*64*112*112*4
    _is(c, 6_422_528, 77_070_336, 102_760_448, "copy", "fp32")
    # the forward records no Concrete Inputs in 2021: kernel and stride unknown
    assert (
        _c(
            "aten::max_pool2d_with_indices",
            "[[32,64,112,112],[],[],[],[],[]]",
            '["float","GenericList","GenericList","GenericList","GenericList","Bool"]',
        )
        is None
    )


def test_ops_whose_work_is_not_recorded_stay_unknown():
    # the expert weights are not inputs of vllm::moe_forward (layer_name is a string)
    assert _c("vllm::moe_forward", "[[888,3072],[888,128],[]]", f'[{BF16},{BF16},""]') is None
    # KV cache and sequence lengths come from the forward context
    assert (
        _c(
            "vllm::unified_attention_with_output",
            "[[888,8,64],[888,1,64],[888,1,64],[888,8,64],[],[],[]]",
            f'["c10::Float8_e4m3fn",{BF16},{BF16},{BF16},"","",""]',
        )
        is None
    )
    # varlen/paged: the lengths are the values of cu_seqlens_q / kv_indptr, not recorded
    shapes = "[[15360,32,128],[835874,8,128],[835874,8,128],[16],[16],[15616]" + ",[]" * 24 + "]"
    dtypes = f'[{BF16},{BF16},{BF16},"int","int","int"' + ',"Scalar"' * 12 + ',""' * 12 + "]"
    assert _c("aiter::mha_batch_prefill", shapes, dtypes) is None
    assert all(n in cost.known_ops() for n in CUSTOM_OPS)


# ------------------------------------------------------------------ the parent join

_CONV_TYPES = '["float","float","float","GenericList","GenericList","GenericList","Int","Bool","Bool","Bool"'
_PARENT = (
    "aten::cudnn_convolution_backward",
    "[[32,256,14,14],[32,1024,14,14],[1024,256,1,1],[],[],[],[],[],[],[],[]]",
    _CONV_TYPES + ',"GenericList"]',
)
_HALF_TYPES = '["GenericList","float","float","GenericList","GenericList","GenericList","Int","Bool","Bool","Bool"]'


def _tree(rows: list[tuple[int, int, str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["id", "parent_id", "name", "shapes", "dtypes"])


def test_conv_backward_halves_joined_from_parent():
    # records copied from resnet50_legacy_v100 (a 1x1 conv 256 -> 1024 on 14x14, batch 32)
    ev = _tree(
        [
            (1, -1, *_PARENT),
            (
                2,
                1,
                "aten::cudnn_convolution_backward_input",
                "[[],[32,1024,14,14],[1024,256,1,1],[],[],[],[],[],[],[]]",
                _HALF_TYPES,
            ),
            (
                3,
                1,
                "aten::cudnn_convolution_backward_weight",
                "[[],[32,1024,14,14],[32,256,14,14],[],[],[],[],[],[],[]]",
                _HALF_TYPES,
            ),
            (
                4,
                1,
                "aten::cudnn_convolution_backward_weight",
                "[[],[32,1024,14,14],[32,512,14,14],[],[],[],[],[],[],[]]",
                _HALF_TYPES,
            ),
            (
                5,
                6,
                "aten::cudnn_convolution_backward_input",
                "[[],[32,1024,14,14],[1024,256,1,1],[],[],[],[],[],[],[]]",
                _HALF_TYPES,
            ),
            (6, -1, "aten::something_else", *_PARENT[1:]),
        ]
    )
    j = joined_costs(ev, ev)
    assert sorted(j.index) == [1, 2]  # rows 3 (mismatched input) and 4 (other parent): not joined
    # grad_input: 2 * numel(grad_out) * numel(w[1:]) = 2 * 6,422,528 * 256 = 3,288,334,336
    # read grad_out 6,422,528*4 + weight 262,144*4 = 26,738,688; written input 1,605,632*4
    assert j.loc[1].tolist() == [3_288_334_336.0, 3_288_334_336.0, 26_738_688.0, 6_422_528.0, "conv", "fp32"]
    # grad_weight: 2*N*Cin*Cout*k*out_sp = 2*32*256*1024*1*196 = 3,288,334,336
    # read grad_out 25,690,112 + input 6,422,528; written weight 1,048,576
    assert j.loc[2].tolist() == [3_288_334_336.0, 3_288_334_336.0, 32_112_640.0, 1_048_576.0, "conv", "fp32"]
    t = cost_table(ev)  # an events table is its own tree
    assert t["family"].tolist() == ["unknown", "conv", "conv", "unknown", "unknown", "unknown"]
    units = ev.rename(columns={"id": "unit_id"}).drop(columns="parent_id")
    assert cost_table(units)["family"].tolist()[1] == "unknown"  # no tree: no join
    assert cost_table(units, tree=ev)["flops"].tolist()[1:3] == [3_288_334_336.0] * 2


@pytest.mark.parametrize("groups,stride", [(1, 2), (2, 1)])
def test_joined_halves_equal_flop_counter(groups, stride):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    x, w = torch.randn(2, 8, 9, 9), torch.randn(6, 8 // groups, 3, 3)
    go = torch.nn.functional.conv2d(x, w, stride=stride, padding=1, groups=groups)

    def shp(t):
        return list(t.shape)

    ev = _tree(
        [
            (
                1,
                -1,
                "aten::cudnn_convolution_backward",
                json.dumps([shp(x), shp(go), shp(w)] + [[]] * 8),
                _CONV_TYPES + ',"GenericList"]',
            ),
            (2, 1, "aten::cudnn_convolution_backward_input", json.dumps([[], shp(go), shp(w)] + [[]] * 7), _HALF_TYPES),
            (
                3,
                1,
                "aten::cudnn_convolution_backward_weight",
                json.dumps([[], shp(go), shp(x)] + [[]] * 7),
                _HALF_TYPES,
            ),
        ]
    )
    ours = joined_costs(ev, ev)["flops"].tolist()
    theirs = []
    for mask in ([True, False, False], [False, True, False]):
        with FlopCounterMode(display=False) as fc:
            torch.ops.aten.convolution_backward(
                go, x, w, None, [stride] * 2, [1, 1], [1, 1], False, [0, 0], groups, mask
            )
        theirs.append(float(fc.get_total_flops()))
    assert ours == theirs and min(ours) > 0


def test_join_on_the_legacy_trace():
    from profiler.api import load_trace
    from tests.conftest import TRACES, real_trace

    if not (TRACES / "resnet50_legacy_v100").is_dir():
        pytest.skip("real traces not available")
    from analysis.units import units

    trace = load_trace(real_trace("resnet50_legacy_v100"))
    ev, u = trace.events, units(trace)
    halves = ev["name"].isin(["aten::cudnn_convolution_backward_input", "aten::cudnn_convolution_backward_weight"])
    t = cost_table(ev)
    assert halves.sum() == 630 and (t.loc[halves, "family"] == "conv").all()
    plain, joined = cost_table(u), cost_table(u, tree=ev)
    total = u["time_ns"].sum()

    def unknown(c: pd.DataFrame) -> float:
        return u["time_ns"][c["flops"].isna().to_numpy()].sum() / total

    print(
        f"resnet50_legacy_v100 cost-unknown share of unit time: "
        f"{unknown(plain):.3f} -> {unknown(joined):.3f} with the join"
    )
    in_units = u["name"].isin(["aten::cudnn_convolution_backward_input", "aten::cudnn_convolution_backward_weight"])
    assert (
        in_units.sum() == 630
        and plain.loc[in_units, "flops"].isna().all()
        and joined.loc[in_units, "flops"].notna().all()
    )
    assert np.isclose(unknown(plain) - unknown(joined), u.loc[in_units, "time_ns"].sum() / total)


# ------------------------------------------------------------------ eager torch equivalents

torch = pytest.importorskip("torch")


def _eager(fn, tmp_path: Path) -> dict[str, list[Cost | None]]:
    """Costs of the ops `fn` runs, recorded with torch.profiler and costed by name."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    path = tmp_path / "eager.json"
    prof.export_chrome_trace(str(path))
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    out: dict[str, list[Cost | None]] = {}
    for e in doc["traceEvents"]:
        a = e.get("args") or {}
        if e.get("ph") == "X" and "Input Dims" in a:
            out.setdefault(e["name"], []).append(
                op_cost(e["name"], a["Input Dims"], a["Input type"], a.get("Concrete Inputs"))
            )
    return out


def _rec(name: str, shapes: list, dtypes: list, concrete: list | None = None) -> Cost:
    c = op_cost(name, shapes, dtypes, concrete)
    assert c is not None
    return c


R, D = 6, 16
BF = "c10::BFloat16"


def test_rms_norms_against_eager(tmp_path):
    x, res = torch.randn(R, D, dtype=torch.bfloat16), torch.randn(R, D, dtype=torch.bfloat16)
    w = torch.randn(D, dtype=torch.bfloat16)
    ops = _eager(lambda: torch.rms_norm(x + res, [D], w, 1e-6), tmp_path)
    add, rms = ops["aten::add"][0], ops["aten::rms_norm"][0]
    plain = _rec("_C::rms_norm", [[R, D], [R, D], [D], []], [BF, BF, BF, "Scalar"])
    assert (plain.flops, plain.bytes_read, plain.bytes_written) == (rms.flops, rms.bytes_read, rms.bytes_written)
    # fused: the eager add's output is re-read by rms_norm (the fused kernel keeps it on chip)
    # and both outputs are kept
    for fused in (
        _rec("_C::fused_add_rms_norm", [[R, D], [R, D], [D], []], [BF, BF, BF, "Scalar"]),
        _rec("aiter::add_rmsnorm", [[R, D]] * 4 + [[D], []], [BF] * 5 + ["Scalar"]),
    ):
        assert fused.flops == add.flops + rms.flops
        assert fused.bytes_read == add.bytes_read + rms.bytes_read - add.bytes_written
        assert fused.bytes_written == add.bytes_written + rms.bytes_written


def test_silu_and_mul_against_eager(tmp_path):
    x = torch.randn(R, 2 * D, dtype=torch.bfloat16)
    ops = _eager(lambda: torch.nn.functional.silu(x[..., :D]) * x[..., D:], tmp_path)
    silu, mul = ops["aten::silu"][0], ops["aten::mul"][0]
    fused = _rec("sgl_kernel::silu_and_mul", [[R, D], [R, 2 * D]], [BF, BF])
    assert fused.flops == silu.flops + mul.flops
    assert fused.bytes_read == silu.bytes_read + mul.bytes_read - silu.bytes_written
    assert fused.bytes_written == mul.bytes_written


def test_rotary_against_eager_neox(tmp_path):
    tokens, hq, hk, head, rot = 5, 4, 2, 8, 8
    pos = torch.tensor([3, 0, 7, 2, 2])
    cache = torch.randn(10, rot, dtype=torch.bfloat16)
    q, k = torch.randn(tokens, hq * head, dtype=torch.bfloat16), torch.randn(tokens, hk * head, dtype=torch.bfloat16)

    def neox():  # vLLM's kernel, spelled in eager ops
        cs = torch.index_select(cache, 0, pos)
        cos, sin = cs[:, None, : rot // 2], cs[:, None, rot // 2 :]
        for t, h in ((q, hq), (k, hk)):
            v = t.view(tokens, h, head)
            x1, x2 = v[..., : rot // 2], v[..., rot // 2 : rot]
            x1 * cos - x2 * sin
            x2 * cos + x1 * sin

    ops = _eager(neox, tmp_path)
    fused = _rec(
        "_C::rotary_embedding",
        [[tokens], [tokens, hq * head], [tokens, hk * head], [], [10, rot], []],
        ["long int", BF, BF, "Scalar", BF, "Scalar"],
        ["", "", "", str(head), "", "True"],
    )
    arith = ops["aten::mul"] + ops["aten::sub"] + ops["aten::add"]
    assert len(arith) == 12 and fused.flops == sum(c.flops for c in arith)
    written = sum(c.bytes_written for c in ops["aten::sub"] + ops["aten::add"])  # the rotated outputs
    assert fused.bytes_written == written
    assert fused.bytes_read == ops["aten::index_select"][0].bytes_read + written  # positions, rows, then x


def test_fp8_quant_against_eager(tmp_path):
    x, scale = torch.randn(R, D, dtype=torch.bfloat16), torch.tensor(0.5)
    ops = _eager(lambda: (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn), tmp_path)
    div, clamp = ops["aten::div"][0], ops["aten::clamp"][0]
    cast = next(c for c in ops["aten::_to_copy"] if c is not None and c.dtype == "fp8")
    fused = _rec("_C::static_scaled_fp8_quant", [[R, D], [R, D], []], ["c10::Float8_e4m3fn", BF, "float"])
    assert fused.flops == div.flops + clamp.flops
    assert fused.bytes_read == div.bytes_read  # x and the 0-d scale
    assert fused.bytes_written == cast.bytes_written


def test_cudnn_batch_norm_backward_equals_native(tmp_path):
    x = torch.randn(4, 3, 5, 5, requires_grad=True)
    w, b = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    rm, rv = torch.zeros(3), torch.ones(3)
    ops = _eager(lambda: torch.nn.functional.batch_norm(x, rm, rv, w, b, training=True).sum().backward(), tmp_path)
    native = ops["aten::native_batch_norm_backward"][0]
    ours = _rec(
        "aten::cudnn_batch_norm_backward",
        [[4, 3, 5, 5], [4, 3, 5, 5]] + [[3]] * 5 + [[], [0]],
        ["float"] * 7 + ["Double", "unsigned char"],
    )
    assert ours == native


@pytest.mark.parametrize(
    "k,s,p,ceil", [(3, 2, 1, True), (3, 2, 1, False), (2, None, 0, True), ((3, 2), (2, 1), (1, 0), False)]
)
def test_max_pool_against_torch(tmp_path, k, s, p, ceil):
    x = torch.randn(2, 3, 10, 9, requires_grad=True)
    out = torch.nn.functional.max_pool2d(x, k, s, p, ceil_mode=ceil)
    ops = _eager(lambda: torch.nn.functional.max_pool2d(x, k, s, p, ceil_mode=ceil).sum().backward(), tmp_path)
    fwd, bwd = ops["aten::max_pool2d_with_indices"][0], ops["aten::max_pool2d_with_indices_backward"][0]
    kk = k[0] * k[1] if isinstance(k, tuple) else k * k
    assert fwd.flops == out.numel() * kk  # one comparison per window element
    assert (fwd.bytes_read, fwd.bytes_written) == (x.numel() * 4, out.numel() * (4 + 8))  # values + int64 indices
    assert (bwd.flops, bwd.bytes_read, bwd.bytes_written) == (out.numel(), out.numel() * 12, x.numel() * 4)


# ------------------------------------------------------------------ the real traces, before and after

_EXPECT = {  # the ops each trace records that this change costs
    "b200_eager": {
        "_C::fused_add_rms_norm",
        "_C::rms_norm",
        "_C::rotary_embedding",
        "_C::static_scaled_fp8_quant",
        "_C_cache_ops::reshape_and_cache_flash",
        "symm_mem::multimem_all_reduce_",
    },
    "sglang_qwen3_prefill_mi300x": {
        "aiter::rmsnorm",
        "aiter::add_rmsnorm",
        "sgl_kernel::silu_and_mul",
        "sgl_kernel::rotary_embedding",
        "sglang::store_cache",
    },
    "sglang_qwen3_decode_mi300x": set(),  # a replayed HIP graph: kernels only, no op records
    "vllm_graphs_mi300x": {"_C_cache_ops::reshape_and_cache_flash"},
    "resnet50_legacy_v100": {"aten::cudnn_batch_norm_backward", "aten::max_pool2d_with_indices_backward"},
}


def _unknown_share(trace, monkeypatch, without: bool) -> tuple[float, pd.DataFrame]:
    from profiler.api import analyze

    if without:  # the cost model as it was before cost_custom
        monkeypatch.setattr(cost, "CUSTOM_OPS", {})
        old = set(LEGACY_ATEN) | {"cudnn_batch_norm_backward", "miopen_batch_norm_backward"}
        monkeypatch.setattr(cost, "_HANDLERS", {k: v for k, v in cost._HANDLERS.items() if k not in old})
        old_rules = tuple(
            r for r in bundled().rules if not ("symm_mem" in r.match.pattern or "multimem" in r.match.pattern)
        )
        monkeypatch.setattr(cost_comm, "bundled", lambda: Patterns(old_rules))
    u = analyze(trace, sections=("roofline",)).units
    monkeypatch.undo()
    return float(u.loc[u["bound"] == "unknown", "time_ns"].sum() / u["time_ns"].sum()), u


@pytest.mark.parametrize("folder", sorted(_EXPECT))
def test_unknown_share_drops_on_real_traces(folder, monkeypatch):
    from profiler.api import load_trace
    from tests.conftest import TRACES, real_trace

    if not (TRACES / folder).is_dir():
        pytest.skip("real traces not available")
    trace = load_trace(real_trace(folder))
    before, _ = _unknown_share(trace, monkeypatch, without=True)
    after, u = _unknown_share(trace, monkeypatch, without=False)
    print(f"{folder}: unknown share of unit time {before:.4f} -> {after:.4f}")
    new = u[u["name"].isin(_EXPECT[folder])]
    assert set(new["name"]) == _EXPECT[folder]
    assert (new["bound"] != "unknown").all()
    assert (new["efficiency"] <= 1).all()  # a floor never exceeds the measured time
    if _EXPECT[folder]:
        assert after < before
    else:
        assert after == before
    if folder == "b200_eager":
        assert set(new.loc[new["name"] == "symm_mem::multimem_all_reduce_", "bound"]) == {"communication"}
