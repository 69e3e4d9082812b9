"""MoE costs (analysis.cost.moe): vllm::moe_forward on the real B200 trace, sized from what it
nests, and aten::_grouped_mm from a trace recorded here."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from analysis.cost import cost_table, op_cost
from analysis.cost.moe import moe_forward_costs
from analysis.units import units
from profiler import analyze, load_trace
from tests.conftest import real_trace

# vllm::moe_forward on tests/data/traces/b200_eager (gpt-oss, MXFP4 experts, FlashInfer TRT-LLM MoE):
# - its record: hidden_states [888, 3072] bf16, router_logits [888, 128] bf16 -> T=888, H=3072, E=128;
# - it allocates two [888, 4] buffers (top-k ids int32, weights bf16) -> K=4;
# - it allocates [5472, 512] uint8 (the gate-up GEMM's SwiGLU output, MXFP8) and [5472, 3072] bf16
#   (the down GEMM's output), 5472 >= T*K = 3552 rows -> widths other than H: {512} -> I=512;
# - its GEMM kernels are bmm_MxE4m3_MxE2m1MxE4m3_Fp32_... and bmm_Bfloat16_MxE2m1MxE4m3_Fp32_...:
#   operands MXFP4 (weights, 0.5 + 1/32 bytes per element) and MXFP8 (the rate: fp8).
T, H, E, K, INTER = 888, 3072, 128, 4, 512
FLOPS = 2 * T * K * 3 * H * INTER  # = 33,520,877,568
WEIGHTS = min(E, T * K) * 3 * H * INTER * (0.5 + 1 / 32)  # 128 * 4,718,592 * 0.53125 = 320,864,256
READ = WEIGHTS + T * H * 2 + T * E * 2  # + 5,455,872 + 227,328 = 326,547,456
WRITTEN = T * H * 2  # 5,455,872


@pytest.fixture(scope="module")
def b200():
    t = load_trace(real_trace("b200_eager"))
    return t, analyze(t, sections=("ops", "roofline"))


def test_moe_forward_is_costed_from_the_shapes_it_nests(b200):
    _, a = b200
    moe = a.units[a.units["name"] == "vllm::moe_forward"]
    assert len(moe) == 36
    assert FLOPS == 33_520_877_568 and READ == 326_547_456
    assert (moe["flops"] == FLOPS).all()
    assert (moe["bytes_read"] == READ).all() and (moe["bytes_written"] == WRITTEN).all()
    assert set(moe["family"]) == {"gemm"} and set(moe["dtype"]) == {"fp8"}
    # 101 FLOP/byte, below the B200's fp8 ridge (4.5e15 / 7.7e12 = 584): memory-bound, and
    # below its ceiling (the 36 calls take 6.0 ms against a 1.55 ms HBM floor)
    assert set(moe["bound"]) == {"memory"}
    assert ((moe["efficiency"] > 0.1) & (moe["efficiency"] <= 1.0)).all()


def test_what_is_not_nested_is_named_as_missing(b200):
    t, _ = b200
    u = units(t)
    ev = t.events
    # the same trace without the GEMM kernels: the weight format is no longer stated
    no_gemm = ev[~ev["name"].astype(str).str.startswith("bmm_").to_numpy()]
    costs, reasons = moe_forward_costs(u, no_gemm)
    assert not costs and len(reasons) == 36
    assert all("expert weight format" in r for r in reasons.values())
    # ... nor without the top-k buffers: K is the quantity missing
    no_topk = ev[
        ~((ev["name"] == "aten::empty") & (ev["concrete"].astype(str).str.startswith('["[888, 4]"'))).to_numpy()
    ]
    _, reasons = moe_forward_costs(u, no_topk)
    assert len(reasons) == 36 and all("top-k" in r for r in reasons.values())


def test_grouped_mm_recorded_here(tmp_path):
    # a 2-D x 3-D grouped GEMM (MoE experts): 64 rows of [64, 32] routed over 4 experts [4, 32, 48]
    # -> 2 * 64 * 32 * 48 = 196,608 FLOPs; reads 64*32*2 + 4*32*48*2 + 4*4 = 16,400 bytes; writes
    # 64*48*2 = 6,144. (torch.utils.flop_counter counts 0 for _grouped_mm on CPU: hand arithmetic.)
    a = torch.randn(64, 32, dtype=torch.bfloat16)
    b = torch.randn(4, 48, 32, dtype=torch.bfloat16).transpose(-2, -1)
    offs = torch.tensor([16, 32, 48, 64], dtype=torch.int32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch._grouped_mm(a, b, offs)
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    ev = load_trace(path).events
    row = ev[ev["name"] == "aten::_grouped_mm"]
    c = cost_table(row).iloc[0]
    assert c["flops"] == 196_608 and c["bytes_read"] == 16_400 and c["bytes_written"] == 6_144
    assert c["family"] == "gemm" and c["dtype"] == "bf16"


def _fused_experts(t, extra_shapes=(), extra_types=()):
    # vllm::outplace_fused_experts(hidden_states [T, 64], w1 [8, 64, 64], w2 [8, 64, 32],
    # topk_weights [T, 2], topk_ids [T, 2], ...) in bf16 (a Mixtral-like layer, H=64, I=32, E=8, K=2)
    shapes = [[t, 64], [8, 64, 64], [8, 64, 32], [t, 2], [t, 2], *extra_shapes]
    types = ["c10::BFloat16"] * 3 + ["float", "int", *extra_types]
    return op_cost("vllm::outplace_fused_experts", shapes, types, [""] * len(shapes))


def test_fused_experts_from_its_weight_arguments():
    # T=16: 32 routed tokens reach all 8 experts. FLOPs = 2 * 16 * 2 * 64 * (64 + 32) = 393,216
    # (gate+up 2I = 64 rows, down I = 32); reads w1 8*64*64*2 = 65,536 + w2 8*64*32*2 = 32,768 +
    # hidden 16*64*2 = 2,048 + topk_weights 16*2*4 = 128 + topk_ids 16*2*4 = 128 = 100,608;
    # writes 16*64*2 = 2,048
    c = _fused_experts(16)
    assert (c.flops, c.bytes_read, c.bytes_written, c.family, c.dtype) == (393_216, 100_608, 2_048, "gemm", "bf16")
    # T=2: 4 routed tokens reach at most 4 of the 8 experts: half the weights, 49,152 bytes
    c = _fused_experts(2)
    assert c.flops == 2 * 2 * 2 * 64 * 96 and c.bytes_read == 49_152 + 2 * 64 * 2 + 2 * 2 * 4 * 2
    # an expert_map (expert parallelism: which tokens run here is data) leaves it unknown
    assert _fused_experts(16, [[8]], ["int"]) is None
