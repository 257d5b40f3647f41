"""Runtime rules of the softmax family, the losses and dropout (meaning: :mod:`torchlean.spec.nn`).

The softmax kernels act on the last axis with leading axes folded into rows; an
op over another axis moves that axis last and back (pure data movement). The
class-target losses fold ``(N, C, d1, ...)`` into rows ``(N * d1 * ..., C)`` the
same way. Targets and class weights are host arrays: the derived per-row
quantities (validity, picked weights, their total) are computed on the host and
uploaded once. A target that came from a CUDA tensor (``remember_device_copy``)
runs from that tensor's buffer instead.
"""

from __future__ import annotations

import numpy as np

from ...kernels.api import device_copy
from ...shape import norm_axis
from .registry import defrule


def _to_last(K, x, axis):
    return x if axis == x.ndim - 1 else K.ascontiguous(K.xp.moveaxis(x, axis, -1))


def _from_last(K, y, axis):
    return y if axis == y.ndim - 1 else K.ascontiguous(K.xp.moveaxis(y, -1, axis))


def _upload(K, a, dtype):
    """A host attribute array on ``K``'s device in ``dtype``."""
    return K.from_host(np.asarray(a), dtype)


# ---- softmax / log_softmax ------------------------------------------------------------------

def _softmax_rule(name, fwd_kernel, bwd_kernel):
    def fwd(K, x, *, axis=-1):
        ax = norm_axis(axis, x.ndim, name)
        y = getattr(K, fwd_kernel)(_to_last(K, x, ax))
        return _from_last(K, y, ax), (y, ax)

    def bwd(K, s, g, n):
        y, ax = s
        return (_from_last(K, getattr(K, bwd_kernel)(y, _to_last(K, g, ax)), ax),)

    defrule(name, fwd, bwd)


_softmax_rule("softmax", "softmax", "softmax_bwd")
_softmax_rule("log_softmax", "log_softmax", "log_softmax_bwd")


def _masked_fwd(K, x, *, mask):
    m = np.asarray(mask) if K.device == "cpu" else _upload(K, mask, bool)
    y = K.masked_softmax(x, m)
    return y, y


# Blocked entries have y = 0, so the plain softmax backward gives them (and fully blocked rows) 0.
defrule("hard_masked_softmax", _masked_fwd, lambda K, y, g, n: (K.softmax_bwd(y, g),))


# ---- mse_loss -------------------------------------------------------------------------------

def _mse_bwd(K, s, g, n):
    dy, dt = K.mse_loss_bwd(s[0], s[1], g)
    return (dy if n[0] else None, dt if n[1] else None)


defrule("mse_loss", lambda K, yhat, t: (K.mse_loss(yhat, t), (yhat, t)), _mse_bwd)


# ---- nll_loss / cross_entropy ---------------------------------------------------------------

def _rows(K, x):
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    return K.ascontiguous(K.xp.moveaxis(x, 1, -1)).reshape(-1, x.shape[1])


def _unrows(K, d, shape):
    if len(shape) <= 2:
        return d.reshape(shape)
    d = d.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],))
    return K.ascontiguous(K.xp.moveaxis(d, -1, 1))


class _Targets:
    """The targets of one call on ``K``'s device (``target`` is the host attribute, already
    validated by the shape rule). On CUDA a target that came from a device buffer runs from that
    buffer, with no upload; ``valid`` and ``total`` (label smoothing only) are computed on first use."""

    def __init__(self, K, C, dtype, target, weight, ignore_index):
        self.K, self.dtype, self.target, self.weight, self.ignore_index = K, dtype, target, weight, ignore_index
        self.shape = np.shape(target)
        self.M, self.C = int(np.prod(self.shape, dtype=np.int64)), C
        dev = None if K.device == "cpu" else device_copy(target)
        if dev is not None:
            self.t = K.ascontiguous(K.astype(dev, np.int64)).reshape(-1)
        else:
            t = np.asarray(target, dtype=np.int64).reshape(-1)
            self.t = t if K.device == "cpu" else _upload(K, t, np.int64)
        self.w = None if weight is None else _upload(K, np.asarray(weight, dtype=np.float64), dtype)
        self._valid = self._total = None

    def _host_valid(self):
        return np.asarray(self.target, dtype=np.int64).reshape(-1) != self.ignore_index

    @property
    def valid(self):
        if self._valid is None:
            self._valid = _upload(self.K, self._host_valid(), self.dtype)
        return self._valid

    @property
    def total(self):
        if self._total is None:
            t = np.asarray(self.target, dtype=np.int64).reshape(-1)
            valid = t != self.ignore_index
            w = self.weight
            wt = np.where(valid, 1.0 if w is None else np.asarray(w, dtype=np.float64)[np.where(valid, t, 0)], 0.0)
            self._total = float(wt.sum())
        return self._total


