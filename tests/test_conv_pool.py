"""Convolution and pooling: torch (CPU, float64) as the oracle for the tape's fast path,
hand-computed pooling conventions, N-d generality, and the errors users see."""

import numpy as np
import pytest

from torchlean.autograd import Tape
from torchlean.errors import DomainError, ShapeError
from torchlean.kernels import get_kernels
from torchlean.spec import SPEC

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _tape_run(op, inputs, attrs, g, fast=True):
    """Forward value and input cotangents of ``op`` through the tape."""
    t = Tape(fast_kernels=fast)
    ids = [t.leaf(np.asarray(x)) for x in inputs]
    out = t.op(op, *ids, **attrs)
    grads = t.backward(out, seed=g)
    return t.value(out), [grads[i] for i in ids]


def _torch_run(fn, inputs, g):
    ts = [torch.tensor(x, requires_grad=True) for x in inputs]
    y = fn(*ts)
    gs = torch.autograd.grad(y, ts, torch.tensor(g))
    return y.detach().numpy(), [a.numpy() for a in gs]


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ---- torch oracle, float64 ------------------------------------------------------------------

CONV_CASES = [
    # x, w, stride, padding, dilation, groups
    ((2, 3, 16, 16), (8, 3, 7, 7), (2, 2), (3, 3), (1, 1), 1),      # ResNet stem (small)
    ((2, 8, 8, 8), (8, 8, 3, 3), (1, 1), (1, 1), (1, 1), 1),        # basic-block 3x3
    ((2, 8, 8, 8), (16, 8, 1, 1), (2, 2), (0, 0), (1, 1), 1),       # 1x1 downsample
    ((2, 8, 9, 7), (8, 2, 3, 3), (2, 1), (1, 2), (2, 1), 4),        # grouped, dilated
    ((3, 10), (6, 1, 4), (3,), (2,), (1,), 3),                      # unbatched 1-D depthwise
    ((2, 3, 5, 5), (4, 3, 1, 2), (1, 1), (1, 1), (1, 1), 1),        # padding beyond the kernel reach
    ((1, 2, 5, 6, 4), (4, 2, 3, 2, 3), (1, 2, 1), (1, 0, 1), (1, 1, 1), 1),
    # >= 512 output positions per sample and N > 1: columns built one sample at a time (host)
    ((3, 4, 26, 24), (6, 2, 3, 3), (1, 1), (1, 1), (1, 1), 2),
    ((2, 3, 50, 46), (4, 3, 5, 3), (2, 1), (2, 1), (1, 2), 1),
    ((3, 2, 700), (4, 1, 3), (1,), (1,), (1,), 2),
    # depthwise 2-d with unit strides: the direct multiply-adds on the host (the data gradient too)
    ((2, 6, 9, 7), (6, 1, 3, 2), (1, 1), (1, 0), (1, 1), 6),
    ((1, 5, 8, 8), (5, 1, 3, 3), (1, 1), (2, 1), (1, 1), 5),
    # pointwise (1x1, stride 1, no padding): the input is its own columns
    ((3, 8, 5, 7), (6, 4, 1, 1), (1, 1), (0, 0), (1, 1), 2),
    ((2, 4, 9), (5, 4, 1), (1,), (0,), (3,), 1),
]


@pytest.mark.parametrize("xs,ws,s,p,dil,groups", CONV_CASES)
def test_conv_matches_torch(rng, xs, ws, s, p, dil, groups):
    d = len(ws) - 2
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    attrs = dict(stride=s, padding=p, dilation=dil, groups=groups)
    y_ref = getattr(F, f"conv{d}d")(torch.tensor(x), torch.tensor(w), torch.tensor(b), s, p, dil, groups).numpy()
    g = rng.standard_normal(y_ref.shape)
    ty, tg = _torch_run(lambda a, bw, bb: getattr(F, f"conv{d}d")(a, bw, bb, s, p, dil, groups), (x, w, b), g)
    y, grads = _tape_run("conv", (x, w, b), attrs, g)
    assert y.dtype == np.float64 and y.shape == ty.shape
    _close(y, ty)
    for a, e in zip(grads, tg):
        _close(a, e)


