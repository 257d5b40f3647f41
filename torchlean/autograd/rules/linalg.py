"""Runtime rules of the linalg family: matmul, bmm, linear and linear_nobias (meaning:
:mod:`torchlean.spec.linalg`).

The seeds' ``use_gpu`` hint is a choice of kernels, not of rule: with ``set_options(use_gpu=True)``
and a GPU present, CPU ops run on :func:`torchlean.kernels.routed_host`, whose matrix products are
computed by cuBLAS.
"""

from __future__ import annotations

from ...spec.linalg import matmul_plan
from .registry import defrule


def _mT(K, x):
    """Contiguous transpose of the last two axes."""
    return K.swap_adjacent_at_depth(x, x.shape, x.ndim - 2)


# ---- matmul ---------------------------------------------------------------------------------

def _matmul_bwd(K, s, g, n):
    a, b = s
    a2, b2, full, _ = matmul_plan(a.shape, b.shape)
    A, B, G = a.reshape(a2), b.reshape(b2), g.reshape(full)
    da = K.sum_to_shape(K.matmul(G, _mT(K, B)), a2).reshape(a.shape) if n[0] else None
    db = K.sum_to_shape(K.matmul(_mT(K, A), G), b2).reshape(b.shape) if n[1] else None
    return da, db


defrule("matmul", lambda K, a, b: (K.matmul(a, b), (a, b)), _matmul_bwd)


# ---- bmm ------------------------------------------------------------------------------------

def _bmm_bwd(K, s, g, n):
    a, b = s
    return (K.bmm(g, _mT(K, b)) if n[0] else None, K.bmm(_mT(K, a), g) if n[1] else None)


defrule("bmm", lambda K, a, b: (K.bmm(a, b), (a, b)), _bmm_bwd)


# ---- linear (seeds' order: w, b, x) ---------------------------------------------------------

def _linear_bwd(K, s, g, n):
    w, x = s
    dx, dw, db = K.linear_bwd(x, w, g, n[2], n[0], n[1])
    return dw, db, dx


def _linear_nobias_bwd(K, s, g, n):
    w, x = s
    dx, dw, _ = K.linear_bwd(x, w, g, n[1], n[0], False)
    return dw, dx


defrule("linear", lambda K, w, b, x: (K.linear(x, w, b), (w, x)), _linear_bwd)
defrule("linear_nobias", lambda K, w, x: (K.linear(x, w, None), (w, x)), _linear_nobias_bwd)
