"""PyTorch's elementwise math and comparisons: ``torchlean.<name>`` and ``Tensor.<name>``, with the
arithmetic, comparison and bitwise operators of Tensor.

Every name runs recorded ops (primitives of the elementwise family, or formulas over them), so it
has its gradient, its IR kind and its checks. Operands are promoted by torch's table
(:func:`~torchlean.dtypes.result_type`): an int tensor times 2.5 is float32, ``int_tensor ** 2``
stays int64, ``int_tensor.sqrt()`` is float32, and no float result is ever truncated into an
integer dtype. Ops torch refuses on integers (``frac``, ``hypot``, ``lerp``, ``logaddexp``) raise
:class:`~torchlean.errors.DTypeError`.

    >>> import torchlean as tl
    >>> x = tl.tensor([-7, 7])
    >>> (x // 2).tolist(), (x % 3).tolist(), tl.div(x, 2, rounding_mode="trunc").tolist()
    ([-4, 3], [2, 1], [-3, 3])
    >>> (x ** 0.5).dtype, tl.tensor([1.0, 2.0]).expm1().dtype
    (torchlean.float32, torchlean.float32)
"""

from __future__ import annotations

import builtins
import math
from numbers import Number

import numpy as np

from ..dtypes import bool_, finfo, get_default_dtype, int64, result_type
from ..errors import DomainError, DTypeError
from ..kernels import get_kernels
from ..tensor import Tensor, _as_tensor, _binary, _float_input, _float_only, record
from .creation import tensor
from .table import export

_F32 = np.dtype(np.float32)
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


# ---- operands -------------------------------------------------------------------------------

def _operand(o, op):
    """A Tensor, a Python/NumPy number, or an ndarray (made a tensor, keeping its dtype)."""
    if isinstance(o, (Tensor, Number)):
        return o
    if isinstance(o, np.ndarray):
        return tensor(o)
    raise DTypeError(f"{op}: unsupported operand of type {type(o).__name__}: expected a tensor or a number")


def _pair(op, a, b, dtype=None):
    """Both operands as tensors of torch's result type (or ``dtype``) on the tensor's device."""
    a, b = _operand(a, op), _operand(b, op)
    ref = a if isinstance(a, Tensor) else b
    if not isinstance(ref, Tensor):
        raise DTypeError(f"{op}: expects at least one tensor operand")
    dt = dtype or result_type(a, b)
    return _as_tensor(a, ref, dt), _as_tensor(b, ref, dt)


def _float_pair(op, a, b):
    """Operands promoted, then integers to the default float dtype (torch's atan2, xlogy, ...)."""
    a, b = _operand(a, op), _operand(b, op)
    dt = result_type(a, b)
    return _pair(op, a, b, dt if dt.is_floating_point else get_default_dtype())


def _const(v, like: Tensor, dtype=None) -> Tensor:
    return _as_tensor(v, like, dtype or like.dtype)


def _is_int(t: Tensor) -> bool:
    return t.dtype.kind in "iub"


def _check_divisor(op, b: Tensor):
    if _is_int(b) and bool(np.any(b.numpy() == 0)):
        raise DomainError(f"{op}: ZeroDivisionError: integer division by zero")


