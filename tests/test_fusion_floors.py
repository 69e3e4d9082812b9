"""One roofline for compiled kernels: analysis.fusion floors them with analysis.roofline.classify
and the cost model's families, so a compiled convolution or attention kernel takes the matrix
peak by its real FLOPs and bytes, as the same op does eager (before, the compiler collector had
its own floors: GEMMs at the matrix peak, everything else, convolution and attention included,
at the vector peak)."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.cost import op_cost
from analysis.cost.kernels import kernel_family
from analysis.fusion import kernel_floors
from profiler.model.hardware import load_spec

H100 = load_spec(
    "h100-sxm"
)  # profiler/model/presets/h100-sxm.yaml: bf16 matrix 989.5e12, vector 67e12 FLOP/s, HBM 3.35e12 B/s


@pytest.mark.parametrize(
    ("family", "kernel", "ops", "want"),
    [
        ("fused", "extern_kernels.convolution", ("aten::convolution",), "conv"),
        (
            "fused",
            "torch.ops.aten._scaled_dot_product_flash_attention.default",
            ("aten::_scaled_dot_product_flash_attention",),
            "attention",
        ),
        ("fused", "triton_tem_fused_convolution_relu_0", ("aten::convolution", "aten::relu"), "conv"),
        ("gemm", "triton_tem_fused_mm_0", ("aten::mm",), "gemm"),
        ("fused", "extern_kernels.bmm", ("aten::bmm",), "gemm"),
        ("fused", "cpp_fused_add_mul_0", ("aten::add", "aten::mul"), "elementwise"),
    ],
)
def test_compiled_kernel_family_from_its_aten_ops(family, kernel, ops, want):
    assert kernel_family(family, kernel, ops) == want


def _row(kernel: str, ops: tuple[str, ...], cost, time_ns: float) -> dict:
    return {
        "device": "cuda:0",
        "flops": cost.flops,
        "bytes_read": cost.bytes_read,
        "bytes_written": cost.bytes_written,
        "dtype": cost.dtype,
        "family": kernel_family("fused", kernel, ops),
        "time_ns": time_ns,
    }


def test_compiled_attention_and_convolution_floored_at_the_matrix_peak():
    # flash attention, bf16, q = k = v = (B 8, H 16, S 1024, D 64), as the fusion map's extern row
    # carries it; its cost from the cost model (independently: 4*B*H*Sq*Sk*D = 4*8*16*1024*1024*64
    # = 34,359,738,368 FLOP; reads q, k, v 3 * 8*16*1024*64 * 2 B = 50,331,648 B, writes out
    # 16,777,216 B and the fp32 logsumexp 8*16*1024*4 = 524,288 B)
    q = [8, 16, 1024, 64]
    attn = op_cost(
        "aten::_scaled_dot_product_flash_attention",
        [q, q, q, [], [], []],
        ["c10::BFloat16"] * 3 + ["Scalar", "Scalar", "Scalar"],
        ["", "", "", "0.", "False", "False"],
    )
    assert attn is not None and attn.flops == 34_359_738_368
    # convolution, bf16, x (32, 64, 56, 56), w (64, 64, 3, 3), stride 1, pad 1:
    # 2 * numel(out) * numel(w) / C_out = 2 * 6,422,528 * 576 = 7,398,752,256 FLOP
    x, w = [32, 64, 56, 56], [64, 64, 3, 3]
    conv = op_cost(
        "aten::convolution",
        [x, w, [], [], [], [], [], [], []],
        [
            "c10::BFloat16",
            "c10::BFloat16",
            "",
            "ScalarList",
            "ScalarList",
            "ScalarList",
            "Scalar",
            "ScalarList",
            "Scalar",
        ],
        ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"],
    )
    assert conv is not None and conv.flops == 7_398_752_256
    kernels = pd.DataFrame(
        [
            _row(
                "torch.ops.aten._scaled_dot_product_flash_attention.default",
                ("aten::_scaled_dot_product_flash_attention",),
                attn,
                100_000.0,
            ),
            _row("extern_kernels.convolution", ("aten::convolution",), conv, 20_000.0),
        ]
    )
    f = kernel_floors(kernels, lambda rank, device: H100)
    # attention: 34,359,738,368 / 989.5e12 * 1e9 = 34,724.3 ns at the matrix peak (at the vector
    # peak it would be 512,832 ns, five times the 100 us the kernel took: an efficiency above 1)
    assert f.loc[0, "t_compute_ns"] == pytest.approx(34_359_738_368 / 989.5e12 * 1e9)
    assert f.loc[0, "t_memory_ns"] == pytest.approx(attn.bytes / 3.35e12 * 1e9)
    assert f.loc[0, "bound"] == "compute" and f.loc[0, "efficiency"] == pytest.approx(34_724.3 / 100_000, rel=1e-5)
    # convolution: 7,398,752,256 / 989.5e12 * 1e9 = 7,477.3 ns (vector: 110,429 ns)
    assert f.loc[1, "t_compute_ns"] == pytest.approx(7_398_752_256 / 989.5e12 * 1e9)
    assert f.loc[1, "efficiency"] <= 1.0


def test_kernel_floors_unknown_without_a_cost_or_a_spec():
    k = pd.DataFrame(
        [
            {
                "device": "cuda:0",
                "flops": float("nan"),
                "bytes_read": 1.0,
                "bytes_written": 1.0,
                "dtype": "bf16",
                "family": "elementwise",
                "time_ns": 10.0,
            }
        ]
    )
    assert kernel_floors(k, lambda r, d: H100).loc[0, "bound"] == "unknown"
    k.loc[0, "flops"] = 1.0
    assert kernel_floors(k, lambda r, d: None).loc[0, "bound"] == "unknown"
