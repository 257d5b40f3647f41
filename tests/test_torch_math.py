"""The elementwise math and comparison surface against PyTorch: values, dtypes, shapes and gradients
of the same programs run in torch and in torchlean."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import torchlean as tl  # noqa: E402
from torchlean.errors import DomainError, DTypeError  # noqa: E402


def _tt(a, grad=False):
    return torch.tensor(a, requires_grad=grad)


def _lt(a, grad=False):
    return tl.tensor(a, requires_grad=grad)


def _same(got, want, rtol=1e-5, atol=1e-6, what=""):
    """tl result against torch's: shape, dtype name and values (NaN where NaN)."""
    if isinstance(want, torch.Tensor):
        assert tuple(got.shape) == tuple(want.shape), what
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), (what, got.dtype, want.dtype)
        w = want.detach().numpy(force=True)
        g = got.numpy()
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)
    else:
        assert got == want, what


def _run(fn_t, fn_l, arrays, grad=True, rtol=1e-5, atol=1e-6, what=""):
    """fn(*tensors) in both libraries; forward and, for float results, the gradient of sum(y * c)."""
    ts = [_tt(a, grad and a.dtype.kind == "f") for a in arrays]
    ls = [_lt(a, grad and a.dtype.kind == "f") for a in arrays]
    yt, yl = fn_t(*ts), fn_l(*ls)
    _same(yl, yt, rtol, atol, what)
    if grad and yt.requires_grad:
        c = np.linspace(0.5, 1.5, max(yt.numel(), 1)).astype(np.float32)[:yt.numel()].reshape(tuple(yt.shape))
        (yt * torch.tensor(c)).sum().backward()
        (yl * tl.tensor(c)).sum().backward()
        for i, (t, x) in enumerate(zip(ts, ls)):
            if t.requires_grad:
                want = t.grad if t.grad is not None else torch.zeros_like(t)
                assert x.grad is not None, f"{what}: no gradient for input {i}"
                _same(x.grad, want, rtol, atol, f"{what} d{i}")
    return yl


# ---- unary float math -----------------------------------------------------------------------

UNARY = {  # name -> (lo, hi): a domain where torch's gradient is finite
    "exp": (-3, 3), "exp2": (-3, 3), "expm1": (-3, 3), "log": (0.1, 4), "log2": (0.1, 4), "log10": (0.1, 4),
    "log1p": (-0.8, 3), "sqrt": (0.1, 4), "rsqrt": (0.1, 4), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2),
    "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atan": (-3, 3), "arcsin": (-0.9, 0.9), "arccos": (-0.9, 0.9),
    "arctan": (-3, 3), "sinh": (-3, 3), "cosh": (-3, 3), "tanh": (-3, 3), "asinh": (-3, 3), "acosh": (1.2, 4),
    "atanh": (-0.9, 0.9), "sigmoid": (-6, 6), "erf": (-2, 2), "erfc": (-2, 2), "erfinv": (-0.9, 0.9),
    "reciprocal": (0.5, 3), "square": (-3, 3), "neg": (-3, 3), "negative": (-3, 3), "abs": (-3, 3),
    "absolute": (-3, 3), "relu": (-3, 3), "frac": (-3, 3), "sign": (-3, 3), "sgn": (-3, 3), "floor": (-3, 3),
    "ceil": (-3, 3), "round": (-3, 3), "trunc": (-3, 3), "fix": (-3, 3),
}
SHAPES = [(7,), (3, 4), (), (0, 3), (2, 3, 2)]


def _away(rng, shape, lo, hi):
    """Uniform samples kept 0.05 away from the kinks and jumps (0 and the half-integers)."""
    x = rng.uniform(lo, hi, size=shape)
    k = np.round(x * 2) / 2
    x = np.where(np.abs(x - k) < 0.05, k + 0.1, x)
    return np.clip(x, lo, hi).astype(np.float32)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_and_methods_match_torch(name, rng):
    lo, hi = UNARY[name]
    for shape in SHAPES:
        x = _away(rng, shape, lo, hi)
        _run(getattr(torch, name), getattr(tl, name), [x], what=f"tl.{name} {shape}")
        _run(lambda t: getattr(t, name)(), lambda t: getattr(t, name)(), [x], what=f"Tensor.{name} {shape}")


@pytest.mark.parametrize("name", ["exp", "sin", "tanh", "expm1", "floor", "abs", "sign"])
def test_unary_on_non_contiguous_views(name, rng):
    x = _away(rng, (4, 5), -2, 2)
    _run(lambda t: getattr(t.t(), name)(), lambda t: getattr(t.t(), name)(), [x], what=f"{name} of x.t()")
    _run(lambda t: getattr(t[:, 1::2], name)(), lambda t: getattr(t[:, 1::2], name)(), [x], what=f"{name} of slice")


@pytest.mark.parametrize("name", ["exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "tan",
                                  "asinh", "atan", "sigmoid", "tanh", "erf", "erfc", "reciprocal"])
