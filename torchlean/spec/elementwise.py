"""Elementwise ops: the reference meaning of unary math, activations and
broadcasting binary arithmetic.

Conventions (DESIGN.md): relu'(0) = 0, abs'(0) = 0, sqrt'(x <= 0) = 0, clamp' is 1
strictly inside (lo, hi), elementwise max/min split the gradient 1/2-1/2 on ties.
softplus(x) = max(x, 0) + log1p(exp(-|x|)); safe_log(x) = log(softplus(x) + 1e-6).
Binary ops broadcast like NumPy; their VJP sums the cotangent back over the
broadcast axes (the adjoint of broadcast_to). ``compare(a, b; op)`` gives bools and no gradient.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import DomainError, ShapeError
from ..shape import broadcast_axes, broadcast_shapes
from .registry import defspec

SAFE_LOG_EPS = 1e-6


def sum_to_shape(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Adjoint of NumPy broadcasting: sum ``g`` over the axes that broadcasting added or stretched."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    return g.sum(axis=broadcast_axes(shape, g.shape)).reshape(shape)


def _same(x):
    return tuple(x)


def _unary(name, f, df, why=""):
    """Register ``name`` with forward ``f(x, **attrs)`` and derivative ``df(x, **attrs)``."""
    defspec(name, f, lambda g, x, **a: (g * df(x, **a),), _same, 1, why=why)


def _binary(name, f, vjp, why=""):
    def shape(a, b):
        return broadcast_shapes(a, b, op=name)

    def wrapped_vjp(g, a, b, **attrs):
        ga, gb = vjp(g, a, b)
        return sum_to_shape(ga, a.shape), sum_to_shape(gb, b.shape)

    defspec(name, f, wrapped_vjp, shape, 2, why=why)


# ---- binary arithmetic (NumPy broadcasting) -------------------------------------------------

_binary("add", lambda a, b: a + b, lambda g, a, b: (g, g))
_binary("sub", lambda a, b: a - b, lambda g, a, b: (g, -g), why="one kernel and one rounding, not add(a, neg(b))")
_binary("mul", lambda a, b: a * b, lambda g, a, b: (g * b, g * a))
_binary("div", lambda a, b: a / b, lambda g, a, b: (g / b, -g * a / (b * b)),
        why="a / b rounds once, mul(a, inv(b)) twice")


def _max_vjp(g, a, b):
    # Ties split the cotangent evenly (DESIGN.md): d max(a, b) = 1/2 da + 1/2 db at a == b.
    wa = np.where(a > b, 1.0, np.where(a == b, 0.5, 0.0))
    return g * wa, g * (1.0 - wa)


def _min_vjp(g, a, b):
    wa = np.where(a < b, 1.0, np.where(a == b, 0.5, 0.0))
    return g * wa, g * (1.0 - wa)


_binary("maximum", lambda a, b: np.maximum(a, b), _max_vjp)
_binary("minimum", lambda a, b: np.minimum(a, b), _min_vjp)


# ---- unary ----------------------------------------------------------------------------------

def _check_finite_scalar(op, name, v):
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise DomainError(f"{op}: {name} must be a finite number, got {v!r}")


def _scale_shape(x, *, c):
    _check_finite_scalar("scale", "c", c)
    return tuple(x)


defspec("scale", lambda x, *, c: x * c, lambda g, x, *, c: (g * c,), _scale_shape, 1,
        why="a Python scalar as an attribute: no constant tensor to make, upload or trace")
_unary("neg", lambda x: -x, lambda x: -np.ones_like(x))


def _pow_shape(x, *, exponent):
    _check_finite_scalar("pow", "exponent", exponent)
    return tuple(x)


defspec("pow", lambda x, *, exponent: np.power(x, exponent),
        lambda g, x, *, exponent: (g * (exponent * np.power(x, exponent - 1) if exponent != 0
                                        else np.zeros_like(x)),),
        _pow_shape, 1)

_unary("abs", np.abs, lambda x: np.sign(x))  # sign(0) = 0: abs'(0) = 0
_unary("sqrt", np.sqrt,
       lambda x: np.where(x > 0, 0.5 / np.sqrt(np.where(x > 0, x, 1.0)), 0.0))


def _clamp_shape(x, *, lo=None, hi=None):
    for n, v in (("min", lo), ("max", hi)):
        if v is not None:
            if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v):
                raise DomainError(f"clamp: {n} must be a number, got {v!r}")
    if lo is not None and hi is not None and lo > hi:
        raise DomainError(f"clamp: min {lo} is greater than max {hi}")
    return tuple(x)


def _clamp(x, *, lo=None, hi=None):
    return np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi)


def _clamp_vjp(g, x, *, lo=None, hi=None):
    inside = np.ones(x.shape, dtype=bool)
    if lo is not None:
        inside &= x > lo
    if hi is not None:
        inside &= x < hi
    return (np.where(inside, g, 0.0).astype(g.dtype, copy=False),)


defspec("clamp", _clamp, _clamp_vjp, _clamp_shape, 1,
        why="one kernel; and its gradient passes strictly inside (lo, hi), not maximum/minimum's tie split")

_unary("relu", lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(x.dtype))
_unary("exp", np.exp, np.exp)
_unary("log", np.log, lambda x: 1.0 / x)
_unary("inv", lambda x: 1.0 / x, lambda x: -1.0 / (x * x))
_unary("sin", np.sin, np.cos)
_unary("cos", np.cos, lambda x: -np.sin(x))


def sigmoid(x):
    # Two branches so that exp never overflows: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) otherwise.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


_unary("sigmoid", sigmoid, lambda x: sigmoid(x) * (1 - sigmoid(x)),
       why="stability (exp of -|x| only) and one kernel whose backward reads only y")
_unary("tanh", np.tanh, lambda x: 1 - np.tanh(x) ** 2)
_unary("softplus", softplus, sigmoid, why="stability: log(1 + exp(x)) overflows, max(x, 0) + log1p(exp(-|x|)) never")
_unary("silu", lambda x: x * sigmoid(x), lambda x: sigmoid(x) * (1 + x * (1 - sigmoid(x))),
       why="one fused kernel each way, where x * sigmoid(x) is two and keeps both values")
_unary("safe_log", lambda x: np.log(softplus(x) + SAFE_LOG_EPS),
       lambda x: sigmoid(x) / (softplus(x) + SAFE_LOG_EPS),
       why="one fused kernel each way, where log(softplus(x) + 1e-6) is three passes")

# erf: the error function, 2/sqrt(pi) * integral_0^x exp(-t^2) dt; erf'(x) = 2/sqrt(pi) exp(-x^2).
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    """The error function, elementwise in float64 (Python's ``math.erf``)."""
    return _erf(np.asarray(x, dtype=np.float64))


_unary("erf", erf, lambda x: _TWO_OVER_SQRT_PI * np.exp(-np.asarray(x, dtype=np.float64) ** 2))

# GELU: exact x * Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2, or PyTorch's tanh approximation.
_SQRT_2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _phi(x):
    return 0.5 * (1.0 + erf(np.asarray(x, dtype=np.float64) / _SQRT_2))


def _gelu_shape(x, *, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise DomainError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return tuple(x)


def _gelu(x, *, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))
    return (x * _phi(x)).astype(x.dtype, copy=False)


def _gelu_vjp(g, x, *, approximate="none"):
    if approximate == "tanh":
        u = _SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
        t = np.tanh(u)
        du = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x ** 2)
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du
    else:
        pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        d = _phi(x) + x * pdf
    return ((g * d).astype(g.dtype, copy=False),)