def _where(cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``a`` where ``cond`` else ``b``; both differentiable, the condition not."""
    return record("where", (a, b), {"cond": cond._value})


def _full_bool(x: Tensor, value: bool) -> Tensor:
    return Tensor(get_kernels(x.device).full(tuple(x.shape), value, np.bool_))


# ---- arithmetic -----------------------------------------------------------------------------

def _alpha_times(op, a: Tensor, b: Tensor, alpha):
    if alpha == 1 and not isinstance(alpha, bool):
        return b
    if not a.dtype.is_floating_point and isinstance(alpha, float):
        raise DTypeError(f"{op}: for integral input tensors, alpha must not be a floating point number, got {alpha}")
    return mul(b, alpha)


@export("add")
def add(input, other, *, alpha=1):  # noqa: A002 - torch's names
    """``input + alpha * other`` with torch's type promotion."""
    if alpha == 1:
        return _binary("add", _operand(input, "add"), _operand(other, "add"))
    a, b = _pair("add", input, other)
    return record("add", (a, _alpha_times("add", a, b, alpha)), {})


@export("sub", "subtract")
def sub(input, other, *, alpha=1):  # noqa: A002
    """``input - alpha * other``; two bool tensors are refused, as in torch."""
    if any(isinstance(o, Tensor) and o.dtype is bool_ for o in (input, other)):
        raise DTypeError("sub: subtraction with a bool tensor is not supported; use ^ or logical_not")
    a, b = _pair("sub", input, other)
    return record("sub", (a, _alpha_times("sub", a, b, alpha)), {})


@export("mul", "multiply")
def mul(input, other):  # noqa: A002
    if type(input) is Tensor and isinstance(other, (int, float)) and not isinstance(other, bool) \
            and input.dtype.is_floating_point and math.isfinite(other):
        return record("scale", (input,), {"c": float(other)})
    return _binary("mul", _operand(input, "mul"), _operand(other, "mul"))


@export("div", "divide")
def div(input, other, *, rounding_mode=None):  # noqa: A002
    """True division (a float result even for integers), or with ``rounding_mode`` "trunc" / "floor"
    the quotient rounded toward zero / down, in the promoted dtype (integers stay integers)."""
    if rounding_mode is None:
        return _binary("div", _operand(input, "div"), _operand(other, "div"))
    if rounding_mode not in ("trunc", "floor"):
        raise DomainError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    a, b = _pair("div", input, other)
    if a.dtype is bool_:
        raise DTypeError(f"div: rounding_mode={rounding_mode!r} is not supported on bool tensors")
    if rounding_mode == "floor":
        _check_divisor("floor_divide", b)
        return record("floor_divide", (a, b), {})
    if a.dtype.is_floating_point:
        return trunc(record("div", (a, b), {}))
    _check_divisor("div", b)
    # a - fmod(a, b) is a multiple of b, so its floor division is exact: the quotient toward zero.
    return record("floor_divide", (record("sub", (a, record("fmod", (a, b), {})), {}), b), {})


@export("true_divide")
def true_divide(input, other):  # noqa: A002
    return div(input, other)


@export("floor_divide")
def floor_divide(input, other):  # noqa: A002
    """Python's ``//``: the quotient rounded down (torch's floor_divide)."""
    return div(input, other, rounding_mode="floor")


def _int_safe(op, a, b):
    a, b = _pair(op, a, b)
    if a.dtype is bool_:
        a, b = a.to(dtype=int64), b.to(dtype=int64)
    _check_divisor(op, b)
    return a, b


@export("remainder")
def remainder(input, other):  # noqa: A002
    """Python's ``%``: ``a - b * floor(a / b)``, with the sign of ``b``; exact, integers too."""
    return record("remainder", _int_safe("remainder", input, other), {})


@export("fmod")
def fmod(input, other):  # noqa: A002
    """C's fmod: ``a - b * trunc(a / b)``, with the sign of ``a``; exact, integers too."""
    return record("fmod", _int_safe("fmod", input, other), {})


@export("pow")
def pow(input, exponent):  # noqa: A001
    """``input ** exponent`` for tensors and numbers on either side, promoted as torch does:
    ``int_tensor ** 2`` is int64, ``int_tensor ** 0.5`` float32; integers to negative integer
    powers are refused."""
    if type(exponent) in (int, float) and type(input) is Tensor and input._value.dtype.kind == "f" \
            and math.isfinite(exponent):
        return record("pow", (input,), {"exponent": int(exponent) if float(exponent).is_integer() else exponent})
    if isinstance(input, Tensor) and isinstance(exponent, Number) and not isinstance(exponent, (bool, np.bool_)):
        p = float(exponent) if isinstance(exponent, (float, np.floating)) else int(exponent)
        if math.isfinite(p):
            dt = result_type(input, exponent)
            x = input.to(dtype=dt)
            if not dt.is_floating_point:
                if p < 0:
                    raise DomainError(f"pow: integers to negative integer powers are not allowed (exponent {p})")
                if dt is bool_:
                    x = x.to(dtype=int64)
            return record("pow", (x, ), {"exponent": int(p) if float(p).is_integer() else p})
    a, b = _pair("pow", input, exponent)
    if a.dtype is bool_:
        raise DTypeError("pow: not supported on bool tensors")
    if a.dtype.is_floating_point:
        return record("pow_tensor", (a, b), {})
    # Integers, as torch: a negative exponent gives 1 / a^|b| truncated, which is 0 unless |a| == 1.
    y = record("pow_tensor", (a, abs(b)), {})
    return _where(logical_and(lt(b, 0), ne(abs(a), 1)), _const(0, y), y)


@export("neg", "negative")
def neg(input):  # noqa: A002
    if input.dtype is bool_:
        raise DTypeError("neg: negation of a bool tensor is not supported; use ~ or logical_not")
    return record("neg", (input,), {})


@export("positive")
def positive(input):  # noqa: A002
    if input.dtype is bool_:
        raise DTypeError("positive: not supported on bool tensors")
    return input


@export("abs", "absolute")
def abs(input):  # noqa: A001,A002
    """|x|; abs'(0) = 0 (DESIGN.md). Integers stay integers."""
    if input.dtype is bool_:
        raise DTypeError("abs: not supported on bool tensors")
    return record("abs", (input,), {})


@export("sign", "sgn")
def sign(input):  # noqa: A002
    """-1, 0 or 1 in the input's dtype ((x > 0) - (x < 0): NaN gives 0); zero gradient."""
    return record("sign", (input,), {})


def _rounding(name):
    def fn(input):  # noqa: A002
        if input.dtype is bool_:
            raise DTypeError(f"{name}: not supported on bool tensors")
        if not input.dtype.is_floating_point:
            return input.clone()
        return record(name, (input,), {})
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}: integers are returned as they are; zero gradient."
    return fn


