"""Tensor creation and random numbers against PyTorch: values and dtypes of the deterministic
creators, and for the random functions their shapes, dtypes, support and statistics (the streams
differ from torch's by design), seeds and generators."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings
from hypothesis import strategies as st

import torchlean as tl
from torchlean.errors import DomainError, DTypeError, ShapeError
from torchlean.ops import creation


def name(dt):
    return str(dt).split(".")[-1]


def same(ours, theirs, rtol=1e-6, atol=1e-7):
    """Same shape, dtype and values (float32 precision)."""
    assert tuple(ours.shape) == tuple(theirs.shape), (ours.shape, theirs.shape)
    assert name(ours.dtype) == name(theirs.dtype), (ours.dtype, theirs.dtype)
    a, b = ours.numpy(), theirs.detach().numpy()
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(a, b)


def both(expr):
    """``expr`` evaluated with ``T`` bound to torchlean and to torch."""
    return eval(expr, {"T": tl, "np": np}), eval(expr, {"T": torch, "np": np})


# ---- tensor: dtype inference and values ---------------------------------------------------

TENSOR_CASES = [
    "T.tensor(3)", "T.tensor(2.5)", "T.tensor(True)", "T.tensor([True, False])", "T.tensor([True, 1])",
    "T.tensor([True, 1.5])", "T.tensor([1, 2.0])", "T.tensor([[1, 2], [3, 4]])", "T.tensor(((1, 2), [3, 4]))",
    "T.tensor([])", "T.tensor([[], []])", "T.tensor([[[1.5]]])",
    "T.tensor([T.tensor(1, dtype=T.int32), T.tensor(2, dtype=T.int32)])",
    "T.tensor([T.tensor(1, dtype=T.int32), 2.5])", "T.tensor([T.tensor(1.0, dtype=T.float64), 2])",
    "T.tensor([T.tensor(True), 2])", "T.tensor([[1, 2], T.tensor([3, 4])])",
    "T.tensor([np.float64(1), 2.0])", "T.tensor(np.float64(1))", "T.tensor(np.int32(3))",
    "T.tensor([np.int32(3), np.int32(4)])", "T.tensor([np.float32(1.5), 2.5])", "T.tensor([np.int16(1), 2])",
    "T.tensor([np.uint8(1), np.int8(2)])", "T.tensor([np.float16(1), 2])", "T.tensor([1.0, np.int32(2)])",
    "T.tensor(np.arange(6).reshape(2, 3))", "T.tensor(np.ones((3, 3))[:, 0])", "T.tensor(np.array([1.5], np.float16))",
    "T.tensor(3.7, dtype=T.int64)", "T.tensor([1, 2], dtype=T.float64)", "T.tensor([0.5, 2.0], dtype=T.bool)",
    "T.tensor([2**62, 1.0])", "T.tensor([[0.1, 0.2], [0.3, 0.4]])", "T.tensor(range(4))",
]


@pytest.mark.parametrize("expr", TENSOR_CASES)
def test_tensor_infers_dtype_and_values_like_torch(expr):
    ours, theirs = both(expr)
    same(ours, theirs)
    assert ours.is_leaf and not ours.requires_grad


_LEAF = st.one_of(st.booleans(), st.integers(-2 ** 40, 2 ** 40), st.floats(-1e6, 1e6, width=32),
                  st.sampled_from([np.float32(1.5), np.int16(-3), np.float64(0.25), np.uint8(7)]))


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(0, 3), min_size=0, max_size=3), data=st.data())
def test_tensor_nested_data_like_torch(shape, data):
    n = math.prod(shape)
    leaves = data.draw(st.lists(_LEAF, min_size=n, max_size=n))
    flat = iter(leaves)

    def build(dims):
        return next(flat) if not dims else [build(dims[1:]) for _ in range(dims[0])]
    nested = build(shape)
    same(tl.tensor(nested), torch.tensor(nested))


def test_tensor_default_dtype_follows_set_default_dtype():
    tl.set_default_dtype(tl.float64)
    try:
        assert tl.tensor([1.5]).dtype == tl.float64 and tl.tensor(1).dtype == tl.int64
        assert tl.zeros(2).dtype == tl.float64 and tl.arange(0.5, 2).dtype == tl.float64
        assert tl.rand(3).dtype == tl.float64 and tl.full((1,), 2.0).dtype == tl.float64
    finally:
        tl.set_default_dtype(tl.float32)


def test_tensor_copies_and_detaches():
    a = np.arange(3.0)
    t = tl.tensor(a)
    a[0] = 9.0
    assert t.tolist() == [0.0, 1.0, 2.0]
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = tl.tensor(x * 2)
    assert y.is_leaf and not y.requires_grad and y.tolist() == [2.0, 4.0]
    z = tl.tensor(x, dtype=tl.int64)
    assert z.dtype == tl.int64 and z.tolist() == [1, 2]


def test_tensor_requires_grad_backward_matches_torch():
    data = [[0.5, -1.0], [2.0, 3.0]]
    a, b = tl.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    (a * a).sum().backward()
    (b * b).sum().backward()
    same(a.grad, b.grad)


@pytest.mark.parametrize("data, err, match", [
    ([[1, 2], [3]], ShapeError, "dim 1"),
    ([[1, 2], [3, 4, 5]], ShapeError, "length 2"),
    ([1, None], DTypeError, "NoneType"),
    ("abc", DTypeError, "str"),
    ([2 ** 64], DomainError, "int64"),
])
def test_tensor_rejects_bad_data(data, err, match):
    with pytest.raises(err, match=match):
        tl.tensor(data)


def test_tensor_requires_grad_needs_a_float_dtype():
    with pytest.raises(DTypeError, match="tensor"):
        tl.tensor([1, 2], requires_grad=True)
    with pytest.raises(DTypeError, match="zeros"):
        tl.zeros(2, dtype=tl.int64, requires_grad=True)


# ---- from_numpy, as_tensor, asarray ---------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_, np.float16])
def test_from_numpy_shares_memory_both_ways(dtype):
    a = np.zeros((2, 3), dtype=dtype)
    t = tl.from_numpy(a)
    assert t.dtype == tl.as_dtype(dtype) and t.shape == (2, 3)
    a[1, 2] = 1
    assert t.tolist()[1][2] == 1
    t.zero_()
    assert not a.any()


def test_from_numpy_copies_what_it_cannot_share():
    a = np.arange(9.0).reshape(3, 3)
    t = tl.from_numpy(a[:, 0])                 # strided: copied (tensors are contiguous)
    same(t, torch.from_numpy(a[:, 0]))
    a[0, 0] = 100.0
    assert t.tolist()[0] == 0.0
    u = tl.from_numpy(np.array([1, 2], dtype=np.uint16))
    assert u.tolist() == [1, 2]
    with pytest.raises(DTypeError):
        tl.from_numpy(np.array(["a"]))
    with pytest.raises(DTypeError):
        tl.from_numpy([1, 2])


def test_as_tensor_avoids_copies():
    a = np.ones(3)
    t = tl.as_tensor(a)
    a[0] = 5.0
    assert t.dtype == tl.float64 and t.tolist() == [5.0, 1.0, 1.0]
    c = tl.as_tensor(a, dtype=tl.float32)        # a cast needs a copy
    a[1] = 7.0
    assert c.tolist() == [5.0, 1.0, 1.0]
    x = tl.ones(2)
    assert tl.as_tensor(x) is x and tl.as_tensor(x, dtype=tl.float32, device="cpu") is x
    assert tl.as_tensor(x, dtype=tl.float64).dtype == tl.float64
    same(tl.as_tensor([1, 2]), torch.as_tensor([1, 2]))
    w = tl.ones(2, requires_grad=True)
    tl.as_tensor(w, dtype=tl.float64).sum().backward()
    assert w.grad.tolist() == [1.0, 1.0]


def test_asarray():
    a = np.arange(4.0)
    t = tl.asarray(a)
    a[0] = 3.0
    assert t.tolist()[0] == 3.0
    assert tl.asarray(a, copy=True).numpy() is not a
    with pytest.raises(DTypeError, match="copy=False"):
        tl.asarray(a, dtype=tl.float32, copy=False)
    same(tl.asarray([1.5]), torch.asarray([1.5]))
    assert tl.asarray([1.0], requires_grad=True).requires_grad


# ---- filled tensors and their size forms ----------------------------------------------------

SIZE_FORMS = ["2, 3", "(2, 3)", "[2, 3]", "T.Size([2, 3])", "size=(2, 3)", "()", "[]", "0", "2, 0, 3",
              "np.int64(2)", "T.tensor(3)"]


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty"])
@pytest.mark.parametrize("form", SIZE_FORMS)
def test_filled_size_forms(fn, form):
    if form == "T.Size([2, 3])" and not hasattr(tl, "Size"):
        pytest.skip("torchlean.Size not defined")
    ours, theirs = both(f"T.{fn}({form})")
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype == tl.float32
    if fn != "empty":
        same(ours, theirs)
    else:
        assert not ours.numpy().any()           # empty gives zeros here


@pytest.mark.parametrize("expr", [
    "T.zeros(2, dtype=T.int32)", "T.ones(2, 2, dtype=T.bool)", "T.ones((3,), dtype=T.float64)",
    "T.full((2,), 3)", "T.full((2,), True)", "T.full((2,), 2.5)", "T.full([], 3)", "T.full((2,), T.tensor(3))",
    "T.full((2, 2), 3, dtype=T.float32)", "T.full((2,), 3.5, dtype=T.int64)", "T.full((2,), 3, dtype=T.bool)",
    "T.full((2,), np.float32(1.5))", "T.full((0, 2), 1.0)", "T.full((2,), float('inf'))",
    "T.full(size=(2, 1), fill_value=-1)",
])
def test_filled_values_and_dtypes(expr):
    same(*both(expr))


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "rand", "randn"])
def test_negative_sizes_raise_shape_error_naming_the_op(fn):
    with pytest.raises(ShapeError, match=fn):
        getattr(tl, fn)(2, -3)
    with pytest.raises(DTypeError, match=fn):
        getattr(tl, fn)(2.5)
    with pytest.raises(DTypeError, match=fn):
        getattr(tl, fn)()


def test_other_negative_sizes():
    assert tl.empty_strided((2, 3), (1, 2)).shape == (2, 3)
    for call, op in [(lambda: tl.tril_indices(-1, 3), "tril_indices"), (lambda: tl.empty_strided((2,), (1, 1)), "stride"),(lambda: tl.full((-1,), 2), "full"), (lambda: tl.randint(3, (2, -1)), "randint"),
                     (lambda: tl.randperm(-1), "randperm"), (lambda: tl.eye(-1), "eye"),
                     (lambda: tl.normal(0.0, 1.0, (-2,)), "normal"), (lambda: tl.ones(2).new_zeros(-1), "new_zeros")]:
        with pytest.raises(ShapeError, match=op):
            call()


@pytest.mark.parametrize("fn, extra", [("zeros_like", ""), ("ones_like", ""), ("full_like", ", 2.7"),
                                       ("full_like", ", True"), ("empty_like", "")])
@pytest.mark.parametrize("src", ["T.ones(2, 3)", "T.ones(2, 3).t()", "T.ones(3, 4)[1:, ::2]",
                                 "T.zeros((), dtype=T.int64)", "T.ones(0, 2, dtype=T.int32)",
                                 "T.ones(2, dtype=T.float64)"])
@pytest.mark.parametrize("dtype", ["", ", dtype=T.float64", ", dtype=T.int64"])
def test_like_forms(fn, extra, src, dtype):
    ours, theirs = both(f"T.{fn}({src}{extra}{dtype})")
    if fn == "empty_like":
        assert tuple(ours.shape) == tuple(theirs.shape) and name(ours.dtype) == name(theirs.dtype)
    else:
        same(ours, theirs)


def test_like_requires_grad_and_input_type():
    x = tl.zeros_like(tl.ones(2), requires_grad=True)
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    with pytest.raises(DTypeError, match="zeros_like"):
        tl.zeros_like([1.0, 2.0])


@pytest.mark.parametrize("expr", [
    "T.zeros(2).new_zeros(3)", "T.zeros(2, dtype=T.int32).new_ones((2, 2))", "T.zeros(2).new_full((2,), 3)",
    "T.zeros(2, dtype=T.int32).new_full((2,), 3.7)", "T.zeros(2).new_tensor([1, 2])",
    "T.zeros(2, dtype=T.float64).new_tensor([1, 2])", "T.zeros(2).new_tensor(np.array([1.0, 2.0]))",
    "T.zeros(2, dtype=T.int64).new_tensor([1.5, -2.5])", "T.zeros(2).new_zeros(2, 3, dtype=T.int64)",
    "T.zeros(3).new_zeros(())", "T.zeros(2, 3).t().new_ones(T.zeros(4, 1).shape)",
    "T.zeros(2, dtype=T.float64).new_tensor([True])", "T.zeros(1, dtype=T.bool).new_full([2], 5)",
])
def test_new_methods_inherit_dtype_and_device(expr):
    same(*both(expr))


def test_new_empty_and_new_tensor_copy():
    x = tl.zeros(2, dtype=tl.float64)
    e = x.new_empty(2, 3)
    assert e.shape == (2, 3) and e.dtype == tl.float64 and e.device == "cpu"
    src = tl.tensor([1.0, 2.0], requires_grad=True)
    c = x.new_tensor(src)
    assert c.is_leaf and not c.requires_grad and c.dtype == tl.float64
    assert x.new_ones(2, requires_grad=True).requires_grad


# ---- eye, arange, linspace, logspace ---------------------------------------------------------

@pytest.mark.parametrize("expr", [
    "T.eye(3)", "T.eye(2, 3)", "T.eye(4, 2)", "T.eye(0)", "T.eye(2, 0)", "T.eye(2, dtype=T.bool)",
    "T.eye(3, dtype=T.int64)", "T.eye(3, 3, dtype=T.float64)",
    "T.tril_indices(3, 4, 1)", "T.triu_indices(4, 3, -1)", "T.tril_indices(0, 3)", "T.triu_indices(3, 3, dtype=T.int32)",
    "T.tril_indices(4, 4, -5)", "T.triu_indices(2, 5, 3)", "T.scalar_tensor(3)", "T.scalar_tensor(True)",
    "T.scalar_tensor(2.5, dtype=T.float64)",
])
def test_eye(expr):
    same(*both(expr))


ARANGE_CASES = [
    "T.arange(5)", "T.arange(5.0)", "T.arange(0)", "T.arange(1, 2.5, 0.5)", "T.arange(0, 1, 0.1)",
    "T.arange(5, 0, -1)", "T.arange(0, 10, 3)", "T.arange(-1.5, 2)", "T.arange(0.5, 10, 3, dtype=T.int64)",
    "T.arange(1, 4, 0.3)", "T.arange(0.1, 0.9, 0.2)", "T.arange(-1, 1, 0.1)", "T.arange(5, dtype=T.float64)",
    "T.arange(0, 5, 2.0, dtype=T.int32)", "T.arange(10**10, 10**10 + 3)", "T.arange(T.tensor(3))",
    "T.arange(T.tensor(3.0))", "T.arange(start=2, end=7, step=2)", "T.arange(end=4)", "T.arange(3, 3)",
    "T.arange(0, -3.5, -0.5)", "T.arange(0, 1, 1 / 3, dtype=T.float64)", "T.arange(True)",
    "T.arange(0, 100, 0.7)",
]


@pytest.mark.parametrize("expr", ARANGE_CASES)
def test_arange_like_torch(expr):
    same(*both(expr))


@settings(max_examples=60, deadline=None)
@given(start=st.floats(-50, 50), length=st.floats(0, 100), step=st.floats(0.01, 7), neg=st.booleans())
def test_arange_float_length_rule(start, length, step, neg):
    end = start + length
    if neg:
        start, end, step = end, start, -step
    ours, theirs = tl.arange(start, end, step), torch.arange(start, end, step)
    assert ours.shape == tuple(theirs.shape) == (math.ceil((end - start) / step),)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(start=st.integers(-100, 100), end=st.integers(-100, 100), step=st.integers(-9, 9).filter(bool))
def test_arange_int(start, end, step):
    if (step > 0 and end < start) or (step < 0 and end > start):
        with pytest.raises(DomainError, match="arange"):
            tl.arange(start, end, step)
        return
    same(tl.arange(start, end, step), torch.arange(start, end, step))


@pytest.mark.parametrize("args, match", [((0, 5, 0), "nonzero"), ((5, 0), "inconsistent"), ((0, 5, -1), "inconsistent"),
                                         ((0, float("inf")), "unsupported"), ((0, float("nan")), "unsupported")])
def test_arange_errors(args, match):
    with pytest.raises(DomainError, match=match):
        tl.arange(*args)
    with pytest.raises(DomainError, match="nonzero"):
        tl.arange(0, 1, 0.3, dtype=tl.int64)


LINSPACE_CASES = [
    "T.linspace(0, 1, 5)", "T.linspace(-1.3, 2.7, 7)", "T.linspace(-1.3, 2.7, 7, dtype=T.float64)",
    "T.linspace(0, 10, 4, dtype=T.int64)", "T.linspace(0.5, 10.7, 4, dtype=T.int64)", "T.linspace(0, 1, 1)",
    "T.linspace(0, 1, 0)", "T.linspace(2, 2, 3)", "T.linspace(3, -3, 100)", "T.linspace(0, 1, 101)",
    "T.linspace(T.tensor(1.0), T.tensor(2.0), 3)", "T.linspace(start=-5, end=5, steps=11)",
    "T.logspace(0, 2, 3)", "T.logspace(0, 2, 3, base=2)", "T.logspace(0, 2, 3, dtype=T.int64)",
    "T.logspace(-2, 2, 9, dtype=T.float64)", "T.logspace(1, -1, 5, base=3.0)", "T.logspace(0, 1, 0)",
]


@pytest.mark.parametrize("expr", LINSPACE_CASES)
def test_linspace_logspace_like_torch(expr):
    same(*both(expr), rtol=2e-6, atol=1e-6)


def test_linspace_negative_steps():
    with pytest.raises(ShapeError, match="linspace"):
        tl.linspace(0, 1, -1)
    with pytest.raises(ShapeError, match="logspace"):
        tl.logspace(0, 1, -1)


def test_ranges_can_require_grad():
    x = tl.linspace(0, 1, 3, requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 1.0, 2.0])


# ---- seeds and generators ------------------------------------------------------------------

def test_manual_seed_reproduces_and_returns_default_generator():
    g = tl.manual_seed(123)
    assert g is tl.default_generator and tl.initial_seed() == 123
    a = tl.rand(5)
    b = tl.randn(3, 2)
    tl.manual_seed(123)
    assert tl.rand(5).tolist() == a.tolist() and tl.randn(3, 2).tolist() == b.tolist()
    tl.manual_seed(124)
    assert tl.rand(5).tolist() != a.tolist()


def test_manual_seed_range_like_torch():
    assert tl.manual_seed(-1).initial_seed() == torch.manual_seed(-1).initial_seed() == 2 ** 64 - 1
    with pytest.raises(DomainError, match="seed"):
        tl.manual_seed(2 ** 64)
    tl.manual_seed(0)


def test_rng_state_roundtrip():
    tl.manual_seed(7)
    tl.rand(3)
    state = tl.get_rng_state()
    assert state.dtype == tl.uint8 and state.shape == (16,)
    a = tl.randn(4)
    tl.rand(10)
    tl.set_rng_state(state)
    assert tl.randn(4).tolist() == a.tolist()
    from torchlean.tensor import get_rng_state as core_state
    tl.set_rng_state(core_state())              # the core's (seed, counter) form
    with pytest.raises(DTypeError, match="set_state"):
        tl.set_rng_state(tl.zeros(3, dtype=tl.uint8))


def test_generator_is_independent_of_the_global_stream():
    tl.manual_seed(0)
    ref = tl.rand(4).tolist()
    tl.manual_seed(0)
    g = tl.Generator().manual_seed(0)
    tl.randn(100, generator=g)                 # draws from g only
    assert tl.rand(4).tolist() == ref
    g1, g2 = tl.Generator().manual_seed(5), tl.Generator().manual_seed(5)
    assert tl.rand(6, generator=g1).tolist() == tl.rand(6, generator=g2).tolist()
    assert tl.rand(6, generator=g1).tolist() != tl.rand(6, generator=tl.Generator().manual_seed(6)).tolist()


def test_generator_api():
    g = tl.Generator(device="cpu")
    assert g.initial_seed() == torch.Generator().initial_seed() and g.device == "cpu"
    assert g.manual_seed(3) is g and g.initial_seed() == 3
    first = tl.randint(0, 1000, (8,), generator=g).tolist()
    s = g.get_state()
    second = tl.randint(0, 1000, (8,), generator=g).tolist()
    assert g.set_state(s) is g and tl.randint(0, 1000, (8,), generator=g).tolist() == second
    g.manual_seed(3)
    assert tl.randint(0, 1000, (8,), generator=g).tolist() == first
    g.manual_seed(3)
    assert [g.next_key(), g.next_key()] == [(3, 0), (3, 1)]
    s1 = g.seed()
    assert g.initial_seed() == s1 and 0 <= s1 < 2 ** 64
    s2 = tl.seed()
    assert tl.initial_seed() == s2
    with pytest.raises(DTypeError, match="generator"):
        tl.rand(2, generator=3)
    tl.manual_seed(0)


def test_stream_is_the_counter_based_spec():
    from torchlean.spec.rng import uniform
    g = tl.Generator().manual_seed(11)
    tl.rand(2, generator=g)
    np.testing.assert_array_equal(tl.rand(2, 3, generator=g).numpy().ravel(), uniform(6, 11, 1, np.float32))
    np.testing.assert_array_equal(tl.rand(4, dtype=tl.float64, generator=g).numpy(), uniform(4, 11, 2, np.float64))


@pytest.mark.parametrize("fn", ["rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial",
                                "poisson", "rand_like", "randn_like", "randint_like"])
def test_every_random_function_takes_a_generator(fn):
    calls = {"rand": lambda g: tl.rand(50, generator=g), "randn": lambda g: tl.randn(50, generator=g),
             "randint": lambda g: tl.randint(0, 10**6, (50,), generator=g),
             "randperm": lambda g: tl.randperm(50, generator=g),
             "normal": lambda g: tl.normal(0.0, 1.0, (50,), generator=g),
             "bernoulli": lambda g: tl.bernoulli(tl.full((50,), 0.5), generator=g),
             "multinomial": lambda g: tl.multinomial(tl.ones(50), 10, generator=g),
             "poisson": lambda g: tl.poisson(tl.full((50,), 3.0), generator=g),
             "rand_like": lambda g: tl.rand_like(tl.ones(50), generator=g),
             "randn_like": lambda g: tl.randn_like(tl.ones(50), generator=g),
             "randint_like": lambda g: tl.randint_like(tl.ones(50), 10**6, generator=g)}
    f = calls[fn]
    tl.manual_seed(0)
    before = tl.get_rng_state().tolist()
    a = f(tl.Generator().manual_seed(9)).tolist()
    assert tl.get_rng_state().tolist() == before
    assert f(tl.Generator().manual_seed(9)).tolist() == a
    assert f(tl.Generator().manual_seed(10)).tolist() != a
    tl.manual_seed(4)
    b = f(None).tolist()
    tl.manual_seed(4)
    assert f(None).tolist() == b


# ---- rand, randn and friends: shapes, dtypes, statistics -----------------------------------

N = 200_000


@pytest.mark.parametrize("dtype", [None, tl.float64, tl.float16])
def test_rand_support_and_moments(dtype):
    x = tl.rand(N, dtype=dtype, generator=tl.Generator().manual_seed(1))
    assert x.dtype == (dtype or tl.float32) and x.shape == (N,)
    a = x.numpy().astype(np.float64)
    assert a.min() >= 0.0 and a.max() < 1.0
    assert abs(a.mean() - 0.5) < 0.005 and abs(a.var() - 1 / 12) < 0.002


@pytest.mark.parametrize("dtype", [None, tl.float64])
def test_randn_moments(dtype):
    a = tl.randn(400, 500, dtype=dtype, generator=tl.Generator().manual_seed(2)).numpy()
    assert a.dtype == (np.float64 if dtype else np.float32) and a.shape == (400, 500)
    assert abs(a.mean()) < 0.01 and abs(a.std() - 1) < 0.01
    assert abs((np.abs(a) < 1).mean() - 0.6827) < 0.005


def test_random_shapes_dtypes_like_torch():
    for expr in ["T.rand(2, 3)", "T.rand(())", "T.rand((0, 3))", "T.randn([2])", "T.randn(2, 3, dtype=T.float64)",
                 "T.rand_like(T.ones(2, 3).t())", "T.randn_like(T.ones(2, dtype=T.float64))",
                 "T.rand_like(T.ones(2), dtype=T.float64)", "T.randint(5, (3,))", "T.randint(0, 5, (3,), dtype=T.float32)",
                 "T.randint(-3, 0, (2, 2))", "T.randint(5, size=(2,))", "T.randint(low=1, high=5, size=(2,))",
                 "T.randint(2, (3,), dtype=T.bool)", "T.randint_like(T.zeros(2), 10)", "T.randint_like(T.zeros(2), 3, 10)",
                 "T.randint_like(T.zeros(2, 2, dtype=T.int32), 3, 10)", "T.randperm(5)", "T.randperm(0)",
                 "T.randperm(5, dtype=T.float32)", "T.normal(T.zeros(2), T.ones(3, 1))", "T.normal(0.0, 1.0, (2,))",
                 "T.normal(T.zeros(2))", "T.normal(0.0, T.ones(2))", "T.normal(0, 1, (2,))",
                 "T.normal(T.zeros(2, dtype=T.float64), T.ones(2, dtype=T.float64))",
                 "T.normal(0., 1., size=(2,), dtype=T.float64)", "T.normal(T.zeros(()), 2.0)",
                 "T.bernoulli(T.full((3,), 0.5))", "T.bernoulli(T.zeros(3), 0.5)",
                 "T.bernoulli(T.zeros(3, dtype=T.int64), 0.5)", "T.bernoulli(T.zeros(2, dtype=T.float64))",
                 "T.multinomial(T.ones(2, 3), 2)", "T.multinomial(T.tensor([1., 2., 0.]), 5, True)",
                 "T.poisson(T.ones(2, 2))"]:
        ours, theirs = both(expr)
        assert tuple(ours.shape) == tuple(theirs.shape), expr
        assert name(ours.dtype) == name(theirs.dtype), expr


def test_random_results_are_leaves_that_can_require_grad():
    x = tl.rand(3, requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    m = tl.zeros(3, requires_grad=True)
    y = tl.normal(m, 1.0)
    assert y.is_leaf and not y.requires_grad


@pytest.mark.parametrize("call", [lambda: tl.rand(2, dtype=tl.int64), lambda: tl.randn(2, dtype=tl.int32),
                                  lambda: tl.rand_like(tl.ones(2, dtype=tl.int32)),
                                  lambda: tl.normal(tl.zeros(2, dtype=tl.int64), 1.0),
                                  lambda: tl.multinomial(tl.tensor([1, 1]), 1), lambda: tl.poisson(tl.tensor([1, 2])),
                                  lambda: tl.randint(0, 2.5, (2,)), lambda: tl.randint(5)])
def test_random_dtype_errors(call):
    with pytest.raises(DTypeError):
        call()


# ---- randint and randperm -------------------------------------------------------------------

def test_randint_support_and_uniformity():
    a = tl.randint(-3, 7, (N,), generator=tl.Generator().manual_seed(3)).numpy()
    assert a.dtype == np.int64 and a.min() == -3 and a.max() == 6
    counts = np.bincount(a + 3, minlength=10)
    assert np.all(np.abs(counts / N - 0.1) < 0.004)


def test_randint_huge_ranges():
    a = tl.randint(-2 ** 63, 2 ** 63 - 1, (4000,), generator=tl.Generator().manual_seed(4)).numpy()
    assert (a < 0).mean() == pytest.approx(0.5, abs=0.05) and len(set(a.tolist())) == 4000
    b = tl.randint(2 ** 60, 2 ** 60 + 3, (1000,)).numpy()
    assert set(b.tolist()) == {2 ** 60, 2 ** 60 + 1, 2 ** 60 + 2}


@pytest.mark.parametrize("args", [(5, 2, (3,)), (2, 2, (3,)), (0, 300, (2,), tl.uint8), (-1, 1, (2,), tl.uint8),
                                  (0, 5, (2,), tl.bool_)])
def test_randint_domain_errors(args):
    low, high, size, *dt = args
    with pytest.raises(DomainError, match="randint"):
        tl.randint(low, high, size, dtype=dt[0] if dt else None)


def test_randperm_is_a_permutation():
    g = tl.Generator().manual_seed(5)
    p = tl.randperm(1000, generator=g).numpy()
    assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(1000))
    first = np.array([tl.randperm(4, generator=g).tolist()[0] for _ in range(4000)])
    assert np.all(np.abs(np.bincount(first, minlength=4) / 4000 - 0.25) < 0.03)


# ---- normal, bernoulli, multinomial, poisson ------------------------------------------------

def test_normal_overloads_moments():
    g = tl.Generator().manual_seed(6)
    mean = tl.tensor([[-2.0], [3.0]])
    std = tl.tensor([0.5, 2.0, 1.0])
    x = tl.normal(mean.expand(2, 3).contiguous().reshape(2, 3, 1) * tl.ones(1, 1, 50000),
                  std.reshape(1, 3, 1), generator=g).numpy()
    assert x.shape == (2, 3, 50000)
    np.testing.assert_allclose(x.mean(-1), [[-2.0] * 3, [3.0] * 3], atol=0.03)
    np.testing.assert_allclose(x.std(-1), [[0.5, 2.0, 1.0]] * 2, rtol=0.02)
    y = tl.normal(5.0, 3.0, (N,), generator=g).numpy()
    assert abs(y.mean() - 5) < 0.03 and abs(y.std() - 3) < 0.03
    z = tl.normal(tl.full((N,), -1.0), generator=g).numpy()
    assert abs(z.mean() + 1) < 0.01 and abs(z.std() - 1) < 0.01
    w = tl.normal(2.0, tl.full((N,), 0.5, dtype=tl.float64), generator=g).numpy()
    assert w.dtype == np.float64 and abs(w.mean() - 2) < 0.01 and abs(w.std() - 0.5) < 0.01


@pytest.mark.parametrize("call", [lambda: tl.normal(0, -1.0, (2,)), lambda: tl.normal(tl.zeros(2), -1.0),
                                  lambda: tl.normal(tl.zeros(2), tl.tensor([1.0, -1.0])),
                                  lambda: tl.normal(0.0, float("nan"), (2,))])
def test_normal_rejects_negative_std(call):
    with pytest.raises(DomainError, match="std"):
        call()


def test_bernoulli():
    g = tl.Generator().manual_seed(7)
    p = tl.tensor([0.0, 0.1, 0.5, 0.9, 1.0]).reshape(5, 1) * tl.ones(1, 40000)
    x = tl.bernoulli(p, generator=g).numpy()
    assert x.dtype == np.float32 and set(np.unique(x)) <= {0.0, 1.0}
    np.testing.assert_allclose(x.mean(1), [0.0, 0.1, 0.5, 0.9, 1.0], atol=0.01)
    assert x[0].max() == 0.0 and x[4].min() == 1.0
    y = tl.bernoulli(tl.zeros(N, dtype=tl.int64), 0.25, generator=g).numpy()
    assert y.dtype == np.int64 and abs(y.mean() - 0.25) < 0.005
    t = tl.bernoulli(p.t(), generator=g)                  # non-contiguous probabilities
    assert t.shape == (40000, 5) and t.numpy()[:, 4].min() == 1.0


@pytest.mark.parametrize("call", [lambda: tl.bernoulli(tl.full((3,), 1.5)), lambda: tl.bernoulli(tl.tensor([0.5, -0.1])),
                                  lambda: tl.bernoulli(tl.tensor([0.5, float("nan")])),
                                  lambda: tl.bernoulli(tl.zeros(3), p=1.5), lambda: tl.bernoulli(tl.zeros(3), -0.5)])
def test_bernoulli_rejects_probabilities_outside_unit_interval(call):
    with pytest.raises(DomainError, match="bernoulli"):
        call()


def test_multinomial_with_replacement_frequencies():
    w = tl.tensor([[1.0, 2.0, 0.0, 5.0], [0.0, 0.0, 3.0, 1.0]])
    s = tl.multinomial(w, 50000, replacement=True, generator=tl.Generator().manual_seed(8)).numpy()
    assert s.shape == (2, 50000) and s.dtype == np.int64
    f0 = np.bincount(s[0], minlength=4) / 50000
    f1 = np.bincount(s[1], minlength=4) / 50000
    np.testing.assert_allclose(f0, [1 / 8, 2 / 8, 0, 5 / 8], atol=0.01)
    np.testing.assert_allclose(f1, [0, 0, 0.75, 0.25], atol=0.01)
    assert f0[2] == 0 and f1[0] == f1[1] == 0


def test_multinomial_without_replacement():
    g = tl.Generator().manual_seed(9)
    w = tl.tensor([1.0, 2.0, 0.0, 5.0])
    rows = w.reshape(1, 4) * tl.ones(20000, 1)
    s = tl.multinomial(rows, 3, generator=g).numpy()
    assert s.shape == (20000, 3)
    assert all(len(set(r)) == 3 for r in s[:500].tolist()) and not (s == 2).any()
    np.testing.assert_allclose(np.bincount(s[:, 0], minlength=4) / 20000, [1 / 8, 2 / 8, 0, 5 / 8], atol=0.015)
    # second draw given the first was 3 (weight 5): 1 w.p. 2/3
    sec = s[s[:, 0] == 3, 1]
    assert abs((sec == 1).mean() - 2 / 3) < 0.02
    full = tl.multinomial(tl.tensor([1.0, 1.0, 1.0]), 3, generator=g).numpy()
    assert sorted(full.tolist()) == [0, 1, 2]


@pytest.mark.parametrize("args, err, match", [
    ((tl.tensor([1.0, -2.0, 0.0]), 1), DomainError, "element < 0"),
    ((tl.tensor([1.0, float("nan")]), 1), DomainError, "nan"),
    ((tl.tensor([1.0, float("inf")]), 1), DomainError, "inf"),
    ((tl.tensor([0.0, 0.0]), 1), DomainError, "sum of probabilities"),
    ((tl.tensor([1.0, 1.0]), 0), DomainError, "n_sample <= 0"),
    ((tl.tensor([1.0, 2.0, 0.0]), 3), DomainError, "not enough"),
    ((tl.tensor([1.0, 2.0]), 3), DomainError, "without replacement"),
    ((tl.ones(2, 3, 4), 2), ShapeError, "1 or 2 dim"),
])
def test_multinomial_errors(args, err, match):
    with pytest.raises(err, match=match):
        tl.multinomial(*args)


def test_poisson():
    g = tl.Generator().manual_seed(10)
    rates = tl.tensor([0.0, 0.5, 4.0, 300.0]).reshape(4, 1) * tl.ones(1, 10000)
    x = tl.poisson(rates, generator=g).numpy()
    assert x.dtype == np.float32 and np.all(x == np.round(x)) and x[0].max() == 0
    np.testing.assert_allclose(x.mean(1), [0.0, 0.5, 4.0, 300.0], rtol=0.02, atol=0.01)
    np.testing.assert_allclose(x.var(1)[1:], [0.5, 4.0, 300.0], rtol=0.06)
    with pytest.raises(DomainError, match="poisson"):
        tl.poisson(tl.tensor([-1.0]))


# ---- the cores of the in-place random methods -------------------------------------------------

def test_inplace_cores():
    g = tl.Generator().manual_seed(12)
    x = tl.zeros(N)
    u = creation.uniform_like(x, -2.0, 3.0, generator=g).numpy()
    assert u.dtype == np.float32 and u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.02
    n = creation.normal_like(x, 1.0, 2.0, generator=g).numpy()
    assert abs(n.mean() - 1) < 0.02 and abs(n.std() - 2) < 0.02
    e = creation.exponential_like(x, 4.0, generator=g).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.005 and abs(e.std() - 0.25) < 0.005
    c = creation.cauchy_like(x, 1.0, 2.0, generator=g).numpy()
    assert abs(np.median(c) - 1) < 0.03 and abs(np.mean(np.abs(c - 1) < 2) - 0.5) < 0.01
    ln = creation.log_normal_like(x, 0.5, 0.25, generator=g).numpy()
    assert ln.min() > 0 and abs(np.log(ln).mean() - 0.5) < 0.005 and abs(np.log(ln).std() - 0.25) < 0.005
    geo = creation.geometric_like(tl.zeros(N, dtype=tl.int64), 0.25, generator=g).numpy()
    assert geo.dtype == np.int64 and geo.min() >= 1 and abs(geo.mean() - 4) < 0.05
    b = creation.bernoulli_like(tl.zeros(N, dtype=tl.int32), 0.3, generator=g).numpy()
    assert b.dtype == np.int32 and abs(b.mean() - 0.3) < 0.005
    bt = creation.bernoulli_like(tl.zeros(2, 3), tl.tensor([1.0, 0.0, 1.0]), generator=g).numpy()
    np.testing.assert_array_equal(bt, [[1, 0, 1], [1, 0, 1]])


@pytest.mark.parametrize("dtype, lo, hi", [(tl.float32, 0, 2 ** 24), (tl.float64, 0, 2 ** 53), (tl.int64, 0, 2 ** 63 - 1),
                                           (tl.int32, 0, 2 ** 31 - 1), (tl.uint8, 0, 255), (tl.bool_, 0, 1)])
def test_random_like_default_ranges(dtype, lo, hi):
    r = creation.random_like(tl.zeros(20000, dtype=dtype), generator=tl.Generator().manual_seed(13)).numpy()
    assert r.dtype == np.dtype(dtype) and r.min() >= lo and r.max() <= hi
    if hi <= 255:
        assert r.min() == lo and r.max() == hi
    else:
        assert r.astype(np.float64).mean() == pytest.approx(hi / 2, rel=0.03)
    s = creation.random_like(tl.zeros(20000, dtype=dtype), 0 if dtype == tl.bool_ else 2,
                             None if dtype == tl.bool_ else 5).numpy().astype(np.int64)
    if dtype != tl.bool_:
        assert s.min() == 2 and s.max() == 4


@pytest.mark.parametrize("call, match", [
    (lambda: creation.uniform_like(tl.zeros(2), 1, 0), "uniform_"),
    (lambda: creation.uniform_like(tl.zeros(2, dtype=tl.int64)), "uniform_"),
    (lambda: creation.normal_like(tl.zeros(2), 0, -1), "normal_"),
    (lambda: creation.exponential_like(tl.zeros(2), 0), "exponential_"),
    (lambda: creation.geometric_like(tl.zeros(2), 1.0), "geometric_"),
    (lambda: creation.random_like(tl.zeros(2), 5, 2), "random_"),
    (lambda: creation.random_like(tl.zeros(2, dtype=tl.int32), 0, 2 ** 40), "random_"),
    (lambda: creation.bernoulli_like(tl.zeros(2), 1.5), "bernoulli_"),
])
def test_inplace_core_errors(call, match):
    with pytest.raises((DomainError, DTypeError), match=match):
        call()


# ---- CUDA: the same numbers as the CPU ------------------------------------------------------

@pytest.mark.cuda
def test_cuda_creation_and_streams_match_the_cpu():
    for expr in ["T.zeros(2, 3, device='cuda')", "T.full((2,), 3, device='cuda')", "T.eye(3, device='cuda')",
                 "T.arange(0, 1, 0.1, device='cuda')", "T.linspace(0, 1, 5, device='cuda')",
                 "T.tensor([[1, 2], [3, 4]], device='cuda')", "T.ones(2, device='cuda').new_full((3,), 2)",
                 "T.zeros_like(T.ones(2, 3, device='cuda').t())"]:
        ours = eval(expr, {"T": tl})
        ref = eval(expr.replace("'cuda'", "'cpu'"), {"T": tl})
        assert ours.device == "cuda" and ours.dtype == ref.dtype and ours.tolist() == ref.tolist(), expr
    draws = {
        "rand": lambda d, g: tl.rand(1000, device=d, generator=g),
        "rand64": lambda d, g: tl.rand(1000, dtype=tl.float64, device=d, generator=g),
        "rand16": lambda d, g: tl.rand(1000, dtype=tl.float16, device=d, generator=g),
        "randn": lambda d, g: tl.randn(33, 31, device=d, generator=g),
        "randint": lambda d, g: tl.randint(-5, 9, (1000,), device=d, generator=g),
        "randint_big": lambda d, g: tl.randint(-2 ** 63, 2 ** 63 - 1, (100,), device=d, generator=g),
        "randperm": lambda d, g: tl.randperm(100, device=d, generator=g),
        "normal": lambda d, g: tl.normal(tl.zeros(50, device=d), tl.ones(3, 1, device=d), generator=g),
        "normal_f": lambda d, g: tl.normal(2.0, 3.0, (100,), device=d, generator=g),
        "bernoulli": lambda d, g: tl.bernoulli(tl.full((500,), 0.3, device=d), generator=g),
        "multinomial": lambda d, g: tl.multinomial(tl.ones(4, 9, device=d), 5, generator=g),
        "poisson": lambda d, g: tl.poisson(tl.full((100,), 3.0, device=d), generator=g),
        "uniform_": lambda d, g: creation.uniform_like(tl.zeros(100, device=d), -1, 2, generator=g),
        "exponential_": lambda d, g: creation.exponential_like(tl.zeros(100, device=d), 2.0, generator=g),
        "cauchy_": lambda d, g: creation.cauchy_like(tl.zeros(100, device=d), generator=g),
        "geometric_": lambda d, g: creation.geometric_like(tl.zeros(100, device=d), 0.3, generator=g),
        "random_": lambda d, g: creation.random_like(tl.zeros(100, dtype=tl.int32, device=d), generator=g),
        "bernoulli_": lambda d, g: creation.bernoulli_like(tl.zeros(100, device=d), 0.5, generator=g),
    }
    for key, f in draws.items():
        c = f("cuda", tl.Generator().manual_seed(21))
        h = f("cpu", tl.Generator().manual_seed(21))
        assert c.device == "cuda" and c.dtype == h.dtype and c.shape == h.shape, key
        np.testing.assert_allclose(c.numpy().astype(np.float64), h.numpy().astype(np.float64),
                                   rtol=1e-6, atol=1e-6, err_msg=key)
