"""Runtime rules of the model layers: normalization, attention, real FFT, spectral
convolution and selective scan (meaning: :mod:`torchlean.spec.layers`).

Leading axes are folded into the kernels' row/batch axes with reshapes (views of
row-major values); masks arrive as host arrays and are uploaded as bool.
"""

from __future__ import annotations

import math

import numpy as np

from ...spec.layers import MASK_FILL
from .registry import defrule


def _prod(shape):
    return math.prod(shape)


# Device copies of host masks, keyed by content: a causal mask is rebuilt on the host at every
# call, and uploading it each time would make the host wait for the GPU at every attention layer.
_MASKS: dict = {}
_MASKS_MAX = 64
_MASK_CACHE_BYTES = 1 << 22


def _dev_mask(K, mask):
    """A 0/1 mask attribute as a bool array of the kernels' device (nonzero = may attend).

    On a GPU only the distinct entries of a host mask travel: axes it is broadcast along
    (stride 0) stay broadcast on the device, and small masks are uploaded once per content."""
    if mask is None:
        return None
    if isinstance(mask, (np.ndarray, list, tuple)) or not hasattr(mask, "shape"):
        m = np.asarray(mask)
        if K.device == "cpu":
            return m != 0
        core = m[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in zip(m.strides, m.shape))]
        core = np.ascontiguousarray(core != 0)
        key = (K.xp.cuda.Device().id, core.shape, core.tobytes()) if core.nbytes <= _MASK_CACHE_BYTES else None
        d = _MASKS.get(key) if key is not None else None
        if d is None:
            d = K.from_host(core, bool)
            if key is not None:
                if len(_MASKS) >= _MASKS_MAX:
                    _MASKS.pop(next(iter(_MASKS)))
                _MASKS[key] = d
        return K.xp.broadcast_to(d, m.shape)
    return K.astype(mask, bool)


def _pick(needs, *grads):
    return tuple(gr if nd else None for gr, nd in zip(grads, needs))


# ---- normalization --------------------------------------------------------------------------

def _ln_fwd(K, x, gamma=None, beta=None, *, normalized_ndim, eps=1e-5):
    n = _prod(x.shape[x.ndim - normalized_ndim:])
    x2 = x.reshape(-1, n)
    y, mu, rstd = K.layer_norm_fwd(x2, None if gamma is None else gamma.reshape(n),
                                   None if beta is None else beta.reshape(n), eps)
    gshape = x.shape[x.ndim - normalized_ndim:]
    return y.reshape(x.shape), (x2, gamma, mu, rstd, x.shape, gshape)


def _ln_bwd(K, s, g, needs):
    x2, gamma, mu, rstd, shape, gshape = s
    dx, dg, db = K.layer_norm_bwd(x2, None if gamma is None else gamma.reshape(-1), mu, rstd,
                                  g.reshape(x2.shape))
    if gamma is None:
        return (dx.reshape(shape),)
    return _pick(needs, dx.reshape(shape), dg.reshape(gshape), db.reshape(gshape))


defrule("layer_norm", _ln_fwd, _ln_bwd)
defrule("layer_norm_noaffine",
        lambda K, x, *, normalized_ndim, eps=1e-5: _ln_fwd(K, x, normalized_ndim=normalized_ndim, eps=eps),
        _ln_bwd)


def _ncs(x):
    """(N, C, *spatial) -> (N, C, S) view."""
    return x.reshape(x.shape[0], x.shape[1], _prod(x.shape[2:]))


def _bn_fwd(K, x, gamma, beta, *, eps=1e-5):
    x3 = _ncs(x)
    y, mu, rstd = K.batch_norm_fwd(x3, gamma, beta, eps)
    return y.reshape(x.shape), (x3, gamma, mu, rstd, x.shape)


def _bn_bwd(K, s, g, needs):
    x3, gamma, mu, rstd, shape = s
    dx, dg, db = K.batch_norm_bwd(x3, gamma, mu, rstd, g.reshape(x3.shape))
    return _pick(needs, dx.reshape(shape), dg, db)


defrule("batch_norm_train", _bn_fwd, _bn_bwd)
def _bn_chw_fwd(K, x, gamma, beta, *, eps=1e-5):
    # One (C, H, W) image is a batch of one: the channel statistics run over H*W.
    x3 = x.reshape(1, x.shape[0], _prod(x.shape[1:]))
    y, mu, rstd = K.batch_norm_fwd(x3, gamma, beta, eps)
    return y.reshape(x.shape), (x3, gamma, mu, rstd, x.shape)


defrule("batch_norm_chw", _bn_chw_fwd, _bn_bwd)


