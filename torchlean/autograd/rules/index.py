"""Runtime rules of the index ops (see :mod:`torchlean.spec.index` for the meaning).

Every rule runs on the seeds' kernels, which take host index sequences and
implement the out-of-bounds conventions themselves: row ops on ``gather_rows`` /
``scatter_add_rows`` (the indexed axis moved to the front, the rest folded into
columns), element ops on ``gather_vec`` / ``scatter_add`` over row-major offsets
computed on the host (an out-of-bounds entry gets the offset ``size(x)``, which
the kernels treat as out of bounds too). Index arrays are host NumPy arrays, so
the NumPy calls here never touch device values.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ...shape import moveaxis_perm
from ...spec.index import (
    check_rows,
    flat_positions,
    gather_plan,
    index_array,
    index_vector,
    put_plan,
    scatter_plan,
    setitem_plan,
    take_index,
    take_plan,
)
from ...spec.shape import axis_of, check_same_dtype
from .registry import defrule


def _rows2d(K, x, axis):
    """``x`` with ``axis`` moved to the front, as a contiguous ``(len, rest)`` matrix."""
    if axis != 0:
        x = K.permute(x, moveaxis_perm(x.ndim, axis, 0))
    return K.ascontiguous(x).reshape(x.shape[0], prod(x.shape[1:]))


def _unrows(K, m, front_shape, axis):
    """Inverse of :func:`_rows2d`: reshape to ``front_shape`` and move the front axis back."""
    y = m.reshape(front_shape)
    return K.permute(y, moveaxis_perm(y.ndim, 0, axis)) if axis != 0 else y


def _front(shape, axis, n):
    """``shape`` with ``axis`` moved to the front and its length replaced by ``n``."""
    return (n,) + tuple(shape[:axis]) + tuple(shape[axis + 1:])


# ---- index_select ---------------------------------------------------------------------------

def _index_select_fwd(K, x, *, axis, indices):
    a = axis_of("index_select", axis, x.ndim)
    idx = index_vector("index_select", indices)
    y = K.gather_rows(_rows2d(K, x, a), idx)
    return _unrows(K, y, _front(x.shape, a, idx.size), a), (x.shape, a, idx)


def _index_select_bwd(K, s, g, n):
    shape, a, idx = s
    g2 = _rows2d(K, g, a)
    dx = K.scatter_add_rows(K.zeros((shape[a], g2.shape[1]), g.dtype), g2, idx)
    return (_unrows(K, dx, _front(shape, a, shape[a]), a),)


defrule("index_select", _index_select_fwd, _index_select_bwd)


# ---- gather / scatter_add -------------------------------------------------------------------

def _gather_fwd(K, x, *, axis, index):
    a, idx = gather_plan("gather", x.shape, axis, index)
    flat = flat_positions(x.shape, a, idx)
    y = K.gather_vec(K.ascontiguous(x).reshape(x.size), flat).reshape(idx.shape)
    return y, (x.shape, flat)


def _gather_bwd(K, s, g, n):
    shape, flat = s
    size = prod(shape)
    dx = K.scatter_add(K.zeros((size,), g.dtype), K.ascontiguous(g).reshape(g.size), flat)
    return (dx.reshape(shape),)


defrule("gather", _gather_fwd, _gather_bwd)


def _take_along_fwd(K, x, index, *, axis):
    # The index is a value of the program: its entries are read on the host (on CUDA once per
    # buffer, host_ints), checked, and turned into flat offsets as gather's constant index is.
    a = take_plan(x.shape, index.shape, axis)
    idx = take_index(K.host_ints(index), x.shape[a])
    flat = flat_positions(x.shape, a, idx)
    y = K.gather_vec(K.ascontiguous(x).reshape(x.size), flat).reshape(idx.shape)
    return y, (x.shape, flat)


defrule("take_along", _take_along_fwd, lambda K, s, g, n: (_gather_bwd(K, s, g, n)[0], None))


def _scatter_add_fwd(K, x, src, *, axis, index):
    check_same_dtype("scatter_add", (x, src))
    a, idx, region = scatter_plan(x.shape, src.shape, axis, index)
    flat = flat_positions(x.shape, a, idx)
    vals = K.basic_index(src, region).reshape(idx.size)
    y = K.scatter_add(K.ascontiguous(x).reshape(x.size), vals, flat).reshape(x.shape)
    return y, (flat, src.shape, region, idx.shape)


def _scatter_add_bwd(K, s, g, needs):
    flat, src_shape, region, idx_shape = s
    dx = g if needs[0] else None
    dsrc = None
    if needs[1]:
        picked = K.gather_vec(K.ascontiguous(g).reshape(g.size), flat).reshape(idx_shape)
        # src entries outside the index's extent never reach the output.
        dsrc = picked if tuple(idx_shape) == tuple(src_shape) else K.basic_index_bwd(picked, src_shape, region)
    return dx, dsrc


defrule("scatter_add", _scatter_add_fwd, _scatter_add_bwd)


# ---- embedding and row ops ------------------------------------------------------------------

def _embedding_fwd(K, w, *, indices):
    idx = index_array("embedding", indices)
    flat = idx.reshape(-1)
    y = K.gather_rows(w, flat).reshape(idx.shape + (w.shape[1],))
    return y, (w.shape, flat)


def _embedding_bwd(K, s, g, n):
    shape, flat = s
    g2 = K.ascontiguous(g).reshape(flat.size, shape[1])
    return (K.scatter_add_rows(K.zeros(shape, g.dtype), g2, flat),)


defrule("embedding", _embedding_fwd, _embedding_bwd)


def _gather_rows_fwd(K, m, *, indices):
    check_rows("gather_rows", m.shape)
    idx = index_vector("gather_rows", indices, (1,))
    y = K.gather_rows(_rows2d(K, m, 0), idx).reshape((idx.size,) + tuple(m.shape[1:]))
    return y, (m.shape, idx)


def _gather_rows_bwd(K, s, g, n):
    shape, idx = s
    g2 = _rows2d(K, g, 0)
    return (K.scatter_add_rows(K.zeros((shape[0], g2.shape[1]), g.dtype), g2, idx).reshape(shape),)


defrule("gather_rows", _gather_rows_fwd, _gather_rows_bwd)


def _scatter_rows_fwd(K, m, v, *, indices):
    check_same_dtype("scatter_add_rows", (m, v))
    idx = index_vector("scatter_add_rows", indices, (1,))
    y = K.scatter_add_rows(_rows2d(K, m, 0), _rows2d(K, v, 0), idx).reshape(m.shape)
    return y, (v.shape, idx)


def _scatter_rows_bwd(K, s, g, needs):
    v_shape, idx = s
    dv = K.gather_rows(_rows2d(K, g, 0), idx).reshape(v_shape) if needs[1] else None
    return (g if needs[0] else None), dv


defrule("scatter_add_rows", _scatter_rows_fwd, _scatter_rows_bwd)


# ---- setitem / put: overwrites ------------------------------------------------------------------
# setitem writes through a basic-index view of a fresh copy (a view on every device), so it costs
# one copy and the region; put selects between x and the values gathered to their places.

def _setitem_fwd(K, x, v, *, index):
    check_same_dtype("setitem", (x, v))
    key, view = setitem_plan(x.shape, v.shape, index)
    y = K.copy(x)
    K.assign(y[key], v)
    return y, (key, view)


def _setitem_bwd(K, s, g, needs):
    key, view = s
    dx = None
    if needs[0]:
        dx = K.copy(g)
        K.assign(dx[key], K.zeros((), g.dtype))
    dv = K.basic_index(g, key).reshape(view) if needs[1] else None
    return dx, dv


defrule("setitem", _setitem_fwd, _setitem_bwd)


def _put_fwd(K, x, v, *, index, accumulate=False):
    check_same_dtype("put", (x, v))
    n = x.size
    flat = put_plan(x.shape, v.shape, index, accumulate)
    xs = K.ascontiguous(x).reshape(n)
    vals = K.ascontiguous(v).reshape(v.size)
    if accumulate:
        return K.scatter_add(xs, vals, flat).reshape(x.shape), (None, flat, v.shape)
    written = flat[flat < n]
    hit_host = np.zeros(n, dtype=bool)
    hit_host[written] = True
    hit = K.bool_mask(hit_host, (n,))
    if x.dtype.kind == "f" and written.size * 8 < n:
        new = K.scatter_add(K.zeros((n,), x.dtype), vals, flat)
    else:  # many places, or integers (the scatter kernels add floats only): gather through the inverse map
        inv = np.full(n, v.size, dtype=np.int64)
        inv[written] = np.flatnonzero(flat < n)
        new = K.gather_vec(vals, inv)
    return K.where(hit, new, xs).reshape(x.shape), (hit, flat, v.shape)


def _put_bwd(K, s, g, needs):
    hit, flat, v_shape = s
    gs = K.ascontiguous(g).reshape(g.size)
    dx = None
    if needs[0]:
        dx = g if hit is None else K.where(hit, K.zeros((), g.dtype), gs).reshape(g.shape)
    dv = K.gather_vec(gs, flat).reshape(v_shape) if needs[1] else None
    return dx, dv


defrule("put", _put_fwd, _put_bwd)
