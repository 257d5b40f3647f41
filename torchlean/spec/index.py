"""Index ops: the reference meaning of ``index_select``, ``gather``, ``scatter_add``,
``embedding``, ``gather_rows``, ``scatter_add_rows``, ``setitem`` and ``put``.

Index rules (DESIGN.md): indices are host integer arrays or sequences given as
attributes, never differentiated. A negative index or one >= 2**32 raises
:class:`IndexRangeError`; float indices raise :class:`DTypeError`. An index in
uint32 range but out of bounds makes a gather yield 0 (a zero entry or row) and
makes a scatter ignore it; repeated scatter indices accumulate.

* ``index_select(x; axis, indices)``: ``indices`` 1-D (or 0-d, read as one entry);
  out has ``len(indices)`` entries along ``axis``.
* ``gather(x; axis, index)`` (torch.gather): ``index`` has x's number of axes,
  ``index.shape[d] <= x.shape[d]`` for ``d != axis``; ``out[p] = x[p with
  p[axis] = index[p]]``, out shape ``index.shape``.
* ``scatter_add(x, src; axis, index)`` (torch.Tensor.scatter_add):
  ``out = x`` then ``out[p with p[axis] = index[p]] += src[p]`` for every position
  ``p`` of ``index``; ``index.shape[d] <= src.shape[d]`` and, for ``d != axis``,
  ``<= x.shape[d]``. Differentiable in ``x`` and ``src``.
* ``embedding(weight; indices)``: weight ``(num, dim)``, any index shape, out
  ``indices.shape + (dim,)``.
* ``gather_rows(mat; indices)``: out ``(k,) + mat.shape[1:]`` for 1-D indices of length k.
* ``scatter_add_rows(mat, values; indices)``: values ``(k,) + mat.shape[1:]``.
* ``setitem(x, values; index)``: ``x`` with ``x[index] = values`` for a basic index (ints,
  slices, None, Ellipsis: :func:`~torchlean.spec.shape.normalize_index`); ``values`` has the
  shape of ``x[index]`` without the axes ``None`` inserts. Cotangents: ``g`` with zeros at the
  overwritten places for ``x``, ``g[index]`` for ``values``.
* ``put(x, values; index, accumulate=False)`` (torch.Tensor.put): ``index`` holds row-major
  offsets into ``x`` and has ``values``'s shape; ``out.flat[index] = values`` (``+=`` with
  ``accumulate``). Repeated offsets without ``accumulate``: the last one in row-major order of
  ``index`` wins (torch leaves it unspecified) and the others get a zero cotangent.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> SPEC["gather_rows"].forward(np.array([[1.0, 2.0], [3.0, 4.0]]), indices=[1, 5, 1]).tolist()
    [[3.0, 4.0], [0.0, 0.0], [3.0, 4.0]]
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, IndexRangeError, ShapeError
from .registry import defspec
from .shape import along, axis_of, normalize_index

UINT32_LIMIT = 2 ** 32


def check_indices(indices, op: str) -> np.ndarray:
    """Host index sequence -> int64 array; IndexRangeError for negatives or >= 2**32 (DESIGN.md)."""
    idx = np.asarray(indices)
    if idx.dtype == bool or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
        # Python ints beyond int64 arrive as dtype=object.
        if idx.dtype == object:
            bad = [int(v) for v in idx.ravel() if int(v) < 0 or int(v) >= UINT32_LIMIT]
            if bad:
                raise IndexRangeError(f"{op}: index {bad[0]} outside [0, 2**32)")
            idx = idx.astype(np.int64)
        else:
            raise DTypeError(f"{op}: indices must be integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64, copy=False).reshape(-1) if idx.ndim != 1 else idx.astype(np.int64, copy=False)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0:
            raise IndexRangeError(f"{op}: negative index {lo} (indices must lie in [0, 2**32))")
        if hi >= UINT32_LIMIT:
            raise IndexRangeError(f"{op}: index {hi} >= 2**32")
    return idx


# ---- helpers shared with the runtime rules --------------------------------------------------

def index_array(op: str, indices) -> np.ndarray:
    """``indices`` as an int64 array of its own shape, range- and dtype-checked (DESIGN.md)."""
    shape = np.shape(indices)
    return check_indices(indices, op).reshape(shape)


def index_vector(op: str, indices, ndim_ok=(0, 1)) -> np.ndarray:
    """1-D int64 indices; a 0-d index is read as one entry when ``ndim_ok`` allows it."""
    idx = index_array(op, indices)
    if idx.ndim not in ndim_ok:
        raise ShapeError(f"{op}: indices must be 1-D, got shape {idx.shape}")
    return idx.reshape(-1)


def positions(idx: np.ndarray, axis: int) -> list:
    """Dense coordinates of every entry of ``idx``, with the ``axis`` coordinate replaced by the index."""
    coords = list(np.indices(idx.shape))
    coords[axis] = idx
    return coords


def flat_positions(x_shape, axis: int, idx: np.ndarray) -> np.ndarray:
    """Row-major offsets into x of every index entry; ``size(x)`` (out of bounds) where
    ``idx >= x_shape[axis]``, so the seeds' vector gather/scatter kernels yield 0 / ignore it."""
    x_shape = tuple(x_shape)
    size = int(np.prod(x_shape))
    strides = [int(np.prod(x_shape[d + 1:])) for d in range(len(x_shape))]
    flat = np.zeros(idx.shape, dtype=np.int64)
    for d, c in enumerate(positions(idx, axis)):
        flat += c * strides[d]
    return np.where(idx < x_shape[axis], flat, size).reshape(-1)


