"""Tiny random-weight models for profiling examples and tests (factories: call with no arguments).

| factory        | input (perf profile --input)  | what it is                                          |
|----------------|-------------------------------|-----------------------------------------------------|
| `mlp()`        | `32x256` (batch x 256)        | Linear 256->1024, GELU, Linear 1024->256            |
| `convnet()`    | `8x3x32x32` (NCHW)            | 2 conv3x3+ReLU+maxpool blocks, global pool, 10-way  |
| `tiny_llama()` | `1x32:int64` (batch x tokens) | Llama-style decoder: vocab 256, dim 64, 2 layers,   |
|                |                               | 4 heads, RMSNorm, causal SDPA (no rotary), SwiGLU   |

    perf profile --model examples.models:tiny_llama --input 1x32:int64 --steps 3

The names are stable: tests and other examples import them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def mlp(dim: int = 256, hidden: int = 1024) -> nn.Module:
    """Input (batch, dim) float; output (batch, dim)."""
    return nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))


def convnet(classes: int = 10) -> nn.Module:
    """Input (batch, 3, H, W) float with H, W divisible by 4; output (batch, classes)."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, classes),
    )


class Attention(nn.Module):
    """Multi-head causal self-attention through F.scaled_dot_product_attention (no rotary)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)  # 3 x (b, h, t, d/h)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    """Llama's MLP: down(silu(gate(x)) * up(x))."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """Pre-norm decoder block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.attn_norm, self.attn = nn.RMSNorm(dim), Attention(dim, heads)
        self.mlp_norm, self.mlp = nn.RMSNorm(dim), SwiGLU(dim, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class TinyLlama(nn.Module):
    """Token ids (batch, seq) int64 < vocab -> logits (batch, seq, vocab)."""

    def __init__(self, vocab: int = 256, dim: int = 64, layers: int = 2, heads: int = 4, hidden: int = 176) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, hidden) for _ in range(layers))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def tiny_llama() -> nn.Module:
    """Input (batch, seq) int64 token ids below 256; output logits (batch, seq, 256).
    hidden 176 = Llama's 8/3 * dim (170.7) rounded up to a multiple of 16."""
    return TinyLlama()