def _nll_rows(K, lp, T, ignore_index, reduction):
    y = K.nll_loss(lp, T.t, T.w, ignore_index, reduction)
    return y.reshape(T.shape) if reduction == "none" else y


def _nll_fwd(K, logp, *, target, weight=None, ignore_index=-100, reduction="mean"):
    lp = _rows(K, logp)
    T = _Targets(K, lp.shape[1], logp.dtype, target, weight, ignore_index)
    return _nll_rows(K, lp, T, ignore_index, reduction), (lp, T, ignore_index, reduction, logp.shape)


def _nll_bwd(K, s, g, n):
    lp, T, ignore_index, reduction, shape = s
    g = g.reshape(T.M) if reduction == "none" else g
    return (_unrows(K, K.nll_loss_bwd(lp, T.t, T.w, ignore_index, reduction, g), shape),)


defrule("nll_loss", _nll_fwd, _nll_bwd)


def _ce_fwd(K, logits, *, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    lp = K.log_softmax(_rows(K, logits))
    T = _Targets(K, lp.shape[1], logits.dtype, target, weight, ignore_index)
    y = _nll_rows(K, lp, T, ignore_index, reduction)
    eps = float(label_smoothing)
    if eps > 0:
        # PyTorch's smoothing term: eps / C * sum_c w_c * (-log p_c), over non-ignored rows.
        wlp = lp if T.w is None else K.mul(lp, T.w)
        smooth = K.mul(K.neg(K.sum(wlp, (1,), False)), T.valid)
        if reduction == "none":
            smooth = smooth.reshape(T.shape)
        else:
            smooth = K.sum(smooth, None, False)
        c = _smooth_coef(eps, T, reduction)
        y = K.add(K.scale(y, 1.0 - eps), K.scale(smooth, c))
    return y, (lp, T, ignore_index, reduction, eps, logits.shape)


def _smooth_coef(eps, T, reduction):
    # A mean over zero non-ignored rows is 0/0: nan, as PyTorch returns.
    if reduction != "mean":
        return eps / T.C
    return eps / T.C / T.total if T.total else float("nan")


def _ce_bwd(K, s, g, n):
    lp, T, ignore_index, reduction, eps, shape = s
    g = g.reshape(T.M) if reduction == "none" else g
    dlp = K.nll_loss_bwd(lp, T.t, T.w, ignore_index, reduction, g)
    if eps > 0:
        c = _smooth_coef(eps, T, reduction)
        row = K.scale(K.mul(T.valid, g), -c).reshape(-1, 1)   # d loss / d smooth_i, per row
        sm = row if T.w is None else K.mul(row, T.w)
        dlp = K.add(K.scale(dlp, 1.0 - eps), sm)
    return (_unrows(K, K.log_softmax_bwd(lp, dlp), shape),)


defrule("cross_entropy", _ce_fwd, _ce_bwd)


# ---- dropout --------------------------------------------------------------------------------

def _dropout_fwd(K, x, *, p, seed, counter):
    if p == 0:
        return K.copy(x), None
    # The keep-mask already scaled by 1 / (1 - p): forward and backward multiply by it.
    m = K.scale(K.bernoulli_mask(x.shape, 1.0 - p, seed, counter, x.dtype), 1.0 / (1.0 - p))
    return K.mul(x, m), m


defrule("dropout", _dropout_fwd, lambda K, m, g, n: (K.copy(g) if m is None else K.mul(g, m),))
