"""Captured training steps (``tl.cuda.capture_step``) against the eager step, and the pieces
they rest on: device copies of index data, the plan-free scatter, the allocator's free list."""

import threading

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim
from torchlean.errors import BackendUnavailableError, DeviceError, IndexRangeError, ShapeError
from torchlean.models import GPT

from conftest import CUDA

cuda = pytest.mark.cuda


# ---- the registry of device copies (its logic is device-agnostic: NumPy arrays stand in) -------

@cuda
def test_device_copy_follows_full_reshapes_only():
    from torchlean.kernels.cuda.index import device_copy, remember_device_copy
    host = np.arange(12, dtype=np.int64).reshape(3, 4)
    host.flags.writeable = False
    dev = np.arange(12, dtype=np.int64).reshape(3, 4) * 10   # stands in for the device buffer
    remember_device_copy(host, dev)
    assert device_copy(host) is dev
    flat = host.reshape(-1)
    np.testing.assert_array_equal(device_copy(flat), dev.reshape(-1))
    assert device_copy(host[1:]) is None                      # part of the buffer: not a copy of it
    assert device_copy(host.T) is None                        # another order
    assert device_copy(np.arange(12, dtype=np.int64)) is None


@cuda
def test_checked_device_indices_validates_once():
    from torchlean.kernels.cuda.index import checked_device_indices, remember_device_copy
    bad = np.array([[0, -3], [2, 1]], dtype=np.int64)
    bad.flags.writeable = False
    remember_device_copy(bad, bad.copy())
    with pytest.raises(IndexRangeError, match="embedding"):
        checked_device_indices(bad.reshape(-1), "embedding")
    good = np.array([4, 0, 4], dtype=np.int64)
    good.flags.writeable = False
    dev = np.array([1, 2, 3], dtype=np.int32)
    remember_device_copy(good, dev)
    got = checked_device_indices(good, "gather_rows")
    assert got.dtype == np.int64 and got.tolist() == [1, 2, 3]
    assert checked_device_indices(np.array([1, 2]), "gather_rows") is None


@pytest.mark.skipif(CUDA, reason="checks the error raised without a GPU")
def test_capture_step_without_gpu_says_so():
    with pytest.raises(BackendUnavailableError, match="cupy"):
        tl.cuda.capture_step(lambda x: (x * x).sum(), tl.ones(3, requires_grad=True))


def test_trainer_on_cpu_ignores_cuda_graph():
    from torchlean.train import build_task
    tr = build_task("mlp", steps=3, progress="none", cuda_graph=True)
    assert tr.cuda_graph is False
    tr.fit()
    assert tr.step == 3 and tr._captured is None


# ---- on the GPU ------------------------------------------------------------------------------

def _mlp():
    tl.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 10)).to("cuda")


def _grads(params):
    return [p.grad.numpy() for p in params]


