"""Runtime rules of the attention family (meaning: :mod:`torchlean.spec.attention`).

Leading axes are folded into the kernels' batch axis with reshapes (views of row-major values)."""

from __future__ import annotations

import math

import numpy as np

from ...spec.attention import MASK_FILL
from .registry import defrule, pick


# ---- attention ------------------------------------------------------------------------------

def _fa_fwd(K, q, k, v, *, scale=None, mask=None, hard=False, causal=False):
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    lead, n, m_ = q.shape[:-2], q.shape[-2], k.shape[-2]
    if len(lead) != 1:  # the kernels take one batch axis: fold the others into it (views)
        B = math.prod(lead)
        q = K.ascontiguous(q).reshape(B, n, q.shape[-1])
        k = K.ascontiguous(k).reshape(B, m_, k.shape[-1])
        v = K.ascontiguous(v).reshape(B, m_, v.shape[-1])
        if mask is not None:
            mask = mask.reshape(B, n, m_)
    m = None if mask is None else K.bool_mask(mask, np.shape(mask))
    out, lse = K.flash_attention_fwd(q, k, v, m, sc, bool(hard), bool(causal))
    return out.reshape(lead + out.shape[-2:]), (q, k, v, m, out, lse, sc, bool(hard), bool(causal), lead)


def _fa_bwd(K, s, g, needs):
    q, k, v, m, out, lse, sc, hard, causal, lead = s
    if len(lead) != 1:
        g = K.ascontiguous(g).reshape(out.shape)
    grads = K.flash_attention_bwd(q, k, v, m, out, lse, g, sc, hard, causal)
    if len(lead) != 1:
        grads = tuple(None if t is None else t.reshape(lead + t.shape[-2:]) for t in grads)
    return pick(needs, *grads)


defrule("flash_attention", _fa_fwd, _fa_bwd)


def _swap(K, t):
    """The last two axes of ``t`` swapped (a contiguous copy)."""
    return K.swap_adjacent_at_depth(t, t.shape, t.ndim - 2)


def _swap12(K, t, dims):
    """``t`` viewed as ``dims`` (4 axes) with axes 1 and 2 swapped (a contiguous copy)."""
    return K.swap_adjacent_at_depth(t, dims, 1)


def _mha_fwd(K, x, wq, wk, wv, wo, *, num_heads, mask=None, use_flash=True):
    H = num_heads
    d_model, width = wq.shape
    hd = width // H
    B, n = (x.shape[0], x.shape[1]) if x.ndim == 3 else (1, x.shape[0])
    x2 = x.reshape(B * n, d_model)

    def heads(t):  # (B*n, H*hd) -> (B*H, n, hd)
        return _swap12(K, t, (B, n, H, hd)).reshape(B * H, n, hd)

    q, k, v = heads(K.matmul(x2, wq)), heads(K.matmul(x2, wk)), heads(K.matmul(x2, wv))
    mb = None
    if mask is not None:
        mb = K.ascontiguous(K.bool_mask(mask, (B * H, n, n)))
    scale = 1.0 / math.sqrt(hd)
    if use_flash:
        o, aux = K.flash_attention_fwd(q, k, v, mb, scale, False, False)
    else:
        s = K.scale(K.matmul(q, _swap(K, k)), scale)
        if mb is not None:
            s = K.where(mb, s, K.full((), MASK_FILL, s.dtype))
        aux = K.softmax(s)
        o = K.matmul(aux, v)
    oc = _swap12(K, o, (B, H, n, hd)).reshape(B * n, width)
    y = K.matmul(oc, wo).reshape(x.shape)
    return y, (x2, wq, wk, wv, wo, q, k, v, mb, o, aux, oc, x.shape, (B, n, H, hd), scale, use_flash)


def _mha_bwd(K, s, g, needs):
    x2, wq, wk, wv, wo, q, k, v, mb, o, aux, oc, shape, (B, n, H, hd), scale, use_flash = s
    g2 = g.reshape(B * n, wo.shape[1])
    dwo = K.matmul(K.transpose2d(oc), g2) if needs[4] else None
    if not any(needs[:4]):
        return None, None, None, None, dwo
    do = _swap12(K, K.matmul(g2, K.transpose2d(wo)), (B, n, H, hd))
    do = do.reshape(B * H, n, hd)
    if use_flash:
        dq, dk, dv = K.flash_attention_bwd(q, k, v, mb, o, aux, do, scale, False, False)
    else:
        p = aux
        dv = K.matmul(_swap(K, p), do)
        ds = K.softmax_bwd(p, K.matmul(do, _swap(K, v)))
        if mb is not None:
            ds = K.where(mb, ds, K.zeros((), ds.dtype))
        dq = K.scale(K.matmul(ds, k), scale)
        dk = K.scale(K.matmul(_swap(K, ds), q), scale)

    def merge(t):  # (B*H, n, hd) -> (B*n, H*hd)
        return _swap12(K, t, (B, H, n, hd)).reshape(B * n, H * hd)

    dQ, dK, dV = merge(dq), merge(dk), merge(dv)
    dx = None
    if needs[0]:
        dx = K.add(K.add(K.matmul(dQ, K.transpose2d(wq)), K.matmul(dK, K.transpose2d(wk))),
                   K.matmul(dV, K.transpose2d(wv))).reshape(shape)
    xt = K.transpose2d(x2)
    dws = [K.matmul(xt, d) if nd else None for d, nd in ((dQ, needs[1]), (dK, needs[2]), (dV, needs[3]))]
    return dx, dws[0], dws[1], dws[2], dwo


defrule("multi_head_attention", _mha_fwd, _mha_bwd)
