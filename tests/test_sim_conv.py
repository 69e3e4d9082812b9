"""Convolutions on the simulated accelerator run as their im2col GEMM (issue 13: "convolutions
through their im2col GEMM shape"): their FLOPs equal torch.utils.flop_counter's, grouped and
transposed ones included, and they run on the matrix unit. Before, the simulator had no GEMM for
a convolution and counted one FLOP per output element on the vector unit (the stem conv of the
tiny ResNet: 8,192 instead of 2 x 8,192 x 27 = 442,368)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from accelerator.compiler.pipeline import compile_model  # noqa: E402
from accelerator.hardware import load_accel  # noqa: E402
from accelerator.sim.run import simulate  # noqa: E402
from accelerator.workloads.resnet import tiny_resnet  # noqa: E402


class Convs(nn.Module):
    """A plain, a grouped (4 groups) and a transposed convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.plain = nn.Conv2d(8, 16, 3, padding=1)
        self.grouped = nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)

    def forward(self, x):
        return self.up(self.grouped(self.plain(x)))


def _conv_flops(model, xs) -> int:
    with FlopCounterMode(display=False) as fc:
        model(*xs)
    return sum(v for k, v in fc.get_flop_counts()["Global"].items() if "convolution" in str(k))


@pytest.mark.parametrize("case", ["resnet", "convs"])
def test_convolution_flops_are_the_flop_counters(case):
    if case == "resnet":
        model, xs = tiny_resnet()
    else:
        torch.manual_seed(0)
        model, xs = Convs().eval(), (torch.randn(2, 8, 8, 8),)
    hw = load_accel("datacenter-npu")
    run = simulate(compile_model(model, xs, hw, "fp32").program, hw)
    conv = [s for s in run.kernels if s.family == "conv" and s.chip == 0]
    assert conv and all(s.unit == "matrix" and s.matrix_s > 0 for s in conv)
    assert sum(s.flops for s in conv) == _conv_flops(model, xs)
    if case == "convs":
        # by hand, batch 2 on 8 x 8 pixels: plain 2 x (2*64) x 16 x (8*9) = 294,912; grouped
        # 2 x (2*64) x 16 x (4*9) = 147,456; transposed (input pixels) 2 x (2*64) x (8*4) x 16
        # = 131,072
        assert sorted(s.flops for s in conv) == [131_072, 147_456, 294_912]
