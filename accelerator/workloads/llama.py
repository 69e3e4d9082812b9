"""A Llama-style decoder (RMSNorm, rotary embedding, grouped-query attention through
`scaled_dot_product_attention`, SwiGLU MLP) with a KV cache held in buffers and updated in place
with `index_copy_` at the positions being written, so one model serves prefill (S tokens at
positions 0..S-1) and decode (one token at position P).

Shapes follow Llama 2/3 (Touvron et al. 2023, "Llama 2", section 2.2 and the reference code of
github.com/meta-llama/llama): head_dim = dim / n_heads, rotary over pairs (rotate-half form),
hidden = multiple_of-rounded 8/3 * dim for SwiGLU."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 128
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2  # grouped-query attention: 2 query heads share each KV head
    hidden: int = 176  # SwiGLU width: 8/3 * 64 = 170.7, rounded up to a multiple of 16
    max_seq: int = 32  # KV-cache length
    batch: int = 1
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.q_proj = nn.Linear(cfg.dim, cfg.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * hd, cfg.dim, bias=False)
        cache = (cfg.batch, cfg.n_kv_heads, cfg.max_seq, hd)
        self.register_buffer("k_cache", torch.zeros(cache), persistent=False)
        self.register_buffer("v_cache", torch.zeros(cache), persistent=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor):
        b, s, _ = x.shape
        hd = self.cfg.head_dim
        q = self.q_proj(x).view(b, s, self.cfg.n_heads, hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.cfg.n_kv_heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.cfg.n_kv_heads, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # The cache update: write S new rows at `pos`, in place (no copy of the whole cache).
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        o = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask, enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, -1))


class MLPBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.up_proj = nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.down_proj = nn.Linear(cfg.hidden, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.input_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.post_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.mlp = MLPBlock(cfg)

    def forward(self, x, cos, sin, pos, mask):
        h = x + self.attn(self.input_norm(x), cos, sin, pos, mask)
        return h + self.mlp(self.post_norm(h))


class TinyLlama(nn.Module):
    """Tokens (batch, S) int64 and their positions (S,) int64 -> logits (batch, S, vocab)."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        hd = cfg.head_dim
        inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2).float() / hd)
        angles = torch.outer(torch.arange(cfg.max_seq).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)  # rotate-half layout: (max_seq, head_dim)
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)
        self.register_buffer("positions", torch.arange(cfg.max_seq), persistent=False)

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        cos, sin = self.rope_cos[pos], self.rope_sin[pos]
        # Causal over the cache: query at position p sees cache rows 0..p.
        mask = self.positions[None, :] <= pos[:, None]
        for layer in self.layers:
            x = layer(x, cos, sin, pos, mask)
        return self.lm_head(self.norm(x))


def tiny_llama(prompt: int = 8, seed: int = 0, cfg: LlamaConfig | None = None):
    """The test decoder and a prefill input of `prompt` tokens at positions 0..prompt-1."""
    torch.manual_seed(seed)
    cfg = cfg or LlamaConfig()
    model = TinyLlama(cfg).eval()
    tokens = torch.randint(0, cfg.vocab, (cfg.batch, prompt))
    return model, (tokens, torch.arange(prompt))


#: Llama-2-7B (Touvron et al. 2023, "Llama 2", table 1; the released params.json / HF config:
#: dim 4096, 32 layers, 32 heads, no GQA, SwiGLU 11008, vocab 32000, context 4096).
LLAMA2_7B = LlamaConfig(vocab=32000, dim=4096, n_layers=32, n_heads=32, n_kv_heads=32, hidden=11008, max_seq=4096)
#: Llama-3-8B (Meta's released params.json / HF config: dim 4096, 32 layers, 32 heads, 8 KV heads,
#: intermediate 14336 = 1024-rounded 1.3 x 8/3 x 4096, vocab 128256, context 8192, rope theta 500000).
LLAMA3_8B = LlamaConfig(
    vocab=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, hidden=14336, max_seq=8192, rope_theta=500000.0
)


def meta_llama(cfg: LlamaConfig, prompt: int = 128):
    """A decoder of `cfg` with its weights on the meta device (compile only: never materialised,
    so no functional check) and a prefill input of `prompt` tokens."""
    with torch.device("meta"):
        model = TinyLlama(cfg).eval()
        return model, (torch.zeros(cfg.batch, prompt, dtype=torch.long), torch.arange(prompt))


def llama2_7b():
    return meta_llama(LLAMA2_7B)


def llama3_8b():
    return meta_llama(LLAMA3_8B)


#: The workloads `perf simulate --prompt/--decode` serves: name -> the decoder's config (batch
#: and cache length are set per run).
SERVING_CONFIGS = {"llama": LlamaConfig(), "llama2-7b": LLAMA2_7B, "llama3-8b": LLAMA3_8B}


def serving_model(name: str, batch: int, max_seq: int) -> TinyLlama:
    """The decoder `name` (a SERVING_CONFIGS key) for `batch` sequences with a KV cache of
    `max_seq` positions, on the meta device (shapes only: the simulator times, it does not compute)."""
    from dataclasses import replace

    cfg = replace(SERVING_CONFIGS[name], batch=batch, max_seq=max_seq)
    with torch.device("meta"):
        return TinyLlama(cfg).eval()
