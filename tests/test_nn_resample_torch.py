"""Padding, adaptive pooling, interpolation, shuffles, im2col and LP pooling against PyTorch:
outputs and input gradients (float64 tight, float32 at 1e-5), modules, and bad arguments."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import torchlean as tl
import torchlean.nn.functional_resample as FR
import torchlean.nn.resample as NR
from torchlean.errors import DomainError, ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional

SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)


def both(f_tl, f_th, a, tol=1e-10, seed=0, grad=True):
    """Run both on the same array; compare outputs and, for a random cotangent, input gradients."""
    xt = tl.tensor(a, requires_grad=grad)
    xh = torch.tensor(a, requires_grad=grad)
    yt, yh = f_tl(xt), f_th(xh)
    if isinstance(yh, tuple):
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


def randn(rng, shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


# ---- pad ------------------------------------------------------------------------------------

@SETTINGS
@given(n=st.integers(1, 3), batched=st.booleans(), mode=st.sampled_from(["constant", "reflect", "replicate",
                                                                          "circular"]), data=st.data())
def test_pad_matches_torch(n, batched, mode, data):
    rng = np.random.default_rng(n * 7 + batched)
    spatial = tuple(data.draw(st.integers(2, 5)) for _ in range(n))
    shape = ((2,) if batched else ()) + (3,) + spatial
    pads = []
    for L in reversed(spatial):
        lo_min = -(L // 2) if mode != "reflect" else -1
        hi = L - 1 if mode in ("reflect",) else L
        lo = data.draw(st.integers(lo_min, hi))
        hi = data.draw(st.integers(max(lo_min, 1 - L - lo), hi))              # output size >= 1
        if mode == "circular":     # torch reads unset memory when a pad exceeds what cropping leaves
            kept = L - max(-lo, 0) - max(-hi, 0)
            lo, hi = min(lo, kept), min(hi, kept)
        pads += [lo, hi]
    value = 1.5 if mode == "constant" else None
    both(lambda x: FR.pad(x, pads, mode, value), lambda x: TF.pad(x, pads, mode, value), randn(rng, shape))


def test_pad_hand_cases():
    x = tl.tensor([[[0.0, 1.0, 2.0, 3.0, 4.0]]])
    assert FR.pad(x, (2, 1), "reflect").flatten().tolist() == [2, 1, 0, 1, 2, 3, 4, 3]
    assert FR.pad(x, (2, -1), "circular").flatten().tolist() == [2, 3, 0, 1, 2, 3]
    assert FR.pad(x, (-2, 2), "replicate").flatten().tolist() == [2, 3, 4, 4, 4]
    assert FR.pad(x, (1, 12), "replicate").flatten().tolist() == [0, 0, 1, 2, 3] + [4] * 13   # many runs
    for mode in ("reflect", "replicate", "circular"):    # a crop to one run is a new tensor, as torch's
        y = FR.pad(x, (-1, -1), mode)
        y.add_(10.0)
        assert x.flatten().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and y.flatten().tolist() == [11.0, 12.0, 13.0]
    # constant pads any number of leading axes, of any rank, and keeps the dtype
    i = tl.tensor(np.arange(6).reshape(2, 3))
    y = FR.pad(i, (1, 0, 0, 1), value=7)
    assert y.dtype == tl.int64
    assert y.tolist() == TF.pad(torch.arange(6).reshape(2, 3), (1, 0, 0, 1), value=7).tolist()


def test_pad_errors():
    x = tl.zeros(1, 2, 3)
    with pytest.raises(ShapeError):
        FR.pad(x, (1,))
    with pytest.raises(ShapeError):
        FR.pad(x, (3, 0), "reflect")
    with pytest.raises(ShapeError):
        FR.pad(x, (1, 1, 1, 1, 1, 1), "replicate")        # 3 padded axes need a 4D or 5D input
    with pytest.raises(DomainError):
        FR.pad(x, (1, 1), "wrap")
    with pytest.raises(ShapeError):
        FR.pad(x, (1, 1) * 4)
    with pytest.raises(ShapeError):
        FR.pad(x, (2, -2), "circular")                      # a pad larger than what cropping leaves
    with pytest.raises(ShapeError):
        FR.pad(x, (-2, -1), "replicate")                    # an empty result


@pytest.mark.parametrize("name,args,mode", [
    ("ZeroPad1d", (2,), "constant"), ("ZeroPad2d", ((1, 0, 2, 1),), "constant"), ("ZeroPad3d", (1,), "constant"),
    ("ConstantPad1d", ((1, 2), 3.5), "constant"), ("ConstantPad2d", (1, -2.0), "constant"),
    ("ConstantPad3d", ((1, 0, 0, 1, 1, 1), 0.5), "constant"), ("ReflectionPad1d", ((2, 1),), "reflect"),
    ("ReflectionPad2d", (1,), "reflect"), ("ReflectionPad3d", ((1, 0, 1, 1, 0, 1),), "reflect"),
    ("ReplicationPad1d", (3,), "replicate"), ("ReplicationPad2d", ((0, 2, 1, 0),), "replicate"),
    ("ReplicationPad3d", (1,), "replicate"), ("CircularPad1d", (2,), "circular"),
    ("CircularPad2d", ((1, 2, 0, 1),), "circular"), ("CircularPad3d", (1,), "circular")])
def test_pad_modules(name, args, mode, rng):
    d = int(name[-2])
    m_tl, m_th = getattr(NR, name)(*args), getattr(torch.nn, name)(*args)
    assert m_tl.padding == tuple(m_th.padding)
    assert repr(m_tl) == repr(m_th)
    assert m_tl.state_dict() == {} and len(m_th.state_dict()) == 0
    both(m_tl, m_th, randn(rng, (2, 2) + (4,) * d))


# ---- adaptive pooling -----------------------------------------------------------------------

@SETTINGS
@given(d=st.integers(1, 3), batched=st.booleans(), data=st.data())
def test_adaptive_avg_pool(d, batched, data):
    rng = np.random.default_rng(d + 10 * batched)
    spatial = tuple(data.draw(st.integers(1, 9)) for _ in range(d))
    out = tuple(data.draw(st.integers(1, 9)) for _ in range(d))
    shape = ((2,) if batched else ()) + (3,) + spatial
    f_tl, f_th = getattr(FR, f"adaptive_avg_pool{d}d"), getattr(TF, f"adaptive_avg_pool{d}d")
    both(lambda x: f_tl(x, out), lambda x: f_th(x, out), randn(rng, shape))


@SETTINGS
@given(d=st.integers(1, 3), batched=st.booleans(), data=st.data())
def test_adaptive_max_pool_with_indices(d, batched, data):
    rng = np.random.default_rng(d + 10 * batched)
    spatial = tuple(data.draw(st.integers(1, 8)) for _ in range(d))
    out = tuple(data.draw(st.integers(1, 8)) for _ in range(d))
    shape = ((2,) if batched else ()) + (3,) + spatial
    f_tl, f_th = getattr(FR, f"adaptive_max_pool{d}d"), getattr(TF, f"adaptive_max_pool{d}d")
    both(lambda x: f_tl(x, out, True), lambda x: f_th(x, out, True), randn(rng, shape))


def test_adaptive_max_pool_ties_and_none(rng):
    # ties: the first maximal entry (row-major) wins and takes the whole gradient, as in torch
    a = np.round(rng.standard_normal((2, 3, 7, 6)), 0)
    both(lambda x: FR.adaptive_max_pool2d(x, (3, 4), True), lambda x: TF.adaptive_max_pool2d(x, (3, 4), True), a)
    both(lambda x: FR.adaptive_max_pool2d(x, (None, 4)), lambda x: TF.adaptive_max_pool2d(x, (None, 4)), a)
    both(lambda x: FR.adaptive_avg_pool2d(x, (5, None)), lambda x: TF.adaptive_avg_pool2d(x, (5, None)), a)
    y = FR.adaptive_avg_pool1d(tl.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]), 2)
    assert y.tolist() == [[[2.0, 4.0]]]                        # cells [0, 3) and [2, 5)


def test_adaptive_pool_modules(rng):
    a = randn(rng, (2, 3, 6, 7, 5))
    for name, out in [("AdaptiveAvgPool1d", 4), ("AdaptiveAvgPool2d", (3, 5)), ("AdaptiveAvgPool3d", (2, 3, 4)),
                      ("AdaptiveMaxPool1d", 3), ("AdaptiveMaxPool2d", (4, 2)), ("AdaptiveMaxPool3d", 2)]:
        d = int(name[-2])
        x = a.reshape((2, 3) + a.shape[2:2 + d] + (-1,))[..., 0] if d < 3 else a
        x = np.ascontiguousarray(x.reshape((2, 3) + x.shape[2:2 + d]))
        m_tl, m_th = getattr(NR, name)(out), getattr(torch.nn, name)(out)
        assert repr(m_tl) == repr(m_th)
        both(m_tl, m_th, x)
    m_tl, m_th = NR.AdaptiveMaxPool2d(3, return_indices=True), torch.nn.AdaptiveMaxPool2d(3, return_indices=True)
    both(m_tl, m_th, randn(rng, (1, 2, 7, 7)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_and_inf_stay_local_in_pooling_and_fold(rng):
    a = rng.random((1, 2, 7, 6))
    a[0, 0, 2, 3], a[0, 1, 4, 1], a[0, 1, 0, 0] = np.nan, -np.inf, np.inf
    y_tl, i_tl = FR.adaptive_max_pool2d(tl.tensor(a), (3, 4), True)
    y_th, i_th = TF.adaptive_max_pool2d(torch.tensor(a), (3, 4), True)
    np.testing.assert_array_equal(y_tl.numpy(), y_th.numpy())              # NaN wins, as in torch
    np.testing.assert_array_equal(i_tl.numpy(), i_th.numpy())
    y_tl = FR.adaptive_avg_pool2d(tl.tensor(a), (3, 4)).numpy()
    y_th = TF.adaptive_avg_pool2d(torch.tensor(a), (3, 4)).numpy()
    np.testing.assert_allclose(y_tl, y_th, rtol=1e-12, atol=1e-12)
    assert np.isfinite(y_tl).sum() >= 12
    c = rng.random((2, 18, 32))
    c[0, 3, 5] = np.nan
    args = ((7, 8), (2, 3), (1, 2), (1, 2), (2, 1))
    y_tl, y_th = FR.fold(tl.tensor(c), *args).numpy(), TF.fold(torch.tensor(c), *args).numpy()
    np.testing.assert_allclose(y_tl, y_th, rtol=1e-12, atol=1e-12)
    assert np.isnan(y_tl).sum() == 1


def test_adaptive_pool_errors():
    with pytest.raises(ShapeError):
        FR.adaptive_avg_pool2d(tl.zeros(4, 4), 2)
    with pytest.raises(ShapeError):
        FR.adaptive_max_pool1d(tl.zeros(1, 2, 0), 2)
    with pytest.raises(ShapeError):
        FR.adaptive_avg_pool2d(tl.zeros(1, 2, 4, 4), (1, 2, 3))


# ---- interpolate ----------------------------------------------------------------------------

CASES = [dict(size=11), dict(size=3), dict(scale_factor=1.7), dict(scale_factor=0.6),
         dict(scale_factor=0.6, recompute_scale_factor=True), dict(scale_factor=2), dict(scale_factor=3.0)]
MODES = [("nearest", 2), ("nearest", 1), ("nearest", 3), ("nearest-exact", 2), ("linear", 1), ("bilinear", 2),
         ("bicubic", 2), ("trilinear", 3), ("area", 2), ("area", 1)]


@pytest.mark.parametrize("mode,d", MODES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_interpolate(mode, d, dtype, rng):
    shape = (2, 2) + (5, 7, 4)[:d]
    tol = 1e-10 if dtype == np.float64 else 1e-5
    acs = [None] if mode in ("nearest", "nearest-exact", "area") else [False, True]
    for kw in CASES:
        for ac in acs:
            a = randn(rng, shape, dtype)
            both(lambda x: FR.interpolate(x, mode=mode, align_corners=ac, **kw),
                 lambda x: TF.interpolate(x, mode=mode, align_corners=ac, **kw), a, tol)


def test_interpolate_mixed_sizes_and_hand_case(rng):
    a = randn(rng, (1, 3, 6, 5))
    for mode in ("bilinear", "bicubic", "nearest", "area"):
        both(lambda x: FR.interpolate(x, size=(4, 9), mode=mode),
             lambda x: TF.interpolate(x, size=(4, 9), mode=mode), a)
        both(lambda x: FR.interpolate(x, scale_factor=(0.5, 2.5), mode=mode),
             lambda x: TF.interpolate(x, scale_factor=(0.5, 2.5), mode=mode), a)
    y = FR.interpolate(tl.tensor([[[0.0, 1.0]]]), size=4, mode="linear", align_corners=False)
    assert y.flatten().tolist() == [0.0, 0.25, 0.75, 1.0]
    y = FR.interpolate(tl.tensor([[[0.0, 1.0]]]), size=3, mode="linear", align_corners=True)
    assert y.flatten().tolist() == [0.0, 0.5, 1.0]
    u8 = tl.tensor(np.arange(6, dtype=np.uint8).reshape(1, 1, 2, 3))
    assert FR.interpolate(u8, scale_factor=2).tolist() == TF.interpolate(
        torch.arange(6, dtype=torch.uint8).reshape(1, 1, 2, 3), scale_factor=2).tolist()


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("ac", [False, True])
@pytest.mark.parametrize("kw", [dict(size=(4, 9)), dict(size=(2, 3)), dict(scale_factor=0.3),
                                dict(scale_factor=(0.45, 1.6)), dict(scale_factor=0.6, recompute_scale_factor=True)])
def test_interpolate_antialias(mode, ac, kw, rng):
    """torchvision's Resize default: the filter widened by the downscaling factor, weights normalized;
    forward and gradient against torch."""
    a = randn(rng, (2, 3, 11, 13))
    both(lambda x: FR.interpolate(x, mode=mode, align_corners=ac, antialias=True, **kw),
         lambda x: TF.interpolate(x, mode=mode, align_corners=ac, antialias=True, **kw), a)


def test_interpolate_antialias_errors_and_width_one():
    with pytest.raises(DomainError, match="anti-alias option is restricted to bilinear and bicubic"):
        FR.interpolate(tl.ones(1, 1, 4, 4), size=2, mode="nearest", antialias=True)
    # torch gives every output row the first row's weights when the width is 1 (docs/differences.md);
    # here each row has its own, as for any other width.
    x = np.arange(18.0).reshape(1, 1, 18, 1)
    y = FR.interpolate(tl.tensor(x), size=(6, 1), mode="bilinear", antialias=True).flatten().tolist()
    z = FR.interpolate(tl.tensor(np.repeat(x, 2, axis=3)), size=(6, 2), mode="bilinear", antialias=True)
    assert y == z[..., 0].flatten().tolist() and y == sorted(y) and y[0] < y[-1]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("mode,kw", [("bilinear", dict(scale_factor=2)), ("bilinear", dict(size=(6, 7))),
                                     ("bicubic", dict(size=(9, 4))), ("bicubic", dict(size=(6, 7))),
                                     ("linear", dict(size=7)), ("trilinear", dict(scale_factor=1.5)), ("area", dict(size=(3, 2))),
                                     ("nearest", dict(size=(3, 9)))])
def test_interpolate_nan_and_inf_stay_local(mode, kw, rng):
    a = rng.random((1, 2, 6, 7, 5)[:{"linear": 3, "trilinear": 5}.get(mode, 4)])
    a[(0, 0, 2, 3, 1)[:a.ndim]], a[(0, 1, 4, 1, 2)[:a.ndim]] = np.nan, np.inf
    y_tl = FR.interpolate(tl.tensor(a), mode=mode, **kw).numpy()
    y_th = TF.interpolate(torch.tensor(a), mode=mode, **kw).numpy()
    np.testing.assert_array_equal(np.isnan(y_tl), np.isnan(y_th))
    np.testing.assert_allclose(y_tl, y_th, rtol=1e-12, atol=1e-12)
    assert np.isfinite(y_tl).sum() > y_tl.size // 2


def test_interpolate_errors():
    x = tl.zeros(1, 2, 4, 4)
    with pytest.raises(DomainError):
        FR.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(DomainError):
        FR.interpolate(x)
    with pytest.raises(DomainError):
        FR.interpolate(x, size=3, mode="nearest", align_corners=True)
    with pytest.raises(ShapeError):
        FR.interpolate(x, size=3, mode="trilinear")
    with pytest.raises(DomainError):
        FR.interpolate(x, size=3, mode="cubic")
    with pytest.raises(ShapeError):
        FR.interpolate(x, size=(3, 3, 3))


def test_deprecated_upsample_functions(rng):
    a = randn(rng, (1, 2, 3, 4))
    for name, kw in [("upsample", dict(scale_factor=2, mode="bilinear")), ("upsample_nearest", dict(size=(5, 7))),
                     ("upsample_bilinear", dict(scale_factor=1.5))]:
        with pytest.warns(UserWarning, match="deprecated"):
            f_tl = getattr(FR, name)
            both(lambda x: f_tl(x, **kw), lambda x: getattr(TF, name)(x, **kw), a)


def test_upsample_modules(rng):
    a = randn(rng, (2, 3, 4, 5))
    pairs = [(NR.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2)),
             (NR.Upsample(size=(7, 3), mode="bilinear"), torch.nn.Upsample(size=(7, 3), mode="bilinear")),
             (NR.Upsample(scale_factor=1.5, mode="bicubic", align_corners=True),
              torch.nn.Upsample(scale_factor=1.5, mode="bicubic", align_corners=True)),
             (NR.UpsamplingNearest2d(scale_factor=3), torch.nn.UpsamplingNearest2d(scale_factor=3)),
             (NR.UpsamplingBilinear2d(size=(9, 8)), torch.nn.UpsamplingBilinear2d(size=(9, 8)))]
    for m_tl, m_th in pairs:
        assert repr(m_tl) == repr(m_th)
        both(m_tl, m_th, a)
    m = NR.Upsample(scale_factor=2, mode="trilinear")
    both(m, torch.nn.Upsample(scale_factor=2, mode="trilinear"), randn(rng, (1, 2, 3, 2, 4)))


# ---- shuffles -------------------------------------------------------------------------------

@SETTINGS
@given(r=st.integers(1, 3), c=st.integers(1, 3), h=st.integers(1, 4), w=st.integers(1, 4),
       lead=st.sampled_from([(), (2,), (2, 1)]))
def test_pixel_shuffles(r, c, h, w, lead):
    rng = np.random.default_rng(r * 100 + c * 10 + h)
    both(lambda x: FR.pixel_shuffle(x, r), lambda x: TF.pixel_shuffle(x, r), randn(rng, lead + (c * r * r, h, w)))
    both(lambda x: FR.pixel_unshuffle(x, r), lambda x: TF.pixel_unshuffle(x, r),
         randn(rng, lead + (c, h * r, w * r)))


def test_shuffle_modules_and_errors(rng):
    both(NR.PixelShuffle(2), torch.nn.PixelShuffle(2), randn(rng, (2, 8, 3, 3)))
    both(NR.PixelUnshuffle(3), torch.nn.PixelUnshuffle(3), randn(rng, (2, 2, 6, 3)))
    both(NR.ChannelShuffle(3), torch.nn.ChannelShuffle(3), randn(rng, (2, 6, 4, 5)))
    both(lambda x: FR.channel_shuffle(x, 2), lambda x: TF.channel_shuffle(x, 2), randn(rng, (1, 4, 3)))
    assert repr(NR.PixelShuffle(2)) == repr(torch.nn.PixelShuffle(2))
    assert repr(NR.ChannelShuffle(3)) == repr(torch.nn.ChannelShuffle(3))
    with pytest.raises(ShapeError):
        FR.pixel_shuffle(tl.zeros(1, 3, 2, 2), 2)
    with pytest.raises(ShapeError):
        FR.pixel_unshuffle(tl.zeros(1, 3, 3, 2), 2)
    with pytest.raises(ShapeError):
        FR.channel_shuffle(tl.zeros(1, 5, 2), 2)


# ---- unfold / fold --------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), batched=st.booleans())
def test_unfold_fold(data, batched):
    k = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    dl = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)))
    p = (data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2)))
    s = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    size = tuple(data.draw(st.integers(dl[i] * (k[i] - 1) + 1, 8)) for i in range(2))
    rng = np.random.default_rng(sum(k + dl + p + s + size))
    lead = (2,) if batched else ()
    both(lambda x: FR.unfold(x, k, dl, p, s), lambda x: TF.unfold(x, k, dl, p, s), randn(rng, lead + (3,) + size))
    L = 1
    for i in range(2):
        L *= (size[i] + 2 * p[i] - dl[i] * (k[i] - 1) - 1) // s[i] + 1
    both(lambda x: FR.fold(x, size, k, dl, p, s), lambda x: TF.fold(x, size, k, dl, p, s),
         randn(rng, lead + (3 * k[0] * k[1], L)))


def test_fold_unfold_modules_and_errors(rng):
    m_tl, m_th = NR.Unfold((2, 3), dilation=2, padding=1, stride=(1, 2)), \
        torch.nn.Unfold((2, 3), dilation=2, padding=1, stride=(1, 2))
    assert repr(m_tl) == repr(m_th)
    both(m_tl, m_th, randn(rng, (2, 3, 6, 7)))
    m_tl, m_th = NR.Fold((5, 6), 2, stride=2, padding=1), torch.nn.Fold((5, 6), 2, stride=2, padding=1)
    assert repr(m_tl) == repr(m_th)
    both(m_tl, m_th, randn(rng, (2, 8, 12)))
    # fold(unfold(ones)) counts how many blocks cover each pixel
    cover = FR.fold(FR.unfold(tl.ones(1, 1, 3, 3), 2), (3, 3), 2)
    assert cover.flatten().tolist() == [1, 2, 1, 2, 4, 2, 1, 2, 1]
    with pytest.raises(ShapeError):
        FR.fold(tl.zeros(1, 8, 11), (5, 6), 2, stride=2, padding=1)
    with pytest.raises(ShapeError):
        FR.fold(tl.zeros(1, 7, 12), (5, 6), 2, stride=2, padding=1)
    with pytest.raises(ShapeError):
        FR.unfold(tl.zeros(1, 1, 2, 2), 3)
    with pytest.raises(ShapeError):
        FR.unfold(tl.zeros(2, 2), 1)


# ---- LP pooling -----------------------------------------------------------------------------

def test_lp_pool(rng):
    a = np.abs(randn(rng, (2, 3, 9, 8))) + 0.1
    for p in (1.0, 2.0, 3.0):
        both(lambda x: FR.lp_pool2d(x, p, (2, 3)), lambda x: TF.lp_pool2d(x, p, (2, 3)), a)
        both(lambda x: FR.lp_pool2d(x, p, 3, 2), lambda x: TF.lp_pool2d(x, p, 3, 2), a)
        both(lambda x: FR.lp_pool1d(x, p, 3, 2), lambda x: TF.lp_pool1d(x, p, 3, 2), a[:, :, 0])
    both(NR.LPPool2d(2, 2), torch.nn.LPPool2d(2, 2), a)
    both(NR.LPPool1d(3, 4, stride=1), torch.nn.LPPool1d(3, 4, stride=1), a[:, :, 0])
    assert repr(NR.LPPool2d(2, 2)) == repr(torch.nn.LPPool2d(2, 2))
    b = np.abs(randn(rng, (2, 2, 5, 6, 4))) + 0.1
    both(lambda x: FR.lp_pool3d(x, 2.0, (2, 3, 2), 1), lambda x: TF.lp_pool3d(x, 2.0, (2, 3, 2), 1), b)
    both(NR.LPPool3d(3, 2), torch.nn.LPPool3d(3, 2), b)
    both(lambda x: FR.lp_pool2d(x, 2.0, 2, ceil_mode=True), lambda x: TF.lp_pool2d(x, 2.0, 2, ceil_mode=True), a)
    both(lambda x: FR.lp_pool1d(x, 3.0, 2, ceil_mode=True), lambda x: TF.lp_pool1d(x, 3.0, 2, ceil_mode=True),
         a[:, :, 0])


def test_modules_load_torch_state_dict():
    for m_tl, m_th in [(NR.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2)),
                       (NR.Fold(4, 2), torch.nn.Fold(4, 2)), (NR.ReflectionPad2d(1), torch.nn.ReflectionPad2d(1))]:
        m_tl.load_state_dict({k: v.detach().numpy() for k, v in m_th.state_dict().items()})
        assert list(m_tl.state_dict()) == list(m_th.state_dict()) == []


# ---- CUDA -----------------------------------------------------------------------------------

@pytest.mark.cuda
def test_resample_cuda_matches_cpu(rng):
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("no CUDA device")
    a = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    fns = [lambda x: FR.pad(x, (1, 2, 2, 1), "reflect"), lambda x: FR.pad(x, (1, 2, 1, 1), "circular"),
           lambda x: FR.pad(x, (1, 1, -1, 2), value=0.5), lambda x: FR.adaptive_avg_pool2d(x, (3, 4)),
           lambda x: FR.adaptive_max_pool2d(x, (3, 4)),
           lambda x: FR.interpolate(x, scale_factor=1.7, mode="bilinear"),
           lambda x: FR.interpolate(x, size=(9, 5), mode="bicubic", align_corners=True),
           lambda x: FR.interpolate(x, scale_factor=2, mode="nearest"), lambda x: FR.pixel_shuffle(x, 2),
           lambda x: FR.fold(FR.unfold(x, 3, padding=1), (7, 6), 3, padding=1)]
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
