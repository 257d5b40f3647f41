"""Test records of the elementwise ops."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand, rand_away

_BCAST = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 3)), ((5,), ())]


def _binary_samples(lo=-1.0, hi=1.0, b_lo=None, b_hi=None):
    def samples(rng):
        return [Sample((rand(rng, *sa, lo=lo, hi=hi),
                        rand(rng, *sb, lo=lo if b_lo is None else b_lo, hi=hi if b_hi is None else b_hi)),
                       desc=f"{sa} op {sb}") for sa, sb in _BCAST]
    return samples


def _binary_bad(name):
    return lambda rng: [BadInput((np.ones((2, 3)), np.ones((4,))), {}, ShapeError, "(2, 3)", "no broadcast")]


_TORCH_BIN = {"add": "add", "sub": "sub", "mul": "mul", "div": "div",
              "maximum": "maximum", "minimum": "minimum"}

for _n in ("add", "sub", "mul"):
    defop(OpInfo(_n, _binary_samples(), _binary_bad(_n),
                 torch_ref=(lambda f: lambda torch, a, b: getattr(torch, f)(a, b))(_TORCH_BIN[_n])))
defop(OpInfo("div", _binary_samples(b_lo=0.5, b_hi=2.0), _binary_bad("div"),
             torch_ref=lambda torch, a, b: torch.div(a, b)))


def _minmax_samples(rng):
    out = []
    for sa, sb in _BCAST:
        a = rand(rng, *sa)
        b = rand(rng, *sb)
        diff = np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)) - b
        if np.min(np.abs(diff)) < 0.02:  # redraw b with an offset to stay off the tie kink
            b = b + 0.5
        out.append(Sample((a, b), desc=f"{sa} vs {sb}"))
    # ties: checked by hand-computed tests, not by finite differences
    return out


defop(OpInfo("maximum", _minmax_samples, _binary_bad("maximum"),
             torch_ref=lambda torch, a, b: torch.maximum(a, b)))
defop(OpInfo("minimum", _minmax_samples, _binary_bad("minimum"),
             torch_ref=lambda torch, a, b: torch.minimum(a, b)))


def _ints(rng, *shape):
    """Small integers as floats: exact in float32, with many ties."""
    return rng.integers(-3, 4, size=shape).astype(np.float64)


def _compare_samples(rng):
    return [Sample((_ints(rng, *sa), _ints(rng, *sb)), {"op": op}, f"{sa} {op} {sb}")
            for sa, sb in _BCAST for op in ("lt", "le", "gt", "ge", "eq", "ne")]


defop(OpInfo("compare", _compare_samples,
             lambda rng: [BadInput((np.ones(3), np.ones(3)), {"op": "lte"}, DomainError, "lte"),
                          BadInput((np.ones((2, 3)), np.ones(4)), {"op": "lt"}, ShapeError, "(2, 3)")],
             diff=(), fd=False, torch_ref=lambda torch, a, b, *, op: getattr(torch, op)(a, b)))


def _where_samples(rng):
    return [Sample((rand(rng, 3, 4), rand(rng, 3, 4)), {"cond": rng.uniform(size=(3, 4)) > 0.5}),
            Sample((rand(rng, 3, 1), rand(rng, 4)), {"cond": rng.uniform(size=(3, 4)) > 0.5}, "broadcast")]


defop(OpInfo("where", _where_samples,
             lambda rng: [BadInput((np.ones((2, 3)), np.ones((2, 3))), {"cond": np.ones((4,), bool)},
                                   ShapeError, "(4,)")],
             torch_ref=lambda torch, a, b, *, cond: torch.where(torch.as_tensor(cond), a, b)))


# ---- unary ----------------------------------------------------------------------------------

_SHAPES = [(7,), (3, 4), (2, 3, 5), ()]


def _unary_samples(lo=-2.0, hi=2.0, points=(0.0,), attrs=None):
    attrs = attrs or [{}]

    def samples(rng):
        return [Sample((rand_away(rng, *s, lo=lo, hi=hi, points=points),), dict(a), f"{s} {a}")
                for s in _SHAPES for a in attrs]
    return samples


def _unary(name, torch_fn=None, lo=-2.0, hi=2.0, points=(), attrs=None, bad=None):
    defop(OpInfo(name, _unary_samples(lo, hi, points, attrs),
                 bad or (lambda rng: []), torch_ref=torch_fn))


_unary("neg", lambda torch, x: -x)
_unary("abs", lambda torch, x: torch.abs(x), points=(0.0,))
_unary("sqrt", lambda torch, x: torch.sqrt(x), lo=0.1, hi=3.0)
_unary("relu", lambda torch, x: torch.relu(x), points=(0.0,))
_unary("exp", lambda torch, x: torch.exp(x))
_unary("log", lambda torch, x: torch.log(x), lo=0.1, hi=3.0)
_unary("inv", lambda torch, x: 1.0 / x, lo=0.5, hi=2.0)
_unary("sin", lambda torch, x: torch.sin(x))
_unary("cos", lambda torch, x: torch.cos(x))
_unary("erf", lambda torch, x: torch.erf(x), lo=-3, hi=3)
_unary("sigmoid", lambda torch, x: torch.sigmoid(x), lo=-8, hi=8)
_unary("tanh", lambda torch, x: torch.tanh(x))
_unary("softplus", lambda torch, x: torch.nn.functional.softplus(x), lo=-8, hi=8)
_unary("silu", lambda torch, x: torch.nn.functional.silu(x), lo=-5, hi=5)
_unary("safe_log", lambda torch, x: torch.log(torch.nn.functional.softplus(x) + 1e-6), lo=-5, hi=5)
_unary("gelu", lambda torch, x, *, approximate="none": torch.nn.functional.gelu(x, approximate=approximate),
       lo=-4, hi=4, attrs=[{"approximate": "none"}, {"approximate": "tanh"}],
       bad=lambda rng: [BadInput((np.ones(3),), {"approximate": "fast"}, DomainError, "approximate")])
_unary("scale", lambda torch, x, *, c: x * c, attrs=[{"c": 2.5}, {"c": -0.5}],
       bad=lambda rng: [BadInput((np.ones(3),), {"c": float("nan")}, DomainError, "c")])
_unary("pow", lambda torch, x, *, exponent: torch.pow(x, exponent), lo=0.2, hi=2.0,
       attrs=[{"exponent": 2}, {"exponent": 3}, {"exponent": 0.5}, {"exponent": -1.5}],
       bad=lambda rng: [BadInput((np.ones(3),), {"exponent": float("inf")}, DomainError, "exponent")])
_unary("clamp", lambda torch, x, *, lo=None, hi=None: torch.clamp(x, lo, hi), points=(-0.5, 0.5),
       attrs=[{"lo": -0.5, "hi": 0.5}, {"lo": -0.5}, {"hi": 0.5}],
       bad=lambda rng: [BadInput((np.ones(3),), {"lo": 1.0, "hi": 0.0}, DomainError, "min 1.0")])


# ---- more unary math -------------------------------------------------------------------------

_unary("tan", lambda torch, x: torch.tan(x), lo=-1.2, hi=1.2)
_unary("asin", lambda torch, x: torch.asin(x), lo=-0.9, hi=0.9)
_unary("acos", lambda torch, x: torch.acos(x), lo=-0.9, hi=0.9)
_unary("atan", lambda torch, x: torch.atan(x), lo=-3, hi=3)
_unary("sinh", lambda torch, x: torch.sinh(x), lo=-3, hi=3)
_unary("cosh", lambda torch, x: torch.cosh(x), lo=-3, hi=3)
_unary("asinh", lambda torch, x: torch.asinh(x), lo=-3, hi=3)
_unary("acosh", lambda torch, x: torch.acosh(x), lo=1.2, hi=4)
_unary("atanh", lambda torch, x: torch.atanh(x), lo=-0.9, hi=0.9)
_unary("expm1", lambda torch, x: torch.expm1(x))
_unary("log1p", lambda torch, x: torch.log1p(x), lo=-0.8, hi=3)
_unary("erfc", lambda torch, x: torch.erfc(x), lo=-3, hi=3)
_unary("erfinv", lambda torch, x: torch.erfinv(x), lo=-0.95, hi=0.95)
# Piecewise constant: samples stay off the jumps, where the gradient (zero) is defined.
_INTEGERS = (-2.0, -1.0, 0.0, 1.0, 2.0)
_unary("floor", lambda torch, x: torch.floor(x), lo=-2.5, hi=2.5, points=_INTEGERS)
_unary("ceil", lambda torch, x: torch.ceil(x), lo=-2.5, hi=2.5, points=_INTEGERS)
_unary("trunc", lambda torch, x: torch.trunc(x), lo=-2.5, hi=2.5, points=_INTEGERS)
_unary("round", lambda torch, x: torch.round(x), lo=-2.5, hi=2.5, points=(-1.5, -0.5, 0.5, 1.5))
_unary("sign", lambda torch, x: torch.sign(x), points=(0.0,))


# ---- binary math -----------------------------------------------------------------------------

defop(OpInfo("atan2", _binary_samples(), _binary_bad("atan2"), torch_ref=lambda torch, a, b: torch.atan2(a, b)))
defop(OpInfo("pow_tensor", _binary_samples(lo=0.2, hi=2.0, b_lo=-2.0, b_hi=2.0), _binary_bad("pow_tensor"),
             torch_ref=lambda torch, a, b: torch.pow(a, b)))


def _quotient_samples(rng):
    """a and b with a / b kept 0.1 away from every integer: the remainders jump there."""
    out = []
    for sa, sb in _BCAST:
        for _ in range(1000):
            a = rand(rng, *sa, lo=-4.0, hi=4.0)
            b = rng.choice([-1.0, 1.0], size=sb) * rand(rng, *sb, lo=0.6, hi=1.6)
            q = np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)) / b
            if q.size == 0 or np.min(np.abs(q - np.round(q))) > 0.1:
                break
        out.append(Sample((a, b), desc=f"{sa} op {sb}"))
    return out


defop(OpInfo("fmod", _quotient_samples, _binary_bad("fmod"), torch_ref=lambda torch, a, b: torch.fmod(a, b)))
defop(OpInfo("remainder", _quotient_samples, _binary_bad("remainder"),
             torch_ref=lambda torch, a, b: torch.remainder(a, b)))
# torch.floor_divide has no derivative; its twin div(rounding_mode="floor") has the zero one.
defop(OpInfo("floor_divide", _quotient_samples, _binary_bad("floor_divide"),
             torch_ref=lambda torch, a, b: torch.div(a, b, rounding_mode="floor")))


# ---- bitwise: the front end gives integer and bool arrays; the spec reads these float samples as
# int64 (the registry's samples are float). Values against torch on integer tensors are in
# tests/test_torch_math.py.

def _int_samples(rng):
    return [Sample((_ints(rng, *sa) * 3, np.abs(_ints(rng, *sb))), {"op": op}, f"{sa} {op} {sb}")
            for sa, sb in _BCAST for op in ("and", "or", "xor", "left_shift", "right_shift")]


defop(OpInfo("bitwise", _int_samples,
             lambda rng: [BadInput((np.arange(3), np.arange(3)), {"op": "nand"}, DomainError, "nand"),
                          BadInput((np.ones((2, 3), np.int64), np.ones(4, np.int64)), {"op": "and"}, ShapeError,
                                   "(2, 3)")],
             diff=(), fd=False))
defop(OpInfo("bitwise_not", lambda rng: [Sample((_ints(rng, *s) * 5,), {}, f"{s}") for s in _SHAPES],
             diff=(), fd=False))
