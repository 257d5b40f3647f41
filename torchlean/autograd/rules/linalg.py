"""Runtime rules of the linalg family: matmul, bmm, linear and linear_nobias, and the
decompositions solve, cholesky, qr, svd, eigh, det and slogdet (meaning: :mod:`torchlean.spec.linalg`).

The seeds' ``use_gpu`` hint is a choice of kernels, not of rule: with ``set_options(use_gpu=True)``
and a GPU present, CPU ops run on :func:`torchlean.kernels.routed_host`, whose matrix products are
computed by cuBLAS.
"""

from __future__ import annotations

import math

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
    da = K.sum_to_shape(K.matmul_t(G, B, False, True), a2).reshape(a.shape) if n[0] else None
    db = K.sum_to_shape(K.matmul_t(A, G, True, False), b2).reshape(b.shape) if n[1] else None
    return da, db


defrule("matmul", lambda K, a, b: (K.matmul(a, b), (a, b)), _matmul_bwd)


# ---- bmm ------------------------------------------------------------------------------------

def _bmm_bwd(K, s, g, n):
    a, b = s
    return (K.matmul_t(g, b, False, True) if n[0] else None, K.matmul_t(a, g, True, False) if n[1] else None)


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


# ---- decompositions -------------------------------------------------------------------------
# Several results are one packed value (spec.linalg): each flattened over its own axes and
# concatenated along a last axis; the backward splits the packed cotangent the same way.

def _pack(K, batch, parts, dtype):
    flat = [p.reshape(batch + (math.prod(p.shape[len(batch):]),)) for p in parts
            if p.ndim >= len(batch) and tuple(p.shape[:len(batch)]) == batch]
    return K.concat(flat, len(batch)) if flat else K.zeros(batch + (0,), dtype)


def _unpack(K, g, batch, shapes):
    out, at = [], 0
    for s in shapes:
        s = tuple(s)
        if len(s) < len(batch) or s[:len(batch)] != batch:
            out.append(K.zeros(s, g.dtype))
            continue
        k = math.prod(s[len(batch):])
        out.append(K.ascontiguous(g[..., at:at + k]).reshape(s))
        at += k
    return out


def _solve_bwd(K, s, g, n):
    a, x, b_shape = s
    gb = K.linalg_solve(_mT(K, a), g)
    ga = K.sum_to_shape(K.neg(K.matmul(gb, _mT(K, x))), a.shape) if n[0] else None
    return ga, (K.sum_to_shape(gb, b_shape) if n[1] else None)


def _solve_fwd(K, a, b):
    x = K.linalg_solve(a, b)
    return x, (a, x, b.shape)


defrule("linalg_solve", _solve_fwd, _solve_bwd)


def _cholesky_fwd(K, a):
    l = K.linalg_cholesky(a)
    return l, l


defrule("linalg_cholesky", _cholesky_fwd, lambda K, l, g, n: (K.linalg_cholesky_bwd(l, g),))


def _qr_fwd(K, a, *, mode="reduced"):
    q, r = K.linalg_qr(a, mode)
    return _pack(K, a.shape[:-2], (q, r), a.dtype), (a, q, r, mode)


def _qr_bwd(K, s, g, n):
    a, q, r, mode = s
    gq, gr = _unpack(K, g, a.shape[:-2], (q.shape, r.shape))
    return (K.linalg_qr_bwd(a, q, r, gq, gr, mode),)


defrule("linalg_qr", _qr_fwd, _qr_bwd)


def _svd_fwd(K, a, *, full_matrices=True):
    u, sv, vh = K.linalg_svd(a, full_matrices)
    return _pack(K, a.shape[:-2], (u, sv, vh), a.dtype), (u, sv, vh)


def _svd_bwd(K, s, g, n):
    u, sv, vh = s
    gu, gs, gvh = _unpack(K, g, sv.shape[:-1], (u.shape, sv.shape, vh.shape))
    return (K.linalg_svd_bwd(u, sv, vh, gu, gs, gvh),)


defrule("linalg_svd", _svd_fwd, _svd_bwd)


def _eigh_fwd(K, a, *, upper=False):
    w, v = K.linalg_eigh(a, upper)
    return _pack(K, a.shape[:-2], (w, v), a.dtype), (w, v)


def _eigh_bwd(K, s, g, n):
    w, v = s
    gw, gv = _unpack(K, g, w.shape[:-1], (w.shape, v.shape))
    return (K.linalg_eigh_bwd(w, v, gw, gv),)


defrule("linalg_eigh", _eigh_fwd, _eigh_bwd)
defrule("linalg_det", lambda K, a: (K.linalg_det(a), a), lambda K, a, g, n: (K.linalg_det_bwd(a, g),))


def _slogdet_fwd(K, a):
    sign, logabs = K.linalg_slogdet(a)
    return K.stack([sign, logabs], -1), a


def _slogdet_bwd(K, a, g, n):
    return (K.linalg_slogdet_bwd(a, K.ascontiguous(g[..., 1])),)


defrule("linalg_slogdet", _slogdet_fwd, _slogdet_bwd)
