"""Softmax family, losses and dropout: their reference meaning.

* ``softmax(x; axis=-1)`` and ``log_softmax(x; axis=-1)`` normalise along one
  axis; log_softmax is computed directly as ``x - max - log sum exp(x - max)``,
  never as ``log(softmax(x))``, so it stays finite for large logits.
* ``hard_masked_softmax(x; mask)`` is the softmax over the last axis restricted to
  the entries where ``mask`` (0/1 or bool, broadcastable to ``x``) is non-zero:
  blocked weights are exactly 0 and a fully blocked row is all zeros (with a zero
  gradient).
* ``mse_loss(yhat, target)`` is ``mean((yhat - target) ** 2)``, differentiable in both.
* ``cross_entropy`` and ``nll_loss`` follow PyTorch for integer class targets:
  logits ``(C,)`` with a 0-d target, ``(N, C)`` with ``(N,)``, or
  ``(N, C, d1, ...)`` with ``(N, d1, ...)``; class weights, ``ignore_index``,
  reductions ``"mean"`` (weighted mean over non-ignored targets), ``"sum"``,
  ``"none"``, and (cross_entropy only) ``label_smoothing`` in [0, 1):
  ``(1 - eps) * nll + eps / C * sum_c w_c * (-log p_c)``.
* ``dropout(x; p, seed, counter)`` multiplies by a deterministic mask: the
  counter-based generator's ``bernoulli_mask(x.shape, 1 - p, seed, counter)``
  scaled by ``1 / (1 - p)``; the same seed and counter give the same mask on every
  device and in this spec.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> SPEC["softmax"].forward(np.array([0.0, 0.0])).tolist()
    [0.5, 0.5]
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import DomainError, DTypeError, IndexRangeError, ShapeError, fmt_shapes
from ..kernels.host import bernoulli_mask
from ..shape import broadcast_shapes, norm_axis
from .registry import defspec


# ---- softmax / log_softmax ------------------------------------------------------------------

def _softmax_shape(op):
    def shape(x, *, axis=-1):
        x = tuple(x)
        if len(x) == 0:
            raise ShapeError(f"{op}: input of shape {x} needs at least 1 axis")
        norm_axis(axis, len(x), op)
        return x
    return shape


def softmax(x, axis=-1):
    """exp(x - max) / sum exp(x - max) along ``axis``."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    """x - max - log sum exp(x - max) along ``axis`` (never log of softmax)."""
    z = x - np.max(x, axis=axis, keepdims=True)
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def _softmax_vjp(g, x, *, axis=-1):
    y = softmax(x, axis)
    return (y * (g - np.sum(g * y, axis=axis, keepdims=True)),)


def _log_softmax_vjp(g, x, *, axis=-1):
    return (g - softmax(x, axis) * np.sum(g, axis=axis, keepdims=True),)


defspec("softmax", lambda x, *, axis=-1: softmax(x, axis), _softmax_vjp, _softmax_shape("softmax"), 1)
defspec("log_softmax", lambda x, *, axis=-1: log_softmax(x, axis), _log_softmax_vjp,
        _softmax_shape("log_softmax"), 1)


# ---- hard_masked_softmax --------------------------------------------------------------------

def _masked_shape(x, *, mask):
    x = tuple(x)
    m = np.asarray(mask)
    if len(x) == 0:
        raise ShapeError("hard_masked_softmax: input of shape () needs at least 1 axis")
    if m.dtype != bool:
        if m.dtype.kind not in "iuf":
            raise DTypeError(f"hard_masked_softmax: mask must be bool or 0/1 numbers, got dtype {m.dtype}")
        if m.size and not np.all((m == 0) | (m == 1)):
            bad = m[(m != 0) & (m != 1)].ravel()[0]
            raise DomainError(f"hard_masked_softmax: mask entries must be 0 or 1, got {bad}")
    try:
        out = broadcast_shapes(m.shape, x, op="hard_masked_softmax")
    except ShapeError:
        out = None
    if out != x:
        raise ShapeError(f"hard_masked_softmax: mask of shape {m.shape} does not broadcast to input shape {x}")
    return x


def _masked_softmax(x, *, mask):
    keep = np.broadcast_to(np.asarray(mask) != 0, x.shape)
    m = np.max(np.where(keep, x, -np.inf), axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)          # fully blocked rows: any finite shift will do
    e = np.where(keep, np.exp(x - m), 0.0)
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s > 0, s, 1.0)            # fully blocked rows stay 0, not 0/0


def _masked_softmax_vjp(g, x, *, mask):
    y = _masked_softmax(x, mask=mask)
    return (y * (g - np.sum(g * y, axis=-1, keepdims=True)),)


defspec("hard_masked_softmax", _masked_softmax, _masked_softmax_vjp, _masked_shape, 1)


# ---- mse_loss -------------------------------------------------------------------------------

def _mse_shape(a, b):
    if tuple(a) != tuple(b):
        raise ShapeError(f"mse_loss: shapes {fmt_shapes(a, b)} must be equal")
    return ()


def _mse(yhat, target):
    d = yhat - target
    return np.asarray(np.mean(d * d))


def _mse_vjp(g, yhat, target):
    d = 2.0 * (yhat - target) * np.asarray(g) / max(yhat.size, 1)
    return d, -d


defspec("mse_loss", _mse, _mse_vjp, _mse_shape, 2)


# ---- nll_loss / cross_entropy ---------------------------------------------------------------

REDUCTIONS = ("mean", "sum", "none")


def class_target_shape(op, x, *, target, weight=None, ignore_index=-100, reduction="mean",
                       label_smoothing=0.0):
    """Shape rule shared by nll_loss and cross_entropy (validates targets, weights, attributes)."""
    x = tuple(x)
    t = np.asarray(target)
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{op}: target must hold integer class indices, got dtype {t.dtype}")
    if len(x) == 0:
        raise ShapeError(f"{op}: input of shape () needs a class axis: (C,), (N, C) or (N, C, d1, ...)")
    C = x[0] if len(x) == 1 else x[1]
    want = () if len(x) == 1 else (x[0],) + x[2:]
    if t.shape != want:
        raise ShapeError(f"{op}: input of shape {x} needs a target of shape {want}, got {t.shape}")
    if not isinstance(ignore_index, numbers.Integral) or isinstance(ignore_index, bool):
        raise DomainError(f"{op}: ignore_index must be an int, got {ignore_index!r}")
    if reduction not in REDUCTIONS:
        raise DomainError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if (not isinstance(label_smoothing, numbers.Real) or isinstance(label_smoothing, bool)
            or not 0.0 <= label_smoothing < 1.0):
        raise DomainError(f"{op}: label_smoothing must lie in [0, 1), got {label_smoothing!r}")
    if weight is not None:
        w = np.asarray(weight)
        if w.dtype.kind != "f":
            raise DTypeError(f"{op}: weight must be a float array, got dtype {w.dtype}")
        if w.shape != (C,):
            raise ShapeError(f"{op}: weight of shape {w.shape} must have shape ({C},) for {C} classes")
    bad = t[(t != ignore_index) & ((t < 0) | (t >= C))]
    if bad.size:
        raise IndexRangeError(f"{op}: target {int(bad.ravel()[0])} is out of range [0, {C}) for {C} classes")
    return want if reduction == "none" else ()


def _rows(x):
    """Class axis last, leading axes folded into rows: (M, C)."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _unrows(d, shape):
    """Inverse of :func:`_rows`."""
    if len(shape) <= 2:
        return d.reshape(shape)
    return np.moveaxis(d.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],)), -1, 1)


