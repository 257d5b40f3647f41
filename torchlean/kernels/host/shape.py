"""Host kernels of the shape family: the seeds' layout kernels (concat, slice, broadcast by
axis map and its adjoint, adjacent-axis swaps, transposes)."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...shape import reduced_axes


def concat1d(a, b):
    return np.concatenate([a, b])


def _slice1d_bounds(x, start, length):
    """The contract's ``start + length <= n``: a silent clip would hide an off-by-one in a caller."""
    start, length, n = int(start), int(length), int(x.shape[0]) if x.ndim else -1
    if n < 0 or start < 0 or length < 0 or start + length > n:
        raise ShapeError(f"slice1d: x[{start}:{start + length}] of an array of shape {tuple(x.shape)} "
                         f"(needs 0 <= start, 0 <= length, start + length <= n)")
    return start, length


def slice1d(x, start, length):
    start, length = _slice1d_bounds(x, start, length)
    return x[start:start + length].copy()


def broadcast_vec_to_rows(v, rows):
    return np.ascontiguousarray(np.broadcast_to(v, (rows, v.shape[0])))


def broadcast_vec_to_cols(v, cols):
    return np.ascontiguousarray(np.broadcast_to(v[:, None], (v.shape[0], cols)))


def _plan_view(in_dims, out_dims, axis_map):
    """Shape of the input with a length-1 axis at every inserted output axis."""
    return tuple(1 if a == 0 else in_dims[a - 1] for a in axis_map)


def broadcast_to(x, in_dims, out_dims, axis_map):
    v = x.reshape(_plan_view(tuple(in_dims), tuple(out_dims), tuple(axis_map)))
    return np.array(np.broadcast_to(v, tuple(out_dims)), order="C")  # a copy; 0-d stays 0-d


def reduce_from_broadcast_to(g, in_dims, out_dims, axis_map):
    in_dims, out_dims = tuple(in_dims), tuple(out_dims)
    axes = reduced_axes(in_dims, out_dims, tuple(axis_map))
    return np.asarray(g.reshape(out_dims).sum(axis=axes, keepdims=True), order="C").reshape(in_dims)


def swap_adjacent_at_depth(x, dims, depth):
    dims = tuple(dims)
    if depth < 0 or depth + 1 >= len(dims):
        return x.copy()
    return np.ascontiguousarray(np.swapaxes(x.reshape(dims), depth, depth + 1))


def transpose2d(x):
    return np.ascontiguousarray(x.T)


# ---- general data movement, over the array namespace (the CUDA module binds CuPy) -----------


def permute(x, perm, *, xp=np):
    return xp.ascontiguousarray(xp.transpose(x, tuple(perm)))


def concat(xs, axis, *, xp=np):
    return xp.concatenate(list(xs), axis=axis)


def stack(xs, axis, *, xp=np):
    return xp.stack(list(xs), axis=axis)


def basic_index(x, key, *, xp=np):
    # A full integer key gives a scalar (NumPy) or a 0-d view: either way a 0-d copy here.
    return xp.array(x[key], copy=True, order="C", ndmin=0)


def basic_index_bwd(g, shape, key, *, xp=np):
    dx = xp.zeros(tuple(shape), dtype=g.dtype)
    dx[key] = g
    return dx


def basic_index_add(x, key, g, *, xp=np):
    if g.shape != x[key].shape:
        raise ShapeError(f"basic_index_add: values of shape {tuple(g.shape)} for a region of shape "
                         f"{tuple(x[key].shape)}")
    x[key] += g


def flip(x, axes, *, xp=np):
    # Negative-step slices rather than xp.flip: the same view on NumPy and CuPy, 0-d included.
    key = tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(x.ndim))
    return xp.array(x[key], copy=True, order="C")
