"""Model layers: the reference meaning of normalization, attention, the real FFT,
spectral convolution and the selective scan.

Normalization (PyTorch semantics, biased variance, ``eps`` default 1e-5):

* ``layer_norm(x, gamma, beta; normalized_ndim, eps)`` normalizes over the
  trailing ``normalized_ndim`` axes; ``gamma``/``beta`` have the shape of those
  axes. ``layer_norm_noaffine(x; normalized_ndim, eps)`` omits them.
* ``batch_norm_train(x, gamma, beta; eps)``: ``x`` is ``(N, C, *spatial)`` or
  ``(N, C)``; each channel is normalized with the statistics of the batch.
  ``batch_norm_eval(x, gamma, beta, mean, var; eps)`` uses given running
  statistics (not differentiable in them). ``batch_norm_chw(x, gamma, beta; eps)``
  is the seeds' batch norm of one ``(C, H, W)`` image (each channel over H*W).

Attention: ``flash_attention(q, k, v; scale=None, mask=None, hard=False)`` with
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

Real FFT (DESIGN.md): ``rfft(x)`` is the unnormalized DFT of the last axis, packed
as (..., n//2+1, 2) with [re, im] last; ``irfft(p; n)`` is the normalized (1/n)
inverse of a packed half-spectrum. irfft ignores the imaginary parts at DC and,
for even n, at Nyquist. Written as explicit cosine/sine sums, their adjoints are
``rfft^T g = C^T g_re - S^T g_im`` and, for irfft, the forward sums transposed:
DC/Nyquist bins weighted 1, interior bins weighted 2 (each interior bin stands for
itself and its conjugate mirror).

Spectral convolution: ``spectral_conv1d(x, w_re, w_im)``, ``x`` (grid, width) or
(batch, grid, width), weights (modes, width, width_out): X = rfft over the grid
axis; Y[k, o] = sum_i X[k, i] (w_re[k, i, o] + 1j w_im[k, i, o]) for k < modes,
other bins 0; y = irfft(Y, grid). ``modes <= grid//2 + 1``.

Selective scan: ``selective_scan(x, a, b, h0)`` with ``x`` (..., L, S), ``a``/``b``
(S,), ``h0`` (..., S) returns every state h[t] = a * h[t-1] + b * x[t] (h[-1] = h0)
along the second-last axis; ``selective_scan_var`` takes ``a``/``b`` of x's shape
(token-dependent coefficients).

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> np.round(SPEC["rfft"].forward(np.array([1.0, 2.0, 3.0, 4.0])), 12) + 0.0
    array([[10.,  0.],
           [-2.,  2.],
           [-2.,  0.]])
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import DomainError, ShapeError, fmt_shapes
from .registry import defspec

MASK_FILL = -1000.0  # the seeds' value for a blocked attention logit


# ---- attribute checks -----------------------------------------------------------------------

def _check_eps(op, eps):
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not math.isfinite(eps) or eps < 0:
        raise DomainError(f"{op}: eps must be a finite number >= 0, got {eps!r}")


def _check_int(op, name, v, lo):
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
        raise ShapeError(f"{op}: {name} must be an int >= {lo}, got {v!r}")


# ---- shared normalization core --------------------------------------------------------------

def _normalize(x, axes, eps):
    """(xhat, rstd) with statistics over ``axes`` (biased variance), keepdims."""
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    return (x - mu) * rstd, rstd


def _normalize_vjp(gxhat, xhat, rstd, axes):
    """Cotangent of x for xhat = (x - mean) * rstd, given the cotangent of xhat."""
    return rstd * (gxhat - gxhat.mean(axis=axes, keepdims=True)
                   - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True))


# ---- layer norm -----------------------------------------------------------------------------

def _ln_axes(shape, normalized_ndim, op):
    _check_int(op, "normalized_ndim", normalized_ndim, 1)
    if normalized_ndim > len(shape):
        raise ShapeError(f"{op}: normalized_ndim {normalized_ndim} is larger than the number of axes "
                         f"of the input {tuple(shape)}")
    norm = tuple(shape[len(shape) - normalized_ndim:])
    if math.prod(norm) == 0:
        raise ShapeError(f"{op}: normalized axes {norm} of input {tuple(shape)} are empty")
    return norm


def _layer_norm_shape(x, gamma, beta, *, normalized_ndim, eps=1e-5):
    norm = _ln_axes(x, normalized_ndim, "layer_norm")
    _check_eps("layer_norm", eps)
    for name, s in (("gamma", gamma), ("beta", beta)):
        if tuple(s) != norm:
            raise ShapeError(f"layer_norm: {name} has shape {tuple(s)}, expected the normalized shape "
                             f"{norm} of input {tuple(x)}")
    return tuple(x)


def _layer_norm(x, gamma, beta, *, normalized_ndim, eps=1e-5):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    xhat, _ = _normalize(x, axes, eps)
    return xhat * gamma + beta


def _layer_norm_vjp(g, x, gamma, beta, *, normalized_ndim, eps=1e-5):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    xhat, rstd = _normalize(x, axes, eps)
    dx = _normalize_vjp(g * gamma, xhat, rstd, axes)
    return dx, (g * xhat).sum(axis=lead), g.sum(axis=lead)


defspec("layer_norm", _layer_norm, _layer_norm_vjp, _layer_norm_shape, 3)


def _layer_norm_noaffine_shape(x, *, normalized_ndim, eps=1e-5):
    _ln_axes(x, normalized_ndim, "layer_norm_noaffine")
    _check_eps("layer_norm_noaffine", eps)
    return tuple(x)


def _layer_norm_noaffine(x, *, normalized_ndim, eps=1e-5):
    return _normalize(x, tuple(range(x.ndim - normalized_ndim, x.ndim)), eps)[0]


def _layer_norm_noaffine_vjp(g, x, *, normalized_ndim, eps=1e-5):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    xhat, rstd = _normalize(x, axes, eps)
    return (_normalize_vjp(g, xhat, rstd, axes),)


defspec("layer_norm_noaffine", _layer_norm_noaffine, _layer_norm_noaffine_vjp,
        _layer_norm_noaffine_shape, 1)


# ---- batch norm -----------------------------------------------------------------------------

def _bn_check(op, x, params, eps):
    """x (N, C, *spatial); every entry of ``params`` (name -> shape) must be (C,)."""
    _check_eps(op, eps)
    if len(x) < 2:
        raise ShapeError(f"{op}: input must be (N, C) or (N, C, *spatial), got shape {tuple(x)}")
    c = x[1]
    for name, s in params.items():
        if tuple(s) != (c,):
            raise ShapeError(f"{op}: {name} has shape {tuple(s)}, expected ({c},) for input {tuple(x)}")
    return tuple(x)


def _chan(v, ndim):
    """A per-channel vector (C,) shaped to broadcast against (N, C, *spatial)."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _bn_axes(ndim):
    return (0,) + tuple(range(2, ndim))


