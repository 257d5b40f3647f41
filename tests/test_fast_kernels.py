"""The seeds' fast-kernel options: reference mode, fast kernels, and the use_gpu hint."""

from types import SimpleNamespace

import numpy as np
import pytest

import torchlean.autograd.dispatch as dispatch
from torchlean.autograd import Tape
from torchlean.errors import DomainError
from torchlean.kernels import HOST, cuda_available, get_kernels, routed
from torchlean.options import get_options, options
from torchlean.spec import SPEC


def _cases(rng):
    """(op, inputs) pairs exercising every routed product and mse_loss."""
    return [
        ("matmul", (rng.standard_normal((3, 4)), rng.standard_normal((4, 5)))),
        ("matmul", (rng.standard_normal((2, 1, 3, 4)), rng.standard_normal((5, 4, 2)))),
        ("matmul", (rng.standard_normal(4), rng.standard_normal(4))),
        ("bmm", (rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5)))),
        ("linear", (rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal((6, 4)))),
        ("linear_nobias", (rng.standard_normal((3, 4)), rng.standard_normal((2, 5, 4)))),
        ("mse_loss", (rng.standard_normal((4, 3)), rng.standard_normal((4, 3)))),
    ]


def _run(name, xs, dtype, g=None, **tape_kw):
    """Forward value and gradients of every input through a Tape, cotangent ``g`` (ones if None)."""
    t = Tape(**tape_kw)
    ids = [t.leaf(np.asarray(x, dtype=dtype)) for x in xs]
    out = t.op(name, *ids)
    seed = None if g is None else np.asarray(g, dtype=dtype)
    grads = t.backward(out, seed=seed)
    return t.value(out), [grads[i] for i in ids]


def test_reference_mode_gives_the_spec_numbers(rng):
    for name, xs in _cases(rng):
        y_ref = SPEC[name].forward(*xs)
        g = rng.standard_normal(np.shape(y_ref))
        vjp = SPEC[name].vjp(g, *xs)
        with options(fast_kernels=False):
            assert get_options().fast_kernels is False
            y, grads = _run(name, xs, np.float64, g)
        # Reference mode runs the spec functions themselves: bit-for-bit the same numbers.
        np.testing.assert_array_equal(y, y_ref, err_msg=name)
        for got, want in zip(grads, vjp):
            np.testing.assert_array_equal(got, want, err_msg=name)


def test_fast_kernels_within_float32_tolerance_of_spec(rng):
    for name, xs in _cases(rng):
        y_ref = SPEC[name].forward(*xs)
        g = rng.standard_normal(np.shape(y_ref))
        vjp = SPEC[name].vjp(g, *xs)
        with options(fast_kernels=True):
            y, grads = _run(name, xs, np.float32, g)
        assert y.dtype == np.float32 and y.shape == np.shape(y_ref), name
        np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5, err_msg=name)
        for got, want in zip(grads, vjp):
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_tape_argument_overrides_global_option(rng):
    xs = (rng.standard_normal((3, 4)), rng.standard_normal((4, 2)))
    with options(fast_kernels=True):
        y_ref, _ = _run("matmul", xs, np.float64, fast_kernels=False)
    np.testing.assert_array_equal(y_ref, SPEC["matmul"].forward(*xs))


def test_use_gpu_without_gpu_is_ignored(rng, monkeypatch):
    # Whatever this machine has, pretend it has no GPU: the hint must then change nothing.
    monkeypatch.setattr(dispatch, "routed_host", lambda precision: HOST)
    for name, xs in _cases(rng):
        for dtype in (np.float32, np.float64):
            y0, g0 = _run(name, xs, dtype)
            with options(use_gpu=True, gpu_precision="fp32"):
                y1, g1 = _run(name, xs, dtype)
            np.testing.assert_array_equal(y0, y1, err_msg=name)
            for a, b in zip(g0, g1):
                np.testing.assert_array_equal(a, b, err_msg=name)


def test_use_gpu_hint_on_this_machine_matches_cpu(rng):
    # Real probe: without a GPU the CPU path runs unchanged; with one, results agree to float32.
    xs = (rng.standard_normal((5, 7)), rng.standard_normal((7, 3)))
    y0, _ = _run("matmul", xs, np.float64)
    with options(use_gpu=True):
        y1, _ = _run("matmul", xs, np.float64)
    if not cuda_available():
        np.testing.assert_array_equal(y0, y1)
    else:
        np.testing.assert_allclose(y1, y0, rtol=1e-5, atol=1e-5)


class _FakeGPU:
    """A stand-in device surface that records uploads and multiplies in the uploaded dtype."""

    def __init__(self):
        self.uploads = []
        self.calls = 0

    def namespace(self):
        def from_host(a, dtype):
            self.uploads.append(np.dtype(dtype))
            return np.asarray(a, dtype=dtype)

        def matmul(a, b):
            self.calls += 1
            return np.matmul(a, b)

        def matmul_t(a, b, ta, tb):
            return matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)

        return SimpleNamespace(from_host=from_host, matmul=matmul, matmul_t=matmul_t, to_host=lambda x: np.array(x))


