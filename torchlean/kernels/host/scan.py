"""Host kernels of the scan family: the diagonal selective scan and its backward, and the cumulative
ops along one axis (cumsum, cumprod and its backward, the running argmax / argmin)."""

from __future__ import annotations

import numpy as np

# ---- selective scan -------------------------------------------------------------------------
# A loop over time, vectorised over leading batch axes and the state axis, written over the
# array namespace ``xp`` (the CUDA kernels are native; benchmarks run this loop on CuPy to show
# what the native scan saves).


def _scan_fwd(a, b, x, h0, var, xp=np):
    h = xp.empty_like(x)
    bx = b * x
    prev = h0
    for t in range(x.shape[-2]):
        prev = (a[..., t, :] if var else a) * prev + bx[..., t, :]
        h[..., t, :] = prev
    return h


def _scan_bwd(a, b, x, h0, h, g, var, xp=np):
    L = x.shape[-2]
    gs = xp.empty_like(x)
    acc = g[..., L - 1, :].copy()
    gs[..., L - 1, :] = acc
    for t in range(L - 2, -1, -1):
        acc = g[..., t, :] + (a[..., t + 1, :] if var else a) * acc
        gs[..., t, :] = acc
    hprev = xp.empty_like(h)
    hprev[..., 0, :] = h0
    hprev[..., 1:, :] = h[..., :-1, :]
    dx = gs * b
    dh0 = (a[..., 0, :] if var else a) * gs[..., 0, :]
    if var:
        return gs * hprev, gs * x, dx, dh0
    S = x.shape[-1]
    g2, hp2, x2 = gs.reshape(-1, S), hprev.reshape(-1, S), x.reshape(-1, S)
    return xp.einsum("rs,rs->s", g2, hp2), xp.einsum("rs,rs->s", g2, x2), dx, dh0


def selective_scan_diag_fwd(a, b, x, h0, *, xp=np):
    return _scan_fwd(a, b, x, h0, False, xp)


def selective_scan_diag_bwd(a, b, x, h0, h, g, *, xp=np):
    return _scan_bwd(a, b, x, h0, h, g, False, xp)


def selective_scan_diag_var_fwd(a, b, x, h0, *, xp=np):
    return _scan_fwd(a, b, x, h0, True, xp)


def selective_scan_diag_var_bwd(a, b, x, h0, h, g, *, xp=np):
    return _scan_bwd(a, b, x, h0, h, g, True, xp)


# ---- cumulative ops along one axis ------------------------------------------------------------
# Written over the array namespace ``xp`` (the CUDA module binds CuPy). float32 accumulates in
# float64, as PyTorch's CPU kernels do.


def _acc(x, xp):
    return xp.float64 if x.dtype == xp.float32 else x.dtype


def cumsum(x, axis, *, xp=np):
    return xp.cumsum(x, axis=axis, dtype=_acc(x, xp)).astype(x.dtype, copy=False)


def cumprod(x, axis, *, xp=np):
    return xp.cumprod(x, axis=axis, dtype=_acc(x, xp)).astype(x.dtype, copy=False)


def cumprod_bwd(x, y, g, axis, *, xp=np):
    """dx[i] = sum_{j >= i} g[j] prod_{m <= j, m != i} x[m], without dividing by a zero entry.

    Before a row's first zero z, dx[i] = (reverse cumsum of g * y)[i] / x[i] (y vanishes from z
    on). At z, the products leave the zero out: dx[z] = sum_{j >= z} g[j] w[j] with w the running
    product of x with x[z] replaced by 1. After z every product keeps x[z] = 0: dx = 0."""
    n = x.shape[axis]
    xs, ys, gs = (xp.moveaxis(v, axis, -1) for v in (x, y, g))
    if n == 0 or xs.size == 0:
        return xp.zeros(x.shape, dtype=x.dtype)
    pos = xp.arange(n)
    zero = xs == 0
    first = xp.where(zero.any(axis=-1), xp.argmax(zero.astype(xp.int8), axis=-1), n)[..., None]
    gy = (gs * ys).astype(_acc(x, xp))
    rev = xp.flip(xp.cumsum(xp.flip(gy, -1), axis=-1), -1)
    before = pos < first
    dx = xp.where(before, rev / xp.where(before, xs, 1), 0)
    at = pos == first
    w = xp.cumprod(xp.where(at, 1, xs).astype(_acc(x, xp)), axis=-1)
    dz = xp.sum(xp.where(pos >= first, gs * w, 0), axis=-1, keepdims=True)
    dx = xp.where(at, dz, dx).astype(x.dtype, copy=False)
    return xp.ascontiguousarray(xp.moveaxis(dx, -1, axis))


def _cumarg(x, axis, is_max, xp):
    """Index of the running extremum (the last of ties; a NaN wins and stays), by a log-step scan
    of (value, index) pairs: each step lets an entry see the pair 2^k places before it."""
    v = xp.moveaxis(x, axis, -1)
    n = v.shape[-1]
    idx = xp.broadcast_to(xp.arange(n, dtype=xp.int64), v.shape).copy()
    best = v.copy()
    nan = xp.isnan(best) if x.dtype.kind == "f" else xp.zeros(best.shape, dtype=bool)
    step = 1
    while step < n:
        pb, pi, pn = best[..., :-step], idx[..., :-step], nan[..., :-step]
        cb, cn = best[..., step:], nan[..., step:]
        better = (cb >= pb) if is_max else (cb <= pb)
        # The later pair keeps its place if it is NaN, or ties or beats a non-NaN earlier pair.
        keep = cn | (~pn & better)
        best[..., step:] = xp.where(keep, cb, pb)
        idx[..., step:] = xp.where(keep, idx[..., step:], pi)
        nan[..., step:] = cn | pn
        step *= 2
    return xp.ascontiguousarray(xp.moveaxis(idx, -1, axis))


def cumargmax(x, axis, *, xp=np):
    return _cumarg(x, axis, True, xp)


def cumargmin(x, axis, *, xp=np):
    return _cumarg(x, axis, False, xp)
