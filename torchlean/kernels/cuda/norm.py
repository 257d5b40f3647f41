"""CUDA kernels of the norm family: layer normalization, one group per row with statistics in double
(``src/norm.cu``). Batch normalization has no native kernel: ``batch_norm_fwd`` and
``batch_norm_bwd`` are the host kernels of :mod:`torchlean.kernels.host.norm` over CuPy arrays
(``xp=cupy``)."""

from __future__ import annotations

import functools

import cupy
import numpy as np

from .base import _THREADS, _contig, _dev
from . import build
from .build import blocks, ftype, launch
from .reduce import reduce_sum_axis0
from .softmax import _row_block
from ..host import norm as _host

build.declare("norm", [f"{k}<{t}, {v}>" for k in ("layer_norm_fwd_k", "layer_norm_bwd_k") for t in build.FLOATS
                       for v in ("false", "true")]
              + [f"layer_norm_fwd_reg<{t}, {n}>" for t in build.FLOATS for n in (1, 2, 4, 8)])


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
        launch("norm", f"layer_norm_fwd_reg<{t}, {k}>", rows, threads, args)
    else:
        flag, threads, nb = _row_group(n)
        launch("norm", f"layer_norm_fwd_k<{t}, {flag}>", nb(rows) if n else 0, threads, args)
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
    launch("norm", f"layer_norm_bwd_k<{t}, {flag}>", nb(rows) if n else 0, threads,
           (x, gamma, mean, rstd, g, dx, gxhat, np.int64(rows), np.int64(n), np.int32(has_gamma)))
    if not has_gamma:
        return dx, None, None
    s = reduce_sum_axis0(gxhat)
    return dx, s[:n], s[n:]


# ---- batch normalization: the host kernels over CuPy arrays (no native kernels yet) ----------

batch_norm_fwd = functools.partial(_host.batch_norm_fwd, xp=cupy)
batch_norm_bwd = functools.partial(_host.batch_norm_bwd, xp=cupy)
