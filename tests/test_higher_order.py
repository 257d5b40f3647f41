"""Higher-order gradients (``create_graph=True``): each differentiable VJP agrees with its op's
runtime rule on the op's own test samples, and second derivatives of whole computations (a
Hessian-vector product, a gradient penalty, a physics-informed residual) agree with torch's."""

import numpy as np
import pytest

import torchlean as tl
from torchlean.autograd import DIFFERENTIABLE_VJPS, record
from torchlean.errors import AutogradError
from torchlean.testing.opinfo import OPINFOS

torch = pytest.importorskip("torch")

OPS = sorted(n for n in DIFFERENTIABLE_VJPS if n in OPINFOS)


def test_most_ops_have_a_differentiable_vjp():
    assert len(OPS) >= 80, OPS


@pytest.mark.parametrize("name", OPS)
def test_differentiable_vjp_equals_the_runtime_rule(name):
    info, rng = OPINFOS[name], np.random.default_rng(0)
    for s in info.samples(rng):
        diff = info.differentiable(len(s.inputs))
        xs = [tl.tensor(np.asarray(a, dtype=np.float64), requires_grad=k in diff) for k, a in enumerate(s.inputs)]
        y = record(name, tuple(xs), dict(s.attrs))
        if not y.requires_grad:
            continue
        seed = tl.tensor(rng.standard_normal(y.shape))
        wrt = [xs[k] for k in diff]
        want = tl.autograd.grad(y, wrt, seed, retain_graph=True, allow_unused=True)
        got = tl.autograd.grad(y, wrt, seed, create_graph=True, allow_unused=True)
        for k, (a, b) in enumerate(zip(want, got)):
            if a is None or b is None:
                other = b if a is None else a
                assert other is None or not np.any(other.numpy()), (name, s.desc, k)
                continue
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-9, atol=1e-10, err_msg=f"{name} {s.desc} {k}")


def _mlp(lib, params, x, act):
    w1, b1, w2, b2 = params
    h = getattr(lib, act)(x @ w1.t() + b1) if act != "softplus" else lib.nn.functional.softplus(x @ w1.t() + b1)
    return h @ w2.t() + b2


def _params(lib, rng_state):
    rng = np.random.default_rng(rng_state)
    shapes = [(6, 3), (6,), (2, 6), (2,)]
    return [lib.tensor(rng.standard_normal(s) * 0.5, dtype=lib.float64, requires_grad=True) for s in shapes]


@pytest.mark.parametrize("act", ["tanh", "sigmoid", "relu", "exp"])
def test_hessian_vector_product_matches_torch(act):
    rng = np.random.default_rng(1)
    x_np, y_np = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    v_np = [rng.standard_normal(s) for s in [(6, 3), (6,), (2, 6), (2,)]]
    out = []
    for lib in (tl, torch):
        ps = _params(lib, 2)
        x, y = lib.tensor(x_np), lib.tensor(y_np)
        loss = ((_mlp(lib, ps, x, act) - y) ** 2).mean()
        gs = lib.autograd.grad(loss, ps, create_graph=True)
        dot = sum((g * lib.tensor(v)).sum() for g, v in zip(gs, v_np))
        hv = lib.autograd.grad(dot, ps)
        out.append([h.detach().numpy() for h in hv])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_gradient_penalty_matches_torch():
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((4, 3))
    out = []
    for lib in (tl, torch):
        ps = _params(lib, 4)
        x = lib.tensor(x_np, requires_grad=True)
        d = _mlp(lib, ps, x, "tanh").sum(dim=1)
        (gx,) = lib.autograd.grad(d.sum(), x, create_graph=True)
        penalty = ((gx.norm(2, dim=1) if lib is torch else tl.linalg.vector_norm(gx, 2, dim=1)) - 1) ** 2
        loss = d.mean() + 10 * penalty.mean()
        loss.backward()
        out.append([p.grad.numpy() for p in ps])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_second_derivative_of_a_network_in_its_input_matches_torch():
    # A physics-informed residual u''(t) + u(t) with u a tanh network of t.
    t_np = np.linspace(-1, 1, 7).reshape(-1, 1)
    out = []
    for lib in (tl, torch):
        rng = np.random.default_rng(5)
        w1 = lib.tensor(rng.standard_normal((8, 1)), requires_grad=True)
        b1 = lib.tensor(rng.standard_normal(8), requires_grad=True)
        w2 = lib.tensor(rng.standard_normal((1, 8)), requires_grad=True)
        t = lib.tensor(t_np, requires_grad=True)
        u = (t @ w1.t() + b1).tanh() @ w2.t()
        (du,) = lib.autograd.grad(u.sum(), t, create_graph=True)
        (ddu,) = lib.autograd.grad(du.sum(), t, create_graph=True)
        res = ((ddu + u) ** 2).mean()
        res.backward()
        out.append([ddu.detach().numpy(), w1.grad.numpy(), b1.grad.numpy(), w2.grad.numpy()])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_backward_with_create_graph_keeps_a_differentiable_grad():
    for lib in (tl, torch):
        x = lib.tensor([0.5, -1.5], dtype=lib.float64, requires_grad=True)
        (x.sin() * x).sum().backward(create_graph=True)
        g = x.grad
        assert g.requires_grad
        (h,) = lib.autograd.grad(g.sum(), x)
        if lib is tl:
            mine = h.numpy()
        else:
            np.testing.assert_allclose(mine, h.numpy(), rtol=1e-12)


