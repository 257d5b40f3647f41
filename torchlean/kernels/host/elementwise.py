"""Host kernels of the elementwise family: arithmetic with NumPy broadcasting, unary math and
activations, comparisons, and the fused backward of each activation."""

from __future__ import annotations

import importlib.util
import math

import numpy as np

from ...spec.elementwise import BITWISE, COMPARE, SAFE_LOG_EPS, erf as _erf_math, erfc as _erfc_math, \
    erfinv as _erfinv_math, float_as_ints
from ...spec.elementwise import sign  # noqa: F401  (torch's: NaN gives 0, bools stay bools)
from .base import _c, blockwise, select


# ---- elementwise ----------------------------------------------------------------------------

add, sub, mul, div = np.add, np.subtract, np.multiply, np.divide


maximum, minimum, neg, abs, sqrt = np.maximum, np.minimum, np.negative, np.abs, np.sqrt


exp, log, sin, cos, tanh = np.exp, np.log, np.sin, np.cos, np.tanh


where = np.where

tan, asin, acos, atan = np.tan, np.arcsin, np.arccos, np.arctan
sinh, cosh, asinh, acosh, atanh = np.sinh, np.cosh, np.arcsinh, np.arccosh, np.arctanh
expm1, log1p = np.expm1, np.log1p
floor, ceil, round, trunc = np.floor, np.ceil, np.rint, np.trunc  # rint: half to even, as torch.round
atan2, fmod, remainder, floor_divide, power = np.arctan2, np.fmod, np.remainder, np.floor_divide, np.power


def bitwise(a, b, op):
    return BITWISE[op](a, b)


def bitwise_not(x):
    return np.invert(float_as_ints(x) if x.dtype.kind == "f" else x)


def scale(x, c):
    return x * _c(x, c)


def add_scalar(x, c):
    return x + _c(x, c)


def pow_scalar(x, p):
    if p == 2:
        return x * x
    return np.power(x, _c(x, p))


def inv(x):
    return np.reciprocal(x)


def relu(x):
    return np.maximum(x, _c(x, 0))


def _sigmoid(x):
    # torch's CPU form, 1 / (1 + e^-x): four passes, relative accuracy everywhere the result is a
    # normal number; e^-x overflows to inf below x = -88.7 (float32), giving 0 where the meaning is
    # a subnormal (as torch gives). The caller silences the overflow warning.
    e = np.exp(-x)
    e += _c(x, 1)
    return np.reciprocal(e, out=e) if type(e) is np.ndarray else np.reciprocal(e)


def sigmoid(x):
    with np.errstate(over="ignore"):
        return blockwise(_sigmoid, x)


def softplus(x):
    return np.maximum(x, _c(x, 0)) + np.log1p(np.exp(-np.abs(x)))


def _silu(x):
    e = np.exp(-x)
    e += _c(x, 1)
    return x / e                  # torch's x / (1 + e^-x): one rounding less than x * sigmoid(x)


def silu(x):
    with np.errstate(over="ignore", invalid="ignore"):   # silu(-inf) = -inf / inf: NaN, as torch
        return blockwise(_silu, x)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


_INV_SQRT_2 = 1.0 / math.sqrt(2.0)


# ---- the error function: one implementation, used by erf and by GELU's normal CDF --------------

# float64: SciPy's erf when installed (an optional dependency: looked up here, imported on first
# use, since importing it costs ~0.4 s), else Python's math.erf elementwise.
_HAVE_SCIPY = importlib.util.find_spec("scipy") is not None

# Chebyshev-fitted erfc (Numerical Recipes' erfcc): relative error < 1.2e-7 everywhere, tails
# included, so Phi(x) = erfc(-x / sqrt 2) / 2 keeps float32's relative accuracy even where
# GELU is tiny (x << 0), at a few passes over the array.
_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
         1.48851587, -0.82215223, 0.17087277)
# erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)): for |x| < 1 eleven terms reach
# float32's precision, where 1 - erfc(x) would lose it to cancellation (erfc(1) = 0.16).
_ERF_TAYLOR = tuple(2.0 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(11))


def _erfc32(x):
    # In-place Horner steps: each pass reuses one buffer instead of allocating a temporary.
    z = np.abs(x)
    t = np.array(z * np.float32(0.5), ndmin=0)  # an array even for 0-d x: the steps below are in place
    t += np.float32(1)
    np.reciprocal(t, out=t)
    p = np.array(t * np.float32(_ERFC[-1]), ndmin=0)
    for c in _ERFC[-2:0:-1]:
        p += np.float32(c)
        p *= t
    p += np.float32(_ERFC[0])
    z *= z
    p -= z
    np.exp(p, out=p)
    p *= t
    return select(x >= 0, p, np.float32(2) - p)


def _erf64(x):
    if _HAVE_SCIPY:
        from scipy.special import erf as scipy_erf
        return scipy_erf(x)
    return _erf_math(x)  # the spec's: Python's math.erf elementwise


def erf(x):
    if x.dtype == np.float32:
        return blockwise(_erf32, x)
    return _erf64(x).astype(x.dtype, copy=False)


def _erf32(x):
    a = np.abs(x)
    x2 = np.minimum(a, np.float32(1)) ** 2   # the series is used below 1 only: keep it finite
    small = np.full(x.shape, np.float32(_ERF_TAYLOR[-1]))
    for c in _ERF_TAYLOR[-2::-1]:
        small *= x2
        small += np.float32(c)
    small *= x
    return select(a < np.float32(1), small, np.copysign(np.float32(1) - _erfc32(a), x))


