"""Sparse COO tensors, stored dense: ``sparse_coo_tensor`` builds the dense tensor its indices and values
describe (repeated indices add up, as ``coalesce`` does), and ``to_sparse`` / ``to_dense`` / ``coalesce``
return the tensor itself. Programs that build a sparse adjacency or scaling matrix and multiply with it
get torch's values; memory is the dense size (docs/differences.md).

    >>> import torchlean as tl
    >>> a = tl.sparse_coo_tensor(tl.tensor([[0, 1, 1], [2, 0, 0]]), tl.tensor([3.0, 4.0, 5.0]), (2, 3))
    >>> a.tolist(), tl.spmm(a.to_sparse(), tl.ones(3, 1)).tolist()
    ([[0.0, 0.0, 3.0], [9.0, 0.0, 0.0]], [[3.0], [9.0]])
"""

from __future__ import annotations

import numpy as np

from ..dtypes import get_default_dtype
from ..errors import DTypeError, IndexRangeError, ShapeError
from ..tensor import Tensor
from .creation import tensor, zeros
from .index import index_put
from .linalg import mm
from .table import export

__all__ = ["sparse_coo_tensor", "spmm"]


@export(method=False)
def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """The tensor of ``size`` whose entries at ``indices`` (``(sparse_dim, nnz)`` integers) are ``values``
    (``(nnz, *dense_dims)``), repeated positions summed, zero elsewhere; ``size`` defaults to one past
    the largest index per sparse axis, then the dense axes of ``values``."""
    op = "sparse_coo_tensor"
    idx = indices if isinstance(indices, Tensor) else tensor(np.asarray(indices))
    vals = values if isinstance(values, Tensor) else tensor(values)
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype.name == "bool":
        raise DTypeError(f"{op}: indices must be an integer tensor, got {idx.dtype.name}")
    if idx.dim() != 2:
        raise ShapeError(f"{op}: indices must be 2-dimensional (sparse_dim, nnz), got shape {tuple(idx.shape)}")
    sparse_dim, nnz = (int(v) for v in idx.shape)
    if vals.dim() < 1 or int(vals.shape[0]) != nnz:
        raise ShapeError(f"{op}: values of shape {tuple(vals.shape)} must have nnz = {nnz} entries along dim 0 "
                         f"(indices {tuple(idx.shape)})")
    at = idx.cpu().numpy().astype(np.int64)
    if at.size and at.min() < 0:
        raise IndexRangeError(f"{op}: found a negative index {int(at.min())} in indices")
    dense = tuple(int(v) for v in vals.shape[1:])
    if size is None:
        size = tuple(int(m) + 1 for m in (at.max(axis=1) if nnz else np.full(sparse_dim, -1))) + dense
    size = tuple(int(v) for v in size)
    if len(size) != sparse_dim + len(dense) or size[sparse_dim:] != dense:
        raise ShapeError(f"{op}: size {size} does not match indices {tuple(idx.shape)} and values "
                         f"{tuple(vals.shape)} (sparse axes then the values' dense axes)")
    for d in range(sparse_dim):
        if nnz and int(at[d].max()) >= size[d]:
            raise IndexRangeError(f"{op}: index {int(at[d].max())} is out of bounds for dimension {d} of size "
                                  f"{size[d]}")
    dt = dtype if dtype is not None else (vals.dtype if vals.dtype.is_floating_point or not
                                          isinstance(values, (list, tuple)) else get_default_dtype())
    vals = vals if vals.dtype == dt else vals.to(dt)
    out = zeros(size, dtype=dt, device=vals.device if device is None else device)
    out = index_put(out, tuple(idx[d] for d in range(sparse_dim)), vals, accumulate=True)
    return out.requires_grad_() if requires_grad else out


@export("to_sparse", "to_sparse_coo", "to_dense", "coalesce", function=False)
def _itself(self, *args, **kwargs):
    """Sparse layouts are stored dense here: the tensor itself."""
    return self


@export(method=False)
def spmm(input, mat2):  # noqa: A002
    """``input @ mat2`` (``input`` a sparse matrix, stored dense here)."""
    return mm(input, mat2)


@export("is_coalesced", function=False)
def _coalesced(self):
    """Always True: the dense storage has each position once."""
    return True