def _picked(t, C, weight, ignore_index):
    """Per row: the target class (0 where ignored), its weight (0 where ignored), the validity."""
    t = np.asarray(t).reshape(-1)
    valid = t != ignore_index
    tc = np.where(valid, t, 0)
    w_all = np.ones(C) if weight is None else np.asarray(weight, dtype=np.float64)
    wt = np.where(valid, w_all[tc], 0.0)
    return tc, wt, valid, w_all


def _reduce(per_row, t_shape, reduction, total_weight):
    if reduction == "none":
        return per_row.reshape(t_shape)
    s = np.sum(per_row)
    return np.asarray(s / total_weight if reduction == "mean" else s)


def _row_coef(g, t_shape, reduction, total_weight, M):
    """d(loss)/d(per-row term) for each row."""
    g = np.asarray(g)
    if reduction == "none":
        return g.reshape(M)
    return np.full(M, float(g) / total_weight if reduction == "mean" else float(g))


def _nll(logp, *, target, weight=None, ignore_index=-100, reduction="mean"):
    lp = _rows(logp)
    M, C = lp.shape
    tc, wt, _, _ = _picked(target, C, weight, ignore_index)
    per_row = -wt * lp[np.arange(M), tc]
    return _reduce(per_row, np.shape(target), reduction, wt.sum())


