"""torchlean.distributions against torch.distributions on the same inputs: log_prob, entropy, moments,
cdf/icdf, KL and gradients exactly (float64); sampling by statistics over many draws."""

import warnings

import numpy as np
import pytest

import torchlean as tl
from torchlean import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

RNG = np.random.default_rng(0)


def both(a, requires_grad=False):
    a = np.asarray(a, dtype=np.float64)
    return (tl.tensor(a, dtype=tl.float64, requires_grad=requires_grad),
            torch.tensor(a, dtype=torch.float64, requires_grad=requires_grad))


def close(x, y, tol=1e-9):
    xv = x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)
    np.testing.assert_allclose(xv, y.detach().numpy(), rtol=tol, atol=tol)


def pos(*shape):
    return RNG.uniform(0.5, 3.0, shape)


# name, builder(args) -> dist for both libs, raw args, value generator
CASES = {
    "Normal": (lambda m, a, b: m.Normal(a, b), [RNG.normal(size=(3,)), pos(3)], lambda: RNG.normal(size=(4, 3))),
    "Laplace": (lambda m, a, b: m.Laplace(a, b), [RNG.normal(size=(3,)), pos(3)], lambda: RNG.normal(size=(4, 3))),
    "Exponential": (lambda m, r: m.Exponential(r), [pos(3)], lambda: RNG.uniform(0.1, 3, (4, 3))),
    "Uniform": (lambda m, lo, hi: m.Uniform(lo, hi), [np.zeros(3) - 1, pos(3)], lambda: RNG.uniform(-0.9, 0.4, (4, 3))),
    "Gamma": (lambda m, c, r: m.Gamma(c, r), [pos(3), pos(3)], lambda: RNG.uniform(0.1, 3, (4, 3))),
    "Beta": (lambda m, a, b: m.Beta(a, b), [pos(3), pos(3)], lambda: RNG.uniform(0.05, 0.95, (4, 3))),
    "LogNormal": (lambda m, a, b: m.LogNormal(a, b), [RNG.normal(size=(3,)), pos(3) / 3],
                  lambda: RNG.uniform(0.1, 4, (4, 3))),
    "Cauchy": (lambda m, a, b: m.Cauchy(a, b), [RNG.normal(size=(3,)), pos(3)], lambda: RNG.normal(size=(4, 3)) * 3),
    "HalfNormal": (lambda m, s: m.HalfNormal(s), [pos(3)], lambda: RNG.uniform(0.0, 4, (4, 3))),
    "StudentT": (lambda m, df, a, b: m.StudentT(df, a, b), [RNG.uniform(5, 9, 3), RNG.normal(size=(3,)), pos(3)],
                 lambda: RNG.normal(size=(4, 3)) * 2),
    "Chi2": (lambda m, df: m.Chi2(df), [pos(3) * 2], lambda: RNG.uniform(0.1, 5, (4, 3))),
}
NO_CDF = ("Gamma", "Beta", "StudentT", "Chi2")


@pytest.mark.parametrize("name", list(CASES))
def test_univariate_values_and_gradients(name):
    make, args, gen = CASES[name]
    tl_args, th_args = zip(*[both(a, requires_grad=True) for a in args])
    p, q = make(D, *tl_args), make(TD, *th_args)
    assert tuple(p.batch_shape) == tuple(q.batch_shape) and tuple(p.event_shape) == tuple(q.event_shape)
    v_tl, v_th = both(gen())
    lp, lq = p.log_prob(v_tl), q.log_prob(v_th)
    close(lp, lq)
    close(p.entropy(), q.entropy())
    for attr in ("mean", "variance", "stddev", "mode"):
        close(getattr(p, attr), getattr(q, attr))
    if name not in NO_CDF:
        close(p.cdf(v_tl), q.cdf(v_th))
        u_tl, u_th = both(RNG.uniform(0.05, 0.95, (4, 3)))
        close(p.icdf(u_tl), q.icdf(u_th))
    (lp.sum() + p.entropy().sum()).backward()
    (lq.sum() + q.entropy().sum()).backward()
    for a, b in zip(tl_args, th_args):
        close(a.grad, b.grad, 1e-7)


