"""Attention: the reference meaning of flash attention and the seeds' multi-head layer.

``flash_attention(q, k, v; scale=None, mask=None, hard=False)`` with
``q`` (batch, n, d), ``k`` (batch, m, d), ``v`` (batch, m, dv) means
``softmax(q k^T * scale) v`` with ``scale`` defaulting to 1/sqrt(d). A 0/1 mask
(batch, n, m) blocks logits: by default (the seeds' convention) a blocked logit
is *replaced* by -1000.0; with ``hard=True`` a blocked weight is exactly 0 and a
row with no allowed key outputs 0 (and passes no gradient).

``multi_head_attention(x, wq, wk, wv, wo; num_heads, mask=None, use_flash=True)``
is the seeds' layer: Q = x Wq, K = x Wk, V = x Wv, split into heads, attention per
head with scale 1/sqrt(head_dim) and the seeds' mask convention (an (n, n) mask
shared by every head and batch entry), heads combined, then ``@ Wo``.
``use_flash`` picks the runtime path only; the meaning is the same.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import DomainError, ShapeError, fmt_shapes
from .attrs import check_int
from .registry import defspec


MASK_FILL = -1000.0  # the seeds' value for a blocked attention logit


# ---- attention ------------------------------------------------------------------------------

def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _causal_mask(mask, n, m):
    """``mask`` restricted to keys j <= query i (the top-left aligned lower triangle)."""
    tri = np.tril(np.ones((n, m), dtype=bool))
    return tri if mask is None else (np.asarray(mask) != 0) & tri


def attention_probs(q, k, *, scale, mask=None, hard=False):
    """Attention weights (..., n, m) of q (..., n, d) against k (..., m, d).

    ``mask`` (broadcasting to (..., n, m)) is 0/1: blocked logits are replaced by
    -1000.0, or with ``hard`` blocked weights are exactly 0 (all-blocked rows: 0).
    """
    s = np.einsum("...nd,...md->...nm", q, k) * scale
    if mask is None:
        return _softmax(s)
    keep = np.broadcast_to(np.asarray(mask) != 0, s.shape)
    if not hard:
        return _softmax(np.where(keep, s, MASK_FILL))
    m = np.where(keep, s, -np.inf).max(axis=-1, keepdims=True)
    e = np.where(keep, np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
    tot = e.sum(axis=-1, keepdims=True)
    return e / np.where(tot > 0, tot, 1.0)


def attention_vjp(g, q, k, v, *, scale, mask=None, hard=False):
    """(dq, dk, dv) of out = attention_probs(q, k) @ v for the cotangent g of out."""
    p = attention_probs(q, k, scale=scale, mask=mask, hard=hard)
    dv = np.einsum("...nm,...ne->...me", p, g)
    dp = np.einsum("...ne,...me->...nm", g, v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    if mask is not None:
        # A replaced logit is a constant: nothing flows back to q k^T through it.
        ds = np.where(np.broadcast_to(np.asarray(mask) != 0, ds.shape), ds, 0.0)
    dq = np.einsum("...nm,...md->...nd", ds, k) * scale
    dk = np.einsum("...nm,...nd->...md", ds, q) * scale
    return dq, dk, dv


def _check_scale(op, scale):
    if scale is not None and (not isinstance(scale, (int, float)) or isinstance(scale, bool)
                              or not math.isfinite(scale)):
        raise DomainError(f"{op}: scale must be a finite number or None, got {scale!r}")


def _flash_shape(q, k, v, *, scale=None, mask=None, hard=False, causal=False):
    """(*batch, n, dv) of q (*batch, n, d), k (*batch, m, d), v (*batch, m, dv): the seeds'
    (batch, n, d) layout, with any number (at least one) of batch axes, as PyTorch's SDPA takes them."""
    op = "flash_attention"
    q, k, v = tuple(q), tuple(k), tuple(v)
    if len(q) < 3 or len(k) != len(q) or len(v) != len(q):
        raise ShapeError(f"{op}: q, k, v must be (batch, n, d), (batch, m, d), (batch, m, dv) with the same "
                         f"batch axes; got {fmt_shapes(q, k, v)}")
    if q[:-2] != k[:-2] or q[:-2] != v[:-2]:
        raise ShapeError(f"{op}: batch sizes of q, k, v differ: {fmt_shapes(q, k, v)}")
    if q[-1] != k[-1]:
        raise ShapeError(f"{op}: head dims of q and k differ: {fmt_shapes(q, k)}")
    if k[-2] != v[-2]:
        raise ShapeError(f"{op}: key lengths of k and v differ: {fmt_shapes(k, v)}")
    if q[-1] < 1 or k[-2] < 1:
        raise ShapeError(f"{op}: need d >= 1 and at least one key, got {fmt_shapes(q, k, v)}")
    _check_scale(op, scale)
    if causal and not hard:
        raise DomainError(f"{op}: causal=True needs hard=True (exact masking)")
    if mask is not None and tuple(np.shape(mask)) != q[:-1] + (k[-2],):
        raise ShapeError(f"{op}: mask has shape {tuple(np.shape(mask))}, expected "
                         f"{q[:-1] + (k[-2],)} (batch, n, m)")
    return q[:-1] + (v[-1],)


