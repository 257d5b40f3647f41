"""The CUDA kernel surface against the host kernels (the reference), kernel by kernel.

Fresh random inputs per test; sizes that are not multiples of any block size (1, 31, 1000,
4097), empty and size-1 cases; float32 and float64. Before each launch the memory pool is
seeded with NaN-filled blocks of the outputs' sizes, so an output element the kernel fails to
write shows up as NaN. Skipped without a GPU (tests/conftest.py).
"""

import math

import numpy as np
import pytest

from torchlean.errors import BackendUnavailableError, DTypeError, IndexRangeError
from torchlean.kernels import get_kernels
from torchlean.kernels.api import KERNELS
from torchlean.shape import broadcast_plan

pytestmark = pytest.mark.cuda

H = get_kernels("cpu")
SIZES = [0, 1, 31, 1000, 4097]
DTYPES = [np.float32, np.float64]
TOL = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-12, 1e-13), np.dtype(np.float16): (0, 0)}


@pytest.fixture(scope="module")
def K():
    return get_kernels("cuda")


@pytest.fixture(scope="module")
def cp(K):
    import cupy
    return cupy


def poison(*nbytes):
    """Leave NaN-filled (0xFF bytes) free blocks of these sizes at the top of CuPy's pool."""
    import cupy
    blocks = [cupy.full(max(int(n), 1), 255, dtype=np.uint8) for n in nbytes]
    cupy.cuda.Device().synchronize()
    del blocks


def dev(K, a):
    return K.from_host(a, a.dtype) if isinstance(a, np.ndarray) else a


def host(K, y):
    if y is None:
        return None
    return K.to_host(y)


INDEX_KERNELS = {"gather_vec", "gather_rows", "scatter_add", "scatter_add_rows"}


def check(K, name, *args, tol=None, **kw):
    """Run kernel ``name`` on both devices and compare (NaN only where the host has NaN).

    Returns the device outputs, copied to the host.
    """
    dargs = [dev(K, a) for a in args]
    if name in INDEX_KERNELS:
        dargs[-1] = args[-1]  # indices are host sequences
    want = getattr(H, name)(*args, **kw)
    wants = want if isinstance(want, tuple) else (want,)
    poison(*[np.asarray(w).nbytes for w in wants if w is not None])
    got = getattr(K, name)(*dargs, **kw)
    gots = got if isinstance(got, tuple) else (got,)
    assert len(gots) == len(wants), name
    out = []
    for g, w in zip(gots, wants):
        out.append(host(K, g))
        if w is None:
            assert g is None, name
            continue
        w = np.asarray(w)
        g = out[-1]
        assert isinstance(g, np.ndarray), f"{name}: to_host gave {type(g)}"
        assert g.shape == w.shape, f"{name}: shape {g.shape} vs host {w.shape}"
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} vs host {w.dtype}"
        if w.dtype.kind in "fc":
            rtol, atol = tol or TOL[np.dtype(w.dtype)]
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
            assert not np.isnan(g[~np.isnan(w)]).any(), f"{name}: unwritten (NaN) output elements"
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    return out


