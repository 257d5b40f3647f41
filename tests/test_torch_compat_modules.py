"""torch.utils.checkpoint, torch.fft's real helpers, torch.special and torch.jit under torchlean, against
torch: values, gradients, warnings and the errors of what has no counterpart here."""

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import torchlean as tl
from torchlean.errors import DTypeError, TorchLeanError

torch = pytest.importorskip("torch")


def _grads(m, fn, *arrays):
    ts = [m.tensor(a, requires_grad=True) for a in arrays]
    y = fn(m, *ts)
    y.sum().backward()
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


def test_checkpoint_gives_torchs_values_gradients_and_warning():
    import importlib
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 5)
    res = []
    for m in (torch, tl):
        lin = ref if m is torch else tl.nn.Linear(4, 5)
        if m is tl:
            lin.load_state_dict({k: tl.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
        ck = importlib.import_module(f"{m.__name__}.utils.checkpoint")
        xt = m.tensor(x, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = ck.checkpoint(lambda t: m.tanh(lin(t)) * 2, xt)
        assert any("use_reentrant parameter should be passed explicitly" in str(i.message) for i in w)
        y2 = ck.checkpoint_sequential(m.nn.Sequential(lin, m.nn.ReLU()), 2, xt, use_reentrant=False)
        (y.sum() + y2.sum()).backward()
        res.append((y.detach().numpy(), y2.detach().numpy(), xt.grad.numpy(), lin.weight.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 4, 5, 8])
@pytest.mark.parametrize("d", [1.0, 0.1])
def test_fft_frequencies_match_torch(n, d):
    for name in ("fftfreq", "rfftfreq"):
        a, b = getattr(tl.fft, name)(n, d), getattr(torch.fft, name)(n, d)
        assert a.dtype == tl.float32 and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, equal_nan=True)
    assert tl.fft.fftfreq(3, dtype=tl.float64).dtype == tl.float64


def test_fftshift_matches_torch_and_complex_transforms_say_why():
    x = np.arange(30.0).reshape(5, 6)
    for dim in (None, 0, 1, (0, 1), -1):
        for name in ("fftshift", "ifftshift"):
            np.testing.assert_array_equal(getattr(tl.fft, name)(tl.tensor(x), dim=dim).numpy(),
                                          getattr(torch.fft, name)(torch.tensor(x), dim=dim).numpy())
    for name in ("fft", "rfft", "irfft", "fftn", "ihfft"):
        with pytest.raises(DTypeError, match=f"fft.{name}: .*no complex dtype"):
            getattr(tl.fft, name)(tl.ones(4))


SPECIAL = [("ndtr", (np.array([-6.0, -1.5, 0.0, 0.3, 2.0]),)), ("sinc", (np.array([-1.5, -0.2, 0.0, 0.5, 3.0]),)),
           ("logit", (np.array([0.01, 0.3, 0.5, 0.9, 0.999]),)), ("expit", (np.array([-4.0, 0.0, 2.5]),)),
           ("xlog1py", (np.array([-3.0, 0.0, 0.2, 0.0, 2.5]), np.array([0.01, 0.5, 0.9, -1.0, 0.2]))),
           ("erf", (np.array([-2.0, 0.1, 1.5]),)), ("erfinv", (np.array([-0.9, 0.0, 0.5]),)),
           ("expm1", (np.array([-1.0, 1e-4, 2.0]),)), ("log1p", (np.array([-0.5, 1e-5, 3.0]),)),
           ("exp2", (np.array([-1.0, 0.5, 3.0]),))]


@pytest.mark.parametrize("name,args", SPECIAL, ids=[n for n, _ in SPECIAL])
def test_special_functions_match_torch(name, args):
    args = [a.astype(np.float64) for a in args]
    ours, og = _grads(tl, lambda m, *t: getattr(m.special, name)(*t), *args)
    theirs, tg = _grads(torch, lambda m, *t: getattr(m.special, name)(*t), *args)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-12)
    for a, b, x in zip(og, tg, args):
        ok = np.isfinite(b)             # torch's xlog1py gives a NaN gradient in y at (0, -1); ours is 0
        np.testing.assert_allclose(a[ok], b[ok], rtol=1e-6, atol=1e-12)
    y = tl.special.logit(tl.tensor([0.0, 0.5, 1.0]), eps=0.1).tolist()
    assert y == pytest.approx(torch.special.logit(torch.tensor([0.0, 0.5, 1.0]), eps=0.1).tolist())


def test_jit_entry_points_leave_code_as_it_is():
    @tl.jit.script
    def f(x):
        return x * 2 if not tl.jit.is_scripting() else x

    assert f(tl.ones(2)).tolist() == [2.0, 2.0]
    lin = tl.nn.Linear(2, 2)
    assert tl.jit.script(lin) is lin and tl.jit.trace(lin, tl.ones(1, 2)) is lin
    assert tl.jit.ignore(f) is f and tl.jit.ignore(drop=True)(f) is f and tl.jit.unused(f) is f
    assert not tl.jit.is_tracing() and tl.jit.annotate(int, 3) == 3
    with pytest.raises(TorchLeanError, match="TorchScript archives are not supported"):
        tl.jit.save(lin, "never.pt")
    with pytest.raises(TorchLeanError, match="TorchScript archives are not supported"):
        tl.jit.load("never.pt")


def test_a_torch_program_using_them_runs_unchanged(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("""
import torch
import torch.fft
import torch.special
from torch.utils.checkpoint import checkpoint

@torch.jit.script
def double(x):
    return x * 2

net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))
with torch.no_grad():          # the same weights on both sides (the two generators differ)
    for p in net.parameters():
        p.copy_(torch.linspace(-0.5, 0.7, p.numel()).reshape(p.shape))
x = torch.linspace(-1, 1, 12).reshape(3, 4)
y = double(checkpoint(net, x, use_reentrant=False)).sum() + torch.special.ndtr(x).sum()
y.backward()
print(round(float(y), 5), round(float(net[0].weight.grad.abs().sum()), 5), torch.fft.rfftfreq(4).tolist())
""")
    want = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=120)
    got = subprocess.run([sys.executable, "-m", "torchlean", "run", str(prog)], capture_output=True, text=True,
                         timeout=120)
    assert want.returncode == 0 and got.returncode == 0, got.stderr
    a, b = want.stdout.split(), got.stdout.split()
    assert a[2:] == b[2:] and abs(float(a[0]) - float(b[0])) < 1e-4 and abs(float(a[1]) - float(b[1])) < 1e-4


def test_futures_behave_as_torchs():
    for F in (tl.futures, torch.futures):
        f = F.Future()
        g = f.then(lambda fut: fut.value() + 1)
        h = g.then(lambda fut: fut.value() * 10)
        assert not f.done() and not h.done()
        f.set_result(4)
        assert (g.wait(), h.wait(), f.value()) == (5, 50, 4) and h.done()
        bad = F.Future()
        failed = bad.then(lambda fut: 1 / 0)
        bad.set_result(0)
        with pytest.raises(RuntimeError, match="error when running the callback: ZeroDivisionError"):
            failed.wait()
        a, b = F.Future(), F.Future()
        both = F.collect_all([a, b])
        a.set_result("x")
        assert not both.done()
        b.set_result("y")
        assert [f.value() for f in both.wait()] == ["x", "y"]
        assert F.wait_all([a, b]) == ["x", "y"]
        with pytest.raises(RuntimeError):
            a.set_result("again")
    done = tl.distributed.Work([tl.ones(2)]).get_future()
    assert done.done() and done.wait()[0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("extra", [(), (2,), (2, 3)])
@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none", "label_smoothing": 0.1},
                                {"ignore_index": 1}])