def _batch_norm_train(x, gamma, beta, *, eps=1e-5):
    xhat, _ = _normalize(x, _bn_axes(x.ndim), eps)
    return xhat * _chan(gamma, x.ndim) + _chan(beta, x.ndim)


def _batch_norm_train_vjp(g, x, gamma, beta, *, eps=1e-5):
    axes = _bn_axes(x.ndim)
    xhat, rstd = _normalize(x, axes, eps)
    dx = _normalize_vjp(g * _chan(gamma, x.ndim), xhat, rstd, axes)
    return dx, (g * xhat).sum(axis=axes), g.sum(axis=axes)


defspec("batch_norm_train", _batch_norm_train, _batch_norm_train_vjp,
        lambda x, gamma, beta, *, eps=1e-5: _bn_check("batch_norm_train", x,
                                                      {"gamma": gamma, "beta": beta}, eps), 3)


def _batch_norm_eval(x, gamma, beta, mean, var, *, eps=1e-5):
    rstd = 1.0 / np.sqrt(var + eps)
    return (x - _chan(mean, x.ndim)) * _chan(rstd * gamma, x.ndim) + _chan(beta, x.ndim)


def _batch_norm_eval_vjp(g, x, gamma, beta, mean, var, *, eps=1e-5):
    axes = _bn_axes(x.ndim)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - _chan(mean, x.ndim)) * _chan(rstd, x.ndim)
    return g * _chan(rstd * gamma, x.ndim), (g * xhat).sum(axis=axes), g.sum(axis=axes), None, None


