"""The gamma-function family (torch.lgamma, digamma, polygamma, mvlgamma): computed in float64 on the
host (NumPy and Python's ``math.lgamma``; CUDA tensors make a round trip) and rounded to the input's
float dtype, differentiable through custom autograd Functions (lgamma' = digamma, digamma' = trigamma).
They are not primitives of the IR: ``torchlean.compile`` does not trace them (docs/differences.md).

    >>> import torchlean as tl
    >>> [round(v, 4) for v in tl.lgamma(tl.tensor([0.5, 3.0])).tolist()]
    [0.5724, 0.6931]
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Function
from ..dtypes import get_default_dtype
from ..errors import AutogradError, DomainError
from ..tensor import Tensor
from .creation import tensor
from .table import export

__all__ = ["lgamma", "digamma", "polygamma", "mvlgamma"]

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
    reflection for x < 0.5. At the poles 0, -1, -2, ... digamma follows torch (-inf at +0, +inf at -0, NaN below) and
    trigamma is +inf."""
    x = np.asarray(x, dtype=np.float64)
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
    pole = (x <= 0) & (x == np.floor(x)) & np.isfinite(x)
    if order == 0:
        out = np.where(pole, np.nan, val)
        out = np.where(x == 0, np.copysign(np.inf, -x), out)   # torch's: -inf at +0, +inf at -0
    else:
        out = np.where(pole, np.inf, val)  # a double pole: torch gives inf at 0, ~1e32 at -1, -2, ...
    return np.where(np.isnan(x), np.nan, out)


def _host(x):
    return np.asarray(x.detach().cpu().numpy(), dtype=np.float64)


def _back(a, like):
    return tensor(a.astype(like.dtype.dtype if hasattr(like.dtype, "dtype") else np.float32), dtype=like.dtype,
                  device=like.device)


def _float(x, op):
    if not isinstance(x, Tensor):
        x = tensor(x)
    if x.dtype.is_complex:
        raise DomainError(f"{op}: complex inputs are not supported")
    return x if x.dtype.is_floating_point else x.to(get_default_dtype())


class _Trigamma(Function):
    @staticmethod
    def forward(ctx, x):
        return _back(_np_polygamma(_host(x), 1), x)

    @staticmethod
    def backward(ctx, g):
        raise AutogradError("polygamma: the derivative of trigamma (polygamma of order 2) is not available")


class _Digamma(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _back(_np_polygamma(_host(x), 0), x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _Trigamma.apply(x)


class _Lgamma(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _back(_np_lgamma(_host(x)), x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _Digamma.apply(x)


@export("lgamma")
def lgamma(input):  # noqa: A002
    """log|Gamma(x)| elementwise, differentiable (derivative digamma)."""
    return _Lgamma.apply(_float(input, "lgamma"))


@export("digamma")
def digamma(input):  # noqa: A002
    """The digamma function, differentiable (derivative trigamma)."""
    return _Digamma.apply(_float(input, "digamma"))


@export("polygamma", method=False)
def polygamma(n, input):  # noqa: A002
    """The n-th derivative of digamma, for n = 0 (digamma) and n = 1 (trigamma, without a gradient of
    its own); higher orders raise."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise DomainError(f"polygamma(n, x) does not support negative n (got {n!r})")
    x = _float(input, "polygamma")
    if n == 0:
        return _Digamma.apply(x)
    if n == 1:
        return _Trigamma.apply(x)
    raise DomainError(f"polygamma: order n = {n} is not supported (n = 0 and 1 are)")


@export("mvlgamma")
def mvlgamma(input, p):  # noqa: A002
    """The multivariate log-gamma of dimension ``p``: sum_j lgamma(x - j / 2) + p (p - 1) / 4 log(pi)."""
    x = _float(input, "mvlgamma")
    if not isinstance(p, (int, np.integer)) or p < 1:
        raise DomainError(f"mvlgamma: p has to be greater than or equal to 1, got {p!r}")
    if bool((x <= (p - 1) / 2).any()):
        raise DomainError(f"mvlgamma: All elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    out = None
    for j in range(p):
        term = lgamma(x - j / 2)
        out = term if out is None else out + term
    return out + p * (p - 1) / 4 * math.log(math.pi)


def _polygamma_method(self, n):
    return polygamma(n, self)


export("polygamma", function=False)(_polygamma_method)
