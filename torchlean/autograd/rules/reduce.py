"""Runtime rules of the reductions (see :mod:`torchlean.spec.reduce` for the meaning).

Backward of a sum or mean is a broadcast of the cotangent back over the reduced
axes, run through the seeds' axis-map ``broadcast_to`` kernel. reduce_min runs
as ``-reduce_max(-x)`` so that one kernel pair (``amax`` / ``max_bwd``) serves both
and both send the cotangent to the first extremal entry.
"""

from __future__ import annotations

import numpy as np

from ...shape import broadcast_plan
from ...spec.reduce import (
    arg_plan,
    extremum_axis,
    keep_shape,
    reduce_axes,
    reduced_shape,
    sort_axis,
)
from .registry import defrule


def _spread(K, g, in_shape, shape):
    """Broadcast ``g`` (of ``in_shape``, same rank or 0-d) up to ``shape`` via the axis map."""
    if not shape:
        # The host kernel's contiguous copy turns a 0-d result into shape (1,): nothing to spread.
        return K.copy(g.reshape(()))
    in_dims, out_dims, amap = broadcast_plan(tuple(in_shape), tuple(shape), "reduce")
    return K.broadcast_to(g.reshape(in_dims), in_dims, out_dims, amap)


defrule("sum",
        lambda K, x: (K.sum(x, None, False), x.shape),
        lambda K, shape, g, n: (_spread(K, g, (), shape),))


def _sum_fwd(K, x, *, axis, keepdim=False):
    axes = reduce_axes("reduce_sum", x.shape, axis)
    return K.sum(x, axes, keepdim), (x.shape, axes, 1.0)


def _mean_fwd(K, x, *, axis, keepdim=False):
    axes = reduce_axes("reduce_mean", x.shape, axis)
    n = 1
    for a in axes:
        n *= x.shape[a]
    # An empty reduction has an empty input, so the backward scale never matters there.
    return K.mean(x, axes, keepdim), (x.shape, axes, 1.0 / n if n else 0.0)


def _sum_bwd(K, s, g, n):
    shape, axes, c = s
    if c != 1.0:
        g = K.scale(g, c)
    return (_spread(K, g, keep_shape(shape, axes), shape),)


defrule("reduce_sum", _sum_fwd, _sum_bwd)
defrule("reduce_mean", _mean_fwd, _sum_bwd)


def _extremum(op, negate):
    def fwd(K, x, *, axis, keepdim=False):
        a = extremum_axis(op, x.shape, axis)
        if a is None:
            return K.copy(x), None
        src = K.neg(x) if negate else x
        yk = K.amax(src, a, True)
        y = K.neg(yk) if negate else yk
        if not keepdim:
            y = y.reshape(reduced_shape(x.shape, (a,), False))
        return y, (src, yk, a)

    def bwd(K, s, g, n):
        if s is None:
            return (g,)
        src, yk, a = s
        return (K.max_bwd(src, yk, g.reshape(yk.shape), a),)

    defrule(op, fwd, bwd)


_extremum("reduce_max", False)
_extremum("reduce_min", True)


# argmax / argmin give int64 indices: never recorded, so their backward is never asked for.
def _arg_rule(op):
    def fwd(K, x, *, axis=None, keepdim=False):
        a, out = arg_plan(op, x.shape, axis, keepdim)
        return getattr(K, op)(x, a, keepdim).reshape(out), None

    defrule(op, fwd, lambda K, s, g, n: (None,))


_arg_rule("argmax")
_arg_rule("argmin")


# argsort gives int64 indices: never recorded either.
def _argsort_fwd(K, x, *, axis=-1, descending=False):
    a = sort_axis("argsort", x.shape, axis)
    return (K.zeros((), np.int64) if a is None else K.argsort(x, a, bool(descending))), None


defrule("argsort", _argsort_fwd, lambda K, s, g, n: (None,))
