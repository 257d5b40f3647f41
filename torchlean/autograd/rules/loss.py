"""Runtime rules of the loss family (meaning: :mod:`torchlean.spec.loss`).

The class-target losses fold ``(N, C, d1, ...)`` into rows ``(N * d1 * ..., C)``. Targets and
class weights are host arrays: the derived per-row quantities (validity, picked weights, their
total) are computed on the host and uploaded once. The targets themselves reach the kernels
through ``device_ints``, which on CUDA reads the buffer a target tensor's host copy came from."""

from __future__ import annotations

import numpy as np

from ...shape import moveaxis_perm
from .registry import defrule


def _upload(K, a, dtype):
    """A host attribute array on ``K``'s device in ``dtype``."""
    return K.from_host(np.asarray(a), dtype)


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
    return K.permute(x, moveaxis_perm(x.ndim, 1, -1)).reshape(-1, x.shape[1])


def _unrows(K, d, shape):
    if len(shape) <= 2:
        return d.reshape(shape)
    d = d.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],))
    return K.permute(d, moveaxis_perm(d.ndim, -1, 1))


class _Targets:
    """The targets of one call on ``K``'s device (``target`` is the host attribute, already
    validated by the shape rule); ``valid`` and ``total`` (label smoothing only) are computed on
    first use."""

    def __init__(self, K, C, dtype, target, weight, ignore_index):
        self.K, self.dtype, self.target, self.weight, self.ignore_index = K, dtype, target, weight, ignore_index
        self.shape = np.shape(target)
        self.M, self.C = int(np.prod(self.shape, dtype=np.int64)), C
        self.t = K.ascontiguous(K.device_ints(target)).reshape(-1)
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