def _bne_fwd(K, x, gamma, beta, mean, var, *, eps=1e-5):
    c = x.shape[1]
    x3 = _ncs(x)
    rstd = K.inv(K.sqrt(K.add_scalar(var, eps)))
    k = K.mul(rstd, gamma).reshape(1, c, 1)
    xc = K.sub(x3, mean.reshape(1, c, 1))
    y = K.add(K.mul(xc, k), beta.reshape(1, c, 1))
    return y.reshape(x.shape), (xc, k, rstd.reshape(1, c, 1), x.shape)


def _bne_bwd(K, s, g, needs):
    xc, k, rstd, shape = s
    g3 = g.reshape(xc.shape)
    dx = K.mul(g3, k).reshape(shape) if needs[0] else None
    dg = K.sum(K.mul(K.mul(g3, xc), rstd), (0, 2), False) if needs[1] else None
    db = K.sum(g3, (0, 2), False) if needs[2] else None
    return dx, dg, db, None, None


defrule("batch_norm_eval", _bne_fwd, _bne_bwd)


# ---- attention ------------------------------------------------------------------------------

def _fa_fwd(K, q, k, v, *, scale=None, mask=None, hard=False):
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    lead, n, m_ = q.shape[:-2], q.shape[-2], k.shape[-2]
    if len(lead) != 1:  # the kernels take one batch axis: fold the others into it (views)
        B = math.prod(lead)
        q = K.ascontiguous(q).reshape(B, n, q.shape[-1])
        k = K.ascontiguous(k).reshape(B, m_, k.shape[-1])
        v = K.ascontiguous(v).reshape(B, m_, v.shape[-1])
        if mask is not None:
            mask = mask.reshape(B, n, m_)
    m = _dev_mask(K, mask)
    out, lse = K.flash_attention_fwd(q, k, v, m, sc, bool(hard))
    return out.reshape(lead + out.shape[-2:]), (q, k, v, m, out, lse, sc, bool(hard), lead)


def _fa_bwd(K, s, g, needs):
    q, k, v, m, out, lse, sc, hard, lead = s
    if len(lead) != 1:
        g = K.ascontiguous(g).reshape(out.shape)
    grads = K.flash_attention_bwd(q, k, v, m, out, lse, g, sc, hard)
    if len(lead) != 1:
        grads = tuple(None if t is None else t.reshape(lead + t.shape[-2:]) for t in grads)
    return _pick(needs, *grads)


defrule("flash_attention", _fa_fwd, _fa_bwd)


def _swap(K, t):
    return K.xp.swapaxes(t, -1, -2)


def _mha_fwd(K, x, wq, wk, wv, wo, *, num_heads, mask=None, use_flash=True):
    H = num_heads
    d_model, width = wq.shape
    hd = width // H
    B, n = (x.shape[0], x.shape[1]) if x.ndim == 3 else (1, x.shape[0])
    x2 = x.reshape(B * n, d_model)

    def heads(t):  # (B*n, H*hd) -> (B*H, n, hd)
        return K.ascontiguous(K.xp.swapaxes(t.reshape(B, n, H, hd), 1, 2)).reshape(B * H, n, hd)

    q, k, v = heads(K.matmul(x2, wq)), heads(K.matmul(x2, wk)), heads(K.matmul(x2, wv))
    mb = None
    if mask is not None:
        mb = K.ascontiguous(K.xp.broadcast_to(_dev_mask(K, mask), (B * H, n, n)))
    scale = 1.0 / math.sqrt(hd)
    if use_flash:
        o, aux = K.flash_attention_fwd(q, k, v, mb, scale, False)
    else:
        s = K.scale(K.matmul(q, _swap(K, k)), scale)
        if mb is not None:
            s = K.where(mb, s, K.full((), MASK_FILL, s.dtype))
        aux = K.softmax(s)
        o = K.matmul(aux, v)
    oc = K.ascontiguous(K.xp.swapaxes(o.reshape(B, H, n, hd), 1, 2)).reshape(B * n, width)
    y = K.matmul(oc, wo).reshape(x.shape)
    return y, (x2, wq, wk, wv, wo, q, k, v, mb, o, aux, oc, x.shape, (B, n, H, hd), scale, use_flash)


