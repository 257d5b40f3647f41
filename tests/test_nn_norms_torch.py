"""Normalization functionals and modules against PyTorch on the CPU: outputs, gradients of inputs
and parameters, running statistics in train/eval, state_dict names, loading torch state_dicts."""


import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional_norms as FN
import torchlean.nn.norms as NN
from torchlean.errors import DomainError, ShapeError, TorchLeanError

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TF = torch.nn.functional
TOL = 1e-9


def t64(a, requires_grad=True):
    return tl.tensor(np.asarray(a, dtype=np.float64), dtype=tl.float64, requires_grad=requires_grad)


def th(a, requires_grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def host(x):
    return x.numpy() if isinstance(x, tl.Tensor) else x.detach().numpy()


def close(a, b, tol=TOL, what=""):
    np.testing.assert_allclose(host(a), host(b), rtol=tol, atol=tol, err_msg=what)


def both(f_tl, f_th, arrays, tol=TOL, seed=0):
    """Same float64 arrays into both (None passes through); compare outputs and the gradients of
    every array for a random cotangent."""
    xs_tl = [None if a is None else t64(a) for a in arrays]
    xs_th = [None if a is None else th(a) for a in arrays]
    y_tl, y_th = f_tl(*xs_tl), f_th(*xs_th)
    assert y_tl.shape == tuple(y_th.shape)
    close(y_tl, y_th, tol, "output")
    g = np.random.default_rng(seed).standard_normal(tuple(y_th.shape))
    y_tl.backward(t64(g, False))
    y_th.backward(torch.tensor(g))
    for i, (a, b) in enumerate(zip(xs_tl, xs_th)):
        if a is not None:
            close(a.grad, b.grad, tol, f"gradient of input {i}")
    return y_tl


def load_from_torch(tl_mod, th_mod):
    th_mod.double()
    tl_mod.to(dtype=tl.float64)
    sd = {k: v.detach().numpy() for k, v in th_mod.state_dict().items()}
    assert list(tl_mod.state_dict()) == list(sd)
    for k, v in tl_mod.state_dict().items():
        assert tuple(v.shape) == tuple(sd[k].shape), k
    tl_mod.load_state_dict(sd, strict=True)
    return tl_mod, th_mod


def buffers_close(tl_mod, th_mod, what=""):
    tb = dict(th_mod.named_buffers())
    mb = dict(tl_mod.named_buffers())
    assert sorted(mb) == sorted(tb)
    for n, b in mb.items():
        np.testing.assert_allclose(np.asarray(b.numpy(), dtype=np.float64),
                                   tb[n].detach().numpy().astype(np.float64), rtol=1e-9, atol=1e-12,
                                   err_msg=f"buffer {n} {what}")


def params_grads_close(tl_mod, th_mod, tol=TOL):
    tp = dict(th_mod.named_parameters())
    assert sorted(n for n, _ in tl_mod.named_parameters()) == sorted(tp)
    for n, p in tl_mod.named_parameters():
        close(p.grad, tp[n].grad, tol, f"gradient of parameter {n}")


rng = np.random.default_rng(7)


def rnd(*shape, scale=1.0, shift=0.0):
    return rng.standard_normal(shape) * scale + shift


# ---- functionals, random shapes ---------------------------------------------------------------

shape_nc = st.tuples(st.integers(1, 3), st.integers(1, 3), st.lists(st.integers(1, 4), min_size=0, max_size=3))


@settings(max_examples=15, deadline=None)
@given(s=shape_nc, groups_pick=st.integers(0, 5), affine=st.booleans())
def test_group_norm_random(s, groups_pick, affine):
    n, cg, spatial = s
    divisors = [g for g in range(1, 7) if (cg * 2) % g == 0]
    g = divisors[groups_pick % len(divisors)]
    c = cg * 2
    shape = (n, c, *spatial)
    if (n * c // g) * int(np.prod(spatial)) == 1:  # torch's "more than 1 value per channel" rule
        with pytest.raises(ShapeError):
            FN.group_norm(t64(rnd(*shape)), g)
        with pytest.raises(ValueError):
            TF.group_norm(th(rnd(*shape)), g)
        return
    w, b = (rnd(c), rnd(c)) if affine else (None, None)
    both(lambda x, w, b: FN.group_norm(x, g, w, b, eps=1e-3),
         lambda x, w, b: TF.group_norm(x, g, w, b, eps=1e-3), [rnd(*shape, scale=2, shift=1), w, b])


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 3), spatial=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       affine=st.booleans())
def test_instance_norm_random(n, c, spatial, affine):
    if np.prod(spatial) <= 1:
        spatial = [2] + spatial
    w, b = (rnd(c), rnd(c)) if affine else (None, None)
    both(lambda x, w, b: FN.instance_norm(x, weight=w, bias=b, eps=1e-4),
         lambda x, w, b: TF.instance_norm(x, weight=w, bias=b, eps=1e-4),
         [rnd(n, c, *spatial, scale=3, shift=-1), w, b])