def erfc(x):
    if x.dtype == np.float32:
        return blockwise(_erfc32, x)
    if _HAVE_SCIPY:
        from scipy.special import erfc as scipy_erfc
        return scipy_erfc(x)
    return _erfc_math(x).astype(x.dtype, copy=False)


def erfinv(x):
    if x.dtype == np.float32:
        return _erfinv32(x)
    if _HAVE_SCIPY:
        from scipy.special import erfinv as scipy_erfinv
        return scipy_erfinv(x)
    return _erfinv_math(x).astype(x.dtype, copy=False)


# Giles' single-precision erfinv (the spec's first guess): relative error ~ 4e-7 on (-1, 1).
_GILES = ((2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
           -0.00417768164, 0.246640727, 1.50140941),
          (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
           0.00943887047, 1.00167406, 2.83297682))


def _erfinv32(x):
    one = np.float32(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = -np.log((one - x) * (one + x))  # (1 - x) is exact near 1, where 1 - x * x is not
    central = w < np.float32(5)
    u = np.where(central, w - np.float32(2.5), np.sqrt(w) - np.float32(3))
    p = np.where(central, np.float32(_GILES[0][0]), np.float32(_GILES[1][0]))
    for c0, c1 in zip(_GILES[0][1:], _GILES[1][1:]):
        p = p * u + np.where(central, np.float32(c0), np.float32(c1))
    y = p * x
    a = np.abs(x)
    return np.where(a < one, y, np.where(a == one, np.copysign(np.float32(np.inf), x), np.float32(np.nan)))


def _phi(x):
    """The standard normal CDF, elementwise, in x's dtype."""
    if x.dtype == np.float32:
        return np.float32(0.5) * _erfc32(x * np.float32(-_INV_SQRT_2))
    return (0.5 * (1.0 + erf(x * _INV_SQRT_2))).astype(x.dtype, copy=False)


def _gelu(x, approximate):
    if approximate == "tanh":
        c = _c(x, _SQRT_2_OVER_PI)
        return _c(x, 0.5) * x * (_c(x, 1) + np.tanh(c * (x + _c(x, 0.044715) * x * x * x)))
    return x * _phi(x)


def gelu(x, approximate="none"):
    return blockwise(lambda v: _gelu(v, approximate), x)


def safe_log(x):
    return np.log(softplus(x) + _c(x, SAFE_LOG_EPS))


def clamp(x, lo, hi):
    if x.dtype.kind != "f":  # integer bounds on an integer tensor (the front end promotes any other)
        if lo is not None:
            x = np.maximum(x, x.dtype.type(lo))
        return x if hi is None else np.minimum(x, x.dtype.type(hi))
    return np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi).astype(x.dtype, copy=False)


def compare(a, b, op):
    return COMPARE[op](a, b)


# ---- fused backward of elementwise ops ------------------------------------------------------


def relu_bwd(x, g):
    return blockwise(lambda v, gv: select(v > 0, gv, _c(gv, 0)), x, g)


def abs_bwd(x, g):
    return g * np.sign(x)


def sqrt_bwd(y, g):
    pos = y > 0
    return np.where(pos, _c(g, 0.5) * g / np.where(pos, y, _c(y, 1)), _c(g, 0))


def sigmoid_bwd(y, g):
    return blockwise(lambda yv, gv: gv * yv * (_c(yv, 1) - yv), y, g)


def tanh_bwd(y, g):
    return g * (_c(y, 1) - y * y)


def softplus_bwd(x, g):
    with np.errstate(over="ignore"):
        return blockwise(lambda v, gv: gv * _sigmoid(v), x, g)


def _silu_bwd(x, g):
    s = _sigmoid(x)
    return g * s * (_c(x, 1) + x * (_c(x, 1) - s))


def silu_bwd(x, g):
    with np.errstate(over="ignore"):
        return blockwise(_silu_bwd, x, g)


def gelu_bwd(x, g, approximate="none"):
    return blockwise(lambda v, gv: _gelu_bwd(v, gv, approximate), x, g)


def _gelu_bwd(x, g, approximate):
    if approximate == "tanh":
        c = _c(x, _SQRT_2_OVER_PI)
        k = _c(x, 0.044715)
        t = np.tanh(c * (x + k * x * x * x))
        d = _c(x, 0.5) * (_c(x, 1) + t) + _c(x, 0.5) * x * (_c(x, 1) - t * t) * c * (_c(x, 1) + _c(x, 3) * k * x * x)
    else:
        cdf = _phi(x)
        d = cdf + x * np.exp(_c(x, -0.5) * x * x) * _c(x, 1.0 / math.sqrt(2 * math.pi))
    return g * d


def safe_log_bwd(x, g):
    return g * sigmoid(x) / (softplus(x) + _c(x, SAFE_LOG_EPS))


def clamp_bwd(x, g, lo, hi):
    inside = np.ones(x.shape, dtype=bool)
    if lo is not None:
        inside &= x > lo
    if hi is not None:
        inside &= x < hi
    return np.where(inside, g, _c(g, 0))


def minmax_bwd(a, b, g, is_max):
    win = (a > b) if is_max else (a < b)
    wa = np.where(win, _c(g, 1), np.where(a == b, _c(g, 0.5), _c(g, 0)))
    return g * wa, g * (_c(g, 1) - wa)


def pow_bwd(x, g, p):
    if p == 0:
        return np.zeros_like(g)
    if p == 2:
        return _c(g, 2) * g * x
    return g * _c(x, p) * np.power(x, _c(x, p - 1))
