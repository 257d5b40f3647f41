"""Host kernels of the reduce family: sums, means and maxima over axes, and their adjoints; sorting,
and the counting kernels whose results are integers or have data-dependent shapes."""

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


def sum(x, axes=None, keepdim=False):
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


# ---- sorting and counting, over the array namespace (the CUDA module binds CuPy) ------------------


def argsort(x, axis, descending, *, xp=np):
    """Stable sort indices; descending is the stable ascending order of the reversed array, reversed
    back (ties keep their order, a NaN comes first)."""
    sort = (lambda a: xp.argsort(a, axis=axis, kind="stable")) if xp is np else (lambda a: xp.argsort(a, axis=axis))
    if not descending:
        return sort(x).astype(xp.int64, copy=False)
    idx = xp.flip(sort(xp.flip(x, axis)), axis)
    return xp.ascontiguousarray((x.shape[axis] - 1 - idx).astype(xp.int64, copy=False))


def unique(x, axis, *, xp=np):
    """(sorted distinct entries or slices, inverse, counts), inverse and counts int64. NaNs are
    never equal: each is its own entry (PyTorch's rule; NumPy's unique would merge them)."""
    if axis is None:
        flat = x.reshape(-1)
        order = argsort(flat, 0, False, xp=xp)
        s = flat[order]
        new = xp.ones(s.shape, dtype=bool)
        if s.size > 1:
            new[1:] = s[1:] != s[:-1]
        group = xp.cumsum(new) - 1
        inverse = xp.empty(flat.shape, dtype=xp.int64)
        inverse[order] = group
        starts = xp.nonzero(new)[0]
        counts = xp.diff(xp.concatenate([starts, xp.asarray([s.size])])).astype(xp.int64)
        return s[starts], inverse.reshape(x.shape), counts
    vals, inverse, counts = np.unique(x, axis=axis, return_inverse=True, return_counts=True)
    return vals, inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)


def bincount(x, weights, minlength, *, xp=np):
    if x.size == 0:
        return xp.zeros(minlength, dtype=xp.int64 if weights is None else weights.dtype)
    if weights is None:
        return xp.bincount(x, minlength=minlength).astype(xp.int64, copy=False)
    return xp.bincount(x, weights=weights, minlength=minlength).astype(weights.dtype, copy=False)


def histc(x, bins, lo, hi, *, xp=np):
    """PyTorch's rule: bin = int((v - lo) * bins / (hi - lo)) in x's dtype, v = hi in the last bin;
    entries outside [lo, hi] (and NaN) are not counted."""
    v = x.reshape(-1)
    lo_, hi_ = x.dtype.type(lo), x.dtype.type(hi)
    v = v[(v >= lo_) & (v <= hi_)]
    b = ((v - lo_) * x.dtype.type(bins) / (hi_ - lo_)).astype(xp.int64)
    if b.size == 0:
        return xp.zeros(bins, dtype=x.dtype)
    return xp.bincount(xp.minimum(b, bins - 1), minlength=bins).astype(x.dtype)


def searchsorted(seq, values, right, *, xp=np):
    """Insertion indices of ``values`` into the sorted last axis of ``seq`` (1-D seq: one sequence
    for all values; else one per leading index, values with the same leading axes)."""
    side = "right" if right else "left"
    if seq.ndim == 1:
        return xp.searchsorted(seq, values, side=side).astype(xp.int64, copy=False)
    n = seq.shape[-1]
    s2, v2 = seq.reshape(-1, n), values.reshape(-1, values.shape[-1])
    out = xp.empty(v2.shape, dtype=xp.int64)
    for r in range(s2.shape[0]):
        out[r] = xp.searchsorted(s2[r], v2[r], side=side)
    return out.reshape(values.shape)
