"""Host kernels of the index family: gathers and scatter-adds over host index sequences.

Indices are validated by :func:`~torchlean.kernels.api.check_indices`; in-range-of-uint32 but
out-of-bounds entries gather 0 and are ignored by scatters (DESIGN.md)."""

from __future__ import annotations

import numpy as np

from ..api import check_indices


def gather_vec(v, indices):
    return _gather_rows(v, indices, "gather_vec")


def gather_rows(mat, indices):
    return _gather_rows(mat, indices, "gather_rows")


def _gather_rows(mat, indices, op):
    """Rows ``indices`` of ``mat``; out-of-bounds indices give zero rows."""
    idx = check_indices(indices, op)
    ok = idx < mat.shape[0]
    if ok.all():
        return np.take(mat, idx, axis=0)
    out = np.zeros((idx.shape[0],) + mat.shape[1:], dtype=mat.dtype)
    out[ok] = mat[idx[ok]]
    return out


def scatter_add(x, values, indices):
    return _scatter_rows(x, values, indices, "scatter_add")


def scatter_add_row(mat, row, i):
    check_indices([i], "scatter_add_row")
    out = mat.copy()
    if i < mat.shape[0]:
        out[i] += row
    return out


def scatter_add_rows(mat, values, indices):
    return _scatter_rows(mat, values, indices, "scatter_add_rows")


def _scatter_rows(mat, values, indices, op):
    """A copy of ``mat`` with ``values[j]`` added to row ``indices[j]``; out-of-bounds rows ignored."""
    idx = check_indices(indices, op)
    ok = idx < mat.shape[0]
    out = mat.copy()
    # add.at adds in index order, one row at a time: the CUDA kernels' order, so the two agree bit for bit.
    np.add.at(out, idx[ok], values[ok])
    return out


def device_ints(a):
    return np.asarray(a, dtype=np.int64)


def host_ints(x):
    a = np.array(x, copy=True)
    a.flags.writeable = False
    return a
