"""CUDA kernels of the loss family: mean squared error and the fused NLL loss (``src/loss.cu``)."""

from __future__ import annotations

import builtins

import cupy
import numpy as np

from ..host import loss as host_loss
from ..host.base import _c
from . import build
from .base import _THREADS, _contig, _dev
from .build import blocks, ftype, launch

build.declare("loss", [f"{k}<{t}>" for k in ("nll_fwd_kernel", "nll_scale_kernel", "nll_bwd_kernel")
                       for t in build.FLOATS])


def mse_loss(yhat, target):
    d = _dev(yhat) - _dev(target)
    if d.size == 0:
        return cupy.asarray(np.nan, dtype=yhat.dtype)
    return (cupy.vdot(d, d) / _c(d, d.size)).astype(yhat.dtype, copy=False)


def mse_loss_bwd(yhat, target, g):
    d = (_dev(yhat) - _dev(target)) * (_c(yhat, 2.0 / builtins.max(yhat.size, 1)) * _dev(g).astype(yhat.dtype))
    return d, -d


def _nll_fused(logp, target, weight):
    """(logp, target, weight) ready for the fused NLL kernels, or None for the generic path."""
    logp, target = _dev(logp), _dev(target)
    if (logp.ndim != 2 or logp.dtype not in build._FLOAT_NAME or target.dtype != np.int64 or target.ndim != 1
            or target.shape[0] != logp.shape[0] or logp.shape[1] == 0):
        return None
    if weight is not None:
        weight = _dev(weight)
        if weight.dtype != logp.dtype or weight.shape != (logp.shape[1],):
            return None
        weight = _contig(weight)
    return _contig(logp), _contig(target), weight


def nll_loss(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    f = _nll_fused(logp, target, weight)
    if f is not None:
        lp, t, w = f
        M, C = lp.shape
        ty = ftype(lp.dtype, "nll_loss")
        mode = {"none": 0, "sum": 1}.get(reduction, 2)
        out = cupy.empty((M,) if mode == 0 else (), dtype=lp.dtype)
        args = (lp, t, w, out, np.int64(M), np.int64(C), np.int64(ignore_index), np.int32(mode),
                np.int32(w is not None))
        if mode == 0:
            launch("loss", f"nll_fwd_kernel<{ty}>", blocks(M, _THREADS), _THREADS, args)
        else:
            launch("loss", f"nll_fwd_kernel<{ty}>", 1, 1024, args)
        return out
    return _nll_loss_generic(logp, target, weight, ignore_index, reduction)


def _nll_loss_generic(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    return host_loss.nll_loss(_dev(logp), _dev(target), None if weight is None else _dev(weight), ignore_index,
                              reduction, xp=cupy)


def nll_loss_bwd(logp, target, weight, ignore_index, reduction, g):
    f = _nll_fused(logp, target, weight)
    if f is not None:
        lp, t, w = f
        M, C = lp.shape
        g = _contig(_dev(g).astype(lp.dtype, copy=False))
        if g.size == (M if reduction == "none" else 1):
            ty = ftype(lp.dtype, "nll_loss_bwd")
            out = cupy.empty((M, C), dtype=lp.dtype)
            if reduction not in ("none", "sum"):
                scale = cupy.empty((), dtype=lp.dtype)
                launch("loss", f"nll_scale_kernel<{ty}>", 1, 1024,
                       (t, w, g, scale, np.int64(M), np.int64(C), np.int64(ignore_index), np.int32(w is not None)))
                g = scale
            launch("loss", f"nll_bwd_kernel<{ty}>", blocks(M * C, _THREADS), _THREADS,
                   (t, w, g, out, np.int64(M), np.int64(C), np.int64(ignore_index), np.int32(w is not None),
                    np.int32(reduction == "none")))
            return out
    return _nll_loss_bwd_generic(logp, target, weight, ignore_index, reduction, g)


def _nll_loss_bwd_generic(logp, target, weight, ignore_index, reduction, g):
    return host_loss.nll_loss_bwd(_dev(logp), _dev(target), None if weight is None else _dev(weight), ignore_index,
                                  reduction, _dev(g), xp=cupy)