@pytest.mark.parametrize("name", list(CASES))
def test_sampling_statistics(name):
    make, args, _ = CASES[name]
    tl.manual_seed(1)
    p = make(D, *[tl.tensor(np.asarray(a), dtype=tl.float64) for a in args])
    s = p.sample((20000,))
    assert tuple(s.shape) == (20000, 3)
    if name == "Cauchy":            # no moments: the quartiles against icdf
        for q in (0.25, 0.5, 0.75):
            np.testing.assert_allclose(np.quantile(s.numpy(), q, axis=0),
                                       p.icdf(tl.full((3,), q, dtype=tl.float64)).numpy(), rtol=0.05, atol=0.05)
    else:
        m, v = s.numpy().mean(0), s.numpy().var(0)
        np.testing.assert_allclose(m, p.mean.numpy(), rtol=0.05, atol=0.03)
        np.testing.assert_allclose(v, p.variance.numpy(), rtol=0.1, atol=0.03)
    assert bool(p.support.check(s).all())
    tl.manual_seed(1)
    again = make(D, *[tl.tensor(np.asarray(a), dtype=tl.float64) for a in args]).sample((20000,))
    assert np.array_equal(again.numpy(), s.numpy())


def test_rsample_is_differentiable_like_torch():
    # Normal: d/dloc mean(loc + eps*scale) = 1, d/dscale = mean(eps); checked against the draws themselves.
    loc, scale = tl.tensor([0.5, -1.0], requires_grad=True), tl.tensor([2.0, 0.5], requires_grad=True)
    x = D.Normal(loc, scale).rsample((1000,))
    x.sum().backward()
    eps = (x.detach() - loc.detach()) / scale.detach()
    np.testing.assert_allclose(loc.grad.numpy(), [1000, 1000])
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0).numpy(), rtol=1e-4)
    assert D.Normal(0.0, 1.0).has_rsample and not D.Categorical(tl.ones(2)).has_rsample


@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_categorical(kind):
    raw = RNG.uniform(0.1, 1.0, (2, 4)) if kind == "probs" else RNG.normal(size=(2, 4))
    a, b = both(raw, requires_grad=True)
    p, q = D.Categorical(**{kind: a}), TD.Categorical(**{kind: b})
    close(p.probs, q.probs)
    close(p.logits, q.logits)
    assert tuple(p.batch_shape) == (2,) and tuple(p.event_shape) == ()
    val = [[0, 3], [2, 1], [1, 1]]
    lp, lq = p.log_prob(tl.tensor(val)), q.log_prob(torch.tensor(val))
    close(lp, lq)
    close(p.entropy(), q.entropy())
    (lp.sum() + p.entropy().sum()).backward()
    (lq.sum() + q.entropy().sum()).backward()
    close(a.grad, b.grad)
    assert p.mode.tolist() == q.mode.tolist()
    assert p.enumerate_support().tolist() == q.enumerate_support().tolist()
    assert np.isnan(p.mean.numpy()).all() and tuple(p.mean.shape) == (2,)


def test_categorical_sampling_and_reinforce_calls():
    tl.manual_seed(0)
    probs = tl.tensor([0.1, 0.2, 0.7])
    m = D.Categorical(probs)
    action = m.sample()
    assert tuple(action.shape) == () and action.dtype == tl.int64 and isinstance(action.item(), int)
    assert np.isclose(m.log_prob(action).item(), np.log(probs.numpy()[action.item()]), atol=1e-6)
    s = m.sample((30000,)).numpy()
    np.testing.assert_allclose(np.bincount(s, minlength=3) / s.size, [0.1, 0.2, 0.7], atol=0.01)
    batched = D.Categorical(logits=tl.zeros(5, 3)).sample((7,))
    assert tuple(batched.shape) == (7, 5)


def test_bernoulli_and_onehot():
    for kind, raw in (("probs", RNG.uniform(0.05, 0.95, (3,))), ("logits", RNG.normal(size=(3,)))):
        a, b = both(raw, requires_grad=True)
        p, q = D.Bernoulli(**{kind: a}), TD.Bernoulli(**{kind: b})
        v = [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]
        lp, lq = p.log_prob(tl.tensor(v, dtype=tl.float64)), q.log_prob(torch.tensor(v, dtype=torch.float64))
        close(lp, lq)
        close(p.entropy(), q.entropy())
        close(p.variance, q.variance)
        (lp.sum() + p.entropy().sum()).backward()
        (lq.sum() + q.entropy().sum()).backward()
        close(a.grad, b.grad)
    tl.manual_seed(3)
    s = D.Bernoulli(tl.tensor([0.2, 0.9])).sample((20000,)).numpy()
    np.testing.assert_allclose(s.mean(0), [0.2, 0.9], atol=0.015)
    a, b = both(RNG.uniform(0.1, 1, (2, 3)))
    p, q = D.OneHotCategorical(a), TD.OneHotCategorical(b)
    v = np.eye(3)[[0, 2]]
    close(p.log_prob(tl.tensor(v, dtype=tl.float64)), q.log_prob(torch.tensor(v)))
    close(p.entropy(), q.entropy())
    close(p.mode, q.mode)
    s = p.sample((4,))
    assert tuple(s.shape) == (4, 2, 3) and np.all(s.numpy().sum(-1) == 1)
    assert tuple(p.event_shape) == (3,)


