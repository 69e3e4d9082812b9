"""Tiny models for the IREE tests (tests/test_iree_*.py) and benchmarks/bench_iree.py; their
dispatches must point back into this file."""

from __future__ import annotations

import torch
from torch import nn

#: MLP sizes: a batch of B rows of width D_IN -> D_HID -> D_OUT
B, D_IN, D_HID, D_OUT = 16, 64, 128, 32
#: attention block sizes: batch, sequence, model width, heads
AB, AS, AD, AH = 2, 8, 32, 2


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(D_IN, D_HID)
        self.fc2 = nn.Linear(D_HID, D_OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        return self.fc2(h)


class AttentionBlock(nn.Module):
    """Self-attention written out: q/k/v projections, scores, softmax, weighted values, output."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(AD, AD)
        self.k = nn.Linear(AD, AD)
        self.v = nn.Linear(AD, AD)
        self.o = nn.Linear(AD, AD)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        hd = d // AH
        q = self.q(x).view(b, s, AH, hd).transpose(1, 2)
        k = self.k(x).view(b, s, AH, hd).transpose(1, 2)
        v = self.v(x).view(b, s, AH, hd).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / hd**0.5
        attn = torch.softmax(scores, dim=-1)
        y = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, d)
        return self.o(y)


class SdpaBlock(nn.Module):
    """The same block with torch's fused attention (scaled_dot_product_attention): IREE forms one
    iree_linalg_ext.attention op from it."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(AD, 3 * AD)
        self.o = nn.Linear(AD, AD)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, AH, d // AH).permute(2, 0, 3, 1, 4)
        y = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.o(y.transpose(1, 2).reshape(b, s, d))


def mlp() -> nn.Module:
    return MLP()


def attention() -> nn.Module:
    return AttentionBlock()


def sdpa() -> nn.Module:
    return SdpaBlock()


class Unexportable(nn.Module):
    """Data-dependent control flow on a tensor's value: torch.export cannot trace it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x - 1


def unexportable() -> nn.Module:
    return Unexportable()
