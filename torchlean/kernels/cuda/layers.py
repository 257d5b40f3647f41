"""Native CUDA kernels of the layer surface where one launch replaces a loop of CuPy calls:
the selective scan (the host loops over time: a kernel per step there, one kernel here) and
layer normalization (statistics, normalization and affine map in one row kernel).

Semantics are those of :mod:`torchlean.kernels.host_nn`; the other layer kernels run that
module's own code on CuPy (:mod:`torchlean.kernels.cuda.ported`).
"""

from __future__ import annotations

import math

import cupy
import numpy as np

from .build import blocks, ftype, launch
from .core import _contig, _dev, reduce_sum_axis0, _row_block

_THREADS = 256


def _scan_inputs(a, b, x, h0, var, name):
    x = _contig(_dev(x))
    dtype = x.dtype
    t = ftype(dtype, name)
    L, S = x.shape[-2], x.shape[-1]
    lead = x.shape[:-2]
    shape_as = x.shape if var else (S,)

    def prep(v, shape):
        return _contig(cupy.broadcast_to(_dev(v), shape).astype(dtype, copy=False))

    return t, prep(a, shape_as), prep(b, shape_as), x, prep(h0, lead + (S,)), math.prod(lead), L, S


def _scan_fwd(a, b, x, h0, var):
    name = "selective_scan_diag_var_fwd" if var else "selective_scan_diag_fwd"
    t, a, b, x, h0, B, L, S = _scan_inputs(a, b, x, h0, var, name)
    h = cupy.empty(x.shape, dtype=x.dtype)
    launch("nn", f"scan_fwd<{t}, {'true' if var else 'false'}>", blocks(B * S, _THREADS) if L else 0, _THREADS,
           (a, b, x, h0, h, np.int64(B), np.int64(L), np.int64(S)))
    return h


def _scan_bwd(a, b, x, h0, h, g, var):
    name = "selective_scan_diag_var_bwd" if var else "selective_scan_diag_bwd"
    t, a, b, x, h0, B, L, S = _scan_inputs(a, b, x, h0, var, name)
    h = _contig(_dev(h).astype(x.dtype, copy=False))
    g = _contig(cupy.broadcast_to(_dev(g), x.shape).astype(x.dtype, copy=False))
    dx = cupy.empty(x.shape, dtype=x.dtype)
    dh0 = cupy.zeros(h0.shape, dtype=x.dtype)
    if var:
        da, db = cupy.empty(x.shape, dtype=x.dtype), cupy.empty(x.shape, dtype=x.dtype)
    else:
        da, db = cupy.zeros((B, S), dtype=x.dtype), cupy.zeros((B, S), dtype=x.dtype)
    launch("nn", f"scan_bwd<{t}, {'true' if var else 'false'}>", blocks(B * S, _THREADS) if L else 0, _THREADS,
           (a, b, x, h0, h, g, dx, dh0, da, db, np.int64(B), np.int64(L), np.int64(S)))
    if not var:
        da, db = reduce_sum_axis0(da), reduce_sum_axis0(db)
    return da, db, dx, dh0


def selective_scan_diag_fwd(a, b, x, h0):
    return _scan_fwd(a, b, x, h0, False)


def selective_scan_diag_bwd(a, b, x, h0, h, g):
    return _scan_bwd(a, b, x, h0, h, g, False)


def selective_scan_diag_var_fwd(a, b, x, h0):
    return _scan_fwd(a, b, x, h0, True)


def selective_scan_diag_var_bwd(a, b, x, h0, h, g):
    return _scan_bwd(a, b, x, h0, h, g, True)


def _row_group(n):
    """(block flag, threads, blocks per row count): a warp per row up to 1024, else a block of 256."""
    return ("false", _THREADS, lambda rows: blocks(rows, _THREADS // 32)) if n <= 1024 else \
        ("true", _THREADS, lambda rows: rows)


def layer_norm_fwd(x, gamma, beta, eps):
    x = _contig(_dev(x))
    t = ftype(x.dtype, "layer_norm_fwd")
    rows, n = x.shape
    gamma = None if gamma is None else _contig(_dev(gamma).astype(x.dtype, copy=False))
    beta = None if beta is None else _contig(_dev(beta).astype(x.dtype, copy=False))
    y = cupy.empty(x.shape, dtype=x.dtype)
    mean, rstd = cupy.empty(rows, dtype=x.dtype), cupy.empty(rows, dtype=x.dtype)
    flags = (1 if gamma is not None else 0) | (2 if beta is not None else 0)
    args = (x, x if gamma is None else gamma, x if beta is None else beta, y, mean, rstd, np.int64(rows),
            np.int64(n), np.float64(eps), np.int32(flags))
    tn = _row_block(n, 8) if n > 32 else None
    if tn is not None:  # the row in registers: x is read once
        threads, k = tn
        launch("nn", f"layer_norm_fwd_reg<{t}, {k}>", rows, threads, args)
    else:
        flag, threads, nb = _row_group(n)
        launch("nn", f"layer_norm_fwd_k<{t}, {flag}>", nb(rows) if n else 0, threads, args)
    return y, mean, rstd


def layer_norm_bwd(x, gamma, mean, rstd, g):
    x = _contig(_dev(x))
    t = ftype(x.dtype, "layer_norm_bwd")
    rows, n = x.shape
    g = _contig(_dev(g).astype(x.dtype, copy=False))
    mean = _contig(_dev(mean).astype(x.dtype, copy=False))
    rstd = _contig(_dev(rstd).astype(x.dtype, copy=False))
    has_gamma = gamma is not None
    gamma = _contig(_dev(gamma).astype(x.dtype, copy=False)) if has_gamma else x
    dx = cupy.empty(x.shape, dtype=x.dtype)
    # [g * xhat, g] side by side: one column sum (one launch or two) for dgamma and dbeta.
    gxhat = cupy.empty((rows, 2 * n), dtype=x.dtype) if has_gamma else dx
    flag, threads, nb = _row_group(n)
    launch("nn", f"layer_norm_bwd_k<{t}, {flag}>", nb(rows) if n else 0, threads,
           (x, gamma, mean, rstd, g, dx, gxhat, np.int64(rows), np.int64(n), np.int32(has_gamma)))
    if not has_gamma:
        return dx, None, None
    s = reduce_sum_axis0(gxhat)
    return dx, s[:n], s[n:]