@settings(max_examples=15, deadline=None)
@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2),
       norm=st.lists(st.integers(1, 4), min_size=1, max_size=2), affine=st.booleans(), eps=st.sampled_from([None, 1e-3]))
def test_rms_norm_random(lead, norm, affine, eps):
    w = rnd(*norm) if affine else None
    both(lambda x, w: FN.rms_norm(x, norm, w, eps), lambda x, w: TF.rms_norm(x, norm, w, eps),
         [rnd(*lead, *norm), w])


@settings(max_examples=15, deadline=None)
@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2),
       norm=st.lists(st.integers(1, 4), min_size=1, max_size=2), affine=st.booleans(), bias=st.booleans())
def test_layer_norm_random(lead, norm, affine, bias):
    w = rnd(*norm) if affine else None
    b = rnd(*norm) if bias else None
    both(lambda x, w, b: FN.layer_norm(x, norm, w, b, 1e-4), lambda x, w, b: TF.layer_norm(x, norm, w, b, 1e-4),
         [rnd(*lead, *norm, scale=2), w, b])


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 6), spatial=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       size=st.integers(1, 8), alpha=st.sampled_from([1e-4, 0.5, 2.0]), beta=st.sampled_from([0.75, 1.5]),
       k=st.sampled_from([1.0, 2.0]))
def test_local_response_norm_random(n, c, spatial, size, alpha, beta, k):
    both(lambda x: FN.local_response_norm(x, size, alpha, beta, k),
         lambda x: TF.local_response_norm(x, size, alpha, beta, k), [rnd(n, c, *spatial)])


