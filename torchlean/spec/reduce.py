"""Reductions: the reference meaning of ``sum``, ``reduce_sum``, ``reduce_mean``,
``reduce_max`` and ``reduce_min``.

* ``sum(x)`` adds every entry and returns a 0-d array.
* ``reduce_sum / reduce_mean(x; axis, keepdim=False)``: ``axis`` is an int or a
  non-empty tuple of ints, negative allowed (Python style), no repeats.
* ``argmax / argmin(x; axis=None, keepdim=False)``: int64 index of the first extremal entry
  (a NaN counts as extremal) along one axis, or of the flattened input; no gradient.
* ``reduce_max / reduce_min(x; axis, keepdim=False)``: values over one int axis;
  the cotangent goes to the *first* extremal entry along the axis (row-major
  order), as in the seeds' max-pool and ``max_bwd`` kernel. Reducing over an
  empty axis is a :class:`ShapeError`.

* ``argsort(x; axis=-1, descending=False)``: int64 indices of a *stable* sort along one axis
  (tied entries keep their order, descending too); a NaN sorts as the largest value (last
  ascending, first descending), as in PyTorch; no gradient. Sorted values are
  ``gather(x, axis, argsort(x))``, so their gradient is gather's.

A 0-d input has one nameable axis, ``0`` or ``-1`` (as in PyTorch); reducing over
it is the identity.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> SPEC["reduce_max"].forward(np.array([[1.0, 3.0], [2.0, 0.0]]), axis=1).tolist()
    [3.0, 2.0]
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..shape import norm_axes, norm_axis
from .registry import defspec


def reduce_axes(op: str, shape, axis) -> tuple:
    """Sorted non-negative axes named by ``axis`` (int or non-empty tuple); ``()`` for a 0-d shape."""
    shape = tuple(shape)
    if isinstance(axis, (tuple, list)):
        if not axis:
            raise ShapeError(f"{op}: axis must name at least one axis, got {tuple(axis)!r} "
                             f"(use sum(x) to reduce every axis)")
        axes = tuple(axis)
    else:
        axes = (axis,)
    # A 0-d tensor still answers to axis 0 / -1, like PyTorch.
    out = norm_axes(axes, max(len(shape), 1), op)
    return out if shape else ()


def extremum_axis(op: str, shape, axis) -> int | None:
    """The one (non-negative) axis of reduce_max / reduce_min; ``None`` for a 0-d shape."""
    shape = tuple(shape)
    if isinstance(axis, (tuple, list)):
        raise ShapeError(f"{op}: axis must be a single int, got {tuple(axis)!r}")
    a = norm_axis(axis, max(len(shape), 1), op)
    if not shape:
        return None
    if shape[a] == 0:
        raise ShapeError(f"{op}: cannot reduce over axis {axis} of size 0 (input shape {shape})")
    return a


def keep_shape(shape, axes) -> tuple:
    """``shape`` with every reduced axis kept as length 1."""
    return tuple(1 if k in axes else d for k, d in enumerate(shape))


def reduced_shape(shape, axes, keepdim: bool) -> tuple:
    if keepdim:
        return keep_shape(shape, axes)
    return tuple(d for k, d in enumerate(shape) if k not in axes)


# ---- sum of everything ----------------------------------------------------------------------

defspec("sum",
        lambda x: np.asarray(np.sum(x)),
        lambda g, x: (np.full(x.shape, np.asarray(g).reshape(()), dtype=np.result_type(g, x)),),
        lambda x: (),
        1)


# ---- sum / mean over axes -------------------------------------------------------------------

def _axes_shape(op):
    def shape(x, *, axis, keepdim=False):
        return reduced_shape(x, reduce_axes(op, x, axis), keepdim)
    return shape


def _reduce_sum(x, *, axis, keepdim=False):
    return np.asarray(np.sum(x, axis=reduce_axes("reduce_sum", x.shape, axis), keepdims=keepdim))


def _reduce_sum_vjp(g, x, *, axis, keepdim=False):
    axes = reduce_axes("reduce_sum", x.shape, axis)
    gk = np.reshape(g, keep_shape(x.shape, axes))
    return (np.broadcast_to(gk, x.shape).copy(),)


def _reduce_mean(x, *, axis, keepdim=False):
    axes = reduce_axes("reduce_mean", x.shape, axis)
    n = int(np.prod([x.shape[a] for a in axes]))
    return np.asarray(np.sum(x, axis=axes, keepdims=keepdim) / n) if n else \
        np.full(reduced_shape(x.shape, axes, keepdim), np.nan, dtype=x.dtype)


def _reduce_mean_vjp(g, x, *, axis, keepdim=False):
    axes = reduce_axes("reduce_mean", x.shape, axis)
    n = int(np.prod([x.shape[a] for a in axes]))
    gk = np.reshape(g, keep_shape(x.shape, axes))
    # An empty reduction has an empty input: no entry receives anything.
    return (np.broadcast_to(gk / max(n, 1), x.shape).copy(),)


defspec("reduce_sum", _reduce_sum, _reduce_sum_vjp, _axes_shape("reduce_sum"), 1)
defspec("reduce_mean", _reduce_mean, _reduce_mean_vjp, _axes_shape("reduce_mean"), 1,
        why="the division rides on the reduction's last pass, where reduce_sum then scale is two")


# ---- max / min over one axis ----------------------------------------------------------------

def _extremum(op, fn, pick):
    def shape(x, *, axis, keepdim=False):
        a = extremum_axis(op, x, axis)
        return tuple(x) if a is None else reduced_shape(x, (a,), keepdim)

    def forward(x, *, axis, keepdim=False):
        a = extremum_axis(op, x.shape, axis)
        if a is None:
            return np.array(x, copy=True)
        return np.asarray(fn(x, axis=a, keepdims=keepdim))

    def vjp(g, x, *, axis, keepdim=False):
        a = extremum_axis(op, x.shape, axis)
        if a is None:
            return (np.array(g, copy=True),)
        # argmax / argmin return the first occurrence: ties send everything to the first entry.
        idx = np.expand_dims(pick(x, axis=a), a)
        dx = np.zeros(x.shape, dtype=np.result_type(g, x))
        np.put_along_axis(dx, idx, np.reshape(g, keep_shape(x.shape, (a,))), axis=a)
        return (dx,)

    defspec(op, forward, vjp, shape, 1)


_extremum("reduce_max", np.max, np.argmax)
_extremum("reduce_min", np.min, np.argmin)


# ---- argmax / argmin: int64 indices, no gradient ------------------------------------------------

def arg_plan(op: str, shape, axis, keepdim) -> tuple:
    """``(axis or None, output shape)`` of argmax / argmin: ``axis=None`` is over the flattened
    input (a 0-d result, or every axis kept as 1 with ``keepdim``, as in PyTorch)."""
    shape = tuple(shape)
    if axis is None:
        if 0 in shape:
            raise ShapeError(f"{op}: cannot reduce an empty input of shape {shape}")
        return None, ((1,) * len(shape) if keepdim else ())
    a = extremum_axis(op, shape, axis)
    return a, (shape if a is None else reduced_shape(shape, (a,), keepdim))


def _arg(op, pick):
    def forward(x, *, axis=None, keepdim=False):
        a, out = arg_plan(op, x.shape, axis, keepdim)
        # The first extremal entry wins (and a NaN is extremal), as in PyTorch.
        i = pick(x.reshape(-1)) if a is None else (np.zeros(x.shape, np.int64) if not x.ndim else pick(x, axis=a))
        return np.asarray(i, dtype=np.int64).reshape(out)

    defspec(op, forward, lambda g, x, **_: (None,), lambda x, **a: arg_plan(op, x, a.get("axis"), a.get("keepdim", False))[1], 1)


_arg("argmax", np.argmax)
_arg("argmin", np.argmin)



# ---- argsort: int64 indices of a stable sort, no gradient --------------------------------------

def sort_axis(op: str, shape, axis) -> int | None:
    """The (non-negative) axis of a sort; ``None`` for a 0-d shape (axis 0 or -1 allowed)."""
    shape = tuple(shape)
    if isinstance(axis, (tuple, list)):
        raise ShapeError(f"{op}: axis must be a single int, got {tuple(axis)!r}")
    a = norm_axis(axis, max(len(shape), 1), op)
    return a if shape else None


def stable_argsort(x, axis: int, descending: bool):
    """Stable sort indices along ``axis``. Descending: the stable ascending order of the reversed
    array, reversed back, so that tied entries keep their original order and NaNs come first."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable").astype(np.int64)
    idx = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    return (x.shape[axis] - 1 - idx).astype(np.int64)


def _argsort(x, *, axis=-1, descending=False):
    a = sort_axis("argsort", x.shape, axis)
    if a is None:
        return np.zeros((), dtype=np.int64)
    return stable_argsort(x, a, bool(descending))


def _argsort_shape(x, *, axis=-1, descending=False):
    sort_axis("argsort", x, axis)
    return tuple(x)


defspec("argsort", _argsort, lambda g, x, **_: (None,), _argsort_shape, 1, ints=True)

__all__ = ["extremum_axis", "keep_shape", "reduce_axes", "reduced_shape", "sort_axis", "stable_argsort"]
