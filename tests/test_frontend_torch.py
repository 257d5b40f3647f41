"""The PyTorch-style front end against PyTorch itself (CPU, float64).

Values and gradients of tensor ops, functional layers and losses, a small MLP
loaded from a torch state_dict, optimizer trajectories and LR schedules.
"""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import torchlean as tl  # noqa: E402
import torchlean.nn.functional as F  # noqa: E402

RTOL = 1e-10
ATOL = 1e-12


def pair(a):
    """The same float64 leaf in torchlean and torch."""
    a = np.asarray(a, dtype=np.float64)
    return tl.tensor(a, dtype=tl.float64, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(ours, theirs, rtol=RTOL, atol=ATOL):
    a = ours.numpy() if isinstance(ours, tl.Tensor) else np.asarray(ours)
    b = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def check_fn(fn_tl, fn_torch, *arrays, rng=None, rtol=RTOL, atol=ATOL):
    """Forward values and gradients of every input under a random cotangent."""
    rng = rng or np.random.default_rng(0)
    pairs = [pair(a) for a in arrays]
    y = fn_tl(*[p[0] for p in pairs])
    yt = fn_torch(*[p[1] for p in pairs])
    close(y, yt, rtol, atol)
    w = rng.standard_normal(yt.shape)
    (y * tl.tensor(w, dtype=tl.float64)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    for (a, at) in pairs:
        if at.grad is None:
            assert a.grad is None or np.all(a.grad.numpy() == 0)
        else:
            close(a.grad, at.grad, rtol, atol)


# ---- broadcasting binary ops ---------------------------------------------------------------

BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / b, lambda a, b: a / b),
    "maximum": (tl.maximum, torch.maximum),
    "minimum": (tl.minimum, torch.minimum),
}


@settings(max_examples=60, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3),
       op=st.sampled_from(sorted(BINARY)), seed=st.integers(0, 2 ** 31 - 1))
def test_broadcasting_binary_ops_match_torch(shapes, op, seed):
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    a = rng.standard_normal(sa)
    b = rng.standard_normal(sb)
    if op == "div":
        b = np.sign(b) * (np.abs(b) + 0.5)  # away from zero
    fa, fb = BINARY[op]
    check_fn(fa, fb, a, b, rng=rng)


def test_binary_ops_with_python_scalars(rng):
    a = rng.standard_normal((2, 3))
    check_fn(lambda x: 2.0 * x - 1.5, lambda x: 2.0 * x - 1.5, a)
    check_fn(lambda x: 3.0 / (x * x + 1.0), lambda x: 3.0 / (x * x + 1.0), a)
    check_fn(lambda x: (x * x + 1.0) ** 1.5, lambda x: (x * x + 1.0) ** 1.5, a)


# ---- reductions ----------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2), (-1, -3), (1,)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_sum_mean_match_torch(rng, dim, keepdim, kind):
    a = rng.standard_normal((2, 3, 4))
    if dim is None:
        if keepdim:
            pytest.skip("torch's sum(dim=None) takes no keepdim")
        check_fn(lambda x: getattr(x, kind)(), lambda x: getattr(x, kind)(), a)
        return
    check_fn(lambda x: getattr(x, kind)(dim, keepdim), lambda x: getattr(x, kind)(dim, keepdim=keepdim), a)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_max_min_dim_match_torch(rng, dim, keepdim, kind):
    a = rng.standard_normal((3, 4, 2))
    check_fn(lambda x: getattr(x, kind)(dim, keepdim).values, lambda x: getattr(x, kind)(dim, keepdim=keepdim).values, a)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_global_max_min_match_torch(rng, kind):
    a = rng.standard_normal((3, 4))
    check_fn(lambda x: getattr(x, kind)(), lambda x: getattr(x, kind)(), a)


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min"])
def test_reductions_of_a_0d_tensor_match_torch(kind):
    check_fn(lambda x: getattr(x, kind)(), lambda x: getattr(x, kind)(), np.array(1.5))


# ---- matmul --------------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)), ((1, 2, 3), (5, 3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((4, 3), (2, 1, 3, 5)),
    ((3,), (2, 3, 4)), ((2, 4, 3), (3,)), ((1, 1), (1, 1)),
])
def test_matmul_shapes_match_torch(rng, sa, sb):
    check_fn(lambda a, b: a @ b, lambda a, b: a @ b, rng.standard_normal(sa), rng.standard_normal(sb))


def test_matmul_shape_mismatch_raises():
    with pytest.raises(tl.errors.ShapeError, match="matmul"):
        tl.ones(2, 3) @ tl.ones(4, 2)


# ---- indexing ------------------------------------------------------------------------------