@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 5), (2, 3, 2, 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_functional_training_and_eval(shape, affine):
    c = shape[1]
    w, b = (rnd(c), rnd(c)) if affine else (None, None)
    rm0, rv0 = rnd(c), np.abs(rnd(c)) + 0.5
    rm_tl, rv_tl = t64(rm0, False), t64(rv0, False)
    rm_th, rv_th = th(rm0, False), th(rv0, False)
    x = rnd(*shape, scale=2, shift=3)
    both(lambda x, w, b: FN.batch_norm(x, rm_tl, rv_tl, w, b, True, 0.3, 1e-3),
         lambda x, w, b: TF.batch_norm(x, rm_th, rv_th, w, b, True, 0.3, 1e-3), [x, w, b])
    close(rm_tl, rm_th, what="running_mean")
    close(rv_tl, rv_th, what="running_var (unbiased update)")
    both(lambda x, w, b: FN.batch_norm(x, rm_tl, rv_tl, w, b, False, 0.3, 1e-3),
         lambda x, w, b: TF.batch_norm(x, rm_th, rv_th, w, b, False, 0.3, 1e-3), [x, w, b])
    close(rm_tl, rm_th, what="eval leaves running_mean")
    # weight without bias; training without running statistics
    both(lambda x, w: FN.batch_norm(x, None, None, w, None, True), lambda x, w: TF.batch_norm(x, None, None, w, None, True),
         [x, rnd(c)])
    both(lambda x: FN.batch_norm(x, None, None, training=True), lambda x: TF.batch_norm(x, None, None, training=True),
         [x])


def test_instance_norm_functional_running_stats():
    x = rnd(3, 2, 5, scale=2, shift=1)
    rm0, rv0 = rnd(2), np.abs(rnd(2)) + 0.5
    rm_tl, rv_tl, rm_th, rv_th = t64(rm0, False), t64(rv0, False), th(rm0, False), th(rv0, False)
    both(lambda x: FN.instance_norm(x, rm_tl, rv_tl, momentum=0.25),
         lambda x: TF.instance_norm(x, rm_th, rv_th, momentum=0.25), [x])
    close(rm_tl, rm_th, what="running_mean")
    close(rv_tl, rv_th, what="running_var")
    w, b = rnd(2), rnd(2)
    both(lambda x, w, b: FN.instance_norm(x, rm_tl, rv_tl, w, b, use_input_stats=False),
         lambda x, w, b: TF.instance_norm(x, rm_th, rv_th, w, b, use_input_stats=False), [x, w, b])


def test_rms_norm_default_eps_float32():
    x = (rng.standard_normal((3, 4)) * 1e-4).astype(np.float32)
    y = FN.rms_norm(tl.tensor(x), 4)
    ref = TF.rms_norm(torch.tensor(x), (4,))
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    # eps = finfo(float32).eps matters at this scale: eps=0 gives a visibly different result
    y0 = FN.rms_norm(tl.tensor(x), 4, eps=0.0)
    assert np.abs(y0.numpy() - ref.numpy()).max() > 1e-3


def test_float32_functionals_match_torch():
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    X, W, B = tl.tensor(x), tl.tensor(w), tl.tensor(b)
    Xt, Wt, Bt = torch.tensor(x), torch.tensor(w), torch.tensor(b)
    pairs = [(FN.group_norm(X, 2, W, B), TF.group_norm(Xt, 2, Wt, Bt)),
             (FN.instance_norm(X, weight=W, bias=B), TF.instance_norm(Xt, weight=Wt, bias=Bt)),
             (FN.local_response_norm(X, 3), TF.local_response_norm(Xt, 3)),
             (FN.rms_norm(X, (3, 3)), TF.rms_norm(Xt, (3, 3))),
             (FN.layer_norm(X, (4, 3, 3)), TF.layer_norm(Xt, (4, 3, 3))),
             (FN.batch_norm(X, None, None, W, B, True), TF.batch_norm(Xt, None, None, Wt, Bt, True))]
    for a, r in pairs:
        assert a.dtype == tl.float32
        np.testing.assert_allclose(a.numpy(), r.numpy(), rtol=1e-5, atol=1e-5)


# ---- modules -----------------------------------------------------------------------------------

BN_CONFIGS = [dict(), dict(momentum=None), dict(affine=False), dict(track_running_stats=False),
              dict(momentum=None, affine=False), dict(momentum=0.5, eps=1e-3, bias=False)]


@pytest.mark.parametrize("kw", BN_CONFIGS)
@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (4, 3)), ("BatchNorm1d", (3, 3, 4)),
                                       ("BatchNorm2d", (2, 3, 2, 3)), ("BatchNorm3d", (2, 3, 2, 1, 2))])
def test_batch_norm_modules_train_eval(cls, shape, kw):
    m, r = load_from_torch(getattr(NN, cls)(3, **kw), getattr(torch.nn, cls)(3, **kw))
    if kw.get("affine", True):
        with torch.no_grad():
            r.weight.copy_(torch.tensor(rnd(3)))
            if r.bias is not None:
                r.bias.copy_(torch.tensor(rnd(3)))
        m.load_state_dict({k: v.detach().numpy() for k, v in r.state_dict().items()})
    for step in range(3):
        m.zero_grad()
        r.zero_grad()
        both(m, r, [rnd(*shape, scale=1 + step, shift=step)], seed=step)
        if kw.get("affine", True):
            params_grads_close(m, r)
        buffers_close(m, r, f"after training step {step}")
    m.eval()
    r.eval()
    both(m, r, [rnd(*shape, scale=2)])
    buffers_close(m, r, "after eval")


# The running statistics are folded in by one fused kernel (batch_norm_running_update): on inputs far
# from zero (x * 3 + 100) a variance that subtracted squares would cancel, so these steps check the
# update in the modules' own dtype, float32 included, to that dtype's precision.
BN_RUNNING_SHAPES = [("BatchNorm1d", (16, 5)), ("BatchNorm1d", (4, 5, 7)), ("BatchNorm2d", (3, 5, 4, 6)),
                     ("BatchNorm3d", (2, 5, 3, 2, 4))]


def _offset_batch(g, shape, dtype):
    return (g.standard_normal(shape) * 3 + 100).astype(dtype)


