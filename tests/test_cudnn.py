"""Convolutions through cuDNN (torchlean.kernels.cuda.cudnn) against torchlean's own kernels and a
float64 reference, the backends.cudnn switches, and the capturability of steps that build host
constants (positions, pooling weights) at every call."""

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim

from conftest import CUDA

cuda = pytest.mark.cuda


@pytest.fixture
def cudnn_mod():
    from torchlean.kernels.cuda import cudnn
    if not cudnn.available():
        pytest.skip(f"cuDNN is not installed here: {cudnn.status()}")
    saved = (cudnn.FLAGS.enabled, cudnn.FLAGS.benchmark)
    yield cudnn
    cudnn.FLAGS.enabled, cudnn.FLAGS.benchmark = saved


# (x shape, w shape, stride, padding, dilation, groups, transposed)
CASES = [
    ((4, 3, 9, 11), (8, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, False),
    ((2, 8, 10, 10), (12, 8, 3, 3), (2, 2), (1, 1), (1, 1), 1, False),
    ((2, 8, 10, 10), (16, 8, 1, 1), (2, 2), (0, 0), (1, 1), 1, False),
    ((2, 6, 12, 12), (6, 2, 3, 3), (1, 1), (2, 2), (2, 2), 3, False),      # grouped, dilated
    ((3, 16, 33), (16, 1, 4), (1,), (3,), (1,), 16, False),                # depthwise conv1d (Mamba)
    ((2, 4, 5, 6, 7), (6, 4, 3, 3, 3), (1, 2, 1), (1, 1, 0), (1, 1, 1), 1, False),  # 3-d
    ((2, 8, 6, 6), (8, 4, 2, 2), (2, 2), (0, 0), (1, 1), 1, True),         # transposed, up-sampling
    ((2, 4, 7, 5), (4, 6, 3, 3), (2, 1), (1, 1), (1, 1), 2, True),         # transposed, grouped
]


def _run(K, x, w, g, s, p, d, G, tr):
    nd = x.ndim - 2
    if tr:
        y = K.conv_transpose_forward(x, w, None, s, p, (0,) * nd, d, G)
        dx, dw, _ = K.conv_transpose_backward(x, w, g(y.shape), s, p, (0,) * nd, d, G, True, True, False)
    else:
        y = K.conv_forward(x, w, None, s, p, d, G)
        dx, dw, _ = K.conv_backward(x, w, g(y.shape), s, p, d, G, True, True, False)
    return y, dx, dw


@cuda
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-G{c[5]}{'-T' if c[6] else ''}")
@pytest.mark.parametrize("autotune", [False, True], ids=["heuristics", "autotune"])
def test_cudnn_convolution_matches_the_float64_reference(cudnn_mod, case, autotune, rng):
    import cupy
    from torchlean.kernels import get_kernels
    K = get_kernels("cuda")
    xs, ws, s, p, d, G, tr = case
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * 0.3).astype(np.float32)
    gs = {}

    def g(shape):
        if shape not in gs:
            gs[shape] = rng.standard_normal(shape).astype(np.float32)
        return gs[shape]

    cudnn_mod.FLAGS.enabled = False
    ref = _run(get_kernels("cpu"), x.astype(np.float64), w.astype(np.float64),
               lambda sh: g(sh).astype(np.float64), s, p, d, G, tr)
    cudnn_mod.FLAGS.enabled, cudnn_mod.FLAGS.benchmark = True, autotune
    before = len(cudnn_mod._plans)
    got = _run(K, cupy.asarray(x), cupy.asarray(w), lambda sh: cupy.asarray(g(sh)), s, p, d, G, tr)
    assert len(cudnn_mod._plans) > before          # cuDNN was asked (planned) for this case
    for name, a, r in zip(("y", "dx", "dw"), got, ref):
        a = cupy.asnumpy(a)
        assert a.shape == r.shape and a.dtype == np.float32, name
        # float32 sums of up to a few hundred products: a few units of float32 rounding of the scale
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-5 * max(1.0, np.abs(r).max()), err_msg=name)


@cuda
def test_cudnn_results_are_reproducible_bit_for_bit(cudnn_mod, rng):
    import cupy
    from torchlean.kernels import get_kernels
    K = get_kernels("cuda")
    x = cupy.asarray(rng.standard_normal((16, 32, 16, 16)).astype(np.float32))
    w = cupy.asarray(rng.standard_normal((32, 32, 3, 3)).astype(np.float32))
    g = cupy.asarray(rng.standard_normal((16, 32, 16, 16)).astype(np.float32))
    runs = [K.conv_backward(x, w, g, (1, 1), (1, 1), (1, 1), 1, True, True, False)[:2] for _ in range(3)]
    for dx, dw in runs[1:]:
        assert bool((dx == runs[0][0]).all()) and bool((dw == runs[0][1]).all())


