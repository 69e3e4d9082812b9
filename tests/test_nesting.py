"""Issue 10, "No impossible numbers": an op nested in another that carries its cost is costed
once (analysis.nesting), on inline traces and on a CPU trace recorded here."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from profiler import analyze, load_trace
from tests.conftest import x

F32 = ["float", "float", "float"]


def _op(name, ts, dur, dims, types, ext):
    return x(name, "cpu_op", ts, dur, **{"Input Dims": dims, "Input type": types, "External id": ext})


def test_linear_over_addmm_over_copy_each_flop_once(tiny):
    # linear [4,8]x[16,8]^T + bias: 2*4*8*16 = 1024 FLOPs, carried by addmm; addmm's child copy_
    # (the bias broadcast into the output, [4,16] fp32: reads 256 B, writes 256 B) keeps its bytes,
    # and addmm keeps the rest: its compulsory bytes less the copy's.
    ev = [
        _op("aten::linear", 10, 100, [[4, 8], [16, 8], [16]], F32, 1),
        _op("aten::t", 12, 2, [[16, 8]], ["float"], 2),
        _op("aten::addmm", 20, 80, [[16], [4, 8], [8, 16], [], []], F32 + ["Scalar", "Scalar"], 3),
        _op("aten::copy_", 22, 10, [[4, 16], [4, 16], []], ["float", "float", "Scalar"], 4),
    ]
    a = analyze(load_trace(tiny(ev)))
    u = a.units.set_index("name")
    assert a.units["flops"].sum() == 2 * 4 * 8 * 16  # once, not twice (linear + addmm)
    assert u.loc["aten::linear", "flops"] == 0 and u.loc["aten::linear", "bytes"] == 0
    # addmm compulsory: bias 64 + A 128 + B 512 read, C 256 written = 960 B; copy_ 512 B of it
    assert u.loc["aten::addmm", "bytes"] == 960 - 512
    assert u.loc["aten::copy_", "bytes"] == 512
    # the wrapper shows its implementation's bound, not a runtime-bound row of its own
    assert u.loc["aten::linear", "bound"] == u.loc["aten::addmm", "bound"]
    assert u.loc["aten::linear", "carried_by_name"] == "aten::addmm"
    # its efficiency is the floors inside it over its inclusive 100 us
    inside = u.loc[["aten::linear", "aten::t", "aten::addmm", "aten::copy_"], "floor_ns"].sum()
    assert abs(u.loc["aten::linear", "efficiency"] - inside / 100_000) < 1e-12
    top = a.top_ops.set_index("name")
    assert top.loc["aten::linear", "bound"] == top.loc["aten::addmm", "bound"]


def test_sdpa_wrapper_is_not_costed_on_its_self_time(tiny):
    # SDPA [2,4,128,64] around the CPU flash kernel: 4*B*H*L*L*D = 4*2*4*128*128*64 dense FLOPs,
    # once. Before, the wrapper carried them too and its 1 us of self time gave efficiency >> 1.
    dims = [[2, 4, 128, 64]] * 3
    ev = [
        _op(
            "aten::scaled_dot_product_attention",
            0,
            1001,
            dims + [[], [], [], [], []],
            F32 + ["", "Scalar", "Scalar", "", ""],
            1,
        ),
        _op(
            "aten::_scaled_dot_product_flash_attention_for_cpu",
            1,
            1000,
            dims + [[], [], [], []],
            F32 + ["Scalar", "Scalar", "", ""],
            2,
        ),
    ]
    a = analyze(load_trace(tiny(ev)))
    u = a.units.set_index("name")
    assert a.units["flops"].sum() == 4 * 2 * 4 * 128 * 128 * 64
    w = u.loc["aten::scaled_dot_product_attention"]
    assert w["flops"] == 0 and w["bound"] == u.loc["aten::_scaled_dot_product_flash_attention_for_cpu", "bound"]
    assert w["efficiency"] <= u.loc["aten::_scaled_dot_product_flash_attention_for_cpu", "efficiency"] + 1e-12


def test_autograd_node_shows_the_bound_of_its_work(tiny):
    ev = [
        x("autograd::engine::evaluate_function: MmBackward0", "cpu_op", 0, 200),
        x("MmBackward0", "cpu_op", 1, 190),
        _op("aten::mm", 5, 150, [[64, 64], [64, 64]], ["float", "float"], 3),
    ]
    a = analyze(load_trace(tiny(ev)))
    u = a.units.set_index("name")
    for node in ("MmBackward0", "autograd::engine::evaluate_function: MmBackward0"):
        assert u.loc[node, "bound"] == u.loc["aten::mm", "bound"] != "unknown"
        assert u.loc[node, "carried_by_name"] == "aten::mm"
    assert a.units["flops"].sum() == 2 * 64 * 64 * 64


def test_recorded_cpu_model_counts_each_matrix_flop_once(tmp_path):
    """A CPU run of linear layers, a batched matmul and SDPA, forward and backward: the units'
    matrix FLOPs equal torch.utils.flop_counter's count of the same program (linear, matmul and
    their backward) plus SDPA's dense 4*B*H*L*L*D (flop_counter does not count the CPU flash op)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    w = torch.randn(8, 32, 16, requires_grad=True)
    q = torch.randn(2, 4, 32, 16)

    def program():
        y = lin(torch.randn(8, 10, 64))
        z = torch.matmul(y, w)  # bmm under matmul
        z.sum().backward()
        with torch.no_grad():
            torch.nn.functional.scaled_dot_product_attention(q, q, q)

    with FlopCounterMode(display=False) as fc:
        y = lin(torch.randn(8, 10, 64))
        torch.matmul(y, w).sum().backward()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        program()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    a = analyze(load_trace(path))
    u = a.units
    matrix = u[u["family"].isin(["gemm", "attention"])]
    assert matrix["flops"].sum() == fc.get_total_flops() + 4 * 2 * 4 * 32 * 32 * 16
    shown = a.top_ops.set_index("name")
    for wrapper in ("aten::linear", "aten::matmul", "aten::scaled_dot_product_attention"):
        assert shown.loc[[wrapper], "bound"].iloc[0] in ("compute", "memory"), wrapper  # not 'runtime'