def _running_stats_close(m, r, dtype, what):
    """running_mean and running_var to the dtype's precision, relative to their magnitude (the two
    libraries round differently); num_batches_tracked exactly."""
    tol = 1e-6 if dtype == np.float32 else 1e-12
    for name in ("running_mean", "running_var"):
        got, ref = getattr(m, name).numpy(), getattr(r, name).detach().numpy()
        assert got.dtype == ref.dtype == dtype, (name, got.dtype, ref.dtype)
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max(), err_msg=f"{name} {what}")
    assert m.num_batches_tracked.numpy().dtype == np.int64
    assert int(m.num_batches_tracked.item()) == int(r.num_batches_tracked.item()), what


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("momentum", [0.1, 0.5, None])
@pytest.mark.parametrize("cls,shape", BN_RUNNING_SHAPES)
def test_batch_norm_running_statistics_match_torch(cls, shape, momentum, dtype):
    """Training steps on offset batches: the running statistics after every step (momentum=None: the
    cumulative average), then eval mode, which normalizes with them."""
    g = np.random.default_rng(2024)
    m, r = getattr(NN, cls)(5, momentum=momentum), getattr(torch.nn, cls)(5, momentum=momentum)
    if dtype == np.float64:
        m.to(dtype=tl.float64)
        r.double()
    for step in range(4):
        x = _offset_batch(g, shape, dtype)
        y, yr = m(tl.tensor(x)), r(torch.tensor(x))
        assert y.numpy().dtype == dtype
        np.testing.assert_allclose(y.numpy(), yr.detach().numpy(), rtol=1e-4, atol=1e-4)
        _running_stats_close(m, r, dtype, f"after training step {step}")
    m.eval()
    r.eval()
    x = _offset_batch(g, shape, dtype)
    np.testing.assert_allclose(m(tl.tensor(x)).numpy(), r(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    _running_stats_close(m, r, dtype, "after eval")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls,shape", BN_RUNNING_SHAPES)
def test_batch_norm_without_running_statistics_matches_torch(cls, shape, dtype):
    """track_running_stats=False: no buffers to update, batch statistics in training and eval."""
    g = np.random.default_rng(2025)
    m = getattr(NN, cls)(5, track_running_stats=False)
    r = getattr(torch.nn, cls)(5, track_running_stats=False)
    if dtype == np.float64:
        m.to(dtype=tl.float64)
        r.double()
    for mode in ("train", "eval"):
        getattr(m, mode)()
        getattr(r, mode)()
        x = _offset_batch(g, shape, dtype)
        y, yr = m(tl.tensor(x)), r(torch.tensor(x))
        assert y.numpy().dtype == dtype
        np.testing.assert_allclose(y.numpy(), yr.detach().numpy(), rtol=1e-4, atol=1e-4, err_msg=mode)
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            assert getattr(m, name) is None and getattr(r, name) is None, (mode, name)
    assert list(m.state_dict()) == list(r.state_dict())


@pytest.mark.parametrize("kw", [dict(), dict(affine=True), dict(track_running_stats=True),
                                dict(affine=True, track_running_stats=True, momentum=0.3),
                                dict(track_running_stats=True, momentum=None), dict(affine=True, bias=False)])
@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (2, 3, 5)), ("InstanceNorm1d", (3, 4)),
                                       ("InstanceNorm2d", (2, 3, 2, 3)), ("InstanceNorm2d", (3, 3, 2)),
                                       ("InstanceNorm3d", (2, 3, 2, 2, 2))])
def test_instance_norm_modules_train_eval(cls, shape, kw):
    m, r = load_from_torch(getattr(NN, cls)(3, **kw), getattr(torch.nn, cls)(3, **kw))
    if kw.get("affine"):
        with torch.no_grad():
            r.weight.copy_(torch.tensor(rnd(3)))
            if r.bias is not None:
                r.bias.copy_(torch.tensor(rnd(3)))
        m.load_state_dict({k: v.detach().numpy() for k, v in r.state_dict().items()})
    for step in range(2):
        m.zero_grad()
        r.zero_grad()
        both(m, r, [rnd(*shape, scale=1 + step, shift=step)], seed=step)
        if kw.get("affine"):
            params_grads_close(m, r)
        buffers_close(m, r, f"after training step {step}")
    m.eval()
    r.eval()
    both(m, r, [rnd(*shape, scale=2)])