@pytest.mark.parametrize("precision,dtype", [("fp32", np.float32), ("fp64", np.float64)])
def test_use_gpu_routes_every_product_in_the_requested_precision(rng, monkeypatch, precision, dtype):
    fake = _FakeGPU()
    monkeypatch.setattr(dispatch, "routed_host", lambda p: routed(HOST, fake.namespace(), p))
    for name, xs in _cases(rng):
        if name == "mse_loss":
            continue
        fake.uploads.clear()
        fake.calls = 0
        with options(use_gpu=True, gpu_precision=precision):
            y, grads = _run(name, xs, np.float64)
        # One forward product and one per gradient (bias gradients are sums, not products).
        n_products = 1 + sum(1 for i, x in enumerate(xs) if not (name == "linear" and i == 1))
        assert fake.calls == n_products, name
        assert set(fake.uploads) == {np.dtype(dtype)}, name
        assert y.dtype == np.float64 and all(g.dtype == np.float64 for g in grads), name
        y_ref = SPEC[name].forward(*xs)
        tol = 1e-12 if precision == "fp64" else 1e-5
        np.testing.assert_allclose(y, y_ref, rtol=tol, atol=tol, err_msg=name)
        vjp = SPEC[name].vjp(np.ones(np.shape(y_ref)), *xs)
        for got, want in zip(grads, vjp):
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)
    if precision == "fp32":
        # Rounding the inputs to float32 must be visible against the float64 product.
        a, b = rng.standard_normal((8, 9)), rng.standard_normal((9, 4))
        with options(use_gpu=True, gpu_precision="fp32"):
            y, _ = _run("matmul", (a, b), np.float64)
        assert not np.array_equal(y, a @ b)


@pytest.mark.cuda
@pytest.mark.parametrize("precision,tol", [("fp64", 1e-12), ("fp32", 1e-5)])
def test_use_gpu_on_cuda_against_numpy_float64(rng, precision, tol):
    assert cuda_available()
    G = get_kernels("cuda")
    for name, xs in _cases(rng):
        if name == "mse_loss":
            continue
        calls = []
        orig = G.matmul
        G.matmul = lambda a, b: (calls.append(a.dtype), orig(a, b))[1]
        try:
            with options(use_gpu=True, gpu_precision=precision):
                y, grads = _run(name, xs, np.float64)
        finally:
            G.matmul = orig
        assert calls and all(np.dtype(d) == (np.float64 if precision == "fp64" else np.float32)
                             for d in calls), name
        assert isinstance(y, np.ndarray) and y.dtype == np.float64
        y_ref = SPEC[name].forward(*xs)
        np.testing.assert_allclose(y, y_ref, rtol=tol, atol=tol, err_msg=name)
        vjp = SPEC[name].vjp(np.ones(np.shape(y_ref)), *xs)
        for got, want in zip(grads, vjp):
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


def test_a_failed_cuda_load_is_remembered(monkeypatch):
    # use_gpu asks for the GPU on every CPU op: without one, CuPy must not be imported again each time.
    from torchlean.errors import BackendUnavailableError
    from torchlean.kernels import cuda as kcuda
    calls = []

    def failing():
        calls.append(1)
        raise BackendUnavailableError("device 'cuda': no GPU (test)")

    monkeypatch.setattr(kcuda, "_import_cupy", failing)
    monkeypatch.setattr(kcuda, "UNAVAILABLE", [])
    for _ in range(3):
        with pytest.raises(BackendUnavailableError, match="no GPU \\(test\\)"):
            kcuda.load()
    assert calls == [1]


@pytest.mark.parametrize("first", [1, 1.0, True, 9])
def test_dispatch_cache_keys_attributes_by_type_and_value(first, monkeypatch):
    """Ops with attributes are served from the dispatch cache too; an entry made by one attribute
    value never serves another that compares equal but the shape rule refuses (1 == 1.0 == True),
    nor a different value (another output shape)."""
    monkeypatch.setattr(dispatch, "DISPATCH", {})
    x = np.arange(12, dtype=np.float32).reshape(3, 4)

    def run(stop):
        return dispatch.forward_op("slice", [x], {"axis": 1, "start": 0, "stop": stop})[0]

    for stop in (first, 1, 1.0, True, 3):
        if type(stop) is int:
            np.testing.assert_array_equal(run(stop), x[:, :stop])
        else:
            with pytest.raises(DomainError, match="stop must be an int"):
                run(stop)
    assert any(k[0] == "slice" for k in dispatch.DISPATCH)


def test_dispatch_cache_skips_attributes_that_are_not_plain_values(monkeypatch):
    monkeypatch.setattr(dispatch, "DISPATCH", {})
    x = np.ones((2, 3), np.float32)
    dispatch.forward_op("sum", [x], {})
    dispatch.forward_op("reshape", [x], {"shape": [3, 2]})      # a list: not cached
    dispatch.forward_op("reshape", [x], {"shape": (3, 2)})      # a tuple of ints: cached
    assert sorted(k[0] for k in dispatch.DISPATCH) == ["reshape", "sum"]
