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


def _nll_weights(target, weight, ignore_index, dtype):
    n = target.shape[0]
    w = np.ones(n, dtype=dtype) if weight is None else weight[np.where(target == ignore_index, 0, target)].astype(dtype)
    return np.where(target == ignore_index, _c(w, 0), w)


def nll_loss(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    n = logp.shape[0]
    w = _nll_weights(target, weight, ignore_index, logp.dtype)
    safe_t = np.where(target == ignore_index, 0, target)
    picked = -logp[np.arange(n), safe_t] * w
    if reduction == "none":
        return picked
    if reduction == "sum":
        return np.asarray(picked.sum(), dtype=logp.dtype)
    return np.asarray(picked.sum() / w.sum(), dtype=logp.dtype)


def nll_loss_bwd(logp, target, weight, ignore_index, reduction, g):
    n = logp.shape[0]
    w = _nll_weights(target, weight, ignore_index, logp.dtype)
    safe_t = np.where(target == ignore_index, 0, target)
    if reduction == "none":
        coef = -w * g
    elif reduction == "sum":
        coef = -w * g
    else:
        coef = -w * (g / w.sum())
    out = np.zeros_like(logp)
    np.add.at(out, (np.arange(n), safe_t), coef.astype(logp.dtype, copy=False))
    return out
