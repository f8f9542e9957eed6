"""The decoder-only model, written to match what Tangram computes for GGUF arch "qwen3".

Qwen3 was chosen over llama because the engine's qwen3 path uses NeoX ("rotate halves") RoPE,
which needs no weight permutation on export, and per-head QK-RMSNorm, which keeps attention
logits bounded and makes a small model train stably at a high learning rate.
Every op here mirrors src/model/model.cpp: RMSNorm (x * w / rms), q/k head norm before RoPE,
grouped-query attention with scale 1/sqrt(head_dim), SwiGLU MLP, tied output embedding.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    vocab: int = 4096
    n_layer: int = 8
    d_model: int = 128
    n_head: int = 8
    n_kv_head: int = 4
    head_dim: int = 64
    d_ff: int = 384
    context: int = 2048
    rope_base: float = 10000.0
    eps: float = 1e-6

    def to_dict(self):
        return asdict(self)


# Named shapes; "main" is the one the long run trains (chosen from measured speed, see README).
PRESETS = {
    "tiny": ModelConfig(n_layer=2, d_model=64, n_head=4, n_kv_head=2, head_dim=32, d_ff=128,
                        context=256),
    "main": ModelConfig(),
}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(cfg, length, device=None):
    """cos/sin of shape (length, head_dim/2), frequencies base^(-2i/d) as in src/model/rope.cpp."""
    half = cfg.head_dim // 2
    inv = cfg.rope_base ** (-torch.arange(half, dtype=torch.float64) * 2.0 / cfg.head_dim)
    ang = torch.arange(length, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float().to(device), ang.sin().float().to(device)


def apply_rope(x, cos, sin):
    """NeoX layout: element i pairs with element i + d/2. x: (B, T, heads, d)."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wq = nn.Linear(cfg.d_model, cfg.n_head * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.d_model, cfg.n_kv_head * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.d_model, cfg.n_kv_head * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_head * cfg.head_dim, cfg.d_model, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.eps)

    def forward(self, x, cos, sin, mask):
        cfg = self.cfg
        B, T, _ = x.shape
        H, KV, D = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        G = H // KV
        q = apply_rope(self.q_norm(self.wq(x).view(B, T, H, D)), cos, sin)
        k = apply_rope(self.k_norm(self.wk(x).view(B, T, KV, D)), cos, sin)
        v = self.wv(x).view(B, T, KV, D)
        # Query heads of one KV group are stacked along the row axis so K and V are used as
        # they are (no repeat): one (G*T x D)(D x T) product per KV head.
        q = q.view(B, T, KV, G, D).permute(0, 2, 3, 1, 4).reshape(B, KV, G * T, D)
        k = k.permute(0, 2, 3, 1)  # B, KV, D, T
        v = v.permute(0, 2, 1, 3)  # B, KV, T, D
        # Scale and causal mask are fused into one baddbmm (one pass over the T x T scores
        # instead of three: elementwise passes dominate at T = 2048 on one core).
        BK = B * KV
        att = torch.baddbmm(mask.expand(BK, G, T, T).reshape(BK, G * T, T),
                            q.reshape(BK, G * T, D), k.reshape(BK, D, T),
                            alpha=1.0 / math.sqrt(D))
        att = torch.softmax(att, dim=-1)
        y = torch.bmm(att, v.reshape(BK, T, D)).view(B, KV, G * T, D)
        y = y.view(B, KV, G, T, D).permute(0, 3, 1, 2, 4).reshape(B, T, H * D)
        return self.wo(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.d_model, cfg.eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask)
        return x + self.mlp(self.ffn_norm(x))


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.norm = RMSNorm(cfg.d_model, cfg.eps)
        self._init_weights()

    def _init_weights(self):
        # GPT-2 style: small normal weights, residual outputs scaled down with depth so the
        # residual stream does not grow with the number of layers.
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if name.endswith("wo.weight") or name.endswith("down.weight"):
                    std = 0.02 / math.sqrt(2 * self.cfg.n_layer)
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, ids):
        """ids (B, T) -> logits (B, T, vocab); the output matrix is the embedding (tied)."""
        B, T = ids.shape
        cos, sin = rope_tables(self.cfg, T, ids.device)
        mask = torch.full((T, T), float("-inf"), device=ids.device).triu(1)
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x, cos, sin, mask)
        x = self.norm(x)
        return F.linear(x, self.embed.weight)

    def n_params(self):
        return sum(p.numel() for p in self.parameters())
