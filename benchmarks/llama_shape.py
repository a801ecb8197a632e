"""A Llama-style decoder of any size, written here to be planned: RMSNorm, rotary positions,
grouped-query attention through ``scaled_dot_product_attention``, a SwiGLU MLP, an untied head.

Shapes from Meta's model cards (Llama 3.1 8B: width 4096, 32 layers, 32 query and 8 key/value heads,
MLP 14,336, vocabulary 128,256; 70B: 8192, 80, 64/8, 28,672). Only the shapes and the ops matter to a
plan (it runs under fake tensors): the weights are never trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaShape:
    """Width, depth, heads, MLP width, vocabulary and sequence length of a Llama-style model."""

    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab: int
    seq_len: int


LLAMA_8B = LlamaShape(4096, 32, 32, 8, 14336, 128256, 8192)
LLAMA_70B = LlamaShape(8192, 80, 64, 8, 28672, 128256, 8192)


class RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * self.weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions on (batch, heads, seq, head_dim), halves rotated, in ``x``'s dtype."""
    a, b = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # as Llama's own code: fp32 tables, bf16 activations
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Block(nn.Module):
    def __init__(self, s: LlamaShape) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = s.n_heads, s.n_kv_heads, s.d_model // s.n_heads
        self.attn_norm, self.mlp_norm = RMSNorm(s.d_model), RMSNorm(s.d_model)
        self.wq = nn.Linear(s.d_model, s.d_model, bias=False)
        self.wkv = nn.Linear(s.d_model, 2 * s.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(s.d_model, s.d_model, bias=False)
        self.w13 = nn.Linear(s.d_model, 2 * s.d_ff, bias=False)
        self.w2 = nn.Linear(s.d_ff, s.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.wkv(h).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, -1))
        gate, up = self.w13(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.w2(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, s: LlamaShape) -> None:
        super().__init__()
        self.embed = nn.Embedding(s.vocab, s.d_model)
        self.layers = nn.ModuleList(Block(s) for _ in range(s.n_layers))
        self.norm = RMSNorm(s.d_model)
        self.head = nn.Linear(s.d_model, s.vocab, bias=False)
        half = s.d_model // s.n_heads // 2
        frequencies = 500000.0 ** (-torch.arange(half).float() / half)
        angles = torch.outer(torch.arange(s.seq_len).float(), frequencies)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.head(self.norm(x))


def llama_workload(shape: LlamaShape) -> tuple[Any, Any, Any, Any, int]:
    """(model factory, batch_fn, loss_fn, optimizer_fn, tokens per sample), as the plan takes them."""

    def batch(b: int) -> tuple[tuple[Any, ...], Any]:
        tokens = torch.randint(0, shape.vocab, (b, shape.seq_len))
        return (tokens,), tokens

    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), target.reshape(-1))

    def adamw(params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.AdamW(params, lr=3e-4, foreach=True)

    return (lambda: Llama(shape)), batch, loss, adamw, shape.seq_len
