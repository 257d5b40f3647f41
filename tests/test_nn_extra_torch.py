"""nn.Buffer, lazy modules, fractional max pooling, the *_with_indices adaptive pools, gumbel_softmax,
pdist, conv_tbc, the in-place activations and DataParallel against PyTorch: values, indices,
gradients, state_dict keys, loading torch state dicts, reprs and errors."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import torchlean as tl
from torchlean.errors import (
    AutogradError,
    DeviceError,
    DomainError,
    ShapeError,
    TorchLeanError,
)
from torchlean.nn import extra as NE
from torchlean.nn import functional_extra as FE
from torchlean.nn import lazy as NL
from torchlean.nn.parallel import DataParallel, data_parallel
from torchlean.nn.parameter import Buffer, Parameter

torch = pytest.importorskip("torch")
TF = torch.nn.functional
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _sd(m):
    return {k: v.detach().numpy() for k, v in m.state_dict().items()}


# ---- Buffer ---------------------------------------------------------------------------------

def test_buffer_registers_like_torch():
    def build(nn, mk):
        m = nn.Module()
        m.a = nn.Buffer(mk([1.0, 2.0]))
        m.b = nn.Buffer(mk([3.0]), persistent=False)
        m.c = mk([4.0])
        return m
    mh = build(torch.nn, torch.tensor)
    mt = tl.nn.Module()
    mt.a = Buffer(tl.tensor([1.0, 2.0]))
    mt.b = Buffer(tl.tensor([3.0]), persistent=False)
    mt.c = tl.tensor([4.0])
    assert list(mt.state_dict()) == list(mh.state_dict()) == ["a"]
    assert [n for n, _ in mt.named_buffers()] == [n for n, _ in mh.named_buffers()] == ["a", "b"]
    assert mt.b.tolist() == [3.0] and mt.b.persistent is False
    mt.a = Buffer(tl.ones(3), persistent=False)
    assert list(mt.state_dict()) == [] and mt.a.tolist() == [1.0, 1.0, 1.0]
    mt.load_state_dict({}, strict=True)
    src = tl.tensor([5.0, 6.0], requires_grad=True)
    b = Buffer(src)
    assert b.requires_grad and b._value is src._value
    assert Buffer().shape == (0,)


# ---- lazy modules ---------------------------------------------------------------------------

LAZY_CASES = [
    ("LazyLinear", (3,), {}, (2, 5)),
    ("LazyLinear", (4,), {"bias": False}, (2, 3, 6)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 7)),
    ("LazyConv2d", (4, 3), {"groups": 2, "stride": 2}, (2, 6, 7, 8)),
    ("LazyConv2d", (2, 3), {"padding_mode": "reflect", "padding": 1}, (3, 6, 5)),
    ("LazyConv3d", (2, 2), {"bias": False}, (1, 3, 4, 4, 4)),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2, "output_padding": 1}, (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 3), {"groups": 2}, (1, 6, 3, 3)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 3, 3, 3)),
    ("LazyBatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm2d", (), {"affine": False}, (4, 3, 2, 2)),
    ("LazyBatchNorm3d", (), {"momentum": 0.3}, (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 5)),
    ("LazyInstanceNorm2d", (), {"affine": False, "track_running_stats": False}, (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), {}, (2, 3, 2, 3, 2)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", LAZY_CASES)
def test_lazy_module_matches_torch(name, args, kwargs, shape):
    mt = getattr(NL, name)(*args, **kwargs)
    mh = getattr(torch.nn, name)(*args, **kwargs)
    assert repr(mt) == repr(mh)
    assert mt.has_uninitialized_params() == mh.has_uninitialized_params() == bool(list(mh.parameters()) or sum(
        1 for b in mh.buffers() if isinstance(b, torch.nn.parameter.UninitializedBuffer)))
    assert list(mt.state_dict()) == list(mh.state_dict())
    for p in mt.parameters():
        assert isinstance(p, NL.UninitializedParameter) and repr(p) == "<UninitializedParameter>"
        with pytest.raises(TorchLeanError, match="uninitialized"):
            _ = p.shape
    x = np.random.default_rng(0).standard_normal(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yh = mh(torch.tensor(x, dtype=torch.float32))
        xt = tl.tensor(x.astype(np.float32), requires_grad=True)
        yt = mt(xt)
    assert type(mt).__name__ == type(mh).__name__ == name[4:]
    assert repr(mt) == repr(mh)
    assert not hasattr(mt, "has_uninitialized_params")
    assert not any(isinstance(t, (NL.UninitializedParameter, NL.UninitializedBuffer))
                   for t in list(mt.parameters()) + list(mt.buffers()))
    sd = _sd(mh)
    assert {k: v.shape for k, v in _sd(mt).items()} == {k: v.shape for k, v in sd.items()}
    for k, v in _sd(mt).items():
        if k.startswith("running") or k == "num_batches_tracked":
            np.testing.assert_allclose(v, sd[k], rtol=1e-5, atol=1e-6, err_msg=k)
    mt.load_state_dict(sd, strict=True)
    mh.train()
    mt.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yh = mh(torch.tensor(x, dtype=torch.float32, requires_grad=True))
        yt = mt(xt)
    np.testing.assert_allclose(_np(yt), _np(yh), rtol=1e-4, atol=1e-5)
    yt.sum().backward()
    yh.sum().backward()
    for (n, pt), (_, ph) in zip(mt.named_parameters(), mh.named_parameters()):
        np.testing.assert_allclose(pt.grad.numpy(), ph.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=n)


def test_lazy_init_statistics_match_torch_bounds():
    tl.manual_seed(0)
    m = NL.LazyLinear(200)
    m(tl.zeros(1, 50))
    bound = 1 / np.sqrt(50)
    w = m.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.01
    c = NL.LazyConv2d(64, 3)
    c(tl.zeros(1, 8, 5, 5))
    assert np.abs(c.bias.numpy()).max() <= 1 / np.sqrt(8 * 9)
    assert abs(c.weight.numpy().std() - 1 / np.sqrt(8 * 9) / np.sqrt(3)) < 0.01


def test_lazy_optimizer_before_first_forward_and_load():
    m = NL.LazyLinear(2)
    opt = tl.optim.SGD(m.parameters(), lr=0.5)
    opt.step()
    x = tl.ones(3, 4)
    m(x).sum().backward()
    w0 = m.weight.numpy().copy()
    opt.step()
    np.testing.assert_allclose(m.weight.numpy(), w0 - 0.5 * 3.0, rtol=1e-6)
    assert isinstance(m.weight, Parameter) and not isinstance(m.weight, NL.UninitializedParameter)
    # a torch state dict loaded into a lazy module materialises it
    lin = torch.nn.Linear(4, 2)
    m2 = NL.LazyLinear(2)
    m2.load_state_dict(_sd(lin), strict=True)
    assert type(m2).__name__ == "LazyLinear" and not m2.has_uninitialized_params()
    y = m2(tl.ones(1, 4))
    assert repr(m2) == "Linear(in_features=4, out_features=2, bias=True)"
    np.testing.assert_allclose(y.numpy(), lin(torch.ones(1, 4)).detach().numpy(), rtol=1e-6)
    m3 = NL.LazyLinear(2).double()
    m3(tl.ones(1, 3, dtype=tl.float64))
    assert m3.weight.dtype == tl.float64
    buf = NL.UninitializedBuffer()
    buf.materialize((2, 3))
    assert type(buf) is tl.Tensor and buf.shape == (2, 3)


def test_lazy_errors():
    with pytest.raises(DomainError, match="divisible by groups"):
        NL.LazyConv2d(4, 3, groups=2)(tl.zeros(1, 3, 5, 5))
    with pytest.raises(ShapeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d"):
        NL.LazyConv2d(4, 3)(tl.zeros(3, 5))
    with pytest.raises(TorchLeanError, match="uninitialized"):
        NL.LazyLinear(3).weight.size()


# ---- fractional max pooling -----------------------------------------------------------------

@SETTINGS
@given(st.integers(1, 2), st.integers(1, 3), st.integers(3, 9), st.integers(3, 9), st.integers(1, 3),
       st.integers(1, 3), st.booleans(), st.integers(0, 10**6))
def test_fractional_max_pool2d_matches_torch(n, c, h, w, kh, kw, batched, seed):
    rng = np.random.default_rng(seed)
    oh, ow = int(rng.integers(1, h - kh + 2)), int(rng.integers(1, w - kw + 2))
    shape = (n, c, h, w) if batched else (c, h, w)
    x = rng.standard_normal(shape)
    x[..., 0, 0] = x[..., 0, 1]
    s = rng.random((n if batched else 1, c, 2))
    for dt, ndt, tol in ((torch.float32, np.float32, 1e-6), (torch.float64, np.float64, 1e-12)):
        xh = torch.tensor(x, dtype=dt, requires_grad=True)
        xt = tl.tensor(x.astype(ndt), requires_grad=True)
        yh, ih = TF.fractional_max_pool2d(xh, (kh, kw), output_size=(oh, ow), return_indices=True,
                                          _random_samples=torch.tensor(s, dtype=dt))
        yt, it = FE.fractional_max_pool2d(xt, (kh, kw), output_size=(oh, ow), return_indices=True,
                                          _random_samples=tl.tensor(s.astype(ndt)))
        np.testing.assert_array_equal(it.numpy(), ih.numpy())
        assert it.dtype == tl.int64
        np.testing.assert_allclose(_np(yt), _np(yh), rtol=tol)
        g = rng.standard_normal(tuple(yh.shape))
        yh.backward(torch.tensor(g, dtype=dt))
        yt.backward(tl.tensor(g.astype(ndt)))
        np.testing.assert_allclose(xt.grad.numpy(), xh.grad.numpy(), rtol=tol, atol=tol)


def test_fractional_max_pool3d_and_ratio_match_torch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 6, 7, 8))
    s = rng.random((2, 2, 3))
    xh = torch.tensor(x, requires_grad=True)
    xt = tl.tensor(x, requires_grad=True)
    yh, ih = TF.fractional_max_pool3d(xh, (2, 3, 2), output_size=(3, 4, 5), return_indices=True,
                                      _random_samples=torch.tensor(s))
    yt, it = FE.fractional_max_pool3d_with_indices(xt, (2, 3, 2), output_size=(3, 4, 5),
                                                   _random_samples=tl.tensor(s))
    np.testing.assert_array_equal(it.numpy(), ih.numpy())
    np.testing.assert_allclose(_np(yt), _np(yh), rtol=1e-12)
    yh.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), xh.grad.numpy())
    # output_ratio, modules, buffers, reprs
    x2 = rng.standard_normal((1, 3, 10, 9))
    s2 = rng.random((1, 3, 2))
    mh = torch.nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.6), return_indices=True,
                                      _random_samples=torch.tensor(s2))
    mt = NE.FractionalMaxPool2d(3, output_ratio=(0.5, 0.6), return_indices=True, _random_samples=tl.tensor(s2))
    assert repr(mt) == repr(mh) and list(mt.state_dict()) == list(mh.state_dict()) == ["_random_samples"]
    (yh, ih), (yt, it) = mh(torch.tensor(x2)), mt(tl.tensor(x2))
    np.testing.assert_array_equal(it.numpy(), ih.numpy())
    np.testing.assert_allclose(_np(yt), _np(yh))
    m3 = NE.FractionalMaxPool3d(2, output_size=2)
    assert m3(tl.randn(2, 5, 5, 5)).shape == (2, 2, 2, 2)
    assert list(m3.state_dict()) == []


def test_fractional_max_pool_random_samples_and_errors():
    tl.manual_seed(0)
    x = tl.randn(4, 8, 12, 12)
    y, i = FE.fractional_max_pool2d(x, 2, output_ratio=0.5, return_indices=True)
    assert y.shape == (4, 8, 6, 6)
    np.testing.assert_array_equal(np.take_along_axis(x.numpy().reshape(4, 8, -1), i.numpy().reshape(4, 8, -1), -1),
                                  y.numpy().reshape(4, 8, -1))
    with pytest.raises(DomainError, match="requires specifying either an output_size or an output_ratio"):
        FE.fractional_max_pool2d(x, 2)
    with pytest.raises(ShapeError, match="pool height 3 too large relative to input height 5"):
        FE.fractional_max_pool2d(tl.zeros(1, 1, 5, 5), 3, output_size=4)
    with pytest.raises(ShapeError, match="_random_samples"):
        FE.fractional_max_pool2d(x, 2, output_size=3, _random_samples=tl.zeros(4, 8, 3))
    with pytest.raises(DomainError, match="output_ratio must be between 0 and 1"):
        NE.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(DomainError, match="only one of"):
        NE.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5)


def test_adaptive_max_pool_with_indices_match_torch():
    rng = np.random.default_rng(1)
    for d, shape, out in ((1, (2, 3, 11), 4), (2, (2, 3, 9, 7), (4, 3)), (3, (1, 2, 5, 6, 7), (2, 3, 4))):
        x = rng.standard_normal(shape)
        yh, ih = getattr(TF, f"adaptive_max_pool{d}d_with_indices")(torch.tensor(x), out)
        yt, it = getattr(FE, f"adaptive_max_pool{d}d_with_indices")(tl.tensor(x), out)
        np.testing.assert_array_equal(it.numpy(), ih.numpy())
        np.testing.assert_allclose(_np(yt), _np(yh))


# ---- gumbel_softmax, pdist, conv_tbc, channel shuffle ---------------------------------------

def test_gumbel_softmax_formula_and_straight_through():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((5, 4))
    g = -np.log(rng.exponential(size=(5, 4)))
    for hard in (False, True):
        lh = torch.tensor(logits, requires_grad=True)
        ysoft = ((lh + torch.tensor(g)) / 0.7).softmax(-1)
        if hard:
            yhard = torch.zeros_like(lh).scatter_(-1, ysoft.max(-1, keepdim=True)[1], 1.0)
            yh = yhard - ysoft.detach() + ysoft
        else:
            yh = ysoft
        lt = tl.tensor(logits, requires_grad=True)
        yt = FE._gumbel_softmax(lt, tl.tensor(g), 0.7, hard, -1)
        np.testing.assert_allclose(_np(yt), _np(yh), rtol=1e-12, atol=1e-15)
        w = rng.standard_normal((5, 4))
        (yh * torch.tensor(w)).sum().backward()
        (yt * tl.tensor(w)).sum().backward()
        np.testing.assert_allclose(lt.grad.numpy(), lh.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gumbel_softmax_statistics():
    tl.manual_seed(0)
    logits = tl.tensor([[0.0, 1.0, 2.0]]).expand(20000, 3)
    y = FE.gumbel_softmax(logits, tau=0.5, hard=True)
    freq = y.numpy().mean(0)
    p = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    np.testing.assert_allclose(freq, p, atol=0.015)
    assert set(np.unique(y.numpy())) == {0.0, 1.0}
    ys = FE.gumbel_softmax(tl.zeros(7, 5), dim=0)
    np.testing.assert_allclose(ys.numpy().sum(0), 1.0, rtol=1e-6)
    with pytest.warns(UserWarning, match="eps"):
        FE.gumbel_softmax(tl.zeros(2, 3), eps=1e-5)


@pytest.mark.parametrize("p", [0.0, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_pdist_matches_torch(p):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 4))
    x[3] = x[1]
    xh, xt = torch.tensor(x, requires_grad=True), tl.tensor(x, requires_grad=True)
    yh, yt = TF.pdist(xh, p), FE.pdist(xt, p)
    np.testing.assert_allclose(_np(yt), _np(yh), rtol=1e-12)
    if p == 0:
        return
    w = rng.standard_normal(15)
    (yh * torch.tensor(w)).sum().backward()
    (yt * tl.tensor(w)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), xh.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_pdist_edges_and_errors():
    assert FE.pdist(tl.zeros(1, 3)).shape == (0,)
    with pytest.raises(ShapeError, match="pdist only supports 2D tensors, got: 3D"):
        FE.pdist(tl.zeros(2, 3, 1))
    with pytest.raises(DomainError, match="non-negative p"):
        FE.pdist(tl.zeros(2, 3), p=-1)


def test_conv_tbc_and_native_channel_shuffle_match_torch():
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((7, 2, 3)), rng.standard_normal((3, 3, 4)), rng.standard_normal(4)
    th = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    tt = [tl.tensor(a, requires_grad=True) for a in (x, w, b)]
    for pad in (0, 2):
        for a in th + tt:
            a.grad = None
        yh, yt = torch.conv_tbc(*th, pad), FE.conv_tbc(*tt, pad)
        np.testing.assert_allclose(_np(yt), _np(yh), rtol=1e-12)
        g = rng.standard_normal(tuple(yh.shape))
        yh.backward(torch.tensor(g))
        yt.backward(tl.tensor(g))
        for a, c in zip(tt, th):
            np.testing.assert_allclose(a.grad.numpy(), c.grad.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ShapeError, match="input channels"):
        FE.conv_tbc(tl.zeros(5, 2, 4), tl.zeros(3, 3, 4), tl.zeros(4))
    x = rng.standard_normal((2, 6, 3))
    np.testing.assert_array_equal(FE.native_channel_shuffle(tl.tensor(x), 3).numpy(),
                                  torch.native_channel_shuffle(torch.tensor(x), 3).numpy())


# ---- in-place activations -------------------------------------------------------------------

INPLACE = [("relu_", ()), ("elu_", (0.7,)), ("celu_", (1.3,)), ("selu_", ()), ("leaky_relu_", (0.2,)),
           ("hardtanh_", (-0.5, 0.7)), ("rrelu_", (0.1, 0.3, False)), ("threshold_", (0.3, -2.0))]


@pytest.mark.parametrize("name,args", INPLACE)
def test_inplace_activations_match_torch(name, args):
    x = np.random.default_rng(6).standard_normal((3, 4)) * 2
    ah, at = torch.tensor(x, requires_grad=True), tl.tensor(x, requires_grad=True)
    yh, yt = ah * 1.5, at * 1.5
    rh, rt = getattr(TF, name)(yh, *args), getattr(FE, name)(yt, *args)
    assert rh is yh and rt is yt
    np.testing.assert_allclose(yt.detach().numpy(), yh.detach().numpy(), rtol=1e-12)
    (yh * yh).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(at.grad.numpy(), ah.grad.numpy(), rtol=1e-6, atol=1e-12)
    with pytest.raises(AutogradError, match=name):
        getattr(FE, name)(tl.tensor(x, requires_grad=True), *args)
    z = tl.tensor(x)
    getattr(FE, name)(z, *args)
    np.testing.assert_allclose(z.numpy(), getattr(TF, name)(torch.tensor(x), *args).numpy(), rtol=1e-12)


def test_rrelu_inplace_training_draws_slopes():
    tl.manual_seed(0)
    z = -tl.ones(1000)
    FE.rrelu_(z, 0.1, 0.3, True)
    v = -z.numpy()
    assert v.min() >= 0.1 and v.max() <= 0.3 and abs(v.mean() - 0.2) < 0.01


# ---- DataParallel ---------------------------------------------------------------------------

def test_data_parallel_wraps_module_like_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lh = torch.nn.Linear(3, 2)
        dh = torch.nn.DataParallel(lh)
    lt = tl.nn.Linear(3, 2)
    dt = DataParallel(lt)
    assert dt.module is lt
    assert repr(dt) == repr(dh)
    assert list(dt.state_dict()) == list(dh.state_dict()) == ["module.weight", "module.bias"]
    dt.load_state_dict(_sd(dh), strict=True)
    x = np.random.default_rng(7).standard_normal((4, 3)).astype(np.float32)
    # unseeded weights: an output near 0 needs an absolute tolerance next to the relative one
    np.testing.assert_allclose(dt(tl.tensor(x)).detach().numpy(), dh(torch.tensor(x)).detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(data_parallel(lt, tl.tensor(x)).detach().numpy(),
                               lh(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(data_parallel(lt, (tl.tensor(x),), module_kwargs={}).numpy(),
                               dt(tl.tensor(x)).numpy())
    with pytest.raises(DeviceError, match="DataParallel: device_ids=\\[0, 1\\]"):
        DataParallel(lt, device_ids=[0, 1])
    with pytest.raises(DeviceError, match="data_parallel"):
        data_parallel(lt, tl.tensor(x), device_ids=[0, 1])
    with pytest.raises(DeviceError, match="DataParallel"):
        DataParallel(lt, device_ids=["cpu"])


# ---- CUDA -----------------------------------------------------------------------------------

@pytest.mark.cuda
def test_extra_cuda_matches_cpu():
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    s = tl.tensor(rng.random((2, 3, 2)).astype(np.float32))
    fns = [lambda t: FE.fractional_max_pool2d(t, 2, output_size=(4, 5), _random_samples=s.to(t.device)),
           lambda t: FE.pdist(t.reshape(18, 24)),
           lambda t: FE.conv_tbc(t[0], t[1, :2, :8, :5], t[1, 0, 0, :5], 1),
           lambda t: FE.elu_(t * 1.0, 0.5)]
    for f in fns:
        xc, xg = tl.tensor(x, requires_grad=True), tl.tensor(x, device="cuda", requires_grad=True)
        yc, yg = f(xc), f(xg)
        assert yg.device == "cuda"
        np.testing.assert_allclose(yg.detach().numpy(), yc.detach().numpy(), rtol=1e-5, atol=1e-5)
        yc.sum().backward()
        yg.sum().backward()
        np.testing.assert_allclose(xg.grad.numpy(), xc.grad.numpy(), rtol=1e-5, atol=1e-5)
    m = NL.LazyLinear(3).to("cuda")
    assert m(tl.ones(2, 4, device="cuda")).device == "cuda" and m.weight.device == "cuda"
    dp = DataParallel(tl.nn.Linear(4, 2))
    assert dp.device_ids == [0] and dp.module.weight.device == "cuda"
    assert dp(tl.ones(3, 4)).device == "cuda"
