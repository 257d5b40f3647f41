"""Runtime rules of the elementwise ops (see :mod:`torchlean.spec.elementwise` for the meaning)."""

from __future__ import annotations

import math

import numpy as np

from .registry import defrule


def _unb(K, g, shape):
    return K.sum_to_shape(g, shape)


# ---- binary (NumPy broadcasting; backward sums over broadcast axes) --------------------------

defrule("add", lambda K, a, b: (K.add(a, b), (a.shape, b.shape)),
        lambda K, s, g, n: (_unb(K, g, s[0]) if n[0] else None, _unb(K, g, s[1]) if n[1] else None))
defrule("sub", lambda K, a, b: (K.sub(a, b), (a.shape, b.shape)),
        lambda K, s, g, n: (_unb(K, g, s[0]) if n[0] else None,
                            _unb(K, K.neg(g), s[1]) if n[1] else None))
defrule("mul", lambda K, a, b: (K.mul(a, b), (a, b)),
        lambda K, s, g, n: (_unb(K, K.mul(g, s[1]), s[0].shape) if n[0] else None,
                            _unb(K, K.mul(g, s[0]), s[1].shape) if n[1] else None))


def _div_bwd(K, s, g, n):
    a, b = s
    gb = K.div(g, b) if (n[0] or n[1]) else None
    da = _unb(K, gb, a.shape) if n[0] else None
    db = _unb(K, K.neg(K.mul(gb, K.div(a, b))), b.shape) if n[1] else None
    return da, db


defrule("div", lambda K, a, b: (K.div(a, b), (a, b)), _div_bwd)


def _minmax(name, is_max):
    def fwd(K, a, b):
        return (K.maximum(a, b) if is_max else K.minimum(a, b)), (a, b)

    def bwd(K, s, g, n):
        a, b = s
        ga, gb = K.minmax_bwd(a, b, g, is_max)
        return (_unb(K, ga, a.shape) if n[0] else None, _unb(K, gb, b.shape) if n[1] else None)

    defrule(name, fwd, bwd)


_minmax("maximum", True)
_minmax("minimum", False)


# A comparison's result is bools: never recorded, so its backward is never asked for.
defrule("compare", lambda K, a, b, *, op: (K.compare(a, b, op), None), lambda K, s, g, n: (None, None))


def _where_fwd(K, a, b, *, cond):
    c = K.bool_mask(cond, np.shape(cond))
    return K.where(c, a, b), (c, a.shape, b.shape)


def _where_bwd(K, s, g, n):
    c, sa, sb = s
    z = K.zeros((), g.dtype)
    return (_unb(K, K.where(c, g, z), sa) if n[0] else None,
            _unb(K, K.where(c, z, g), sb) if n[1] else None)


defrule("where", _where_fwd, _where_bwd)

# ---- unary ----------------------------------------------------------------------------------
# Each backward reads the value it saved: the input x or, where cheaper, the output y.

defrule("scale", lambda K, x, *, c: (K.scale(x, c), c), lambda K, c, g, n: (K.scale(g, c),))
defrule("neg", lambda K, x: (K.neg(x), None), lambda K, s, g, n: (K.neg(g),))
defrule("pow", lambda K, x, *, exponent: (K.pow_scalar(x, exponent), (x, exponent)),
        lambda K, s, g, n: (K.pow_bwd(s[0], g, s[1]),))
defrule("abs", lambda K, x: (K.abs(x), x), lambda K, x, g, n: (K.abs_bwd(x, g),))
defrule("sqrt", lambda K, x: ((y := K.sqrt(x)), y), lambda K, y, g, n: (K.sqrt_bwd(y, g),))
defrule("clamp", lambda K, x, *, lo=None, hi=None: (K.clamp(x, lo, hi), (x, lo, hi)),
        lambda K, s, g, n: (K.clamp_bwd(s[0], g, s[1], s[2]),))
defrule("relu", lambda K, x: ((y := K.relu(x)), y), lambda K, y, g, n: (K.relu_bwd(y, g),))
defrule("exp", lambda K, x: ((y := K.exp(x)), y), lambda K, y, g, n: (K.mul(g, y),))
defrule("log", lambda K, x: (K.log(x), x), lambda K, x, g, n: (K.div(g, x),))
defrule("inv", lambda K, x: ((y := K.inv(x)), y), lambda K, y, g, n: (K.neg(K.mul(g, K.mul(y, y))),))
defrule("sin", lambda K, x: (K.sin(x), x), lambda K, x, g, n: (K.mul(g, K.cos(x)),))
defrule("cos", lambda K, x: (K.cos(x), x), lambda K, x, g, n: (K.neg(K.mul(g, K.sin(x))),))
defrule("sigmoid", lambda K, x: ((y := K.sigmoid(x)), y), lambda K, y, g, n: (K.sigmoid_bwd(y, g),))
defrule("tanh", lambda K, x: ((y := K.tanh(x)), y), lambda K, y, g, n: (K.tanh_bwd(y, g),))
defrule("softplus", lambda K, x: (K.softplus(x), x), lambda K, x, g, n: (K.softplus_bwd(x, g),))
defrule("silu", lambda K, x: (K.silu(x), x), lambda K, x, g, n: (K.silu_bwd(x, g),))
defrule("safe_log", lambda K, x: (K.safe_log(x), x), lambda K, x, g, n: (K.safe_log_bwd(x, g),))
# erf'(x) = 2/sqrt(pi) exp(-x^2), composed from the surface's own kernels.
defrule("erf", lambda K, x: (K.erf(x), x),
        lambda K, x, g, n: (K.mul(g, K.scale(K.exp(K.neg(K.mul(x, x))), 2.0 / math.sqrt(math.pi))),))
