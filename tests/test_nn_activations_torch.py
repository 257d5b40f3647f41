"""Activation and similarity functionals and modules against PyTorch on the CPU: outputs and
input / parameter gradients in float64 (off the kinks), the kink conventions, stability at large
|x|, float32 agreement, module state_dicts, errors, and a CUDA-vs-CPU check."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import torchlean as tl
import torchlean.nn.activations as NA
import torchlean.nn.functional_activations as FA
from torchlean.errors import DomainError, DTypeError, ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = 1e-10


def t64(a, requires_grad=True):
    return tl.tensor(np.asarray(a, dtype=np.float64), dtype=tl.float64, requires_grad=requires_grad)


def th(a, requires_grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def host(x):
    if isinstance(x, np.ndarray):
        return x
    return x.numpy() if isinstance(x, tl.Tensor) else x.detach().numpy()


def close(a, b, tol=TOL, what=""):
    np.testing.assert_allclose(host(a), host(b), rtol=tol, atol=tol, err_msg=what)


def both(f_tl, f_th, arrays, tol=TOL, seed=0):
    """Same float64 arrays into both; compare outputs and, for a random cotangent, every input's
    gradient."""
    xs_tl = [t64(a) for a in arrays]
    xs_th = [th(a) for a in arrays]
    y_tl, y_th = f_tl(*xs_tl), f_th(*xs_th)
    assert tuple(y_tl.shape) == tuple(y_th.shape)
    assert y_tl.dtype == tl.float64
    close(y_tl, y_th, tol, "output")
    g = np.random.default_rng(seed).standard_normal(tuple(y_th.shape))
    y_tl.backward(t64(g, False))
    y_th.backward(torch.tensor(g))
    for i, (a, b) in enumerate(zip(xs_tl, xs_th)):
        close(a.grad, b.grad, tol, f"gradient of input {i}")
    return xs_tl, y_tl


def off_kinks(a, kinks, gap=1e-3):
    """Move entries within ``gap`` of a kink away from it."""
    a = np.array(a, dtype=np.float64)
    for k in kinks:
        near = np.abs(a - k) < gap
        a[near] = k + 2 * gap
    return a


# name, torchlean fn, torch fn, kinks
UNARY = [
    ("relu", FA.relu, TF.relu, [0]),
    ("relu6", FA.relu6, TF.relu6, [0, 6]),
    ("leaky_relu", lambda x: FA.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2), [0]),
    ("leaky_relu_default", FA.leaky_relu, TF.leaky_relu, [0]),
    ("rrelu_eval", lambda x: FA.rrelu(x, 0.1, 0.3), lambda x: TF.rrelu(x, 0.1, 0.3), [0]),
    ("elu", FA.elu, TF.elu, [0]),
    ("elu_alpha", lambda x: FA.elu(x, 0.7), lambda x: TF.elu(x, 0.7), [0]),
    ("selu", FA.selu, TF.selu, [0]),
    ("celu", lambda x: FA.celu(x, 1.7), lambda x: TF.celu(x, 1.7), [0]),
    ("gelu", FA.gelu, TF.gelu, []),
    ("gelu_tanh", lambda x: FA.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"), []),
    ("silu", FA.silu, TF.silu, []),
    ("mish", FA.mish, TF.mish, []),
    ("hardswish", FA.hardswish, TF.hardswish, [-3, 3]),
    ("hardsigmoid", FA.hardsigmoid, TF.hardsigmoid, [-3, 3]),
    ("hardtanh", FA.hardtanh, TF.hardtanh, [-1, 1]),
    ("hardtanh_bounds", lambda x: FA.hardtanh(x, -0.5, 2.0), lambda x: TF.hardtanh(x, -0.5, 2.0), [-0.5, 2]),
    ("hardshrink", FA.hardshrink, TF.hardshrink, [-0.5, 0.5]),
    ("hardshrink_l", lambda x: FA.hardshrink(x, 1.2), lambda x: TF.hardshrink(x, 1.2), [-1.2, 1.2]),
    ("softshrink", FA.softshrink, TF.softshrink, [-0.5, 0.5]),
    ("softshrink_l", lambda x: FA.softshrink(x, 0.9), lambda x: TF.softshrink(x, 0.9), [-0.9, 0.9]),
    ("tanhshrink", FA.tanhshrink, TF.tanhshrink, []),
    ("softsign", FA.softsign, TF.softsign, [0]),
    ("softplus", FA.softplus, TF.softplus, []),
    ("softplus_beta", lambda x: FA.softplus(x, 2.0, 3.0), lambda x: TF.softplus(x, 2.0, 3.0), [1.5]),
    ("softplus_beta_neg", lambda x: FA.softplus(x, -1.5), lambda x: TF.softplus(x, -1.5), []),
    ("threshold", lambda x: FA.threshold(x, 0.3, -2.0), lambda x: TF.threshold(x, 0.3, -2.0), [0.3]),
    ("logsigmoid", FA.logsigmoid, TF.logsigmoid, []),
    ("sigmoid", FA.sigmoid, torch.sigmoid, []),
    ("tanh", FA.tanh, torch.tanh, []),
]

# torch's celu and hardsigmoid backward use float32 constants (1/alpha, 1/6): ~3e-8 relative in float64
LOOSE = {"celu": 1e-7, "hardsigmoid": 1e-7}


@pytest.mark.parametrize("name,f_tl,f_th,kinks", UNARY, ids=[u[0] for u in UNARY])
def test_unary_matches_torch_off_kinks(name, f_tl, f_th, kinks, rng):
    x = off_kinks(rng.standard_normal((4, 7)) * 3.0, kinks)
    both(f_tl, f_th, [x], tol=LOOSE.get(name, TOL))


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=4), seed=st.integers(0, 2 ** 16))
def test_unary_random_shapes(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(tuple(shape)) * 4.0
    for name, f_tl, f_th, kinks in UNARY:
        both(f_tl, f_th, [off_kinks(x, kinks)], tol=LOOSE.get(name, TOL), seed=seed)


def _grad_at(f, pts, lib):
    if lib == "tl":
        x = t64(pts)
        f(x).sum().backward()
    else:
        x = th(pts)
        f(x).sum().backward()
    return host(x.grad)


# Gradients at the kinks: those that equal torch's, and the documented differences.
KINK_SAME = [
    (FA.relu, TF.relu, [0.0]),
    (FA.relu6, TF.relu6, [0.0, 6.0]),
    (FA.hardswish, TF.hardswish, [-3.0, 3.0]),
    (FA.hardtanh, TF.hardtanh, [-1.0, 1.0]),
    (FA.hardsigmoid, TF.hardsigmoid, [-3.0, 3.0]),
    (lambda x: FA.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2), [0.0]),
    (lambda x: FA.elu(x, 0.7), lambda x: TF.elu(x, 0.7), [0.0]),
    (FA.selu, TF.selu, [0.0]),
    (FA.celu, TF.celu, [0.0]),
    (FA.hardshrink, TF.hardshrink, [-0.5, 0.5]),
    (FA.softshrink, TF.softshrink, [-0.5, 0.5]),
    (lambda x: FA.threshold(x, 0.3, 1.0), lambda x: TF.threshold(x, 0.3, 1.0), [0.3]),
    (lambda x: FA.rrelu(x), lambda x: TF.rrelu(x), [0.0]),
    (FA.softsign, TF.softsign, [0.0]),
]


@pytest.mark.parametrize("i", range(len(KINK_SAME)))
def test_kink_gradients_equal_torch(i):
    f_tl, f_th, pts = KINK_SAME[i]
    close(_grad_at(f_tl, pts, "tl"), _grad_at(f_th, pts, "th"), 1e-12)


def test_kink_gradient_values():
    # hardswish = x * relu6(x + 3) / 6: clamp' is 0 at its bounds, so 0 at -3 and 1 at 3 (torch's too)
    close(_grad_at(FA.hardswish, [-3.0, 3.0], "tl"), np.array([0.0, 1.0]), 0)
    close(_grad_at(FA.relu, [0.0], "tl"), np.array([0.0]), 0)
    close(_grad_at(FA.hardtanh, [-1.0, 1.0], "tl"), np.array([0.0, 0.0]), 0)
    close(_grad_at(lambda v: FA.leaky_relu(v, 0.2), [0.0], "tl"), np.array([0.2]), 0)
    close(_grad_at(lambda v: FA.elu(v, 0.7), [0.0], "tl"), np.array([0.7]), 0)


def test_large_magnitudes_are_stable_float32():
    x = np.array([-1e4, -200.0, -90.0, -30.0, 0.0, 30.0, 90.0, 200.0, 1e4], dtype=np.float32)
    for f_tl, f_th in [(FA.logsigmoid, TF.logsigmoid), (FA.softplus, TF.softplus),
                       (lambda v: FA.softplus(v, 0.5, 40.0), lambda v: TF.softplus(v, 0.5, 40.0)),
                       (FA.mish, TF.mish), (FA.elu, TF.elu), (FA.selu, TF.selu), (FA.celu, TF.celu),
                       (FA.silu, TF.silu), (FA.gelu, TF.gelu), (FA.tanhshrink, TF.tanhshrink),
                       (FA.softsign, TF.softsign)]:
        a = tl.tensor(x, requires_grad=True)
        b = torch.tensor(x, requires_grad=True)
        ya, yb = f_tl(a), f_th(b)
        assert np.isfinite(host(ya)).all()
        np.testing.assert_allclose(host(ya), host(yb), rtol=1e-6, atol=1e-6)
        ya.sum().backward()
        yb.sum().backward()
        assert np.isfinite(host(a.grad)).all()
        np.testing.assert_allclose(host(a.grad), host(b.grad), rtol=1e-6, atol=1e-6)
    # values that the naive formulas lose: log(sigmoid(-200)) and softplus(-200)
    y = FA.logsigmoid(tl.tensor([-200.0, 200.0], dtype=tl.float64))
    np.testing.assert_allclose(y.numpy(), [-200.0, -np.exp(-200.0)], rtol=1e-6)
    sp = FA.softplus(tl.tensor([-200.0], dtype=tl.float64), threshold=1e9).item()
    assert sp == pytest.approx(np.exp(-200.0), rel=1e-5, abs=0)
    # a threshold above float32's exp range: torch's log1p(exp(beta x)) overflows to inf, ours stays x
    a = tl.tensor([200.0, 1e4], requires_grad=True)
    y = FA.softplus(a, 0.5, 1e9)
    np.testing.assert_allclose(y.numpy(), [200.0, 1e4], rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1.0, 1.0], rtol=1e-6)
    assert np.isinf(TF.softplus(torch.tensor([200.0]), 0.5, 1e9).numpy()).all()


def test_float32_agreement(rng):
    x = off_kinks(rng.standard_normal((5, 6)) * 3, [-3, -1, -0.5, 0, 0.5, 1, 3, 6]).astype(np.float32)
    for _name, f_tl, f_th, _k in UNARY:
        a = tl.tensor(x, requires_grad=True)
        b = torch.tensor(x, requires_grad=True)
        ya, yb = f_tl(a), f_th(b)
        assert ya.dtype == tl.float32
        np.testing.assert_allclose(host(ya), host(yb), rtol=1e-5, atol=1e-6, err_msg=_name)
        ya.sum().backward()
        yb.sum().backward()
        np.testing.assert_allclose(host(a.grad), host(b.grad), rtol=1e-5, atol=3e-6, err_msg=_name)


def test_relu_keeps_integers():
    y = FA.relu(tl.tensor([-2, 0, 3]))
    assert y.dtype == tl.int64 and y.tolist() == [0, 0, 3]
    y = FA.relu6(tl.tensor([-2, 0, 3, 9]))
    assert y.dtype == tl.int64 and y.tolist() == [0, 0, 3, 6]


def test_inplace_flag_has_no_effect(rng):
    x = rng.standard_normal((3, 4))
    for name in ["relu", "relu6", "leaky_relu", "elu", "selu", "celu", "silu", "mish", "hardswish",
                 "hardsigmoid", "hardtanh", "rrelu"]:
        a = t64(x, False)
        y = getattr(FA, name)(a, inplace=True)
        close(y, getattr(TF, name)(th(x, False)), 1e-12, name)
        np.testing.assert_array_equal(a.numpy(), x)
    a = t64(x, False)
    FA.threshold(a, 0.1, 5.0, inplace=True)
    np.testing.assert_array_equal(a.numpy(), x)


# ---- softmax family -------------------------------------------------------------------------

@pytest.mark.parametrize("fn", ["softmax", "softmin", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_softmax_family_dims(fn, dim, rng):
    x = rng.standard_normal((3, 4, 5)) * 3
    both(lambda v: getattr(FA, fn)(v, dim=dim), lambda v: getattr(TF, fn)(v, dim=dim), [x])


@pytest.mark.parametrize("fn", ["softmax", "softmin", "log_softmax"])
def test_softmax_family_dtype_and_implicit_dim(fn, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = getattr(FA, fn)(tl.tensor(x), dim=1, dtype=tl.float64)
    assert y.dtype == tl.float64
    close(y, getattr(TF, fn)(torch.tensor(x), dim=1, dtype=torch.float64), 1e-12)
    for shape in [(5,), (2, 3, 4), (2, 3), (2, 3, 4, 2)]:
        v = rng.standard_normal(shape)
        with pytest.warns(UserWarning, match="Implicit dimension"):
            y = getattr(FA, fn)(t64(v, False))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            close(y, getattr(TF, fn)(th(v, False)), 1e-12)
    close(getattr(FA, fn)(t64(0.7, False), dim=0), getattr(TF, fn)(th(0.7, False), dim=0), 1e-12)
    with pytest.raises(DTypeError):
        getattr(FA, fn)(tl.tensor([1, 2]), dim=0)
    with pytest.raises(ShapeError):
        getattr(FA, fn)(tl.ones(2, 3), dim=2)


def test_softmax_large_logits_float32():
    x = np.array([[1e4, 0.0, -1e4], [88.0, 89.0, 90.0]], dtype=np.float32)
    for fn in ["softmax", "log_softmax", "softmin"]:
        a = getattr(FA, fn)(tl.tensor(x), dim=1)
        assert np.isfinite(a.numpy()).all()
        np.testing.assert_allclose(a.numpy(), getattr(TF, fn)(torch.tensor(x), dim=1).numpy(), rtol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_glu(dim, rng):
    x = rng.standard_normal((4, 6, 2))
    both(lambda v: FA.glu(v, dim), lambda v: TF.glu(v, dim), [x])
    with pytest.raises(ShapeError):
        FA.glu(tl.ones(3))
    with pytest.raises(ShapeError):
        FA.glu(tl.tensor(1.0))


# ---- parametrized -------------------------------------------------------------------------

@pytest.mark.parametrize("shape,wn", [((3, 4), 4), ((3, 4), 1), ((2, 3, 5), 3), ((2, 3, 4, 4), 3), ((5,), 1),
                                      ((), 1)])
def test_prelu(shape, wn, rng):
    x = off_kinks(rng.standard_normal(shape), [0])
    w = rng.uniform(-0.5, 0.8, wn)
    both(FA.prelu, TF.prelu, [x, w])


def test_prelu_errors():
    with pytest.raises(ShapeError):
        FA.prelu(tl.ones(3, 4), tl.ones(3))
    with pytest.raises(ShapeError):
        FA.prelu(tl.ones(2, 3), tl.ones(3, 1))


def test_prelu_module_state_dict_and_grads(rng):
    m_th = torch.nn.PReLU(3, init=0.1).double()
    m = NA.PReLU(3, init=0.1)
    np.testing.assert_allclose(m.weight.numpy(), np.full(3, 0.1, np.float32))
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in m_th.state_dict().items()} == {"weight": (3,)}
    with torch.no_grad():
        m_th.weight.copy_(torch.tensor([0.3, -0.2, 0.05], dtype=torch.float64))
    m.to(dtype=tl.float64)
    m.load_state_dict({k: v.detach().numpy() for k, v in m_th.state_dict().items()})
    x = off_kinks(rng.standard_normal((2, 3, 4)), [0])
    both(m, m_th, [x])
    close(m.weight.grad, m_th.weight.grad, TOL, "weight gradient")
    assert NA.PReLU().weight.shape == (1,) and NA.PReLU().weight.item() == 0.25
    assert "num_parameters=3" in repr(m)


def test_rrelu_training_draws_slopes(rng):
    x = -np.abs(rng.standard_normal(4000)) - 0.1
    tl.manual_seed(7)
    a = t64(x)
    y = FA.rrelu(a, 0.1, 0.3, training=True)
    slopes = y.numpy() / x
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 0.005          # U(0.1, 0.3): mean 0.2, sd 0.058 / sqrt(4000)
    assert abs(slopes.std() - 0.2 / math.sqrt(12)) < 0.005
    y.sum().backward()
    close(a.grad, slopes, 1e-12)                      # the gradient is each element's slope
    tl.manual_seed(7)
    np.testing.assert_array_equal(FA.rrelu(t64(x, False), 0.1, 0.3, training=True).numpy(), y.numpy())
    pos = np.abs(x)
    np.testing.assert_array_equal(FA.rrelu(t64(pos, False), training=True).numpy(), pos)
    m = NA.RReLU(0.1, 0.3)
    m.eval()
    close(m(t64(x, False)), x * 0.2, 1e-12)
    m.train()
    assert not np.allclose(m(t64(x, False)).numpy(), x * 0.2)
    with pytest.raises(DomainError):
        FA.rrelu(tl.ones(2), 0.5, 0.1)


# ---- similarity ---------------------------------------------------------------------------

@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1), (0.5, 1)])
def test_normalize(p, dim, rng):
    x = rng.standard_normal((3, 4, 2))
    both(lambda v: FA.normalize(v, p, dim), lambda v: TF.normalize(v, p, dim), [x], tol=1e-9)
    # a zero row: the clamped norm (eps) divides, the result is 0 with a finite gradient
    z = np.zeros((2, 3))
    z[1] = [1.0, 2.0, 2.0]
    both(lambda v: FA.normalize(v, dim=1), lambda v: TF.normalize(v, dim=1), [z])


@pytest.mark.parametrize("s1,s2,dim", [((4, 5), (4, 5), 1), ((3, 4), (3, 4), 0), ((2, 1, 3), (4, 3), -1),
                                       ((5,), (5,), 0), ((2, 3, 4), (2, 3, 4), 2)])
def test_cosine_similarity(s1, s2, dim, rng):
    a, b = rng.standard_normal(s1), rng.standard_normal(s2)
    both(lambda u, v: FA.cosine_similarity(u, v, dim), lambda u, v: TF.cosine_similarity(u, v, dim), [a, b])


def test_cosine_similarity_zero_vector_and_module(rng):
    a, b = np.zeros((2, 3)), rng.standard_normal((2, 3))
    a[0] = [1.0, -2.0, 0.5]
    both(lambda u, v: FA.cosine_similarity(u, v), lambda u, v: TF.cosine_similarity(u, v), [a, b], tol=1e-6)
    # 0 < ||x1|| < eps: the clamp changes the value but not the gradient path (torch's no-grad clamp)
    a = np.array([[1e-3, -2e-3, 5e-4], [1.0, 2.0, 3.0]])
    b = rng.standard_normal((2, 3))
    both(lambda u, v: FA.cosine_similarity(u, v, eps=1e-2), lambda u, v: TF.cosine_similarity(u, v, eps=1e-2),
         [a, b], tol=1e-9)
    both(lambda u: FA.normalize(u, eps=1e-2), lambda u: TF.normalize(u, eps=1e-2), [a], tol=1e-9)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    both(NA.CosineSimilarity(dim=0, eps=1e-6), torch.nn.CosineSimilarity(dim=0, eps=1e-6), [a, b])


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.7, math.inf])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("s1,s2", [((4, 5), (4, 5)), ((5,), (5,)), ((3, 1, 4), (2, 4)), ((4,), (3, 4))])
def test_pairwise_distance(p, keepdim, s1, s2, rng):
    a, b = rng.standard_normal(s1), rng.standard_normal(s2)
    both(lambda u, v: FA.pairwise_distance(u, v, p, keepdim=keepdim),
         lambda u, v: TF.pairwise_distance(u, v, p, keepdim=keepdim), [a, b], tol=1e-9)


def test_pairwise_distance_module_and_scalars(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    both(NA.PairwiseDistance(p=1.0, eps=1e-3, keepdim=True), torch.nn.PairwiseDistance(1.0, 1e-3, True), [a, b])
    both(FA.pairwise_distance, TF.pairwise_distance, [np.array(1.5), np.array(-0.5)])


# ---- modules --------------------------------------------------------------------------------

MODULES = [
    ("ReLU", {}, [0]), ("ReLU6", {}, [0, 6]), ("LeakyReLU", {"negative_slope": 0.3}, [0]),
    ("RReLU", {"lower": 0.2, "upper": 0.4}, [0]), ("ELU", {"alpha": 0.5}, [0]), ("SELU", {}, [0]),
    ("CELU", {"alpha": 2.0}, [0]), ("GELU", {"approximate": "tanh"}, []), ("GELU", {}, []), ("SiLU", {}, []),
    ("Mish", {}, []), ("Hardswish", {}, [-3, 3]), ("Hardsigmoid", {}, [-3, 3]),
    ("Hardtanh", {"min_val": -2.0, "max_val": 0.5}, [-2, 0.5]), ("Hardshrink", {"lambd": 0.3}, [-0.3, 0.3]),
    ("Softshrink", {"lambd": 0.3}, [-0.3, 0.3]), ("Tanhshrink", {}, []), ("Softsign", {}, [0]),
    ("Softplus", {"beta": 2.0, "threshold": 4.0}, [2.0]), ("Threshold", {"threshold": 0.1, "value": 20.0}, [0.1]),
    ("LogSigmoid", {}, []), ("Sigmoid", {}, []), ("Tanh", {}, []), ("Softmax", {"dim": 1}, []),
    ("Softmin", {"dim": 0}, []), ("LogSoftmax", {"dim": -1}, []), ("Softmax2d", {}, []), ("GLU", {"dim": 1}, []),
]


@pytest.mark.parametrize("name,kw,kinks", MODULES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MODULES)])
def test_modules_match_torch(name, kw, kinks, rng):
    m_tl, m_th = getattr(NA, name)(**kw), getattr(torch.nn, name)(**kw)
    m_tl.eval()
    m_th.eval()
    x = off_kinks(rng.standard_normal((2, 4, 3, 2)) * 3, kinks)
    both(m_tl, m_th, [x], tol=LOOSE.get(name.lower(), TOL))
    assert dict(m_tl.state_dict()) == {} and dict(m_th.state_dict()) == {}
    for k, v in kw.items():
        attr = {"approximate": "approximate"}.get(k, k)
        assert getattr(m_tl, attr) == getattr(m_th, attr)


def test_module_reprs():
    assert repr(NA.LeakyReLU(0.2)) == repr(torch.nn.LeakyReLU(0.2))
    assert repr(NA.ReLU(inplace=True)) == repr(torch.nn.ReLU(inplace=True))
    assert repr(NA.Softplus(2.0, 5.0)) == repr(torch.nn.Softplus(2.0, 5.0))
    assert repr(NA.GELU("tanh")) == repr(torch.nn.GELU("tanh"))
    assert repr(NA.Hardtanh(-2.0, 2.0)) == repr(torch.nn.Hardtanh(-2.0, 2.0))
    assert repr(NA.Softmax(dim=1)) == repr(torch.nn.Softmax(dim=1))


def test_softmax2d_rejects_2d():
    with pytest.raises(ShapeError):
        NA.Softmax2d()(tl.ones(3, 4))


# ---- errors ---------------------------------------------------------------------------------

def test_errors():
    x = tl.ones(3)
    with pytest.raises(DomainError):
        FA.hardtanh(x, 2.0, 1.0)
    with pytest.raises(DomainError):
        NA.Hardtanh(2.0, 1.0)
    with pytest.raises(DomainError):
        FA.softshrink(x, -1.0)
    with pytest.raises(DomainError):
        FA.gelu(x, approximate="erf")
    with pytest.raises(DomainError):
        FA.softplus(x, beta=0)
    with pytest.raises(DomainError):
        FA.celu(x, alpha=0.0)
    with pytest.raises(DTypeError):
        FA.elu(tl.tensor([1, 2]))
    with pytest.raises(DTypeError):
        FA.cosine_similarity(tl.tensor([1, 2]), tl.tensor([1, 2]), dim=0)
    with pytest.raises(ShapeError):
        FA.cosine_similarity(tl.ones(2, 3), tl.ones(4, 3))
    with pytest.raises(ShapeError):
        FA.normalize(tl.ones(3), dim=1)


# ---- CUDA -----------------------------------------------------------------------------------

@pytest.mark.cuda
def test_cuda_matches_cpu():
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(3)
    x = off_kinks(rng.standard_normal((4, 6)) * 4, [-3, -1, -0.5, 0, 0.5, 1, 3, 6]).astype(np.float32)
    w = np.array([0.1, -0.2, 0.3, 0.05, 0.2, 0.4], np.float32)
    cases = [FA.elu, FA.selu, FA.mish, FA.hardswish, FA.softplus, FA.logsigmoid, FA.softshrink, FA.relu6,
             lambda v: FA.leaky_relu(v, 0.2), lambda v: FA.softmin(v, dim=0), lambda v: FA.glu(v, 1),
             lambda v: FA.normalize(v, dim=1), lambda v: FA.pairwise_distance(v, v.flip(0)),
             lambda v: FA.cosine_similarity(v, v.flip(1), dim=1)]
    for f in cases:
        outs = []
        for dev in ("cpu", "cuda"):
            a = tl.tensor(x, device=dev, requires_grad=True)
            y = f(a)
            y.sum().backward()
            outs.append((y.cpu().numpy(), a.grad.cpu().numpy()))
        np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-5, atol=1e-6)
    a = tl.tensor(x, device="cuda", requires_grad=True)
    y = FA.prelu(a, tl.tensor(w, device="cuda"))
    np.testing.assert_allclose(y.cpu().numpy(), FA.prelu(tl.tensor(x), tl.tensor(w)).numpy(), rtol=1e-6)