def test_integer_inputs_of_float_ops_give_float32(name):
    x = np.array([1, 2, 3, 5], dtype=np.int64)
    _run(getattr(torch, name), getattr(tl, name), [x], what=name)
    assert getattr(tl, name)(tl.tensor([True, False])).dtype == tl.float32


@pytest.mark.parametrize("name", ["abs", "neg", "sign", "floor", "ceil", "trunc", "square", "relu", "nan_to_num"])
def test_integer_inputs_of_integer_ops_stay_integers(name):
    for dt in (np.int64, np.int32):
        x = np.array([-3, 0, 5, -1], dtype=dt)
        _run(getattr(torch, name), getattr(tl, name), [x], what=f"{name} {dt}")


def test_ops_torch_refuses_on_integers_raise_dtype_errors():
    i = tl.tensor([1, 2])
    for fn in (tl.frac, lambda t: tl.hypot(t, t), lambda t: tl.logaddexp(t, t),
               lambda t: tl.lerp(t, t, 0.5), lambda t: t.round(decimals=1)):
        with pytest.raises(DTypeError):
            fn(i)
    assert tl.round(i).tolist() == [1, 2] and tl.round(i).dtype == i.dtype      # torch returns integers as they are
    b = tl.tensor([True, False])
    for fn in (tl.neg, tl.abs, tl.floor, lambda t: -t, lambda t: t - t):
        with pytest.raises(DTypeError):
            fn(b)


def test_sign_of_nan_and_signed_zero_and_bool_as_torch():
    x = np.array([np.nan, -0.0, 0.0, -2.0, np.inf], dtype=np.float32)
    _same(tl.sign(tl.tensor(x)), torch.sign(torch.tensor(x)))
    _same(tl.tensor([True, False]).sign(), torch.tensor([True, False]).sign())


def test_accurate_for_small_and_large_arguments():
    small = np.array([1e-10, -1e-8, 3e-7, 1e-30], dtype=np.float32)
    for name in ("expm1", "log1p", "sinh", "asinh", "atanh", "tan", "erfinv"):
        _same(getattr(tl, name)(tl.tensor(small)), getattr(torch, name)(torch.tensor(small)), rtol=1e-6, atol=0,
              what=name)
    tails = np.array([4.0, 6.0, 9.0, -3.0], dtype=np.float32)
    _same(tl.erfc(tl.tensor(tails)), torch.erfc(torch.tensor(tails)), rtol=2e-5, atol=0)
    near_one = np.array([0.999999, -0.9999, 1.0, -1.0, 1.5], dtype=np.float32)
    _same(tl.erfinv(tl.tensor(near_one)), torch.erfinv(torch.tensor(near_one)), rtol=1e-5, atol=0)
    big = np.array([80.0, -90.0, 1e30, -1e30], dtype=np.float32)
    _same(tl.logaddexp(tl.tensor(big), tl.tensor(big[::-1].copy())),
          torch.logaddexp(torch.tensor(big), torch.tensor(big[::-1].copy())), rtol=1e-6)
    inf = np.array([np.inf, -np.inf, np.inf, 1.0], dtype=np.float32)
    other = np.array([np.inf, -np.inf, -np.inf, -np.inf], dtype=np.float32)
    for name in ("logaddexp", "logaddexp2"):
        _same(getattr(tl, name)(tl.tensor(inf), tl.tensor(other)),
              getattr(torch, name)(torch.tensor(inf), torch.tensor(other)), what=name)


def test_round_with_decimals_matches_torch():
    x = np.array([1.2345, -2.5, 0.5, 1.5, 1250.0, 1350.0, -0.0049, 2.675], dtype=np.float32)
    for d in (0, 1, 2, 3, -1, -2):
        _run(lambda t: torch.round(t, decimals=d), lambda t: tl.round(t, decimals=d), [x], what=f"decimals={d}")
        _same(tl.tensor(x).round(decimals=d), torch.tensor(x).round(decimals=d))


# ---- binary arithmetic ----------------------------------------------------------------------

BINARY = {  # name -> (a range, b range) keeping away from poles and jumps
    "add": ((-3, 3), (-3, 3)), "sub": ((-3, 3), (-3, 3)), "subtract": ((-3, 3), (-3, 3)),
    "mul": ((-3, 3), (-3, 3)), "multiply": ((-3, 3), (-3, 3)), "div": ((-3, 3), (0.5, 2)),
    "divide": ((-3, 3), (0.5, 2)), "true_divide": ((-3, 3), (0.5, 2)), "atan2": ((-3, 3), (-3, 3)),
    "arctan2": ((-3, 3), (-3, 3)), "hypot": ((-3, 3), (-3, 3)), "logaddexp": ((-3, 3), (-3, 3)),
    "logaddexp2": ((-3, 3), (-3, 3)), "xlogy": ((-3, 3), (0.2, 3)), "maximum": ((-3, 3), (-3, 3)),
    "minimum": ((-3, 3), (-3, 3)), "fmax": ((-3, 3), (-3, 3)), "fmin": ((-3, 3), (-3, 3)),
    "pow": ((0.2, 3), (-2, 2)), "remainder": ((-3, 3), (0.6, 1.6)), "fmod": ((-3, 3), (0.6, 1.6)),
    "floor_divide": ((-3, 3), (0.6, 1.6)),
}
BCAST = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 3)), ((5,), ()), ((0, 2), (2,))]