@pytest.mark.parametrize("block", [1, 300])
@pytest.mark.parametrize("xs,ws,s,p,dil,groups", CONV_CASES)
def test_conv_in_bands_of_output_rows_matches_torch(monkeypatch, rng, block, xs, ws, s, p, dil, groups):
    """Columns past the host's block size are built a band of output rows at a time (here: one row,
    or a few): the same forward and gradients, for one sample as for a batch."""
    from torchlean.kernels.host import conv
    monkeypatch.setattr(conv, "_COLS_BLOCK", block)
    test_conv_matches_torch(rng, xs, ws, s, p, dil, groups)


@pytest.mark.parametrize("xs,ws,s,p,dil,groups", [c for c in CONV_CASES if c[5] == c[0][1] == c[1][0]])
def test_depthwise_conv_one_channel_at_a_time_matches_torch(monkeypatch, rng, xs, ws, s, p, dil, groups):
    from torchlean.kernels.host import conv
    monkeypatch.setattr(conv, "_DEPTHWISE_BLOCK", 1)
    test_conv_matches_torch(rng, xs, ws, s, p, dil, groups)


CONVT_CASES = [
    # x, w, stride, padding, output_padding, dilation, groups
    ((2, 8, 4, 4), (8, 4, 4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1),   # DCGAN-style upsampling
    ((2, 4, 5, 3), (4, 3, 3, 3), (2, 3), (1, 0), (1, 2), (1, 1), 2),
    ((1, 3, 4, 4), (3, 2, 2, 3), (1, 1), (0, 1), (1, 0), (2, 1), 1),   # output_padding < dilation, >= stride
    ((4, 6), (4, 2, 3), (2,), (1,), (1,), (1,), 1),                     # unbatched 1-D
    ((1, 2, 3, 2, 3), (2, 2, 2, 3, 2), (2, 1, 2), (0, 1, 1), (1, 0, 0), (1, 1, 1), 1),
    ((2, 4, 24, 24), (4, 3, 3, 3), (1, 1), (1, 1), (0, 0), (1, 1), 1),   # >= 512 positions, N > 1
    ((2, 4, 12, 12), (4, 2, 4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 2),
]


@pytest.mark.parametrize("xs,ws,s,p,op,dil,groups", CONVT_CASES)
def test_conv_transpose_matches_torch(rng, xs, ws, s, p, op, dil, groups):
    d = len(ws) - 2
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[1] * groups)
    fn = getattr(F, f"conv_transpose{d}d")
    y_shape = fn(torch.tensor(x), torch.tensor(w), torch.tensor(b), s, p, op, groups, dil).shape
    g = rng.standard_normal(tuple(y_shape))
    ty, tg = _torch_run(lambda a, bw, bb: fn(a, bw, bb, s, p, op, groups, dil), (x, w, b), g)
    attrs = dict(stride=s, padding=p, output_padding=op, dilation=dil, groups=groups)
    y, grads = _tape_run("conv_transpose", (x, w, b), attrs, g)
    _close(y, ty)
    for a, e in zip(grads, tg):
        _close(a, e)


def test_resnet_block_matches_torch(rng):
    """stem conv -> max_pool -> two 3x3 convs with a residual add -> avg_pool, through one tape."""
    x = rng.standard_normal((2, 3, 16, 16))
    w0, b0 = rng.standard_normal((8, 3, 7, 7)) * 0.1, rng.standard_normal(8)
    w1, w2 = rng.standard_normal((8, 8, 3, 3)) * 0.1, rng.standard_normal((8, 8, 3, 3)) * 0.1
    t = Tape()
    ix, i0, ib0, i1, i2 = (t.leaf(a) for a in (x, w0, b0, w1, w2))
    h = t.op("conv", ix, i0, ib0, stride=(2, 2), padding=(3, 3), dilation=(1, 1), groups=1)
    h = t.op("relu", h)
    h = t.op("max_pool", h, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1))
    r = t.op("conv_nobias", h, i1, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    r = t.op("relu", r)
    r = t.op("conv_nobias", r, i2, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    h = t.op("add", h, r)
    out = t.op("avg_pool", h, kernel_size=(4, 4), stride=(4, 4), padding=(0, 0))
    g = rng.standard_normal(t.value(out).shape)
    grads = t.backward(out, seed=g)

    tx, t0, tb0, t1, t2 = (torch.tensor(a, requires_grad=True) for a in (x, w0, b0, w1, w2))
    th = F.max_pool2d(F.relu(F.conv2d(tx, t0, tb0, 2, 3)), 3, 2, 1)
    th = th + F.conv2d(F.relu(F.conv2d(th, t1, None, 1, 1)), t2, None, 1, 1)
    ty = F.avg_pool2d(th, 4, 4)
    tg = torch.autograd.grad(ty, (tx, t0, tb0, t1, t2), torch.tensor(g))
    assert t.value(out).shape == (2, 8, 1, 1)
    _close(t.value(out), ty.detach().numpy())
    for i, e in zip((ix, i0, ib0, i1, i2), tg):
        _close(grads[i], e.numpy())


def test_float32_conv_keeps_dtype_and_matches_float64(rng):
    x = rng.standard_normal((2, 4, 9, 9))
    w = rng.standard_normal((6, 4, 3, 3))
    attrs = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    g = rng.standard_normal((2, 6, 9, 9))
    y64, g64 = _tape_run("conv_nobias", (x, w), attrs, g)
    y32, g32 = _tape_run("conv_nobias", (x.astype(np.float32), w.astype(np.float32)), attrs, g.astype(np.float32))
    assert y32.dtype == np.float32 and all(a.dtype == np.float32 for a in g32)
    np.testing.assert_allclose(y32, y64, rtol=1e-4, atol=1e-4)
    for a, e in zip(g32, g64):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("d", [5, 6, 8])
def test_high_rank_fast_path_matches_spec(rng, d):
    """The host kernels and the spec are independent constructions; they agree for d up to 8."""
    S = 3 if d < 8 else 2
    x = rng.standard_normal((1, 2) + (S,) * d)
    w = rng.standard_normal((2, 1) + (2,) * d)
    b = rng.standard_normal(2)
    stride = tuple(1 + (i % 2) for i in range(d))
    padding = tuple(i % 2 for i in range(d))
    for op, ins, attrs in [
        ("conv", (x, w, b), dict(stride=stride, padding=padding, dilation=(1,) * d, groups=2)),
        ("conv_transpose", (x, w, b),
         dict(stride=stride, padding=(0,) * d, output_padding=(0,) * d, dilation=(1,) * d, groups=2)),
        ("max_pool", (x,), dict(kernel_size=(2,) * d, stride=stride, padding=padding, dilation=(1,) * d)),
        ("avg_pool", (x,), dict(kernel_size=(2,) * d, stride=stride, padding=padding)),
        ("smooth_max_pool", (x,), dict(kernel_size=(2,) * d, beta=2.0, stride=stride, padding=padding)),
    ]:
        ref = SPEC[op].forward(*ins, **attrs)
        g = rng.standard_normal(ref.shape)
        ref_g = SPEC[op].vjp(g, *ins, **attrs)
        y, grads = _tape_run(op, ins, attrs, g)
        _close(y, ref, 1e-9)
        for a, e in zip(grads, ref_g):
            _close(a, e, 1e-9)


# ---- max-pool conventions (hand-computed) ----------------------------------------------------

@pytest.mark.parametrize("fast", [True, False])
def test_max_pool_first_winner_on_ties(fast):
    # windows [1, 3], [3, 3], [3, 2]: the middle tie goes to its first cell (index 1), not to index 2
    x = np.array([[[1.0, 3.0, 3.0, 2.0]]])
    y, (dx,) = _tape_run("max_pool", (x,), dict(kernel_size=(2,), stride=(1,), padding=(0,)),
                         np.array([[[1.0, 10.0, 100.0]]]), fast=fast)
    np.testing.assert_array_equal(y, [[[3.0, 3.0, 3.0]]])
    np.testing.assert_array_equal(dx, [[[0.0, 11.0, 100.0, 0.0]]])
    # 2-D: a constant window routes everything to its top-left cell (row-major first)
    x2 = np.full((1, 2, 4), 7.0)
    y2, (dx2,) = _tape_run("max_pool", (x2,), dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)),
                           np.array([[[2.0, 5.0]]]), fast=fast)
    np.testing.assert_array_equal(y2, [[[7.0, 7.0]]])
    np.testing.assert_array_equal(dx2, [[[2.0, 0.0, 5.0, 0.0], [0.0, 0.0, 0.0, 0.0]]])
    # ties that are not first in the window: [5, 9, 9; ...] -> the first 9
    x3 = np.array([[[5.0, 9.0, 9.0], [9.0, 1.0, 2.0]]])
    _, (dx3,) = _tape_run("max_pool", (x3,), dict(kernel_size=(2, 3), stride=(1, 1), padding=(0, 0)),
                          np.array([[[4.0]]]), fast=fast)
    np.testing.assert_array_equal(dx3, [[[0.0, 4.0, 0.0], [0.0, 0.0, 0.0]]])


