"""NumPy kernels of the model layers: normalization, attention, the real FFT,
spectral convolution and the selective scan (contracts in :data:`torchlean.kernels.api.KERNELS`).

Every kernel keeps the dtype of its float inputs; statistics of the normalization
kernels are accumulated in float64.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_MASK_FILL = -1000.0          # the seeds' value for a blocked attention logit
_TILE_ELEMS = 1 << 23        # logits per key tile of flash attention (32 MiB in float32)
_MIN_PARALLEL = 1 << 22      # logits per tile below which elementwise work stays on one thread
_POOL: list = []


def _c(x, c):
    return x.dtype.type(c)


# ---- normalization --------------------------------------------------------------------------


def _stats(x, axes):
    """Mean and biased variance over ``axes`` (keepdims), two-pass in float64."""
    x64 = x.astype(np.float64, copy=False)
    mu = x64.mean(axis=axes, keepdims=True)
    d = x64 - mu
    d *= d
    return mu, d.mean(axis=axes, keepdims=True)


def layer_norm_fwd(x, gamma, beta, eps):
    mu, var = _stats(x, (1,))
    rstd = 1.0 / np.sqrt(var + eps)
    y = ((x - mu.astype(x.dtype)) * rstd.astype(x.dtype))
    if gamma is not None:
        y *= gamma
    if beta is not None:
        y += beta
    return y, mu[:, 0].astype(x.dtype), rstd[:, 0].astype(x.dtype)


def layer_norm_bwd(x, gamma, mean, rstd, g):
    r = rstd[:, None]
    xhat = (x - mean[:, None]) * r
    gx = g * gamma if gamma is not None else g
    n = x.shape[1]
    m1 = gx.sum(axis=1, keepdims=True, dtype=np.float64) / n
    m2 = np.einsum("ij,ij->i", gx, xhat, dtype=np.float64)[:, None] / n
    dx = r * (gx - m1.astype(x.dtype) - xhat * m2.astype(x.dtype))
    if gamma is None:
        return dx, None, None
    return dx, np.einsum("ij,ij->j", g, xhat), g.sum(axis=0)


def batch_norm_fwd(x, gamma, beta, eps):
    mu, var = _stats(x, (0, 2))
    rstd = 1.0 / np.sqrt(var + eps)
    scale = (rstd[0, :, 0] * gamma).astype(x.dtype)[None, :, None]
    # Subtract the mean before scaling: x * scale - mean * scale would cancel catastrophically.
    y = (x - mu.astype(x.dtype)) * scale + beta[None, :, None]
    return y, mu[0, :, 0].astype(x.dtype), rstd[0, :, 0].astype(x.dtype)


def batch_norm_bwd(x, gamma, mean, rstd, g):
    r = rstd[None, :, None]
    xhat = (x - mean[None, :, None]) * r
    cnt = x.shape[0] * x.shape[2]
    dbeta = g.sum(axis=(0, 2), dtype=np.float64)
    dgamma = np.einsum("ncs,ncs->c", g, xhat, dtype=np.float64)
    # dx = gamma * rstd * (g - mean(g) - xhat * mean(g * xhat)), channel by channel
    k = (gamma * rstd).astype(x.dtype)[None, :, None]
    m1 = (dbeta / cnt).astype(x.dtype)[None, :, None]
    m2 = (dgamma / cnt).astype(x.dtype)[None, :, None]
    dx = k * (g - m1 - xhat * m2)
    return dx, dgamma.astype(x.dtype), dbeta.astype(x.dtype)


# ---- attention ------------------------------------------------------------------------------


def _key_tile(rows, m):
    return int(max(64, min(m, _TILE_ELEMS // max(rows, 1))))


_CPUS = os.cpu_count() or 1   # read once: the call costs about 14 us on some Linux machines


def _par_rows(fn, rows, cols):
    """Run ``fn(lo, hi)`` over slices of ``rows`` on a thread pool.

    Only elementwise work goes through here: NumPy's ufuncs release the GIL, so
    row slices run in parallel, while the matrix products stay on the calling
    thread where BLAS has its own threads. Small tiles stay on one thread.
    """
    workers = min(_CPUS, rows)
    if workers <= 1 or rows * cols < _MIN_PARALLEL:
        fn(0, rows)
        return
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=_CPUS))
    bounds = [rows * i // workers for i in range(workers + 1)]
    for f in [_POOL[0].submit(fn, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]:
        f.result()


def _fill(s, keep, hard):
    """Blocked logits: -1000.0 (seed convention) or -inf (hard), in place."""
    if keep is not None:
        np.copyto(s, _c(s, -np.inf if hard else _MASK_FILL), where=~keep)


def flash_attention_fwd(q, k, v, mask, scale, hard):
    B, n, _ = q.shape
    m, R = k.shape[1], B * n
    qs = q * _c(q, scale)
    T = _key_tile(R, m)
    mx = np.full((R, 1), -np.inf, dtype=q.dtype)     # running row max of the logits
    shift = np.zeros((R, 1), dtype=q.dtype)          # the max actually subtracted (0 while -inf)
    ssum = np.zeros((R, 1), dtype=q.dtype)
    alpha = np.empty((R, 1), dtype=q.dtype)
    acc = np.zeros((B, n, v.shape[2]), dtype=q.dtype)
    for j0 in range(0, m, T):
        j1 = min(m, j0 + T)
        s = np.matmul(qs, k[:, j0:j1].transpose(0, 2, 1))
        s2 = s.reshape(R, j1 - j0)
        keep = None if mask is None else mask[:, :, j0:j1].reshape(R, j1 - j0)

        def softmax_tile(lo, hi, s2=s2, keep=keep):
            t = s2[lo:hi]
            _fill(t, None if keep is None else keep[lo:hi], hard)
            mnew = np.maximum(mx[lo:hi], t.max(axis=1, keepdims=True))
            # Rows with no allowed key yet (hard masking) keep max -inf: shift by 0 instead.
            sh = np.where(np.isfinite(mnew), mnew, _c(mnew, 0)) if hard else mnew
            t -= sh
            np.exp(t, out=t)
            np.exp(mx[lo:hi] - sh, out=alpha[lo:hi])
            ssum[lo:hi] = ssum[lo:hi] * alpha[lo:hi] + t.sum(axis=1, keepdims=True)
            mx[lo:hi], shift[lo:hi] = mnew, sh

        _par_rows(softmax_tile, R, j1 - j0)
        if j0:
            acc *= alpha.reshape(B, n, 1)
        acc += np.matmul(s, v[:, j0:j1])
    ok = ssum > 0
    out = acc / np.where(ok, ssum, _c(ssum, 1)).reshape(B, n, 1)
    lse = np.where(ok, shift + np.log(np.where(ok, ssum, _c(ssum, 1))), _c(ssum, np.inf))
    return out, lse.reshape(B, n)


def flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard):
    B, n, _ = q.shape
    m, R = k.shape[1], B * n
    sc = _c(q, scale)
    qs = q * sc
    T = _key_tile(R, m)
    delta = np.einsum("bne,bne->bn", g, out).reshape(R, 1)
    L = lse.reshape(R, 1)
    dq = np.zeros_like(q)
    dk = np.empty_like(k)
    dv = np.empty_like(v)
    for j0 in range(0, m, T):
        j1 = min(m, j0 + T)
        keep = None if mask is None else mask[:, :, j0:j1].reshape(R, j1 - j0)
        p = np.matmul(qs, k[:, j0:j1].transpose(0, 2, 1))
        p2 = p.reshape(R, j1 - j0)

        def probs(lo, hi, p2=p2, keep=keep):
            # The probabilities, recomputed from the saved log-sum-exp.
            t = p2[lo:hi]
            _fill(t, None if keep is None else keep[lo:hi], hard)
            t -= L[lo:hi]
            np.exp(t, out=t)

        _par_rows(probs, R, j1 - j0)
        dv[:, j0:j1] = np.matmul(p.transpose(0, 2, 1), g)
        ds = np.matmul(g, v[:, j0:j1].transpose(0, 2, 1))
        ds2 = ds.reshape(R, j1 - j0)

        def dlogits(lo, hi, ds2=ds2, p2=p2, keep=keep):
            t = ds2[lo:hi]
            t -= delta[lo:hi]
            t *= p2[lo:hi]
            if keep is not None and not hard:
                # A replaced logit is a constant; with hard masking p is already 0 there.
                np.copyto(t, _c(t, 0), where=~keep[lo:hi])

        _par_rows(dlogits, R, j1 - j0)
        dq += np.matmul(ds, k[:, j0:j1])
        dk[:, j0:j1] = np.matmul(ds.transpose(0, 2, 1), qs)
    dq *= sc
    return dq, dk, dv


def flash_attention_bwd_q(q, k, v, mask, out, lse, g, scale, hard):
    return flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard)[0]


def flash_attention_bwd_k(q, k, v, mask, out, lse, g, scale, hard):
    return flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard)[1]


def flash_attention_bwd_v(q, k, v, mask, out, lse, g, scale, hard):
    return flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard)[2]


# ---- real FFT and spectral convolution ------------------------------------------------------


def _cdtype(x):
    return np.complex64 if x.dtype == np.float32 else np.complex128


def _pack(z, dtype):
    out = np.empty(z.shape + (2,), dtype=dtype)
    out[..., 0] = z.real
    out[..., 1] = z.imag
    return out


def _unpack(p):
    z = np.empty(p.shape[:-1], dtype=_cdtype(p))
    z.real = p[..., 0]
    z.imag = p[..., 1]
    return z


def rfft1d_packed(x):
    return _pack(np.fft.rfft(x, axis=-1), x.dtype)


def irfft1d_packed(p, n):
    return np.fft.irfft(_unpack(p), n=n, axis=-1).astype(p.dtype, copy=False)


def _complex_weights(w_re, w_im):
    W = np.empty(w_re.shape, dtype=_cdtype(w_re))
    W.real = w_re
    W.imag = w_im
    return W


def _bin_weights(n, m, dtype):
    """c_k / n: the irfft adjoint's bin weights (1 at DC and Nyquist, 2 inside)."""
    c = np.full(m, 2.0)
    c[0] = 1.0
    if n % 2 == 0:
        c[-1] = 1.0
    return (c / n).astype(dtype)


