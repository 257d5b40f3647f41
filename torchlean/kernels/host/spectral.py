"""Host kernels of the spectral family: the packed real FFT and FNO's spectral convolution.

Every kernel (and every helper that makes or computes arrays) takes the array namespace as
the keyword ``xp`` (NumPy by default); :mod:`torchlean.kernels.cuda.spectral` runs them with
``xp=cupy`` for the packed FFT and for the inputs its native kernels do not take.
"""

from __future__ import annotations

import numpy as np


# ---- real FFT and spectral convolution ------------------------------------------------------


def _cdtype(x):
    """The complex dtype of x's real dtype (a dtype object: no array namespace needed)."""
    return np.complex64 if x.dtype == np.float32 else np.complex128


def _pack(z, dtype, *, xp=np):
    out = xp.empty(z.shape + (2,), dtype=dtype)
    out[..., 0] = z.real
    out[..., 1] = z.imag
    return out


def _unpack(p, *, xp=np):
    z = xp.empty(p.shape[:-1], dtype=_cdtype(p))
    z.real = p[..., 0]
    z.imag = p[..., 1]
    return z


def rfft1d_packed(x, *, xp=np):
    return _pack(xp.fft.rfft(x, axis=-1), x.dtype, xp=xp)


def irfft1d_packed(p, n, *, xp=np):
    return xp.fft.irfft(_unpack(p, xp=xp), n=n, axis=-1).astype(p.dtype, copy=False)


def _complex_weights(w_re, w_im, *, xp=np):
    W = xp.empty(w_re.shape, dtype=_cdtype(w_re))
    W.real = w_re
    W.imag = w_im
    return W


def _bin_weights(n, m, dtype, *, xp=np):
    """c_k / n: the irfft adjoint's bin weights (1 at DC and Nyquist, 2 inside)."""
    c = xp.full(m, 2.0)
    c[0] = 1.0
    if n % 2 == 0:
        c[-1] = 1.0
    return (c / n).astype(dtype)


def _modes_first(Z, modes, *, xp=np):
    """(batch, bins, ch) complex -> (modes, batch, ch) for a matmul batched over modes."""
    return xp.ascontiguousarray(Z[:, :modes].transpose(1, 0, 2))


def _from_modes(Zm, bins, *, xp=np):
    """(modes, batch, ch) -> zero-padded (batch, bins, ch)."""
    modes, batch, ch = Zm.shape
    out = xp.zeros((batch, bins, ch), dtype=Zm.dtype)
    out[:, :modes] = Zm.transpose(1, 0, 2)
    return out


def spectral_conv1d_rfft_fwd(x, w_re, w_im, *, xp=np):
    grid, modes = x.shape[1], w_re.shape[0]
    X = _modes_first(xp.fft.rfft(x, axis=1), modes, xp=xp)
    Y = xp.matmul(X, _complex_weights(w_re, w_im, xp=xp))
    return xp.fft.irfft(_from_modes(Y, grid // 2 + 1, xp=xp), n=grid, axis=1).astype(x.dtype, copy=False)


def spectral_conv1d_rfft_bwd_x(x, w_re, w_im, g, *, xp=np):
    # dx = irfft(rfft(g) W^H): the irfft adjoint's bin weights and the rfft adjoint's cancel.
    grid, modes = x.shape[1], w_re.shape[0]
    G = _modes_first(xp.fft.rfft(g, axis=1), modes, xp=xp)
    W = _complex_weights(w_re, w_im, xp=xp)
    dX = xp.matmul(G, xp.conj(W).transpose(0, 2, 1))
    return xp.fft.irfft(_from_modes(dX, grid // 2 + 1, xp=xp), n=grid, axis=1).astype(x.dtype, copy=False)


def _spectral_dw(x, w_re, g, *, xp=np):
    grid, modes = x.shape[1], w_re.shape[0]
    X = _modes_first(xp.fft.rfft(x, axis=1), modes, xp=xp)
    c = _bin_weights(grid, grid // 2 + 1, x.dtype, xp=xp)[:modes]
    G = _modes_first(xp.fft.rfft(g, axis=1), modes, xp=xp) * c[:, None, None]
    return xp.matmul(xp.conj(X).transpose(0, 2, 1), G)   # (modes, in, out)


def spectral_conv1d_rfft_bwd_wre(x, w_re, w_im, g, *, xp=np):
    return xp.ascontiguousarray(_spectral_dw(x, w_re, g, xp=xp).real).astype(x.dtype, copy=False)


def spectral_conv1d_rfft_bwd_wim(x, w_re, w_im, g, *, xp=np):
    return xp.ascontiguousarray(_spectral_dw(x, w_re, g, xp=xp).imag).astype(x.dtype, copy=False)


def spectral_conv1d_rfft_bwd(x, w_re, w_im, g, need_x, need_w, *, xp=np):
    dx = spectral_conv1d_rfft_bwd_x(x, w_re, w_im, g, xp=xp) if need_x else None
    if not need_w:
        return dx, None, None
    dw = _spectral_dw(x, w_re, g, xp=xp)
    return (dx, xp.ascontiguousarray(dw.real).astype(x.dtype, copy=False),
            xp.ascontiguousarray(dw.imag).astype(x.dtype, copy=False))
