"""Hand-computed cases of the reduce, shape and index families (spec, fast path and
reference mode), chosen at the conventions' edges: ties, out-of-bounds indices,
repeated scatter targets, views, out-of-range depths and basic indexing."""

import numpy as np
import pytest

from torchlean.autograd.tape import Tape, run_op
from torchlean.errors import DTypeError, IndexRangeError, ShapeError
from torchlean.spec import SPEC

MODES = [pytest.param(True, id="fast"), pytest.param(False, id="reference")]


def fwd(name, *xs, fast=True, **attrs):
    y, _ = run_op(name, [np.asarray(x) for x in xs], attrs, fast=fast)
    return y


def vjp(name, xs, g, fast=True, **attrs):
    """Gradients of every input through the tape, seeded with ``g``."""
    t = Tape(fast_kernels=fast)
    ids = [t.leaf(np.asarray(x)) for x in xs]
    out = t.op(name, *ids, **attrs)
    grads = t.backward(out, seed=np.asarray(g, dtype=np.asarray(xs[0]).dtype))
    return [grads[i] for i in ids]


def both(name, xs, g, **attrs):
    """(fast-path gradients, spec VJP): the caller checks both against the hand result."""
    return vjp(name, xs, g, **attrs), SPEC[name].vjp(np.asarray(g), *[np.asarray(x) for x in xs], **attrs)


# ---- reductions -----------------------------------------------------------------------------

def test_reduce_max_tie_sends_cotangent_to_first_entry():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    (got,), (spec,) = both("reduce_max", [x], [10.0, 20.0], axis=1)
    want = np.array([[0.0, 10.0, 0.0], [20.0, 0.0, 0.0]])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(spec, want)
    np.testing.assert_array_equal(fwd("reduce_max", x, axis=1), [3.0, 2.0])


def test_reduce_min_tie_sends_cotangent_to_first_entry_along_axis0():
    x = np.array([[1.0, 0.0], [1.0, -1.0], [1.0, -1.0]], dtype=np.float32)
    for fast in (True, False):
        (got,) = vjp("reduce_min", [x], [[5.0, 7.0]], fast=fast, axis=0, keepdim=True)
        np.testing.assert_array_equal(got, [[5.0, 0.0], [0.0, 7.0], [0.0, 0.0]])
        assert got.dtype == np.float32
    np.testing.assert_array_equal(fwd("reduce_min", x, axis=0, keepdim=True), [[1.0, -1.0]])


def test_reduce_max_of_empty_axis_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"reduce_max: cannot reduce over axis 1 of size 0"):
        fwd("reduce_max", np.zeros((3, 0), np.float32), axis=1)
    with pytest.raises(ShapeError, match="reduce_sum: axis 2 out of range"):
        fwd("reduce_sum", np.zeros((3, 4), np.float32), axis=2)