defspec("gelu", _gelu, _gelu_vjp, _gelu_shape, 1,
        why="one fused kernel each way, where x * (1 + erf(x / sqrt 2)) / 2 is five passes")


# ---- comparisons: bool results, no gradient (a result that is not a float is never recorded) --

COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
           "ne": np.not_equal}


def _compare_shape(a, b, *, op):
    if op not in COMPARE:
        raise DomainError(f"compare: op must be one of {sorted(COMPARE)}, got {op!r}")
    return broadcast_shapes(a, b, op="compare")


defspec("compare", lambda a, b, *, op: COMPARE[op](a, b), lambda g, a, b, *, op: (None, None), _compare_shape, 2)


# ---- where: cond is a boolean array attribute (not differentiable) ---------------------------

def _where_shape(a, b, *, cond):
    c = np.shape(cond)
    return broadcast_shapes(c, a, b, op="where")


def _where(a, b, *, cond):
    return np.where(np.asarray(cond, dtype=bool), a, b)


def _where_vjp(g, a, b, *, cond):
    c = np.asarray(cond, dtype=bool)
    z = np.zeros_like(g)
    return sum_to_shape(np.where(c, g, z), a.shape), sum_to_shape(np.where(c, z, g), b.shape)


defspec("where", _where, _where_vjp, _where_shape, 2)

__all__ = ["sum_to_shape", "sigmoid", "softplus", "erf", "COMPARE", "SAFE_LOG_EPS", "ShapeError"]
