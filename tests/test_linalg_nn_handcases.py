"""Hand-computed cases of the linalg and nn families (both the fast path and the spec)."""

import numpy as np
import pytest

from torchlean.autograd import Tape
from torchlean.autograd.tape import run_op
from torchlean.errors import IndexRangeError, ShapeError
from torchlean.spec import SPEC


def _fwd(name, *xs, dtype=np.float64, **attrs):
    """(fast-path value, spec value) of op ``name``."""
    y, _ = run_op(name, [np.asarray(x, dtype=dtype) for x in xs], attrs, fast=True)
    return y, SPEC[name].forward(*[np.asarray(x, dtype=np.float64) for x in xs], **attrs)


def _grads(name, *xs, g=None, fast=True, **attrs):
    t = Tape(fast_kernels=fast)
    ids = [t.leaf(np.asarray(x, dtype=np.float64)) for x in xs]
    out = t.op(name, *ids, **attrs)
    grads = t.backward(out, seed=None if g is None else np.asarray(g, dtype=np.float64))
    return t.value(out), [grads[i] for i in ids]


# ---- matmul ---------------------------------------------------------------------------------

def test_matmul_1d_dot_is_0d():
    for fast in (True, False):
        y, (ga, gb) = _grads("matmul", [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], fast=fast)
        assert isinstance(y, np.ndarray) and y.shape == ()
        assert float(y) == 32.0
        assert ga.tolist() == [4.0, 5.0, 6.0] and gb.tolist() == [1.0, 2.0, 3.0]


def test_matmul_1d_at_2d():
    a = np.array([1.0, -1.0])
    b = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y, ys = _fwd("matmul", a, b)
    assert y.tolist() == [-3.0, -3.0, -3.0] and ys.tolist() == [-3.0, -3.0, -3.0]
    _, (ga, gb) = _grads("matmul", a, b, g=[1.0, 0.0, 2.0])
    assert ga.tolist() == [7.0, 16.0]                 # b @ g
    assert gb.tolist() == [[1.0, 0.0, 2.0], [-1.0, 0.0, -2.0]]   # outer(a, g)


def test_matmul_batched_broadcast_against_numpy(rng):
    a = rng.standard_normal((2, 1, 3, 4))
    b = rng.standard_normal((5, 4, 2))
    want = np.matmul(a, b)
    assert want.shape == (2, 5, 3, 2)
    y, ys = _fwd("matmul", a, b)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ys, want, rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(want.shape)
    for fast in (True, False):
        _, (ga, gb) = _grads("matmul", a, b, g=g, fast=fast)
        # The cotangent is summed over the broadcast batch axes back to each operand's shape.
        np.testing.assert_allclose(ga, np.matmul(g, np.swapaxes(b, -1, -2)).sum(axis=1, keepdims=True),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gb, np.matmul(np.swapaxes(a, -1, -2), g).sum(axis=0), rtol=1e-12, atol=1e-12)


def test_matmul_shape_error_names_op_and_shapes():
    with pytest.raises(ShapeError, match=r"matmul: shapes \(2, 3\) and \(4, 5\): inner dimensions 3 and 4 differ"):
        run_op("matmul", [np.ones((2, 3)), np.ones((4, 5))], {})


def test_linear_hand_values():
    w = np.array([[1.0, 2.0], [0.0, -1.0], [3.0, 1.0]])
    b = np.array([0.5, 0.0, -1.0])
    x = np.array([[1.0, 1.0], [2.0, 0.0]])
    for fast in (True, False):
        y, (gw, gb, gx) = _grads("linear", w, b, x, fast=fast)
        assert y.tolist() == [[3.5, -1.0, 3.0], [2.5, 0.0, 5.0]]
        assert gb.tolist() == [2.0, 2.0, 2.0]
        assert gw.tolist() == [[3.0, 1.0]] * 3
        assert gx.tolist() == [[4.0, 2.0]] * 2


# ---- softmax family -------------------------------------------------------------------------

def test_log_softmax_stable_at_large_logits():
    x = np.array([[1000.0, 0.0, -1000.0], [1000.0, 1000.0, 1000.0]])
    for dtype in (np.float32, np.float64):
        y, ys = _fwd("log_softmax", x, dtype=dtype)
        assert np.all(np.isfinite(y)) and np.all(np.isfinite(ys))
        np.testing.assert_allclose(y[0], [0.0, -1000.0, -2000.0], rtol=1e-6)
        np.testing.assert_allclose(y[1], [-np.log(3.0)] * 3, rtol=1e-6)
    _, (gx,) = _grads("log_softmax", x, g=np.ones_like(x))
    assert np.all(np.isfinite(gx))
    np.testing.assert_allclose(gx[0], [-2.0, 1.0, 1.0], atol=1e-12)   # 1 - 3 * softmax