@pytest.mark.parametrize("fast", MODES)
def test_sum_and_mean_values_and_gradients(fast):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = fwd("sum", x, fast=fast)
    assert isinstance(s, np.ndarray) and s.shape == () and s.dtype == np.float32 and s == 15.0
    np.testing.assert_array_equal(fwd("reduce_sum", x, fast=fast, axis=(0, -1)), 15.0)
    np.testing.assert_array_equal(fwd("reduce_mean", x, fast=fast, axis=-1, keepdim=True), [[1.0], [4.0]])
    (g,) = vjp("reduce_mean", [x], [[3.0], [6.0]], fast=fast, axis=1, keepdim=True)
    np.testing.assert_array_equal(g, [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    (g,) = vjp("sum", [x], 2.0, fast=fast)
    np.testing.assert_array_equal(g, np.full((2, 3), 2.0))


def test_reducing_a_0d_value_over_axis_0_or_minus_1_is_identity():
    x = np.array(2.5, dtype=np.float32)
    for name in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min"):
        for axis in (0, -1):
            y = fwd(name, x, axis=axis)
            assert isinstance(y, np.ndarray) and y.shape == () and y == 2.5, name


# ---- shape ops ------------------------------------------------------------------------------

@pytest.mark.parametrize("name,attrs,shape", [
    ("reshape", {"shape": (3, 4)}, (3, 4)),
    ("flatten", {"start_dim": 1}, (2, 6)),
    ("unsqueeze", {"dim": 1}, (2, 1, 2, 3)),
    ("squeeze", {"dim": None}, (2, 2, 3)),
])
def test_view_ops_share_the_input_buffer(name, attrs, shape):
    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    if name == "squeeze":
        x = x.reshape(2, 1, 2, 3)
    y = fwd(name, x, **attrs)
    assert y.shape == shape
    assert np.shares_memory(x, y)


def test_transpose_and_permute_return_contiguous_copies():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = fwd("transpose", x, dim0=0, dim1=2)
    assert y.flags.c_contiguous and not np.shares_memory(x, y)
    np.testing.assert_array_equal(y, np.swapaxes(x, 0, 2))
    z = fwd("permute", x, dims=(1, -1, 0))
    assert z.flags.c_contiguous
    np.testing.assert_array_equal(z, np.transpose(x, (1, 2, 0)))
    (g,) = vjp("permute", [x], np.arange(24, dtype=np.float32).reshape(3, 4, 2), dims=(1, 2, 0))
    np.testing.assert_array_equal(g, np.transpose(np.arange(24.0).reshape(3, 4, 2), (2, 0, 1)))


@pytest.mark.parametrize("fast", MODES)
@pytest.mark.parametrize("depth", [2, 3, 100, -1])
def test_swap_adjacent_out_of_range_depth_is_identity(depth, fast):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = fwd("swap_adjacent", x, fast=fast, depth=depth)
    np.testing.assert_array_equal(y, x)
    (g,) = vjp("swap_adjacent", [x], x + 1, fast=fast, depth=depth)
    np.testing.assert_array_equal(g, x + 1)


def test_swap_adjacent_in_range_swaps_the_pair():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = fwd("swap_adjacent", x, depth=1)
    np.testing.assert_array_equal(y, np.swapaxes(x, 1, 2))
    (g,) = vjp("swap_adjacent", [x], y, depth=1)
    np.testing.assert_array_equal(g, x)


_INDEXES = [
    (1, slice(None, None, 2)),
    (Ellipsis, None, -1),
    (None, slice(1, -1), Ellipsis, 0),
    (slice(-3, None), slice(None), slice(5, 1)),
    (slice(None, None, 3), None, slice(-100, 100, 2), -2),
    (Ellipsis,),
    (),
    (-1, -1, -1),
    2,
]


@pytest.mark.parametrize("fast", MODES)
@pytest.mark.parametrize("index", _INDEXES, ids=[repr(i) for i in _INDEXES])
def test_getitem_equals_numpy_basic_indexing(index, fast):
    x = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    want = x[index]
    y = fwd("getitem", x, fast=fast, index=index)
    assert isinstance(y, np.ndarray)
    assert y.shape == np.shape(want)
    np.testing.assert_array_equal(y, want)
    # The VJP writes the cotangent back where each entry was read (no entry is read twice).
    g = np.arange(1, y.size + 1, dtype=np.float32).reshape(y.shape)
    (dx,) = vjp("getitem", [x], g, fast=fast, index=index)
    expect = np.zeros_like(x)
    expect[index] = g
    np.testing.assert_array_equal(dx, expect)


def test_getitem_int_out_of_range_names_op_index_and_size():
    with pytest.raises(IndexRangeError, match=r"getitem: index 7 out of range for axis 1 of size 5"):
        fwd("getitem", np.zeros((4, 5), np.float32), index=(0, 7))
    with pytest.raises(IndexRangeError, match=r"select: index -4 out of range for axis 0 of size 3"):
        fwd("select", np.zeros((3, 2), np.float32), axis=0, index=-4)


def test_slice_follows_python_slice_semantics():
    x = np.arange(10, dtype=np.float32)
    for start, stop, step in [(-4, None, 1), (2, -2, 3), (-100, 100, 4), (8, 2, 1), (None, -7, 2)]:
        np.testing.assert_array_equal(fwd("slice", x, axis=0, start=start, stop=stop, step=step),
                                      x[start:stop:step])


def test_broadcast_to_backward_sums_over_inserted_and_stretched_axes():
    x = np.array([[1.0], [2.0]], dtype=np.float32)          # (2, 1) -> (3, 2, 4)
    y = fwd("broadcast_to", x, shape=(3, 2, 4))
    np.testing.assert_array_equal(y, np.broadcast_to(x, (3, 2, 4)))
    (g,) = vjp("broadcast_to", [x], np.ones((3, 2, 4), np.float32), shape=(3, 2, 4))
    np.testing.assert_array_equal(g, [[12.0], [12.0]])


def test_concat_and_stack_split_the_cotangent():
    a, b = np.ones((2, 1), np.float32), np.zeros((2, 2), np.float32)
    np.testing.assert_array_equal(fwd("concat", a, b, axis=1), [[1, 0, 0], [1, 0, 0]])
    g = np.arange(6, dtype=np.float32).reshape(2, 3)
    ga, gb = vjp("concat", [a, b], g, axis=-1)
    np.testing.assert_array_equal(ga, [[0], [3]])
    np.testing.assert_array_equal(gb, [[1, 2], [4, 5]])
    gs = vjp("stack", [a, a, a], np.arange(6, dtype=np.float32).reshape(2, 3, 1), axis=1)
    np.testing.assert_array_equal(np.stack(gs, axis=1), np.arange(6).reshape(2, 3, 1))


def test_concat_rejects_mixed_dtypes():
    with pytest.raises(DTypeError, match="concat"):
        fwd("concat", np.ones(2, np.float32), np.ones(2, np.float64))


@pytest.mark.parametrize("fast", MODES)
def test_detach_is_identity_with_zero_gradient(fast):
    x = np.array([1.0, -2.0], dtype=np.float32)
    np.testing.assert_array_equal(fwd("detach", x, fast=fast), x)
    (g,) = vjp("detach", [x], [3.0, 4.0], fast=fast)
    np.testing.assert_array_equal(g, [0.0, 0.0])


# ---- index ops ------------------------------------------------------------------------------

@pytest.mark.parametrize("fast", MODES)
def test_gather_out_of_bounds_yields_zero(fast):
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    idx = np.array([[2, 3], [7, 0]])
    np.testing.assert_array_equal(fwd("gather", x, fast=fast, axis=1, index=idx), [[3.0, 0.0], [0.0, 4.0]])
    (g,) = vjp("gather", [x], [[1.0, 2.0], [3.0, 4.0]], fast=fast, axis=1, index=idx)
    np.testing.assert_array_equal(g, [[0.0, 0.0, 1.0], [4.0, 0.0, 0.0]])
    np.testing.assert_array_equal(fwd("gather_rows", x, fast=fast, indices=[1, 2, 1]),
                                  [[4, 5, 6], [0, 0, 0], [4, 5, 6]])
    np.testing.assert_array_equal(fwd("index_select", x, fast=fast, axis=1, indices=[2, 9, 0]),
                                  [[3, 0, 1], [6, 0, 4]])
    np.testing.assert_array_equal(fwd("embedding", x, fast=fast, indices=[[5], [0]]),
                                  [[[0, 0, 0]], [[1, 2, 3]]])


@pytest.mark.parametrize("fast", MODES)
def test_scatter_ignores_out_of_bounds_and_accumulates_repeats(fast):
    m = np.zeros((3, 2), dtype=np.float32)
    v = np.array([[1.0, 1.0], [2.0, 2.0], [4.0, 4.0], [8.0, 8.0]], dtype=np.float32)
    y = fwd("scatter_add_rows", m, v, fast=fast, indices=[1, 3, 1, 2 ** 32 - 1])
    np.testing.assert_array_equal(y, [[0, 0], [5, 5], [0, 0]])
    gm, gv = vjp("scatter_add_rows", [m, v], [[1, 2], [3, 4], [5, 6]], fast=fast, indices=[1, 3, 1, 0])
    np.testing.assert_array_equal(gm, [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(gv, [[3, 4], [0, 0], [3, 4], [1, 2]])

    x = np.array([10.0, 20.0, 30.0], dtype=np.float32)
    src = np.array([1.0, 2.0, 4.0, 8.0], dtype=np.float32)
    y = fwd("scatter_add", x, src, fast=fast, axis=0, index=[0, 0, 5, 2])
    np.testing.assert_array_equal(y, [13.0, 20.0, 38.0])
    gx, gs = vjp("scatter_add", [x, src], [1.0, 2.0, 3.0], fast=fast, axis=0, index=[0, 0, 5, 2])
    np.testing.assert_array_equal(gx, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(gs, [1.0, 1.0, 0.0, 3.0])


def test_embedding_gradient_accumulates_repeated_rows():
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    (g,) = vjp("embedding", [w], np.ones((2, 2, 2), np.float32), indices=[[2, 2], [0, 7]])
    np.testing.assert_array_equal(g, [[1, 1], [0, 0], [2, 2]])


def test_index_errors():
    x = np.ones((3, 2), np.float32)
    with pytest.raises(IndexRangeError, match="gather_rows: negative index -1"):
        fwd("gather_rows", x, indices=[0, -1])
    with pytest.raises(IndexRangeError, match="embedding: index 4294967296 >= 2"):
        fwd("embedding", x, indices=[2 ** 32])
    with pytest.raises(DTypeError, match="index_select: indices must be integers"):
        fwd("index_select", x, axis=0, indices=np.array([0.0]))
    with pytest.raises(ShapeError, match="gather: index of shape"):
        fwd("gather", x, axis=0, index=[0, 1])