@cuda
def test_captured_step_equals_the_eager_step(rng):
    m = _mlp()
    ps = list(m.parameters())

    def loss_fn(x, y):
        return nn.functional.cross_entropy(m(x), y)
    batches = [(tl.tensor(rng.standard_normal((16, 32)), dtype=tl.float32, device="cuda"),
                tl.tensor(rng.integers(0, 10, 16), device="cuda")) for _ in range(3)]
    step = tl.cuda.capture_step(loss_fn, *batches[0])
    assert all(p.grad is None for p in ps) and len(step.params) == 4
    for x, y in batches:                               # new values every call
        for p in ps:
            p.grad = None
        got = step(x, y).item()
        g_cap = _grads(ps)
        for p in ps:
            p.grad = None
        want = loss_fn(x, y)
        want.backward()
        assert abs(got - want.item()) <= 1e-6 * abs(want.item())
        for a, b in zip(g_cap, _grads(ps)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@cuda
def test_captured_gradients_accumulate_like_backward(rng):
    m = _mlp()
    x = tl.tensor(rng.standard_normal((8, 32)), dtype=tl.float32, device="cuda")
    y = tl.tensor(rng.integers(0, 10, 8), device="cuda")
    step = tl.cuda.capture_step(lambda a, b: nn.functional.cross_entropy(m(a), b), x, y)
    p = m[0].weight
    step(x, y)
    once = p.grad.numpy()
    step(x, y)
    np.testing.assert_allclose(p.grad.numpy(), 2 * once, rtol=1e-6)


@cuda
def test_captured_gpt_trains_as_the_eager_one(rng):
    """Embedding (device indices, plan-free scatter), tied weights, causal attention, layer norm:
    five Adam steps on new batches give the eager run's losses."""
    kw = dict(vocab_size=40, block_size=16, n_layer=2, n_head=2, n_embd=32)
    batches = [rng.integers(0, 40, (4, 17)) for _ in range(5)]
    runs = {}
    for mode in ("eager", "captured"):
        tl.manual_seed(0)
        model = GPT(**kw).to("cuda")
        opt = optim.Adam(model.parameters(), lr=3e-3)

        def loss_fn(x, y):
            out = model(x)
            return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        xs = [tl.tensor(b[:, :-1], device="cuda") for b in batches]
        ys = [tl.tensor(b[:, 1:], device="cuda") for b in batches]
        step = tl.cuda.capture_step(loss_fn, xs[0], ys[0]) if mode == "captured" else None
        losses = []
        for x, y in zip(xs, ys):
            opt.zero_grad()
            if step is None:
                loss = loss_fn(x, y)
                loss.backward()
            else:
                loss = step(x, y)
            opt.step()
            losses.append(loss.item())
        runs[mode] = losses
    np.testing.assert_allclose(runs["captured"], runs["eager"], rtol=2e-5)
    assert runs["eager"][-1] < runs["eager"][0]


@cuda
def test_captured_embedding_gradient_is_the_eager_one_bit_for_bit(rng):
    tl.manual_seed(0)
    emb = nn.Embedding(50, 8).to("cuda")
    w = tl.tensor(rng.standard_normal((64, 8)), dtype=tl.float32, device="cuda")

    def loss_fn(idx):
        return (emb(idx) * w).sum()
    idx = [tl.tensor(rng.integers(0, 50, 64), device="cuda") for _ in range(2)]
    step = tl.cuda.capture_step(loss_fn, idx[0])
    for i in idx:
        emb.weight.grad = None
        step(i)
        got = emb.weight.grad.numpy()
        emb.weight.grad = None
        loss_fn(i).backward()
        np.testing.assert_array_equal(got, emb.weight.grad.numpy())


@cuda
def test_scatter_inside_a_capture_scope_matches_the_plan(K_cuda, rng):
    import cupy
    from torchlean.kernels.cuda import gemm
    K = K_cuda
    for dtype in (np.float32, np.float64):
        idx = rng.integers(0, 35, 3000)                 # repeats, and out of bounds (>= 31)
        mat = K.from_host(rng.standard_normal((31, 7)), dtype)
        vals = K.from_host(rng.standard_normal((3000, 7)), dtype)
        want = K.to_host(K.scatter_add_rows(mat, vals, idx))
        s = cupy.cuda.Stream(non_blocking=True)
        with s, gemm.capture_scope(s):
            got = K.to_host(K.scatter_add_rows(mat, vals, idx))
            empty = K.to_host(K.scatter_add_rows(mat, vals[:0], np.array([], np.int64)))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(empty, K.to_host(mat))


@cuda
def test_capture_refuses_random_numbers_and_host_syncs():
    m = _mlp()
    x = tl.randn(4, 32, device="cuda")
    y = tl.tensor([1, 2, 3, 4], device="cuda")
    with pytest.raises(DeviceError, match="random"):
        tl.cuda.capture_step(lambda a, b: nn.functional.cross_entropy(
            nn.functional.dropout(m(a), 0.5, training=True), b), x, y)

    def syncs(a, b):
        loss = nn.functional.cross_entropy(m(a), b)
        if loss.item() > 1e9:   # control flow on a value: needs the host
            loss = loss * 2.0
        return loss
    with pytest.raises(DeviceError, match="capture"):
        tl.cuda.capture_step(syncs, x, y)
    assert all(p.grad is None for p in m.parameters())   # a failed capture leaves gradients alone


@cuda
def test_captured_step_checks_its_inputs_and_parameters():
    m = _mlp()
    x = tl.randn(4, 32, device="cuda")
    y = tl.tensor([1, 2, 3, 4], device="cuda")
    step = tl.cuda.capture_step(lambda a, b: nn.functional.cross_entropy(m(a), b), x, y)
    assert step.accepts(x, y) and not step.accepts(tl.randn(5, 32, device="cuda"), y)
    with pytest.raises(ShapeError, match=r"\(5, 32\)"):
        step(tl.randn(5, 32, device="cuda"), y)
    with pytest.raises(tl.TorchLeanError, match="2 input"):
        step(x)
    step(x.cpu(), y.cpu())                              # host inputs are uploaded into the buffers
    m[0].weight._value = m[0].weight._value.copy()
    with pytest.raises(DeviceError, match="new array"):
        step(x, y)


@cuda
def test_trainer_replays_a_captured_step(rng):
    from torchlean.data import DataLoader, TensorDataset
    from torchlean.train import Trainer
    data = TensorDataset(tl.tensor(rng.standard_normal((100, 32)), dtype=tl.float32),
                         tl.tensor(rng.integers(0, 10, 100)))
    runs = {}
    for graph in (True, False):
        m = _mlp()
        loader = DataLoader(data, batch_size=32, shuffle=True, seed=0)   # a short last batch: eager
        tr = Trainer(m, optim.Adam(m.parameters(), lr=1e-2), nn.functional.cross_entropy, loader,
                     device="cuda", steps=12, progress="none", cuda_graph=graph)
        tr.fit()
        runs[graph] = tr.history["loss"]
        assert (tr._captured is not None) == graph and tr.graph_note is None
    np.testing.assert_allclose(runs[True], runs[False], rtol=1e-4)


# ---- the allocator's free list and the launcher's other threads ------------------------------

@cuda
def test_free_list_reuses_blocks_per_stream(K_cuda):
    import cupy
    from torchlean.kernels.cuda import alloc as memory
    a = cupy.empty(1000, np.float32)
    ptr = a.data.ptr
    del a
    b = cupy.empty(1000, np.float32)
    assert b.data.ptr == ptr                            # same size, same stream: the same block
    del b
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        c = cupy.empty(1000, np.float32)
    assert c.data.ptr != ptr                            # another stream never takes it
    del c
    assert memory._CACHED[0] > 0
    tl.cuda.empty_cache()
    assert memory._CACHED[0] == 0 and not memory._FREE
    st = tl.cuda.memory_stats()
    assert st["pool_used_bytes"] >= 0 and st["live_buffers"] >= 0


@cuda
def test_kernels_launched_from_another_thread(K_cuda, rng):
    K = K_cuda
    a = rng.standard_normal(5000).astype(np.float32)
    b = rng.standard_normal(5000).astype(np.float32)
    x, y = K.from_host(a, np.float32), K.from_host(b, np.float32)
    K.add(x, y), K.relu(x), K.relu_bwd(x, y)             # launchers made on this thread
    out = {}

    def work():
        out["add"] = K.to_host(K.add(x, y))
        out["relu"] = K.to_host(K.relu(x))
        out["bwd"] = K.to_host(K.relu_bwd(x, y))
    t = threading.Thread(target=work)
    t.start()
    t.join()
    np.testing.assert_array_equal(out["add"], a + b)
    np.testing.assert_array_equal(out["relu"], np.maximum(a, 0))
    np.testing.assert_array_equal(out["bwd"], np.where(a > 0, b, 0))


@pytest.fixture(scope="module")
def K_cuda():
    from torchlean.kernels import get_kernels
    return get_kernels("cuda")


@cuda
def test_a_second_capture_keeps_the_first_graphs_pins(K_cuda, monkeypatch):
    # Compiled programs capture their forward and backward with one GraphCapture: the arrays the
    # first graph may read stay pinned when the caches are emptied before the second capture.
    import cupy
    from torchlean.kernels.cuda import shape as cshape
    K = K_cuda
    first, second = cupy.arange(3), cupy.arange(4)
    monkeypatch.setattr(cshape, "_META", {"first plan": first})
    cap = K.graph_capture()
    x = K.zeros((8,), np.float32)
    with cap.scope():
        K.exp(x)
        g1 = cap.capture(lambda: K.exp(x))
        cshape._META.clear()
        cshape._META["second plan"] = second
        g2 = cap.capture(lambda: K.exp(x))
    g1.launch()
    g2.launch()
    assert any(p is first for p in cap.pins) and any(p is second for p in cap.pins)
