"""The front end on the GPU: device plumbing, DLPack, RNG parity, errors, flat memory."""

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim
from torchlean.errors import DeviceError, ShapeError

pytestmark = pytest.mark.cuda


def test_round_trip_and_float64_upload_rounds_to_nearest_even():
    a = np.random.default_rng(0).standard_normal(1001)
    t = tl.tensor(a, dtype=tl.float32, device="cuda")
    assert t.device == "cuda" and t.dtype == tl.float32
    np.testing.assert_array_equal(t.numpy(), a.astype(np.float32))  # NumPy's cast is RNE
    back = tl.tensor(a).to("cuda").cpu()
    np.testing.assert_array_equal(back.numpy(), a)


def test_mixing_devices_names_both():
    x = tl.ones(3)
    y = tl.ones(3, device="cuda")
    with pytest.raises(DeviceError, match="cpu.*cuda|cuda.*cpu"):
        x + y


def test_bad_shapes_on_gpu_raise_before_launch():
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(4, 5\)"):
        tl.matmul(tl.ones(2, 3, device="cuda"), tl.ones(4, 5, device="cuda"))


def test_dlpack_zero_copy_with_cupy_and_torch():
    import cupy
    c = cupy.arange(6, dtype=cupy.float32)
    t = tl.from_dlpack(c)
    c[0] = 42.0
    assert t.numpy()[0] == 42.0
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    x = tl.ones(4, device="cuda")
    tt = torch.from_dlpack(x)
    tt[1] = 7.0
    assert x.numpy()[1] == 7.0


def test_rng_is_the_same_on_cpu_and_cuda():
    tl.manual_seed(3)
    a = tl.rand(4097)
    b = tl.randn(4097)
    tl.manual_seed(3)
    c = tl.rand(4097, device="cuda")
    d = tl.randn(4097, device="cuda")
    np.testing.assert_array_equal(a.numpy(), c.numpy())
    np.testing.assert_allclose(b.numpy(), d.numpy(), rtol=1e-6, atol=1e-6)


def _mlp():
    tl.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


def test_training_on_gpu_matches_cpu():
    x = tl.randn(16, 32)
    y = tl.tensor(np.arange(16) % 10)
    losses = {}
    for dev in ("cpu", "cuda"):
        m = _mlp().to(dev)
        opt = optim.Adam(m.parameters(), lr=1e-2)
        xs, ys = x.to(dev), y.to(dev)
        out = []
        for _ in range(20):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(xs), ys)
            loss.backward()
            opt.step()
            out.append(loss.item())
        losses[dev] = out
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=2e-4, atol=2e-5)
    assert losses["cuda"][-1] < losses["cuda"][0] / 2


def test_thousand_steps_keep_device_memory_flat():
    m = _mlp().to("cuda")
    opt = optim.Adam(m.parameters(), lr=1e-3)
    x = tl.randn(64, 32, device="cuda")
    y = tl.tensor(np.arange(64) % 10, device="cuda")

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()

    for _ in range(10):
        step()
    tl.cuda.synchronize()
    live_before = tl.cuda.memory_stats()["live_bytes"]
    for _ in range(1000):
        step()
    tl.cuda.synchronize()
    live_after = tl.cuda.memory_stats()["live_bytes"]
    assert live_after <= live_before, (live_before, live_after)


def test_loss_targets_shared_through_dlpack_are_read_again():
    import cupy
    logits = tl.tensor(np.random.default_rng(0).standard_normal((6, 4)), dtype=tl.float32).to("cuda")
    owner = cupy.zeros(6, dtype=cupy.int64)
    target = tl.from_dlpack(owner)                 # a buffer another library writes
    first = nn.functional.cross_entropy(logits, target).item()
    owner[...] = cupy.asarray([3, 1, 2, 0, 3, 1])
    second = nn.functional.cross_entropy(logits, target).item()
    want = nn.functional.cross_entropy(logits.cpu(), tl.tensor(np.array([3, 1, 2, 0, 3, 1]))).item()
    assert first != second and abs(second - want) < 1e-5
    owner[2] = 4                                    # out of range for 4 classes: refused, not read stale
    with pytest.raises(Exception, match="cross_entropy"):
        nn.functional.cross_entropy(logits, target)


def test_loss_target_views_are_read_once_per_buffer(monkeypatch):
    """A fresh view of the same target each step (``y.reshape(-1)``) is copied to the host once;
    an in-place integer write or another buffer is read again."""
    rng = np.random.default_rng(1)
    logits = tl.tensor(rng.standard_normal((2, 3, 5)), dtype=tl.float32).to("cuda").reshape(6, 5)
    yh = np.array([[4, 0, 2], [1, 3, 3]])
    y = tl.tensor(yh).to("cuda")
    import cupy
    reads = []
    real = cupy.asnumpy
    # Every device-to-host copy of integer data (the kernels' host_ints reads targets this way).
    monkeypatch.setattr(cupy, "asnumpy", lambda a, *args, **kw: (reads.append(1) if isinstance(a, cupy.ndarray)
                                                                and a.dtype.kind in "iu" else None)
                        or real(a, *args, **kw))

    def want(t):
        return nn.functional.cross_entropy(logits.cpu(), tl.tensor(t.reshape(-1))).item()
    got = [nn.functional.cross_entropy(logits, y.reshape(-1)).item() for _ in range(3)]
    assert len(reads) == 1 and all(abs(g - want(yh)) < 1e-5 for g in got)
    y.zero_()
    assert abs(nn.functional.cross_entropy(logits, y.reshape(-1)).item() - want(0 * yh)) < 1e-5
    assert len(reads) == 2
    other = tl.tensor(yh[::-1].copy()).to("cuda")
    assert abs(nn.functional.cross_entropy(logits, other.reshape(-1)).item() - want(yh[::-1])) < 1e-5


def test_paired_event_timing_orders_work_by_size():
    """The benchmarks' paired CUDA-event medians: one function with ten times the work of the
    other measures longer, and each median is a positive time."""
    from torchlean.testing.timing import paired_event_median_ms
    x = tl.randn(1 << 22, device="cuda")

    def once():
        return x * x

    def ten():
        for _ in range(10):
            x * x
    t1, t10 = paired_event_median_ms([once, ten], reps=7, warmup=2)
    assert 0 < t1 < t10