def _binary_inputs(rng, name, sa, sb):
    (alo, ahi), (blo, bhi) = BINARY[name]
    for _ in range(100):
        a = rng.uniform(alo, ahi, size=sa).astype(np.float32)
        b = rng.uniform(blo, bhi, size=sb).astype(np.float32)
        if name in ("remainder", "fmod", "floor_divide"):
            b = b * rng.choice([-1, 1], size=sb).astype(np.float32)
            q = np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)) / b
            if q.size and np.min(np.abs(q - np.round(q))) < 0.05:
                continue
        if name in ("maximum", "minimum", "fmax", "fmin"):
            d = np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)) - b
            if d.size and np.min(np.abs(d)) < 0.02:
                continue
        return a, b
    raise AssertionError("no sample")


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_functions_methods_and_broadcasting_match_torch(name, rng):
    for sa, sb in BCAST:
        a, b = _binary_inputs(rng, name, sa, sb)
        grad = name != "floor_divide"  # torch has no derivative for it (torchlean's: zero, as div's floor mode)
        _run(getattr(torch, name), getattr(tl, name), [a, b], grad=grad, what=f"tl.{name} {sa} {sb}")
        _run(lambda x, y: getattr(x, name)(y), lambda x, y: getattr(x, name)(y), [a, b], grad=grad,
             what=f"Tensor.{name} {sa} {sb}")


def test_binary_ops_on_non_contiguous_operands(rng):
    a = rng.uniform(-2, 2, (4, 3)).astype(np.float32)
    b = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
    for name in ("add", "mul", "div", "atan2", "maximum", "pow"):
        _run(lambda x, y: getattr(torch, name)(x.t().abs() + 0.1, y[:, ::2].t()[:2].t()[:, :1]),
             lambda x, y: getattr(tl, name)(x.t().abs() + 0.1, y[:, ::2].t()[:2].t()[:, :1]), [a, b], what=name)


OPERATORS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a ** b,
}
OPERANDS = {  # what each operand is, built per library
    "f32": lambda m: m.tensor([1.5, -2.25, 3.0]), "i64": lambda m: m.tensor([3, -7, 2]),
    "i32": lambda m: m.tensor([3, -7, 2], dtype=m.int32), "bool": lambda m: m.tensor([True, False, True]),
    "f64_0d": lambda m: m.tensor(2.0, dtype=m.float64), "i64_0d": lambda m: m.tensor(3),
    "int": lambda m: 2, "float": lambda m: 2.5, "negint": lambda m: -3,
}


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_operator_promotion_table_matches_torch(op):
    f = OPERATORS[op]
    for na, ma in OPERANDS.items():
        for nb, mb in OPERANDS.items():
            if na in ("int", "float", "negint") and nb in ("int", "float", "negint"):
                continue
            try:
                want = f(ma(torch), mb(torch))
            except Exception:  # noqa: BLE001 - torch refuses: torchlean must refuse too
                with pytest.raises((tl.TorchLeanError, TypeError)):
                    f(ma(tl), mb(tl))
                continue
            got = f(ma(tl), mb(tl))
            _same(got, want, what=f"{na} {op} {nb}")


def test_add_and_sub_alpha():
    a, b = np.array([1.0, 2.0, -3.0], np.float32), np.array([0.5, -1.0, 2.0], np.float32)
    _run(lambda x, y: torch.add(x, y, alpha=2.5), lambda x, y: tl.add(x, y, alpha=2.5), [a, b])
    _run(lambda x, y: torch.sub(x, y, alpha=-2), lambda x, y: tl.sub(x, y, alpha=-2), [a, b])
    _run(lambda x, y: x.add(y, alpha=3), lambda x, y: x.add(y, alpha=3), [a, b])
    i = np.array([1, 2, 3])
    _same(tl.add(tl.tensor(i), tl.tensor(i), alpha=2), torch.add(torch.tensor(i), torch.tensor(i), alpha=2))
    _same(tl.sub(tl.tensor(i), 1.5, alpha=2), torch.sub(torch.tensor(i), 1.5, alpha=2))
    with pytest.raises(DTypeError, match="alpha"):
        tl.add(tl.tensor(i), tl.tensor(i), alpha=2.5)