def _nll_vjp(g, logp, *, target, weight=None, ignore_index=-100, reduction="mean"):
    M, C = _rows(logp).shape
    tc, wt, _, _ = _picked(target, C, weight, ignore_index)
    c = _row_coef(g, np.shape(target), reduction, wt.sum(), M)
    d = np.zeros((M, C))
    d[np.arange(M), tc] = -wt * c
    return (_unrows(d, logp.shape),)


defspec("nll_loss", _nll, _nll_vjp,
        lambda x, **a: class_target_shape("nll_loss", x, **a), 1)


def _cross_entropy(logits, *, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    lp = log_softmax(_rows(logits), -1)
    M, C = lp.shape
    tc, wt, valid, w_all = _picked(target, C, weight, ignore_index)
    nll = -wt * lp[np.arange(M), tc]
    smooth = -np.sum(lp * w_all, axis=-1) * valid
    per_row = (1.0 - label_smoothing) * nll + (label_smoothing / C) * smooth
    return _reduce(per_row, np.shape(target), reduction, wt.sum())


def _cross_entropy_vjp(g, logits, *, target, weight=None, ignore_index=-100, reduction="mean",
                       label_smoothing=0.0):
    x = _rows(logits)
    M, C = x.shape
    tc, wt, valid, w_all = _picked(target, C, weight, ignore_index)
    c = _row_coef(g, np.shape(target), reduction, wt.sum(), M)
    dlp = -(label_smoothing / C) * (c * valid)[:, None] * w_all[None, :]
    dlp[np.arange(M), tc] -= (1.0 - label_smoothing) * wt * c
    dx = dlp - softmax(x, -1) * np.sum(dlp, axis=-1, keepdims=True)
    return (_unrows(dx, logits.shape),)


defspec("cross_entropy", _cross_entropy, _cross_entropy_vjp,
        lambda x, **a: class_target_shape("cross_entropy", x, **a), 1)


# ---- dropout --------------------------------------------------------------------------------

def _dropout_shape(x, *, p, seed, counter):
    if (not isinstance(p, numbers.Real) or isinstance(p, bool) or not math.isfinite(p)
            or not 0.0 <= p < 1.0):
        raise DomainError(f"dropout: p must lie in [0, 1), got {p!r}")
    for name, v in (("seed", seed), ("counter", counter)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
            raise DomainError(f"dropout: {name} must be a non-negative int, got {v!r}")
    return tuple(x)


def dropout_mask(shape, p, seed, counter):
    """The float64 keep-mask of dropout (1 where kept): the kernels' counter-based generator."""
    return bernoulli_mask(tuple(shape), 1.0 - p, seed, counter, np.float64)


def _dropout(x, *, p, seed, counter):
    if p == 0:
        return x.copy()
    return x * dropout_mask(x.shape, p, seed, counter) / (1.0 - p)


def _dropout_vjp(g, x, *, p, seed, counter):
    if p == 0:
        return (np.asarray(g).copy(),)
    return (g * dropout_mask(x.shape, p, seed, counter) / (1.0 - p),)


defspec("dropout", _dropout, _dropout_vjp, _dropout_shape, 1)

__all__ = ["softmax", "log_softmax", "class_target_shape", "dropout_mask", "REDUCTIONS"]