@cuda
def test_enabled_flag_routes_to_the_native_kernels(cudnn_mod, rng):
    import cupy
    from torchlean.kernels import get_kernels
    K = get_kernels("cuda")
    tl.backends.cudnn.enabled = False
    try:
        n = len(cudnn_mod._plans)
        x = cupy.asarray(rng.standard_normal((2, 3, 7, 7)).astype(np.float32))
        w = cupy.asarray(rng.standard_normal((5, 3, 2, 2)).astype(np.float32))
        y = K.conv_forward(x, w, None, (1, 1), (0, 0), (1, 1), 1)
        assert len(cudnn_mod._plans) == n and y.shape == (2, 5, 6, 6)
    finally:
        tl.backends.cudnn.enabled = True
    assert tl.backends.cudnn.is_available() and tl.backends.cudnn.version() >= 8000


@cuda
def test_float64_convolutions_keep_the_native_kernels(cudnn_mod, rng):
    import cupy
    from torchlean.kernels import get_kernels
    n = len(cudnn_mod._plans)
    x = cupy.asarray(rng.standard_normal((2, 3, 7, 7)))
    w = cupy.asarray(rng.standard_normal((5, 3, 2, 2)))
    y = get_kernels("cuda").conv_forward(x, w, None, (1, 1), (0, 0), (1, 1), 1)
    assert y.dtype == np.float64 and len(cudnn_mod._plans) == n


def _resnet_block():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4))


@cuda
def test_captured_cnn_step_through_cudnn_equals_eager(rng):
    tl.manual_seed(0)
    model = _resnet_block().to("cuda")
    x = tl.tensor(rng.standard_normal((6, 3, 10, 10)).astype(np.float32), device="cuda")
    y = tl.tensor(rng.integers(0, 4, 6), device="cuda")
    model.eval()   # fixed statistics: the eager and captured steps see the same function

    def loss_fn(a, b):
        return nn.functional.cross_entropy(model(a), b)

    step = tl.cuda.capture_step(loss_fn, x, y)
    for p in model.parameters():
        p.grad = None
    loss = step(x, y)
    captured = [p.grad.numpy().copy() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    eager = loss_fn(x, y)
    eager.backward()
    assert abs(float(loss) - float(eager)) <= 1e-6 * max(1.0, abs(float(eager)))
    for a, p in zip(captured, model.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-5, atol=1e-6)


@cuda
def test_steps_that_build_positions_capture_and_do_not_sync(rng):
    """``arange(T, device=...)`` at every forward (GPT's positions): uploaded once, then copied on
    the device; its host copy is known, so an embedding reads no device value back."""
    tl.manual_seed(0)
    wte, wpe, head = nn.Embedding(50, 16).to("cuda"), nn.Embedding(12, 16).to("cuda"), nn.Linear(16, 50).to("cuda")
    params = list(wte.parameters()) + list(wpe.parameters()) + list(head.parameters())
    opt = optim.Adam(params, lr=1e-3)

    def loss_fn(idx, tgt):
        h = wte(idx) + wpe(tl.arange(idx.shape[1], device=idx.device))
        return nn.functional.cross_entropy(head(h).reshape(-1, 50), tgt.reshape(-1))

    x = tl.tensor(rng.integers(0, 50, (4, 12)), device="cuda")
    y = tl.tensor(rng.integers(0, 50, (4, 12)), device="cuda")
    eager = float(loss_fn(x, y))
    step = tl.cuda.capture_step(loss_fn, x, y)
    opt.zero_grad()
    assert abs(float(step(x, y)) - eager) <= 1e-6 * abs(eager)
    opt.step()
    # the uploaded constant is not the caller's: writing to one arange leaves the next intact
    a = tl.arange(12, device="cuda")
    a.add_(100)
    np.testing.assert_array_equal(tl.arange(12, device="cuda").numpy(), np.arange(12))


@cuda
def test_running_statistics_update_in_one_kernel_matches_the_composition(rng):
    """BatchNorm's running averages (fused kernel) against the formula computed in float64."""
    x = (rng.standard_normal((6, 5, 4, 3)) * 3 + 100).astype(np.float32)
    bn = nn.BatchNorm2d(5, momentum=0.3).to("cuda")
    bn(tl.tensor(x, device="cuda"))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(0, 2, 3))
    var = x64.var(axis=(0, 2, 3), ddof=1)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.7 * 0 + 0.3 * mean, rtol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.7 * 1 + 0.3 * var, rtol=1e-6)
