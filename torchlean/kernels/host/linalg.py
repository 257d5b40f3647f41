"""Host kernels of the linalg family: matmul, bmm and linear through NumPy (BLAS)."""

from __future__ import annotations

import numpy as np


def bmm(a, b):
    return np.matmul(a, b)


# ---- linear algebra -------------------------------------------------------------------------


def matmul(a, b):
    return np.matmul(a, b)


def linear(x, w, b=None):
    y = x @ w.T
    if b is not None:
        y += b
    return y


def linear_bwd(x, w, g, need_x=True, need_w=True, need_b=True):
    dx = g @ w if need_x else None
    g2 = g.reshape(-1, g.shape[-1])
    dw = g2.T @ x.reshape(-1, x.shape[-1]) if need_w else None
    db = g2.sum(axis=0) if need_b else None
    return dx, dw, db
