"""Host kernels of the index family: gathers and scatter-adds over host index sequences.

Indices are validated by :func:`~torchlean.kernels.api.check_indices`; in-range-of-uint32 but
out-of-bounds entries gather 0 and are ignored by scatters (DESIGN.md)."""

from __future__ import annotations

import numpy as np

from ..api import check_indices


def gather_vec(v, indices):
    idx = check_indices(indices, "gather_vec")
    ok = idx < v.shape[0]
    out = np.zeros(idx.shape[0], dtype=v.dtype)
    out[ok] = v[idx[ok]]
    return out


def gather_rows(mat, indices):
    idx = check_indices(indices, "gather_rows")
    ok = idx < mat.shape[0]
    out = np.zeros((idx.shape[0],) + mat.shape[1:], dtype=mat.dtype)
    out[ok] = mat[idx[ok]]
    return out


def scatter_add(x, values, indices):
    idx = check_indices(indices, "scatter_add")
    ok = idx < x.shape[0]
    out = x.copy()
    np.add.at(out, idx[ok], values[ok])
    return out


def scatter_add_row(mat, row, i):
    check_indices([i], "scatter_add_row")
    out = mat.copy()
    if i < mat.shape[0]:
        out[i] += row
    return out


def scatter_add_rows(mat, values, indices):
    idx = check_indices(indices, "scatter_add_rows")
    ok = idx < mat.shape[0]
    out = mat.copy()
    np.add.at(out, idx[ok], values[ok])
    return out


def device_ints(a):
    return np.asarray(a, dtype=np.int64)


def host_ints(x):
    a = np.array(x, copy=True)
    a.flags.writeable = False
    return a