def test_instance_norm_channel_mismatch_warns_or_raises():
    x = t64(rnd(2, 4, 5), False)
    with pytest.warns(UserWarning):
        NN.InstanceNorm1d(3)(x)
    with pytest.raises(ShapeError):
        NN.InstanceNorm1d(3, affine=True)(x)
    with pytest.raises(ShapeError):
        NN.InstanceNorm2d(4)(t64(rnd(4, 5), False))
    with pytest.raises(ValueError):
        torch.nn.InstanceNorm2d(4)(th(rnd(4, 5), False))


@pytest.mark.parametrize("kw", [dict(), dict(affine=False), dict(eps=1e-2, bias=False)])
@pytest.mark.parametrize("shape", [(2, 6), (2, 6, 4), (3, 6, 2, 3)])
def test_group_norm_module(shape, kw):
    m, r = load_from_torch(NN.GroupNorm(3, 6, **kw), torch.nn.GroupNorm(3, 6, **kw))
    if kw.get("affine", True):
        with torch.no_grad():
            r.weight.copy_(torch.tensor(rnd(6)))
            if r.bias is not None:
                r.bias.copy_(torch.tensor(rnd(6)))
        m.load_state_dict({k: v.detach().numpy() for k, v in r.state_dict().items()})
    both(m, r, [rnd(*shape, shift=2)])
    if kw.get("affine", True):
        params_grads_close(m, r)


@pytest.mark.parametrize("kw", [dict(), dict(elementwise_affine=False), dict(bias=False), dict(eps=1e-2)])
def test_layer_norm_module(kw):
    m, r = load_from_torch(NN.LayerNorm((3, 4), **kw), torch.nn.LayerNorm((3, 4), **kw))
    with torch.no_grad():
        for p in r.parameters():
            p.copy_(torch.tensor(rnd(*p.shape)))
    m.load_state_dict({k: v.detach().numpy() for k, v in r.state_dict().items()})
    both(m, r, [rnd(2, 3, 4, scale=3)])
    params_grads_close(m, r)


@pytest.mark.parametrize("kw", [dict(), dict(elementwise_affine=False), dict(eps=1e-3)])
def test_rms_norm_module(kw):
    m, r = load_from_torch(NN.RMSNorm([2, 3], **kw), torch.nn.RMSNorm([2, 3], **kw))
    with torch.no_grad():
        for p in r.parameters():
            p.copy_(torch.tensor(rnd(*p.shape)))
    m.load_state_dict({k: v.detach().numpy() for k, v in r.state_dict().items()})
    both(m, r, [rnd(4, 2, 3)])
    params_grads_close(m, r)
    assert repr(m) == repr(r)


def test_local_response_norm_module():
    m, r = NN.LocalResponseNorm(3, alpha=0.1, beta=0.6, k=2.0), torch.nn.LocalResponseNorm(3, alpha=0.1, beta=0.6, k=2.0)
    assert list(m.state_dict()) == []
    assert repr(m) == repr(r)
    both(m, r, [rnd(2, 5, 3, 2)])


def test_state_dict_names_and_reprs_match_torch():
    cases = [("BatchNorm2d", (4,), {}), ("BatchNorm1d", (4,), dict(track_running_stats=False)),
             ("InstanceNorm2d", (4,), dict(affine=True, track_running_stats=True)),
             ("InstanceNorm3d", (4,), {}), ("GroupNorm", (2, 4), {}), ("LayerNorm", (4,), dict(bias=False)),
             ("RMSNorm", (4,), {})]
    for cls, args, kw in cases:
        m, r = getattr(NN, cls)(*args, **kw), getattr(torch.nn, cls)(*args, **kw)
        sd, rsd = m.state_dict(), r.state_dict()
        assert list(sd) == list(rsd), cls
        for k in sd:
            assert tuple(sd[k].shape) == tuple(rsd[k].shape), (cls, k)
            np.testing.assert_array_equal(np.asarray(sd[k].numpy()), rsd[k].numpy(), err_msg=f"{cls}.{k} init")
        assert repr(m) == repr(r), cls