@pytest.mark.parametrize("fast", [True, False])
def test_max_pool_padding_never_wins(fast):
    x = -np.arange(1.0, 6.0).reshape(1, 1, 5)        # [-1, -2, -3, -4, -5]
    attrs = dict(kernel_size=(3,), stride=(1,), padding=(1,))
    y, (dx,) = _tape_run("max_pool", (x,), attrs, np.ones((1, 1, 5)), fast=fast)
    np.testing.assert_array_equal(y, [[[-1.0, -1.0, -2.0, -3.0, -4.0]]])  # zero padding would have won
    np.testing.assert_array_equal(dx, [[[2.0, 1.0, 1.0, 1.0, 0.0]]])
    assert dx.sum() == 5.0  # nothing was routed into the padding
    # all -inf: still never a padded cell; the cotangent goes to each window's first real cell
    xi = np.full((1, 1, 4), -np.inf)
    yi, (dxi,) = _tape_run("max_pool", (xi,), dict(kernel_size=(2,), stride=(2,), padding=(1,)),
                           np.array([[[1.0, 2.0, 3.0]]]), fast=fast)
    assert np.all(np.isneginf(yi))
    np.testing.assert_array_equal(dxi, [[[1.0, 2.0, 0.0, 3.0]]])


def test_max_pool_matches_torch_with_padding_and_dilation(rng):
    x = rng.permutation(2 * 3 * 9 * 8).reshape(2, 3, 9, 8) / 100.0 - 2.0   # distinct values
    ty_shape = F.max_pool2d(torch.tensor(x), (3, 2), (2, 1), (1, 1), (2, 3)).shape
    g = rng.standard_normal(tuple(ty_shape))
    ty, (tg,) = _torch_run(lambda a: F.max_pool2d(a, (3, 2), (2, 1), (1, 1), (2, 3)), (x,), g)
    y, (dx,) = _tape_run("max_pool", (x,), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1),
                                               dilation=(2, 3)), g)
    _close(y, ty)
    _close(dx, tg)