def _spd(n, batch=()):
    a = RNG.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal(param):
    loc_tl, loc_th = both(RNG.normal(size=(2, 3)), requires_grad=True)
    m = _spd(3, (2,))
    if param == "scale_tril":
        m = np.linalg.cholesky(m)
    m_tl, m_th = both(m, requires_grad=True)
    p = D.MultivariateNormal(loc_tl, **{param: m_tl})
    q = TD.MultivariateNormal(loc_th, **{param: m_th})
    assert tuple(p.batch_shape) == (2,) and tuple(p.event_shape) == (3,)
    v_tl, v_th = both(RNG.normal(size=(5, 2, 3)))
    lp, lq = p.log_prob(v_tl), q.log_prob(v_th)
    close(lp, lq)
    close(p.entropy(), q.entropy())
    close(p.variance, q.variance)
    for name in ("covariance_matrix", "precision_matrix", "scale_tril"):
        close(getattr(p, name), getattr(q, name), 1e-8)
    (lp.sum() + p.entropy().sum()).backward()
    (lq.sum() + q.entropy().sum()).backward()
    close(loc_tl.grad, loc_th.grad, 1e-7)
    close(m_tl.grad, m_th.grad, 1e-7)
    tl.manual_seed(2)
    s = p.sample((20000,)).numpy()
    cov = np.einsum("sbi,sbj->bij", s - s.mean(0), s - s.mean(0)) / s.shape[0]
    np.testing.assert_allclose(s.mean(0), loc_tl.detach().numpy(), atol=0.1)
    np.testing.assert_allclose(cov, p.covariance_matrix.detach().numpy(), rtol=0.1, atol=0.15)


def test_independent_and_expand():
    a, b = both(RNG.normal(size=(2, 3)))
    s_tl, s_th = both(pos(2, 3))
    p, q = D.Independent(D.Normal(a, s_tl), 1), TD.Independent(TD.Normal(b, s_th), 1)
    assert tuple(p.batch_shape) == (2,) and tuple(p.event_shape) == (3,)
    v_tl, v_th = both(RNG.normal(size=(4, 2, 3)))
    close(p.log_prob(v_tl), q.log_prob(v_th))
    close(p.entropy(), q.entropy())
    assert repr(p.support) == repr(q.support)
    e, f = D.Normal(a[0], s_tl[0]).expand((5, 3)), TD.Normal(b[0], s_th[0]).expand((5, 3))
    assert tuple(e.batch_shape) == (5, 3)
    close(e.log_prob(v_tl[0, 0]), f.log_prob(v_th[0, 0]))
    c = D.Categorical(logits=a[0]).expand((4,))
    assert tuple(c.batch_shape) == (4,) and tuple(c.sample((2,)).shape) == (2, 4)