def test_batch_norm_state_dict_from_torch_strict_then_eval():
    r = torch.nn.BatchNorm2d(3)
    r.train()
    for _ in range(4):
        r(torch.randn(4, 3, 2, 2, dtype=torch.float32) * 3 + 1)
    r.eval()
    m = NN.BatchNorm2d(3)
    m.load_state_dict({k: v.detach().numpy() for k, v in r.state_dict().items()}, strict=True)
    assert int(m.num_batches_tracked.item()) == 4
    m.eval()
    x = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    np.testing.assert_allclose(m(tl.tensor(x)).numpy(), r(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(TorchLeanError):
        m.load_state_dict({k: v.detach().numpy() for k, v in r.state_dict().items() if k != "running_var"},
                          strict=True)


def test_errors():
    x = t64(rnd(2, 6, 3), False)
    with pytest.raises(ShapeError):
        FN.group_norm(x, 4)
    with pytest.raises(DomainError):
        NN.GroupNorm(4, 6)
    with pytest.raises(ShapeError):
        FN.group_norm(x, 3, weight=t64(rnd(5), False))
    with pytest.raises(ShapeError):
        FN.instance_norm(t64(rnd(2, 3, 1), False))
    with pytest.raises(ShapeError):
        FN.instance_norm(t64(rnd(2, 3), False))
    with pytest.raises(ShapeError):
        FN.rms_norm(x, (4,))
    with pytest.raises(ShapeError):
        FN.rms_norm(x, (3,), weight=t64(rnd(4), False))
    with pytest.raises(ShapeError):
        FN.layer_norm(x, (3,), weight=t64(rnd(4), False))
    with pytest.raises(ShapeError):
        FN.local_response_norm(t64(rnd(2, 3), False), 2)
    with pytest.raises(DomainError):
        FN.local_response_norm(x, 0)
    with pytest.raises(ShapeError):
        FN.batch_norm(t64(rnd(1, 3), False), None, None, training=True)
    with pytest.raises(ShapeError):
        NN.BatchNorm2d(6)(x)
    with pytest.raises(TorchLeanError):
        FN.group_norm(rnd(2, 6, 3), 3)


@pytest.mark.cuda
def test_norms_cuda_matches_cpu():
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("CUDA not available")
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    fns = [lambda X, W, B: FN.group_norm(X, 2, W, B),
           lambda X, W, B: FN.instance_norm(X, weight=W, bias=B),
           lambda X, W, B: FN.local_response_norm(X, 3, 0.1, 0.75, 1.0) * W.reshape(1, 4, 1, 1),
           lambda X, W, B: FN.rms_norm(X, (3, 3)) + B.reshape(1, 4, 1, 1),
           lambda X, W, B: FN.batch_norm(X, None, None, W, B, True)]
    for i, f in enumerate(fns):
        outs = []
        for dev in ("cpu", "cuda"):
            X = tl.tensor(x, device=dev, requires_grad=True)
            W = tl.tensor(w, device=dev, requires_grad=True)
            B = tl.tensor(b, device=dev, requires_grad=True)
            y = f(X, W, B)
            (y * y).sum().backward()
            outs.append([y.cpu().numpy()] + [None if t.grad is None else t.grad.cpu().numpy() for t in (X, W, B)])
        assert outs[0][1] is not None
        for a, c in zip(*outs):
            assert (a is None) == (c is None)
            if a is not None:
                np.testing.assert_allclose(c, a, rtol=1e-4, atol=1e-4, err_msg=f"functional {i}")


def test_running_statistics_of_another_dtype_are_updated_through_a_copy():
    """Buffers the fused kernel cannot update in place (float32 buffers of a float64 input; torch
    refuses the mix on the CPU) get the same update, written back into them."""
    x = np.random.default_rng(3).standard_normal((8, 3, 5, 5)) * 3 + 100
    rm, rv = tl.zeros(3), tl.ones(3)
    tl.nn.functional.batch_norm(tl.tensor(x), rm, rv, training=True, momentum=0.2)
    assert rm.dtype == tl.float32 and rv.dtype == tl.float32
    np.testing.assert_allclose(rm.numpy(), 0.2 * x.mean(axis=(0, 2, 3)), rtol=1e-6)
    np.testing.assert_allclose(rv.numpy(), 0.8 + 0.2 * x.var(axis=(0, 2, 3), ddof=1), rtol=1e-6)