# ---- smooth max-pool and avg-pool ------------------------------------------------------------

def test_smooth_max_pool_tends_to_max_pool(rng):
    x = rng.standard_normal((2, 3, 8, 8))
    attrs = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
    hard = SPEC["max_pool"].forward(x, **attrs)
    K = 9
    errs = []
    for beta in (1.0, 10.0, 100.0, 1000.0):
        y, _ = _tape_run("smooth_max_pool", (x,), dict(attrs, beta=beta), np.ones(hard.shape))
        err = y - hard
        assert np.all(err >= -1e-12)                        # log-sum-exp is never below the max
        assert np.all(err <= np.log(K) / beta + 1e-12)      # and at most log(K)/beta above it
        errs.append(np.abs(err).max())
    assert errs == sorted(errs, reverse=True) and errs[-1] < 3e-3
    # negative beta: a smooth min-pool
    y, _ = _tape_run("smooth_max_pool", (x,), dict(attrs, beta=-1000.0), np.ones(hard.shape))
    _close(y, -SPEC["max_pool"].forward(-x, **attrs), 3e-3)


def test_smooth_max_pool_excludes_padding_and_is_stable():
    # padded cells contribute nothing: a window [pad, a, b] is log(e^a + e^b)
    x = np.array([[[1.0, 2.0, 3.0]]])
    y, (dx,) = _tape_run("smooth_max_pool", (x,), dict(kernel_size=(3,), beta=1.0, stride=(1,), padding=(1,)),
                         np.array([[[1.0, 0.0, 0.0]]]))
    _close(y[0, 0, 0], np.log(np.exp(1.0) + np.exp(2.0)))
    _close(dx, [[[np.exp(1) / (np.exp(1) + np.exp(2)), np.exp(2) / (np.exp(1) + np.exp(2)), 0.0]]])
    # large inputs do not overflow (the window max is subtracted first)
    big = np.array([[[1000.0, 1000.0]]], dtype=np.float32)
    yb, (dxb,) = _tape_run("smooth_max_pool", (big,), dict(kernel_size=(2,), beta=1.0, stride=(1,), padding=(0,)),
                           np.ones((1, 1, 1), np.float32))
    assert yb.dtype == np.float32
    np.testing.assert_allclose(yb, [[[1000.0 + np.log(2.0)]]], rtol=1e-6)
    np.testing.assert_allclose(dxb, [[[0.5, 0.5]]], rtol=1e-6)


