"""torch.sparse under torchlean: sparse COO tensors are stored dense (:mod:`torchlean.ops.sparse`), so its
products and reductions are the dense ones, with the same values.

    >>> import torchlean as tl
    >>> tl.sparse.mm(tl.eye(2).to_sparse(), tl.ones(2, 1)).tolist()
    [[1.0], [1.0]]
"""

from __future__ import annotations

__all__ = ["mm", "addmm", "sum"]


def _ops():
    from . import ops
    return ops


def mm(mat1, mat2):
    """``mat1 @ mat2``."""
    return _ops().mm(mat1, mat2)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``beta mat + alpha (mat1 @ mat2)``."""
    return _ops().addmm(mat, mat1, mat2, beta=beta, alpha=alpha)


def sum(input, dim=None, dtype=None):  # noqa: A001,A002 - torch.sparse's names
    """The sum of all entries, or over ``dim``."""
    o = _ops()
    return o.sum(input, dtype=dtype) if dim is None else o.sum(input, dim, dtype=dtype)