def _scale_of(d, scale):
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def _fa_mask(q, k, mask, causal):
    return _causal_mask(mask, q.shape[-2], k.shape[-2]) if causal else mask


defspec("flash_attention",
        lambda q, k, v, *, scale=None, mask=None, hard=False, causal=False: attention_probs(
            q, k, scale=_scale_of(q.shape[-1], scale), mask=_fa_mask(q, k, mask, causal), hard=hard) @ v,
        lambda g, q, k, v, *, scale=None, mask=None, hard=False, causal=False: attention_vjp(
            g, q, k, v, scale=_scale_of(q.shape[-1], scale), mask=_fa_mask(q, k, mask, causal), hard=hard),
        _flash_shape, 3,
        why="O(n) memory: key tiles with an online softmax, where softmax(q k^T) v keeps the n x m weights")


def mha_dims(x, wq, wk, wv, wo, num_heads, mask=None, op="multi_head_attention"):
    """Check shapes; returns (d_model, head_dim). Shared with the runtime rule."""
    x, wq, wk, wv, wo = (tuple(s) for s in (x, wq, wk, wv, wo))
    check_int(op, "num_heads", num_heads, 1)
    if len(x) not in (2, 3):
        raise ShapeError(f"{op}: x must be (n, d_model) or (batch, n, d_model), got {x}")
    d_model = x[-1]
    if len(wq) != 2 or wq[0] != d_model or wk != wq or wv != wq:
        raise ShapeError(f"{op}: wq, wk, wv must all be (d_model, heads*head_dim) = ({d_model}, H*hd); "
                         f"got {fmt_shapes(wq, wk, wv)} for x {x}")
    hd_total = wq[1]
    if hd_total % num_heads or hd_total == 0:
        raise ShapeError(f"{op}: projection width {hd_total} of wq {wq} is not a positive multiple of "
                         f"num_heads {num_heads}")
    if wo != (hd_total, d_model):
        raise ShapeError(f"{op}: wo has shape {wo}, expected ({hd_total}, {d_model}) (heads*head_dim, d_model)")
    n = x[-2]
    if n < 1:
        raise ShapeError(f"{op}: sequence length must be >= 1, got x {x}")
    if mask is not None and tuple(np.shape(mask)) != (n, n):
        raise ShapeError(f"{op}: mask has shape {tuple(np.shape(mask))}, expected ({n}, {n})")
    return d_model, hd_total // num_heads


def _split(t, h):
    """(B, n, H*hd) -> (B, H, n, hd)."""
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(0, 2, 1, 3)


def _merge(t):
    """(B, H, n, hd) -> (B, n, H*hd)."""
    b, h, n, hd = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * hd)


def _mha(x, wq, wk, wv, wo, *, num_heads, mask=None, use_flash=True):
    X = x if x.ndim == 3 else x[None]
    hd = wq.shape[1] // num_heads
    q, k, v = (_split(X @ w, num_heads) for w in (wq, wk, wv))
    o = attention_probs(q, k, scale=1.0 / math.sqrt(hd), mask=mask) @ v
    y = _merge(o) @ wo
    return y if x.ndim == 3 else y[0]


def _mha_vjp(g, x, wq, wk, wv, wo, *, num_heads, mask=None, use_flash=True):
    X = x if x.ndim == 3 else x[None]
    G = g if x.ndim == 3 else g[None]
    hd = wq.shape[1] // num_heads
    q, k, v = (_split(X @ w, num_heads) for w in (wq, wk, wv))
    scale = 1.0 / math.sqrt(hd)
    o = _merge(attention_probs(q, k, scale=scale, mask=mask) @ v)
    dwo = np.einsum("bnc,bnd->cd", o, G)
    do = _split(G @ wo.T, num_heads)
    dq, dk, dv = (_merge(t) for t in attention_vjp(do, q, k, v, scale=scale, mask=mask))
    dws = [np.einsum("bni,bnc->ic", X, t) for t in (dq, dk, dv)]
    dx = dq @ wq.T + dk @ wk.T + dv @ wv.T
    return (dx if x.ndim == 3 else dx[0]), dws[0], dws[1], dws[2], dwo


defspec("multi_head_attention", _mha, _mha_vjp,
        lambda x, wq, wk, wv, wo, *, num_heads, mask=None, use_flash=True: (
            mha_dims(x, wq, wk, wv, wo, num_heads, mask), tuple(x))[1], 5,
        why="the seeds' layer as one op: the head split and merge run inside it, not as ten ops")