def test_division_rounding_modes_on_integers_and_floats():
    a = np.array([-7, 7, -7, 7, 0, -1, 9], dtype=np.int64)
    b = np.array([2, -2, -2, 2, 3, 5, 3], dtype=np.int64)
    for mode in (None, "trunc", "floor"):
        _same(tl.div(tl.tensor(a), tl.tensor(b), rounding_mode=mode),
              torch.div(torch.tensor(a), torch.tensor(b), rounding_mode=mode), what=str(mode))
        _run(lambda x, y: torch.div(x, y, rounding_mode=mode), lambda x, y: tl.div(x, y, rounding_mode=mode),
             [a.astype(np.float32) + 0.5, b.astype(np.float32)], what=f"float {mode}")
    # Python's float floor division: 1 // 0.1 is 9, floor(1 / 0.1) is 10.
    _same(tl.tensor([1.0], dtype=tl.float64) // 0.1, torch.tensor([1.0], dtype=torch.float64) // 0.1)
    for fn in (lambda x: x // 0, lambda x: x % 0, lambda x: tl.fmod(x, 0),
               lambda x: tl.div(x, 0, rounding_mode="trunc")):
        with pytest.raises(DomainError, match="ZeroDivision"):
            fn(tl.tensor(a))
    x = np.array([-1.5, 0.0, 2.5], np.float32)
    for f in (lambda m: m.tensor(x) // 0, lambda m: m.tensor(x) % 0, lambda m: m.tensor(x) / 0,
              lambda m: m.tensor([1, 0, -1]) / 0):
        _same(f(tl), f(torch))
    with pytest.raises(DomainError, match="rounding_mode"):
        tl.div(tl.tensor(a), 2, rounding_mode="round")


def test_remainder_fmod_and_floor_divide_follow_python_and_c_on_integers():
    a = np.arange(-9, 10, dtype=np.int64)
    for b in (4, -4, 3):
        for name in ("remainder", "fmod", "floor_divide"):
            _same(getattr(tl, name)(tl.tensor(a), b), getattr(torch, name)(torch.tensor(a), b), what=f"{name} {b}")
    _same(5 % tl.tensor([3, -3]), 5 % torch.tensor([3, -3]))
    _same(7 // tl.tensor([2, -2]), 7 // torch.tensor([2, -2]))
    _same(tl.remainder(5, tl.tensor([3, -3])), torch.remainder(5, torch.tensor([3, -3])))
    _same(tl.tensor([7, -7], dtype=tl.int32) % tl.tensor([-2, 2], dtype=tl.int32),
          torch.tensor([7, -7], dtype=torch.int32) % torch.tensor([-2, 2], dtype=torch.int32))


def test_pow_promotion_and_special_exponents():
    i = np.array([-3, 0, 5, 2])
    f = np.array([-1.5, 0.0, 2.5, 4.0], np.float32)
    cases = [lambda m: m.tensor(i) ** 0.5, lambda m: m.tensor(i) ** 2, lambda m: m.tensor(i) ** 0,
             lambda m: 2 ** m.tensor(i), lambda m: 2.0 ** m.tensor(i), lambda m: m.tensor(i) ** m.tensor([2, 0, 1, 3]),
             lambda m: m.tensor([2, 1, -1, 3, -1]) ** m.tensor([-1, -2, -3, -1, -2]),
             lambda m: m.tensor(f) ** float("inf"), lambda m: m.tensor(f) ** -1, lambda m: m.tensor(f) ** 3,
             lambda m: m.tensor(f) ** m.tensor([2, 3, 1, 0]), lambda m: m.tensor([True, False]) ** 2,
             lambda m: m.pow(m.tensor(f), 2), lambda m: m.pow(2, m.tensor(f)), lambda m: m.tensor(f).pow(0.5),
             lambda m: m.tensor([-8.0, -2.0]) ** m.tensor([3.0, 2.0])]
    for k, c in enumerate(cases):
        _same(c(tl), c(torch), what=str(k))
    with pytest.raises(DomainError, match="negative integer powers"):
        tl.tensor(i) ** -1
    # gradients of both operands, negative bases with integral exponents included
    a = np.array([-2.0, 1.5, 0.0, 3.0], np.float32)
    _run(lambda x: x ** 3, lambda x: x ** 3, [a])
    _run(lambda x: x ** 2.5, lambda x: x ** 2.5, [np.abs(a) + 0.5])
    _run(lambda x: 3.0 ** x, lambda x: 3.0 ** x, [a])
    _run(torch.pow, tl.pow, [np.array([0.5, 2.0, 0.0], np.float32), np.array([1.5, -0.5, 2.0], np.float32)])


# ---- clamp ------------------------------------------------------------------------------------

def test_clamp_number_bounds_dtypes_and_gradients(rng):
    x = _away(rng, (3, 4), -3, 3)
    for lo, hi in ((-1.0, 1.0), (None, 0.5), (-0.5, None), (2.0, 1.0)):
        for name in ("clamp", "clip"):
            _run(lambda t: getattr(torch, name)(t, lo, hi), lambda t: getattr(tl, name)(t, lo, hi), [x],
                 what=f"{name} {lo} {hi}")
        _run(lambda t: t.clamp(min=lo, max=hi), lambda t: t.clamp(min=lo, max=hi), [x])
    i = np.array([-3, 0, 5])
    for lo, hi in ((-1, 2), (None, 2), (-1.5, 2.5), (0, 1)):
        _same(tl.tensor(i).clamp(lo, hi), torch.tensor(i).clamp(lo, hi), what=f"int {lo} {hi}")
    _same(tl.tensor([True, False]).clamp(0, 1), torch.tensor([True, False]).clamp(0, 1))
    with pytest.raises(DomainError, match="min and max"):
        tl.tensor(x).clamp()


def test_clamp_tensor_bounds_match_torch_gradients(rng):
    x = _away(rng, (3, 4), -3, 3)
    lo = rng.uniform(-2, 0, (3, 4)).astype(np.float32)
    hi = rng.uniform(0, 2, (4,)).astype(np.float32)
    hi[0] = -2.5  # a column where min > max: max wins
    _run(torch.clamp, tl.clamp, [x, lo, hi], what="tensor bounds")
    _run(lambda t, a: torch.clamp(t, min=a), lambda t, a: tl.clamp(t, min=a), [x, lo])
    _run(lambda t, b: t.clamp(max=b), lambda t, b: t.clamp(max=b), [x, hi])
    _run(lambda t, a: torch.clamp(t, a, torch.tensor(1.0)), lambda t, a: tl.clamp(t, a, 1.0), [x, lo])
    _same(tl.clamp(tl.tensor([1, 5, -2]), tl.tensor(0), tl.tensor([1.5, 2.5, 3.5])),
          torch.clamp(torch.tensor([1, 5, -2]), torch.tensor(0), torch.tensor([1.5, 2.5, 3.5])))


def test_clamp_gradient_convention_at_the_bounds():
    """DESIGN.md: clamp' is 1 strictly inside (lo, hi); torch passes the gradient at the bounds too."""
    x = tl.tensor([-1.0, 0.0, 1.0, 2.0], requires_grad=True)
    x.clamp(0.0, 1.0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 0.0]
    x = tl.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    x.clamp(0.0, 1.0).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]


def test_maximum_ties_split_the_gradient_and_fmax_ignores_nan():
    a = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = tl.tensor([1.0, 1.0, 4.0], requires_grad=True)
    tl.maximum(a, b).sum().backward()
    assert a.grad.tolist() == [0.5, 1.0, 0.0] and b.grad.tolist() == [0.5, 0.0, 1.0]
    n = np.array([np.nan, 1.0, np.nan, 2.0], np.float32)
    m = np.array([2.0, np.nan, np.nan, 3.0], np.float32)
    for name in ("fmax", "fmin", "maximum", "minimum"):
        _same(getattr(tl, name)(tl.tensor(n), tl.tensor(m)), getattr(torch, name)(torch.tensor(n), torch.tensor(m)),
              what=name)
    _same(tl.fmax(tl.tensor([1, 5]), tl.tensor([2.5, 0.5])), torch.fmax(torch.tensor([1, 5]), torch.tensor([2.5, 0.5])))


def test_lerp_xlogy_and_nan_to_num(rng):
    a = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    b = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    for w in (0.3, 0.7, -0.5, 1.5):
        _run(lambda s, e: torch.lerp(s, e, w), lambda s, e: tl.lerp(s, e, w), [a, b], what=f"lerp {w}")
    w = rng.uniform(-0.5, 1.5, (4,)).astype(np.float32)
    _run(torch.lerp, tl.lerp, [a, b, w], what="tensor weight")
    x = np.array([0.0, 0.0, 2.0, -1.5, 0.0], np.float32)
    y = np.array([0.0, np.nan, 3.0, 0.5, 2.0], np.float32)
    _same(tl.xlogy(tl.tensor(x), tl.tensor(y)), torch.xlogy(torch.tensor(x), torch.tensor(y)))
    _run(torch.xlogy, tl.xlogy, [np.array([0.0, 2.0, -1.0], np.float32), np.array([0.5, 3.0, 2.0], np.float32)])
    _same(tl.xlogy(2, tl.tensor(y)), torch.xlogy(2, torch.tensor(y)))
    _same(tl.xlogy(tl.tensor([0, 1, 2]), tl.tensor([0, 1, 3])),
          torch.xlogy(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 3])))
    z = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    _run(torch.nan_to_num, tl.nan_to_num, [z])
    _same(tl.nan_to_num(tl.tensor(z), nan=1.0, posinf=2.0, neginf=-2.0),
          torch.nan_to_num(torch.tensor(z), nan=1.0, posinf=2.0, neginf=-2.0))
    _same(tl.tensor(z.astype(np.float64)).nan_to_num(), torch.tensor(z.astype(np.float64)).nan_to_num())


