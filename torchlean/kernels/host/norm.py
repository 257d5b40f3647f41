"""Host kernels of the norm family: layer and batch normalization (statistics in float64).

Every kernel takes the array namespace as the keyword ``xp`` (NumPy by default);
:mod:`torchlean.kernels.cuda.norm` runs the batch-norm kernels with ``xp=cupy``.
"""

from __future__ import annotations

import numpy as np

from .base import BLOCK


# ---- normalization --------------------------------------------------------------------------


#: Elements per block of the host's blocked statistics: the elementwise kernels' block.
_STATS_BLOCK = BLOCK


def _stats_blocked(x3):
    """:func:`_stats` of a NumPy ``(N, C, S)`` array over axes (0, 2), without a float64 copy of it:
    the sum runs in float64 through NumPy's buffered reduction, the squared deviations a cache-sized
    block at a time (2-4x on activations of tens of MB)."""
    n, c, s = x3.shape
    count = n * s
    mu = x3.sum(axis=(0, 2), dtype=np.float64) / count
    acc = mu * 0.0
    step = max(1, _STATS_BLOCK // max(c, 1))
    m = mu[:, None]
    for i in range(n):
        for a in range(0, s, step):
            d = x3[i, :, a:a + step].astype(np.float64)
            d -= m
            d *= d
            acc += d.sum(axis=1)
    return mu, acc / count


def _stats(x, axes):
    """Mean and biased variance over ``axes`` (keepdims), two-pass in float64 (array methods only:
    no array namespace needed; a large NumPy array: :func:`_stats_blocked`)."""
    if type(x).__module__ == "numpy" and x.size > 4 * _STATS_BLOCK and x.ndim in (2, 3) and x.shape[0] * x.shape[-1]:
        x3 = x.reshape((1,) + x.shape) if x.ndim == 2 else x     # layer norm's rows are batch norm's channels
        mu, var = _stats_blocked(x3)
        shape = (x.shape[0], 1) if x.ndim == 2 else (1, x.shape[1], 1)
        return mu.reshape(shape), var.reshape(shape)
    x64 = x.astype(np.float64, copy=False)
    mu = x64.mean(axis=axes, keepdims=True)
    d = x64 - mu
    d *= d
    return mu, d.mean(axis=axes, keepdims=True)


def layer_norm_fwd(x, gamma, beta, eps, *, xp=np):
    mu, var = _stats(x, (1,))
    rstd = 1.0 / xp.sqrt(var + eps)
    y = ((x - mu.astype(x.dtype)) * rstd.astype(x.dtype))
    if gamma is not None:
        y *= gamma
    if beta is not None:
        y += beta
    return y, mu[:, 0].astype(x.dtype), rstd[:, 0].astype(x.dtype)


def layer_norm_bwd(x, gamma, mean, rstd, g, *, xp=np):
    r = rstd[:, None]
    xhat = (x - mean[:, None]) * r
    gx = g * gamma if gamma is not None else g
    n = x.shape[1]
    m1 = gx.sum(axis=1, keepdims=True, dtype=np.float64) / n
    m2 = xp.einsum("ij,ij->i", gx, xhat, dtype=np.float64)[:, None] / n
    dx = r * (gx - m1.astype(x.dtype) - xhat * m2.astype(x.dtype))
    if gamma is None:
        return dx, None, None
    return dx, xp.einsum("ij,ij->j", g, xhat), g.sum(axis=0)


def batch_norm_fwd(x, gamma, beta, eps, *, xp=np):
    mu, var = _stats(x, (0, 2))
    rstd = 1.0 / xp.sqrt(var + eps)
    scale = (rstd[0, :, 0] * gamma).astype(x.dtype)[None, :, None]
    # Subtract the mean before scaling: x * scale - mean * scale would cancel catastrophically.
    y = (x - mu.astype(x.dtype)) * scale + beta[None, :, None]
    return y, mu[0, :, 0].astype(x.dtype), rstd[0, :, 0].astype(x.dtype)


def batch_norm_running_update(x, running_mean, running_var, momentum, *, xp=np):
    """Fold the batch statistics of x (N, C, S) into the running buffers in place (PyTorch's rule:
    the unbiased variance), from one statistics pass in float64."""
    n = x.shape[0] * x.shape[2]
    if x.shape[1] == 0 or n <= 1:
        return
    mu, var = _stats(x, (0, 2))
    m = float(momentum)
    for buf, stat in ((running_mean, mu[0, :, 0]), (running_var, var[0, :, 0] * (n / (n - 1)))):
        if buf is not None:
            buf[...] = ((1.0 - m) * buf.astype(np.float64) + m * stat).astype(buf.dtype)


def batch_norm_bwd(x, gamma, mean, rstd, g, *, xp=np):
    r = rstd[None, :, None]
    xhat = (x - mean[None, :, None]) * r
    cnt = x.shape[0] * x.shape[2]
    dbeta = g.sum(axis=(0, 2), dtype=np.float64)
    dgamma = xp.einsum("ncs,ncs->c", g, xhat, dtype=np.float64)
    # dx = gamma * rstd * (g - mean(g) - xhat * mean(g * xhat)), channel by channel
    k = (gamma * rstd).astype(x.dtype)[None, :, None]
    m1 = (dbeta / cnt).astype(x.dtype)[None, :, None]
    m2 = (dgamma / cnt).astype(x.dtype)[None, :, None]
    dx = k * (g - m1 - xhat * m2)
    return dx, dgamma.astype(x.dtype), dbeta.astype(x.dtype)