def gather_plan(op: str, x_shape, axis, index, what="x"):
    """(axis, index array) of gather / scatter_add after checking shapes against ``x_shape``."""
    x_shape = tuple(x_shape)
    a = axis_of(op, axis, len(x_shape))
    idx = index_array(op, index)
    if idx.ndim != len(x_shape):
        raise ShapeError(f"{op}: index of shape {idx.shape} must have as many axes as {what} {x_shape}")
    for d, (i, n) in enumerate(zip(idx.shape, x_shape)):
        if d != a and i > n:
            raise ShapeError(f"{op}: index shape {idx.shape} exceeds {what} shape {x_shape} at axis {d}")
    return a, idx


def check_rows(op: str, mat_shape, what="mat") -> None:
    if len(mat_shape) == 0:
        raise ShapeError(f"{op}: {what} must have at least one axis, got a 0-d input")


# ---- index_select ---------------------------------------------------------------------------

def _index_select_plan(shape, axis, indices):
    a = axis_of("index_select", axis, len(shape))
    return a, index_vector("index_select", indices)


def _index_select_shape(x, *, axis, indices):
    a, idx = _index_select_plan(x, axis, indices)
    return tuple(x[:a]) + (idx.size,) + tuple(x[a + 1:])


def _index_select(x, *, axis, indices):
    a, idx = _index_select_plan(x.shape, axis, indices)
    ok = idx < x.shape[a]
    out = np.zeros(x.shape[:a] + (idx.size,) + x.shape[a + 1:], dtype=x.dtype)
    out[along(a, ok)] = np.take(x, idx[ok], axis=a)
    return out


def _index_select_vjp(g, x, *, axis, indices):
    a, idx = _index_select_plan(x.shape, axis, indices)
    ok = idx < x.shape[a]
    dx = np.zeros(x.shape, dtype=np.result_type(g, x))
    np.add.at(dx, along(a, idx[ok]), g[along(a, ok)])
    return (dx,)


defspec("index_select", _index_select, _index_select_vjp, _index_select_shape, 1)


# ---- gather / scatter_add (torch semantics) -------------------------------------------------

def _gather(x, *, axis, index):
    a, idx = gather_plan("gather", x.shape, axis, index)
    ok = idx < x.shape[a]
    out = np.zeros(idx.shape, dtype=x.dtype)
    out[ok] = x[tuple(c[ok] for c in positions(idx, a))]
    return out


def _gather_vjp(g, x, *, axis, index):
    a, idx = gather_plan("gather", x.shape, axis, index)
    ok = idx < x.shape[a]
    dx = np.zeros(x.shape, dtype=np.result_type(g, x))
    np.add.at(dx, tuple(c[ok] for c in positions(idx, a)), np.asarray(g)[ok])
    return (dx,)


defspec("gather", _gather, _gather_vjp,
        lambda x, *, axis, index: tuple(gather_plan("gather", x, axis, index)[1].shape), 1)


# ---- take_along: gather at indices that are an input (a runtime value), not an attribute ---------

def take_plan(x_shape, index_shape, axis) -> int:
    """The axis of ``take_along`` after checking the index's shape against x's (torch.gather's rule:
    as many axes, no longer than x on any other axis)."""
    x_shape, index_shape = tuple(x_shape), tuple(index_shape)
    a = axis_of("take_along", axis, len(x_shape))
    if len(index_shape) != len(x_shape):
        raise ShapeError(f"take_along: index of shape {index_shape} must have as many axes as x {x_shape}")
    for d, (i, n) in enumerate(zip(index_shape, x_shape)):
        if d != a and i > n:
            raise ShapeError(f"take_along: index shape {index_shape} exceeds x shape {x_shape} at axis {d}")
    return a