# ---- zero gradients of piecewise-constant ops -------------------------------------------------

@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "sign", "floor_divide"])
def test_piecewise_constant_ops_have_zero_gradients(name):
    x = tl.tensor([-1.3, 0.2, 2.7], requires_grad=True)
    y = tl.floor_divide(x, 0.7) if name == "floor_divide" else getattr(x, name)()
    (y * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.numpy())  # d(y * x)/dx = y: nothing through y


# ---- comparisons, logical and bitwise ---------------------------------------------------------

COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "greater_equal", "less_equal", "not_equal"]


@pytest.mark.parametrize("name", COMPARISONS)
def test_comparisons_promote_and_return_bool(name, rng):
    a = rng.integers(-2, 3, (3, 4)).astype(np.float32)
    b = rng.integers(-2, 3, (4,)).astype(np.float32)
    _same(getattr(tl, name)(tl.tensor(a), tl.tensor(b)), getattr(torch, name)(torch.tensor(a), torch.tensor(b)))
    _same(getattr(tl.tensor(a), name)(tl.tensor(b)), getattr(torch.tensor(a), name)(torch.tensor(b)))
    ia = a.astype(np.int64)
    _same(getattr(tl, name)(tl.tensor(ia), 0.5), getattr(torch, name)(torch.tensor(ia), 0.5))
    for f in (lambda m: getattr(m, name)(m.tensor(ia), m.tensor(b + 0.5)),
              lambda m: getattr(m, name)(m.tensor(a).t(), m.tensor(a).t())):
        _same(f(tl), f(torch))


