"""Test records of the index ops.

Samples include out-of-bounds indices (in uint32 range) and repeated ones. The
torch oracle has no out-of-bounds convention, so each reference clamps the
indices and masks the out-of-bounds entries to zero: torch checks the in-bounds
arithmetic, the mask states the documented convention.
"""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError, IndexRangeError, ShapeError
from ...spec.index import put_plan
from . import BadInput, OpInfo, Sample, defop, rand


def _safe(torch, idx, n):
    """(clamped index tensor, float 0/1 mask tensor) for index values against length n."""
    idx = np.asarray(idx, dtype=np.int64)
    ok = idx < n
    return torch.as_tensor(np.where(ok, idx, 0)), torch.as_tensor(ok.astype(np.float64))


def _along(mask, axis, ndim):
    """Reshape a 1-D mask so it broadcasts along ``axis`` of an ``ndim``-axis tensor."""
    shape = [1] * ndim
    shape[axis] = -1
    return mask.reshape(shape)


# ---- index_select ---------------------------------------------------------------------------

def _index_select_samples(rng):
    return [Sample((rand(rng, 5, 3),), {"axis": 0, "indices": [4, 0, 0, 2]}, "rows, repeats"),
            Sample((rand(rng, 2, 4, 3),), {"axis": 1, "indices": np.array([3, 7, 1])}, "middle axis, OOB"),
            Sample((rand(rng, 2, 4, 3),), {"axis": -1, "indices": [2, 2]}, "last axis"),
            Sample((rand(rng, 6),), {"axis": 0, "indices": np.array(3)}, "0-d index"),
            Sample((rand(rng, 3, 2),), {"axis": 1, "indices": []}, "no indices"),
            Sample((rand(rng, 1, 3),), {"axis": 0, "indices": [0, 2 ** 32 - 1]}, "largest uint32 index")]


def _torch_index_select(torch, x, *, axis, indices):
    a = axis % x.dim()
    idx, ok = _safe(torch, np.reshape(indices, -1), x.shape[a])
    return torch.index_select(x, a, idx) * _along(ok, a, x.dim())


def _index_bad(attrs_of, x_shape):
    """The index-range and dtype errors every index op shares."""
    def bad(rng):
        x = np.ones(x_shape)
        return [BadInput((x,), attrs_of([1, -1]), IndexRangeError, "negative", "negative index"),
                BadInput((x,), attrs_of([2 ** 32]), IndexRangeError, "2**32", "index >= 2**32"),
                BadInput((x,), attrs_of(np.array([0.0, 1.0])), DTypeError, "integers", "float indices")]
    return bad


def _with(extra, base):
    return lambda rng: base(rng) + extra(rng)


defop(OpInfo("index_select", _index_select_samples,
             _with(lambda rng: [BadInput((np.ones((3, 2)),), {"axis": 2, "indices": [0]}, ShapeError, "axis 2"),
                                BadInput((np.ones((3, 2)),), {"axis": 0, "indices": [[0, 1]]}, ShapeError, "1-D"),
                                BadInput((np.ones(()),), {"axis": 0, "indices": [0]}, ShapeError, "0-d")],
                   _index_bad(lambda i: {"axis": 0, "indices": i}, (3, 2))),
             torch_ref=_torch_index_select))


# ---- gather ---------------------------------------------------------------------------------

def _gather_samples(rng):
    return [Sample((rand(rng, 3, 4),), {"axis": 1, "index": np.array([[0, 3, 3], [1, 9, 0], [2, 2, 1]])},
                   "axis 1, OOB and repeats"),
            Sample((rand(rng, 3, 4),), {"axis": 0, "index": np.array([[2, 0, 1, 1], [0, 0, 5, 2]])}, "axis 0"),
            Sample((rand(rng, 2, 3, 4),), {"axis": -1, "index": rng.integers(0, 5, size=(2, 2, 6))},
                   "3-D, index longer than the axis"),
            Sample((rand(rng, 5),), {"axis": 0, "index": np.array([4, 4, 0])}, "1-D"),
            Sample((rand(rng, 2, 3),), {"axis": 1, "index": np.zeros((2, 0), dtype=np.int64)}, "empty index")]