def _mha_bwd(K, s, g, needs):
    x2, wq, wk, wv, wo, q, k, v, mb, o, aux, oc, shape, (B, n, H, hd), scale, use_flash = s
    g2 = g.reshape(B * n, wo.shape[1])
    dwo = K.matmul(K.transpose2d(oc), g2) if needs[4] else None
    if not any(needs[:4]):
        return None, None, None, None, dwo
    do = K.ascontiguous(K.xp.swapaxes(K.matmul(g2, K.transpose2d(wo)).reshape(B, n, H, hd), 1, 2))
    do = do.reshape(B * H, n, hd)
    if use_flash:
        dq, dk, dv = K.flash_attention_bwd(q, k, v, mb, o, aux, do, scale, False)
    else:
        p = aux
        dv = K.matmul(_swap(K, p), do)
        ds = K.softmax_bwd(p, K.matmul(do, _swap(K, v)))
        if mb is not None:
            ds = K.where(mb, ds, K.zeros((), ds.dtype))
        dq = K.scale(K.matmul(ds, k), scale)
        dk = K.scale(K.matmul(_swap(K, ds), q), scale)

    def merge(t):  # (B*H, n, hd) -> (B*n, H*hd)
        return K.ascontiguous(K.xp.swapaxes(t.reshape(B, H, n, hd), 1, 2)).reshape(B * n, H * hd)

    dQ, dK, dV = merge(dq), merge(dk), merge(dv)
    dx = None
    if needs[0]:
        dx = K.add(K.add(K.matmul(dQ, K.transpose2d(wq)), K.matmul(dK, K.transpose2d(wk))),
                   K.matmul(dV, K.transpose2d(wv))).reshape(shape)
    xt = K.transpose2d(x2)
    dws = [K.matmul(xt, d) if nd else None for d, nd in ((dQ, needs[1]), (dK, needs[2]), (dV, needs[3]))]
    return dx, dws[0], dws[1], dws[2], dwo


defrule("multi_head_attention", _mha_fwd, _mha_bwd)


# ---- real FFT and spectral convolution ------------------------------------------------------

def _bin_weights(K, n, dtype, interior, edge):
    """(bins, 1) weights: ``edge`` at DC (and Nyquist for even n), ``interior`` elsewhere."""
    m = n // 2 + 1
    w = np.full((m, 1), float(interior))
    w[0] = edge
    if n % 2 == 0:
        w[-1] = edge
    return K.from_host(w, dtype)


def _rfft_fwd(K, x):
    n = x.shape[-1]
    y = K.rfft1d_packed(x.reshape(-1, n))
    return y.reshape(x.shape[:-1] + (n // 2 + 1, 2)), x.shape


def _rfft_bwd(K, shape, g, needs):
    # rfft^T g = n * irfft(g * w) with w = 1 at DC/Nyquist and 1/2 inside (irfft doubles interior bins).
    n = shape[-1]
    g3 = g.reshape(-1, n // 2 + 1, 2)
    dx = K.scale(K.irfft1d_packed(K.mul(g3, _bin_weights(K, n, g.dtype, 0.5, 1.0)), n), float(n))
    return (dx.reshape(shape),)


defrule("rfft", _rfft_fwd, _rfft_bwd)


def _irfft_fwd(K, p, *, n):
    y = K.irfft1d_packed(p.reshape(-1, n // 2 + 1, 2), n)
    return y.reshape(p.shape[:-2] + (n,)), (p.shape, n)


def _irfft_bwd(K, s, g, needs):
    # irfft^T g = rfft(g) * c / n with c = 1 at DC/Nyquist and 2 inside.
    shape, n = s
    dp = K.mul(K.rfft1d_packed(g.reshape(-1, n)), _bin_weights(K, n, g.dtype, 2.0 / n, 1.0 / n))
    return (dp.reshape(shape),)


defrule("irfft", _irfft_fwd, _irfft_bwd)


def _spec_fwd(K, x, w_re, w_im):
    x3 = x if x.ndim == 3 else x.reshape((1,) + x.shape)
    y = K.spectral_conv1d_rfft_fwd(x3, w_re, w_im)
    return y.reshape(x.shape[:-1] + (w_re.shape[2],)), (x3, w_re, w_im, x.shape)


def _spec_bwd(K, s, g, needs):
    x3, w_re, w_im, shape = s
    g3 = g.reshape(x3.shape[:2] + (w_re.shape[2],))
    dx, dre, dim = K.spectral_conv1d_rfft_bwd(x3, w_re, w_im, g3, bool(needs[0]), bool(needs[1] or needs[2]))
    return (None if dx is None else dx.reshape(shape)), (dre if needs[1] else None), (dim if needs[2] else None)


defrule("spectral_conv1d", _spec_fwd, _spec_bwd)


# ---- selective scan -------------------------------------------------------------------------

def _scan_rule(name, fwd_kernel, bwd_kernel):
    def fwd(K, x, a, b, h0):
        h = getattr(K, fwd_kernel)(a, b, x, h0)
        return h, (a, b, x, h0, h)

    def bwd(K, s, g, needs):
        da, db, dx, dh0 = getattr(K, bwd_kernel)(*s, g)
        return _pick(needs, dx, da, db, dh0)

    defrule(name, fwd, bwd)


_scan_rule("selective_scan", "selective_scan_diag_fwd", "selective_scan_diag_bwd")
_scan_rule("selective_scan_var", "selective_scan_diag_var_fwd", "selective_scan_diag_var_bwd")
