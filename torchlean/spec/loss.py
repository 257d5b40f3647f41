"""Losses: the reference meaning of mean squared error, NLL and cross entropy.

* ``mse_loss(yhat, target)`` is ``mean((yhat - target) ** 2)``, differentiable in both.
* ``cross_entropy`` and ``nll_loss`` follow PyTorch for integer class targets:
  logits ``(C,)`` with a 0-d target, ``(N, C)`` with ``(N,)``, or
  ``(N, C, d1, ...)`` with ``(N, d1, ...)``; class weights, ``ignore_index``,
  reductions ``"mean"`` (weighted mean over non-ignored targets), ``"sum"``,
  ``"none"``, and (cross_entropy only) ``label_smoothing`` in [0, 1):
  ``(1 - eps) * nll + eps / C * sum_c w_c * (-log p_c)``.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import DomainError, DTypeError, IndexRangeError, ShapeError, fmt_shapes
from .registry import defspec
from .softmax import log_softmax, softmax


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


defspec("mse_loss", _mse, _mse_vjp, _mse_shape, 2, why="one fused reduction, where mean((a - b) ** 2) is three passes")


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
        lambda x, **a: class_target_shape("cross_entropy", x, **a), 1,
        why="log_softmax, NLL and label smoothing over rows in one op: the log-probabilities are kept once")
