"""Tiny models for the deployment tests (tests/test_deploy_*.py): an MLP and its planted fault.

`fragile`: the same function as `mlp` with layer `mid` made numerically fragile. Its output
channel 0 is scaled up by OUTLIER inside the layer (weight row and bias times OUTLIER) and scaled
back down at its end (a Mul by 1/OUTLIER on that channel), so in exact arithmetic the model is
unchanged. int8 quantizes the activation between the Gemm and the Mul per tensor: the scale is
set by the outlier channel (max |x| / 127, ~OUTLIER times the others' range), so every other
channel rounds to a level or two or to zero, and `mid`'s output loses all but channel 0.
"""

from __future__ import annotations

import torch
from torch import nn

OUTLIER = 1000.0
IN, HIDDEN, OUT, BATCH = 16, 32, 8, 4


class ScaledLinear(nn.Module):
    """y = (x W^T + b) * scale, per output channel; one leaf layer (a Gemm and a Mul in ONNX)."""

    def __init__(self, outlier: float):
        super().__init__()
        fc = nn.Linear(HIDDEN, HIDDEN)
        scale = torch.ones(HIDDEN)
        with torch.no_grad():
            fc.weight[0] *= outlier
            fc.bias[0] *= outlier
        scale[0] = 1.0 / outlier
        self.weight, self.bias = fc.weight, fc.bias
        self.register_buffer("scale", scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.weight, self.bias) * self.scale


class MLP(nn.Module):
    def __init__(self, outlier: float = 1.0):
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.act1 = nn.ReLU()
        self.mid = ScaledLinear(outlier)
        self.fc2 = nn.Linear(HIDDEN, OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.mid(self.act1(self.fc1(x))))


def mlp() -> MLP:
    torch.manual_seed(0)
    return MLP().eval()


def fragile() -> MLP:
    torch.manual_seed(0)  # the same weights as mlp() before the outlier is planted
    return MLP(OUTLIER).eval()


class Unexportable(nn.Module):
    """Data-dependent control flow on a tensor's value: torch.export cannot trace it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum().item() > 0:
            return x.nonzero().float()
        return x


def unexportable() -> Unexportable:
    return Unexportable()


class ConvNet(nn.Module):
    """Conv (stride 2, padding 1) -> ReLU -> flatten -> Linear, for the ONNX Runtime trace tests."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.act = nn.ReLU()
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.act(self.conv(x)).flatten(1))


def convnet() -> ConvNet:
    torch.manual_seed(0)
    return ConvNet().eval()


class Determinant(nn.Module):
    """A Linear then torch.linalg.det (ONNX Det): the QNN HTP has no Det op (the QNN EP's operator
    list, onnxruntime docs/execution_providers/QNN-ExecutionProvider.md), so qnn-sim refuses it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.det(self.fc(x))


def determinant() -> Determinant:
    torch.manual_seed(0)
    return Determinant().eval()


def top1_disagreement(reference, candidate) -> float:
    """A task metric for `perf gate --accuracy --metric`: the share of rows whose argmax differs."""
    import numpy as np

    return float(np.mean(reference.argmax(-1) != candidate.argmax(-1)))
