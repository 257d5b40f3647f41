"""The real FFT and spectral convolution: their reference meaning.

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

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> np.round(SPEC["rfft"].forward(np.array([1.0, 2.0, 3.0, 4.0])), 12) + 0.0
    array([[10.,  0.],
           [-2.,  2.],
           [-2.,  0.]])
"""

from __future__ import annotations


import numpy as np

from ..errors import ShapeError, fmt_shapes
from .attrs import check_int
from .registry import defspec


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
    check_int("irfft", "n", n, 1)
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


defspec("spectral_conv1d", _spectral, _spectral_vjp, _spectral_shape, 3,
        why="the mix of the first modes in one pass (or one DFT GEMM), where rfft, a complex mix and irfft keep "
            "the whole spectrum")