INDICES = [
    1, -1, (0, 2), (-1, -2, -3), slice(1, 3), slice(None, None, 2), slice(-3, None), slice(1, None, 3),
    (slice(None), 1), (Ellipsis, 1), (Ellipsis, slice(None, None, 2)), (None,), (None, 1),
    (slice(None), None, slice(1, 3)), (1, Ellipsis, -1), (slice(-2, None), Ellipsis, slice(None, None, 2)),
    (0, slice(None), None, -1), (slice(0, 4, 3), slice(None, -1), 2), (Ellipsis,), (Ellipsis, None),
    (slice(2, 1),),
]


@pytest.mark.parametrize("index", INDICES, ids=[repr(i) for i in INDICES])
def test_getitem_matches_torch(rng, index):
    a = rng.standard_normal((4, 3, 5))
    check_fn(lambda x: x[index], lambda x: x[index], a)


def test_getitem_out_of_range_raises():
    with pytest.raises(tl.TorchLeanError):
        tl.ones(3, 2)[3]
    with pytest.raises(tl.TorchLeanError):
        tl.ones(3, 2)[0, 0, 0]


def test_int_tensor_index_matches_torch(rng):
    a = rng.standard_normal((5, 3))
    idx = np.array([4, 0, 0, 2])
    check_fn(lambda x: x[tl.tensor(idx)], lambda x: x[torch.tensor(idx)], a)


# ---- softmax family, activations, linear ----------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family_matches_torch(rng, dim):
    a = rng.standard_normal((3, 4, 5)) * 3
    check_fn(lambda x: F.softmax(x, dim), lambda x: torch.softmax(x, dim), a)
    check_fn(lambda x: F.log_softmax(x, dim), lambda x: torch.log_softmax(x, dim), a)
    check_fn(lambda x: x.softmax(dim), lambda x: x.softmax(dim), a)


def test_log_softmax_large_logits_finite():
    x = tl.tensor([[1000.0, 0.0, -1000.0]], dtype=tl.float64)
    y = F.log_softmax(x, -1).numpy()
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, torch.log_softmax(torch.tensor(x.numpy()), -1).numpy())


@pytest.mark.parametrize("name,ours,theirs", [
    ("relu", F.relu, torch.relu),
    ("gelu", F.gelu, torch.nn.functional.gelu),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    ("sigmoid", F.sigmoid, torch.sigmoid),
    ("tanh", F.tanh, torch.tanh),
    ("softplus", F.softplus, torch.nn.functional.softplus),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0), lambda x: torch.nn.functional.softplus(x, beta=2.0)),
    ("silu", F.silu, torch.nn.functional.silu),
])
def test_activations_match_torch(rng, name, ours, theirs):
    a = rng.standard_normal((4, 5)) * 2
    a[np.abs(a) < 1e-3] = 0.5  # keep off relu's kink
    check_fn(ours, theirs, a, rtol=1e-9)


@pytest.mark.parametrize("xshape", [(5,), (3, 5), (2, 3, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(rng, xshape, bias):
    x, w, b = rng.standard_normal(xshape), rng.standard_normal((4, 5)), rng.standard_normal(4)
    if bias:
        check_fn(F.linear, torch.nn.functional.linear, x, w, b)
    else:
        check_fn(lambda x, w: F.linear(x, w), lambda x, w: torch.nn.functional.linear(x, w), x, w)


# ---- losses --------------------------------------------------------------------------------

CE_CASES = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(weight=True),
    dict(weight=True, reduction="sum"),
    dict(ignore_index=1),
    dict(ignore_index=1, weight=True),
    dict(label_smoothing=0.2),
    dict(label_smoothing=0.1, weight=True, ignore_index=2),
    dict(label_smoothing=0.3, reduction="none"),
]


@pytest.mark.parametrize("shape", [(6, 4), (4,), (3, 4, 2, 2)])
@pytest.mark.parametrize("case", CE_CASES, ids=[str(c) for c in CE_CASES])
def test_cross_entropy_matches_torch(rng, shape, case):
    C = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    target = rng.integers(0, C, size=tshape)
    kw = dict(case)
    if not tshape and "ignore_index" in kw:
        target = np.array((kw["ignore_index"] + 1) % C)  # a lone ignored target makes the mean 0/0
    w = rng.uniform(0.5, 2.0, C) if kw.pop("weight", False) else None
    ours_kw = dict(kw, weight=None if w is None else tl.tensor(w, dtype=tl.float64))
    theirs_kw = dict(kw, weight=None if w is None else torch.tensor(w))
    check_fn(lambda x: F.cross_entropy(x, tl.tensor(target), **ours_kw),
             lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(target), **theirs_kw),
             rng.standard_normal(shape), rtol=1e-9)
    if "label_smoothing" not in kw:
        check_fn(lambda x: F.nll_loss(F.log_softmax(x, 0 if len(shape) == 1 else 1), tl.tensor(target), **ours_kw),
                 lambda x: torch.nn.functional.nll_loss(torch.log_softmax(x, 0 if len(shape) == 1 else 1),
                                                        torch.tensor(target), **theirs_kw),
                 rng.standard_normal(shape), rtol=1e-9)


@pytest.mark.parametrize("kw", [dict(), dict(label_smoothing=0.2), dict(reduction="sum"), dict(reduction="none")])
def test_cross_entropy_probability_targets_match_torch(rng, kw):
    p = rng.uniform(size=(5, 3, 2))
    p /= p.sum(1, keepdims=True)
    w = rng.uniform(0.5, 2.0, 3)
    check_fn(lambda x: F.cross_entropy(x, tl.tensor(p), weight=tl.tensor(w), **kw),
             lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(p), weight=torch.tensor(w), **kw),
             rng.standard_normal((5, 3, 2)), rtol=1e-9)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1_loss_match_torch(rng, reduction):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check_fn(lambda x, y: F.mse_loss(x, y, reduction=reduction),
             lambda x, y: torch.nn.functional.mse_loss(x, y, reduction=reduction), a, b)
    check_fn(lambda x, y: F.l1_loss(x, y, reduction=reduction),
             lambda x, y: torch.nn.functional.l1_loss(x, y, reduction=reduction), a, b)