floor = export("floor")(_rounding("floor"))
ceil = export("ceil")(_rounding("ceil"))
trunc = export("trunc", "fix")(_rounding("trunc"))


@export("round")
def round(input, *, decimals=0):  # noqa: A001,A002
    """Round half to even; with ``decimals`` as torch: ``round(x * 10^d) / 10^d`` (``d < 0``:
    ``round(x / 10^-d) * 10^-d``). Integers are returned as they are when ``decimals`` is 0, as
    torch does (with decimals torch refuses them)."""
    if decimals == 0 and isinstance(input, Tensor) and input.dtype is not bool_ \
            and not input.dtype.is_floating_point:
        return input.clone()
    x = _float_only("round", input)
    if decimals == 0:
        return record("round", (x,), {})
    p = float(10 ** builtins.abs(int(decimals)))
    if decimals > 0:
        return _binary("div", record("round", (mul(x, p),), {}), p)
    return mul(record("round", (_binary("div", x, p),), {}), p)


@export("frac")
def frac(input):  # noqa: A002
    """``x - trunc(x)``; gradient 1."""
    x = _float_only("frac", input)
    return record("sub", (x, record("trunc", (x,), {})), {})


# ---- unary float math -----------------------------------------------------------------------

def _float_unary(name, op=None, doc=""):
    op = op or name

    def fn(input):  # noqa: A002
        d = input._value.dtype
        if d is _F32 or d.kind == "f":   # the eager hot path: NumPy's float32 dtype is a singleton
            return record(op, (input,), {})
        return record(op, (_float_input(name, input),), {})
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or f"torch.{name}; integer and bool tensors give the default float dtype."
    return fn


