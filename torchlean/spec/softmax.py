"""The softmax family: the reference meaning of softmax, log_softmax and hard-masked softmax.

* ``softmax(x; axis=-1)`` and ``log_softmax(x; axis=-1)`` normalise along one
  axis; log_softmax is computed directly as ``x - max - log sum exp(x - max)``,
  never as ``log(softmax(x))``, so it stays finite for large logits.
* ``hard_masked_softmax(x; mask)`` is the softmax over the last axis restricted to
  the entries where ``mask`` (0/1 or bool, broadcastable to ``x``) is non-zero:
  blocked weights are exactly 0 and a fully blocked row is all zeros (with a zero
  gradient).

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> SPEC["softmax"].forward(np.array([0.0, 0.0])).tolist()
    [0.5, 0.5]
"""

from __future__ import annotations

import numpy as np

from ..errors import DomainError, DTypeError, ShapeError
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


defspec("softmax", lambda x, *, axis=-1: softmax(x, axis), _softmax_vjp, _softmax_shape("softmax"), 1,
        why="stability (the row max subtracted first) and one row kernel each way")
defspec("log_softmax", lambda x, *, axis=-1: log_softmax(x, axis), _log_softmax_vjp,
        _softmax_shape("log_softmax"), 1, why="stability: x - max - log sum exp(x - max), never log(softmax(x))")


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


defspec("hard_masked_softmax", _masked_softmax, _masked_softmax_vjp, _masked_shape, 1,
        why="exact masking: blocked weights exactly 0 and fully blocked rows 0 (a -inf fill would give NaN)")
