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


def _binary(name, f, vjp, why="", ints=None):
    def shape(a, b):
        return broadcast_shapes(a, b, op=name)

    def wrapped_vjp(g, a, b, **attrs):
        ga, gb = vjp(g, a, b)
        return sum_to_shape(ga, a.shape), sum_to_shape(gb, b.shape)

    defspec(name, f, wrapped_vjp, shape, 2, why=why, ints=ints)


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

# ---- more unary math: trigonometric, hyperbolic, accurate near 0, the error-function family --

def _f64(x):
    return np.asarray(x, dtype=np.float64)


def _one_minus_sq(x):
    x = _f64(x)
    return 1.0 - x * x


_unary("tan", np.tan, lambda x: 1.0 + np.tan(x) ** 2)
_unary("asin", np.arcsin, lambda x: 1.0 / np.sqrt(_one_minus_sq(x)))
_unary("acos", np.arccos, lambda x: -1.0 / np.sqrt(_one_minus_sq(x)))
_unary("atan", np.arctan, lambda x: 1.0 / (1.0 + _f64(x) ** 2))
_unary("sinh", np.sinh, np.cosh)
_unary("cosh", np.cosh, np.sinh)
_unary("asinh", np.arcsinh, lambda x: 1.0 / np.sqrt(_f64(x) ** 2 + 1.0))
_unary("acosh", np.arccosh, lambda x: 1.0 / np.sqrt(_f64(x) ** 2 - 1.0))
_unary("atanh", np.arctanh, lambda x: 1.0 / _one_minus_sq(x))
_unary("expm1", np.expm1, np.exp, why="accuracy: exp(x) - 1 loses every digit for |x| << 1")
_unary("log1p", np.log1p, lambda x: 1.0 / (1.0 + _f64(x)), why="accuracy: log(1 + x) loses every digit for |x| << 1")

_erfc_math = np.vectorize(math.erfc, otypes=[np.float64])


def erfc(x):
    """The complementary error function 1 - erf(x), elementwise in float64, accurate in the right tail."""
    return _erfc_math(_f64(x))


# M. Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): single-precision
# polynomials in w = -log(1 - y^2), a first guess that Newton steps on erfc refine.
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                  -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
               0.00943887047, 1.00167406, 2.83297682)


def _horner(coeffs, w):
    p = np.full(np.shape(w), coeffs[0])
    for c in coeffs[1:]:
        p = p * w + c
    return p


def erfinv(y):
    """The inverse error function on [-1, 1] (+-inf at +-1, NaN outside), float64: Giles' first
    guess refined by Newton steps: on erf below |y| = 1/2, on log erfc(x) = log(1 - |y|) above, where
    erf has no digits left to compare."""
    y = _f64(y)
    a = np.abs(y)
    inside = a < 1.0
    t = np.where(inside, a, 0.0)
    w = -np.log1p(-t * t)
    x = np.where(w < 5.0, _horner(_GILES_CENTRAL, w - 2.5), _horner(_GILES_TAIL, np.sqrt(w) - 3.0)) * t
    tail = t >= 0.5
    log_rest = np.log(np.where(tail, 1.0 - t, 1.0))  # 1 - t is exact for t >= 0.5 (Sterbenz)
    for _ in range(6):
        d = _TWO_OVER_SQRT_PI * np.exp(-x * x)
        with np.errstate(divide="ignore", invalid="ignore"):
            c = erfc(x)
            x = np.where(tail, x + (np.log(c) - log_rest) * c / d, x - (erf(x) - t) / d)
    x = np.copysign(x, y)
    return np.where(inside, x, np.where(a == 1.0, np.copysign(np.inf, y), np.nan))


_unary("erfc", erfc, lambda x: -_TWO_OVER_SQRT_PI * np.exp(-_f64(x) ** 2),
       why="accuracy: 1 - erf(x) is 0 in float32 beyond x = 4, where erfc(x) is still 1e-8")
_unary("erfinv", erfinv, lambda x: (math.sqrt(math.pi) / 2) * np.exp(erfinv(x) ** 2),
       why="no formula of the other primitives inverts erf")


# ---- rounding and sign: piecewise constant, zero gradient (PyTorch's) ------------------------

def _flat(name, f, ints=None):
    defspec(name, f, lambda g, x: (np.zeros(np.shape(x)),), _same, 1, ints=ints)