def test_linear_cross_entropy_matches_torch(extra, kw):
    rng = np.random.default_rng(len(extra))
    N, IN, C = 4, 5, 3
    x = rng.standard_normal((N, IN))
    t = rng.integers(0, C, (N,) + extra)
    out = []
    for m in (torch, tl):
        mod = m.nn.LinearCrossEntropyLoss(IN, C, out_features=extra, bias=True, dtype=m.float64, **kw)
        if m is torch:
            state = {k: v.detach().numpy() for k, v in mod.state_dict().items()}
        else:
            mod.load_state_dict({k: tl.tensor(v) for k, v in state.items()})
        xt = m.tensor(x, requires_grad=True)
        loss = mod(xt, m.tensor(t))
        loss.sum().backward()
        out.append((loss.detach().numpy(), xt.grad.numpy(), mod.linear.weight.grad.numpy(), mod.linear.bias.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="dimensionality 1 or 2"):
        tl.nn.functional.linear_cross_entropy(tl.ones(2, 3, 5), tl.ones(3, 5), tl.zeros(2, 3, dtype=tl.int64))


@pytest.mark.parametrize("channels", [1, 2, 5, 7])
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8])
def test_cross_map_lrn2d_forward_matches_torch_and_its_gradient_is_the_derivative(channels, size):
    rng = np.random.default_rng(channels * 10 + size)
    x = rng.standard_normal((2, channels, 3, 4))
    y = tl.nn.CrossMapLRN2d(size, 1e-2, 0.75, 1.5)(tl.tensor(x)).numpy()
    want = torch.nn.CrossMapLRN2d(size, 1e-2, 0.75, 1.5)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-14)
    # torch's hand-written backward assumes a centred window (and fails for size 1): ours is the
    # derivative of the forward, checked by central differences
    m, g, d = tl.nn.CrossMapLRN2d(size, 0.5, 0.75, 1.5), rng.standard_normal(x.shape), rng.standard_normal(x.shape)
    xt = tl.tensor(x, requires_grad=True)
    (m(xt) * tl.tensor(g)).sum().backward()
    f = lambda z: float((m(tl.tensor(z)) * tl.tensor(g)).sum())  # noqa: E731
    num = (f(x + 1e-6 * d) - f(x - 1e-6 * d)) / 2e-6
    assert abs(num - float((xt.grad.numpy() * d).sum())) < 1e-6 * max(1.0, abs(num))


