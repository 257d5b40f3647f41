"""Helpers shared by the distributions (torch.distributions.utils): parameter broadcasting,
probability/logit conversion, cached properties, and the special functions lgamma and digamma.

    >>> import torchlean as tl
    >>> from torchlean.distributions.utils import probs_to_logits, lgamma
    >>> round(probs_to_logits(tl.tensor([0.5]), is_binary=True).item(), 6)
    0.0
    >>> round(lgamma(tl.tensor([5.0])).item(), 4)
    3.1781
"""

from __future__ import annotations

import math
from numbers import Number

import numpy as np

from ..dtypes import finfo, get_default_dtype
from ..ops import broadcast_tensors, tensor
from ..ops.gamma import digamma, lgamma  # the special functions, host-computed and differentiable
from ..tensor import Size, Tensor

__all__ = ["broadcast_all", "clamp_probs", "digamma", "lazy_property", "lgamma", "logits_to_probs",
           "probs_to_logits", "tril_matrix_to_vec", "vec_to_tril_matrix"]


def broadcast_all(*values):
    """Numbers become tensors (of the first tensor's dtype, else the default dtype); all broadcast."""
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, torch.Tensor or objects "
                         "implementing __torch_function__.")
    if not all(isinstance(v, Tensor) for v in values):
        ref = next((v for v in values if isinstance(v, Tensor)), None)
        dtype = ref.dtype if ref is not None else get_default_dtype()
        device = ref.device if ref is not None else None
        values = [v if isinstance(v, Tensor) else tensor(v, dtype=dtype, device=device) for v in values]
    return tuple(broadcast_tensors(*values))


def batch_of(*given, like):
    """torch's batch shape for a distribution made from the parameters ``given`` (as passed): empty
    when they are all Python numbers, else the shape of ``like`` (the broadcast parameters)."""
    return Size() if all(isinstance(v, Number) for v in given) else like.shape


def _sum_rightmost(value, dim: int):
    """Sum out the ``dim`` rightmost axes."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


def logits_to_probs(logits, is_binary=False):
    """sigmoid for binary logits, softmax over the last axis otherwise."""
    if is_binary:
        return logits.sigmoid()
    return logits.softmax(-1)


def clamp_probs(probs):
    """Clamp into [eps, 1 - eps] of the dtype."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """log(p) - log1p(-p) for binary probabilities, log(p) otherwise (after clamp_probs)."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ps_clamped.log() - (-ps_clamped).log1p()
    return ps_clamped.log()


class lazy_property:
    """A property computed on first access and stored in the instance's ``__dict__`` (so validation,
    which skips names absent from ``__dict__``, does not force it)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        from ..tensor import enable_grad
        with enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def tril_matrix_to_vec(mat, diag=0):
    """The lower-triangular entries (row-major) of the trailing square matrices."""
    n = mat.shape[-1]
    rows, cols = np.tril_indices(n, k=diag)
    flat = mat.reshape(tuple(mat.shape[:-2]) + (n * n,))
    return flat[..., tensor((rows * n + cols).tolist())]


def vec_to_tril_matrix(vec, diag=0):
    """Inverse of tril_matrix_to_vec (zeros above the diagonal)."""
    m = vec.shape[-1]
    n = int((-(1 + 2 * diag) + math.sqrt((1 + 2 * diag) ** 2 + 8 * m + 4 * abs(diag) * (diag + 1))) / 2)
    rows, cols = np.tril_indices(n, k=diag)
    idx = np.full(n * n, m, dtype=np.int64)
    idx[rows * n + cols] = np.arange(m)
    from ..ops import cat, zeros
    padded = cat([vec, zeros(tuple(vec.shape[:-1]) + (1,), dtype=vec.dtype)], -1)
    return padded[..., tensor(idx.tolist())].reshape(tuple(vec.shape[:-1]) + (n, n))