def take_index(index, n: int) -> np.ndarray:
    """The index values as int64 in [0, n): negative ones count from the end (ONNX GatherElements,
    NumPy's take_along_axis); DTypeError for non-integers, IndexRangeError outside [-n, n)."""
    idx = np.asarray(index)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"take_along: index must be integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            raise IndexRangeError(f"take_along: index {lo if lo < -n else hi} out of range [-{n}, {n}) "
                                  f"for an axis of size {n}")
    return np.where(idx < 0, idx + n, idx)


def _take_along(x, index, *, axis):
    a = take_plan(x.shape, np.shape(index), axis)
    return _gather(x, axis=a, index=take_index(index, x.shape[a]))


def _take_along_vjp(g, x, index, *, axis):
    a = take_plan(x.shape, np.shape(index), axis)
    return _gather_vjp(g, x, axis=a, index=take_index(index, x.shape[a]))[0], None


defspec("take_along", _take_along, _take_along_vjp,
        lambda x, index, *, axis: (take_plan(x, index, axis), tuple(index))[1], 2)


def scatter_plan(x_shape, src_shape, axis, index):
    """(axis, index array, region of src that index covers) of scatter_add."""
    a, idx = gather_plan("scatter_add", x_shape, axis, index)
    if len(src_shape) != len(x_shape):
        raise ShapeError(f"scatter_add: src of shape {tuple(src_shape)} must have as many axes as x {tuple(x_shape)}")
    if any(i > s for i, s in zip(idx.shape, src_shape)):
        raise ShapeError(f"scatter_add: index shape {idx.shape} exceeds src shape {tuple(src_shape)}")
    return a, idx, tuple(slice(0, i) for i in idx.shape)


def _scatter_add(x, src, *, axis, index):
    a, idx, region = scatter_plan(x.shape, src.shape, axis, index)
    ok = idx < x.shape[a]
    out = np.array(x, copy=True)
    np.add.at(out, tuple(c[ok] for c in positions(idx, a)), src[region][ok])
    return out


def _scatter_add_vjp(g, x, src, *, axis, index):
    a, idx, region = scatter_plan(x.shape, src.shape, axis, index)
    ok = idx < x.shape[a]
    picked = np.zeros(idx.shape, dtype=np.result_type(g, src))
    picked[ok] = g[tuple(c[ok] for c in positions(idx, a))]
    dsrc = np.zeros(src.shape, dtype=picked.dtype)
    dsrc[region] = picked
    return np.array(g, copy=True), dsrc


def _scatter_add_shape(x, src, *, axis, index):
    scatter_plan(x, src, axis, index)
    return tuple(x)


defspec("scatter_add", _scatter_add, _scatter_add_vjp, _scatter_add_shape, 2)


# ---- row gathers and scatters ---------------------------------------------------------------

def _rows(mat, idx):
    """Rows ``idx`` of ``mat``; a zero row where ``idx >= len(mat)``."""
    ok = idx < mat.shape[0]
    out = np.zeros((idx.size,) + mat.shape[1:], dtype=mat.dtype)
    out[ok] = mat[idx[ok]]
    return out


def _add_rows(mat, values, idx):
    """``mat`` with ``values[j]`` added to row ``idx[j]``; out-of-bounds rows ignored, repeats add up."""
    ok = idx < mat.shape[0]
    out = np.array(mat, copy=True)
    np.add.at(out, idx[ok], values[ok])
    return out


def _embedding_shape(w, *, indices):
    w = tuple(w)
    if len(w) != 2:
        raise ShapeError(f"embedding: weight must be 2-D (num_embeddings, dim), got shape {w}")
    return tuple(index_array("embedding", indices).shape) + (w[1],)


def _embedding(w, *, indices):
    idx = index_array("embedding", indices)
    return _rows(w, idx.reshape(-1)).reshape(idx.shape + (w.shape[1],))


def _embedding_vjp(g, w, *, indices):
    idx = index_array("embedding", indices).reshape(-1)
    zero = np.zeros(w.shape, dtype=np.result_type(g, w))
    return (_add_rows(zero, np.reshape(g, (idx.size, w.shape[1])), idx),)


defspec("embedding", _embedding, _embedding_vjp, _embedding_shape, 1)


def _gather_rows_shape(m, *, indices):
    check_rows("gather_rows", m)
    return (index_vector("gather_rows", indices, (1,)).size,) + tuple(m[1:])


defspec("gather_rows",
        lambda m, *, indices: _rows(m, index_vector("gather_rows", indices, (1,))),
        lambda g, m, *, indices: (_add_rows(np.zeros(m.shape, dtype=np.result_type(g, m)), g,
                                            index_vector("gather_rows", indices, (1,))),),
        _gather_rows_shape, 1)