defspec("batch_norm_eval", _batch_norm_eval, _batch_norm_eval_vjp,
        lambda x, gamma, beta, mean, var, *, eps=1e-5: _bn_check(
            "batch_norm_eval", x, {"gamma": gamma, "beta": beta, "mean": mean, "var": var}, eps), 5)


def _batch_norm_chw_shape(x, gamma, beta, *, eps=1e-5):
    if len(x) != 3:
        raise ShapeError(f"batch_norm_chw: input must be one (C, H, W) image, got shape {tuple(x)}")
    return _bn_check("batch_norm_chw", (1,) + tuple(x), {"gamma": gamma, "beta": beta}, eps)[1:]


defspec("batch_norm_chw",
        lambda x, gamma, beta, *, eps=1e-5: _batch_norm_train(x[None], gamma, beta, eps=eps)[0],
        lambda g, x, gamma, beta, *, eps=1e-5: (lambda r: (r[0][0], r[1], r[2]))(
            _batch_norm_train_vjp(g[None], x[None], gamma, beta, eps=eps)),
        _batch_norm_chw_shape, 3)


# ---- attention ------------------------------------------------------------------------------

def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


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


def _flash_shape(q, k, v, *, scale=None, mask=None, hard=False):
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
    if mask is not None and tuple(np.shape(mask)) != q[:-1] + (k[-2],):
        raise ShapeError(f"{op}: mask has shape {tuple(np.shape(mask))}, expected "
                         f"{q[:-1] + (k[-2],)} (batch, n, m)")
    return q[:-1] + (v[-1],)


def _scale_of(d, scale):
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


defspec("flash_attention",
        lambda q, k, v, *, scale=None, mask=None, hard=False: attention_probs(
            q, k, scale=_scale_of(q.shape[-1], scale), mask=mask, hard=hard) @ v,
        lambda g, q, k, v, *, scale=None, mask=None, hard=False: attention_vjp(
            g, q, k, v, scale=_scale_of(q.shape[-1], scale), mask=mask, hard=hard),
        _flash_shape, 3)


def mha_dims(x, wq, wk, wv, wo, num_heads, mask=None, op="multi_head_attention"):
    """Check shapes; returns (d_model, head_dim). Shared with the runtime rule."""
    x, wq, wk, wv, wo = (tuple(s) for s in (x, wq, wk, wv, wo))
    _check_int(op, "num_heads", num_heads, 1)
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
            mha_dims(x, wq, wk, wv, wo, num_heads, mask), tuple(x))[1], 5)


# ---- real FFT -------------------------------------------------------------------------------

def dft_mats(n):
    """(C, S, w): C[k, t] = cos(2 pi k t / n), S[k, t] = sin(...) for k <= n//2, and the
    irfft weights w (1 at DC and Nyquist, 2 at interior bins). S is exactly 0 on the
    DC and Nyquist rows, which is how their imaginary parts are ignored."""
    m = n // 2 + 1
    kt = np.outer(np.arange(m), np.arange(n)) % n  # reduce before scaling: exact angles
    theta = 2.0 * np.pi * kt / n
    C, S = np.cos(theta), np.sin(theta)
    S[0] = 0.0
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        S[-1] = 0.0
        w[-1] = 1.0
    return C, S, w


