"""Indexing against torch: ``__getitem__`` with every index form, the out-of-place writes
(``setitem_value``, ``index_put``, ``put``), the gather / scatter / mask functions, ``nonzero`` and
``where``: values, dtypes, shapes, gradients and the errors torch raises."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torchlean as tl
from torchlean.errors import DTypeError, IndexRangeError, ShapeError, TorchLeanError
from torchlean.ops.index import setitem_value

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # only the random-shape tests need it
    class _NoStrategies:
        def __getattr__(self, name):
            return lambda *a, **k: None

    def settings(**kw):
        return lambda f: f

    def given(*a, **k):
        return pytest.mark.skip(reason="needs hypothesis")

    st = _NoStrategies()

RNG = np.random.default_rng(0)


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def _same(a, b, tol=1e-6):
    """torch result ``a`` and torchlean result ``b``: shape, dtype and values."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y, tol)
        return
    assert tuple(a.shape) == tuple(b.shape), (tuple(a.shape), tuple(b.shape))
    assert str(a.dtype).replace("torch.", "") == b.dtype.name, (a.dtype, b.dtype)
    np.testing.assert_allclose(_np(b), _np(a), rtol=tol, atol=tol)


def both(f, *arrays, grad=True, tol=1e-6):
    """``f(m, *tensors)`` with m = torch and m = torchlean on the same inputs: the results agree, and
    so do the gradients of every float input after a backward with a random cotangent."""
    def make(m, a):
        a = np.asarray(a)
        return m.tensor(a, requires_grad=bool(grad and a.dtype.kind == "f"))
    tt = [make(torch, a) for a in arrays]
    lt = [make(tl, a) for a in arrays]
    a, b = f(torch, *tt), f(tl, *lt)
    _same(a, b, tol)
    if isinstance(a, torch.Tensor) and a.requires_grad:
        g = RNG.standard_normal(tuple(a.shape)).astype(np.asarray(arrays[0]).dtype)
        a.backward(torch.tensor(g))
        b.backward(tl.tensor(g))
        for x, y in zip(tt, lt):
            if x.requires_grad:
                want = np.zeros(x.shape, np.float32) if x.grad is None else x.grad.numpy()
                got = np.zeros(y.shape) if y.grad is None else y.grad.numpy()
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    return a, b


X = RNG.standard_normal((3, 4, 5)).astype(np.float32)


def _t(m, a, dtype=None):
    return m.tensor(np.asarray(a), dtype=None if dtype is None else getattr(m, dtype))


# Each index form builds its index with the module it is given (torch or torchlean).
INDEX_FORMS = {
    "int": lambda m: 1,
    "negative int": lambda m: -1,
    "ints": lambda m: (1, -2),
    "int slice int": lambda m: (-1, slice(None), 0),
    "slice": lambda m: slice(1, None),
    "slice step": lambda m: slice(None, None, 2),
    "slice beyond": lambda m: (slice(-7, 9), slice(1, 100, 3)),
    "empty slice": lambda m: slice(2, 1),
    "ellipsis int": lambda m: (Ellipsis, 1),
    "none": lambda m: (None, 0),
    "none middle": lambda m: (0, None, slice(1, 3)),
    "ellipsis none": lambda m: (Ellipsis, None),
    "list": lambda m: [0, 2],
    "nested list": lambda m: [[0, 1], [2, 0]],
    "numpy array": lambda m: np.array([2, 0, 2]),
    "tensor negative": lambda m: _t(m, [2, -1]),
    "int32 tensor": lambda m: _t(m, [1, 0], "int32"),
    "0-d tensor": lambda m: _t(m, 1),
    "slice then list": lambda m: (slice(None), [0, 3]),
    "two adjacent": lambda m: (slice(None), [0, 3], [1, 4]),
    "three": lambda m: ([0, 2], [1, 3], [4, 0]),
    "separated by slice": lambda m: ([0, 1], slice(None), [1, 2]),
    "separated by step slice": lambda m: ([0, 1], slice(1, 3), [1, 2]),
    "int and list": lambda m: (0, slice(None), [1, 2]),
    "list then int": lambda m: ([0, 1], slice(None), 0),
    "broadcast": lambda m: (_t(m, [[0], [1]]), _t(m, [1, 2, 3])),
    "separated by none": lambda m: ([0, 1], None, [1, 2]),
    "ellipsis list none": lambda m: (Ellipsis, [1, 2], None),
    "none list": lambda m: (None, [0, 1]),
    "repeats": lambda m: _t(m, [1, 1, 1, 0]),
    "empty list": lambda m: [],
    "full mask": lambda m: _t(m, X > 0.5),
    "row mask": lambda m: _t(m, [True, False, True]),
    "bool list": lambda m: [True, False, True],
    "mask second axis": lambda m: (slice(None), _t(m, [False, True, True, False])),
    "mask between slices": lambda m: (slice(1, None), _t(m, [False, True, True, True]), slice(2, None)),
    "2-d mask on trailing axes": lambda m: (slice(None), _t(m, X[0] > 0)),
    "mask and list": lambda m: (_t(m, [True, False, True]), slice(None), [0, 3]),
    "all false mask": lambda m: _t(m, np.zeros((3, 4), bool)),
    "true": lambda m: True,
    "false": lambda m: False,
    "true and int": lambda m: (0, True),
}


