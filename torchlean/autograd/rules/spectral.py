"""Runtime rules of the spectral family (meaning: :mod:`torchlean.spec.spectral`)."""

from __future__ import annotations

import numpy as np

from .registry import defrule


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