for _name, _aliases, _op in (("exp", (), "exp"), ("expm1", (), "expm1"), ("log", (), "log"),
                             ("log1p", (), "log1p"), ("sqrt", (), "sqrt"), ("sin", (), "sin"), ("cos", (), "cos"),
                             ("tan", (), "tan"), ("asin", ("arcsin",), "asin"), ("acos", ("arccos",), "acos"),
                             ("atan", ("arctan",), "atan"), ("sinh", (), "sinh"), ("cosh", (), "cosh"),
                             ("tanh", (), "tanh"), ("asinh", ("arcsinh",), "asinh"),
                             ("acosh", ("arccosh",), "acosh"), ("atanh", ("arctanh",), "atanh"),
                             ("sigmoid", (), "sigmoid"), ("erf", (), "erf"), ("erfc", (), "erfc"),
                             ("erfinv", (), "erfinv"), ("reciprocal", (), "inv")):
    globals()[_name] = export(_name, *_aliases)(_float_unary(_name, _op))


@export("relu")
def relu(input):  # noqa: A002
    """max(x, 0); relu'(0) = 0 (DESIGN.md). Integers stay integers."""
    d = input._value.dtype
    if d is not _F32 and d.kind == "b":
        raise DTypeError("relu: not supported on bool tensors")
    return record("relu", (input,), {})


@export("exp2")
def exp2(input):  # noqa: A002
    """2 ** x, as a tensor power: exact at integers, where exp(x log 2) is not."""
    x = _float_input("exp2", input)
    return record("pow_tensor", (_const(2.0, x), x), {})


@export("log2")
def log2(input):  # noqa: A002
    return mul(record("log", (_float_input("log2", input),), {}), 1.0 / _LN2)


@export("log10")
def log10(input):  # noqa: A002
    return mul(record("log", (_float_input("log10", input),), {}), 1.0 / _LN10)


@export("rsqrt")
def rsqrt(input):  # noqa: A002
    """1 / sqrt(x), as torch computes it: rsqrt(-0) = -inf and rsqrt(-inf) = NaN (``x ** -0.5``
    would give +inf and 0 there)."""
    return record("inv", (record("sqrt", (_float_input("rsqrt", input),), {}),), {})


@export("square")
def square(input):  # noqa: A002
    """x * x; integers stay integers, bools become int64 (torch)."""
    x = input.to(dtype=int64) if input.dtype is bool_ else input
    return _binary("mul", x, x)


# ---- binary float math ----------------------------------------------------------------------

@export("atan2", "arctan2")
def atan2(input, other):  # noqa: A002
    """The angle of (other, input) in [-pi, pi]; integers give the default float dtype."""
    return record("atan2", _float_pair("atan2", input, other), {})


@export("hypot")
def hypot(input, other):  # noqa: A002
    """sqrt(a^2 + b^2)."""
    a, b = _pair("hypot", input, other)
    _float_only("hypot", a)
    return record("sqrt", (record("add", (record("mul", (a, a), {}), record("mul", (b, b), {})), {}),), {})


def _logaddexp(op, a, b, base2):
    a, b = _pair(op, a, b)
    _float_only(op, a)
    m = record("maximum", (a, b), {})
    d = record("sub", (a, b), {})
    # Equal infinities give a - b = NaN: their difference is taken as 0, so the result is that infinity.
    same_inf = logical_and(eq(a, b), isinf(a))
    d = _where(same_inf, _const(0.0, d), d)
    t = record("neg", (record("abs", (d,), {}),), {})
    if base2:
        return add(m, mul(record("log1p", (record("exp", (mul(t, _LN2),), {}),), {}), 1.0 / _LN2))
    return record("add", (m, record("log1p", (record("exp", (t,), {}),), {})), {})


@export("logaddexp")
def logaddexp(input, other):  # noqa: A002
    """log(exp(a) + exp(b)) as max(a, b) + log1p(exp(-|a - b|)): no overflow, accurate in the tails."""
    return _logaddexp("logaddexp", input, other, False)


@export("logaddexp2")
def logaddexp2(input, other):  # noqa: A002
    """log2(2^a + 2^b) as max(a, b) + log1p(2^-|a - b|) / log 2."""
    return _logaddexp("logaddexp2", input, other, True)


