"""Host kernels of the reduce family: sums, means and maxima over axes, and their adjoints."""

from __future__ import annotations

import numpy as np

from ...shape import broadcast_axes


# ---- the seeds' kernels ---------------------------------------------------------------------


def reduce_sum_axis0(x):
    return x.sum(axis=0)


def reduce_sum_axis1(x):
    return x.sum(axis=1)


def reduce_max_axis0(x):
    return x.max(axis=0)


def reduce_max_axis1(x):
    return x.max(axis=1)


def reduce_sum_axis(x, axis):
    return x.sum(axis=axis)


# ---- reductions -----------------------------------------------------------------------------


def sum(x, axes=None, keepdim=False):  # noqa: A001 - the surface's name
    return np.asarray(x.sum(axis=axes, keepdims=keepdim))


def mean(x, axes=None, keepdim=False):
    return np.asarray(x.mean(axis=axes, keepdims=keepdim))


def amax(x, axis, keepdim=False):
    return np.asarray(x.max(axis=axis, keepdims=keepdim))


def max_bwd(x, y_keep, g_keep, axis):
    # The first maximal entry along `axis` gets the cotangent (argmax picks the first).
    idx = np.expand_dims(np.argmax(x, axis=axis), axis)
    out = np.zeros_like(x)
    np.put_along_axis(out, idx, g_keep, axis=axis)
    return out


def sum_to_shape(g, shape):
    shape = tuple(shape)
    if g.shape == shape:
        return g
    return g.sum(axis=broadcast_axes(shape, g.shape)).reshape(shape)


# ---- argmax / argmin, over the array namespace (the CUDA module binds CuPy) -------------------


def _arg(pick, x, axis, keepdim, xp):
    if axis is None:
        i = pick(x.reshape(-1))
        return xp.asarray(i, dtype=xp.int64).reshape((1,) * x.ndim if keepdim else ())
    return xp.asarray(pick(x, axis=axis, keepdims=keepdim), dtype=xp.int64)


def argmax(x, axis, keepdim, *, xp=np):
    return _arg(xp.argmax, x, axis, keepdim, xp)


def argmin(x, axis, keepdim, *, xp=np):
    return _arg(xp.argmin, x, axis, keepdim, xp)
