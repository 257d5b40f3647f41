"""Inference forms of runtime rules (``Rule.infer``): the forward's value without what only the
backward needs, used where nothing will differentiate the result (eager ops with no input requiring
grad or under no_grad, ``Program.infer``, compiled calls under no_grad). Each must equal its
forward bit for bit; ``torchlean check`` compares the two on every sample (the ``infer`` rows)."""

import dataclasses

import numpy as np
import pytest

import torchlean as tl
from torchlean import ir
from torchlean.autograd import dispatch
from torchlean.autograd.rules import RULES
from torchlean.autograd.rules.registry import INFER
from torchlean.errors import AutogradError
from torchlean.spec import SPEC
from torchlean.testing.checks import run_checks


def test_every_inference_form_passes_its_check_and_a_wrong_one_is_named(monkeypatch):
    assert "max_pool" in INFER
    for name in sorted(INFER):
        rows = [r for r in run_checks("cpu", pattern=name) if r.op == name and r.check.endswith("infer")]
        assert rows and all(r.passed for r in rows), name
    rule = RULES["max_pool"]
    bad = dataclasses.replace(rule, infer=lambda K, x, **a: rule.infer(K, x, **a) * np.float32(1.0001))
    monkeypatch.setitem(RULES, "max_pool", bad)
    monkeypatch.setattr(dispatch, "DISPATCH", {})
    rows = [r for r in run_checks("cpu", pattern="max_pool") if r.op == "max_pool" and r.check == "infer"]
    assert rows and not any(r.passed for r in rows)
    assert all(r.abs_err > 0 for r in rows)


def _pool_input(rng):
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    x[0, 0, :3, :3] = 1.5          # ties inside one window
    x[0, 1, 2, 2] = np.nan         # NaN wins its windows
    x[1, 2, :, 0] = -np.inf
    return x


def test_eager_max_pool_without_grad_equals_the_recorded_forward(rng):
    x = _pool_input(rng)
    F = tl.nn.functional
    xt = tl.tensor(x, requires_grad=True)
    y = F.max_pool2d(xt, 3, 2, 1)
    with tl.no_grad():
        y_ng = F.max_pool2d(xt, 3, 2, 1)
    y_const = F.max_pool2d(tl.tensor(x), 3, 2, 1)
    for other in (y_ng, y_const):
        assert np.array_equal(y.detach().numpy(), other.numpy(), equal_nan=True)
        assert not other.requires_grad
    # the recorded forward kept its winners: the gradient is the meaning's first-winner routing
    y.sum().backward()
    attrs = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1))
    want = SPEC["max_pool"].vjp(np.ones(y.shape), x.astype(np.float64), **attrs)[0]
    assert np.array_equal(xt.grad.numpy(), want)
    assert xt.grad[0, 0, :3, :3].numpy().sum() > 0


def test_program_infer_equals_a_call_and_refuses_a_backward(rng):
    g = ir.Graph([ir.Node(0, "input", (), (2, 3, 9, 8), {"index": 0}),
                  ir.Node(1, "max_pool", (0,), (2, 3, 5, 4),
                          {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "dilation": (1, 1)}),
                  ir.Node(2, "sum", (1,), ())])
    g.outputs = (1,)
    prog = ir.compile(g, device="cpu")
    x = _pool_input(rng)
    ya = np.array(prog(x))
    yi = np.array(prog.infer(x))
    assert np.array_equal(ya, yi, equal_nan=True)
    with pytest.raises(AutogradError, match="Program.infer"):
        prog.backward()
    prog(x)
    grads = prog.backward()
    assert grads[("input", 0)].shape == x.shape


def test_compiled_module_under_no_grad_uses_the_inference_form_and_matches_eager(rng):
    nn = tl.nn
    tl.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2, 1), nn.Flatten(),
                      nn.Linear(4 * 5 * 4, 2))
    x = tl.tensor(rng.standard_normal((2, 3, 9, 8)).astype(np.float32))
    cm = tl.compile(m)
    with tl.no_grad():
        want = m(x).numpy()
        got = cm(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # with gradients the compiled call still differentiates (its winners were kept)
    out = cm(x).sum()
    out.backward()
    assert m[0].weight.grad is not None and np.isfinite(m[0].weight.grad.numpy()).all()