@export("xlogy")
def xlogy(input, other):  # noqa: A002
    """x * log(y), 0 where x == 0 (unless y is NaN); integers give the default float dtype."""
    x, y = _float_pair("xlogy", input, other)
    # Where x == 0 and log(y) is not finite (y <= 0 or +inf), y is taken as 1: the product is 0 and
    # the gradients are torch's (d/dx = log y, 0 where x == 0 and y <= 0; d/dy = x / y).
    y_safe = _where(logical_and(eq(x, 0), logical_or(le(y, 0), eq(y, math.inf))), _const(1.0, y), y)
    return record("mul", (x, record("log", (y_safe,), {})), {})


@export("lerp")
def lerp(input, end, weight):  # noqa: A002
    """start + weight * (end - start), as torch computes it: from ``end`` when |weight| >= 1/2."""
    a, b = _pair("lerp", input, end)
    _float_only("lerp", a)
    d = record("sub", (b, a), {})
    if not isinstance(weight, Tensor):
        w = float(weight)
        if builtins.abs(w) < 0.5:
            return record("add", (a, mul(d, w)), {})
        return record("sub", (b, mul(d, 1.0 - w)), {})
    w = weight.to(dtype=a.dtype)
    low = record("add", (a, record("mul", (w, d), {})), {})
    high = record("sub", (b, record("mul", (d, sub(1.0, w)), {})), {})
    return _where(lt(abs(w), 0.5), low, high)


@export("clamp", "clip")
def clamp(input, min=None, max=None):  # noqa: A002
    """min(max(x, min), max) with torch's promotion (an int tensor with float bounds is float).
    Number bounds: clamp' is 1 strictly inside (DESIGN.md). Tensor bounds: torch's gradients
    (x where min <= x <= max, each bound where it wins)."""
    if min is None and max is None:
        raise DomainError("clamp: at least one of min and max must not be None")
    bounds = [v for v in (min, max) if v is not None]
    x = _operand(input, "clamp")
    dt = result_type(x, *[_operand(v, "clamp") for v in bounds])
    x = x.to(dtype=dt)
    if not any(isinstance(v, Tensor) for v in bounds):
        cast = (lambda v: float(v)) if dt.is_floating_point else (lambda v: int(v))
        lo = None if min is None else cast(min)
        hi = None if max is None else cast(max)
        if lo is not None and hi is not None and lo > hi:
            lo = hi  # torch: max wins
        if (lo is not None and lo != lo) or (hi is not None and hi != hi):
            return mul(x, float("nan"))
        return record("clamp", (x,), {"lo": lo, "hi": hi})
    out = x
    if min is not None:
        m = _const(min, x, dt)
        out = _where(lt(out, m), m, out)
    if max is not None:
        m = _const(max, x, dt)
        out = _where(gt(out, m), m, out)
    return out


@export("maximum")
def maximum(input, other):  # noqa: A002
    """Elementwise max (NaN propagates); ties split the gradient 1/2-1/2 (torch's too)."""
    return record("maximum", _pair("maximum", input, other), {})


@export("minimum")
def minimum(input, other):  # noqa: A002
    return record("minimum", _pair("minimum", input, other), {})


@export("fmax")
def fmax(input, other):  # noqa: A002
    """Elementwise max ignoring NaN (NaN only where both are); the gradient goes to ``input`` on ties."""
    a, b = _pair("fmax", input, other)
    return _where(logical_or(ge(a, b), isnan(b)), a, b)


@export("fmin")
def fmin(input, other):  # noqa: A002
    a, b = _pair("fmin", input, other)
    return _where(logical_or(le(a, b), isnan(b)), a, b)


@export("nan_to_num")
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002
    """NaN, +inf and -inf replaced (by default with 0 and the dtype's largest and lowest values);
    the gradient passes where x is finite."""
    if not input.dtype.is_floating_point:
        return input.clone()
    fi = finfo(input.dtype)
    out = _where(isnan(input), _const(nan, input), input)
    out = _where(isposinf(input), _const(fi.max if posinf is None else posinf, input), out)
    return _where(isneginf(input), _const(fi.min if neginf is None else neginf, input), out)