@pytest.mark.parametrize("fast", [True, False])
def test_avg_pool_counts_padding(fast):
    x = np.ones((1, 3, 3))
    y, (dx,) = _tape_run("avg_pool", (x,), dict(kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)),
                         np.ones((1, 3, 3)), fast=fast)
    np.testing.assert_allclose(y, [[[4 / 9, 6 / 9, 4 / 9], [6 / 9, 1.0, 6 / 9], [4 / 9, 6 / 9, 4 / 9]]])
    # each cell is in as many windows as it has neighbours (itself included), each giving 1/9
    np.testing.assert_allclose(dx, [[[4 / 9, 6 / 9, 4 / 9], [6 / 9, 1.0, 6 / 9], [4 / 9, 6 / 9, 4 / 9]]])
    ty = F.avg_pool2d(torch.ones(1, 3, 3, dtype=torch.float64), 3, 1, 1)
    _close(y, ty.numpy())


# ---- errors ----------------------------------------------------------------------------------

def test_error_messages_name_the_op_and_the_shapes():
    t = Tape()
    x = t.leaf(np.ones((1, 2, 3, 3)))
    w = t.leaf(np.ones((4, 2, 5, 5)))
    with pytest.raises(ShapeError) as e:
        t.op("conv_nobias", x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
    msg = str(e.value)
    for part in ("conv_nobias", "empty output", "(3, 3)", "kernel (5, 5)", "stride (1, 1)", "padding (0, 0)"):
        assert part in msg, msg
    with pytest.raises(ShapeError, match="max_pool: padding \\(2, 0\\) should be at most half"):
        t.op("max_pool", x, kernel_size=(3, 3), stride=(1, 1), padding=(2, 0))
    with pytest.raises(ShapeError, match="max_pool: output position 0 along spatial axis 0 reads a window"):
        t.op("max_pool", t.leaf(np.ones((1, 2))), kernel_size=(2,), stride=(1,), padding=(1,), dilation=(3,))
    with pytest.raises(DomainError, match="smooth_max_pool: beta"):
        t.op("smooth_max_pool", x, kernel_size=(2, 2), beta=0.0, stride=(1, 1), padding=(0, 0))
    with pytest.raises(ShapeError, match="conv_transpose_nobias: output_padding"):
        t.op("conv_transpose_nobias", x, t.leaf(np.ones((2, 3, 2, 2))), stride=(1, 1), padding=(0, 0),
             output_padding=(1, 1), dilation=(1, 1), groups=1)


def test_unbatched_and_batched_agree(rng):
    x = rng.standard_normal((3, 6, 5))
    w = rng.standard_normal((4, 3, 2, 2))
    attrs = dict(stride=(1, 2), padding=(1, 0), dilation=(1, 1), groups=1)
    g = rng.standard_normal((4, 7, 2))
    y, (dx, dw) = _tape_run("conv_nobias", (x, w), attrs, g)
    yb, (dxb, dwb) = _tape_run("conv_nobias", (x[None], w), attrs, g[None])
    assert y.shape == (4, 7, 2) and dx.shape == x.shape
    _close(y, yb[0])
    _close(dx, dxb[0])
    _close(dw, dwb)


def test_kernel_surface_lists_conv_kernels():
    K = get_kernels("cpu")
    for name in ("conv_forward", "conv_backward", "conv_transpose_forward", "conv_transpose_backward",
                 "max_pool_forward", "max_pool_backward", "avg_pool_forward", "avg_pool_backward",
                 "smooth_max_pool_forward", "smooth_max_pool_backward"):
        assert callable(getattr(K, name))


@pytest.mark.parametrize("chunk_bytes", [None, 1, 500])
def test_host_max_pool_agrees_with_the_generic_loop_on_ties_nans_and_infinities(monkeypatch, chunk_bytes):
    """The host max pool (clipped slabs, maxima first, then each window's first winner; a few planes at
    a time when ``chunk_bytes`` is set) against the loop the CUDA kernels run on a padded copy (through
    a NumPy namespace that is not NumPy itself): same values, same winner indices, same gradient."""
    import types
    from torchlean.kernels.host import conv
    if chunk_bytes is not None:
        monkeypatch.setattr(conv, "_POOL_CHUNK_BYTES", chunk_bytes)
    generic = types.SimpleNamespace(**{n: getattr(np, n) for n in ("zeros", "where", "isnan", "isneginf", "full",
                                                                   "arange", "maximum", "ascontiguousarray", "pad",
                                                                   "asarray", "concatenate")})
    rng = np.random.default_rng(1)
    for _ in range(100):
        x = rng.integers(-2, 3, (2, 3, 7, 6)).astype(np.float32)      # many ties
        x[rng.random(x.shape) < 0.05] = np.nan
        x[rng.random(x.shape) < 0.05] = -np.inf
        k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        s = (int(rng.integers(1, 3)), int(rng.integers(1, 4)))
        dil = (int(rng.integers(1, 3)), 1)
        p = (int(rng.integers(0, k[0] // 2 + 1)), int(rng.integers(0, k[1] // 2 + 1)))
        y1, i1 = conv.max_pool_forward(x, k, s, p, dil)
        y2, i2 = conv.max_pool_forward(x, k, s, p, dil, xp=generic)
        np.testing.assert_array_equal(y1, y2)
        np.testing.assert_array_equal(i1, i2)
        y3, none = conv.max_pool_forward(x, k, s, p, dil, winners=False)
        assert none is None
        np.testing.assert_array_equal(y1, y3)
        g = rng.standard_normal(y1.shape).astype(np.float32)
        np.testing.assert_array_equal(conv.max_pool_backward(g, i1, x.shape, k, s, p, dil),
                                      conv.max_pool_backward(g, i1, x.shape, k, s, p, dil, xp=generic))