def test_loss_errors():
    x = tl.zeros(3, 4)
    with pytest.raises(tl.errors.IndexRangeError, match="cross_entropy"):
        F.cross_entropy(x, tl.tensor([0, 1, 4]))
    with pytest.raises(tl.errors.ShapeError, match="cross_entropy"):
        F.cross_entropy(x, tl.tensor([0, 1]))
    with pytest.raises(tl.errors.DTypeError):
        F.nll_loss(x, tl.tensor([0.0, 1.0, 2.0, 1.0]).reshape(2, 2))
    with pytest.raises(tl.errors.ShapeError, match="mse_loss"):
        F.mse_loss(tl.zeros(3), tl.zeros(4))


def test_embedding_matches_torch(rng):
    w = rng.standard_normal((6, 3))
    idx = np.array([[0, 5, 2], [2, 2, 1]])
    check_fn(lambda w: F.embedding(tl.tensor(idx), w), lambda w: torch.nn.functional.embedding(torch.tensor(idx), w),
             w)
    check_fn(lambda w: F.embedding(tl.tensor(idx), w, padding_idx=2),
             lambda w: torch.nn.functional.embedding(torch.tensor(idx), w, padding_idx=2), w)


# ---- a small MLP loaded from torch ---------------------------------------------------------

def test_mlp_from_torch_state_dict_matches(rng):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).double()
    net = tl.nn.Sequential(tl.nn.Linear(5, 16), tl.nn.ReLU(), tl.nn.Linear(16, 3)).to(dtype=tl.float64)
    assert list(net.state_dict()) == list(ref.state_dict())
    net.load_state_dict({k: v.numpy() for k, v in ref.state_dict().items()})
    x = rng.standard_normal((7, 5))
    target = rng.integers(0, 3, size=7)
    y = net(tl.tensor(x))
    yt = ref(torch.tensor(x))
    close(y, yt)
    F.cross_entropy(y, tl.tensor(target)).backward()
    torch.nn.functional.cross_entropy(yt, torch.tensor(target)).backward()
    theirs = dict(ref.named_parameters())
    for name, p in net.named_parameters():
        close(p.grad, theirs[name].grad)


def test_load_state_dict_accepts_torch_tensors(rng):
    ref = torch.nn.Linear(4, 2).double()
    net = tl.nn.Linear(4, 2)
    net.load_state_dict(ref.state_dict())
    assert net.weight.dtype == tl.float32  # values are cast to the module's dtype
    np.testing.assert_allclose(net.weight.numpy(), ref.weight.detach().numpy(), rtol=1e-6)


# ---- optimizers ----------------------------------------------------------------------------

OPTIMIZERS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.95), weight_decay=0.1)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.05, eps=1e-6)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.8)),
    ("RMSprop", dict(lr=0.01, momentum=0.8, centered=True, weight_decay=0.1, alpha=0.9)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1)),
]


def _objective(w, b, x, y, lib):
    h = (x @ w + b).tanh() if lib is tl else torch.tanh(x @ w + b)
    d = h - y
    return (d * d).mean() + (w * w * w * w).sum() * 0.01


