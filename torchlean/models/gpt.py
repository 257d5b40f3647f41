"""A decoder-only transformer language model (GPT-2 layout, nanoGPT names)."""

from __future__ import annotations

import math

import numpy as np

from .. import nn
from ..errors import ShapeError
from ..nn import init
from ..nn.layers import LayerNorm


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: ``c_attn`` (E -> 3E), SDPA with ``is_causal=True``, ``c_proj``."""

    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        if n_embd % n_head:
            raise ShapeError(f"CausalSelfAttention: n_embd {n_embd} is not a multiple of n_head {n_head}")
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        b, t, e = x.shape
        h = self.n_head
        qkv = self.c_attn(x).reshape(b, t, 3, h, e // h).permute(2, 0, 3, 1, 4)   # (3, B, H, T, hd)
        y = nn.functional.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, e))


class MLPBlock(nn.Module):
    """``c_fc`` (E -> 4E), GELU, ``c_proj`` (4E -> E)."""

    def __init__(self, n_embd: int):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(nn.F.gelu(self.c_fc(x)))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = LayerNorm(n_embd)
        self.mlp = MLPBlock(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Token + position embeddings, ``n_layer`` pre-norm blocks, final LayerNorm, LM head.

    ``forward(idx)`` takes int64 token ids ``(B, T)`` with ``T <= block_size`` and
    returns logits ``(B, T, vocab_size)``. With ``tie_weights=True`` (default) the LM
    head shares the token embedding matrix (``lm_head.weight is transformer.wte.weight``).
    Initialization is GPT-2's: N(0, 0.02) weights, zero biases, and the residual
    projections scaled by ``1/sqrt(2 n_layer)``. Names follow nanoGPT
    (``transformer.wte``, ``transformer.h.0.attn.c_attn``, ``lm_head``).

        >>> import torchlean as tl
        >>> _ = tl.manual_seed(0)
        >>> GPT(vocab_size=20, block_size=8, n_layer=1, n_head=2, n_embd=16)(tl.zeros(2, 8, dtype=tl.int64)).shape
        torchlean.Size([2, 8, 20])
    """

    def __init__(self, vocab_size: int, block_size: int = 64, n_layer: int = 2, n_head: int = 4,
                 n_embd: int = 64, tie_weights: bool = True):
        super().__init__()
        self.config = {"vocab_size": int(vocab_size), "block_size": int(block_size), "n_layer": int(n_layer),
                       "n_head": int(n_head), "n_embd": int(n_embd), "tie_weights": bool(tie_weights)}
        self.block_size = int(block_size)
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(vocab_size, n_embd),
            "wpe": nn.Embedding(block_size, n_embd),
            "h": nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
            "ln_f": LayerNorm(n_embd),
        })
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                init.zeros_(p)
            elif p.ndim == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                init.normal_(p, std=std)
        if tie_weights:
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, idx):
        t = idx.shape[-1]
        if t > self.block_size:
            raise ShapeError(f"GPT: sequence of {t} tokens is longer than block_size {self.block_size}")
        x = self.transformer.wte(idx) + self.transformer.wpe(np.arange(t, dtype=np.int64))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))
