"""Pooling (every option), unpooling, convolution padding modes, grid_sample / affine_grid, channel
dropout and bilinear against PyTorch: outputs, indices (exact), input / parameter / grid gradients,
state_dicts, reprs and bad arguments."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import torchlean as tl
import torchlean.nn.functional_pooling as FP
import torchlean.nn.pooling as NP
from torchlean.errors import DomainError, DTypeError, IndexRangeError, ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)


def both(f_tl, f_th, a, tol=1e-10, seed=0, grad=True):
    """Run both on the same array; compare outputs, indices (exactly) and input gradients."""
    xt = tl.tensor(a, requires_grad=grad)
    xh = torch.tensor(a, requires_grad=grad)
    yt, yh = f_tl(xt), f_th(xh)
    if isinstance(yh, tuple):
        assert yt[1].dtype == tl.int64
        np.testing.assert_array_equal(yt[1].numpy(), yh[1].numpy(), err_msg="indices")
        yt, yh = yt[0], yh[0]
    assert tuple(yt.shape) == tuple(yh.shape)
    np.testing.assert_allclose(yt.detach().numpy(), yh.detach().numpy(), rtol=tol, atol=tol, err_msg="output")
    if grad:
        g = np.random.default_rng(seed).standard_normal(tuple(yh.shape)).astype(a.dtype)
        yt.backward(tl.tensor(g))
        yh.backward(torch.tensor(g))
        np.testing.assert_allclose(xt.grad.numpy(), xh.grad.numpy(), rtol=tol, atol=tol, err_msg="gradient")
    return yt


def _pool_case(data, d, with_dilation):
    k = tuple(data.draw(st.integers(1, 3)) for _ in range(d))
    s = tuple(data.draw(st.integers(1, 3)) for _ in range(d))
    p = tuple(data.draw(st.integers(0, ki // 2)) for ki in k)
    dil = tuple(data.draw(st.integers(1, 2)) for _ in range(d)) if with_dilation else (1,) * d
    spatial = tuple(data.draw(st.integers(dl * (ki - 1) + 1, dl * (ki - 1) + 5)) for ki, dl in zip(k, dil))
    return k, s, p, dil, spatial


# ---- max pooling ----------------------------------------------------------------------------

@SETTINGS
@given(d=st.integers(1, 3), batched=st.booleans(), ceil=st.booleans(), idx=st.booleans(), ties=st.booleans(),
       data=st.data())
def test_max_pool_matches_torch(d, batched, ceil, idx, ties, data):
    k, s, p, dil, spatial = _pool_case(data, d, True)
    rng = np.random.default_rng(hash((k, s, p, dil, spatial)) % 2**32)
    shape = ((2,) if batched else ()) + (3,) + spatial
    a = rng.integers(0, 3, shape).astype(np.float64) if ties else rng.standard_normal(shape)
    f_tl = getattr(FP, f"max_pool{d}d")
    f_th = getattr(TF, f"max_pool{d}d")
    both(lambda x: f_tl(x, k, s, p, dil, ceil, idx), lambda x: f_th(x, k, s, p, dil, ceil, idx), a)


def test_max_pool_float32_and_aliases(rng):
    a = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    both(lambda x: FP.max_pool2d_with_indices(x, 3, 2, 1, ceil_mode=True),
         lambda x: TF.max_pool2d_with_indices(x, 3, 2, 1, ceil_mode=True), a, tol=1e-6)
    both(lambda x: FP.max_pool1d_with_indices(x[0], 2), lambda x: TF.max_pool1d_with_indices(x[0], 2), a, 1e-6)
    b = rng.standard_normal((1, 2, 4, 5, 3)).astype(np.float32)
    both(lambda x: FP.max_pool3d_with_indices(x, (2, 3, 2), (1, 2, 1), (1, 1, 0), ceil_mode=True),
         lambda x: TF.max_pool3d_with_indices(x, (2, 3, 2), (1, 2, 1), (1, 1, 0), ceil_mode=True), b, tol=1e-6)


def test_max_pool_integer_input_as_torch():
    a = np.random.default_rng(4).integers(-50, 50, (2, 3, 7, 6))
    for idx in (False, True):
        yt = FP.max_pool2d(tl.tensor(a), 3, 2, 1, ceil_mode=True, return_indices=idx)
        yh = TF.max_pool2d(torch.tensor(a), 3, 2, 1, ceil_mode=True, return_indices=idx)
        for t, h in zip(yt if idx else (yt,), yh if idx else (yh,)):
            assert t.dtype == tl.int64
            np.testing.assert_array_equal(t.numpy(), h.numpy())


def test_max_pool_nan_and_inf_windows_as_torch():
    nan, inf = float("nan"), float("inf")
    a = np.array([[[1.0, nan, 3.0, nan, 0.0, 2.0, -inf, -inf, -inf]]])
    for kw in (dict(kernel_size=5), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
               dict(kernel_size=2, stride=1)):
        yt, it = FP.max_pool1d(tl.tensor(a), return_indices=True, **kw)
        yh, ih = TF.max_pool1d(torch.tensor(a), return_indices=True, **kw)
        np.testing.assert_array_equal(it.numpy(), ih.numpy())
        np.testing.assert_array_equal(yt.numpy(), yh.numpy())
        np.testing.assert_array_equal(FP.max_pool1d(tl.tensor(a), **kw).numpy(), yh.numpy())
    yt, it = FP.max_pool1d(tl.tensor(np.full((1, 1, 5), -inf)), 3, 2, 1, ceil_mode=True, return_indices=True)
    assert it.tolist() == [[[0, 1, 3]]]
    for x, args in ((np.array([[[5.0]]]), (2, 2, 1, 3, True)), (np.array([[[5.0, 6.0, 7.0]]]), (2, 2, 1, 4, True))):
        yh, ih = TF.max_pool1d(torch.tensor(x), *args, return_indices=True)     # a window wholly in padding
        yt, it = FP.max_pool1d(tl.tensor(x), *args, return_indices=True)
        assert it.tolist() == ih.tolist() and yt.tolist() == yh.tolist() == [[[-inf]]]
        assert FP.max_pool1d(tl.tensor(x), *args).tolist() == [[[-inf]]]


def test_max_pool_modules_repr_and_options(rng):
    a = rng.standard_normal((2, 2, 7, 7))
    for cls, kw in ((NP.MaxPool2d, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, return_indices=True)),
                    (NP.MaxPool2d, dict(kernel_size=(2, 3), dilation=2)),
                    (NP.MaxPool1d, dict(kernel_size=2, ceil_mode=True))):
        m_tl, m_th = cls(**kw), getattr(torch.nn, cls.__name__)(**kw)
        assert repr(m_tl) == repr(m_th)
        x = a[0] if cls is NP.MaxPool1d else a
        both(m_tl, m_th, x)
    assert repr(NP.MaxPool3d((1, 2, 3))) == repr(torch.nn.MaxPool3d((1, 2, 3)))


# ---- max unpooling --------------------------------------------------------------------------

@SETTINGS
@given(d=st.integers(1, 3), batched=st.booleans(), data=st.data())
def test_max_unpool_matches_torch(d, batched, data):
    k, s, p, _, spatial = _pool_case(data, d, False)
    s = tuple(max(si, ki) for si, ki in zip(s, k))                        # no repeated indices
    rng = np.random.default_rng(hash((k, s, p, spatial)) % 2**32)
    shape = ((2,) if batched else ()) + (3,) + spatial
    a = rng.standard_normal(shape)
    _, idx = getattr(TF, f"max_pool{d}d")(torch.tensor(a), k, s, p, return_indices=True)
    y = rng.standard_normal(tuple(idx.shape))
    sizes = [None, list(spatial)]
    out = data.draw(st.sampled_from(sizes))
    f_tl, f_th = getattr(FP, f"max_unpool{d}d"), getattr(TF, f"max_unpool{d}d")
    try:
        f_th(torch.tensor(y), idx, k, s, p, out)
    except (ValueError, RuntimeError) as e:
        with pytest.raises(ShapeError if isinstance(e, ValueError) else IndexRangeError):
            f_tl(tl.tensor(y), tl.tensor(idx.numpy()), k, s, p, out)
        return
    both(lambda x: f_tl(x, tl.tensor(idx.numpy()), k, s, p, out), lambda x: f_th(x, idx, k, s, p, out), y)
    m_tl = getattr(NP, f"MaxUnpool{d}d")(k, s, p)
    m_th = getattr(torch.nn, f"MaxUnpool{d}d")(k, s, p)
    assert repr(m_tl) == repr(m_th)
    both(lambda x: m_tl(x, tl.tensor(idx.numpy()), out), lambda x: m_th(x, idx, out), y)


def test_max_unpool_errors():
    x = tl.ones(1, 1, 2)
    with pytest.raises(IndexRangeError):
        FP.max_unpool1d(x, tl.tensor([[[0, 4]]]), 2)
    with pytest.raises(ShapeError):
        FP.max_unpool1d(x, tl.tensor([[[0]]]), 2)
    with pytest.raises(ShapeError):
        FP.max_unpool1d(x, tl.tensor([[[0, 1]]]), 2, output_size=[7])
    with pytest.raises(DTypeError):
        FP.max_unpool1d(x, tl.tensor([[[0.0, 1.0]]]), 2)


# ---- average pooling ------------------------------------------------------------------------

@SETTINGS
@given(d=st.integers(1, 3), batched=st.booleans(), ceil=st.booleans(), cip=st.booleans(),
       override=st.sampled_from([None, 3, -2]), data=st.data())
def test_avg_pool_matches_torch(d, batched, ceil, cip, override, data):
    k, s, p, _, spatial = _pool_case(data, d, False)
    rng = np.random.default_rng(hash((k, s, p, spatial)) % 2**32)
    shape = ((2,) if batched else ()) + (3,) + spatial
    a = rng.standard_normal(shape)
    f_tl, f_th = getattr(FP, f"avg_pool{d}d"), getattr(TF, f"avg_pool{d}d")
    if d == 1:
        if override is not None:
            return                                     # torch's avg_pool1d has no divisor_override
        both(lambda x: f_tl(x, k, s, p, ceil, cip), lambda x: f_th(x, k, s, p, ceil, cip), a)
    else:
        both(lambda x: f_tl(x, k, s, p, ceil, cip, override), lambda x: f_th(x, k, s, p, ceil, cip, override), a)


def test_avg_pool_modules_float32(rng):
    a = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    for cls, kw in ((NP.AvgPool2d, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                         count_include_pad=False)),
                    (NP.AvgPool2d, dict(kernel_size=(2, 3), padding=(1, 1), ceil_mode=True, divisor_override=4)),
                    (NP.AvgPool1d, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True))):
        m_tl, m_th = cls(**kw), getattr(torch.nn, cls.__name__)(**kw)
        assert repr(m_tl) == repr(m_th)
        both(m_tl, m_th, a[0] if cls is NP.AvgPool1d else a, tol=1e-5)
    assert repr(NP.AvgPool3d(2)) == repr(torch.nn.AvgPool3d(2))


@pytest.mark.parametrize("call, err", [
    (lambda x: FP.max_pool2d(x, 3, padding=2), ShapeError),
    (lambda x: FP.max_pool2d(x, 0), ShapeError),
    (lambda x: FP.max_pool2d(x, 2, stride=0), ShapeError),
    (lambda x: FP.max_pool2d(x, 7), ShapeError),
    (lambda x: FP.max_pool2d(x, (2, 2, 2)), ShapeError),
    (lambda x: FP.max_pool3d(x, 2), ShapeError),
    (lambda x: FP.avg_pool2d(x, 3, padding=2), ShapeError),
    (lambda x: FP.avg_pool2d(x, 2, divisor_override=0), DomainError),
    (lambda x: FP.avg_pool2d(x.long(), 2), DTypeError),
])
def test_pool_errors(call, err):
    with pytest.raises(err):
        call(tl.ones(1, 1, 4, 4))


# ---- convolution modules --------------------------------------------------------------------

def _compare_module(m_tl, m_th, a, tol=1e-10, **fwd):
    m_tl.load_state_dict({k: v.detach().numpy() for k, v in m_th.state_dict().items()}, strict=True)
    assert [(k, tuple(v.shape)) for k, v in m_tl.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in m_th.state_dict().items()]
    assert repr(m_tl) == repr(m_th)
    xt, xh = tl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    yt, yh = m_tl(xt, **fwd), m_th(xh, **fwd)
    assert tuple(yt.shape) == tuple(yh.shape)
    np.testing.assert_allclose(yt.detach().numpy(), yh.detach().numpy(), rtol=tol, atol=tol)
    g = np.random.default_rng(0).standard_normal(tuple(yh.shape)).astype(a.dtype)
    yt.backward(tl.tensor(g))
    yh.backward(torch.tensor(g))
    np.testing.assert_allclose(xt.grad.numpy(), xh.grad.numpy(), rtol=tol, atol=tol)
    pt, ph = dict(m_tl.named_parameters()), dict(m_th.named_parameters())
    for name, q in ph.items():
        np.testing.assert_allclose(pt[name].grad.numpy(), q.grad.numpy(), rtol=tol, atol=tol, err_msg=name)


@SETTINGS
@given(d=st.integers(1, 3), mode=st.sampled_from(["zeros", "reflect", "replicate", "circular"]),
       padding=st.sampled_from(["same", "valid", "int", "tuple"]), batched=st.booleans(), bias=st.booleans(),
       data=st.data())
def test_conv_padding_modes_match_torch(d, mode, padding, batched, bias, data):
    k = tuple(data.draw(st.integers(1, 4)) for _ in range(d))
    dil = tuple(data.draw(st.integers(1, 2)) for _ in range(d))
    stride = 1 if padding == "same" else data.draw(st.integers(1, 2))
    if padding == "int":
        padding = data.draw(st.integers(0, 2))
    elif padding == "tuple":
        padding = tuple(data.draw(st.integers(0, 2)) for _ in range(d))
    groups = data.draw(st.sampled_from([1, 2]))
    spatial = tuple(dl * (ki - 1) + data.draw(st.integers(3, 5)) for ki, dl in zip(k, dil))
    a = np.random.default_rng(sum(spatial)).standard_normal(((2,) if batched else ()) + (4,) + spatial)
    kw = dict(stride=stride, padding=padding, dilation=dil, groups=groups, bias=bias, padding_mode=mode,
              dtype=torch.float64)
    m_th = getattr(torch.nn, f"Conv{d}d")(4, 6, k, **kw)
    kw["dtype"] = tl.float64
    m_tl = getattr(NP, f"Conv{d}d")(4, 6, k, **kw)
    _compare_module(m_tl, m_th, a)


def test_conv_same_even_kernels_float32(rng):
    a = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    for mode in ("zeros", "reflect", "circular"):
        m_th = torch.nn.Conv2d(3, 4, (4, 2), padding="same", dilation=(1, 3), padding_mode=mode)
        m_tl = NP.Conv2d(3, 4, (4, 2), padding="same", dilation=(1, 3), padding_mode=mode)
        assert m_tl._reversed_padding_repeated_twice == list(m_th._reversed_padding_repeated_twice)
        _compare_module(m_tl, m_th, a, tol=1e-5)


@SETTINGS
@given(d=st.integers(1, 3), batched=st.booleans(), data=st.data())
def test_conv_transpose_matches_torch(d, batched, data):
    k = tuple(data.draw(st.integers(1, 3)) for _ in range(d))
    s = tuple(data.draw(st.integers(1, 3)) for _ in range(d))
    dil = tuple(data.draw(st.integers(1, 2)) for _ in range(d))
    p = tuple(data.draw(st.integers(0, dl * (ki - 1))) for ki, dl in zip(k, dil))
    op = tuple(data.draw(st.integers(0, max(si, dl) - 1)) for si, dl in zip(s, dil))
    groups = data.draw(st.sampled_from([1, 2]))
    spatial = tuple(data.draw(st.integers(2, 4)) for _ in range(d))
    a = np.random.default_rng(sum(spatial)).standard_normal(((2,) if batched else ()) + (4,) + spatial)
    kw = dict(stride=s, padding=p, output_padding=op, groups=groups, dilation=dil, dtype=torch.float64)
    m_th = getattr(torch.nn, f"ConvTranspose{d}d")(4, 2, k, **kw)
    kw["dtype"] = tl.float64
    m_tl = getattr(NP, f"ConvTranspose{d}d")(4, 2, k, **kw)
    lo = [(S - 1) * si - 2 * pi + dl * (ki - 1) + 1 for S, si, pi, dl, ki in zip(spatial, s, p, dil, k)]
    if min(lo) < 1:
        return                                          # torch returns an empty tensor there
    _compare_module(m_tl, m_th, a)
    size = [v + data.draw(st.integers(0, si - 1)) for v, si in zip(lo, s)]
    if batched and data.draw(st.booleans()):
        size = [2, 2] + size
    _compare_module(m_tl, m_th, a, output_size=size)


def test_conv_init_statistics_and_errors():
    tl.manual_seed(0)
    m = NP.Conv2d(64, 32, 3)
    bound = 1 / np.sqrt(64 * 9)
    w = m.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.03 * bound
    b = m.bias.numpy()
    assert np.abs(b).max() <= bound and b.std() > 0.3 * bound
    t = NP.ConvTranspose2d(8, 6, 3, groups=2)
    assert np.abs(t.weight.numpy()).max() <= 1 / np.sqrt(3 * 9)
    assert tuple(t.weight.shape) == (8, 3, 3, 3)
    for ctor in (lambda: NP.Conv2d(3, 4, 3, stride=2, padding="same"),
                 lambda: NP.Conv2d(3, 4, 3, padding="full"),
                 lambda: NP.Conv2d(3, 4, 3, padding_mode="mirror"),
                 lambda: NP.Conv2d(3, 4, 3, groups=2),
                 lambda: NP.Conv2d(4, 3, 3, groups=2),
                 lambda: NP.Conv2d(4, 4, 3, groups=0),
                 lambda: NP.ConvTranspose2d(4, 4, 3, padding_mode="reflect")):
        with pytest.raises((DomainError, ShapeError)):
            ctor()
    with pytest.raises(ShapeError):
        NP.ConvTranspose1d(2, 2, 3, stride=2)(tl.ones(1, 2, 4), output_size=[20])


# ---- grid_sample / affine_grid --------------------------------------------------------------

@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("d", [2, 3])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners, d, rng):
    if mode == "bicubic" and d == 3:
        pytest.skip("bicubic is 4-D only (as torch)")
    x = rng.standard_normal((2, 3) + ((5, 4) if d == 2 else (4, 3, 5)))
    grid = rng.uniform(-1.7, 1.7, (2, 3, 4) + ((2,) if d == 2 else (2, 3)))   # includes out-of-range points
    xt, gt = tl.tensor(x, requires_grad=True), tl.tensor(grid, requires_grad=True)
    xh, gh = torch.tensor(x, requires_grad=True), torch.tensor(grid, requires_grad=True)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    yt, yh = FP.grid_sample(xt, gt, **kw), TF.grid_sample(xh, gh, **kw)
    np.testing.assert_allclose(yt.detach().numpy(), yh.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = rng.standard_normal(tuple(yh.shape))
    (yt * tl.tensor(w)).sum().backward()
    (yh * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), xh.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gt.grad.numpy(), gh.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_grid_sample_float32_with_affine_grid(rng):
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    theta = rng.standard_normal((2, 2, 3)).astype(np.float32)
    for ac in (False, True):
        tt, th = tl.tensor(theta, requires_grad=True), torch.tensor(theta, requires_grad=True)
        yt = FP.grid_sample(tl.tensor(x), FP.affine_grid(tt, (2, 3, 5, 4), ac), align_corners=ac)
        yh = TF.grid_sample(torch.tensor(x), TF.affine_grid(th, (2, 3, 5, 4), ac), align_corners=ac)
        np.testing.assert_allclose(yt.detach().numpy(), yh.detach().numpy(), rtol=1e-5, atol=1e-5)
        yt.sum().backward()
        yh.sum().backward()
        np.testing.assert_allclose(tt.grad.numpy(), th.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 3), (2, 1, 3, 4, 5), (2, 2, 1, 1, 2)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_torch(size, align_corners, rng):
    theta = rng.standard_normal((2, 2, 3) if len(size) == 4 else (2, 3, 4))
    tt, th = tl.tensor(theta, requires_grad=True), torch.tensor(theta, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yt = FP.affine_grid(tt, size, align_corners)
        yh = TF.affine_grid(th, size, align_corners)
    assert len(caught) == (2 if align_corners and min(size[2:]) == 1 else 0)
    np.testing.assert_allclose(yt.detach().numpy(), yh.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = rng.standard_normal(tuple(yh.shape))
    (yt * tl.tensor(w)).sum().backward()
    (yh * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(tt.grad.numpy(), th.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_grid_sample_nonfinite_zeros_padding_as_torch(rng):
    x = rng.standard_normal((1, 2, 3, 4))
    x[0, 0, 0, 0] = np.inf
    g = np.array([[[[np.inf, 0.2], [-np.inf, 0.1], [0.3, np.nan], [0.5, 0.5], [1.2, -3.0], [-1.1, -1.2]]]])
    for mode in ("bilinear", "nearest", "bicubic"):
        with np.errstate(invalid="ignore"):
            yt = FP.grid_sample(tl.tensor(x), tl.tensor(g), mode=mode, align_corners=False).numpy()
        yh = TF.grid_sample(torch.tensor(x), torch.tensor(g), mode=mode, align_corners=False).numpy()
        np.testing.assert_allclose(yt, yh, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_grid_sample_errors_and_warning():
    x, g = tl.ones(1, 1, 3, 3), tl.zeros(1, 2, 2, 2)
    with pytest.warns(UserWarning, match="align_corners"):
        FP.grid_sample(x, g)
    with pytest.warns(UserWarning, match="align_corners"):
        FP.affine_grid(tl.zeros(1, 2, 3), (1, 1, 2, 2))
    for call, err in ((lambda: FP.grid_sample(x, g, mode="area", align_corners=False), DomainError),
                      (lambda: FP.grid_sample(x, g, padding_mode="wrap", align_corners=False), DomainError),
                      (lambda: FP.grid_sample(x, tl.zeros(1, 2, 2, 3), align_corners=False), ShapeError),
                      (lambda: FP.grid_sample(x, tl.zeros(2, 2, 2, 2), align_corners=False), ShapeError),
                      (lambda: FP.grid_sample(tl.ones(1, 1, 2, 2, 2), tl.zeros(1, 1, 1, 1, 3), mode="bicubic",
                                              align_corners=False), ShapeError),
                      (lambda: FP.affine_grid(tl.zeros(1, 2, 3), (1, 1, 2, 2, 2), False), ShapeError),
                      (lambda: FP.affine_grid(tl.zeros(1, 2, 3), (1, 1, 0, 2), False), ShapeError)):
        with pytest.raises(err):
            call()


# ---- channel dropout, alpha dropout, bilinear -----------------------------------------------

def test_channel_dropout_functionals():
    tl.manual_seed(3)
    x = tl.ones(40, 50, 3, 2)
    y = FP.dropout2d(x, 0.3).numpy()
    per_channel = y.reshape(40, 50, -1)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))             # whole channels
    assert np.all(np.isclose(y, 0) | np.isclose(y, 1 / 0.7))
    assert abs((per_channel[..., 0] == 0).mean() - 0.3) < 0.03
    assert FP.dropout2d(x, 0.3, training=False) is x
    y1 = FP.dropout1d(tl.ones(30, 40), 0.5).numpy()                        # unbatched (C, L)
    assert np.all(y1.min(-1) == y1.max(-1)) and abs((y1[:, 0] == 0).mean() - 0.5) < 0.1
    y3 = FP.dropout3d(tl.ones(200, 2, 2, 2), 0.5).numpy()
    assert np.all(y3.reshape(200, -1).min(-1) == y3.reshape(200, -1).max(-1))
    with pytest.warns(UserWarning, match="3D input"):
        y2 = FP.dropout2d(tl.ones(20, 30, 4), 0.5).numpy()                 # torch: (N, C, L)
    assert np.all(y2.min(-1) == y2.max(-1)) and 0.3 < (y2[..., 0] == 0).mean() < 0.7
    with pytest.raises(ShapeError):
        FP.dropout1d(tl.ones(2, 3, 4, 5))
    with pytest.raises(DomainError):
        FP.dropout2d(x, 1.5)
    assert FP.dropout3d(tl.ones(1, 2, 2, 2, 2), 1.0).abs().sum().item() == 0


def test_alpha_dropouts_keep_selu_statistics():
    tl.manual_seed(5)
    x = tl.randn(400, 500)
    assert FP.alpha_dropout(x, 0.2) is x and FP.feature_alpha_dropout(x, 0.2) is x     # training=False default
    for y in (FP.alpha_dropout(x, 0.2, training=True), FP.feature_alpha_dropout(x.reshape(400, 50, 10), 0.2, True)):
        v = y.numpy()
        assert abs(v.mean()) < 0.03 and abs(v.std() - 1) < 0.03
    y = FP.feature_alpha_dropout(tl.ones(300, 40, 3), 0.5, True).numpy()
    assert np.all(y.min(-1) == y.max(-1))
    alpha = 1.7580993408473766
    a = 1 / np.sqrt((alpha ** 2 * 0.5 + 1) * 0.5)
    kept, dropped = a + alpha * a * 0.5, -alpha * a + alpha * a * 0.5
    assert np.all(np.isclose(y, kept, atol=1e-5) | np.isclose(y, dropped, atol=1e-5))
    assert np.isclose(y, kept, atol=1e-5).any() and np.isclose(y, dropped, atol=1e-5).any()
    assert FP.alpha_dropout(x, 1.0, True).abs().sum().item() == 0
    m = NP.FeatureAlphaDropout(0.2)
    assert repr(m) == repr(torch.nn.FeatureAlphaDropout(0.2))
    v = m(tl.ones(300, 40, 3)).numpy()
    assert np.all(v.min(-1) == v.max(-1)) and 0.1 < np.isclose(v, v.min()).mean() < 0.3
    assert m.eval()(x) is x


def test_bilinear_matches_torch(rng):
    x1, x2 = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 5))
    w, b = rng.standard_normal((6, 4, 5)), rng.standard_normal(6)
    ts = [tl.tensor(v, requires_grad=True) for v in (x1, x2, w, b)]
    hs = [torch.tensor(v, requires_grad=True) for v in (x1, x2, w, b)]
    yt, yh = FP.bilinear(*ts), TF.bilinear(*hs)
    np.testing.assert_allclose(yt.detach().numpy(), yh.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(tuple(yh.shape))
    yt.backward(tl.tensor(g))
    yh.backward(torch.tensor(g))
    for a, c in zip(ts, hs):
        np.testing.assert_allclose(a.grad.numpy(), c.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(FP.bilinear(*ts[:3]).detach().numpy(), TF.bilinear(*hs[:3]).detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(ShapeError):
        FP.bilinear(ts[0], ts[1][:1], ts[2])


# ---- CUDA -----------------------------------------------------------------------------------

@pytest.mark.cuda
def test_pooling_cuda_matches_cpu(rng):
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("no CUDA device")
    a = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, 4, 5, 2)).astype(np.float32)
    fns = [lambda x: FP.max_pool2d(x, 3, 2, 1, ceil_mode=True),
           lambda x: FP.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)[0],
           lambda x: FP.max_unpool2d(*FP.max_pool2d(x, 2, return_indices=True), 2),
           lambda x: FP.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
           lambda x: FP.grid_sample(x, tl.tensor(grid, device=x.device), mode="bicubic",
                                    padding_mode="reflection", align_corners=False),
           lambda x: FP.grid_sample(x, tl.tensor(grid, device=x.device), padding_mode="border", align_corners=True)]
    for f in fns:
        xc = tl.tensor(a, requires_grad=True)
        xg = tl.tensor(a, device="cuda", requires_grad=True)
        yc, yg = f(xc), f(xg)
        assert yg.device == "cuda"
        np.testing.assert_allclose(yg.detach().numpy(), yc.detach().numpy(), rtol=1e-5, atol=1e-5)
        g = np.random.default_rng(1).standard_normal(tuple(yc.shape)).astype(np.float32)
        yc.backward(tl.tensor(g))
        yg.backward(tl.tensor(g, device="cuda"))
        np.testing.assert_allclose(xg.grad.numpy(), xc.grad.numpy(), rtol=1e-5, atol=1e-5)
    tl.manual_seed(0)
    m = NP.Conv2d(3, 4, 4, padding="same", padding_mode="reflect")
    yc = m(tl.tensor(a))
    m.to("cuda")
    np.testing.assert_allclose(m(tl.tensor(a, device="cuda")).numpy(), yc.numpy(), rtol=1e-5, atol=1e-5)