def test_kl_divergence():
    def pair(make, *raws):
        xs = [both(r, requires_grad=True) for r in raws]
        return make(D, *[x[0] for x in xs]), make(TD, *[x[1] for x in xs]), xs

    cases = [
        (lambda m, a, b, c, d: (m.Normal(a, b), m.Normal(c, d)), [RNG.normal(size=3), pos(3), RNG.normal(size=3), pos(3)]),
        (lambda m, a, b: (m.Categorical(a), m.Categorical(b)), [pos(2, 4), pos(2, 4)]),
        (lambda m, a, b: (m.Bernoulli(a), m.Bernoulli(b)), [RNG.uniform(0.1, 0.9, 3), RNG.uniform(0.1, 0.9, 3)]),
        (lambda m, a, b, c, d: (m.MultivariateNormal(a, b), m.MultivariateNormal(c, d)),
         [RNG.normal(size=(2, 3)), _spd(3, (2,)), RNG.normal(size=(3,)), _spd(3)]),
        (lambda m, a, b, c, d: (m.Independent(m.Normal(a, b), 1), m.Independent(m.Normal(c, d), 1)),
         [RNG.normal(size=(2, 3)), pos(2, 3), RNG.normal(size=(2, 3)), pos(2, 3)]),
        (lambda m, a, b: (m.Exponential(a), m.Exponential(b)), [pos(3), pos(3)]),
        (lambda m, a, b, c, d: (m.Gamma(a, b), m.Gamma(c, d)), [pos(3), pos(3), pos(3), pos(3)]),
        (lambda m, a, b, c, d: (m.Beta(a, b), m.Beta(c, d)), [pos(3), pos(3), pos(3), pos(3)]),
        (lambda m, a, b, c, d: (m.Laplace(a, b), m.Laplace(c, d)), [RNG.normal(size=3), pos(3), RNG.normal(size=3), pos(3)]),
    ]
    for make, raws in cases:
        xs = [both(r, requires_grad=True) for r in raws]
        (p1, p2), (q1, q2) = make(D, *[x[0] for x in xs]), make(TD, *[x[1] for x in xs])
        k1, k2 = D.kl_divergence(p1, p2), TD.kl_divergence(q1, q2)
        close(k1, k2, 1e-8)
        k1.sum().backward()
        k2.sum().backward()
        for a, b in xs:
            close(a.grad, b.grad, 1e-7)
    inf = D.kl_divergence(D.Categorical(tl.tensor([0.5, 0.5])), D.Categorical(tl.tensor([1.0, 0.0])))
    assert inf.item() == float("inf")
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Exponential(1.0))

    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return tl.tensor(123.0)

    assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 2.0)).item() == 123.0


def test_validation_messages_and_switch():
    for make_tl, make_th in [(lambda: D.Normal(tl.tensor([0.0]), tl.tensor([-1.0])),
                              lambda: TD.Normal(torch.tensor([0.0]), torch.tensor([-1.0]))),
                             (lambda: D.Categorical(tl.tensor([-0.1, 1.0])),
                              lambda: TD.Categorical(torch.tensor([-0.1, 1.0])))]:
        with pytest.raises(ValueError) as e_th:
            make_th()
        with pytest.raises(ValueError) as e_tl:
            make_tl()
        assert str(e_tl.value).split("found invalid")[0].replace("torchlean.", "torch.") == \
            str(e_th.value).split("found invalid")[0]
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical()
    with pytest.raises(ValueError, match="Uniform is not defined"):
        D.Uniform(1.0, 0.0)
    with pytest.raises(ValueError, match="within the support"):
        D.Exponential(tl.tensor([1.0])).log_prob(tl.tensor([-1.0]))
    with pytest.raises(ValueError, match=r"must match event_shape: torchlean.Size\(\[2\]\) vs torchlean.Size\(\[3\]\)"):
        D.MultivariateNormal(tl.zeros(3), tl.eye(3)).log_prob(tl.zeros(2))
    with pytest.raises(ValueError, match="Exactly one of"):
        D.MultivariateNormal(tl.zeros(2))
    D.Distribution.set_default_validate_args(False)
    try:
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert np.isnan(D.Normal(tl.tensor([0.0]), tl.tensor([-1.0])).entropy().item())
    finally:
        D.Distribution.set_default_validate_args(True)
    assert D.Normal(0.0, 1.0, validate_args=False)._validate_args is False
    with pytest.warns(FutureWarning):
        assert tuple(D.Normal(0.0, 1.0).sample_n(3).shape) == (3,)
    assert repr(D.constraints.positive) == repr(TD.constraints.positive)
    assert repr(D.Normal(tl.tensor(0.0), tl.tensor(1.0))) == repr(TD.Normal(torch.tensor(0.0), torch.tensor(1.0)))


