"""Host kernels of the spectral family: the packed real FFT and FNO's spectral convolution."""

from __future__ import annotations

import numpy as np


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