def _torch_gather(torch, x, *, axis, index):
    a = axis % x.dim()
    idx, ok = _safe(torch, index, x.shape[a])
    return torch.gather(x, a, idx) * ok


defop(OpInfo("gather", _gather_samples,
             _with(lambda rng: [BadInput((np.ones((3, 2)),), {"axis": 0, "index": np.zeros((3,), np.int64)},
                                         ShapeError, "as many axes"),
                                BadInput((np.ones((3, 2)),), {"axis": 0, "index": np.zeros((1, 3), np.int64)},
                                         ShapeError, "exceeds"),
                                BadInput((np.ones((3, 2)),), {"axis": 2, "index": np.zeros((1, 1), np.int64)},
                                         ShapeError, "axis 2")],
                   _index_bad(lambda i: {"axis": 0, "index": np.reshape(i, (-1, 1))}, (3, 2))),
             torch_ref=_torch_gather))


# ---- take_along: the index is an input -------------------------------------------------------

def _take_along_samples(rng):
    return [Sample((rand(rng, 3, 4), np.array([[0, 3, 3], [1, -1, 0], [2, 2, -4]])), {"axis": 1},
                   "axis 1, repeats and negative indices"),
            Sample((rand(rng, 3, 4), np.array([[2, 0, 1, 1], [0, 0, 1, 2]])), {"axis": 0}, "axis 0, fewer rows"),
            Sample((rand(rng, 2, 3, 4), rng.integers(0, 4, size=(2, 2, 6))), {"axis": -1},
                   "3-D, index longer than the axis"),
            Sample((rand(rng, 5), np.array([4, 4, 0])), {"axis": 0}, "1-D"),
            Sample((rand(rng, 2, 3), np.zeros((2, 0), dtype=np.int64)), {"axis": 1}, "empty index")]


def _torch_take_along(torch, x, index, *, axis):
    a = axis % x.dim()
    index = index.detach().long()         # the harness hands every input over as float64
    return torch.gather(x, a, torch.where(index < 0, index + x.shape[a], index))


defop(OpInfo("take_along", _take_along_samples,
             lambda rng: [BadInput((np.ones((3, 2)), np.zeros((3,), np.int64)), {"axis": 0}, ShapeError, "as many axes"),
                          BadInput((np.ones((3, 2)), np.zeros((1, 3), np.int64)), {"axis": 0}, ShapeError, "exceeds"),
                          BadInput((np.ones((3, 2)), np.array([[0, 2]])), {"axis": 1}, IndexRangeError, "[-2, 2)"),
                          BadInput((np.ones((3, 2)), np.array([[-4, 0]])), {"axis": 0}, IndexRangeError, "[-3, 3)"),
                          BadInput((np.ones((3, 2)), np.ones((1, 2))), {"axis": 0}, DTypeError, "integers")],
             diff=(0,), torch_ref=_torch_take_along))


# ---- scatter_add ----------------------------------------------------------------------------

def _scatter_add_samples(rng):
    return [Sample((rand(rng, 3, 4), rand(rng, 3, 3)),
                   {"axis": 1, "index": np.array([[0, 3, 3], [1, 9, 0], [2, 2, 2]])}, "axis 1, OOB and repeats"),
            Sample((rand(rng, 3, 4), rand(rng, 4, 4)),
                   {"axis": 0, "index": np.array([[2, 0, 1, 1], [0, 0, 5, 2]])}, "axis 0, src larger than index"),
            Sample((rand(rng, 2, 3, 2), rand(rng, 2, 3, 5)),
                   {"axis": -1, "index": rng.integers(0, 3, size=(2, 3, 5))}, "3-D"),
            Sample((rand(rng, 4), rand(rng, 6)), {"axis": 0, "index": np.array([1, 1, 1, 0, 7, 3])}, "1-D")]


def _torch_scatter_add(torch, x, src, *, axis, index):
    a = axis % x.dim()
    idx, ok = _safe(torch, index, x.shape[a])
    # torch's backward mishandles a src larger than index, so hand it exactly the covered region.
    region = tuple(slice(0, k) for k in np.shape(index))
    return x.scatter_add(a, idx, src[region] * ok)