def test_container_is_a_deprecated_module_holder():
    with pytest.warns(FutureWarning, match="nn.Container` is deprecated"):
        c = tl.nn.Container(a=tl.nn.Linear(2, 2), b=tl.nn.ReLU())
    assert list(c.state_dict()) == ["a.weight", "a.bias"] and isinstance(c.b, tl.nn.ReLU)


GAMMA_X = np.array([-2.5, -0.3, 0.2, 0.5, 1.0, 2.0, 3.7, 9.5, 12.0, 150.0])
GAMMA = [("lgamma", lambda m, x: m.lgamma(x)), ("digamma", lambda m, x: x.digamma()),
         ("special.gammaln", lambda m, x: m.special.gammaln(x)), ("special.psi", lambda m, x: m.special.psi(x)),
         ("polygamma0", lambda m, x: m.polygamma(0, x)),
         ("special.multigammaln", lambda m, x: m.special.multigammaln(x.abs() + 1.5, 3)),
         ("mvlgamma", lambda m, x: (x.abs() + 2).mvlgamma(p=2))]


@pytest.mark.parametrize("name,fn", GAMMA, ids=[n for n, _ in GAMMA])
def test_gamma_family_values_and_gradients_match_torch(name, fn):
    for dtype in (np.float64, np.float32):
        x = GAMMA_X.astype(dtype)
        ours, og = _grads(tl, fn, x)
        theirs, tg = _grads(torch, fn, x)
        assert ours.dtype == theirs.dtype
        tol = 1e-12 if dtype == np.float64 else 2e-6
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)
        # torch's float64 trigamma is good to ~1e-9 (1.6449340676 at 1, where pi^2/6 = 1.6449340668)
        np.testing.assert_allclose(og[0], tg[0], rtol=max(tol, 2e-9), atol=tol)


def test_trigamma_poles_integers_and_errors_follow_torch():
    x = np.array([-3.0, -1.0, 0.0, 0.25, 1.0, 7.0, np.inf, np.nan, -0.0, -np.inf])
    for name, f in (("lgamma", lambda m, t: m.lgamma(t)), ("digamma", lambda m, t: m.digamma(t)),
                    ("trigamma", lambda m, t: m.polygamma(1, t))):
        ours = f(tl, tl.tensor(x)).numpy()
        theirs = f(torch, torch.tensor(x)).numpy()
        if name == "trigamma":   # a double pole at 0, -1, ...: torch gives inf at 0 but ~1e32 below it
            assert np.all(ours[:3] == np.inf) and np.all(theirs[:3] > 1e30) and ours[8] == theirs[8] == np.inf
            ours, theirs = ours[np.r_[3:8, 9]], theirs[np.r_[3:8, 9]]
        rtol = 2e-9 if name == "trigamma" else 1e-12     # torch's trigamma: ~1e-9 (see above)
        np.testing.assert_allclose(ours, theirs, rtol=rtol, err_msg=name)   # NaN and inf where torch has them
    exact = tl.polygamma(1, tl.tensor([1.0, 0.5], dtype=tl.float64)).tolist()
    assert exact == pytest.approx([math.pi ** 2 / 6, math.pi ** 2 / 2], rel=1e-14)
    ints = tl.lgamma(tl.tensor([1, 2, 5]))
    assert ints.dtype == tl.float32 and ints.tolist() == pytest.approx([0.0, 0.0, math.log(24.0)], abs=1e-6)
    y = tl.tensor([2.5, 4.0])
    y.lgamma_()
    assert y.tolist() == pytest.approx(torch.tensor([2.5, 4.0]).lgamma_().tolist())
    t = tl.tensor([1.5], requires_grad=True)
    with pytest.raises(TorchLeanError, match="polygamma of order 2"):
        tl.polygamma(1, t).backward()
    with pytest.raises(TorchLeanError, match="order n = 3 is not supported"):
        tl.polygamma(3, t)
    with pytest.raises(TorchLeanError, match="negative n"):
        tl.polygamma(-1, t)
    with pytest.raises(TorchLeanError, match=r"mvlgamma: All elements must be greater than \(p-1\)/2 = 1.0"):
        tl.mvlgamma(tl.tensor([0.9, 3.0]), 3)