@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}-{kw}" for n, kw in OPTIMIZERS])
def test_optimizer_trajectory_matches_torch(name, kw):
    rng = np.random.default_rng(123)
    w0, b0 = rng.standard_normal((4, 3)), rng.standard_normal(3)
    x, y = rng.standard_normal((8, 4)), rng.standard_normal((8, 3))
    w, wt = pair(w0)
    b, bt = pair(b0)
    w, b = tl.nn.Parameter(w), tl.nn.Parameter(b)
    # Two groups: the bias with its own learning rate exercises per-group options.
    lr_b = kw.get("lr", 1.0) * 0.5
    ours = getattr(tl.optim, name)([{"params": [w]}, {"params": [b], "lr": lr_b}], **kw)
    theirs = getattr(torch.optim, name)([{"params": [wt]}, {"params": [bt], "lr": lr_b}], **kw)
    xs, ys = tl.tensor(x, dtype=tl.float64), tl.tensor(y, dtype=tl.float64)
    xts, yts = torch.tensor(x), torch.tensor(y)
    for _ in range(20):
        ours.zero_grad()
        theirs.zero_grad()
        _objective(w, b, xs, ys, tl).backward()
        _objective(wt, bt, xts, yts, torch).backward()
        ours.step()
        theirs.step()
    close(w, wt, rtol=1e-5, atol=1e-9)
    close(b, bt, rtol=1e-5, atol=1e-9)
    assert not np.allclose(w.numpy(), w0)  # it moved


def test_optimizer_state_dict_round_trip_continues_identically():
    rng = np.random.default_rng(7)
    w0, x = rng.standard_normal((3, 2)), rng.standard_normal((5, 3))

    def run(opt_factory, steps, w, opt=None):
        opt = opt or opt_factory([w])
        for _ in range(steps):
            opt.zero_grad()
            ((tl.tensor(x, dtype=tl.float64) @ w).tanh().sum() + (w * w).sum()).backward()
            opt.step()
        return opt

    for factory in (lambda ps: tl.optim.Adam(ps, lr=0.1, amsgrad=True),
                    lambda ps: tl.optim.SGD(ps, lr=0.1, momentum=0.9),
                    lambda ps: tl.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
                    lambda ps: tl.optim.Adagrad(ps, lr=0.1), lambda ps: tl.optim.Adadelta(ps)):
        a = tl.nn.Parameter(tl.tensor(w0, dtype=tl.float64))
        run(factory, 10, a)
        b = tl.nn.Parameter(tl.tensor(w0, dtype=tl.float64))
        opt_b = run(factory, 5, b)
        c = tl.nn.Parameter(tl.tensor(b.numpy(), dtype=tl.float64))
        opt_c = factory([c])
        opt_c.load_state_dict(opt_b.state_dict())
        run(factory, 5, c, opt_c)
        np.testing.assert_allclose(c.numpy(), a.numpy(), rtol=1e-12)


# ---- LR schedulers -------------------------------------------------------------------------

@pytest.mark.parametrize("kind,kw", [
    ("StepLR", dict(step_size=3, gamma=0.5)), ("StepLR", dict(step_size=1, gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=10)), ("CosineAnnealingLR", dict(T_max=7, eta_min=0.01)),
])
def test_lr_schedulers_match_torch(kind, kw):
    p = tl.nn.Parameter(tl.zeros(1))
    pt = torch.zeros(1, requires_grad=True)
    opt = tl.optim.SGD([p], lr=0.3)
    opt_t = torch.optim.SGD([pt], lr=0.3)
    s = getattr(tl.optim.lr_scheduler, kind)(opt, **kw)
    st_ = getattr(torch.optim.lr_scheduler, kind)(opt_t, **kw)
    ours, theirs = [s.get_last_lr()[0]], [st_.get_last_lr()[0]]
    for _ in range(30):
        opt.step()
        opt_t.step()
        s.step()
        st_.step()
        ours.append(s.get_last_lr()[0])
        theirs.append(st_.get_last_lr()[0])
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
    assert opt.param_groups[0]["lr"] == ours[-1]
    if kind == "CosineAnnealingLR":
        T, lo = kw["T_max"], kw.get("eta_min", 0.0)
        closed = [lo + (0.3 - lo) * (1 + math.cos(math.pi * t / T)) / 2 for t in range(31)]
        np.testing.assert_allclose(ours, closed, rtol=1e-9, atol=1e-12)


def test_clip_grad_norm_matches_torch(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(5)
    ps = [tl.nn.Parameter(tl.tensor(a, dtype=tl.float64)), tl.nn.Parameter(tl.tensor(b, dtype=tl.float64))]
    pts = [torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)]
    for p, q in zip(ps, pts):
        g = rng.standard_normal(p.shape)
        p.grad = tl.tensor(g, dtype=tl.float64)
        q.grad = torch.tensor(g)
    for norm_type in (2.0, 1.0, math.inf):
        n = tl.nn.utils.clip_grad_norm_(ps, 0.5, norm_type)
        nt = torch.nn.utils.clip_grad_norm_(pts, 0.5, norm_type)
        np.testing.assert_allclose(float(n), float(nt), rtol=1e-12)
        for p, q in zip(ps, pts):
            close(p.grad, q.grad)