def _modes_first(Z, modes):
    """(batch, bins, ch) complex -> (modes, batch, ch) for a matmul batched over modes."""
    return np.ascontiguousarray(Z[:, :modes].transpose(1, 0, 2))


def _from_modes(Zm, bins):
    """(modes, batch, ch) -> zero-padded (batch, bins, ch)."""
    modes, batch, ch = Zm.shape
    out = np.zeros((batch, bins, ch), dtype=Zm.dtype)
    out[:, :modes] = Zm.transpose(1, 0, 2)
    return out


def spectral_conv1d_rfft_fwd(x, w_re, w_im):
    grid, modes = x.shape[1], w_re.shape[0]
    X = _modes_first(np.fft.rfft(x, axis=1), modes)
    Y = np.matmul(X, _complex_weights(w_re, w_im))
    return np.fft.irfft(_from_modes(Y, grid // 2 + 1), n=grid, axis=1).astype(x.dtype, copy=False)


def spectral_conv1d_rfft_bwd_x(x, w_re, w_im, g):
    # dx = irfft(rfft(g) W^H): the irfft adjoint's bin weights and the rfft adjoint's cancel.
    grid, modes = x.shape[1], w_re.shape[0]
    G = _modes_first(np.fft.rfft(g, axis=1), modes)
    W = _complex_weights(w_re, w_im)
    dX = np.matmul(G, np.conj(W).transpose(0, 2, 1))
    return np.fft.irfft(_from_modes(dX, grid // 2 + 1), n=grid, axis=1).astype(x.dtype, copy=False)


def _spectral_dw(x, w_re, g):
    grid, modes = x.shape[1], w_re.shape[0]
    X = _modes_first(np.fft.rfft(x, axis=1), modes)
    c = _bin_weights(grid, grid // 2 + 1, x.dtype)[:modes]
    G = _modes_first(np.fft.rfft(g, axis=1), modes) * c[:, None, None]
    return np.matmul(np.conj(X).transpose(0, 2, 1), G)   # (modes, in, out)


def spectral_conv1d_rfft_bwd_wre(x, w_re, w_im, g):
    return np.ascontiguousarray(_spectral_dw(x, w_re, g).real).astype(x.dtype, copy=False)


def spectral_conv1d_rfft_bwd_wim(x, w_re, w_im, g):
    return np.ascontiguousarray(_spectral_dw(x, w_re, g).imag).astype(x.dtype, copy=False)


def spectral_conv1d_rfft_bwd(x, w_re, w_im, g, need_x, need_w):
    dx = spectral_conv1d_rfft_bwd_x(x, w_re, w_im, g) if need_x else None
    if not need_w:
        return dx, None, None
    dw = _spectral_dw(x, w_re, g)
    return (dx, np.ascontiguousarray(dw.real).astype(x.dtype, copy=False),
            np.ascontiguousarray(dw.imag).astype(x.dtype, copy=False))


# ---- selective scan -------------------------------------------------------------------------
# A loop over time, vectorised over leading batch axes and the state axis.


def _scan_fwd(a, b, x, h0, var):
    h = np.empty_like(x)
    bx = b * x
    prev = h0
    for t in range(x.shape[-2]):
        prev = (a[..., t, :] if var else a) * prev + bx[..., t, :]
        h[..., t, :] = prev
    return h


def _scan_bwd(a, b, x, h0, h, g, var):
    L = x.shape[-2]
    gs = np.empty_like(x)
    acc = g[..., L - 1, :].copy()
    gs[..., L - 1, :] = acc
    for t in range(L - 2, -1, -1):
        acc = g[..., t, :] + (a[..., t + 1, :] if var else a) * acc
        gs[..., t, :] = acc
    hprev = np.empty_like(h)
    hprev[..., 0, :] = h0
    hprev[..., 1:, :] = h[..., :-1, :]
    dx = gs * b
    dh0 = (a[..., 0, :] if var else a) * gs[..., 0, :]
    if var:
        return gs * hprev, gs * x, dx, dh0
    S = x.shape[-1]
    g2, hp2, x2 = gs.reshape(-1, S), hprev.reshape(-1, S), x.reshape(-1, S)
    return np.einsum("rs,rs->s", g2, hp2), np.einsum("rs,rs->s", g2, x2), dx, dh0


def selective_scan_diag_fwd(a, b, x, h0):
    return _scan_fwd(a, b, x, h0, False)


def selective_scan_diag_bwd(a, b, x, h0, h, g):
    return _scan_bwd(a, b, x, h0, h, g, False)


def selective_scan_diag_var_fwd(a, b, x, h0):
    return _scan_fwd(a, b, x, h0, True)


def selective_scan_diag_var_bwd(a, b, x, h0, h, g):
    return _scan_bwd(a, b, x, h0, h, g, True)