# ---- comparisons: bool results --------------------------------------------------------------

def _comparison(name, op, aliases=()):
    def fn(input, other):  # noqa: A002
        if type(input) is Tensor and type(other) is Tensor and input._value.dtype == other._value.dtype:
            return record("compare", (input, other), {"op": op})
        return record("compare", _pair(name, input, other), {"op": op})
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{op}`` after torch's promotion: a bool tensor."
    return export(name, *aliases)(fn)


eq = _comparison("eq", "eq")
ne = _comparison("ne", "ne", ("not_equal",))
lt = _comparison("lt", "lt", ("less",))
le = _comparison("le", "le", ("less_equal",))
gt = _comparison("gt", "gt", ("greater",))
ge = _comparison("ge", "ge", ("greater_equal",))


@export("isnan")
def isnan(input):  # noqa: A002
    return record("compare", (input, input), {"op": "ne"})


@export("isinf")
def isinf(input):  # noqa: A002
    if not input.dtype.is_floating_point:
        return _full_bool(input, False)
    return eq(abs(input), math.inf)


@export("isposinf")
def isposinf(input):  # noqa: A002
    if not input.dtype.is_floating_point:
        return _full_bool(input, False)
    return eq(input, math.inf)


@export("isneginf")
def isneginf(input):  # noqa: A002
    if not input.dtype.is_floating_point:
        return _full_bool(input, False)
    return eq(input, -math.inf)


@export("isfinite")
def isfinite(input):  # noqa: A002
    if not input.dtype.is_floating_point:
        return _full_bool(input, True)
    return lt(abs(input), math.inf)


@export("isreal")
def isreal(input):  # noqa: A002
    """True everywhere: every dtype here is real."""
    return _full_bool(input, True)