def _rfft_shape(x):
    if len(x) < 1 or x[-1] < 1:
        raise ShapeError(f"rfft: input needs a last axis of length >= 1, got shape {tuple(x)}")
    return tuple(x[:-1]) + (x[-1] // 2 + 1, 2)


def _rfft(x):
    C, S, _ = dft_mats(x.shape[-1])
    return np.stack([x @ C.T, -(x @ S.T)], axis=-1)


def _rfft_vjp(g, x):
    C, S, _ = dft_mats(x.shape[-1])
    return (g[..., 0] @ C - g[..., 1] @ S,)


defspec("rfft", _rfft, _rfft_vjp, _rfft_shape, 1)


def _irfft_shape(p, *, n):
    _check_int("irfft", "n", n, 1)
    p = tuple(p)
    if len(p) < 2 or p[-1] != 2:
        raise ShapeError(f"irfft: input must be a packed half-spectrum (..., bins, 2), got shape {p}")
    if n // 2 + 1 != p[-2]:
        raise ShapeError(f"irfft: n = {n} needs {n // 2 + 1} frequency bins, input {p} has {p[-2]}")
    return p[:-2] + (n,)


def _irfft(p, *, n):
    C, S, w = dft_mats(n)
    return ((p[..., 0] * w) @ C - (p[..., 1] * w) @ S) / n


def _irfft_vjp(g, p, *, n):
    C, S, w = dft_mats(n)
    return (np.stack([(g @ C.T) * w / n, -(g @ S.T) * w / n], axis=-1),)


defspec("irfft", _irfft, _irfft_vjp, _irfft_shape, 1)


# ---- spectral convolution -------------------------------------------------------------------

def _spectral_shape(x, w_re, w_im):
    op = "spectral_conv1d"
    x, w_re, w_im = tuple(x), tuple(w_re), tuple(w_im)
    if len(x) not in (2, 3):
        raise ShapeError(f"{op}: x must be (grid, width) or (batch, grid, width), got {x}")
    if len(w_re) != 3 or w_im != w_re:
        raise ShapeError(f"{op}: w_re and w_im must both be (modes, width, width_out), got {fmt_shapes(w_re, w_im)}")
    grid, width = x[-2], x[-1]
    modes = w_re[0]
    if w_re[1] != width:
        raise ShapeError(f"{op}: weights {w_re} expect {w_re[1]} input channels, x {x} has {width}")
    if grid < 1 or modes < 1 or modes > grid // 2 + 1:
        raise ShapeError(f"{op}: modes {modes} must lie in [1, grid//2 + 1] = [1, {grid // 2 + 1}] "
                         f"for grid {grid} (x {x}, weights {w_re})")
    return x[:-1] + (w_re[2],)


def _spectral_parts(x, w_re, w_im):
    """Complex spectrum X (..., modes, width) of x along the grid axis, and W."""
    modes = w_re.shape[0]
    P = _rfft(np.swapaxes(x, -1, -2))[..., :modes, :]   # (..., width, modes, 2)
    X = np.swapaxes(P[..., 0] + 1j * P[..., 1], -1, -2)
    return X, w_re + 1j * w_im


def _spectral(x, w_re, w_im):
    grid = x.shape[-2]
    X, W = _spectral_parts(x, w_re, w_im)
    Y = np.einsum("...ki,kio->...ko", X, W)
    full = np.zeros(Y.shape[:-2] + (grid // 2 + 1, Y.shape[-1]), dtype=complex)
    full[..., :Y.shape[-2], :] = Y
    packed = np.stack([full.real, full.imag], axis=-1)          # (..., bins, out, 2)
    return np.swapaxes(_irfft(np.moveaxis(packed, -3, -2), n=grid), -1, -2)


def _spectral_vjp(g, x, w_re, w_im):
    grid, modes = x.shape[-2], w_re.shape[0]
    X, W = _spectral_parts(x, w_re, w_im)
    # Cotangent of the packed spectrum Y through irfft, as complex numbers gY = dRe + 1j dIm.
    gp = _irfft_vjp(np.swapaxes(g, -1, -2), None, n=grid)[0][..., :modes, :]  # (..., out, modes, 2)
    gY = np.swapaxes(gp[..., 0] + 1j * gp[..., 1], -1, -2)                    # (..., modes, out)
    # Y = X W is complex-linear: dX = gY W^H, dW = X^H gY (summed over batch).
    gX = np.einsum("...ko,kio->...ki", gY, np.conj(W))
    gW = np.einsum("bki,bko->kio", np.conj(X).reshape((-1,) + X.shape[-2:]), gY.reshape((-1,) + gY.shape[-2:]))
    full = np.zeros(gX.shape[:-2] + (grid // 2 + 1, gX.shape[-1]), dtype=complex)
    full[..., :modes, :] = gX
    packed = np.stack([full.real, full.imag], axis=-1)
    dx = np.swapaxes(_rfft_vjp(np.moveaxis(packed, -3, -2), np.swapaxes(x, -1, -2))[0], -1, -2)
    return dx, gW.real, gW.imag


defspec("spectral_conv1d", _spectral, _spectral_vjp, _spectral_shape, 3)


# ---- selective scan -------------------------------------------------------------------------

def _scan_shape(op, x, a, b, h0, var):
    x, a, b, h0 = tuple(x), tuple(a), tuple(b), tuple(h0)
    if len(x) < 2 or x[-2] < 1:
        raise ShapeError(f"{op}: x must be (..., L, S) with L >= 1, got {x}")
    coef = x if var else (x[-1],)
    what = "x's shape" if var else "(S,)"
    if a != coef or b != coef:
        raise ShapeError(f"{op}: a and b must have {what} = {coef}, got {fmt_shapes(a, b)} for x {x}")
    want = x[:-2] + (x[-1],)
    if h0 != want:
        raise ShapeError(f"{op}: h0 has shape {h0}, expected {want} (x's leading axes and S) for x {x}")
    return x


def _coef_at(c, t):
    """Coefficient at time t: c itself for the (S,) form, c[..., t, :] for the token-dependent one."""
    return c if c.ndim == 1 else c[..., t, :]


def _scan(x, a, b, h0):
    h = np.empty(np.broadcast_shapes(x.shape, a.shape), dtype=np.result_type(x, a, b, h0))
    prev = h0
    for t in range(x.shape[-2]):
        prev = _coef_at(a, t) * prev + _coef_at(b, t) * x[..., t, :]
        h[..., t, :] = prev
    return h


def _scan_vjp(g, x, a, b, h0):
    """g[t] = dY[t] + a[t+1] g[t+1]; da = g h[t-1], db = g x, dx = g b, dh0 = a[0] g[0]."""
    h = _scan(x, a, b, h0)
    L = x.shape[-2]
    gs = np.empty_like(h)
    acc = np.zeros_like(h[..., 0, :])
    for t in range(L - 1, -1, -1):
        acc = g[..., t, :] + (_coef_at(a, t + 1) * acc if t + 1 < L else 0.0)
        gs[..., t, :] = acc
    hprev = np.concatenate([h0[..., None, :], h[..., :-1, :]], axis=-2)
    da, db = gs * hprev, gs * x
    if a.ndim == 1:  # shared coefficients collect their cotangent over batch and time
        red = tuple(range(x.ndim - 1))
        da, db = da.sum(axis=red), db.sum(axis=red)
    return gs * b, da, db, _coef_at(a, 0) * gs[..., 0, :]


defspec("selective_scan", _scan, _scan_vjp,
        lambda x, a, b, h0: _scan_shape("selective_scan", x, a, b, h0, False), 4)
defspec("selective_scan_var", _scan, _scan_vjp,
        lambda x, a, b, h0: _scan_shape("selective_scan_var", x, a, b, h0, True), 4)

__all__ = ["attention_probs", "attention_vjp", "dft_mats", "mha_dims", "MASK_FILL"]
