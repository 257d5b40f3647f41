"""Normalization: the reference meaning of layer norm and batch norm (PyTorch semantics,
biased variance, ``eps`` default 1e-5).

* ``layer_norm(x, gamma, beta; normalized_ndim, eps)`` normalizes over the
  trailing ``normalized_ndim`` axes; ``gamma``/``beta`` have the shape of those
  axes. ``layer_norm_noaffine(x; normalized_ndim, eps)`` omits them.
* ``batch_norm_train(x, gamma, beta; eps)``: ``x`` is ``(N, C, *spatial)`` or
  ``(N, C)``; each channel is normalized with the statistics of the batch.
  ``batch_norm_eval(x, gamma, beta, mean, var; eps)`` uses given running
  statistics (not differentiable in them). ``batch_norm_chw(x, gamma, beta; eps)``
  is the seeds' batch norm of one ``(C, H, W)`` image (each channel over H*W).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from .attrs import check_eps, check_int
from .registry import defspec


# ---- shared normalization core --------------------------------------------------------------

def _normalize(x, axes, eps):
    """(xhat, rstd) with statistics over ``axes`` (biased variance), keepdims."""
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    return (x - mu) * rstd, rstd


def _normalize_vjp(gxhat, xhat, rstd, axes):
    """Cotangent of x for xhat = (x - mean) * rstd, given the cotangent of xhat."""
    return rstd * (gxhat - gxhat.mean(axis=axes, keepdims=True)
                   - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True))


# ---- layer norm -----------------------------------------------------------------------------

def _ln_axes(shape, normalized_ndim, op):
    check_int(op, "normalized_ndim", normalized_ndim, 1)
    if normalized_ndim > len(shape):
        raise ShapeError(f"{op}: normalized_ndim {normalized_ndim} is larger than the number of axes "
                         f"of the input {tuple(shape)}")
    norm = tuple(shape[len(shape) - normalized_ndim:])
    if math.prod(norm) == 0:
        raise ShapeError(f"{op}: normalized axes {norm} of input {tuple(shape)} are empty")
    return norm


def _layer_norm_shape(x, gamma, beta, *, normalized_ndim, eps=1e-5):
    norm = _ln_axes(x, normalized_ndim, "layer_norm")
    check_eps("layer_norm", eps)
    for name, s in (("gamma", gamma), ("beta", beta)):
        if tuple(s) != norm:
            raise ShapeError(f"layer_norm: {name} has shape {tuple(s)}, expected the normalized shape "
                             f"{norm} of input {tuple(x)}")
    return tuple(x)


def _layer_norm(x, gamma, beta, *, normalized_ndim, eps=1e-5):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    xhat, _ = _normalize(x, axes, eps)
    return xhat * gamma + beta


def _layer_norm_vjp(g, x, gamma, beta, *, normalized_ndim, eps=1e-5):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    xhat, rstd = _normalize(x, axes, eps)
    dx = _normalize_vjp(g * gamma, xhat, rstd, axes)
    return dx, (g * xhat).sum(axis=lead), g.sum(axis=lead)


_NORM_WHY = "one row kernel each way with float64 statistics, where the formula is some eight passes"
defspec("layer_norm", _layer_norm, _layer_norm_vjp, _layer_norm_shape, 3, why=_NORM_WHY)


def _layer_norm_noaffine_shape(x, *, normalized_ndim, eps=1e-5):
    _ln_axes(x, normalized_ndim, "layer_norm_noaffine")
    check_eps("layer_norm_noaffine", eps)
    return tuple(x)


def _layer_norm_noaffine(x, *, normalized_ndim, eps=1e-5):
    return _normalize(x, tuple(range(x.ndim - normalized_ndim, x.ndim)), eps)[0]


def _layer_norm_noaffine_vjp(g, x, *, normalized_ndim, eps=1e-5):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    xhat, rstd = _normalize(x, axes, eps)
    return (_normalize_vjp(g, xhat, rstd, axes),)


defspec("layer_norm_noaffine", _layer_norm_noaffine, _layer_norm_noaffine_vjp,
        _layer_norm_noaffine_shape, 1, why=_NORM_WHY)


# ---- batch norm -----------------------------------------------------------------------------

def _bn_check(op, x, params, eps):
    """x (N, C, *spatial); every entry of ``params`` (name -> shape) must be (C,)."""
    check_eps(op, eps)
    if len(x) < 2:
        raise ShapeError(f"{op}: input must be (N, C) or (N, C, *spatial), got shape {tuple(x)}")
    c = x[1]
    for name, s in params.items():
        if tuple(s) != (c,):
            raise ShapeError(f"{op}: {name} has shape {tuple(s)}, expected ({c},) for input {tuple(x)}")
    return tuple(x)


def _chan(v, ndim):
    """A per-channel vector (C,) shaped to broadcast against (N, C, *spatial)."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _bn_axes(ndim):
    return (0,) + tuple(range(2, ndim))


