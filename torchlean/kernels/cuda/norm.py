"""CUDA kernels of the norm family (``src/norm.cu``): layer normalization, one group per row with
statistics in double; batch normalization in three launches each way (per-channel partial sums in
double over a (blocks, channels) grid, one thread per channel to finish them, one per element to
apply), the same arithmetic as the host kernels of :mod:`torchlean.kernels.host.norm`."""

from __future__ import annotations


import cupy
import numpy as np

from .base import _THREADS, _contig, _dev
from . import build
from .build import blocks, ftype, launch
from .reduce import reduce_sum_axis0
from .softmax import _row_block

build.declare("norm", [f"{k}<{t}, {v}>" for k in ("layer_norm_fwd_k", "layer_norm_bwd_k") for t in build.FLOATS
                       for v in ("false", "true")]
              + [f"layer_norm_fwd_reg<{t}, {n}>" for t in build.FLOATS for n in (1, 2, 4, 8)]
              + [f"{k}<{t}>" for k in ("bn_fwd_partial", "bn_fwd_stats", "bn_fwd_apply", "bn_bwd_partial",
                                       "bn_bwd_stats", "bn_bwd_apply", "bn_running") for t in build.FLOATS])


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


# ---- batch normalization ---------------------------------------------------------------------

_BN_TARGET_BLOCKS = 528   # about four blocks per SM of an H100 across all channels
_BN_MIN_PER_BLOCK = 2048  # values a block sums at least (keeps partials few for small inputs)


def _bn_split(total, channels):
    """(blocks per channel P, values per block): enough blocks to fill the GPU, none too small."""
    p = max(1, min(-(-_BN_TARGET_BLOCKS // max(channels, 1)), -(-total // _BN_MIN_PER_BLOCK)))
    return p, -(-total // p)


def batch_norm_fwd(x, gamma, beta, eps):
    """``(y, mean, rstd)`` of x (N, C, S) normalized per channel (biased variance), in three launches."""
    x = _contig(_dev(x))
    t = ftype(x.dtype, "batch_norm_fwd")
    n, c, s = x.shape
    gamma = _contig(_dev(gamma).astype(x.dtype, copy=False))
    beta = _contig(_dev(beta).astype(x.dtype, copy=False))
    y = cupy.empty(x.shape, dtype=x.dtype)
    mean, rstd = cupy.empty(c, dtype=x.dtype), cupy.empty(c, dtype=x.dtype)
    total = n * s
    if c == 0 or total == 0:
        return y, mean, rstd
    p, per = _bn_split(total, c)
    part = cupy.empty((c, p, 2), dtype=np.float64)
    stat = cupy.empty(c, dtype=np.float64)
    dims = (np.int64(n), np.int64(c), np.int64(s))
    launch("norm", f"bn_fwd_partial<{t}>", (p, c), _THREADS, (x, part, *dims, np.int64(per)))
    launch("norm", f"bn_fwd_stats<{t}>", blocks(c, _THREADS), _THREADS,
           (x, part, mean, rstd, stat, *dims, np.int64(p), np.float64(eps)))
    launch("norm", f"bn_fwd_apply<{t}>", min(blocks(x.size, _THREADS), 65536), _THREADS,
           (x, gamma, beta, mean, stat, y, np.int64(x.size), np.int64(c), np.int64(s)))
    return y, mean, rstd


def batch_norm_running_update(x, running_mean, running_var, momentum):
    """The running averages of batch normalization updated in place from x (N, C, S): one
    statistics pass (the forward's partial sums) and one launch for the update, in double."""
    x = _contig(_dev(x))
    n, c, s = x.shape
    total = n * s
    if c == 0 or total <= 1 or (running_mean is None and running_var is None):
        return
    for buf in (running_mean, running_var):
        if buf is not None and (buf.dtype != x.dtype or not buf._c_contiguous or buf.shape != (c,)):
            raise ValueError(f"batch_norm_running_update: running buffers must be contiguous ({c},) {x.dtype}")
    t = ftype(x.dtype, "batch_norm_running_update")
    p, per = _bn_split(total, c)
    part = cupy.empty((c, p, 2), dtype=np.float64)
    dims = (np.int64(n), np.int64(c), np.int64(s))
    launch("norm", f"bn_fwd_partial<{t}>", (p, c), _THREADS, (x, part, *dims, np.int64(per)))
    rm = running_mean if running_mean is not None else running_var
    rv = running_var if running_var is not None else running_mean
    launch("norm", f"bn_running<{t}>", blocks(c, _THREADS), _THREADS,
           (x, part, rm, rv, *dims, np.int64(p), np.float64(momentum),
            np.int32(running_mean is not None), np.int32(running_var is not None)))


def batch_norm_bwd(x, gamma, mean, rstd, g):
    """``(dx, dgamma, dbeta)`` of :func:`batch_norm_fwd` for the cotangent ``g``."""
    x = _contig(_dev(x))
    t = ftype(x.dtype, "batch_norm_bwd")
    n, c, s = x.shape
    g = _contig(_dev(g).astype(x.dtype, copy=False))
    gamma = _contig(_dev(gamma).astype(x.dtype, copy=False))
    mean = _contig(_dev(mean).astype(x.dtype, copy=False))
    rstd = _contig(_dev(rstd).astype(x.dtype, copy=False))
    dx = cupy.empty(x.shape, dtype=x.dtype)
    dgamma, dbeta = cupy.zeros(c, dtype=x.dtype), cupy.zeros(c, dtype=x.dtype)
    total = n * s
    if c == 0 or total == 0:
        return dx, dgamma, dbeta
    p, per = _bn_split(total, c)
    part = cupy.empty((c, p, 2), dtype=np.float64)
    sums = cupy.empty((c, 2), dtype=np.float64)
    dims = (np.int64(n), np.int64(c), np.int64(s))
    launch("norm", f"bn_bwd_partial<{t}>", (p, c), _THREADS, (x, g, mean, rstd, part, *dims, np.int64(per)))
    launch("norm", f"bn_bwd_stats<{t}>", blocks(c, _THREADS), _THREADS,
           (part, dgamma, dbeta, sums, np.int64(c), np.int64(p)))
    launch("norm", f"bn_bwd_apply<{t}>", min(blocks(x.size, _THREADS), 65536), _THREADS,
           (x, g, gamma, mean, rstd, sums, dx, np.int64(x.size), np.int64(c), np.int64(s), np.float64(total)))
    return dx, dgamma, dbeta