@pytest.mark.parametrize("name", sorted(INDEX_FORMS))
def test_getitem_forms(name):
    both(lambda m, x: x[INDEX_FORMS[name](m)], X)


@pytest.mark.parametrize("name", ["list", "separated by slice", "full mask", "slice step", "two adjacent"])
def test_getitem_non_contiguous_and_integer(name):
    both(lambda m, y: y.transpose(0, 2)[INDEX_FORMS[name](m)], np.ascontiguousarray(X.transpose(2, 1, 0)))
    both(lambda m, x: x[:, :, 1:][_t(m, X[:, :, 1:] > 0)], X)
    both(lambda m, x: x[INDEX_FORMS[name](m)], (X * 10).astype(np.int64))


def test_getitem_zero_d_and_empty():
    both(lambda m, x: x[None], np.float32(2.5))
    both(lambda m, x: x[...], np.float32(2.5))
    both(lambda m, x: x[True], np.float32(2.5))
    both(lambda m, x: x[[0, 0], 1:], np.zeros((2, 0), np.float32))
    both(lambda m, x: x[_t(m, np.zeros((2, 0), bool))], np.zeros((2, 0), np.float32))
    both(lambda m, x: x[[]], np.zeros((0, 3), np.float32))


@pytest.mark.parametrize("index, match", [
    (3, "index 3 is out of bounds for dimension 0 with size 3"),
    (-4, "index -4 is out of bounds"),
    ((0, 4), "index 4 is out of bounds for dimension 1 with size 4"),
    ((slice(None), [0, 7]), "index 7 is out of bounds for dimension 1 with size 4"),
    ([0, -4], "index -4"),
    ((0, 0, 0, 0), "too many indices"),
    ([True, False], "shape of the mask"),
    (([0, 1], [0, 1, 2]), "could not be broadcast"),
])
def test_getitem_errors(index, match):
    x = tl.tensor(X)
    with pytest.raises(IndexRangeError, match=match) as e:
        x[index]
    assert "getitem" in str(e.value)
    with pytest.raises(IndexError):
        torch.tensor(X)[index]


