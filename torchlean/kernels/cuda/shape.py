"""CUDA kernels of the shape family: the seeds' layout kernels (``src/shape.cu``)."""

from __future__ import annotations

import math
from functools import partial

import cupy
import numpy as np

from ...shape import reduced_axes
from ..host import shape as host_shape
from .base import _THREADS, _contig, _dev
from . import build
from .build import blocks, etype, launch
from .reduce import _reduce

build.declare("shape", [f"{k}<{e}>" for k in ("transpose_tiled", "swap_middle", "broadcast_nd", "vec_to_rows",
                                             "vec_to_cols", "concat2", "copy_range") for e in build.ELEMS])


def concat1d(a, b):
    a, b = _contig(_dev(a)), _contig(_dev(b))
    dtype = np.result_type(a.dtype, b.dtype)
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    out = cupy.empty(a.size + b.size, dtype=dtype)
    launch("shape", f"concat2<{etype(dtype)}>", blocks(out.size, _THREADS), _THREADS,
           (a, np.int64(a.size), b, np.int64(b.size), out))
    return out


def slice1d(x, start, length):
    x = _contig(_dev(x))
    start, length = host_shape._slice1d_bounds(x, start, length)  # the contract's start + length <= n
    out = cupy.empty((length,) + x.shape[1:], dtype=x.dtype)
    n = out.size
    inner = math.prod(x.shape[1:])
    launch("shape", f"copy_range<{etype(x.dtype)}>", blocks(n, _THREADS), _THREADS,
           (x, np.int64(start * inner), out, np.int64(n)))
    return out


def broadcast_vec_to_rows(v, rows):
    v = _contig(_dev(v))
    cols = v.shape[0]
    out = cupy.empty((int(rows), cols), dtype=v.dtype)
    launch("shape", f"vec_to_rows<{etype(v.dtype)}>", blocks(out.size, _THREADS), _THREADS,
           (v, out, np.int64(out.size), np.int64(cols)))
    return out


def broadcast_vec_to_cols(v, cols):
    v = _contig(_dev(v))
    out = cupy.empty((v.shape[0], int(cols)), dtype=v.dtype)
    launch("shape", f"vec_to_cols<{etype(v.dtype)}>", blocks(out.size, _THREADS), _THREADS,
           (v, out, np.int64(out.size), np.int64(cols)))
    return out


_META: dict[tuple, object] = {}


def _broadcast_meta(in_dims, out_dims, axis_map):
    """Device array [out_dims..., input stride per output axis...], uploaded once per plan."""
    key = (in_dims, out_dims, axis_map)
    m = _META.get(key)
    if m is None:
        in_strides = [0] * len(in_dims)
        s = 1
        for k in range(len(in_dims) - 1, -1, -1):
            in_strides[k] = s
            s *= in_dims[k]
        strides = [0 if a == 0 or (in_dims[a - 1] == 1 and d != 1) else in_strides[a - 1]
                   for a, d in zip(axis_map, out_dims)]
        if len(_META) > 4096:
            _META.clear()
        m = _META[key] = cupy.asarray(np.array(list(out_dims) + strides, dtype=np.int64))
    return m


def broadcast_to(x, in_dims, out_dims, axis_map):
    in_dims, out_dims, axis_map = tuple(map(int, in_dims)), tuple(map(int, out_dims)), tuple(map(int, axis_map))
    x = _contig(_dev(x))
    out = cupy.empty(out_dims, dtype=x.dtype)
    if out.size == 0:
        return out
    meta = _broadcast_meta(in_dims, out_dims, axis_map)
    launch("shape", f"broadcast_nd<{etype(x.dtype)}>", blocks(out.size, _THREADS), _THREADS,
           (x, out, np.int64(out.size), np.int32(len(out_dims)), meta))
    return out


def reduce_from_broadcast_to(g, in_dims, out_dims, axis_map):
    in_dims, out_dims = tuple(map(int, in_dims)), tuple(map(int, out_dims))
    axes = reduced_axes(in_dims, out_dims, tuple(map(int, axis_map)))
    g = _dev(g).reshape(out_dims)
    if not axes:
        return _contig(g).copy().reshape(in_dims)
    return _reduce(g, axes, True, 0, "reduce_from_broadcast_to").reshape(in_dims)


def _swap(x, A, B, C, D):
    """x viewed as (A, B, C, D) -> contiguous (A, C, B, D)."""
    out = cupy.empty(x.size, dtype=x.dtype)
    if out.size == 0:
        return out
    e = etype(x.dtype)
    if D == 1:
        tr, tc = blocks(B, 32), blocks(C, 32)
        launch("shape", f"transpose_tiled<{e}>", A * tr * tc, (32, 8),
               (x, out, np.int64(B), np.int64(C), np.int64(tr), np.int64(tc)))
    else:
        launch("shape", f"swap_middle<{e}>", blocks(out.size, _THREADS), _THREADS,
               (x, out, np.int64(A), np.int64(B), np.int64(C), np.int64(D)))
    return out


def swap_adjacent_at_depth(x, dims, depth):
    dims = tuple(map(int, dims))
    x = _contig(_dev(x))
    if depth < 0 or depth + 1 >= len(dims):
        return x.copy()
    A, B, C, D = math.prod(dims[:depth]), dims[depth], dims[depth + 1], math.prod(dims[depth + 2:])
    out_dims = dims[:depth] + (C, B) + dims[depth + 2:]
    return _swap(x, A, B, C, D).reshape(out_dims)


def transpose2d(x):
    x = _contig(_dev(x))
    r, c = x.shape
    return _swap(x, 1, r, c, 1).reshape(c, r)


# ---- general data movement: the host's code on CuPy (CuPy's copy kernels) -----------------

permute = partial(host_shape.permute, xp=cupy)
concat = partial(host_shape.concat, xp=cupy)
stack = partial(host_shape.stack, xp=cupy)
basic_index = partial(host_shape.basic_index, xp=cupy)
basic_index_bwd = partial(host_shape.basic_index_bwd, xp=cupy)
basic_index_add = partial(host_shape.basic_index_add, xp=cupy)
flip = partial(host_shape.flip, xp=cupy)
