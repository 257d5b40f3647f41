"""CUDA kernels of the reduce family: sums (double accumulators), means and maxima over runs of
adjacent axes, split so that one wave fills the GPU (``src/reduce.cu``)."""

from __future__ import annotations

import builtins
import math
from functools import partial

import cupy
import numpy as np

from ...errors import ShapeError
from ...shape import broadcast_axes
from ..host import reduce as host_reduce
from ..host.base import _c
from . import build
from .base import _THREADS, _contig, _dev, _fill_threads, _resident_blocks
from .build import blocks, ftype, launch, launch_function

build.declare("reduce",
              [f"reduce_rows<{t}, {op}, {b}>" for t in build.FLOATS for op in (0, 1) for b in ("false", "true")]
              + [f"reduce_cols<{t}, {op}>" for t in build.FLOATS for op in (0, 1)]
              + [f"max_bwd_kernel<{t}>" for t in build.FLOATS]
              + [f"reduce_vec4<{op}>" for op in (0, 1)]
              + [f"{k}<{t}, {op}>" for k in ("reduce_rows_v", "reduce_cols_v") for t in build.FLOATS for op in (0, 1)])


# ---- the seeds' kernels ---------------------------------------------------------------------


def _split(n_out_threads: int, n: int, min_seg: int) -> tuple[int, int]:
    """(chunks, seg) so that n_out_threads * chunks fills the GPU, each segment >= min_seg long."""
    chunks = 1
    if n_out_threads < _fill_threads() and n > min_seg:
        chunks = builtins.min(-(-_fill_threads() // builtins.max(n_out_threads, 1)), -(-n // min_seg))
    seg = -(-n // chunks) if n else 0
    chunks = -(-n // seg) if seg else 1
    return chunks, seg


def _reduce_mid(x, outer: int, n: int, inner: int, op: int, name: str, scale: float = 1.0):
    """Reduce a contiguous float array viewed as (outer, n, inner) over n: returns (outer, inner) flat.

    op 0 sums (double accumulators) and multiplies by ``scale`` in the last pass; op 1 takes the
    NaN-propagating max.
    """
    t = ftype(x.dtype, name)
    if outer * inner == 0:
        return cupy.empty(outer * inner, dtype=x.dtype)
    if n == 0:
        if op == 1:
            raise ShapeError(f"{name}: max over an empty axis of {x.shape}")
        return cupy.zeros(outer * inner, dtype=x.dtype)
    if inner == 1 and outer == 1 and x.dtype == np.float32 and n >= (1 << 16) and x.data.ptr % 16 == 0:
        # One long row of float32: 16-byte loads, segments a multiple of 4 elements.
        chunks, seg = _split(_THREADS, n, _THREADS * 64)
        seg = -(-seg // 4) * 4
        chunks = -(-n // seg)
        part = cupy.empty(chunks, dtype=x.dtype)
        launch("reduce", f"reduce_vec4<{op}>", chunks, _THREADS,
               (x, part, np.int64(n), np.int64(seg), np.float64(scale if chunks == 1 else 1.0)))
        if chunks == 1:
            return part
        return _reduce_mid(part, 1, chunks, 1, op, name, scale)
    vec = 16 // x.dtype.itemsize
    if inner == 1 and n % vec == 0 and n <= 32 * vec and x.data.ptr % 16 == 0:
        # Short rows: lanes of a warp share a row with one 16-byte load each.
        nv = n // vec
        gw = 1 << (nv - 1).bit_length()
        f = build.function("reduce", f"reduce_rows_v<{t}, {op}>")
        out = cupy.empty(outer, dtype=x.dtype)
        warps = -(-outer // (4 * (32 // gw)))
        nb = builtins.min(-(-warps // (_THREADS // 32)), _resident_blocks(f, _THREADS))
        launch_function(f, (nb,), (_THREADS,), (x, out, np.int64(outer), np.int64(nv), np.int32(gw),
                                                 np.float64(scale)))
        return out
    if inner > 1 and inner % vec == 0 and x.data.ptr % 16 == 0:
        return _reduce_cols_v(x, outer, n, inner, op, t, name, scale, vec)
    if inner == 1:
        block_mode = n >= 1024
        # A row shorter than a warp gets the next power of two of lanes, so a warp still loads
        # 32 adjacent elements at a time.
        gw = 32 if n >= 32 else 1 << (n - 1).bit_length()
        gsize = _THREADS if block_mode else gw
        chunks, seg = _split(outer * gsize, n, gsize * 8)
        groups = outer * chunks
        part = cupy.empty(groups, dtype=x.dtype)
        b = "true" if block_mode else "false"
        nb = groups if block_mode else blocks(groups, _THREADS // gw)
        launch("reduce", f"reduce_rows<{t}, {op}, {b}>", nb, _THREADS,
               (x, part, np.int64(groups), np.int64(n), np.int64(chunks), np.int64(seg), np.int32(gw),
                np.float64(scale if chunks == 1 else 1.0)))
        if chunks == 1:
            return part
        return _reduce_mid(part, outer, chunks, 1, op, name, scale)
    chunks, seg = _split(outer * inner, n, 64)
    total = outer * chunks * inner
    part = cupy.empty(total, dtype=x.dtype)
    launch("reduce", f"reduce_cols<{t}, {op}>", blocks(total, _THREADS), _THREADS,
           (x, part, np.int64(outer), np.int64(n), np.int64(inner), np.int64(chunks), np.int64(seg),
            np.float64(scale if chunks == 1 else 1.0)))
    if chunks == 1:
        return part
    return _reduce_mid(part, outer, chunks, inner, op, name, scale)


def _reduce_cols_v(x, outer, n, inner, op, t, name, scale, vec):
    """Column reduction with 16-byte loads (inner a multiple of ``vec``, x aligned): (outer, inner) flat.

    Blocks are (bx, by) = (lanes across column vectors, rows in flight); the long axis is split
    into chunks so that one wave fills the GPU, and a second pass reduces the chunks."""
    nv = inner // vec
    bx = min(32, nv)
    by = 1 << ((_THREADS // bx).bit_length() - 1)
    ncb = -(-nv // bx)
    f = build.function("reduce", f"reduce_cols_v<{t}, {op}>")
    fill = _resident_blocks(f, bx * by)
    chunks = 1
    # Up to 32 rows a thread stay in one pass: a second launch costs more than those loads, and
    # so does it below 512 KiB (a bias gradient of a small layer: launch-bound either way).
    # Rounded down: a few blocks past one wave would run alone at the end, as long as a wave.
    if n > 32 * by and x.nbytes > (1 << 19):
        chunks = builtins.max(1, builtins.min(fill // (outer * ncb), -(-n // (8 * by))))
    seg = -(-n // chunks)
    chunks = -(-n // seg)
    part = cupy.empty(outer * chunks * inner, dtype=x.dtype)
    launch_function(f, (outer * chunks * ncb,), (bx, by),
                    (x, part, np.int64(n), np.int64(inner), np.int64(chunks), np.int64(seg), np.int64(ncb),
                     np.float64(scale if chunks == 1 else 1.0)))
    if chunks == 1:
        return part
    return _reduce_mid(part, outer, chunks, inner, op, name, scale)


def _norm_axes(axes, ndim):
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < builtins.max(ndim, 1):
            raise ShapeError(f"reduction: axis {a} out of range for {ndim}-d input")
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(set(out)))


def _reduce(x, axes, keepdim, op, name, scale=1.0):
    """Reduce over ``axes`` by runs of adjacent axes, last run first (each run is one (outer, n, inner)).

    Sums are multiplied by ``scale`` in the very last pass.
    """
    x = _dev(x)
    if x.dtype.kind not in "f":
        # Integer and bool data take CuPy's reduction (NumPy's dtype rules for them).
        f = cupy.sum if op == 0 else cupy.max
        return cupy.asarray(f(x, axis=None if axes is None else axes, keepdims=keepdim))
    shape = tuple(x.shape)
    ax = _norm_axes(axes, len(shape))
    keep_shape = tuple(1 if i in ax else d for i, d in enumerate(shape))
    if not ax:
        return x * _c(x, scale) if scale != 1.0 else x.copy()
    runs = []
    for a in ax:
        if runs and runs[-1][1] == a - 1:
            runs[-1][1] = a
        else:
            runs.append([a, a])
    cur = list(shape)
    y = _contig(x)
    for r, (lo, hi) in enumerate(reversed(runs)):
        outer = math.prod(cur[:lo])
        n = math.prod(cur[lo:hi + 1])
        inner = math.prod(cur[hi + 1:])
        y = _reduce_mid(y, outer, n, inner, op, name, scale if r == len(runs) - 1 else 1.0)
        cur[lo:hi + 1] = [1]
    out_shape = keep_shape if keepdim else tuple(d for i, d in enumerate(shape) if i not in ax)
    return y.reshape(out_shape)


def reduce_sum_axis0(x):
    return _reduce(x, (0,), False, 0, "reduce_sum_axis0")


def reduce_sum_axis1(x):
    return _reduce(x, (1,), False, 0, "reduce_sum_axis1")


def reduce_max_axis0(x):
    return _reduce(x, (0,), False, 1, "reduce_max_axis0")


def reduce_max_axis1(x):
    return _reduce(x, (1,), False, 1, "reduce_max_axis1")


def reduce_sum_axis(x, axis):
    return _reduce(x, (axis,), False, 0, "reduce_sum_axis")


# ---- reductions -----------------------------------------------------------------------------


def sum(x, axes=None, keepdim=False):
    return _reduce(x, axes, keepdim, 0, "sum")


def mean(x, axes=None, keepdim=False):
    x = _dev(x)
    if x.dtype.kind != "f":
        return cupy.asarray(cupy.mean(x, axis=axes, keepdims=keepdim))
    ax = _norm_axes(axes, x.ndim)
    count = math.prod(x.shape[a] for a in ax)
    if count == 0:  # 0 / 0: NaN, as NumPy's mean gives
        return _reduce(x, axes, keepdim, 0, "mean") * _c(x, math.nan)
    # The division rides on the last reduction pass (in double), not a separate launch.
    return _reduce(x, axes, keepdim, 0, "mean", 1.0 / count)


def amax(x, axis, keepdim=False):
    return _reduce(x, axis, keepdim, 1, "amax")


def max_bwd(x, y_keep, g_keep, axis):
    x = _contig(_dev(x))
    ax = _norm_axes(axis, x.ndim)[0] if x.ndim else 0
    shape = x.shape
    outer, n, inner = math.prod(shape[:ax]), (shape[ax] if shape else 1), math.prod(shape[ax + 1:])
    g = _dev(g_keep)
    keep_shape = shape[:ax] + (1,) + shape[ax + 1:] if shape else ()
    g = _contig(cupy.broadcast_to(g, keep_shape).astype(x.dtype, copy=False))
    out = cupy.zeros(shape, dtype=x.dtype)
    if outer * inner and n:
        launch("reduce", f"max_bwd_kernel<{ftype(x.dtype, 'max_bwd')}>", blocks(outer * inner, _THREADS),
               _THREADS, (x, g, out, np.int64(outer), np.int64(n), np.int64(inner)))
    return out


def sum_to_shape(g, shape):
    shape = tuple(shape)
    if g.shape == shape:
        return g
    return _reduce(g, broadcast_axes(shape, g.shape), False, 0, "sum_to_shape").reshape(shape)


# ---- argmax / argmin: the host's code on CuPy ----------------------------------------------

argmax = partial(host_reduce.argmax, xp=cupy)
argmin = partial(host_reduce.argmin, xp=cupy)


# ---- sorting and counting: the host's code on CuPy ---------------------------------------------

argsort = partial(host_reduce.argsort, xp=cupy)
bincount = partial(host_reduce.bincount, xp=cupy)
histc = partial(host_reduce.histc, xp=cupy)
searchsorted = partial(host_reduce.searchsorted, xp=cupy)


def unique(x, axis):
    if axis is None:
        return host_reduce.unique(_dev(x), None, xp=cupy)
    # Distinct slices: NumPy's lexicographic unique on a host copy (a data-dependent shape needs
    # the sizes on the host anyway).
    vals, inverse, counts = host_reduce.unique(cupy.asnumpy(x), axis)
    return cupy.asarray(vals), cupy.asarray(inverse), cupy.asarray(counts)