def _scatter_add_bad(rng):
    x = np.ones((3, 2))
    return [BadInput((x, np.ones((3, 2))), {"axis": 0, "index": [[0, 1], [1, -1]]}, IndexRangeError, "negative"),
            BadInput((x, np.ones((3, 2))), {"axis": 0, "index": [[0.0, 1.0]]}, DTypeError, "integers"),
            BadInput((x, np.ones((1, 2))), {"axis": 0, "index": np.zeros((2, 2), np.int64)}, ShapeError, "src"),
            BadInput((x, np.ones((3,))), {"axis": 0, "index": np.zeros((1, 1), np.int64)}, ShapeError, "(3,)"),
            BadInput((x, np.ones((3, 2), np.int64)), {"axis": 0, "index": np.zeros((1, 1), np.int64)},
                     DTypeError, "dtype")]


defop(OpInfo("scatter_add", _scatter_add_samples, _scatter_add_bad, torch_ref=_torch_scatter_add))


# ---- embedding ------------------------------------------------------------------------------

def _embedding_samples(rng):
    return [Sample((rand(rng, 6, 4),), {"indices": [1, 5, 1, 0]}, "1-D, repeats"),
            Sample((rand(rng, 6, 4),), {"indices": np.array([[0, 2, 9], [5, 5, 1]])}, "2-D, OOB"),
            Sample((rand(rng, 3, 2),), {"indices": np.array(2)}, "0-d index"),
            Sample((rand(rng, 3, 2),), {"indices": np.zeros((2, 0), dtype=np.int64)}, "empty")]


def _torch_embedding(torch, w, *, indices):
    idx, ok = _safe(torch, indices, w.shape[0])
    return torch.nn.functional.embedding(idx, w) * ok[..., None]


defop(OpInfo("embedding", _embedding_samples,
             _with(lambda rng: [BadInput((np.ones(4),), {"indices": [0]}, ShapeError, "2-D")],
                   _index_bad(lambda i: {"indices": i}, (3, 2))),
             torch_ref=_torch_embedding))


# ---- gather_rows / scatter_add_rows ---------------------------------------------------------

def _gather_rows_samples(rng):
    return [Sample((rand(rng, 5, 3),), {"indices": [4, 0, 0, 2]}, "repeats"),
            Sample((rand(rng, 4, 2),), {"indices": np.array([3, 4, 100, 1])}, "OOB rows"),
            Sample((rand(rng, 4, 2, 3),), {"indices": [1, 3]}, "3-D rows"),
            Sample((rand(rng, 6),), {"indices": [5, 0, 6]}, "1-D mat"),
            Sample((rand(rng, 3, 2),), {"indices": []}, "no indices")]


def _torch_gather_rows(torch, m, *, indices):
    idx, ok = _safe(torch, indices, m.shape[0])
    return torch.index_select(m, 0, idx) * _along(ok, 0, m.dim())


defop(OpInfo("gather_rows", _gather_rows_samples,
             _with(lambda rng: [BadInput((np.ones((3, 2)),), {"indices": [[0]]}, ShapeError, "1-D"),
                                BadInput((np.ones(()),), {"indices": [0]}, ShapeError, "0-d")],
                   _index_bad(lambda i: {"indices": i}, (3, 2))),
             torch_ref=_torch_gather_rows))


def _scatter_rows_samples(rng):
    return [Sample((rand(rng, 5, 3), rand(rng, 4, 3)), {"indices": [4, 0, 0, 2]}, "repeats"),
            Sample((rand(rng, 4, 2), rand(rng, 4, 2)), {"indices": np.array([3, 4, 100, 3])}, "OOB rows"),
            Sample((rand(rng, 4, 2, 3), rand(rng, 2, 2, 3)), {"indices": [1, 1]}, "3-D rows"),
            Sample((rand(rng, 6), rand(rng, 3)), {"indices": [5, 0, 6]}, "1-D mat"),
            Sample((rand(rng, 3, 2), rand(rng, 0, 2)), {"indices": []}, "no indices")]


def _torch_scatter_rows(torch, m, v, *, indices):
    idx, ok = _safe(torch, indices, m.shape[0])
    return m.index_add(0, idx, v * _along(ok, 0, v.dim()))