def test_hard_masked_softmax_fully_blocked_row():
    x = np.array([[1.0, 2.0, 3.0], [5.0, 6.0, 7.0], [0.0, 0.0, 4.0]])
    mask = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0]])
    for fast in (True, False):
        y, (gx,) = _grads("hard_masked_softmax", x, g=np.arange(9.0).reshape(3, 3), fast=fast, mask=mask)
        e = np.exp([1.0 - 3.0, 0.0])
        np.testing.assert_allclose(y[0], [e[0] / e.sum(), 0.0, e[1] / e.sum()], rtol=1e-12)
        assert y[1].tolist() == [0.0, 0.0, 0.0] and gx[1].tolist() == [0.0, 0.0, 0.0]
        np.testing.assert_allclose(y[2], [0.5, 0.5, 0.0], rtol=1e-12)
        assert y[0, 1] == 0.0 and y[2, 2] == 0.0 and gx[0, 1] == 0.0 and gx[2, 2] == 0.0


# ---- losses ---------------------------------------------------------------------------------

def test_cross_entropy_ignore_index_and_weights_against_torch(rng):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = rng.standard_normal((6, 4))
    target = np.array([0, 3, -100, 2, 1, 3])
    weight = np.array([1.0, 0.5, 2.0, 3.0])
    for reduction in ("mean", "sum", "none"):
        for smoothing in (0.0, 0.2):
            attrs = dict(target=target, weight=weight, reduction=reduction, label_smoothing=smoothing)
            xt = torch.tensor(x, requires_grad=True)
            yt = F.cross_entropy(xt, torch.tensor(target), weight=torch.tensor(weight),
                                 reduction=reduction, label_smoothing=smoothing)
            g = np.ones(yt.shape)
            (gt,) = torch.autograd.grad(yt, xt, torch.tensor(g))
            for fast in (True, False):
                y, (gx,) = _grads("cross_entropy", x, g=g, fast=fast, **attrs)
                np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-12, atol=1e-12)
                np.testing.assert_allclose(gx, gt.numpy(), rtol=1e-12, atol=1e-12)
    # The ignored row gets no gradient.
    _, (gx,) = _grads("cross_entropy", x, target=target, weight=weight)
    assert gx[2].tolist() == [0.0] * 4


def test_cross_entropy_hand_value():
    x = np.array([[0.0, 0.0], [np.log(3.0), 0.0]])
    y, ys = _fwd("cross_entropy", x, target=np.array([0, 0]))
    want = (np.log(2.0) + np.log(4.0 / 3.0)) / 2
    np.testing.assert_allclose([float(y), float(ys)], [want, want], rtol=1e-12)


def test_cross_entropy_bad_target_names_value_and_classes():
    with pytest.raises(IndexRangeError, match=r"cross_entropy: target 5 is out of range \[0, 3\) for 3 classes"):
        run_op("cross_entropy", [np.ones((2, 3))], {"target": np.array([0, 5])})


def test_mse_loss_hand_value():
    for fast in (True, False):
        y, (ga, gb) = _grads("mse_loss", [1.0, 2.0], [0.0, 4.0], fast=fast)
        assert float(y) == 2.5
        assert ga.tolist() == [1.0, -2.0] and gb.tolist() == [-1.0, 2.0]


# ---- dropout --------------------------------------------------------------------------------

def _dropout(x, p, seed, counter, dtype=np.float32):
    y, _ = run_op("dropout", [np.asarray(x, dtype=dtype)], {"p": p, "seed": seed, "counter": counter}, fast=True)
    return y


def test_dropout_same_seed_same_mask_different_counter_different_mask():
    x = np.ones((64, 64))
    a = _dropout(x, 0.5, seed=3, counter=0)
    b = _dropout(x, 0.5, seed=3, counter=0)
    c = _dropout(x, 0.5, seed=3, counter=1)
    d = _dropout(x, 0.5, seed=4, counter=0)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, d)
    assert set(np.unique(a).tolist()) == {0.0, 2.0}
    # The spec draws the same mask (float64 values, same generator).
    np.testing.assert_array_equal(a, SPEC["dropout"].forward(x, p=0.5, seed=3, counter=0))
    np.testing.assert_array_equal(_dropout(x, 0.5, 3, 0, np.float64), a)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_mask_mean_is_keep_probability(p):
    y = _dropout(np.ones(200_000), p, seed=11, counter=2)
    kept = (y != 0).mean()
    assert abs(kept - (1 - p)) < 5e-3
    assert abs(y.mean() - 1.0) < 2e-2          # the 1/(1-p) scale keeps the expectation
    np.testing.assert_allclose(y[y != 0], 1.0 / (1 - p), rtol=1e-6)


def test_dropout_p_zero_is_identity_and_gradient_uses_the_mask():
    x = np.arange(6.0)
    assert _dropout(x, 0.0, 1, 1, np.float64).tolist() == x.tolist()
    y, (gx,) = _grads("dropout", np.ones(1000), p=0.25, seed=5, counter=9)
    np.testing.assert_array_equal(gx, y)       # d(x * m)/dx = m, and y = 1 * m here
