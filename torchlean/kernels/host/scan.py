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


# ---- recurrences (RNN, LSTM, GRU) -------------------------------------------------------------
# One matrix product and one cell update per step, on preallocated buffers; every step's
# activations are kept for the backward (products are not redone there). A held step (mask
# False) keeps the state; going back, it passes the cotangents of h and c on unchanged.


def _sigmoid_(x):
    """In place: 0.5 (1 + tanh(x / 2)), which never overflows."""
    x *= 0.5
    np.tanh(x, out=x)
    x += 1.0
    x *= 0.5
    return x


def _keep(mask, t):
    return None if mask is None else np.asarray(mask)[t][:, None]


def lstm_scan_fwd(gx, w_hh, h0, c0, mask):
    T, N, G = gx.shape
    H = G // 4
    acts = np.array(gx, copy=True)
    states = np.empty((2, T, N, H), dtype=gx.dtype)
    h, c = h0, c0
    wt = w_hh.T
    for t in range(T):
        z = acts[t]
        z += h @ wt
        _sigmoid_(z[:, :2 * H])
        np.tanh(z[:, 2 * H:3 * H], out=z[:, 2 * H:3 * H])
        _sigmoid_(z[:, 3 * H:])
        cn = z[:, H:2 * H] * c
        cn += z[:, :H] * z[:, 2 * H:3 * H]
        hn = np.tanh(cn)
        hn *= z[:, 3 * H:]
        k = _keep(mask, t)
        if k is not None:
            cn, hn = np.where(k, cn, c), np.where(k, hn, h)
        states[0, t], states[1, t] = hn, cn
        h, c = states[0, t], states[1, t]
    return states, acts


def lstm_scan_bwd(w_hh, h0, c0, mask, states, acts, g):
    T, N, G = acts.shape
    H = G // 4
    dgx = np.empty_like(acts)
    dh = np.zeros_like(h0)
    dc = np.zeros_like(c0)
    for t in range(T - 1, -1, -1):
        dh += g[0, t]
        dc += g[1, t]
        z = acts[t]
        i, f, gg, o = z[:, :H], z[:, H:2 * H], z[:, 2 * H:3 * H], z[:, 3 * H:]
        tc = np.tanh(states[1, t])
        dct = dc + dh * o * (1 - tc * tc)
        d = dgx[t]
        d[:, :H] = dct * gg * i * (1 - i)
        d[:, H:2 * H] = dct * (states[1, t - 1] if t else c0) * f * (1 - f)
        d[:, 2 * H:3 * H] = dct * i * (1 - gg * gg)
        d[:, 3 * H:] = dh * tc * o * (1 - o)
        k = _keep(mask, t)
        if k is None:
            dh, dc = d @ w_hh, dct * f
        else:
            d *= k
            dh, dc = np.where(k, d @ w_hh, dh), np.where(k, dct * f, dc)
    hprev = np.concatenate([h0[None], states[0, :-1]])
    dw = dgx.reshape(-1, G).T @ hprev.reshape(-1, H)
    return dgx, dw, dh, dc


def gru_scan_fwd(gx, w_hh, b_hh, h0, mask):
    T, N, G = gx.shape
    H = G // 3
    acts = np.empty((T, N, 4 * H), dtype=gx.dtype)
    hs = np.empty((T, N, H), dtype=gx.dtype)
    h = h0
    wt = w_hh.T
    for t in range(T):
        a = h @ wt
        a += b_hh
        u = acts[t]
        u[:, :2 * H] = gx[t, :, :2 * H] + a[:, :2 * H]
        _sigmoid_(u[:, :2 * H])
        r, z = u[:, :H], u[:, H:2 * H]
        u[:, 3 * H:] = a[:, 2 * H:]
        n = u[:, 2 * H:3 * H]
        np.multiply(r, a[:, 2 * H:], out=n)
        n += gx[t, :, 2 * H:]
        np.tanh(n, out=n)
        hn = n + z * (h - n)
        k = _keep(mask, t)
        hs[t] = hn if k is None else np.where(k, hn, h)
        h = hs[t]
    return hs, acts


def gru_scan_bwd(w_hh, h0, mask, hs, acts, g):
    T, N, H = hs.shape
    dgx = np.empty((T, N, 3 * H), dtype=hs.dtype)
    da = np.empty_like(dgx)
    dh = np.zeros_like(h0)
    for t in range(T - 1, -1, -1):
        dh += g[t]
        u = acts[t]
        r, z, n, an = u[:, :H], u[:, H:2 * H], u[:, 2 * H:3 * H], u[:, 3 * H:]
        h_prev = hs[t - 1] if t else h0
        dn = dh * (1 - z) * (1 - n * n)
        dr = dn * an * r * (1 - r)
        dz = dh * (h_prev - n) * z * (1 - z)
        dgx[t, :, :H], dgx[t, :, H:2 * H], dgx[t, :, 2 * H:] = dr, dz, dn
        da[t, :, :2 * H] = dgx[t, :, :2 * H]
        da[t, :, 2 * H:] = dn * r
        k = _keep(mask, t)
        if k is None:
            dh = dh * z + da[t] @ w_hh
        else:
            dgx[t] *= k
            da[t] *= k
            dh = np.where(k, dh * z + da[t] @ w_hh, dh)
    hprev = np.concatenate([h0[None], hs[:-1]])
    dw = da.reshape(-1, 3 * H).T @ hprev.reshape(-1, H)
    return dgx, dw, da.sum(axis=(0, 1)), dh


def rnn_scan_fwd(gx, w_hh, h0, mask, relu):
    T, N, H = gx.shape
    hs = np.array(gx, copy=True)
    h = h0
    wt = w_hh.T
    for t in range(T):
        v = hs[t]
        v += h @ wt
        if relu:
            np.maximum(v, 0, out=v)
        else:
            np.tanh(v, out=v)
        k = _keep(mask, t)
        if k is not None:
            hs[t] = np.where(k, v, h)
        h = hs[t]
    return hs


def rnn_scan_bwd(w_hh, h0, mask, hs, g, relu):
    T, N, H = hs.shape
    dgx = np.empty_like(hs)
    dh = np.zeros_like(h0)
    for t in range(T - 1, -1, -1):
        dh += g[t]
        d = dgx[t]
        if relu:
            np.multiply(dh, hs[t] > 0, out=d)
        else:
            np.multiply(dh, 1 - hs[t] * hs[t], out=d)
        k = _keep(mask, t)
        if k is None:
            dh = d @ w_hh
        else:
            d *= k
            dh = np.where(k, d @ w_hh, dh)
    hprev = np.concatenate([h0[None], hs[:-1]])
    return dgx, dgx.reshape(-1, H).T @ hprev.reshape(-1, H), dh


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