def _scatter_rows_shape(m, v, *, indices):
    check_rows("scatter_add_rows", m)
    k = index_vector("scatter_add_rows", indices, (1,)).size
    want = (k,) + tuple(m[1:])
    if tuple(v) != want:
        raise ShapeError(f"scatter_add_rows: values of shape {tuple(v)} must have shape {want} "
                         f"({k} indices, mat {tuple(m)})")
    return tuple(m)


defspec("scatter_add_rows",
        lambda m, v, *, indices: _add_rows(m, v, index_vector("scatter_add_rows", indices, (1,))),
        lambda g, m, v, *, indices: (np.array(g, copy=True),
                                     _rows(np.asarray(g), index_vector("scatter_add_rows", indices, (1,)))),
        _scatter_rows_shape, 2)

# ---- setitem (basic index) / put (flat offsets): writes with overwrite semantics ------------

def setitem_plan(x_shape, v_shape, index):
    """(key with a trailing Ellipsis, view shape) of ``setitem``; ShapeError unless ``values``
    has the shape of ``x[index]`` (the axes ``None`` inserts left out)."""
    key, _, view = normalize_index("setitem", x_shape, index)
    if tuple(v_shape) != tuple(view):
        raise ShapeError(f"setitem: values of shape {tuple(v_shape)} must have shape {tuple(view)} "
                         f"(x[index] for x of shape {tuple(x_shape)})")
    return key + (Ellipsis,), tuple(view)


def _setitem(x, v, *, index):
    key, _ = setitem_plan(x.shape, v.shape, index)
    out = np.array(x, copy=True)
    out[key] = v
    return out


def _setitem_vjp(g, x, v, *, index):
    key, view = setitem_plan(x.shape, v.shape, index)
    dx = np.array(g, copy=True)
    dx[key] = 0
    return dx, np.array(np.asarray(g)[key], copy=True).reshape(view)


defspec("setitem", _setitem, _setitem_vjp,
        lambda x, v, *, index: (setitem_plan(x, v, index), tuple(x))[1], 2,
        why="overwrites a basic-index region in one pass; no formula of other ops writes into a region")


def put_plan(x_shape, v_shape, index, accumulate=False, dedupe=True) -> np.ndarray:
    """Flat int64 offsets of ``put``, ``size(x)`` (out of bounds) where an entry is ignored: out of
    bounds, or, without ``accumulate``, overwritten by a later entry with the same offset."""
    idx = index_array("put", index)
    if idx.shape != tuple(v_shape):
        raise ShapeError(f"put: index of shape {idx.shape} and values of shape {tuple(v_shape)} must match")
    n = int(np.prod(tuple(x_shape), dtype=np.int64))
    flat = idx.reshape(-1)
    if flat.size and int(flat.max()) >= n:
        flat = np.minimum(flat, n)
    if accumulate or not dedupe or flat.size < 2 or np.bincount(flat, minlength=n + 1).max() < 2:
        return flat
    _, first_of_reversed = np.unique(flat[::-1], return_index=True)
    keep = np.zeros(flat.size, dtype=bool)
    keep[flat.size - 1 - first_of_reversed] = True
    return np.where(keep, flat, n)


def _put_shape(x, v, *, index, accumulate=False):
    put_plan(x, v, index, accumulate, dedupe=False)
    return tuple(x)


def _put(x, v, *, index, accumulate=False):
    flat = put_plan(x.shape, v.shape, index, accumulate)
    ok = flat < x.size
    out = np.array(x, copy=True).reshape(-1)
    vals = np.asarray(v).reshape(-1)[ok]
    if accumulate:
        np.add.at(out, flat[ok], vals)
    else:
        out[flat[ok]] = vals
    return out.reshape(x.shape)


def _put_vjp(g, x, v, *, index, accumulate=False):
    flat = put_plan(x.shape, v.shape, index, accumulate)
    ok = flat < x.size
    dx = np.array(g, copy=True).reshape(-1)
    dv = np.zeros(flat.size, dtype=np.result_type(g, v))
    dv[ok] = dx[flat[ok]]
    if not accumulate:
        dx[flat[ok]] = 0
    return dx.reshape(x.shape), dv.reshape(v.shape)


defspec("put", _put, _put_vjp, _put_shape, 2,
        why="writes with overwrite semantics (index_put, scatter, setitem with index tensors); scatter_add "
            "only accumulates")

__all__ = [
    "check_rows",
    "flat_positions",
    "gather_plan",
    "index_array",
    "index_vector",
    "positions",
    "put_plan",
    "scatter_plan",
    "setitem_plan",
]
