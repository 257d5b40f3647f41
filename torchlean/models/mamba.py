"""A Mamba-style selective state-space language model (Gu & Dao, 2023)."""

from __future__ import annotations

import math

import numpy as np

from .. import nn
from ..nn import functional_layers as FL
from ..nn import init
from ..nn.layers import LayerNorm
from ..nn.pooling import Conv1d
from ..nn.parameter import Parameter
from ..ops import rand
from ..tensor import Tensor, no_grad


class MambaBlock(nn.Module):
    """The selective SSM mixer of Mamba, with parameter names of ``mamba_simple.Mamba``.

    ``in_proj`` splits each token into a stream ``x`` and a gate ``z`` (``d_inner`` each);
    ``x`` passes a causal depthwise convolution (``conv1d``, width ``d_conv``) and SiLU.
    From ``x`` the block computes, per token, a step ``dt = softplus(dt_proj(x_proj_dt))``
    and input and output vectors ``B``, ``C`` (``d_state`` each) — this is what makes the
    scan *selective*. With ``A = -exp(A_log)`` (``(d_inner, d_state)``) every channel ``d``
    and state ``n`` follows

        h[t, d, n] = exp(dt[t, d] A[d, n]) * h[t-1, d, n] + dt[t, d] B[t, n] * x[t, d]

    — one token-dependent diagonal recurrence over ``d_inner * d_state`` states, run by
    ``F.selective_scan`` with coefficients of the input's shape (op ``selective_scan_var``).
    Then ``y[t, d] = sum_n C[t, n] h[t, d, n] + D[d] x[t, d]``, gated by ``silu(z)`` and
    projected back by ``out_proj``.
    """

    def __init__(self, d_model: int, d_state: int = 8, d_conv: int = 4, expand: int = 2, dt_rank=None):
        super().__init__()
        d_inner = expand * d_model
        dt_rank = dt_rank or math.ceil(d_model / 16)
        self.d_inner, self.d_state, self.dt_rank, self.d_conv = d_inner, d_state, dt_rank, d_conv
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv1d = Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(d_inner, dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(dt_rank, d_inner)
        # Mamba's dt initialisation: dt ~ logUniform(1e-3, 1e-1), bias = softplus^{-1}(dt).
        lo, hi = math.log(1e-3), math.log(1e-1)
        dt_v = np.exp(lo + (hi - lo) * rand(d_inner).numpy().astype(np.float64))
        with no_grad():
            self.dt_proj.bias._value[...] = (dt_v + np.log(-np.expm1(-dt_v))).astype(np.float32)
        a = np.tile(np.arange(1, d_state + 1, dtype=np.float32), (d_inner, 1))
        self.A_log = Parameter(Tensor(np.log(a)))
        self.D = Parameter(Tensor(np.ones(d_inner, dtype=np.float32)))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def forward(self, u):
        b, t, _ = u.shape
        di, ds = self.d_inner, self.d_state
        xz = self.in_proj(u)
        x, z = xz[..., :di], xz[..., di:]
        x = self.conv1d(x.transpose(1, 2))[..., :t].transpose(1, 2)   # causal: keep the first t outputs
        x = nn.F.silu(x)
        dbc = self.x_proj(x)
        dt = nn.F.softplus(self.dt_proj(dbc[..., :self.dt_rank]))     # (B, T, di)
        Bm = dbc[..., self.dt_rank:self.dt_rank + ds]                  # (B, T, ds)
        Cm = dbc[..., self.dt_rank + ds:]                              # (B, T, ds)
        A = -self.A_log.exp()                                          # (di, ds)
        dA = (dt.unsqueeze(-1) * A).exp()                              # (B, T, di, ds)
        dB = dt.unsqueeze(-1) * Bm.unsqueeze(2)                        # (B, T, di, ds)
        xs = x.unsqueeze(-1).expand(b, t, di, ds)
        shape = (b, t, di * ds)
        h = FL.selective_scan(xs.reshape(shape), dA.reshape(shape), dB.reshape(shape))
        y = (h.reshape(b, t, di, ds) * Cm.unsqueeze(2)).sum(dim=-1) + x * self.D
        return self.out_proj(y * nn.F.silu(z))


class ResidualBlock(nn.Module):
    """``x + mixer(norm(x))`` with a LayerNorm."""

    def __init__(self, d_model: int, **kw):
        super().__init__()
        self.norm = LayerNorm(d_model)
        self.mixer = MambaBlock(d_model, **kw)

    def forward(self, x):
        return x + self.mixer(self.norm(x))


class MambaLM(nn.Module):
    """Token embedding, ``n_layer`` residual Mamba blocks, final LayerNorm, tied LM head.

    ``forward(idx)``: int64 ids ``(B, T)`` -> logits ``(B, T, vocab_size)``; any ``T``
    (the model is causal by construction: the convolution and the scan only look back).

        >>> import torchlean as tl
        >>> _ = tl.manual_seed(0)
        >>> MambaLM(vocab_size=20, d_model=16, n_layer=1)(tl.zeros(2, 8, dtype=tl.int64)).shape
        torchlean.Size([2, 8, 20])
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_layer: int = 2, d_state: int = 8,
                 d_conv: int = 4, expand: int = 2, tie_weights: bool = True):
        super().__init__()
        self.config = {"vocab_size": int(vocab_size), "d_model": int(d_model), "n_layer": int(n_layer),
                       "d_state": int(d_state), "d_conv": int(d_conv), "expand": int(expand),
                       "tie_weights": bool(tie_weights)}
        self.embedding = nn.Embedding(vocab_size, d_model)
        init.normal_(self.embedding.weight, std=0.02)
        self.layers = nn.ModuleList([ResidualBlock(d_model, d_state=d_state, d_conv=d_conv, expand=expand)
                                     for _ in range(n_layer)])
        self.norm_f = LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.lm_head.weight = self.embedding.weight

    def forward(self, idx):
        x = self.embedding(idx)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm_f(x))
