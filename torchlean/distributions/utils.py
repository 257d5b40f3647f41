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

from ..autograd import Function
from ..dtypes import finfo, get_default_dtype
from ..ops import broadcast_tensors, tensor
from ..tensor import Tensor

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


# ---- special functions (float64 on the host, rounded to the input's dtype) -------------------------

_LGAMMA = np.frompyfunc(math.lgamma, 1, 1)


def _np_lgamma(x):
    out = np.empty_like(x)
    finite = np.isfinite(x)
    ok = finite & ~((x <= 0) & (x == np.floor(x)))
    out[ok] = _LGAMMA(x[ok]).astype(np.float64)
    out[~ok & finite] = np.inf           # poles at 0, -1, -2, ...
    out[np.isinf(x)] = np.inf
    out[np.isnan(x)] = np.nan
    return out


def _np_polygamma(x, order):
    """digamma (order 0) or trigamma (order 1): recurrence up to x >= 10, then the asymptotic series;
    reflection for x < 0.5 (torch's conventions: digamma(0) = -inf, poles at negative integers nan)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, np.nan)
    refl = x < 0.5
    y = np.where(refl, 1.0 - x, x)
    acc = np.zeros_like(y)
    while True:
        small = y < 10
        if not small.any():
            break
        acc = np.where(small, acc + (1.0 / y if order == 0 else 1.0 / (y * y)), acc)
        y = np.where(small, y + 1, y)
    z = 1.0 / (y * y)
    if order == 0:
        series = np.log(y) - 0.5 / y - z * (1 / 12 - z * (1 / 120 - z * (1 / 252 - z * (1 / 240 - z * (1 / 132)))))
        val = series - acc
    else:
        series = 1 / y + z / 2 + z / y * (1 / 6 - z * (1 / 30 - z * (1 / 42 - z * (1 / 30))))
        val = series + acc
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.sin(np.pi * x)
        if order == 0:
            val = np.where(refl, val - np.pi * np.cos(np.pi * x) / s, val)
        else:
            val = np.where(refl, -val + (np.pi / s) ** 2, val)
    pole = (x <= 0) & (x == np.floor(x))
    out = np.where(pole, np.nan, val)
    if order == 0:
        out = np.where(x == 0, -np.inf, out)
    return np.where(np.isnan(x), np.nan, out)


def _host(x):
    return np.asarray(x.detach().cpu().numpy(), dtype=np.float64)


def _back(a, like):
    return tensor(a.astype(like.dtype.dtype if hasattr(like.dtype, "dtype") else np.float32), dtype=like.dtype,
                  device=like.device)


def _trigamma(x):
    """trigamma(x) as a tensor like ``x``: digamma's derivative. Custom Functions' backwards run
    without recording (no higher-order gradients through them), so this needs no gradient itself."""
    return _back(_np_polygamma(_host(x), 1), x)


class _Digamma(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _back(_np_polygamma(_host(x), 0), x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _trigamma(x)


class _Lgamma(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _back(_np_lgamma(_host(x)), x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _Digamma.apply(x)


def lgamma(x):
    """log|Gamma(x)| elementwise (torch.lgamma), differentiable (derivative digamma). Host-computed."""
    return _Lgamma.apply(x)


def digamma(x):
    """The digamma function (torch.digamma), differentiable (derivative trigamma). Host-computed."""
    return _Digamma.apply(x)

