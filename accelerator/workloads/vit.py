"""A ViT-style encoder (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words", equations 1-4):
patch embedding by a strided convolution, a class token and learned position embeddings,
pre-norm blocks of multi-head self-attention (through scaled_dot_product_attention) and a
GELU MLP, LayerNorm, and a linear head on the class token."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.fc2 = nn.Linear(mlp, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        x = x + self.proj(o.transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class TinyViT(nn.Module):
    def __init__(
        self, image: int = 16, patch: int = 4, dim: int = 32, depth: int = 2, heads: int = 4, classes: int = 10
    ):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(EncoderBlock(dim, heads, 4 * dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def tiny_vit(batch: int = 2, seed: int = 0):
    """The test encoder (16x16 images, 4x4 patches: 16 tokens + class token, dim 32, 2 blocks)."""
    torch.manual_seed(seed)
    return TinyViT().eval(), (torch.randn(batch, 3, 16, 16),)
