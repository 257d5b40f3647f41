"""Host kernels of the linalg family: matmul, bmm and linear through NumPy (BLAS); the
decompositions through numpy.linalg (LAPACK) with the spec's formulas for their VJPs."""

from __future__ import annotations

import numpy as np

from ...spec import linalg as _s


def bmm(a, b):
    return np.matmul(a, b)


# ---- linear algebra -------------------------------------------------------------------------


def _rows_times(a, m):
    """``a (..., k) @ m (k, n)``: a batch of rows against one matrix as one GEMM over all the rows
    (NumPy's broadcasting matmul runs one GEMM per leading index: 2x slower at a transformer's
    (batch, T, width) activations)."""
    if a.ndim <= 2 or m.ndim != 2:
        return np.matmul(a, m)
    rows = int(np.prod(a.shape[:-1]))  # not -1: a zero-width a has no rows to infer
    return np.matmul(a.reshape(rows, a.shape[-1]), m).reshape(a.shape[:-1] + (m.shape[1],))


def matmul(a, b):
    return _rows_times(a, b)


def matmul_t(a, b, ta=False, tb=False):
    # BLAS reads a transposed operand in place: no contiguous copy of either
    b = np.swapaxes(b, -1, -2) if tb else b
    return np.matmul(np.swapaxes(a, -1, -2), b) if ta else _rows_times(a, b)


def linear(x, w, b=None):
    y = _rows_times(x, w.T)
    if b is not None:
        y += b
    return y


def linear_bwd(x, w, g, need_x=True, need_w=True, need_b=True):
    dx = _rows_times(g, w) if need_x else None
    rows = int(np.prod(g.shape[:-1]))  # not -1: a zero-width x (in_features 0) has no rows to infer
    g2 = g.reshape(rows, g.shape[-1])
    dw = g2.T @ x.reshape(rows, x.shape[-1]) if need_w else None
    db = g2.sum(axis=0) if need_b else None
    return dx, dw, db


# ---- decompositions: LAPACK through numpy.linalg, the formulas of the spec ------------------

def linalg_solve(a, b):
    return _s.solve_core(a, b)


def linalg_cholesky(a):
    return _s.cholesky_core(a)


def linalg_cholesky_bwd(l, g):
    return _s.cholesky_vjp_core(l, g)


def linalg_qr(a, mode):
    return _s.qr_core(a, mode)


def linalg_qr_bwd(a, q, r, gq, gr, mode):
    return np.ascontiguousarray(_s.qr_vjp_core(a, q, r, gq, gr, mode))


def linalg_svd(a, full_matrices):
    return _s.svd_core(a, full_matrices)


def linalg_svd_bwd(u, s, vh, gu, gs, gvh):
    return _s.svd_vjp_core(u, s, vh, gu, gs, gvh)


def linalg_eigh(a, upper):
    return _s.eigh_core(a, upper)


def linalg_eigh_bwd(w, v, gw, gv):
    return _s.eigh_vjp_core(w, v, gw, gv)


def linalg_det(a):
    if a.shape[-1] == 0:
        return np.ones(a.shape[:-2], dtype=a.dtype)
    return np.asarray(np.linalg.det(a))


def linalg_det_bwd(a, g):
    return _s.det_vjp_core(a, g)


def linalg_slogdet(a):
    return _s.slogdet_core(a)


def linalg_slogdet_bwd(a, g):
    return _s.slogdet_vjp_core(a, g)