def test_float32_and_python_numbers():
    p, q = D.Normal(0.5, 2.0), TD.Normal(0.5, 2.0)
    assert p.batch_shape == () and p.loc.dtype == tl.float32
    np.testing.assert_allclose(p.log_prob(tl.tensor([1.0, 3.0])).numpy(), q.log_prob(torch.tensor([1.0, 3.0])).numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(D.Beta(2.0, 3.0).entropy().numpy(), TD.Beta(2.0, 3.0).entropy().numpy(), rtol=1e-5, atol=1e-6)


def test_constraints_match_torch():
    C, TC = D.constraints, TD.constraints
    a = RNG.normal(size=(2, 3, 3))
    spd = a @ np.swapaxes(a, -1, -2) + np.eye(3)
    values = [spd, -spd, np.linalg.cholesky(spd), np.abs(a) / np.abs(a).sum(-1, keepdims=True), (a > 0) * 1.0,
              np.eye(3)]
    names = ["real", "positive", "nonnegative", "unit_interval", "boolean", "simplex", "lower_cholesky",
             "lower_triangular", "positive_definite", "symmetric", "square", "real_vector", "one_hot",
             "nonnegative_integer", "positive_semidefinite"]
    for name in names:
        assert repr(getattr(C, name)) == repr(getattr(TC, name))
        for v in values:
            assert getattr(C, name).check(tl.tensor(v)).tolist() == getattr(TC, name).check(torch.tensor(v)).tolist(), name
    assert repr(C.integer_interval(0, 3)) == repr(TC.integer_interval(0, 3))
    assert C.integer_interval(0, 3).check(tl.tensor([0.0, 3.0, 4.0, 1.5])).tolist() == [True, True, False, False]
    assert D.Categorical(tl.ones(4)).support.upper_bound == 3
    with pytest.raises(NotImplementedError, match="has_rsample is False"):
        D.Gamma(1.0, 1.0).rsample()


EXPANDABLE = [
    lambda m, T: m.Normal(T([0.1, 0.2]), T([1.0, 2.0])),
    lambda m, T: m.Laplace(T([0.1, 0.2]), T([1.0, 2.0])),
    lambda m, T: m.Exponential(T([1.0, 2.0])),
    lambda m, T: m.Uniform(T([0.0, 0.0]), T([1.0, 2.0])),
    lambda m, T: m.Gamma(T([1.0, 2.0]), T([1.0, 3.0])),
    lambda m, T: m.Beta(T([1.5, 2.0]), T([1.0, 3.0])),
    lambda m, T: m.Bernoulli(T([0.3, 0.6])),
    lambda m, T: m.Categorical(T([[0.3, 0.7], [0.5, 0.5]])),
    lambda m, T: m.OneHotCategorical(T([[0.3, 0.7], [0.5, 0.5]])),
    lambda m, T: m.MultivariateNormal(T([[0.0, 1.0], [1.0, 0.0]]), scale_tril=T([[1.0, 0.0], [0.5, 2.0]])),
    lambda m, T: m.Independent(m.Normal(T([0.1, 0.2]), T([1.0, 2.0])), 1),
]


@pytest.mark.parametrize("k", range(len(EXPANDABLE)))
def test_expand_shapes_repr_and_scores_of_torch_samples(k):
    p, q = EXPANDABLE[k](D, tl.tensor), EXPANDABLE[k](TD, torch.tensor)
    assert repr(p) == repr(q).replace("torch.", "torchlean.")
    shape = (3,) + tuple(p.batch_shape)
    pe, qe = p.expand(shape), q.expand(shape)
    assert (tuple(pe.batch_shape), tuple(pe.event_shape)) == (tuple(qe.batch_shape), tuple(qe.event_shape))
    v = qe.sample()
    np.testing.assert_allclose(pe.log_prob(tl.tensor(v.numpy())).numpy(), qe.log_prob(v).numpy(), atol=1e-5)
    np.testing.assert_allclose(pe.entropy().numpy(), qe.entropy().numpy(), atol=1e-5)
    assert tuple(pe.sample((2,)).shape) == tuple(qe.sample((2,)).shape)


def test_undefined_members_raise_naming_the_class_and_member():
    from torchlean.distributions import Distribution, constraints
    from torchlean.errors import AbstractMethodError

    class Bare(Distribution):
        arg_constraints = {}

    d = Bare(validate_args=False)
    for what, call in (("log_prob", lambda: d.log_prob(tl.zeros(1))), ("mean", lambda: d.mean),
                       ("rsample", lambda: d.rsample()), ("entropy", d.entropy)):
        with pytest.raises(AbstractMethodError, match=f"Bare.{what} is not defined"):
            call()
    with pytest.raises(NotImplementedError, match="event_dim cannot be determined"):   # torch's class too
        constraints.dependent.event_dim


def test_dirichlet_and_heavy_tailed_student_t():
    a_tl, a_th = both(RNG.uniform(0.5, 3, (2, 4)), requires_grad=True)
    p, q = D.Dirichlet(a_tl), TD.Dirichlet(a_th)
    v_tl, v_th = both(RNG.dirichlet([1, 2, 3, 4], size=(5, 2)))
    close(p.log_prob(v_tl), q.log_prob(v_th))
    for attr in ("mean", "variance", "mode"):
        close(getattr(p, attr), getattr(q, attr))
    close(p.entropy(), q.entropy())
    (p.log_prob(v_tl).sum() + p.entropy().sum()).backward()
    (q.log_prob(v_th).sum() + q.entropy().sum()).backward()
    close(a_tl.grad, a_th.grad, 1e-7)
    tl.manual_seed(0)
    s = p.sample((20000,))
    assert tuple(s.shape) == (20000, 2, 4) and bool(p.support.check(s).all())
    np.testing.assert_allclose(s.numpy().mean(0), p.mean.detach().numpy(), atol=0.01)
    assert not p.has_rsample
    df_tl, df_th = both([0.8, 1.5, 4.0])
    t, u = D.StudentT(df_tl), TD.StudentT(df_th)
    for attr in ("mean", "variance"):                  # nan below df 1, inf below df 2, as torch's
        np.testing.assert_array_equal(getattr(t, attr).numpy(), getattr(u, attr).numpy())


def test_poisson_and_geometric():
    r_tl, r_th = both([0.5, 3.0, 25.0, 400.0], requires_grad=True)
    p, q = D.Poisson(r_tl), TD.Poisson(r_th)
    k_tl, k_th = both(RNG.integers(0, 30, (5, 4)))
    close(p.log_prob(k_tl), q.log_prob(k_th))
    for attr in ("mean", "variance", "mode"):
        close(getattr(p, attr), getattr(q, attr))
    p.log_prob(k_tl).sum().backward()
    q.log_prob(k_th).sum().backward()
    close(r_tl.grad, r_th.grad, 1e-7)
    tl.manual_seed(2)
    s = p.sample((20000,)).numpy()
    assert bool(p.support.check(tl.tensor(s)).all())
    np.testing.assert_allclose(s.mean(0), p.mean.detach().numpy(), rtol=0.03, atol=0.03)
    np.testing.assert_allclose(s.var(0), p.variance.detach().numpy(), rtol=0.08, atol=0.05)
    for kw in ({"probs": [0.1, 0.5, 0.9, 1.0]}, {"logits": [0.3, -1.0, 2.0, 0.0]}):
        a_tl, a_th = both(list(kw.values())[0])
        name = list(kw)[0]
        g, h = D.Geometric(**{name: a_tl}), TD.Geometric(**{name: a_th})
        v_tl, v_th = both(np.r_[RNG.integers(0, 10, 3), 0.0][None].repeat(2, 0))
        close(g.log_prob(v_tl), h.log_prob(v_th))
        for attr in ("mean", "variance", "mode"):
            close(getattr(g, attr), getattr(h, attr))
        keep = np.asarray(list(kw.values())[0]) < 1        # torch's entropy is nan at p = 1, as ours
        np.testing.assert_allclose(g.entropy().numpy()[keep], h.entropy().numpy()[keep], rtol=1e-9)
    tl.manual_seed(3)
    g = D.Geometric(tl.tensor([0.2, 0.7], dtype=tl.float64))
    s = g.sample((20000,)).numpy()
    np.testing.assert_allclose(s.mean(0), g.mean.numpy(), rtol=0.05)


@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_binomial_and_multinomial(kind):
    n = np.array([4.0, 10.0, 10.0])
    pr = np.array([0.3, 0.5, 0.9])          # 0.5: logit 0, where max(logit, 0) needs torch's half derivative
    par = pr if kind == "probs" else np.log(pr / (1 - pr))
    a_tl, a_th = both(par, requires_grad=True)
    b, c = D.Binomial(tl.tensor(n, dtype=tl.float64), **{kind: a_tl}), TD.Binomial(torch.tensor(n), **{kind: a_th})
    k_tl, k_th = both(np.minimum(RNG.integers(0, 11, (5, 3)), n))
    close(b.log_prob(k_tl), c.log_prob(k_th))
    for attr in ("mean", "variance", "mode"):
        close(getattr(b, attr), getattr(c, attr))
    b.log_prob(k_tl).sum().backward()
    c.log_prob(k_th).sum().backward()
    close(a_tl.grad, a_th.grad, 1e-7)
    h_tl, h_th = D.Binomial(10, tl.tensor([0.2, 0.6], dtype=tl.float64)), TD.Binomial(10, torch.tensor([0.2, 0.6]))
    close(h_tl.entropy(), h_th.entropy(), 1e-7)
    assert tuple(h_tl.enumerate_support().shape) == tuple(h_th.enumerate_support().shape) == (11, 2)
    tl.manual_seed(0)
    s = h_tl.sample((20000,))
    assert bool(h_tl.support.check(s).all())
    np.testing.assert_allclose(s.numpy().mean(0), [2.0, 6.0], rtol=0.03)
    probs = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    m, mm = D.Multinomial(6, tl.tensor(probs)), TD.Multinomial(6, torch.tensor(probs))
    x_tl, x_th = both([[1, 2, 3], [6, 0, 0]])
    close(m.log_prob(x_tl), mm.log_prob(x_th))
    close(m.mean, mm.mean)
    close(m.variance, mm.variance)
    s = m.sample((5000,)).numpy()
    assert s.shape == (5000, 2, 3) and (s.sum(-1) == 6).all() and bool(m.support.check(tl.tensor(s)).all())
    np.testing.assert_allclose(s.mean(0), 6 * probs, atol=0.08)


def test_binomial_entropy_with_total_counts_that_differ_is_each_entrys_own():
    """torch raises for these; torchlean sums each entry over its own support: the value and the
    gradient of every entry equal torch's one-entry Binomial, and nothing reads log 0."""
    from torchlean.errors import UnsupportedError
    n, pr = [3.0, 10.0, 0.0], [0.3, 0.5, 0.8]
    a_tl = tl.tensor(pr, dtype=tl.float64, requires_grad=True)
    h = D.Binomial(tl.tensor(n, dtype=tl.float64), a_tl).entropy()
    h.sum().backward()
    for i in range(3):
        a_th = torch.tensor(pr[i], dtype=torch.float64, requires_grad=True)
        want = TD.Binomial(int(n[i]), a_th).entropy()
        want.backward()
        close(h[i], want)
        close(a_tl.grad[i], a_th.grad, 1e-9)
    with pytest.raises(UnsupportedError, match=r"Binomial.enumerate_support: the total counts differ .*\(0 to 10\)"):
        D.Binomial(tl.tensor(n), tl.tensor(pr)).enumerate_support()
    with pytest.raises(NotImplementedError, match="Multinomial: total_count must be one int"):
        D.Multinomial(tl.tensor([2, 3]), tl.tensor([[0.5, 0.5], [0.2, 0.8]]))


def test_kl_divergences_of_the_added_families():
    def t(m, v):
        return m.tensor(np.asarray(v, dtype=np.float64))
    pairs = {
        "Poisson": lambda M, m: (M.Poisson(t(m, [1.0, 3.0])), M.Poisson(t(m, [2.0, 0.5]))),
        "Geometric": lambda M, m: (M.Geometric(t(m, [0.2, 0.7])), M.Geometric(t(m, [0.5, 0.1]))),
        "Binomial": lambda M, m: (M.Binomial(t(m, [5.0, 5.0]), t(m, [0.2, 0.7])),
                                  M.Binomial(t(m, [5.0, 3.0]), t(m, [0.5, 0.1]))),
        "Dirichlet": lambda M, m: (M.Dirichlet(t(m, [[1.0, 2.0, 3.0]])), M.Dirichlet(t(m, [[0.5, 2.5, 1.0]]))),
        "HalfNormal": lambda M, m: (M.HalfNormal(t(m, [1.0, 2.0])), M.HalfNormal(t(m, [0.5, 3.0]))),
        "LogNormal": lambda M, m: (M.LogNormal(t(m, [0.0, 1.0]), t(m, [1.0, 0.5])),
                                   M.LogNormal(t(m, [0.5, -1.0]), t(m, [2.0, 0.7]))),
        "Chi2": lambda M, m: (M.Chi2(t(m, [1.0, 4.0])), M.Chi2(t(m, [2.0, 3.0]))),
    }
    for name, mk in pairs.items():
        a, b = D.kl_divergence(*mk(D, tl)).numpy(), TD.kl_divergence(*mk(TD, torch)).numpy()
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)     # inf where both are inf
