"""A two-layer MLP (Linear -> GELU -> Linear): the smallest model with a matmul, a bias and an
elementwise epilogue."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in: int = 32, d_hidden: int = 64, d_out: int = 16):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def tiny_mlp(batch: int = 4, seed: int = 0) -> tuple[MLP, tuple[torch.Tensor, ...]]:
    """The test MLP (32 -> 64 -> 16) and an input of `batch` rows, weights from `seed`."""
    torch.manual_seed(seed)
    model = MLP().eval()
    return model, (torch.randn(batch, 32),)