def _scatter_rows_bad(rng):
    m = np.ones((3, 2))
    return [BadInput((m, np.ones((2, 2))), {"indices": [0, -1]}, IndexRangeError, "negative"),
            BadInput((m, np.ones((1, 2))), {"indices": [2 ** 32]}, IndexRangeError, "2**32"),
            BadInput((m, np.ones((1, 2))), {"indices": [1.0]}, DTypeError, "integers"),
            BadInput((m, np.ones((2, 3))), {"indices": [0, 1]}, ShapeError, "(2, 2)"),
            BadInput((m, np.ones((2, 2))), {"indices": [0]}, ShapeError, "1 indices"),
            BadInput((m, np.ones((1, 2), np.int64)), {"indices": [0]}, DTypeError, "dtype")]


defop(OpInfo("scatter_add_rows", _scatter_rows_samples, _scatter_rows_bad, torch_ref=_torch_scatter_rows))


# ---- setitem / put --------------------------------------------------------------------------

def _setitem_samples(rng):
    return [Sample((rand(rng, 4, 3), rand(rng, 2, 3)), {"index": (slice(1, 3),)}, "row slice"),
            Sample((rand(rng, 4, 3), rand(rng, 4)), {"index": (Ellipsis, 1)}, "int on the last axis"),
            Sample((rand(rng, 5, 4), rand(rng, 2, 2)), {"index": (slice(None, None, 3), slice(-2, None))},
                   "step and negative start"),
            Sample((rand(rng, 2, 3, 4), rand(rng, 3)), {"index": (-1, None, slice(None), 0)}, "None, ints"),
            Sample((rand(rng, 3), rand(rng)), {"index": (2,)}, "one entry"),
            Sample((rand(rng, 3, 2), rand(rng, 0, 2)), {"index": (slice(2, 1),)}, "empty region")]


def _torch_setitem(torch, x, v, *, index):
    y = x.clone()
    y[index] = v.reshape(y[index].shape)
    return y


def _setitem_bad(rng):
    x = np.ones((3, 2))
    return [BadInput((x, np.ones((3,))), {"index": (0,)}, ShapeError, "(2,)", "values of the wrong shape"),
            BadInput((x, np.ones((2,))), {"index": (3,)}, IndexRangeError, "index 3", "int out of range"),
            BadInput((x, np.ones((2,), np.int64)), {"index": (0,)}, DTypeError, "dtype", "mixed dtypes")]


defop(OpInfo("setitem", _setitem_samples, _setitem_bad, torch_ref=_torch_setitem))


def _put_samples(rng):
    return [Sample((rand(rng, 3, 4), rand(rng, 5)), {"index": np.array([0, 11, 5, 6, 2])}, "distinct offsets"),
            Sample((rand(rng, 3, 4), rand(rng, 2, 3)), {"index": np.array([[1, 1, 7], [3, 1, 0]]),
                                                        "accumulate": True}, "repeats accumulate"),
            Sample((rand(rng, 2, 2), rand(rng, 3)), {"index": np.array([3, 9, 0])}, "OOB ignored"),
            Sample((rand(rng, 6), rand(rng, 4)), {"index": np.array([2, 2, 5, 2])}, "repeats: last wins"),
            Sample((rand(rng, 2, 3), rand(rng, 0)), {"index": np.zeros(0, np.int64)}, "no offsets")]


def _torch_put(torch, x, v, *, index, accumulate=False):
    flat = put_plan(x.shape, v.shape, index, accumulate)
    ok = torch.as_tensor(flat < x.numel())
    return x.put(torch.as_tensor(flat)[ok], v.reshape(-1)[ok], accumulate=accumulate)


def _put_bad(rng):
    x = np.ones((3, 2))
    return [BadInput((x, np.ones(2)), {"index": [0, -1]}, IndexRangeError, "negative"),
            BadInput((x, np.ones(2)), {"index": [0, 1, 2]}, ShapeError, "must match"),
            BadInput((x, np.ones(1)), {"index": [0.0]}, DTypeError, "integers"),
            BadInput((x, np.ones(1, np.int64)), {"index": [0]}, DTypeError, "dtype")]


defop(OpInfo("put", _put_samples, _put_bad, torch_ref=_torch_put))
