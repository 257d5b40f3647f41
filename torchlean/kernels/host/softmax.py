"""Host kernels of the softmax family (last axis, leading axes folded into rows)."""

from __future__ import annotations

import numpy as np

from .base import _c


# ---- softmax family and losses --------------------------------------------------------------


def softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


def softmax_bwd(y, g):
    return y * (g - (g * y).sum(axis=-1, keepdims=True))


def log_softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def log_softmax_bwd(y, g):
    return g - np.exp(y) * g.sum(axis=-1, keepdims=True)


def masked_softmax(x, mask):
    keep = mask != 0
    m = np.where(keep, x, -np.inf).max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, _c(x, 0))
    e = np.where(keep, np.exp(x - m), _c(x, 0))
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s > 0, s, _c(x, 1))