@export("isclose")
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """|a - b| <= atol + rtol * |b| (or a == b, infinities included); torch requires one dtype."""
    if input.dtype != other.dtype:
        raise DTypeError(f"isclose: dtypes {input.dtype.name} and {other.dtype.name} differ")
    if rtol < 0 or atol < 0:
        raise DomainError(f"isclose: rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
    close = eq(input, other)
    if equal_nan:
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    if rtol == 0 and atol == 0:
        return close
    a, b = _float_input("isclose", input), _float_input("isclose", other)
    err = abs(sub(a, b))
    allowed = add(mul(abs(b), float(rtol)), float(atol))
    return logical_or(close, logical_and(isfinite(err), le(err, allowed)))


@export("allclose")
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:  # noqa: A002
    return bool(np.all(isclose(input, other, rtol, atol, equal_nan).numpy()))


@export("equal")
def equal(input, other) -> bool:  # noqa: A002
    """True when the shapes are the same and every element is equal."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(np.all(eq(input, other).numpy()))


# ---- logical and bitwise --------------------------------------------------------------------

def _truth(x: Tensor) -> Tensor:
    return x if x.dtype is bool_ else record("compare", (x, _const(0, x)), {"op": "ne"})


def _logical(name, op):
    def fn(input, other):  # noqa: A002
        a, b = _operand(input, name), _operand(other, name)
        ref = a if isinstance(a, Tensor) else b
        return record("bitwise", (_truth(_as_tensor(a, ref)), _truth(_as_tensor(b, ref))), {"op": op})
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise logical {op} of the operands' truth values (nonzero is True): a bool tensor."
    return export(name)(fn)


logical_and = _logical("logical_and", "and")
logical_or = _logical("logical_or", "or")
logical_xor = _logical("logical_xor", "xor")


@export("logical_not")
def logical_not(input):  # noqa: A002
    return record("bitwise_not", (_truth(input),), {})


def _int_pair(name, a, b):
    a, b = _pair(name, a, b)
    if a.dtype.is_floating_point:
        raise DTypeError(f"{name}: expects integer or bool tensors, got dtype {a.dtype.name}")
    return a, b


def _bitwise(name, op):
    def fn(input, other):  # noqa: A002
        a, b = _int_pair(name, input, other)
        if a.dtype is bool_ and op.endswith("shift"):
            raise DTypeError(f"{name}: not supported on bool tensors")
        return record("bitwise", (a, b), {"op": op})
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise bitwise {op} of integer or bool tensors (torch's promotion)."
    return export(name)(fn)


bitwise_and = _bitwise("bitwise_and", "and")
bitwise_or = _bitwise("bitwise_or", "or")
bitwise_xor = _bitwise("bitwise_xor", "xor")
bitwise_left_shift = _bitwise("bitwise_left_shift", "left_shift")
bitwise_right_shift = _bitwise("bitwise_right_shift", "right_shift")


@export("bitwise_not")
def bitwise_not(input):  # noqa: A002
    if input.dtype.is_floating_point:
        raise DTypeError(f"bitwise_not: expects an integer or bool tensor, got dtype {input.dtype.name}")
    return record("bitwise_not", (input,), {})


# ---- operators ------------------------------------------------------------------------------

def _ok(o) -> bool:
    return isinstance(o, (Tensor, Number, np.ndarray))


def _operator(name, fn, reflected=False):
    if reflected:
        def method(self, o):
            return fn(o, self) if _ok(o) else NotImplemented
    else:
        def method(self, o):
            return fn(self, o) if _ok(o) else NotImplemented
    method.__name__ = method.__qualname__ = name
    return export(name, function=False)(method)


@export("__add__", function=False)
def _add_op(self, o):
    if type(o) is Tensor and o._value.dtype is self._value.dtype:  # the eager hot path
        return record("add", (self, o), {})
    if type(o) is Tensor or isinstance(o, Number):
        return _binary("add", self, o)
    return add(self, o) if _ok(o) else NotImplemented


@export("__radd__", function=False)
def _radd_op(self, o):
    if isinstance(o, Number):
        return _binary("add", o, self)
    return add(o, self) if _ok(o) else NotImplemented


@export("__mul__", "__rmul__", function=False)
def _mul_op(self, o):
    if type(o) is Tensor and o._value.dtype is self._value.dtype:  # the eager hot path
        return record("mul", (self, o), {})
    if type(o) is Tensor:
        return _binary("mul", self, o)
    return mul(self, o) if _ok(o) else NotImplemented


@export("__sub__", function=False)
def _sub_op(self, o):
    if type(o) is Tensor and self._value.dtype == o._value.dtype and self._value.dtype.kind != "b":
        return record("sub", (self, o), {})
    return sub(self, o) if _ok(o) else NotImplemented


@export("__truediv__", function=False)
def _truediv_op(self, o):
    if type(o) is Tensor and o._value.dtype == self._value.dtype and o._value.dtype.kind == "f":
        return record("div", (self, o), {})
    if type(o) is Tensor:
        return _binary("div", self, o)
    return div(self, o) if _ok(o) else NotImplemented


_operator("__rsub__", sub, reflected=True)
_operator("__rtruediv__", div, reflected=True)
_operator("__floordiv__", floor_divide)
_operator("__rfloordiv__", floor_divide, reflected=True)
_operator("__mod__", remainder)
_operator("__rmod__", remainder, reflected=True)
_operator("__pow__", pow)
_operator("__rpow__", pow, reflected=True)
_operator("__and__", bitwise_and)
_operator("__rand__", bitwise_and, reflected=True)
_operator("__or__", bitwise_or)
_operator("__ror__", bitwise_or, reflected=True)
_operator("__xor__", bitwise_xor)
_operator("__rxor__", bitwise_xor, reflected=True)
_operator("__lshift__", bitwise_left_shift)
_operator("__rlshift__", bitwise_left_shift, reflected=True)
_operator("__rshift__", bitwise_right_shift)
_operator("__rrshift__", bitwise_right_shift, reflected=True)
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    _operator(f"__{_n}__", globals()[_n])

export("__neg__", function=False)(neg)
export("__abs__", function=False)(abs)
export("__pos__", function=False)(positive)
export("__invert__", function=False)(bitwise_not)