def _batch_norm_train(x, gamma, beta, *, eps=1e-5):
    xhat, _ = _normalize(x, _bn_axes(x.ndim), eps)
    return xhat * _chan(gamma, x.ndim) + _chan(beta, x.ndim)


def _batch_norm_train_vjp(g, x, gamma, beta, *, eps=1e-5):
    axes = _bn_axes(x.ndim)
    xhat, rstd = _normalize(x, axes, eps)
    dx = _normalize_vjp(g * _chan(gamma, x.ndim), xhat, rstd, axes)
    return dx, (g * xhat).sum(axis=axes), g.sum(axis=axes)


defspec("batch_norm_train", _batch_norm_train, _batch_norm_train_vjp,
        lambda x, gamma, beta, *, eps=1e-5: _bn_check("batch_norm_train", x,
                                                      {"gamma": gamma, "beta": beta}, eps), 3, why=_NORM_WHY)


def _batch_norm_eval(x, gamma, beta, mean, var, *, eps=1e-5):
    rstd = 1.0 / np.sqrt(var + eps)
    return (x - _chan(mean, x.ndim)) * _chan(rstd * gamma, x.ndim) + _chan(beta, x.ndim)


def _batch_norm_eval_vjp(g, x, gamma, beta, mean, var, *, eps=1e-5):
    axes = _bn_axes(x.ndim)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - _chan(mean, x.ndim)) * _chan(rstd, x.ndim)
    return g * _chan(rstd * gamma, x.ndim), (g * xhat).sum(axis=axes), g.sum(axis=axes), None, None


defspec("batch_norm_eval", _batch_norm_eval, _batch_norm_eval_vjp,
        lambda x, gamma, beta, mean, var, *, eps=1e-5: _bn_check(
            "batch_norm_eval", x, {"gamma": gamma, "beta": beta, "mean": mean, "var": var}, eps), 5,
        why="one scale-and-shift per channel with the running statistics as inputs that take no gradient")


def _batch_norm_chw_shape(x, gamma, beta, *, eps=1e-5):
    if len(x) != 3:
        raise ShapeError(f"batch_norm_chw: input must be one (C, H, W) image, got shape {tuple(x)}")
    return _bn_check("batch_norm_chw", (1,) + tuple(x), {"gamma": gamma, "beta": beta}, eps)[1:]


defspec("batch_norm_chw",
        lambda x, gamma, beta, *, eps=1e-5: _batch_norm_train(x[None], gamma, beta, eps=eps)[0],
        lambda g, x, gamma, beta, *, eps=1e-5: (lambda r: (r[0][0], r[1], r[2]))(
            _batch_norm_train_vjp(g[None], x[None], gamma, beta, eps=eps)),
        _batch_norm_chw_shape, 3, why="the seeds' op: batch norm of one (C, H, W) image")