def test_comparison_operators_and_reflected_forms():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    for f in (lambda m: m.tensor(a) < 2, lambda m: 2 < m.tensor(a), lambda m: m.tensor(a) >= 2.0,
              lambda m: 2.0 <= m.tensor(a), lambda m: m.tensor(a) == 2, lambda m: 2 != m.tensor(a),
              lambda m: m.tensor([1, 2, 3]) > 1.5, lambda m: m.tensor(a) == m.tensor([1, 0, 3])):
        _same(f(tl), f(torch))
    x = tl.tensor(a)
    assert (x == None) is False and (x != None) is True  # noqa: E711 - torch's answer to None
    assert (x == "a") is False
    assert len({x, x}) == 1  # identity hash
    y = tl.tensor(a, requires_grad=True)
    assert not (y > 1).requires_grad and (y > 1).dtype == tl.bool


def test_logical_ops_match_torch():
    a = np.array([1.0, 0.0, -2.0, 0.0], np.float32)
    b = np.array([2, 0, 0, 3])
    for name in ("logical_and", "logical_or", "logical_xor"):
        _same(getattr(tl, name)(tl.tensor(a), tl.tensor(b)), getattr(torch, name)(torch.tensor(a), torch.tensor(b)))
        _same(getattr(tl.tensor(b), name)(tl.tensor(a)), getattr(torch.tensor(b), name)(torch.tensor(a)))
    _same(tl.logical_not(tl.tensor(a)), torch.logical_not(torch.tensor(a)))
    _same(tl.tensor([True, False]).logical_not(), torch.tensor([True, False]).logical_not())


BITWISE = {"&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
           "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b}


@pytest.mark.parametrize("op", sorted(BITWISE))
def test_bitwise_operators_on_integers_and_bools(op):
    f = BITWISE[op]
    ints = {"i64": lambda m: m.tensor([-8, 5, 12, -1, 3]), "i32": lambda m: m.tensor([-8, 5, 12, -1, 3], dtype=m.int32),
            "bool": lambda m: m.tensor([True, False, True, False, True]),
            "counts": lambda m: m.tensor([1, 0, 70, 63, -1]), "int": lambda m: 2, "true": lambda m: True}
    for na, ma in ints.items():
        for nb, mb in ints.items():
            if na in ("int", "true") and nb in ("int", "true"):
                continue
            try:
                want = f(ma(torch), mb(torch))
            except Exception:  # noqa: BLE001
                with pytest.raises((tl.TorchLeanError, TypeError)):
                    f(ma(tl), mb(tl))
                continue
            _same(f(ma(tl), mb(tl)), want, what=f"{na} {op} {nb}")
    with pytest.raises(DTypeError):
        f(tl.tensor([1.0]), tl.tensor([1.0]))


def test_bitwise_functions_methods_and_invert():
    a, b = np.array([-8, 5, 12, -1]), np.array([3, 6, 10, 1])
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"):
        _same(getattr(tl, name)(tl.tensor(a), tl.tensor(b)), getattr(torch, name)(torch.tensor(a), torch.tensor(b)))
        _same(getattr(tl.tensor(a), name)(tl.tensor(b)), getattr(torch.tensor(a), name)(torch.tensor(b)))
    _same(~tl.tensor(a), ~torch.tensor(a))
    _same(~tl.tensor([True, False]), ~torch.tensor([True, False]))
    _same(tl.bitwise_not(tl.tensor(a, dtype=tl.int32)), torch.bitwise_not(torch.tensor(a, dtype=torch.int32)))
    with pytest.raises(DTypeError):
        ~tl.tensor([1.0])


# ---- predicates ---------------------------------------------------------------------------------

def test_isnan_isinf_isfinite_isposinf_isneginf_isreal():
    f = np.array([np.nan, np.inf, -np.inf, 0.0, -1.5], np.float32)
    i = np.array([1, 0, -3])
    for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal"):
        for x in (f, i, f.reshape(1, 5)):
            _same(getattr(tl, name)(tl.tensor(x)), getattr(torch, name)(torch.tensor(x)), what=name)
            _same(getattr(tl.tensor(x), name)(), getattr(torch.tensor(x), name)(), what=name)


def test_isclose_allclose_equal():
    a = np.array([1.0, 1.0 + 1e-6, 1.1, np.nan, np.inf, -np.inf, 0.0], np.float32)
    b = np.array([1.0, 1.0, 1.0, np.nan, np.inf, np.inf, 1e-9], np.float32)
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.2}, {"rtol": 0.0, "atol": 0.0}, {"atol": 0.2}):
        _same(tl.isclose(tl.tensor(a), tl.tensor(b), **kw), torch.isclose(torch.tensor(a), torch.tensor(b), **kw),
              what=str(kw))
        assert tl.allclose(tl.tensor(a[:3]), tl.tensor(b[:3]), **kw) == torch.allclose(
            torch.tensor(a[:3]), torch.tensor(b[:3]), **kw)
    _same(tl.isclose(tl.tensor([1, 2]), tl.tensor([1, 3])), torch.isclose(torch.tensor([1, 2]), torch.tensor([1, 3])))
    assert tl.tensor(a[:3]).allclose(tl.tensor(a[:3])) is True
    with pytest.raises(DTypeError):
        tl.isclose(tl.tensor([1, 2]), tl.tensor([1.0, 2.0]))
    assert tl.equal(tl.tensor([1, 2]), tl.tensor([1.0, 2.0])) is True
    assert tl.equal(tl.tensor([1, 2]), tl.tensor([1, 2, 3])) is False
    assert tl.tensor([1.0, 2.0]).equal(tl.tensor([1.0, 2.5])) is False


