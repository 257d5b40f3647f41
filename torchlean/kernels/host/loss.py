"""Host kernels of the loss family: mean squared error and negative log-likelihood."""

from __future__ import annotations

import numpy as np

from .base import _c


def mse_loss(yhat, target):
    d = yhat - target
    return np.asarray(np.vdot(d, d) / d.size, dtype=yhat.dtype) if d.size else np.asarray(np.nan, dtype=yhat.dtype)


def mse_loss_bwd(yhat, target, g):
    d = (yhat - target) * (_c(yhat, 2.0 / max(yhat.size, 1)) * g)
    return d, -d


# The NLL loss over rows, written over the array namespace ``xp``: the CUDA family module runs
# it on CuPy for the inputs its fused kernels do not take.

def _nll_weights(target, weight, ignore_index, dtype, xp):
    n = target.shape[0]
    ign = target == ignore_index
    w = xp.ones(n, dtype=dtype) if weight is None else weight[xp.where(ign, 0, target)].astype(dtype)
    return xp.where(ign, _c(w, 0), w)


def nll_loss(logp, target, weight=None, ignore_index=-100, reduction="mean", *, xp=np):
    n = logp.shape[0]
    w = _nll_weights(target, weight, ignore_index, logp.dtype, xp)
    safe_t = xp.where(target == ignore_index, 0, target)
    picked = -logp[xp.arange(n), safe_t] * w
    if reduction == "none":
        return picked
    if reduction == "sum":
        return xp.asarray(picked.sum(), dtype=logp.dtype)
    return xp.asarray(picked.sum() / w.sum(), dtype=logp.dtype)


def nll_loss_bwd(logp, target, weight, ignore_index, reduction, g, *, xp=np):
    n = logp.shape[0]
    g = g.astype(logp.dtype, copy=False)
    w = _nll_weights(target, weight, ignore_index, logp.dtype, xp)
    safe_t = xp.where(target == ignore_index, 0, target)
    coef = -w * g if reduction in ("none", "sum") else -w * (g / w.sum())
    out = xp.zeros_like(logp)
    # Each row receives exactly one entry, so a plain scatter is the sum.
    out[xp.arange(n), safe_t] = coef.astype(logp.dtype, copy=False)
    return out