def test_tensor_kind_predicates_are_torchs_for_dense_cpu_tensors():
    names = ("is_sparse", "is_sparse_csr", "is_quantized", "is_meta", "is_mps", "is_xpu", "is_mkldnn", "is_nested",
             "is_cuda", "is_cpu")
    ours, theirs = tl.ones(2, 3), torch.ones(2, 3)
    assert {n: getattr(ours, n) for n in names} == {n: getattr(theirs, n) for n in names}


def test_sparse_coo_tensors_stored_dense_give_torchs_values_and_gradients():
    idx = np.array([[0, 2, 2, 1], [1, 0, 0, 3]])
    vals = np.array([1.5, -2.0, 4.0, 0.25])
    dense = np.arange(8.0).reshape(4, 2)
    ours_v, theirs_v = tl.tensor(vals, requires_grad=True), torch.tensor(vals, requires_grad=True)
    a = tl.sparse_coo_tensor(idx, ours_v, (3, 4))
    b = torch.sparse_coo_tensor(torch.tensor(idx), theirs_v, (3, 4))
    np.testing.assert_array_equal(a.numpy() if not a.requires_grad else a.detach().numpy(),
                                  b.to_dense().detach().numpy())                       # repeats add up
    (tl.spmm(a.to_sparse(), tl.tensor(dense)) ** 2).sum().backward()
    (torch.sparse.mm(b, torch.tensor(dense)) ** 2).sum().backward()
    np.testing.assert_allclose(ours_v.grad.numpy(), theirs_v.grad.numpy(), rtol=1e-12)
    c = tl.sparse_coo_tensor(idx[:1], tl.tensor(np.ones((4, 2))))                    # a dense trailing axis
    d = torch.sparse_coo_tensor(torch.tensor(idx[:1]), torch.ones(4, 2))
    assert tuple(c.shape) == tuple(d.shape) == (3, 2) and c.tolist() == d.to_dense().tolist()
    ints = tl.sparse_coo_tensor(idx.T.T, tl.ones(4), (3, 4), dtype=tl.int64)
    assert ints.dtype == tl.int64 and (tl.eye(3, 4) + ints).tolist() == \
        (torch.eye(3, 4) + torch.sparse_coo_tensor(torch.tensor(idx), torch.ones(4), (3, 4), dtype=torch.int64)).tolist()
    assert a.to_dense() is a and a.coalesce() is a and a.is_coalesced() and not a.is_sparse
    assert tl.sparse.sum(ints).item() == 4 and tl.sparse.mm(ints.double(), tl.ones(4, 1, dtype=tl.float64)).tolist() \
        == [[1.0], [1.0], [2.0]]
    with pytest.raises(TorchLeanError, match=r"sparse_coo_tensor: index 3 is out of bounds for dimension 1 of size 3"):
        tl.sparse_coo_tensor(idx, tl.tensor(vals), (3, 3))
    with pytest.raises(TorchLeanError, match=r"values of shape \(3,\) must have nnz = 4"):
        tl.sparse_coo_tensor(idx, tl.ones(3))
    with pytest.raises(TorchLeanError, match="indices must be an integer tensor"):
        tl.sparse_coo_tensor(tl.ones(2, 4), tl.ones(4))
