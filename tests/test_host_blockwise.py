"""The host's blockwise elementwise kernels and bit-mask select: the same bits as the one-pass
NumPy forms, on arrays large enough to be split into blocks, with the values where kernels go wrong
(NaN, infinities, signed zeros, subnormals, huge magnitudes, ragged last blocks)."""

import numpy as np
import pytest

from torchlean.kernels.host import base
from torchlean.kernels.host import elementwise as E


def _nasty(rng, n, dtype):
    x = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 30.0, 1e4], n)).astype(dtype)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, np.finfo(dtype).tiny / 4, -np.finfo(dtype).max,
                        88.7, -88.7, 709.0, -745.0], dtype=dtype)
    x[rng.choice(n, 200, replace=False)] = rng.choice(special, 200)
    return x


KERNELS = {
    "sigmoid": (E.sigmoid, 1),
    "silu": (E.silu, 1),
    "relu_bwd": (E.relu_bwd, 2),
    "sigmoid_bwd": (E.sigmoid_bwd, 2),
    "softplus_bwd": (E.softplus_bwd, 2),
    "silu_bwd": (E.silu_bwd, 2),
    "gelu": (E.gelu, 1),
    "gelu_bwd": (E.gelu_bwd, 2),
    "erf": (E.erf, 1),
    "erfc": (E.erfc, 1),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_blocked_kernel_equals_its_one_pass_form(monkeypatch, rng, name, dtype):
    fn, arity = KERNELS[name]
    n = 3 * (base.BLOCK + 17)                     # three full blocks and a ragged one
    xs = [_nasty(rng, n, dtype).reshape(1, 3, -1) for _ in range(arity)]
    with np.errstate(all="ignore"):
        blocked = fn(*xs)
        monkeypatch.setattr(base, "BLOCK", 10 * n)    # one pass over the whole array
        whole = fn(*xs)
    assert blocked.shape == xs[0].shape and blocked.dtype == whole.dtype == dtype
    assert np.array_equal(blocked.view(f"i{blocked.itemsize}"), whole.view(f"i{whole.itemsize}"))


def test_sigmoid_and_silu_are_torchs_cpu_forms_and_accurate(rng):
    """1 / (1 + e^-x) and x / (1 + e^-x), torch's CPU kernels: within 3 ulp of the float64 value
    wherever that is a normal float32 (1 + e rounds at 2^-23 near x = 0-), within the smallest
    normal where it is subnormal (0 below x = -88.7, as torch gives), exact at the infinities, NaN
    through (silu(-inf) = -inf / inf is NaN, as torch's), and no floating-point warning. Below
    x = -88.7 silu is -0 where its value is below 1e-36 in magnitude (torch's too)."""
    x = _nasty(rng, 20000, np.float32)
    x = np.concatenate([x, np.float32([-100.0, -89.0, -88.0, 88.0, 100.0])])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        s, si = E.sigmoid(x), E.silu(x)
    ref = 1.0 / (1.0 + np.exp(-np.clip(x.astype(np.float64), -700, 700)))
    tiny = np.finfo(np.float32).tiny
    normal = ref >= tiny
    assert (np.abs(s[normal] - ref[normal]) <= 3 * np.spacing(ref[normal].astype(np.float32))).all()
    sub = np.isfinite(x) & ~normal
    assert (np.abs(s[sub] - ref[sub]) <= tiny).all() and np.isnan(s[np.isnan(x)]).all()
    assert s[x == -100.0].tolist() == [0.0] and s[x == -88.0][0] > 0       # torch's values there
    assert set(s[x == np.inf].tolist()) <= {1.0} and set(s[x == -np.inf].tolist()) <= {0.0}
    sref = x.astype(np.float64) * ref
    ok = np.isfinite(x) & (np.abs(sref) >= tiny) & (x > -88.7)
    assert (np.abs(si[ok] - sref[ok]) <= 3 * np.spacing(np.abs(sref[ok]).astype(np.float32))).all()
    low = np.isfinite(x) & (x <= -88.7)        # e^-x overflows: -0 where the value is below 1e-36
    assert (np.abs(si[low] - sref[low]) < 1e-36).all()
    assert np.isnan(si[x == -np.inf]).all() and (si[x == np.inf] == np.inf).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_select_is_where_bit_for_bit(rng, dtype):
    a = _nasty(rng, 4000, dtype).reshape(40, 100)
    b = _nasty(rng, 4000, dtype).reshape(40, 100)
    bits = f"i{a.itemsize}"
    nan = a.view(bits)
    nan[0, :3] = np.array([np.nan], dtype).view(bits)[0] + np.array([1, 77, 12345])   # NaN payloads
    a[0, 3] = -0.0
    c = rng.random((40, 100)) < 0.5
    for other in (b, dtype(0), dtype(-0.0), dtype(np.nan)):
        got, want = base.select(c, a, other), np.where(c, a, other)
        assert got.dtype == want.dtype and np.array_equal(got.view(bits), want.view(bits))
    # what the bit path does not take falls back to np.where
    assert np.array_equal(base.select(c[0], a, b), np.where(c[0], a, b), equal_nan=True)
    counts = rng.integers(0, 3, a.shape)                 # a non-bool condition: nonzero is true
    assert np.array_equal(base.select(counts, a, b), np.where(counts, a, b), equal_nan=True)
    ai = np.arange(10)
    assert base.select(ai > 4, ai, 0).tolist() == np.where(ai > 4, ai, 0).tolist()


@pytest.mark.parametrize("shape,axes", [((3, 70001), (1,)), ((5, 7, 9001), (0, 2)), ((1, 3, 50000), (0, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocked_norm_statistics_equal_the_float64_two_pass(rng, shape, axes, dtype):
    """Layer and batch normalization's statistics of large host arrays (a float64 buffered sum, then
    the squared deviations a block at a time) against the float64 two-pass formula, with a mean far
    from zero (where a one-pass variance would cancel)."""
    from torchlean.kernels.host import norm
    x = (rng.standard_normal(shape) * 0.01 + 1000.0).astype(dtype)
    assert x.size > 4 * norm._STATS_BLOCK
    mu, var = norm._stats(x, axes)
    x64 = x.astype(np.float64)
    want_mu = x64.mean(axis=axes, keepdims=True)
    want_var = ((x64 - want_mu) ** 2).mean(axis=axes, keepdims=True)
    assert mu.shape == want_mu.shape and var.shape == want_var.shape and mu.dtype == var.dtype == np.float64
    np.testing.assert_allclose(mu, want_mu, rtol=1e-15)
    np.testing.assert_allclose(var, want_var, rtol=1e-11)
