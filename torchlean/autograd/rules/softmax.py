"""Runtime rules of the softmax family (meaning: :mod:`torchlean.spec.softmax`).

The softmax kernels act on the last axis with leading axes folded into rows; an op over
another axis moves that axis last and back (pure data movement)."""

from __future__ import annotations

import numpy as np

from ...shape import moveaxis_perm, norm_axis
from .registry import defrule


def _to_last(K, x, axis):
    return x if axis == x.ndim - 1 else K.permute(x, moveaxis_perm(x.ndim, axis, -1))


def _from_last(K, y, axis):
    return y if axis == y.ndim - 1 else K.permute(y, moveaxis_perm(y.ndim, -1, axis))


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
    y = K.masked_softmax(x, K.bool_mask(mask, np.shape(mask)))
    return y, y


# Blocked entries have y = 0, so the plain softmax backward gives them (and fully blocked rows) 0.
defrule("hard_masked_softmax", _masked_fwd, lambda K, y, g, n: (K.softmax_bwd(y, g),))
