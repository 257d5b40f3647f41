"""CUDA kernels of the linalg family: cuBLAS through CuPy (strict float32), or direct cuBLAS calls
inside a CUDA graph capture scope (:mod:`.gemm`); the decompositions through cupy.linalg
(cuSOLVER), running the spec's formulas with ``xp=cupy``."""

from __future__ import annotations

import cupy
import cupyx
import numpy as np

from ...spec import linalg as _s
from . import build
from . import gemm as _gemm
from .base import _EW_PER_BLOCK, _ND, _THREADS, _dev
from .elementwise import _BIN_L, _OP_ADD, _bin_launcher
from .reduce import _reduce
from .shape import swap_adjacent_at_depth


def bmm(a, b):
    return _gemm.matmul(a, b)


# ---- linear algebra (cuBLAS through CuPy, strict float32) -----------------------------------


def matmul(a, b):
    return _gemm.matmul(a, b)  # cupy.matmul, or direct cuBLAS where a CUDA graph is captured


def matmul_t(a, b, ta=False, tb=False):
    # the swapped operands as contiguous copies, the products' inputs the rules gave before matmul_t
    # (graph capture's direct cuBLAS path takes contiguous batches)
    if ta:
        a = swap_adjacent_at_depth(a, a.shape, a.ndim - 2)
    if tb:
        b = swap_adjacent_at_depth(b, b.shape, b.ndim - 2)
    return _gemm.matmul(a, b)


def linear(x, w, b=None):
    x = _dev(x)
    x2 = x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1])  # not -1: in_features may be 0
    y = _gemm.matmul(x2, w.T)  # the transpose is a cuBLAS operand flag, not a copy
    if b is not None:
        if (type(b) is _ND and type(y) is _ND and b.dtype == y.dtype and y.dtype in build._FLOAT_NAME
                and b.ndim == 1 and b._c_contiguous and y._c_contiguous and y.size and b.shape[0] == y.shape[-1]):
            dt, n = y.dtype, y.size
            L = _BIN_L.get((dt, _OP_ADD, 3)) or _bin_launcher(dt, _OP_ADD, 3)
            L((n + _EW_PER_BLOCK - 1) // _EW_PER_BLOCK, _THREADS, y.data.ptr, b.data.ptr, y.data.ptr, n, b.shape[0])
        else:
            y += b
    return y.reshape(x.shape[:-1] + (w.shape[0],))


def linear_bwd(x, w, g, need_x=True, need_w=True, need_b=True):
    rows = int(np.prod(g.shape[:-1]))  # not -1: a zero-width x (in_features 0) has no rows to infer
    g2 = g.reshape(rows, g.shape[-1])
    dx = _gemm.matmul(g2, w).reshape(x.shape) if need_x else None
    dw = _gemm.matmul(g2.T, x.reshape(rows, x.shape[-1])) if need_w else None
    db = _reduce(g2, (0,), False, 0, "linear_bwd") if need_b else None
    return dx, dw, db


# ---- decompositions: cuSOLVER through cupy.linalg, the formulas of the spec ------------------
# cupyx.errstate(linalg="raise") makes cuSOLVER's info checked (a synchronisation, as torch does):
# a singular or not positive-definite matrix raises, and the spec's cores give NaN for it, as on the host.


def _c(x):
    """``x`` row-major contiguous (``ascontiguousarray`` would make a 0-d result 1-D)."""
    return x if x.flags.c_contiguous else cupy.ascontiguousarray(x)


def _raising(fn):
    with cupyx.errstate(linalg="raise"):
        return fn()


def _per_matrix(fn, a, n_out):
    """``fn`` on each matrix of a batch (for cuSOLVER routines CuPy runs on one matrix only)."""
    if a.ndim == 2:
        return fn(a)
    batch = a.shape[:-2]
    flat = a.reshape((-1,) + a.shape[-2:])
    outs = [fn(flat[i]) for i in range(flat.shape[0])]
    if not outs:
        probe = fn(cupy.zeros(a.shape[-2:], dtype=a.dtype))
        return tuple(cupy.zeros(batch + p.shape, dtype=p.dtype) for p in probe)
    return tuple(cupy.stack([o[j] for o in outs]).reshape(batch + outs[0][j].shape) for j in range(n_out))


def linalg_solve(a, b):
    return _c(_raising(lambda: _s.solve_core(_dev(a), _dev(b), xp=cupy)))


def linalg_cholesky(a):
    return _c(_raising(lambda: _s.cholesky_core(_dev(a), xp=cupy)))


def linalg_cholesky_bwd(l, g):
    return _c(_raising(lambda: _s.cholesky_vjp_core(_dev(l), _dev(g), xp=cupy)))


def linalg_qr(a, mode):
    a = _dev(a)
    if a.size == 0 or a.ndim == 2:
        q, r = _s.qr_core(a, mode, xp=cupy)
    else:
        q, r = _per_matrix(lambda m: _s.qr_core(m, "complete" if mode == "complete" else "reduced", xp=cupy), a, 2)
        if mode == "r":
            q = cupy.zeros((0,), dtype=a.dtype)
    return _c(q), _c(r)


def linalg_qr_bwd(a, q, r, gq, gr, mode):
    return _c(_raising(lambda: _s.qr_vjp_core(_dev(a), _dev(q), _dev(r), _dev(gq), _dev(gr), mode, xp=cupy)))


def linalg_svd(a, full_matrices):
    return tuple(_c(x) for x in _s.svd_core(_dev(a), full_matrices, xp=cupy))


def linalg_svd_bwd(u, s, vh, gu, gs, gvh):
    return _c(_s.svd_vjp_core(_dev(u), _dev(s), _dev(vh), _dev(gu), _dev(gs), _dev(gvh), xp=cupy))


def linalg_eigh(a, upper):
    return tuple(_c(x) for x in _s.eigh_core(_dev(a), upper, xp=cupy))


def linalg_eigh_bwd(w, v, gw, gv):
    return _c(_s.eigh_vjp_core(_dev(w), _dev(v), _dev(gw), _dev(gv), xp=cupy))


def linalg_det(a):
    a = _dev(a)
    if a.shape[-1] == 0:
        return cupy.ones(a.shape[:-2], dtype=a.dtype)
    return _c(cupy.linalg.det(a))


def linalg_det_bwd(a, g):
    return _c(_s.det_vjp_core(_dev(a), _dev(g), xp=cupy))


def linalg_slogdet(a):
    return tuple(_c(x) for x in _s.slogdet_core(_dev(a), xp=cupy))


def linalg_slogdet_bwd(a, g):
    return _c(_raising(lambda: _s.slogdet_vjp_core(_dev(a), _dev(g), xp=cupy)))