def rand(rng, shape, dtype, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


# ---- the surface --------------------------------------------------------------------------


def test_surface_complete(K):
    missing = [n for n in KERNELS if not callable(getattr(K, n, None))]
    assert not missing
    import cupy
    assert K.xp is cupy and K.device == "cuda"


def test_tf32_is_off_and_matmul_is_fp32(K, cp, rng):
    import torchlean.cuda as tc
    assert not tc.tf32_enabled()
    a, b = rand(rng, (512, 512), np.float32), rand(rng, (512, 512), np.float32)
    got = K.to_host(K.matmul(dev(K, a), dev(K, b)))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # TF32 (10-bit mantissa) would be near 1e-3 here; float32 lands near 1e-7.
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5


def test_missing_cupy_raises_backend_unavailable(monkeypatch):
    import sys
    from torchlean.kernels import cuda as kc
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(BackendUnavailableError, match="torchlean\\[cuda\\]"):
        kc._import_cupy()


# ---- elementwise ----------------------------------------------------------------------------

UNARY = ["relu", "sigmoid", "softplus", "silu", "safe_log", "neg", "abs", "exp", "sin", "cos", "tanh",
         "sign"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", UNARY)
def test_unary(K, rng, name, n, dtype):
    x = rand(rng, n, dtype, -8, 8)
    if n > 3:
        x[:3] = [0.0, 40.0, -40.0]  # the kink, and the overflow guards of the stable forms
    check(K, name, x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_positive_domain_and_scalars(K, rng, n, dtype):
    x = rand(rng, n, dtype, 0.1, 4)
    for name in ("sqrt", "log", "inv"):
        check(K, name, x)
    for p in (2, 3, 0.5, -1.5, 0):
        check(K, "pow_scalar", x, p)
    check(K, "scale", x, -2.5)
    check(K, "add_scalar", x, 0.75)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_both_forms(K, rng, approximate, dtype):
    x = rand(rng, 4097, dtype, -6, 6)
    check(K, "gelu", x, approximate)
    # For large |x| the tanh form's derivative is a difference of terms near 1 (1 + t, 1 - t*t);
    # in float32 that cancellation leaves a few 1e-6 absolute on any device, host included.
    tol = (1e-5, 1e-5) if dtype == np.float32 and approximate == "tanh" else None
    check(K, "gelu_bwd", x, rand(rng, 4097, dtype), approximate, tol=tol)


def test_activations_against_float64(K, rng):
    """The float32 CUDA kernels against the host kernels in float64 on the same inputs."""
    x = rand(rng, 4097, np.float32, -6, 6)
    for name in ("sigmoid", "softplus", "silu", "safe_log", "gelu", "tanh"):
        got = K.to_host(getattr(K, name)(dev(K, x)))
        ref = getattr(H, name)(x.astype(np.float64))
        np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-7, err_msg=name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_clamp_and_bwd(K, rng, n, dtype):
    x = rand(rng, n, dtype)
    g = rand(rng, n, dtype)
    if n > 4:
        x[:4] = [-1.0, 1.0, np.nan, -np.inf]  # on the bounds: outside for the gradient
    for lo, hi in ((-1.0, 1.0), (None, 0.5), (-0.5, None), (None, None), (2.0, 1.0)):
        check(K, "clamp", x, lo, hi)
        check(K, "clamp_bwd", x, g, lo, hi)


BWD_X = ["relu_bwd", "abs_bwd", "softplus_bwd", "silu_bwd", "safe_log_bwd", "gelu_bwd"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", BWD_X + ["sqrt_bwd", "sigmoid_bwd", "tanh_bwd"])
def test_elementwise_bwd(K, rng, name, n, dtype):
    if name == "sigmoid_bwd":
        a = rand(rng, n, dtype, 0, 1)
    elif name == "tanh_bwd":
        a = rand(rng, n, dtype, -1, 1)
    elif name == "sqrt_bwd":
        a = rand(rng, n, dtype, 0, 3)
        if n > 2:
            a[:2] = 0.0  # the subgradient at 0
    else:
        a = rand(rng, n, dtype, -6, 6)
        if n > 1:
            a[0] = 0.0
    check(K, name, a, rand(rng, n, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_bwd_with_broadcast_cotangent(K, cp, rng, dtype):
    """A cotangent that is a stride-0 view (as a sum's backward makes) is read correctly."""
    x = rand(rng, (31, 33), dtype)
    g = rand(rng, (33,), dtype)
    want = H.relu_bwd(x, np.broadcast_to(g, x.shape))
    got = K.relu_bwd(dev(K, x), cp.broadcast_to(dev(K, g), x.shape))
    np.testing.assert_array_equal(K.to_host(got), want)
    check(K, "silu_bwd", x, g)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_pow_bwd(K, rng, n, dtype):
    x = rand(rng, n, dtype, 0.2, 3)
    g = rand(rng, n, dtype)
    for p in (0, 1, 2, 3, 0.5, -2.0):
        check(K, "pow_bwd", x, g, p)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_minmax_bwd_ties(K, rng, n, dtype):
    a = rng.integers(-2, 3, n).astype(dtype)  # many ties
    b = rng.integers(-2, 3, n).astype(dtype)
    g = rand(rng, n, dtype)
    for is_max in (True, False):
        check(K, "minmax_bwd", a, b, g, is_max)
    if n:
        check(K, "minmax_bwd", a[:1], b, g, True)  # broadcast operand


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_broadcasting_and_compare(K, rng, dtype):
    a = rand(rng, (4, 1, 31), dtype)
    b = rand(rng, (5, 31), dtype)
    b[0, :4] = a[0, 0, :4]
    for name in ("add", "sub", "mul", "div", "maximum", "minimum"):
        check(K, name, a, b)
    for op in ("lt", "le", "gt", "ge", "eq", "ne"):
        check(K, "compare", a, b, op)
    cond = rng.random((4, 5, 31)) < 0.5
    check(K, "where", cond, a, b)


# ---- reductions -----------------------------------------------------------------------------

SHAPES_2D = [(1, 1), (31, 1000), (4097, 3), (3, 4097), (1, 200003), (200003, 1), (257, 1025), (1000, 17),
             (5, 0)]


def _sum_close(got, x, axis, keepdims=False):
    """A float32 sum against the float64 sum: error bounded by a few ulps of sum |x|."""
    ref = np.asarray(x.astype(np.float64).sum(axis=axis, keepdims=keepdims))
    bound = np.asarray(np.abs(x.astype(np.float64)).sum(axis=axis, keepdims=keepdims))
    eps = np.finfo(x.dtype).eps
    assert got.shape == ref.shape
    assert np.all(np.abs(got - ref) <= 4 * eps * bound + 1e-30), np.abs(got - ref).max()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES_2D)
def test_reduce_axis_kernels(K, rng, shape, dtype):
    x = rand(rng, shape, dtype)
    for axis, name in ((0, "reduce_sum_axis0"), (1, "reduce_sum_axis1")):
        poison(x.nbytes // max(shape[axis], 1))
        got = K.to_host(getattr(K, name)(dev(K, x)))
        _sum_close(got, x, axis)
        assert got.dtype == dtype
    for axis, name in ((0, "reduce_max_axis0"), (1, "reduce_max_axis1")):
        if shape[axis] == 0:
            continue
        check(K, name, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_columns_of_an_offset_view(K, rng, dtype):
    """A contiguous view that starts mid-allocation (its pointer not 16-byte aligned) reduces right."""
    flat = rand(rng, 1 + 31 * 1000, dtype)
    x = dev(K, flat)[1:].reshape(31, 1000)
    got = K.to_host(K.reduce_sum_axis0(x))
    _sum_close(got, flat[1:].reshape(31, 1000), 0)
    np.testing.assert_array_equal(K.to_host(K.reduce_max_axis0(x)), flat[1:].reshape(31, 1000).max(axis=0))


def test_reduce_max_propagates_nan(K, rng):
    x = rand(rng, (7, 2000), np.float32)
    x[3, 1500] = np.nan
    x[5, 0] = np.nan
    check(K, "reduce_max_axis1", x)
    check(K, "reduce_max_axis0", x)
    check(K, "amax", x, -1, True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_sum_axis_nd(K, rng, dtype):
    x = rand(rng, (3, 31, 5, 67), dtype)
    for axis in range(-4, 4):
        got = K.to_host(K.reduce_sum_axis(dev(K, x), axis))
        _sum_close(got, x, axis)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_mean_amax(K, rng, dtype):
    x = rand(rng, (4, 31, 1, 1000), dtype)
    for axes in (None, (0,), (1, 2), (0, 2), (0, 1, 3), (-1,), (-3, -1), ()):
        for keep in (False, True):
            got = K.to_host(K.sum(dev(K, x), axes, keep))
            _sum_close(got, x, axes, keep)
            gm = K.to_host(K.mean(dev(K, x), axes, keep))
            cnt = x.size if axes is None else math.prod(x.shape[a] for a in axes)
            _sum_close(gm * cnt, x, axes, keep)
    for axis in (0, 1, 3, -1):
        for keep in (False, True):
            check(K, "amax", x, axis, keep)
    assert K.sum(dev(K, x)).shape == () and K.mean(dev(K, x)).shape == ()
    # empty inputs: a sum of nothing is 0, a mean of nothing NaN
    e = np.zeros((0, 3), dtype)
    check(K, "sum", e, (0,), False)
    check(K, "sum", e, (1,), False)
    with np.errstate(invalid="ignore", divide="ignore"), pytest.warns(RuntimeWarning):
        check(K, "mean", e, (0,), False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_bwd_first_winner(K, rng, dtype):
    x = rng.integers(0, 4, (5, 31, 7)).astype(dtype)  # ties everywhere
    x[1, 3, 2] = np.nan
    for axis in (0, 1, 2, -1):
        y = H.amax(x, axis, True)
        g = rand(rng, y.shape, dtype)
        check(K, "max_bwd", x, y, g, axis)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_to_shape(K, rng, dtype):
    g = rand(rng, (3, 4, 31, 5), dtype)
    for shape in ((3, 4, 31, 5), (5,), (31, 1), (1, 4, 1, 5), (), (4, 31, 5), (1, 1, 1, 1)):
        got = K.to_host(K.sum_to_shape(dev(K, g), shape))
        want = H.sum_to_shape(g, shape)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-4)


# ---- the seeds' layout kernels --------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES + [np.int32, np.int64, np.bool_, np.float16, np.uint8])
def test_layout_any_dtype(K, rng, dtype):
    x = (rng.standard_normal((31, 1000)) * 10).astype(dtype)
    check(K, "transpose2d", x)
    check(K, "swap_adjacent_at_depth", x, (31, 1000), 0)
    check(K, "concat1d", x[0], x[1, :7])
    check(K, "slice1d", x[2], 5, 900)
    check(K, "broadcast_vec_to_rows", x[0, :33], 31)
    check(K, "broadcast_vec_to_cols", x[0, :33], 17)
    check(K, "broadcast_to", x[:1], *broadcast_plan((1, 1000), (4, 3, 1000)))


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (31, 1000), (4097, 3), (33, 65), (0, 5), (64, 64)])
def test_transpose2d(K, rng, shape):
    check(K, "transpose2d", rand(rng, shape, np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_swap_adjacent_at_depth(K, rng, dtype):
    dims = (3, 31, 5, 67)
    x = rand(rng, dims, dtype).reshape(-1)
    for depth in range(-1, 5):  # out of range: the identity
        check(K, "swap_adjacent_at_depth", x, dims, depth)
    check(K, "swap_adjacent_at_depth", rand(rng, (4097, 3, 1), dtype), (4097, 3, 1), 0)
    check(K, "swap_adjacent_at_depth", rand(rng, (0, 3, 2), dtype), (0, 3, 2), 1)


@pytest.mark.parametrize("n,m", [(0, 0), (0, 5), (1, 1), (31, 4097), (1000, 0)])
def test_concat_slice(K, rng, n, m):
    a, b = rand(rng, n, np.float32), rand(rng, m, np.float32)
    check(K, "concat1d", a, b)
    check(K, "slice1d", b, 0, m)
    if m:
        check(K, "slice1d", b, m - 1, 1)
        check(K, "slice1d", b, m // 3, m - m // 3)
    check(K, "slice1d", b, m, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_vec(K, rng, dtype):
    for rows, cols in ((1, 1), (31, 1000), (4097, 3), (0, 4), (3, 0)):
        check(K, "broadcast_vec_to_rows", rand(rng, cols, dtype), rows)
        check(K, "broadcast_vec_to_cols", rand(rng, rows, dtype), cols)


PLANS = [
    ((3,), (4097, 3), None),
    ((31, 1), (2, 31, 1000), None),
    ((1, 1), (5, 7), None),
    ((), (3, 4), (0, 0)),
    ((5,), (5, 3, 2), (1, 0, 0)),         # the seeds' map: inserted axes after the input's
    ((4, 1, 6), (4, 3, 6, 2), (1, 2, 3, 0)),
    ((2, 3), (2, 3), (1, 2)),
    ((1,), (0, 3), (0, 1)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("in_dims,out_dims,amap", PLANS)
def test_broadcast_to_and_adjoint(K, rng, in_dims, out_dims, amap, dtype):
    if amap is None:
        in_dims, out_dims, amap = broadcast_plan(in_dims, out_dims)
    x = rand(rng, in_dims, dtype)
    check(K, "broadcast_to", x, in_dims, out_dims, amap)
    g = rand(rng, out_dims, dtype)
    g64 = g.astype(np.float64)
    want = H.reduce_from_broadcast_to(g64, in_dims, out_dims, amap)
    got = K.to_host(K.reduce_from_broadcast_to(dev(K, g), in_dims, out_dims, amap))
    assert got.shape == want.shape and got.dtype == dtype
    # A sum of many terms: bound the error by the sum of the magnitudes it adds (order-free).
    scale = H.reduce_from_broadcast_to(np.abs(g64), in_dims, out_dims, amap)
    eps = 1e-6 if dtype == np.float32 else 1e-14
    assert np.all(np.abs(got - want) <= eps * scale + eps), np.max(np.abs(got - want) / (scale + 1))


# ---- linear algebra -------------------------------------------------------------------------


def check_mm(K, name, *args):
    """A matrix product: float64 to the host's precision; float32 against the float64 product by
    the relative norm of the difference (the summation order of cuBLAS and the host BLAS differ,
    so elementwise agreement after cancellation is not to be had; TF32 would sit near 1e-3)."""
    a0 = args[0]
    if a0.dtype == np.float64:
        return check(K, name, *args, tol=(1e-12, 1e-12))
    want = getattr(H, name)(*[a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args])
    got = getattr(K, name)(*[dev(K, a) for a in args])
    wants, gots = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for g, w in zip(gots, wants):
        if w is None:
            assert g is None
            continue
        g = K.to_host(g)
        assert g.shape == w.shape and g.dtype == np.float32, (name, g.shape, w.shape, g.dtype)
        assert not np.isnan(g).any(), name
        if w.size:
            assert np.linalg.norm(g - w) <= 1e-5 * np.linalg.norm(w) + 1e-30, name


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_bmm_linear(K, rng, dtype):
    check_mm(K, "bmm", rand(rng, (3, 31, 65), dtype), rand(rng, (3, 65, 17), dtype))
    check_mm(K, "bmm", rand(rng, (1, 1, 1), dtype), rand(rng, (1, 1, 1), dtype))
    check_mm(K, "matmul", rand(rng, (31, 1000), dtype), rand(rng, (1000, 33), dtype))
    check_mm(K, "matmul", rand(rng, (2, 1, 5, 7), dtype), rand(rng, (3, 7, 4), dtype))
    check_mm(K, "matmul", rand(rng, (7,), dtype), rand(rng, (7, 4), dtype))
    check_mm(K, "matmul", rand(rng, (0, 7), dtype), rand(rng, (7, 4), dtype))
    for xs in ((31, 65), (2, 3, 65), (65,), (0, 65)):
        x, w, b = rand(rng, xs, dtype), rand(rng, (17, 65), dtype), rand(rng, (17,), dtype)
        check_mm(K, "linear", x, w, b)
        check_mm(K, "linear", x, w, None)
        g = rand(rng, xs[:-1] + (17,), dtype)
        check_mm(K, "linear_bwd", x, w, g, True, True, True)
        check_mm(K, "linear_bwd", x, w, g, False, True, False)


# ---- gather / scatter and the index rules ---------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather(K, rng, dtype):
    v = rand(rng, 1000, dtype)
    idx = [0, 999, 1000, 5, 2 ** 32 - 1, 5, 31]  # in uint32 range but out of bounds -> 0
    out = check(K, "gather_vec", v, idx)[0]
    assert out[2] == 0 and out[4] == 0
    mat = rand(rng, (31, 1000), dtype)
    check(K, "gather_rows", mat, [30, 0, 31, 2 ** 32 - 1, 7, 7])
    check(K, "gather_rows", mat, np.array([], dtype=np.int64))
    check(K, "gather_vec", v, [])
    check(K, "gather_rows", rand(rng, (5, 3, 4), dtype), np.arange(7))
    check(K, "gather_vec", v, rng.integers(0, 1100, 4097))


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_add_repeats_accumulate(K, rng, dtype):
    x = rand(rng, 31, dtype)
    idx = [3, 3, 3, 0, 30, 31, 2 ** 32 - 1, 3]
    vals = rand(rng, len(idx), dtype)
    check(K, "scatter_add", x, vals, idx)
    many = rng.integers(0, 40, 4097)  # many collisions, some out of bounds
    # Accumulation runs in index order, as on the host: equal bit for bit, and run to run.
    got = check(K, "scatter_add", x, rand(rng, 4097, dtype), many, tol=(0.0, 0.0))[0]
    ridx_many = rng.integers(0, 35, 3000)
    vm = rand(rng, (3000, 7), dtype)
    first = check(K, "scatter_add_rows", rand(rng, (31, 7), dtype) * 0, vm, ridx_many, tol=(0.0, 0.0))[0]
    again = K.to_host(K.scatter_add_rows(dev(K, np.zeros((31, 7), dtype)), dev(K, vm), ridx_many))
    assert np.array_equal(first, again) and got.shape == (31,)
    mat = rand(rng, (31, 1000), dtype)
    ridx = [0, 5, 5, 30, 31, 2 ** 32 - 1]
    check(K, "scatter_add_rows", mat, rand(rng, (len(ridx), 1000), dtype), ridx)
    check(K, "scatter_add_rows", mat, rand(rng, (0, 1000), dtype), [])
    for i in (0, 30, 31, 2 ** 32 - 1):
        check(K, "scatter_add_row", mat, rand(rng, 1000, dtype), i)


def test_index_rules_checked_on_host_before_launch(K, rng):
    v = dev(K, rand(rng, 10, np.float32))
    mat = dev(K, rand(rng, (4, 3), np.float32))
    before = K.to_host(mat)
    for bad in ([-1], [0, 2 ** 32], [2 ** 70]):
        with pytest.raises(IndexRangeError):
            K.gather_vec(v, bad)
        with pytest.raises(IndexRangeError):
            K.gather_rows(mat, bad)
        with pytest.raises(IndexRangeError):
            K.scatter_add(v, dev(K, np.ones(len(bad), np.float32)), bad)
        with pytest.raises(IndexRangeError):
            K.scatter_add_rows(mat, dev(K, np.ones((len(bad), 3), np.float32)), bad)
    for bad in (-1, 2 ** 32):
        with pytest.raises(IndexRangeError):
            K.scatter_add_row(mat, dev(K, np.ones(3, np.float32)), bad)
    with pytest.raises(DTypeError):
        K.gather_vec(v, [0.5])
    np.testing.assert_array_equal(K.to_host(mat), before)


# ---- memory and transfer --------------------------------------------------------------------


def test_memory_and_transfer(K, cp, rng):
    a = rng.standard_normal((31, 33))
    x = K.from_host(a, np.float32)
    assert x.dtype == np.float32 and x.flags.c_contiguous
    np.testing.assert_array_equal(K.to_host(x), a.astype(np.float32))  # nearest-even rounding
    tie = np.array([1 + 2 ** -24, 1 + 3 * 2 ** -24, -(1 + 2 ** -24)])  # exact ties go to even
    np.testing.assert_array_equal(K.to_host(K.from_host(tie, np.float32)), tie.astype(np.float32))
    assert isinstance(K.to_host(x), np.ndarray)
    assert K.to_host(K.from_host(np.float64(2.5), np.float32)).shape == ()
    t = x.T
    c = K.copy(t)
    assert c.flags.c_contiguous and K.to_host(c).tolist() == a.astype(np.float32).T.tolist()
    assert K.ascontiguous(x) is x and K.ascontiguous(t).flags.c_contiguous
    assert K.astype(x, np.float32) is x and K.astype(x, np.float64).dtype == np.float64
    assert K.to_host(K.zeros((3, 0), np.float32)).shape == (3, 0)
    assert K.to_host(K.full((2, 3), 7.5, np.float64)).tolist() == [[7.5] * 3] * 2
    assert K.empty((4097,), np.float32).shape == (4097,)
    assert K.from_host(np.array([True, False]), bool).dtype == np.bool_


def test_memory_stats(K, cp):
    import torchlean.cuda as tc
    assert tc.is_available()
    tc.synchronize()
    tc.reset_peak_memory_stats()
    s0 = tc.memory_stats()
    for key in ("live_bytes", "peak_bytes", "allocations", "frees", "pool_reserved_bytes", "pool_used_bytes"):
        assert key in s0
    x = cp.ones(1 << 20, dtype=np.float32)  # 4 MiB
    s1 = tc.memory_stats()
    assert s1["live_bytes"] - s0["live_bytes"] == 4 << 20
    assert s1["allocations"] == s0["allocations"] + 1
    assert s1["peak_bytes"] >= s0["live_bytes"] + (4 << 20)
    assert s1["pool_reserved_bytes"] >= 4 << 20
    del x
    s2 = tc.memory_stats()
    assert s2["frees"] == s1["frees"] + 1 and s2["live_bytes"] == s0["live_bytes"]
    tc.reset_peak_memory_stats()
    assert tc.memory_stats()["peak_bytes"] == s2["live_bytes"]
    tc.empty_cache()
    assert isinstance(tc.device_name(), str)


# ---- softmax family and losses --------------------------------------------------------------

# Warp rows (<= 1024), block rows held in registers, and rows long enough for the streaming kernels.
ROWS = [(1, 1), (4097, 31), (9, 200), (3, 1000), (7, 1024), (7, 1025), (2, 5000), (2, 3, 4097), (5,), (0, 7),
        (2, 20000), (2, 40000)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROWS)
def test_softmax_family(K, rng, shape, dtype):
    x = rand(rng, shape, dtype, -20, 20)
    check(K, "softmax", x)
    check(K, "log_softmax", x)
    y = H.softmax(x)
    g = rand(rng, shape, dtype)
    # The row sums inside the backward are float32 on the host and double here; their rounding
    # difference (an ulp of a sum of up to ~10) survives the subtraction g - exp(y) * sum(g).
    tol = (1e-5, 1e-5) if dtype == np.float32 else None
    check(K, "softmax_bwd", y, g, tol=tol)
    check(K, "log_softmax_bwd", H.log_softmax(x), g, tol=tol)
    if x.size:
        x[..., 0] = -np.inf  # a blocked logit
        check(K, "softmax", x)
        check(K, "log_softmax", x)


def test_softmax_against_float64(K, rng):
    x = rand(rng, (64, 3000), np.float32, -30, 30)
    got = K.to_host(K.softmax(dev(K, x)))
    ref = H.softmax(x.astype(np.float64))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-9)
    got = K.to_host(K.log_softmax(dev(K, x)))
    np.testing.assert_allclose(got, H.log_softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (4097, 31), (3, 1000), (5, 2000), (2, 3, 33)])
def test_masked_softmax(K, rng, shape, dtype):
    x = rand(rng, shape, dtype, -10, 10)
    mask = rng.random(shape) < 0.6
    mask.reshape(-1, shape[-1])[0] = False  # a fully blocked row is all zeros
    check(K, "masked_softmax", x, mask)
    check(K, "masked_softmax", x, mask.astype(dtype))
    check(K, "masked_softmax", x, mask[..., :1, :] if len(shape) > 2 else mask[:1])  # broadcast mask


@pytest.mark.parametrize("dtype", DTYPES)
def test_losses(K, rng, dtype):
    yh, t = rand(rng, (31, 7), dtype), rand(rng, (31, 7), dtype)
    check(K, "mse_loss", yh, t)
    check(K, "mse_loss_bwd", yh, t, np.asarray(1.5, dtype))
    logp = H.log_softmax(rand(rng, (31, 5), dtype))
    target = rng.integers(0, 5, 31).astype(np.int64)
    target[3] = -100
    w = rand(rng, 5, dtype, 0.1, 2)
    for weight in (None, w):
        for red in ("mean", "sum", "none"):
            check(K, "nll_loss", logp, target, weight, -100, red)
            g = np.asarray(0.7, dtype) if red != "none" else rand(rng, 31, dtype)
            check(K, "nll_loss_bwd", logp, target, weight, -100, red, g)


# ---- random numbers: the same stream as the CPU ---------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 31, 4097, 100003])
def test_rng_matches_host(K, n):
    for seed, counter in ((0, 0), (1234, 7), (-5, 2 ** 63 + 11), (2 ** 64 - 1, 2 ** 40)):
        for dtype in DTYPES:
            u = K.to_host(K.rand_uniform((n,), seed, counter, dtype))
            np.testing.assert_array_equal(u, H.rand_uniform((n,), seed, counter, dtype))  # bit for bit
            m = K.to_host(K.bernoulli_mask((n,), 0.3, seed, counter, dtype))
            np.testing.assert_array_equal(m, H.bernoulli_mask((n,), 0.3, seed, counter, dtype))
            z = K.to_host(K.randn((n,), seed, counter, dtype))
            zh = H.randn((n,), seed, counter, dtype)
            assert z.dtype == zh.dtype
            # Box-Muller through the GPU's log/cos: equal up to an ulp or two of float64
            np.testing.assert_allclose(z, zh, rtol=4 * np.finfo(dtype).eps, atol=4 * np.finfo(dtype).eps)
            if n and dtype == np.float32:
                assert np.mean(z == zh) > 0.99
    u = K.to_host(K.rand_uniform((3, 5, 7), 9, 1, np.float32))
    assert u.shape == (3, 5, 7) and u.min() >= 0 and u.max() < 1


# ---- optimizer steps: five steps against the host -------------------------------------------


def _opt_run(K, name, n, dtype, rng, make_state, kwargs, steps=5, vmax=False):
    p0 = rand(rng, n, dtype)
    hs = [p0.copy()] + [s.copy() if s is not None else None for s in make_state(p0)]
    ds = [dev(K, a) if a is not None else None for a in hs]
    for step in range(1, steps + 1):
        g = rand(rng, n, dtype)
        kw = {k: (v(step) if callable(v) else v) for k, v in kwargs.items()}
        if vmax:  # adam's amsgrad state is the keyword argument vmax
            getattr(H, name)(hs[0], g, *hs[1:-1], vmax=hs[-1], **kw)
            getattr(K, name)(ds[0], dev(K, g), *ds[1:-1], vmax=ds[-1], **kw)
            continue
        getattr(H, name)(hs[0], g, *hs[1:], **kw)
        getattr(K, name)(ds[0], dev(K, g), *ds[1:], **kw)
    rtol = 2e-5 if dtype == np.float32 else 1e-12
    for h, d in zip(hs, ds):
        if h is not None:
            np.testing.assert_allclose(K.to_host(d), h, rtol=rtol, atol=rtol, err_msg=name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 31, 4097])
def test_optimizer_steps(K, rng, n, dtype):
    z = lambda p: np.zeros_like(p)  # noqa: E731
    for mom, damp, wd, nest in ((0.0, 0.0, 0.0, False), (0.9, 0.1, 1e-2, False), (0.9, 0.0, 0.0, True)):
        state = (lambda p: [z(p)]) if mom else (lambda p: [None])
        _opt_run(K, "sgd_step", n, dtype, rng, state,
                 dict(lr=0.1, momentum=mom, dampening=damp, weight_decay=wd, nesterov=nest,
                      first=lambda s: s == 1))
    for wd, dec, ams in ((0.0, False, False), (1e-2, False, False), (1e-2, True, False), (1e-2, True, True)):
        state = (lambda p: [z(p), z(p), z(p)]) if ams else (lambda p: [z(p), z(p)])
        kw = dict(step=lambda s: s, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=wd, decoupled=dec)
        _opt_run(K, "adam_step", n, dtype, rng, state, kw, vmax=ams)
    _opt_run(K, "adagrad_step", n, dtype, rng, lambda p: [z(p)],
             dict(step=lambda s: s, lr=0.1, lr_decay=0.01, weight_decay=1e-3, eps=1e-10))
    for centered, mom in ((False, 0.0), (True, 0.9), (False, 0.5)):
        _opt_run(K, "rmsprop_step", n, dtype, rng,
                 lambda p: [z(p), z(p) if mom > 0 else None, z(p) if centered else None],
                 dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=1e-3, momentum=mom))
    _opt_run(K, "adadelta_step", n, dtype, rng, lambda p: [z(p), z(p)],
             dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0))


def test_optimizer_noncontiguous_param(K, cp, rng):
    p = rand(rng, (8, 6), np.float32)
    g = rand(rng, (6, 8), np.float32).T
    dp = dev(K, p.T.copy()).T  # a non-contiguous view is updated in place through a copy
    m, v = cp.zeros((8, 6), np.float32), cp.zeros((8, 6), np.float32)
    K.adam_step(dp, dev(K, np.ascontiguousarray(g)), m, v, 1, 1e-2, 0.9, 0.999, 1e-8, 0.0, False)
    H.adam_step(p, np.ascontiguousarray(g), np.zeros_like(p), np.zeros_like(p), 1, 1e-2, 0.9, 0.999, 1e-8, 0.0,
                False)
    np.testing.assert_allclose(K.to_host(dp), p, rtol=1e-6)


# ---- layer kernels (the host modules run on CuPy) ------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_kernels_match_host(K, rng, dtype):
    tol = (1e-4, 1e-4) if dtype == np.float32 else (1e-10, 1e-10)
    x = rand(rng, (2, 3, 9, 7), dtype)
    w = rand(rng, (4, 3, 3, 2), dtype)
    b = rand(rng, 4, dtype)
    check(K, "conv_forward", x, w, b, (2, 1), (1, 0), (1, 2), 1, tol=tol)
    y = H.conv_forward(x, w, b, (2, 1), (1, 0), (1, 2), 1)
    check(K, "conv_backward", x, w, rand(rng, y.shape, dtype), (2, 1), (1, 0), (1, 2), 1, True, True, True,
          tol=tol)
    check(K, "max_pool_forward", x, (2, 3), (2, 2), (1, 1), (1, 1), tol=tol)
    check(K, "layer_norm_fwd", rand(rng, (31, 65), dtype), rand(rng, 65, dtype), rand(rng, 65, dtype), 1e-5,
          tol=tol)
    q, k, v = rand(rng, (2, 5, 8), dtype), rand(rng, (2, 6, 8), dtype), rand(rng, (2, 6, 3), dtype)
    mask = rng.random((2, 5, 6)) < 0.7
    check(K, "flash_attention_fwd", q, k, v, mask, 0.35, True, tol=tol)
    check(K, "rfft1d_packed", rand(rng, (3, 31), dtype), tol=tol)
    a, bb, xs, h0 = rand(rng, 5, dtype, -1, 1), rand(rng, 5, dtype), rand(rng, (2, 31, 5), dtype), rand(rng, (2, 5),
                                                                                                    dtype)
    check(K, "selective_scan_diag_fwd", a, bb, xs, h0, tol=tol)


# (N, C_in, C_out, spatial, kernel, stride, padding, dilation, groups)
CONV_CASES = [
    (2, 3, 4, (11,), (3,), (2,), (1,), (1,), 1),
    (3, 4, 6, (9, 7), (3, 2), (2, 1), (1, 0), (1, 2), 2),
    (1, 2, 3, (5, 6, 7), (2, 3, 2), (2, 1, 2), (1, 1, 0), (2, 1, 1), 1),
    (2, 4, 6, (5, 3), (1, 1), (1, 1), (0, 0), (1, 1), 2),
    (5, 8, 8, (13, 13), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (2, 4, 4, (10, 9), (3, 3), (1, 1), (2, 1), (2, 1), 2),
    (2, 3, 3, (7,), (1,), (1,), (1,), (1,), 1),
    (2, 2, 2, (4, 3, 3, 5), (2, 1, 2, 3), (1, 2, 1, 2), (0, 1, 1, 1), (1, 1, 1, 2), 1),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_native(K, rng, monkeypatch, case, chunked, dtype):
    n, ci, co, sp, k, s, p, dil, groups = case
    if chunked:  # a tiny column budget: one sample per chunk
        monkeypatch.setattr("torchlean.kernels.cuda.conv.COLS_BUDGET", 1)
    tol = (1e-4, 1e-4) if dtype == np.float32 else (1e-11, 1e-11)
    x = rand(rng, (n, ci) + sp, dtype, -1, 1)
    w = rand(rng, (co, ci // groups) + k, dtype, -1, 1)
    b = rand(rng, co, dtype, -1, 1) if n != 3 else None
    y = check(K, "conv_forward", x, w, b, s, p, dil, groups, tol=tol)[0]
    g = rand(rng, y.shape, dtype, -1, 1)
    check(K, "conv_backward", x, w, g, s, p, dil, groups, True, True, True, tol=tol)
    check(K, "conv_backward", x, w, g, s, p, dil, groups, False, True, False, tol=tol)
    op = tuple(min(si, di) - 1 for si, di in zip(s, dil))  # the largest output padding allowed
    wt = rand(rng, (ci, co // groups) + k, dtype, -1, 1)
    yt = check(K, "conv_transpose_forward", x, wt, b, s, p, op, dil, groups, tol=tol)[0]
    gt = rand(rng, yt.shape, dtype, -1, 1)
    check(K, "conv_transpose_backward", x, wt, gt, s, p, op, dil, groups, True, True, True, tol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lead,L,S", [((), 1, 1), ((2,), 31, 5), ((3, 2), 100, 33), ((), 1000, 4)])
def test_selective_scan_native(K, rng, lead, L, S, dtype):
    tol = (2e-5, 2e-5) if dtype == np.float32 else (1e-12, 1e-12)
    x, h0 = rand(rng, lead + (L, S), dtype), rand(rng, lead + (S,), dtype)
    g = rand(rng, lead + (L, S), dtype)
    a, b = rand(rng, S, dtype, -0.99, 0.99), rand(rng, S, dtype)
    h = check(K, "selective_scan_diag_fwd", a, b, x, h0, tol=tol)[0]
    check(K, "selective_scan_diag_bwd", a, b, x, h0, h, g, tol=(1e-4, 1e-4) if dtype == np.float32 else tol)
    av, bv = rand(rng, lead + (L, S), dtype, -0.99, 0.99), rand(rng, lead + (L, S), dtype)
    hv = check(K, "selective_scan_diag_var_fwd", av, bv, x, h0, tol=tol)[0]
    check(K, "selective_scan_diag_var_bwd", av, bv, x, h0, hv, g, tol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,n", [(1, 1), (7, 32), (31, 65), (4097, 33), (5, 1000), (3, 4097), (2, 9000)])
def test_layer_norm_native(K, rng, rows, n, dtype):
    tol = (2e-5, 2e-5) if dtype == np.float32 else (1e-12, 1e-12)
    x = rand(rng, (rows, n), dtype) + 2.0  # an offset: the mean must come off before squaring
    gamma, beta = rand(rng, n, dtype), rand(rng, n, dtype)
    for gm, bt in ((gamma, beta), (None, None), (gamma, None)):
        y, mean, rstd = check(K, "layer_norm_fwd", x, gm, bt, 1e-5, tol=tol)
        g = rand(rng, (rows, n), dtype)
        # dgamma/dbeta sum over every row: host and device add in different orders in float32.
        check(K, "layer_norm_bwd", x, gm, mean, rstd, g, tol=(1e-3, 1e-3) if dtype == np.float32 else tol)


# ---- native spectral convolution (src/spectral.cu) -------------------------------------------

SPECTRAL = ["spectral_conv1d_rfft_fwd", "spectral_conv1d_rfft_bwd_x", "spectral_conv1d_rfft_bwd_wre",
            "spectral_conv1d_rfft_bwd_wim"]


# (batch, grid, in, out, modes): size 1; odd and even grids with modes = grid//2 + 1 (the Nyquist
# bin); channels over the 32-channel staging and the 128-thread tiles; a split grid axis.
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["dft", "fft"])
@pytest.mark.parametrize("B,n,ci,co,m", [(1, 1, 1, 1, 1), (2, 31, 3, 5, 16), (3, 64, 4, 2, 33),
                                         (9, 100, 70, 130, 7), (4, 4096, 8, 8, 32), (1, 2048, 3, 2, 40)])
def test_spectral_conv_native(K, rng, monkeypatch, B, n, ci, co, m, path, dtype):
    monkeypatch.setattr("torchlean.kernels.cuda.spectral.FORCE_PATH", path)
    x, g = rand(rng, (B, n, ci), dtype), rand(rng, (B, n, co), dtype)
    w_re, w_im = rand(rng, (m, ci, co), dtype, -1, 1), rand(rng, (m, ci, co), dtype, -1, 1)
    eps = 3e-5 if dtype == np.float32 else 1e-12
    for name in SPECTRAL:
        args = (x, w_re, w_im) if name.endswith("fwd") else (x, w_re, w_im, g)
        scale = float(np.abs(getattr(H, name)(*args)).max())  # a truncated DFT errs relative to the peak
        check(K, name, *args, tol=(0.0, eps * max(scale, 1e-30)))
    for need_x, need_w in ((True, True), (True, False), (False, True)):
        want = H.spectral_conv1d_rfft_bwd(x, w_re, w_im, g, need_x, need_w)
        scale = max(float(np.abs(w).max()) for w in want if w is not None)
        check(K, "spectral_conv1d_rfft_bwd", x, w_re, w_im, g, need_x, need_w, tol=(0.0, eps * max(scale, 1e-30)))


def test_spectral_conv_split_and_determinism(K, rng, monkeypatch):
    x, g = rand(rng, (3, 512, 5), np.float32), rand(rng, (3, 512, 6), np.float32)
    w_re, w_im = rand(rng, (2, 9, 5, 6), np.float32, -1, 1)
    for split in (1, 2, 8):
        monkeypatch.setattr("torchlean.kernels.cuda.spectral.SPLIT", split)
        for name in SPECTRAL[1:]:
            want = getattr(H, name)(x, w_re, w_im, g)
            check(K, name, x, w_re, w_im, g, tol=(0.0, 3e-5 * float(np.abs(want).max())))
        want = H.spectral_conv1d_rfft_bwd(x, w_re, w_im, g, True, True)
        check(K, "spectral_conv1d_rfft_bwd", x, w_re, w_im, g, True, True,
              tol=(0.0, 3e-5 * max(float(np.abs(w).max()) for w in want)))
    args = [dev(K, a) for a in (x, w_re, w_im, g)]
    a, b = (K.to_host(K.spectral_conv1d_rfft_bwd_wre(*args)) for _ in range(2))
    assert np.array_equal(a, b)


# ---- direct cuBLAS: the matrix products recorded in CUDA graphs ----------------------------


def _same_product(cp, got, want):
    """Equal to ``cupy.matmul``'s product up to summation order (relative norm of the difference)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    g, w = cp.asnumpy(got), cp.asnumpy(want)
    assert not np.isnan(g).any(), "unwritten (NaN) output elements"
    tol = 1e-5 if w.dtype == np.float32 else 1e-12
    assert np.linalg.norm(g - w) <= tol * np.linalg.norm(w) + 1e-30


GEMM_CASES = [
    ((31, 65), (65, 17)),             # odd sizes
    ((1, 1), (1, 1)),
    ((1, 65), (65, 1)),
    ((7,), (7, 5)), ((5, 7), (7,)), ((7,), (7,)),
    ((3, 31, 65), (3, 65, 17)),       # batched
    ((2, 1, 5, 7), (3, 7, 4)),        # broadcast batch axes
    ((4, 5, 7), (7, 3)), ((5, 7), (2, 7, 3)), ((2, 3, 5, 7), (7,)),
    ((0, 7), (7, 4)), ((3, 0), (0, 4)), ((2, 0, 3), (2, 3, 5)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", GEMM_CASES)
def test_gemm_direct_equals_cupy_matmul(K, cp, rng, sa, sb, dtype):
    from torchlean.kernels.cuda import gemm
    a, b = cp.asarray(rand(rng, sa, dtype)), cp.asarray(rand(rng, sb, dtype))
    want = cp.matmul(a, b)
    poison(want.nbytes)
    _same_product(cp, gemm.gemm(a, b), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_transposed_and_strided_operands(K, cp, rng, dtype):
    from torchlean.kernels.cuda import gemm
    a, b = cp.asarray(rand(rng, (65, 31), dtype)), cp.asarray(rand(rng, (17, 65), dtype))
    A, B = cp.asarray(rand(rng, (3, 7, 5), dtype)), cp.asarray(rand(rng, (3, 9, 7), dtype))
    big = cp.asarray(rand(rng, (80, 70), dtype))
    cases = [
        (a.T, b.T),                                    # both transposed views: cuBLAS's T flag
        (a.T, cp.ascontiguousarray(b.T)), (cp.ascontiguousarray(a.T), b.T),
        (big[:31, :65], big[3:68, 40:57]),             # row pitch larger than the row (ld > cols)
        (big[:65, 2:33].T, big[:65, :17]),             # a transposed view of a padded block
        (big[::2, :65], big[:65, ::-1][:, :17]),       # every other row; negative strides (copied)
        (cp.swapaxes(A, 1, 2), cp.swapaxes(B, 1, 2)),  # batched transposes
        (A[:, ::2], B[:, ::2].transpose(0, 2, 1)[:, :5, :]),
        (cp.broadcast_to(A[0], (4, 7, 5)), cp.ones((4, 5, 3), dtype)),  # a zero batch stride (copied)
        (B[:, :, :5].T, cp.ones((5, 3, 4), dtype)),    # a full 3-d transpose (copied)
    ]
    for x, y in cases:
        want = cp.matmul(x, y)
        poison(want.nbytes)
        _same_product(cp, gemm.gemm(x, y), want)


def test_gemm_is_strict_fp32_unless_tf32_is_set(K, cp, rng):
    import torchlean.cuda as tc
    from torchlean.kernels.cuda import gemm
    a, b = rand(rng, (512, 512), np.float32), rand(rng, (512, 512), np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)

    def err():
        got = cp.asnumpy(gemm.gemm(cp.asarray(a), cp.asarray(b)))
        return np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err() < 1e-5
    tc.set_tf32(True)
    try:
        assert err() > 1e-5  # TF32's 10-bit mantissa: near 1e-4 .. 1e-3
    finally:
        tc.set_tf32(False)
    assert err() < 1e-5


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_is_captured_by_a_cuda_graph(K, cp, rng, dtype):
    """Products inside a stream capture: recorded, and each replay reads the inputs' new values."""
    from torchlean.kernels.cuda import gemm
    assert not gemm.active()
    a = cp.asarray(rand(rng, (3, 33, 65), dtype))
    w = cp.asarray(rand(rng, (17, 65), dtype))
    pool, stream = cp.cuda.MemoryPool(), cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()

    def step():
        y = K.linear(a, w, None)                                  # a batch against w.T
        z = K.matmul(cp.swapaxes(y, 1, 2), y)                     # batched, a transposed operand
        dx, dw, _ = K.linear_bwd(a, w, y, True, True, False)
        return z, dx, dw

    with cp.cuda.using_allocator(pool.malloc), stream, gemm.capture_scope(stream) as ws:
        assert gemm.active() and ws is not None
        step()
        stream.synchronize()
        stream.begin_capture()
        outs = step()
        graph = stream.end_capture()
    assert not gemm.active()
    for _ in range(2):
        a[...] = cp.asarray(rand(rng, a.shape, dtype))
        w[...] = cp.asarray(rand(rng, w.shape, dtype))
        graph.launch()
        cp.cuda.Device().synchronize()
        y = cp.matmul(a, w.T)
        wants = (cp.matmul(cp.swapaxes(y, 1, 2), y), cp.matmul(y, w),
                 cp.matmul(y.reshape(-1, 17).T, a.reshape(-1, 65)))
        for got, want in zip(outs, wants):
            _same_product(cp, got, want)


# ---- host-overhead paths: raw binary launches, fused NLL, vectorized sums, multi-tensor Adam --


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_raw_launch_layouts(K, cp, rng, dtype):
    """Same-dtype float operands in the one-launch layouts equal NumPy bit for bit (IEEE ops)."""
    cases = [((1000,), (1000,)), ((4097,), (1,)), ((), (31,)), ((), ()), ((33, 65), (65,)), ((3, 5, 7), (7,)),
             ((31,), ()), ((0,), (0,)), ((0, 4), (4,))]
    for sa, sb in cases:
        a, b = rand(rng, sa, dtype), rand(rng, sb, dtype, 0.5, 2.0)
        for name, f in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
            for x, y in ((a, b), (b, a)) if name in ("sub", "div") else ((a, b),):
                poison(max(np.broadcast(x, y).size, 1) * np.dtype(dtype).itemsize)
                got = K.to_host(getattr(K, name)(dev(K, x), dev(K, y)))
                want = f(x, y)
                assert got.shape == want.shape and got.dtype == want.dtype, (name, sa, sb)
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {x.shape} {y.shape}")
    # Layouts outside the fast path (strided views, mixed dtypes) still follow NumPy.
    m = rand(rng, (8, 6), dtype)
    got = K.to_host(K.add(dev(K, m)[:, ::2], dev(K, m)[:, 1::2]))
    np.testing.assert_array_equal(got, m[:, ::2] + m[:, 1::2])
    mixed = K.mul(dev(K, m), dev(K, m.astype(np.float32 if dtype == np.float64 else np.float64)))
    assert mixed.dtype == np.float64


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_bias_in_place_row_add(K, rng, dtype):
    x, w, b = rand(rng, (37, 19), dtype), rand(rng, (23, 19), dtype), rand(rng, 23, dtype)
    got = K.to_host(K.linear(dev(K, x), dev(K, w), dev(K, b)))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, x @ w.T + b, rtol=tol, atol=tol)


def test_nll_fused_ignored_rows_and_empty(K, rng):
    logp = H.log_softmax(rand(rng, (9, 4), np.float32))
    target = np.full(9, -100, dtype=np.int64)  # every row ignored: mean is 0 / 0
    out = K.to_host(K.nll_loss(dev(K, logp), dev(K, target), None, -100, "mean"))
    assert np.isnan(out) and out.shape == ()
    assert K.to_host(K.nll_loss(dev(K, logp), dev(K, target), None, -100, "sum")) == 0
    g = K.to_host(K.nll_loss_bwd(dev(K, logp), dev(K, target), None, -100, "sum", dev(K, np.float32(2.0))))
    assert g.shape == (9, 4) and not np.isnan(g).any() and (g == 0).all()
    t2 = rng.integers(0, 4, 4097).astype(np.int64)
    lp2 = H.log_softmax(rand(rng, (4097, 4), np.float64))
    for red in ("mean", "sum", "none"):
        check(K, "nll_loss", lp2, t2, None, 7, red)


@pytest.mark.parametrize("n", [1 << 16, (1 << 16) + 3, 1 << 22, 3_000_001])
def test_sum_vectorized_whole_array(K, cp, rng, n):
    x = rand(rng, n, np.float32)
    got = K.to_host(K.sum(dev(K, x)))
    ref = x.astype(np.float64).sum()
    assert abs(float(got) - ref) <= 1e-6 * np.abs(x.astype(np.float64)).sum()
    np.testing.assert_allclose(K.to_host(K.mean(dev(K, x))), x.astype(np.float64).mean(), rtol=1e-5, atol=1e-7)
    assert float(K.to_host(K.amax(dev(K, x), None))) == x.max()
    d = dev(K, x)
    off = d[1:]  # 4-byte offset: not 16-byte aligned, the scalar kernel runs
    assert abs(float(K.to_host(K.sum(off))) - x[1:].astype(np.float64).sum()) <= 1e-6 * np.abs(x).sum()
    x[n // 2] = np.nan
    assert np.isnan(K.to_host(K.amax(dev(K, x), None)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opts", [dict(), dict(weight_decay=0.1), dict(weight_decay=0.1, decoupled=True),
                                  dict(ams=True), dict(maximize=True, weight_decay=0.05)])
def test_adam_multi_matches_per_tensor(K, cp, rng, dtype, opts):
    """One launch over many tensors (more than a launch's table holds) gives adam_step's bits."""
    sizes = [1, 31, 0, 1000, 4097, 3] * 5
    wd, dec, ams, mx = opts.get("weight_decay", 0.0), opts.get("decoupled", False), opts.get("ams", False), \
        opts.get("maximize", False)
    steps = [3 if i % 7 else 1 for i in range(len(sizes))]  # two step counts: two runs
    host_state = []
    for s in sizes:
        host_state.append([rand(rng, s, dtype), rand(rng, s, dtype), rand(rng, s, dtype) * 0.1,
                           rand(rng, s, dtype, 0.0, 0.5), rand(rng, s, dtype, 0.0, 0.6)])
    ref = [[dev(K, a.copy()) for a in st] for st in host_state]
    got = [[dev(K, a.copy()) for a in st] for st in host_state]
    for (p, g, m, v, x), step in zip(ref, steps):
        K.adam_step(p, -g if mx else g, m, v, step, 1e-2, 0.9, 0.999, 1e-8, wd, dec, x if ams else None)
    # A transposed (non-contiguous) parameter takes the per-tensor kernel inside the multi call.
    pm = rand(rng, (6, 5), dtype)
    pg, pz = rand(rng, (5, 6), dtype), np.zeros((5, 6), dtype)
    p_ref, p_got = dev(K, pm.copy()).T, dev(K, pm.copy()).T
    m_ref, v_ref, m_got, v_got = (dev(K, pz.copy()) for _ in range(4))
    K.adam_step(p_ref, -dev(K, pg) if mx else dev(K, pg), m_ref, v_ref, 2, 1e-2, 0.9, 0.999, 1e-8, wd, dec,
                dev(K, pz.copy()) if ams else None)
    K.adam_step_multi([s[0] for s in got] + [p_got], [s[1] for s in got] + [dev(K, pg)],
                      [s[2] for s in got] + [m_got], [s[3] for s in got] + [v_got],
                      [s[4] if ams else None for s in got] + [dev(K, pz.copy()) if ams else None],
                      steps + [2], 1e-2, 0.9, 0.999, 1e-8, wd, dec, mx)
    for r, o in zip(ref, got):
        for k in (0, 2, 3, 4):
            np.testing.assert_array_equal(K.to_host(o[k]), K.to_host(r[k]))
    np.testing.assert_array_equal(K.to_host(p_got), K.to_host(p_ref))
    np.testing.assert_array_equal(K.to_host(v_got), K.to_host(v_ref))


def test_optimizer_adam_cuda_matches_cpu_trajectory(K):
    """torch-style Adam on CUDA parameters (multi-tensor path) follows the CPU trajectory."""
    import torchlean as tl
    from torchlean import optim
    rng = np.random.default_rng(5)
    for kw in (dict(), dict(amsgrad=True, weight_decay=0.1), dict(maximize=True)):
        for cls in (optim.Adam, optim.AdamW):
            inits = [rng.standard_normal(s).astype(np.float32) for s in ((7, 3), (3,), (1,), (40,))]
            grads = [[rng.standard_normal(a.shape).astype(np.float32) for a in inits] for _ in range(4)]
            traj = []
            for device in ("cpu", "cuda"):
                ps = [tl.nn.Parameter(tl.tensor(a).to(device)) for a in inits]
                opt = cls(ps, lr=1e-2, **kw)
                for gs in grads:
                    for p, g in zip(ps, gs):
                        p.grad = tl.tensor(g).to(device)
                    opt.step()
                traj.append([p.numpy() for p in ps] + [opt.state_dict()["state"][0]["step"]])
            for a, b in zip(traj[0][:-1], traj[1][:-1]):
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
            assert traj[0][-1] == traj[1][-1] == 4


# ---- native flash attention (src/attention.cu) ----------------------------------------------


def _fa_reference(q, k, v, mask, scale, hard, g):
    """Float64 host forward and backward of float32 inputs: the reference the kernels approach."""
    up = [None if a is None else a.astype(np.float64) for a in (q, k, v)]
    out, lse = H.flash_attention_fwd(*up, mask, scale, hard)
    grads = H.flash_attention_bwd(*up, mask, out, lse, g.astype(np.float64), scale, hard)
    return out, lse, grads


@pytest.mark.parametrize("B,n,m,d,e", [(1, 1, 1, 1, 1), (2, 5, 6, 8, 3), (3, 64, 64, 16, 16), (2, 65, 130, 32, 24),
                                       (2, 200, 77, 64, 64), (1, 129, 300, 100, 128), (2, 70, 40, 130, 20)])
@pytest.mark.parametrize("masking", ["none", "soft", "hard", "hard_empty_rows", "broadcast"])
@pytest.mark.parametrize("variant", ["device", "fma"])
def test_flash_attention_native(K, rng, monkeypatch, B, n, m, d, e, masking, variant):
    """Tensor-core (3xTF32) kernels where the device has them, and the float32 FMA kernels."""
    from torchlean.kernels.cuda import attention
    monkeypatch.setattr(attention, "FORCE_TENSOR_CORES", None if variant == "device" else False)
    q, k, v = rand(rng, (B, n, d), np.float32, -1, 1), rand(rng, (B, m, d), np.float32, -1, 1), \
        rand(rng, (B, m, e), np.float32, -1, 1)
    g = rand(rng, (B, n, e), np.float32, -1, 1)
    mask, hard = None, masking.startswith("hard")
    if masking in ("soft", "hard"):
        mask = rng.random((B, n, m)) < 0.6
    elif masking == "hard_empty_rows":
        mask = rng.random((B, n, m)) < 0.5
        mask[:, ::3] = False  # rows with no allowed key: out 0, lse +inf, no gradient
    elif masking == "broadcast":
        mask = np.broadcast_to(np.tril(np.ones((n, m), bool)), (B, n, m))  # causal, shared by the batch
    scale = 1.0 / math.sqrt(d)
    out_w, lse_w, (dq_w, dk_w, dv_w) = _fa_reference(q, k, v, mask, scale, hard, g)
    dmask = None if mask is None else K.from_host(np.ascontiguousarray(mask), bool)
    if masking == "broadcast":
        import cupy
        dmask = cupy.broadcast_to(K.from_host(np.tril(np.ones((n, m), bool)), bool), (B, n, m))
    poison(out_w.nbytes * 4)
    out, lse = K.flash_attention_fwd(dev(K, q), dev(K, k), dev(K, v), dmask, scale, hard)
    out, lse = host(K, out), host(K, lse)
    assert out.dtype == lse.dtype == np.float32
    np.testing.assert_allclose(out, out_w, rtol=1e-4, atol=2e-5)
    finite = np.isfinite(lse_w)
    assert np.array_equal(np.isfinite(lse), finite)
    np.testing.assert_allclose(lse[finite], lse_w[finite], rtol=1e-5, atol=1e-5)
    assert np.all(lse[~finite] == np.inf)
    grads = K.flash_attention_bwd(dev(K, q), dev(K, k), dev(K, v), dmask, dev(K, out), dev(K, lse), dev(K, g),
                                  scale, hard)
    for name, got, want in zip(("dq", "dk", "dv"), grads, (dq_w, dk_w, dv_w)):
        got = host(K, got)
        assert got.shape == want.shape and got.dtype == np.float32, name
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(want).max())),
                                   err_msg=name)
    dq_only = host(K, K.flash_attention_bwd_q(dev(K, q), dev(K, k), dev(K, v), dmask, dev(K, out), dev(K, lse),
                                              dev(K, g), scale, hard))
    np.testing.assert_array_equal(dq_only, host(K, grads[0]))


def test_flash_attention_native_deterministic(K, rng):
    q, k, v, g = (rand(rng, (4, 300, 64), np.float32, -1, 1) for _ in range(4))
    args = [dev(K, a) for a in (q, k, v)]
    out, lse = K.flash_attention_fwd(*args, None, 0.125, False)
    first = [host(K, t) for t in K.flash_attention_bwd(*args, None, out, lse, dev(K, g), 0.125, False)]
    again = [host(K, t) for t in K.flash_attention_bwd(*args, None, out, lse, dev(K, g), 0.125, False)]
    for a, b in zip(first, again):
        assert np.array_equal(a, b)


def test_flash_attention_two_streams_match_one(K, rng, monkeypatch):
    """The backward's dq and dk/dv kernels on two streams give exactly what one stream gives, also
    on a stream of the caller's whose inputs were written just before (the side stream waits for
    them, and the caller's stream for the side stream's results)."""
    import cupy
    from torchlean.kernels.cuda import attention
    q, k, v, g = (rand(rng, (3, 333, 64), np.float32, -1, 1) for _ in range(4))
    res = {}
    for concurrent in (False, True):
        monkeypatch.setattr(attention, "CONCURRENT_BWD", concurrent)
        with cupy.cuda.Stream(non_blocking=True) as s:
            args = [dev(K, a) * 1.0 for a in (q, k, v)]  # written on s just before the backward reads them
            out, lse = K.flash_attention_fwd(*args, None, 0.125, False)
            grads = K.flash_attention_bwd(*args, None, out, lse, dev(K, g) * 1.0, 0.125, False)
            doubled = [t * 2 for t in grads]               # read on s right after
            s.synchronize()
        res[concurrent] = [host(K, t) for t in list(grads) + doubled]
    for a, b in zip(res[False], res[True]):
        assert np.array_equal(a, b)
    _, _, (dq_w, dk_w, dv_w) = _fa_reference(q, k, v, None, 0.125, False, g)
    for got, want in zip(res[True][:3], (dq_w, dk_w, dv_w)):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_flash_attention_tensor_cores_match_fma(K, rng, monkeypatch):
    """The 3xTF32 products are float32-accurate: the two kernel families agree to float32 rounding,
    also for logits of about 100, where TF32 alone (10-bit mantissa) would move them by about 0.1."""
    from torchlean.kernels.cuda import attention
    q, k, v, g = (rand(rng, (2, 190, 64), np.float32, -4, 4) for _ in range(4))
    args = [dev(K, a) for a in (q, k, v)]
    res = {}
    for force in (None, False):
        monkeypatch.setattr(attention, "FORCE_TENSOR_CORES", force)
        out, lse = K.flash_attention_fwd(*args, None, 0.3, False)
        grads = K.flash_attention_bwd(*args, None, out, lse, dev(K, g), 0.3, False)
        res[force] = [host(K, t) for t in (out, lse) + tuple(grads)]
    for a, b in zip(res[None], res[False]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(np.abs(b[np.isfinite(b)]).max()))