defrule("gelu", lambda K, x, *, approximate="none": (K.gelu(x, approximate), (x, approximate)),
        lambda K, s, g, n: (K.gelu_bwd(s[0], g, s[1]),))


# ---- more unary math: backward composed from the surface's kernels -----------------------------

def _one_minus_sq(K, x):
    return K.add_scalar(K.neg(K.mul(x, x)), 1.0)


defrule("tan", lambda K, x: ((y := K.tan(x)), y), lambda K, y, g, n: (K.mul(g, K.add_scalar(K.mul(y, y), 1.0)),))
defrule("asin", lambda K, x: (K.asin(x), x), lambda K, x, g, n: (K.div(g, K.sqrt(_one_minus_sq(K, x))),))
defrule("acos", lambda K, x: (K.acos(x), x), lambda K, x, g, n: (K.neg(K.div(g, K.sqrt(_one_minus_sq(K, x)))),))
defrule("atan", lambda K, x: (K.atan(x), x), lambda K, x, g, n: (K.div(g, K.add_scalar(K.mul(x, x), 1.0)),))
defrule("sinh", lambda K, x: (K.sinh(x), x), lambda K, x, g, n: (K.mul(g, K.cosh(x)),))
defrule("cosh", lambda K, x: (K.cosh(x), x), lambda K, x, g, n: (K.mul(g, K.sinh(x)),))
defrule("asinh", lambda K, x: (K.asinh(x), x),
        lambda K, x, g, n: (K.div(g, K.sqrt(K.add_scalar(K.mul(x, x), 1.0))),))
defrule("acosh", lambda K, x: (K.acosh(x), x),
        lambda K, x, g, n: (K.div(g, K.sqrt(K.add_scalar(K.mul(x, x), -1.0))),))
defrule("atanh", lambda K, x: (K.atanh(x), x), lambda K, x, g, n: (K.div(g, _one_minus_sq(K, x)),))
defrule("expm1", lambda K, x: ((y := K.expm1(x)), y), lambda K, y, g, n: (K.mul(g, K.add_scalar(y, 1.0)),))
defrule("log1p", lambda K, x: (K.log1p(x), x), lambda K, x, g, n: (K.div(g, K.add_scalar(x, 1.0)),))
# erfc'(x) = -2/sqrt(pi) exp(-x^2); erfinv'(x) = sqrt(pi)/2 exp(erfinv(x)^2), from the saved output.
defrule("erfc", lambda K, x: (K.erfc(x), x),
        lambda K, x, g, n: (K.mul(g, K.scale(K.exp(K.neg(K.mul(x, x))), -2.0 / math.sqrt(math.pi))),))
defrule("erfinv", lambda K, x: ((y := K.erfinv(x)), y),
        lambda K, y, g, n: (K.mul(g, K.scale(K.exp(K.mul(y, y)), math.sqrt(math.pi) / 2.0)),))


def _flat_rule(name):
    """A piecewise-constant op: its gradient is zero (PyTorch's)."""
    defrule(name, lambda K, x: (getattr(K, name)(x), None), lambda K, s, g, n: (K.zeros(g.shape, g.dtype),))


for _name in ("floor", "ceil", "round", "trunc", "sign"):
    _flat_rule(_name)


# ---- binary math ----------------------------------------------------------------------------

def _atan2_bwd(K, s, g, n):
    a, b = s
    gr = K.div(g, K.add(K.mul(a, a), K.mul(b, b)))
    return (_unb(K, K.mul(gr, b), a.shape) if n[0] else None,
            _unb(K, K.neg(K.mul(gr, a)), b.shape) if n[1] else None)


defrule("atan2", lambda K, a, b: (K.atan2(a, b), (a, b)), _atan2_bwd)


def _rem_rule(name, quotient):
    """fmod and remainder: d/da = 1, d/db = -(a / b rounded toward zero, or down)."""
    def bwd(K, s, g, n):
        a, b = s
        return (_unb(K, g, a.shape) if n[0] else None,
                _unb(K, K.neg(K.mul(g, quotient(K, a, b))), b.shape) if n[1] else None)
    defrule(name, lambda K, a, b: (getattr(K, name)(a, b), (a, b)), bwd)


_rem_rule("fmod", lambda K, a, b: K.trunc(K.div(a, b)))
_rem_rule("remainder", lambda K, a, b: K.floor_divide(a, b))
defrule("floor_divide", lambda K, a, b: (K.floor_divide(a, b), (a.shape, b.shape)),
        lambda K, s, g, n: (K.zeros(s[0], g.dtype) if n[0] else None, K.zeros(s[1], g.dtype) if n[1] else None))


def _pow_tensor_bwd(K, s, g, n):
    # d/da = b a^(b-1), 0 where b == 0; d/db = a^b log a, 0 where a == 0 and b >= 0 (PyTorch's masks).
    a, b, y = s
    z = K.zeros((), g.dtype)
    da = db = None
    if n[0]:
        d = K.mul(b, K.power(a, K.add_scalar(b, -1.0)))
        da = _unb(K, K.mul(g, K.where(K.compare(b, z, "eq"), z, d)), a.shape)
    if n[1]:
        d = K.mul(y, K.log(a))
        d = K.where(K.compare(a, z, "eq"), K.where(K.compare(b, z, "ge"), z, d), d)
        db = _unb(K, K.mul(g, d), b.shape)
    return da, db


defrule("pow_tensor", lambda K, a, b: ((y := K.power(a, b)), (a, b, y)), _pow_tensor_bwd)

# Integer and bool results: never recorded, so the backward is never asked for.
defrule("bitwise", lambda K, a, b, *, op: (K.bitwise(a, b, op), None), lambda K, s, g, n: (None, None))
defrule("bitwise_not", lambda K, x: (K.bitwise_not(x), None), lambda K, s, g, n: (None,))