def test_getitem_bad_index_types():
    x = tl.tensor(X)
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        x[tl.tensor([0.0, 1.0])]
    with pytest.raises(ValueError, match="step"):
        x[::-1]


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_getitem_random_advanced(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    x = RNG.standard_normal(shape).astype(np.float32)
    items = []
    for n in shape:
        kind = data.draw(st.sampled_from(["slice", "int", "list", "mask", "none"]))
        if kind == "slice":
            items.append(slice(data.draw(st.integers(-n, n)), None, data.draw(st.integers(1, 3))))
        elif kind == "int":
            items.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "list":
            items.append(data.draw(st.lists(st.integers(-n, n - 1), min_size=2, max_size=2)))
        elif kind == "mask":
            items.append(np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        else:
            items.extend([None, slice(None)])
    idx = tuple(items)

    def index(m):
        return tuple(_t(m, i) if isinstance(i, np.ndarray) else i for i in idx)
    try:
        torch.tensor(x)[index(torch)]
    except IndexError:
        with pytest.raises(IndexError):
            tl.tensor(x)[index(tl)]
        return
    both(lambda m, t: t[index(m)], x)


# ---- writes ---------------------------------------------------------------------------------

def _torch_set(x, index, value):
    y = x.clone()
    y[index] = value
    return y


SET_CASES = [
    ("slice, scalar", lambda m: slice(1, 3), lambda m: 7.0),
    ("int, row", lambda m: 1, lambda m: _t(m, RNG.standard_normal((4, 5)).astype(np.float32))),
    ("int, broadcast row", lambda m: (0, Ellipsis), lambda m: _t(m, RNG.standard_normal(5).astype(np.float32))),
    ("step slice, leading 1s", lambda m: (slice(None, None, 2), 1), lambda m: _t(m, np.ones((1, 1, 5), np.float32))),
    ("none and ints", lambda m: (None, 2, -1, 0), lambda m: -3),
    ("full mask, scalar", lambda m: _t(m, X > 0), lambda m: 0.0),
    ("row mask, scalar", lambda m: _t(m, [True, False, True]), lambda m: 2.5),
    ("row mask, rows", lambda m: _t(m, [True, False, True]),
     lambda m: _t(m, RNG.standard_normal((2, 4, 5)).astype(np.float32))),
    ("inner mask, one entry", lambda m: (slice(None), _t(m, X[0] > 0)), lambda m: _t(m, np.ones(1, np.float32))),
    ("list, scalar", lambda m: [0, 2], lambda m: 1.5),
    ("tensor rows", lambda m: _t(m, [[2], [0]]), lambda m: _t(m, RNG.standard_normal((2, 1, 4, 5)).astype(np.float32))),
    ("2-d leading mask, rows", lambda m: _t(m, X[:, :, 0] > 0),
     lambda m: _t(m, RNG.standard_normal((int((X[:, :, 0] > 0).sum()), 5)).astype(np.float32))),
    ("2-d leading mask, broadcast row", lambda m: _t(m, X[:, :, 0] > 0),
     lambda m: _t(m, RNG.standard_normal((1, 5)).astype(np.float32))),
    ("separated lists", lambda m: ([0, 1], slice(None), [1, 2]),
     lambda m: _t(m, RNG.standard_normal((2, 4)).astype(np.float32))),
    ("int and list", lambda m: (0, slice(None), [1, 2]), lambda m: _t(m, RNG.standard_normal(2).astype(np.float32))),
    ("double value", lambda m: 0, lambda m: _t(m, np.full((5,), 0.25))),
    ("empty", lambda m: [], lambda m: 1.0),
]


@pytest.mark.parametrize("name, index, value", SET_CASES, ids=[c[0] for c in SET_CASES])
def test_setitem_value(name, index, value):
    v0 = value(torch)
    if isinstance(v0, torch.Tensor) and v0.dtype == torch.float32:
        a = v0.detach().numpy()
        both(lambda m, x, v: (_torch_set(x, index(m), v) if m is torch else setitem_value(x, index(m), v)), X, a)
    else:
        both(lambda m, x: (_torch_set(x, index(m), value(m)) if m is torch else setitem_value(x, index(m), value(m))),
             X)


def test_setitem_value_scalar_tensor_gradient_and_casts():
    both(lambda m, x, v: _torch_set(x, _t(m, X > 0), v) if m is torch else setitem_value(x, _t(m, X > 0), v),
         X, np.float32(3.0))
    both(lambda m, x, v: _torch_set(x, [1, 2], v) if m is torch else setitem_value(x, [1, 2], v), X, np.float32(3.0))
    xi = np.arange(12).reshape(3, 4)
    both(lambda m, x: _torch_set(x, (slice(None), 1), 2.7) if m is torch else setitem_value(x, (slice(None), 1), 2.7),
         xi)
    both(lambda m, x: _torch_set(x, x > 5, -1) if m is torch else setitem_value(x, x > 5, -1), xi)
    both(lambda m, x: _torch_set(x, 0, _t(m, [9.9, 8.8, 7.7, 6.6])) if m is torch
         else setitem_value(x, 0, _t(m, [9.9, 8.8, 7.7, 6.6])), xi)
    both(lambda m, x: _torch_set(x, x > 0, _t(m, 2.0, "float64")) if m is torch
         else setitem_value(x, x > 0, _t(m, 2.0, "float64")), X)
    with pytest.raises(DTypeError, match="dtypes match"):
        setitem_value(tl.tensor(xi), [0, 2], tl.tensor([9.9, 8.8, 7.7, 6.6]))
    # Repeats: the last write wins, and the values it overwrote get no gradient.
    v = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = setitem_value(tl.zeros(4), [1, 1, 2], v)
    assert y.tolist() == [0.0, 2.0, 3.0, 0.0]
    y.sum().backward()
    assert v.grad.tolist() == [0.0, 1.0, 1.0]
    w = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = setitem_value(tl.zeros(2, 2), (slice(None), [1, 1, 0]), w)
    assert y.tolist() == [[3.0, 2.0], [3.0, 2.0]]
    y.sum().backward()
    assert w.grad.tolist() == [0.0, 2.0, 2.0]
    with pytest.raises(ShapeError, match="cannot be broadcast"):
        setitem_value(tl.tensor(X), 0, tl.ones(3, 4))
    with pytest.raises(IndexRangeError, match="index 3 is out of bounds"):
        setitem_value(tl.tensor(X), 3, 0.0)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate):
    i0 = [0, 2, 2] if accumulate else [0, 2, 1]
    both(lambda m, x, v: x.index_put((_t(m, i0), _t(m, [1, 3, 1])), v, accumulate=accumulate), X,
         RNG.standard_normal((3, 5)).astype(np.float32))
    both(lambda m, x, v: m.index_put(x, (_t(m, X[:, :, 0] > 0),), v, accumulate), X, np.float32(2.0))
    with pytest.raises(DTypeError, match="dtypes match"):
        tl.tensor(X).index_put((tl.tensor([0]),), tl.tensor(1.0, dtype=tl.float64))


def test_put():
    both(lambda m, x, v: x.put(_t(m, [[0, -1], [7, 58]]), v), X, RNG.standard_normal((2, 2)).astype(np.float32))
    both(lambda m, x, v: m.put(x, _t(m, [3, 3, 0]), v, accumulate=True), X, np.ones(3, np.float32))
    with pytest.raises(IndexRangeError, match="index 60"):
        tl.tensor(X).put(tl.tensor([60]), tl.tensor([1.0]))


# ---- along a dim ----------------------------------------------------------------------------

def test_index_select():
    both(lambda m, x: m.index_select(x, 1, _t(m, [3, 0, 3])), X)
    both(lambda m, x: x.index_select(-1, _t(m, 2)), X)
    both(lambda m, x: x.transpose(0, 2).index_select(0, _t(m, [4, 1])), X)
    both(lambda m, x: x.index_select(0, _t(m, [0])), np.float32(3.0))
    both(lambda m, x: x.index_select(0, _t(m, np.zeros(0, np.int64))), X)
    with pytest.raises(IndexRangeError, match="index_select.*index 3 .*size 3"):
        tl.tensor(X).index_select(0, tl.tensor([3]))
    with pytest.raises(IndexRangeError, match="index_select.*-1"):
        tl.tensor(X).index_select(0, tl.tensor([-1]))


def test_gather():
    idx = RNG.integers(0, 4, size=(2, 6, 5))
    both(lambda m, x: m.gather(x, 1, _t(m, idx)), X)
    both(lambda m, x: x.gather(-1, _t(m, idx[:, :3, :2])), X)
    both(lambda m, x: x.gather(0, _t(m, np.zeros((0, 2, 2), np.int64))), X)
    both(lambda m, x: x.gather(0, _t(m, 0)), np.float32(3.0))
    with pytest.raises(IndexRangeError, match="gather: index 4 is out of bounds for dimension 1 with size 4"):
        tl.tensor(X).gather(1, tl.tensor(np.full((1, 1, 1), 4)))
    with pytest.raises(IndexRangeError, match="-1"):
        tl.tensor(X).gather(1, tl.tensor(np.full((1, 1, 1), -1)))
    with pytest.raises(ShapeError, match="same number of dimensions"):
        tl.tensor(X).gather(1, tl.tensor([0]))
    with pytest.raises(ShapeError, match="exceeds"):
        tl.tensor(X).gather(1, tl.tensor(np.zeros((4, 1, 1), np.int64)))


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_gather_scatter_random(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = tuple(data.draw(st.integers(0, n)) if j != d % len(shape) else data.draw(st.integers(0, 5))
                   for j, n in enumerate(shape))
    idx = RNG.integers(0, shape[d], size=ishape)
    x = RNG.standard_normal(shape).astype(np.float32)
    src = RNG.standard_normal(tuple(max(i, 1) + 1 for i in ishape)).astype(np.float32)
    both(lambda m, t: t.gather(d, _t(m, idx)), x)
    both(lambda m, t, s: t.scatter_add(d, _t(m, idx), s[tuple(slice(0, i) for i in ishape)]), x, src)
    both(lambda m, t, s: t.scatter_reduce(d, _t(m, idx), s[tuple(slice(0, i) for i in ishape)], "amax"), x, src)


def _unique_scatter_index(shape, d, n):
    """An index of ``shape`` whose entries along ``d`` are distinct (torch's scatter is exact then)."""
    idx = np.argsort(RNG.random(shape[:d] + (n,) + shape[d + 1:]), axis=d)
    return np.take(idx, np.arange(shape[d]), axis=d)


def test_scatter():
    idx = _unique_scatter_index((3, 3, 5), 1, 4)
    src = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    both(lambda m, x, s: x.scatter(1, _t(m, idx), s), X, src, grad=False)
    both(lambda m, x, s: m.scatter(x, 1, _t(m, idx), s[:, :3]), X, src)
    both(lambda m, x: x.scatter(1, _t(m, idx), 2.5), X)
    both(lambda m, x: x.scatter(1, _t(m, idx), value=-1.0), X)
    both(lambda m, x, s: x.scatter(1, _t(m, idx), s, reduce="add"), X, src, grad=False)
    both(lambda m, x, s: x.scatter(1, _t(m, idx), s, reduce="multiply"), X, src, grad=False)
    both(lambda m, x: x.scatter(0, _t(m, [[1, 0]]), 5), np.arange(6).reshape(3, 2))
    with pytest.raises(DTypeError, match="dtype"):
        tl.tensor(X).scatter(1, tl.tensor(idx), tl.tensor(src, dtype=tl.float64))
    y = tl.zeros(3).scatter(0, tl.tensor([1, 1]), tl.tensor([1.0, 2.0]))
    assert y.tolist() == [0.0, 2.0, 0.0]   # repeats: the last write wins


def test_scatter_add_and_index_add():
    idx = RNG.integers(0, 4, size=(3, 6, 5))
    src = RNG.standard_normal((3, 6, 5)).astype(np.float32)
    both(lambda m, x, s: m.scatter_add(x, 1, _t(m, idx), s), X, src)
    both(lambda m, x, s: x.scatter_add(-1, _t(m, idx[:2, :2, :4]), s[:2, :2, :4]), X, src)
    both(lambda m, x, s: x.index_add(1, _t(m, [3, 0, 3]), s[:, :3]), X, src)
    both(lambda m, x, s: m.index_add(x, 2, _t(m, [4, 0]), s[:, :4, :2], alpha=-2.0), X, src)
    both(lambda m, x: x.index_add(0, _t(m, [0, 0]), _t(m, [[1, 2], [3, 4]])), np.arange(6).reshape(3, 2))
    with pytest.raises(IndexRangeError, match="index_add.*index 3"):
        tl.tensor(X).index_add(0, tl.tensor([3]), tl.tensor(X[:1]))
    with pytest.raises(ShapeError, match="index_add"):
        tl.tensor(X).index_add(0, tl.tensor([0, 1]), tl.tensor(X[:1]))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    idx = np.array([[0, 1, 0, 1], [2, 2, 2, 2], [4, 3, 0, 0]])
    src = RNG.standard_normal((3, 4)).astype(np.float32)
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    both(lambda m, t, s: t.scatter_reduce(1, _t(m, idx), s, reduce, include_self=include_self), x, src, tol=1e-5)
    xi, si = RNG.integers(-5, 5, size=(3, 5)), RNG.integers(-5, 5, size=(3, 4))
    both(lambda m, t, s: m.scatter_reduce(t, 1, _t(m, idx), s, reduce, include_self=include_self), xi, si)


def test_scatter_reduce_ties_split_evenly():
    x = np.array([1.0, 5.0], np.float32)
    src = np.array([5.0, 5.0, 2.0], np.float32)
    both(lambda m, t, s: t.scatter_reduce(0, _t(m, [1, 1, 1]), s, "amax"), x, src)


def test_index_copy_and_index_fill():
    src = RNG.standard_normal((3, 2, 5)).astype(np.float32)
    both(lambda m, x, s: x.index_copy(1, _t(m, [3, 0]), s), X, src)
    both(lambda m, x, s: m.index_copy(x, 1, _t(m, [1, 2]), s), X, src)
    with pytest.raises(IndexRangeError, match="index_copy.*-1"):
        tl.tensor(X).index_copy(1, tl.tensor([-1, 0]), tl.tensor(src))
    both(lambda m, x: x.index_fill(1, _t(m, [0, -1]), 7.0), X)
    both(lambda m, x, v: m.index_fill(x, 2, _t(m, [1, 1]), v), X, np.float32(-2.0))
    both(lambda m, x: x.index_fill(0, _t(m, [1]), 2.9), np.arange(6).reshape(3, 2))
    with pytest.raises(IndexRangeError, match="index_fill.*index 4"):
        tl.tensor(X).index_fill(1, tl.tensor([4]), 0.0)


# ---- masks ----------------------------------------------------------------------------------

def test_masked_fill():
    mask = X > 0
    both(lambda m, x: x.masked_fill(_t(m, mask), 0.5), X)
    both(lambda m, x, v: m.masked_fill(x, _t(m, mask[0, 0]), v), X, np.float32(3.0))
    both(lambda m, x: m.masked_fill(x, _t(m, np.ones((3, 5), bool)), 2.0), X[0, 0])
    both(lambda m, x: x.transpose(0, 1).masked_fill(_t(m, mask.transpose(1, 0, 2)), -1.0), X)
    both(lambda m, x: x.masked_fill(_t(m, [True, False, True]), 2.7), np.arange(3))
    both(lambda m, x: x.masked_fill(_t(m, True), 1.0), np.float32(0.0))
    with pytest.raises(ShapeError, match="0-dimensional"):
        tl.tensor(X).masked_fill(tl.tensor(mask), tl.tensor([1.0]))
    with pytest.raises(DTypeError, match="boolean"):
        tl.tensor(X).masked_fill(tl.tensor(X), 1.0)


def test_masked_select_and_scatter():
    mask = X > 0
    both(lambda m, x: m.masked_select(x, _t(m, mask)), X)
    both(lambda m, x: x.masked_select(_t(m, mask[0])), X)
    both(lambda m, x: x[0, 0].masked_select(_t(m, mask[:, :, :])), X)
    src = RNG.standard_normal(70).astype(np.float32)
    both(lambda m, x, s: x.masked_scatter(_t(m, mask), s), X, src)
    both(lambda m, x, s: m.masked_scatter(x, _t(m, mask[0, 0]), s), X, src)
    with pytest.raises(ShapeError, match="at least as many"):
        tl.tensor(X).masked_scatter(tl.tensor(mask), tl.ones(3))


def test_take_and_take_along_dim():
    both(lambda m, x: m.take(x, _t(m, [[0, -1], [59, 7]])), X)
    both(lambda m, x: x.transpose(0, 2).take(_t(m, [1, 2])), X)
    idx = RNG.integers(-4, 4, size=(3, 2, 5))
    both(lambda m, x: m.take_along_dim(x, _t(m, idx), 1), X)
    both(lambda m, x: x.take_along_dim(_t(m, idx[:1, :, :1]), dim=1), X)
    both(lambda m, x: m.take_along_dim(x, _t(m, [5, 0])), X)
    both(lambda m, x: m.take_along_dim(x, _t(m, np.argsort(X, axis=-1)), dim=-1), X)
    with pytest.raises(IndexRangeError, match="take.*index 60 on a tensor of 60"):
        tl.tensor(X).take(tl.tensor([60]))


def test_nonzero_argwhere_where():
    x = (X > 0.3).astype(np.float32) * X
    both(lambda m, t: m.nonzero(t), x, grad=False)
    both(lambda m, t: t.nonzero(as_tuple=True), x, grad=False)
    both(lambda m, t: m.argwhere(t), x, grad=False)
    both(lambda m, t: m.where(t > 0), X, grad=False)
    both(lambda m, t: m.nonzero(t), np.float32(3.0), grad=False)
    both(lambda m, t: m.nonzero(t, as_tuple=True), np.float32(0.0), grad=False)
    both(lambda m, t: m.nonzero(t), np.zeros((2, 0)), grad=False)
    y = RNG.standard_normal((4, 5)).astype(np.float32)
    both(lambda m, a, b: m.where(a > 0, a, b), X, y)
    both(lambda m, a: m.where(a > 0, a, 0.0), X)
    both(lambda m, a: m.where(a > 0, 1.0, a), X)
    both(lambda m, a, b: a.where(b > 0, b), X, y)
    both(lambda m, a: m.where(a > 0, 1, 0), X, grad=False)
    both(lambda m, a: m.where(a > 0, 1.0, 0), X, grad=False)
    both(lambda m, a, b: m.where(a > 0, a.long(), b), X, y.astype(np.float64))
    both(lambda m, a: m.where(a > 2, a, 0.5), np.arange(5))
    with pytest.raises(DTypeError, match="boolean"):
        tl.where(tl.tensor(X), 1.0, 0.0)
    with pytest.raises(TorchLeanError):
        tl.where(tl.tensor(X) > 0, 1.0)


# ---- CUDA: the same results as the CPU --------------------------------------------------------

def _cuda_cases(T):
    """(name, function of x) pairs; ``T`` makes a constant tensor on the device under test."""
    rng = np.random.default_rng(5)   # the same cases on every device
    m = X > 0
    src = rng.standard_normal((3, 4, 5)).astype(np.float32)
    idx = rng.integers(0, 4, size=(3, 6, 5))
    return [
        ("basic", lambda x: x[1:, None, ::2, -1]),
        ("lists", lambda x: x[[0, 2], :, [1, 4]]),
        ("index tensor", lambda x: x[T(np.array([[2, -1]]))]),
        ("mask", lambda x: x[T(m)]),
        ("inner mask", lambda x: x[:, T(m[0, :, 0])]),
        ("set slice", lambda x: setitem_value(x, (slice(1, 3), 0), x[0, 0] * 2)),
        ("set mask scalar", lambda x: setitem_value(x, T(m), -1.0)),
        ("set mask rows", lambda x: setitem_value(x, T(m[:, :, 0]), x[T(m[:, :, 0])] * 3)),
        ("set lists", lambda x: setitem_value(x, ([0, 1], slice(None), [1, 2]), x[0, :, :2].transpose(0, 1))),
        ("set list scalar", lambda x: setitem_value(x, [2, 0], 1.5)),
        ("index_put acc", lambda x: x.index_put((T(np.array([0, 0, 2])),), x[:3] * 2, accumulate=True)),
        ("gather", lambda x: x.gather(1, T(idx[:, :3]))),
        ("scatter", lambda x: x.scatter(1, T(np.tile(np.arange(4)[None, :, None], (3, 1, 5))), x * 2)),
        ("scatter_add", lambda x: x.scatter_add(1, T(idx[:, :4]), x)),
        ("scatter_reduce amax", lambda x: x.scatter_reduce(1, T(idx[:, :4]), x * x, "amax")),
        ("scatter_reduce prod", lambda x: x.scatter_reduce(1, T(idx[:, :4]), x, "prod", include_self=False)),
        ("index_add", lambda x: x.index_add(2, T(np.array([4, 0, 4])), x[:, :, :3], alpha=2.0)),
        ("index_copy", lambda x: x.index_copy(0, T(np.array([2, 0])), x[:2] + 1)),
        ("index_fill", lambda x: x.index_fill(1, T(np.array([0, -1])), 7.0)),
        ("masked_fill", lambda x: x.masked_fill(T(m[0]), 0.5)),
        ("masked_select", lambda x: x.masked_select(T(m))),
        ("masked_scatter", lambda x: x.masked_scatter(T(m), x.transpose(0, 2) * 2)),
        ("take", lambda x: x.take(T(np.array([[0, -1], [59, 7]])))),
        ("take_along_dim", lambda x: tl.take_along_dim(x, T(idx[:, :2]), 1)),
        ("where", lambda x: tl.where(T(m), x, 1.0)),
        ("nonzero", lambda x: tl.nonzero(x > 0).to(dtype=tl.float32)),
        ("int setitem", lambda x: setitem_value(T((X * 10).astype(np.int64)), T(m), 3).to(dtype=tl.float32) + x),
        ("int rows", lambda x: setitem_value(T((X * 10).astype(np.int64)), [1, 0], T(np.arange(5))).to(
            dtype=tl.float32) + x),
        ("int put", lambda x: setitem_value(T((X * 10).astype(np.int64)), ([0, 1], slice(None), [1, 2]),
                                            T(np.arange(8).reshape(2, 4))).to(dtype=tl.float32) + x),
        ("set few", lambda x: setitem_value(x, ([0], slice(None), [1]), x[1, :, 0] * 5)),
        ("src", lambda x: x + T(src)),
    ]


@pytest.mark.cuda
@pytest.mark.parametrize("case", range(len(_cuda_cases(None))))
def test_cuda_matches_cpu(case):
    out = {}
    for dev in ("cpu", "cuda"):
        def T(a, dev=dev):
            return tl.tensor(np.asarray(a), device=dev)
        name, f = _cuda_cases(T)[case]
        x = tl.tensor(X, device=dev, requires_grad=True)
        y = f(x)
        g = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
        if y.requires_grad:
            y.backward(tl.tensor(g, device=dev))
        out[dev] = (y.cpu().numpy(), None if x.grad is None else x.grad.cpu().numpy(), y.dtype)
    (yc, gc, dc), (yg, gg, dg) = out["cpu"], out["cuda"]
    assert dc == dg and yc.shape == yg.shape, name
    np.testing.assert_allclose(yg, yc, rtol=1e-5, atol=1e-5, err_msg=name)
    if gc is not None:
        np.testing.assert_allclose(gg, gc, rtol=1e-5, atol=1e-5, err_msg=name)