def test_cross_entropy_double_backward_matches_torch():
    rng = np.random.default_rng(7)
    z_np, t_np = rng.standard_normal((4, 3)), np.array([0, 2, 1, 2])
    out = []
    for lib in (tl, torch):
        z = lib.tensor(z_np, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(z, lib.tensor(t_np))
        (g,) = lib.autograd.grad(loss, z, create_graph=True)
        (h,) = lib.autograd.grad((g * g).sum(), z)
        out.append(h.numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-8, atol=1e-12)


def test_an_op_without_a_differentiable_vjp_is_named():
    missing = sorted(n for n in OPINFOS if n not in DIFFERENTIABLE_VJPS)
    assert "lstm_scan" in missing and "max_pool" not in missing
    x = tl.tensor(np.arange(8.0, dtype=np.float32).reshape(1, 4, 2), requires_grad=True)
    y, _ = tl.nn.LSTM(2, 3, batch_first=True)(x * 2)
    with pytest.raises(AutogradError, match="lstm_scan"):
        tl.autograd.grad(y.sum(), x, create_graph=True)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(2, 3), stride=1, dilation=(1, 2))])
def test_max_pool_critic_gradient_penalty_matches_torch(kw):
    """A gradient penalty through max pooling (the winners' routing, differentiated in the weights)."""
    rng = np.random.default_rng(17)
    x_np = rng.standard_normal((2, 3, 9, 9))
    w_np = rng.standard_normal((4, 3, 3, 3)) * 0.3
    out = []
    for lib in (tl, torch):
        F = lib.nn.functional
        w = lib.tensor(w_np, requires_grad=True)
        x = lib.tensor(x_np, requires_grad=True)
        h = F.max_pool2d(F.conv2d(x, w, padding=1).tanh(), **kw)
        d = (h * h).sum(dim=(1, 2, 3))
        (gx,) = lib.autograd.grad(d.sum(), x, create_graph=True)
        loss = d.mean() + ((gx.reshape(2, -1) ** 2).sum(dim=1).sqrt() - 1).pow(2).mean()
        loss.backward()
        out.append((w.grad.numpy(), x.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


def test_conv_critic_gradient_penalty_matches_torch():
    # WGAN-GP: the penalty on the critic's input gradient, differentiated into the critic's weights.
    rng = np.random.default_rng(13)
    x_np = rng.standard_normal((2, 3, 8, 8))
    w1_np, w2_np = rng.standard_normal((4, 3, 3, 3)) * 0.3, rng.standard_normal((2, 4, 3, 3)) * 0.3
    out = []
    for lib in (tl, torch):
        F = lib.nn.functional
        w1 = lib.tensor(w1_np, requires_grad=True)
        w2 = lib.tensor(w2_np, requires_grad=True)
        b1 = lib.tensor(np.zeros(4), requires_grad=True)
        x = lib.tensor(x_np, requires_grad=True)
        h = F.conv2d(x, w1, b1, stride=2, padding=1).tanh()
        h = F.avg_pool2d(h, 2)
        d = F.conv2d(h, w2, padding=1).sum(dim=(1, 2, 3))
        (gx,) = lib.autograd.grad(d.sum(), x, create_graph=True)
        gp = ((gx.reshape(2, -1) ** 2).sum(dim=1).sqrt() - 1) ** 2
        loss = d.mean() + 10 * gp.mean()
        loss.backward()
        out.append([t.grad.numpy() for t in (w1, w2, b1)])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


@pytest.mark.cuda
def test_differentiable_vjps_on_cuda_match_the_cpu():
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(11)
    failures = []
    for name in OPS:
        info = OPINFOS[name]
        if "cuda" not in info.devices:
            continue
        for s in info.samples(rng)[:2]:
            diff = info.differentiable(len(s.inputs))
            res = []
            for dev in ("cpu", "cuda"):
                xs = [tl.tensor(np.asarray(a, dtype=np.float64), requires_grad=k in diff).to(dev).detach()
                      .requires_grad_(k in diff) for k, a in enumerate(s.inputs)]
                y = record(name, tuple(xs), dict(s.attrs))
                if not y.requires_grad:
                    break
                wrt = [xs[k] for k in diff]
                gs = tl.autograd.grad(y, wrt, tl.ones(tuple(y.shape), dtype=tl.float64).to(dev) * 0.5,
                                      create_graph=True, allow_unused=True)
                res.append([None if g is None else g.cpu().numpy() for g in gs])
            if len(res) == 2:
                for a, b in zip(*res):
                    if (a is None) != (b is None) or (a is not None and not np.allclose(a, b, rtol=1e-7, atol=1e-9)):
                        failures.append(f"{name} {s.desc}")
    assert not failures, failures


def _fns(lib):
    def f(x, y):
        return (x * y).tanh() * x.sum()

    def s(x):
        return (x.sin() * x * x).sum()
    return f, s


def test_autograd_functional_matches_torch():
    rng = np.random.default_rng(9)
    a, b, v = (rng.standard_normal(3) for _ in range(3))
    out = []
    for lib in (tl, torch):
        F = lib.autograd.functional
        f, s = _fns(lib)
        x, y, vv = lib.tensor(a), lib.tensor(b), lib.tensor(v)
        jx, jy = F.jacobian(f, (x, y))
        h = F.hessian(s, x)
        _, vj = F.vjp(f, (x, y), vv)
        _, jv = F.jvp(f, (x, y), (vv, vv))
        _, hv = F.hvp(s, x, vv)
        _, vh = F.vhp(s, x, vv)
        out.append([t.detach().numpy() for t in (jx, jy, h, vj[0], vj[1], jv, hv, vh)])
    for k, (p, q) in enumerate(zip(*out)):
        np.testing.assert_allclose(p, q, rtol=1e-9, atol=1e-12, err_msg=str(k))


@pytest.mark.parametrize("causal", [False, True])
def test_attention_double_backward_matches_torch(causal):
    rng = np.random.default_rng(17)
    q_np, k_np, v_np = (rng.standard_normal((2, 5, 4)) for _ in range(3))
    out = []
    for lib in (tl, torch):
        q, k, v = (lib.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np))
        o = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        (gq,) = lib.autograd.grad((o * o).sum(), q, create_graph=True)
        (gq.sin().sum() + (o ** 3).sum()).backward()
        out.append([t.grad.numpy() for t in (q, k, v)])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
