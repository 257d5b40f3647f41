"""torch as the oracle for the Module API: forward pre/post hooks, full backward (pre) hooks,
get_parameter/get_buffer, to(...) overloads, Sequential editing, ParameterList/ParameterDict."""

import numpy as np
import pytest

import torchlean as tl

torch = pytest.importorskip("torch")


def _pair():
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((4, 3)), rng.standard_normal(4)
    w2, b2 = rng.standard_normal((2, 4)), rng.standard_normal(2)
    nets = []
    for lib in (tl, torch):
        net = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2)).double()
        net.load_state_dict({"0.weight": lib.tensor(w1), "0.bias": lib.tensor(b1),
                             "2.weight": lib.tensor(w2), "2.bias": lib.tensor(b2)})
        nets.append(net)
    return nets


def test_forward_hooks_match_torch():
    res = []
    x_np = np.random.default_rng(1).standard_normal((5, 3))
    for lib, net in zip((tl, torch), _pair()):
        seen = []
        h1 = net[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        h2 = net[2].register_forward_hook(lambda m, args, out: out + 1)
        net[1].register_forward_hook(lambda m, args, out: seen.append(tuple(out.shape)))
        y = net(lib.tensor(x_np))
        h1.remove()
        h2.remove()
        z = net(lib.tensor(x_np))
        res.append((y.detach().numpy(), z.detach().numpy(), seen))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)
    assert res[0][2] == res[1][2]


def test_full_backward_hooks_match_torch():
    res = []
    x_np = np.random.default_rng(2).standard_normal((5, 3))
    for lib, net in zip((tl, torch), _pair()):
        log = {}

        def bw(m, gin, gout):
            log["gin"] = [g.detach().numpy().copy() for g in gin if g is not None]
            log["gout"] = [g.detach().numpy().copy() for g in gout]
            return tuple(g * 0.5 if g is not None else None for g in gin)

        net[2].register_full_backward_pre_hook(lambda m, gout: tuple(g * 3 for g in gout))
        net[2].register_full_backward_hook(bw)
        x = lib.tensor(x_np, requires_grad=True)
        (net(x) ** 2).sum().backward()
        res.append((x.grad.numpy(), log["gin"], log["gout"], net[0].weight.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-10)
    for a, b in zip(res[0][1] + res[0][2], res[1][1] + res[1][2]):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    np.testing.assert_allclose(res[0][3], res[1][3], rtol=1e-10)


def test_get_parameter_buffer_and_to_overloads():
    net = tl.nn.Sequential(tl.nn.Linear(3, 4), tl.nn.BatchNorm1d(4))
    assert net.get_parameter("0.weight") is net[0].weight
    assert net.get_buffer("1.running_mean") is net[1].running_mean
    with pytest.raises(AttributeError):
        net.get_parameter("0.nope")
    net.to(tl.float64)
    assert net[0].weight.dtype == tl.float64
    net.to("cpu", tl.float32)
    assert net[0].weight.dtype == tl.float32
    net.to(tl.ones(1, dtype=tl.float64))
    assert net[1].running_var.dtype == tl.float64
    net.half()
    assert net[0].weight.dtype == tl.float16


def test_sequential_editing_matches_torch():
    shapes = []
    for lib in (tl, torch):
        s = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU())
        s.append(lib.nn.Linear(3, 4))
        s.insert(1, lib.nn.Tanh())
        s.extend([lib.nn.ReLU()])
        popped = s.pop(0)
        s2 = s + lib.nn.Sequential(lib.nn.Identity())
        shapes.append(([type(m).__name__ for m in s2], type(popped).__name__, list(dict(s.named_children()))))
    assert shapes[0] == shapes[1]


def test_parameter_list_and_dict_match_torch():
    out = []
    for lib in (tl, torch):
        pl = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.zeros(3))])
        pl.append(lib.nn.Parameter(lib.ones(1)))
        pd = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2))})
        pd["b"] = lib.nn.Parameter(lib.zeros(2, 2))

        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.pl, self.pd = pl, pd

        m = M()
        out.append(([(n, tuple(p.shape)) for n, p in m.named_parameters()], len(pl), "b" in pd))
    assert out[0] == out[1]