# ---- dunders ------------------------------------------------------------------------------------

def test_unary_operators_and_registration():
    x = np.array([-1.5, 0.0, 2.0], np.float32)
    _run(lambda t: -t, lambda t: -t, [x])
    _run(lambda t: abs(t), lambda t: abs(t), [x + 0.1])
    _run(lambda t: +t, lambda t: +t, [x])
    _same(abs(tl.tensor([-3, 2])), abs(torch.tensor([-3, 2])))
    for name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
                 "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__neg__", "__abs__",
                 "__pos__", "__invert__", "__and__", "__or__", "__xor__", "__rand__", "__ror__", "__rxor__",
                 "__lshift__", "__rshift__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        assert name in tl.ops.METHODS and name not in tl.ops.FUNCTIONS, name
    with pytest.raises(TypeError):
        tl.tensor(x) + [1, 2, 3]
    with pytest.raises(TypeError):
        tl.tensor(x) * "a"


def test_scalar_on_the_left_and_numpy_operands():
    x = np.array([1.5, -2.0, 4.0], np.float32)
    for f in (lambda m: 3 - m.tensor(x), lambda m: 3 / m.tensor(x), lambda m: 2.5 * m.tensor(x),
              lambda m: 1 + m.tensor([1, 2]), lambda m: 2.5 - m.tensor([1, 2]), lambda m: 7 // m.tensor(x),
              lambda m: 7.5 % m.tensor(x), lambda m: m.tensor(x) + np.float64(2.0),
              lambda m: m.tensor(x) * np.int64(3)):
        _same(f(tl), f(torch))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=3), st.lists(st.booleans(), min_size=3, max_size=3),
       st.sampled_from(["add", "mul", "atan2", "maximum", "logaddexp", "sub", "hypot"]))
def test_random_broadcast_shapes(shape, drop, name):
    rng = np.random.default_rng(len(shape) + 7 * sum(drop))
    sb = tuple(1 if d else s for s, d in zip(shape, drop))[1:] if shape else ()
    a = rng.uniform(-2, 2, tuple(shape)).astype(np.float32)
    b = rng.uniform(-2, 2, sb).astype(np.float32)
    _run(getattr(torch, name), getattr(tl, name), [a, b], what=f"{name} {shape} {sb}")