_flat("floor", np.floor)
_flat("ceil", np.ceil)
_flat("round", np.rint)  # half to even, as torch.round (C's nearbyint)
_flat("trunc", np.trunc)
def sign(x):
    """-1, 0 or 1 in x's dtype, as torch: (x > 0) - (x < 0), so NaN gives 0; bools stay themselves."""
    x = np.asarray(x)
    if x.dtype.kind == "b":
        return x.copy()
    return ((x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)).astype(x.dtype)


_flat("sign", sign, ints=True)


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


# ---- binary math: atan2, the two remainders, floor division, tensor powers --------------------

def _atan2_vjp(g, a, b):
    r = _f64(a) ** 2 + _f64(b) ** 2
    return g * b / r, -g * a / r


def _fmod_vjp(g, a, b):
    return g, -g * np.trunc(_f64(a) / b)


def _remainder_vjp(g, a, b):
    return g, -g * np.floor_divide(_f64(a), b)


def _zero_vjp(g, a, b):
    return np.zeros(np.shape(a)), np.zeros(np.shape(b))


def _pow_tensor_vjp(g, a, b):
    a, b = _f64(a), _f64(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ga = np.where(b == 0, 0.0, b * np.power(a, b - 1.0))
        gb = np.where((a == 0) & (b >= 0), 0.0, np.power(a, b) * np.log(a))
    return g * ga, g * gb


_binary("atan2", np.arctan2, _atan2_vjp)
_binary("fmod", np.fmod, _fmod_vjp, why="no exact formula: a - b * trunc(a / b) rounds twice (torch: C's fmod)",
        ints=True)
_binary("remainder", np.remainder, _remainder_vjp,
        why="no exact formula: a - b * floor(a / b) rounds twice; integers need integer arithmetic", ints=True)
_binary("floor_divide", np.floor_divide, _zero_vjp,
        why="Python's floor division (floor(1.0 / 0.1) is 10, 1.0 // 0.1 is 9.0); integers need integer arithmetic",
        ints=True)
_binary("pow_tensor", np.power, _pow_tensor_vjp,
        why="x ** y for a tensor y: exp(y log x) is wrong for x < 0 and rounds three times", ints=True)


# ---- bitwise and shifts: integer and bool arrays, no gradient --------------------------------
# The front end gives these integer and bool arrays only (torch refuses floats); a float array is
# read as its int64 values, truncated (NaN, infinities and magnitudes >= 2**62 as 0), so that the
# float samples of the op registry and the kernel table exercise them too.

def float_as_ints(x, xp=np):
    """A float array's int64 values, truncated; NaN, infinities and magnitudes >= 2**62 read as 0."""
    return xp.where(xp.abs(x) < 2.0 ** 62, x, 0).astype(xp.int64)


def _ints(x):
    x = np.asarray(x)
    return float_as_ints(x) if x.dtype.kind == "f" else x


def _shift(a, b, left):
    """torch's shifts: a shift by a negative count or by the bit width or more fills (0, or -1 for a
    negative value shifted right), where NumPy's is undefined."""
    a = np.asarray(a)
    b = np.asarray(b)
    bits = a.dtype.itemsize * 8
    ok = (b >= 0) & (b < bits)
    s = np.where(ok, b, 0).astype(a.dtype)
    if left:
        return np.where(ok, np.left_shift(a, s), np.zeros((), a.dtype))
    fill = np.where(a < 0, -1, 0).astype(a.dtype) if a.dtype.kind == "i" else np.zeros((), a.dtype)
    return np.where(ok, np.right_shift(a, s), fill)


BITWISE = {"and": lambda a, b: np.bitwise_and(_ints(a), _ints(b)),
           "or": lambda a, b: np.bitwise_or(_ints(a), _ints(b)),
           "xor": lambda a, b: np.bitwise_xor(_ints(a), _ints(b)),
           "left_shift": lambda a, b: _shift(_ints(a), _ints(b), True),
           "right_shift": lambda a, b: _shift(_ints(a), _ints(b), False)}


def _bitwise_shape(a, b, *, op):
    if op not in BITWISE:
        raise DomainError(f"bitwise: op must be one of {sorted(BITWISE)}, got {op!r}")
    return broadcast_shapes(a, b, op="bitwise")


defspec("bitwise", lambda a, b, *, op: BITWISE[op](a, b), lambda g, a, b, *, op: (None, None), _bitwise_shape, 2,
        ints=True)
defspec("bitwise_not", lambda x: np.invert(_ints(x)), lambda g, x: (None,), _same, 1, ints=True)


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

__all__ = ["sum_to_shape", "sigmoid", "softplus", "sign", "erf", "erfc", "erfinv", "float_as_ints", "BITWISE",
           "COMPARE", "SAFE_LOG_EPS", "ShapeError"]