def test_onnx_imports_the_new_elementwise_ops():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from torchlean import ir
    x = np.array([[0.3, -0.7, 0.55, -0.2], [0.9, -0.95, 0.1, 0.45]], np.float32)
    y = np.array([[1.3, -0.7, 2.5, -1.2], [1.9, 0.6, -1.1, 0.45]], np.float32)
    cases = [("Tan", x), ("Asin", x), ("Acos", x), ("Atan", x), ("Sinh", x), ("Cosh", x), ("Asinh", x),
             ("Acosh", y * y + 1), ("Atanh", x), ("Floor", y * 3), ("Ceil", y * 3), ("Round", y * 3), ("Sign", x)]
    for op, a in cases:
        g = helper.make_graph([helper.make_node(op, ["a"], ["o"])], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a.shape))],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 9
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
        graph, payload = ir.from_onnx(m)
        np.testing.assert_allclose(ir.evaluate(graph, payload, a)[graph.outputs[0]], want, rtol=1e-5, atol=1e-6,
                                   err_msg=op)
    g = helper.make_graph([helper.make_node("Mod", ["a", "b"], ["o"], fmod=1)], "g",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in "ab"],
                          [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    graph, payload = ir.from_onnx(m)
    assert [n.kind for n in graph.nodes if n.kind not in ("input", "output")] == ["fmod"]
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"a": y * 3, "b": x + 1.5})[0]
    np.testing.assert_allclose(ir.evaluate(graph, payload, y * 3, x + 1.5)[graph.outputs[0]], want, rtol=1e-5)
    # fmod=0 is Python's remainder (onnxruntime accepts it for integers only)
    g = helper.make_graph([helper.make_node("Mod", ["a", "b"], ["o"])], "g",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in "ab"],
                          [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    graph, payload = ir.from_onnx(m)
    got = ir.evaluate(graph, payload, y * 3, x + 1.5)[graph.outputs[0]]
    np.testing.assert_allclose(got, np.remainder(y * 3, x + 1.5), rtol=1e-6)


@pytest.mark.cuda
def test_cuda_matches_cpu_on_floats_integers_and_bools(rng):
    """The same front-end calls on both devices: the float kernels (the .cu X-macro ops), the integer
    paths (CuPy's ufuncs) and the gradients."""
    x = _away(rng, (5, 33), -0.9, 0.9)
    y = _away(rng, (33,), 0.6, 1.6)
    for name in sorted(UNARY):
        for dev_x in (x, x.astype(np.float64)):
            a = tl.tensor(dev_x, requires_grad=True)
            b = tl.tensor(dev_x, device="cuda", requires_grad=True)
            shift = 1.5 if name == "acosh" else 0.0
            fa, fb = getattr(tl, name)(a + shift), getattr(tl, name)(b + shift)
            np.testing.assert_allclose(fb.cpu().numpy(), fa.numpy(), rtol=2e-5, atol=1e-6, err_msg=name)
            if fa.requires_grad:
                fa.sum().backward()
                fb.sum().backward()
                np.testing.assert_allclose(b.grad.cpu().numpy(), a.grad.numpy(), rtol=2e-5, atol=1e-6, err_msg=name)
    for name in ("atan2", "fmod", "remainder", "floor_divide", "pow", "hypot", "logaddexp", "xlogy", "fmax"):
        for sb in ((33,), (5, 33), ()):
            yb = y if sb == (33,) else (np.broadcast_to(y, (5, 33)).copy() if sb else np.float32(1.3))
            for dt in (np.float32, np.float64):
                a, b = tl.tensor(x.astype(dt), requires_grad=True), tl.tensor(np.asarray(yb, dt), requires_grad=True)
                c, d = (tl.tensor(x.astype(dt), device="cuda", requires_grad=True),
                        tl.tensor(np.asarray(yb, dt), device="cuda", requires_grad=True))
                fa, fc = getattr(tl, name)(a, b), getattr(tl, name)(c, d)
                np.testing.assert_allclose(fc.cpu().numpy(), fa.numpy(), rtol=2e-5, atol=1e-6, err_msg=name)
                if name != "floor_divide":
                    fa.sum().backward()
                    fc.sum().backward()
                    for g1, g2 in ((a.grad, c.grad), (b.grad, d.grad)):
                        np.testing.assert_allclose(g2.cpu().numpy(), g1.numpy(), rtol=2e-5, atol=1e-5, err_msg=name)
    i = np.array([-9, -8, -3, 0, 5, 7, 12, 64], dtype=np.int64)
    j = np.array([4, -3, 2, 1, -5, 3, 70, 1], dtype=np.int64)
    for dt in (np.int64, np.int32):
        for f in (lambda p, q: p % q, lambda p, q: p // q, lambda p, q: tl.fmod(p, q), lambda p, q: p & q,
                  lambda p, q: p | q, lambda p, q: p ^ q, lambda p, q: p << q, lambda p, q: p >> q,
                  lambda p, q: ~p, lambda p, q: p.sign(), lambda p, q: p.clamp(-3, 6), lambda p, q: p ** 2,
                  lambda p, q: p ** q.abs(), lambda p, q: p ** 0.5, lambda p, q: tl.div(p, q, rounding_mode="trunc"),
                  lambda p, q: p.abs(), lambda p, q: (p > 0) & (q < 0), lambda p, q: tl.logical_xor(p, q),
                  lambda p, q: p.isnan(), lambda p, q: p.float().nan_to_num()):
            want = f(tl.tensor(i.astype(dt)), tl.tensor(j.astype(dt)))
            got = f(tl.tensor(i.astype(dt), device="cuda"), tl.tensor(j.astype(dt), device="cuda"))
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), equal_nan=True)
