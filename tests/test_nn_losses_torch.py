"""The loss functions and modules (``torchlean.nn.functional_losses``, ``torchlean.nn.losses``)
against PyTorch: outputs and gradients (float64, tight; float32, 1e-5), reductions, broadcasting
warnings, errors, and loss-module state_dicts."""

import warnings

import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional_losses as L
import torchlean.nn.losses as M
from torchlean.errors import DomainError, ShapeError

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TF = torch.nn.functional
TOL = 1e-9
REDS = ["mean", "sum", "none"]


def host(x):
    return x.numpy() if isinstance(x, tl.Tensor) else x.detach().numpy()


def close(a, b, tol=TOL, what=""):
    np.testing.assert_allclose(host(a), host(b), rtol=tol, atol=tol, err_msg=what)


def both(f_tl, f_th, arrays, grad=None, tol=TOL, seed=0, dtype=np.float64):
    """Run both on the same arrays (float arrays require grad unless ``grad`` says otherwise);
    compare outputs and, for a random cotangent, the gradients."""
    grad = [np.asarray(a).dtype.kind == "f" for a in arrays] if grad is None else grad
    tdt = tl.float64 if dtype == np.float64 else tl.float32
    xs_tl, xs_th = [], []
    for a, g in zip(arrays, grad):
        a = np.asarray(a)
        if a.dtype.kind == "f":
            a = a.astype(dtype)
            xs_tl.append(tl.tensor(a, dtype=tdt, requires_grad=g))
        else:
            xs_tl.append(tl.tensor(a))
        xs_th.append(torch.tensor(a, requires_grad=g))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y_tl, y_th = f_tl(*xs_tl), f_th(*xs_th)
    assert tuple(y_tl.shape) == tuple(y_th.shape)
    assert y_tl.dtype.name == str(y_th.dtype).replace("torch.", "")
    close(y_tl, y_th, tol, "output")
    g = np.random.default_rng(seed).standard_normal(tuple(y_th.shape)).astype(dtype)
    y_tl.backward(tl.tensor(g, dtype=tdt))
    y_th.backward(torch.tensor(g))
    for i, (a, b, r) in enumerate(zip(xs_tl, xs_th, grad)):
        if r and b.grad is None:                           # not differentiated by torch: zero or none here
            assert a.grad is None or not np.any(a.grad.numpy()), f"gradient of input {i}"
        elif r:
            close(a.grad, b.grad, tol, f"gradient of input {i}")
    return y_tl


rng = np.random.default_rng(0)


def r(*shape):
    return rng.standard_normal(shape)


# ---- elementwise regression losses (random shapes) -------------------------------------------

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@settings(max_examples=15, deadline=None)
@given(shape=shapes, red=st.sampled_from(REDS), seed=st.integers(0, 2**16))
def test_regression_losses_random_shapes(shape, red, seed):
    g = np.random.default_rng(seed)
    x, t = g.standard_normal(shape), g.standard_normal(shape)
    both(lambda a, b: L.mse_loss(a, b, reduction=red), lambda a, b: TF.mse_loss(a, b, reduction=red), [x, t])
    both(lambda a, b: L.l1_loss(a, b, reduction=red), lambda a, b: TF.l1_loss(a, b, reduction=red), [x, t])
    both(lambda a, b: L.smooth_l1_loss(a, b, reduction=red, beta=0.6),
         lambda a, b: TF.smooth_l1_loss(a, b, reduction=red, beta=0.6), [x, t])
    both(lambda a, b: L.huber_loss(a, b, reduction=red, delta=0.8),
         lambda a, b: TF.huber_loss(a, b, reduction=red, delta=0.8), [x, t])
    both(lambda a, b: L.smooth_l1_loss(a, b, reduction=red, beta=0.0),
         lambda a, b: TF.smooth_l1_loss(a, b, reduction=red, beta=0.0), [x, t])


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_broadcast_warns_like_torch(name):
    x, t = r(3, 4), r(4)
    with pytest.warns(UserWarning, match="target size"):
        y = getattr(L, name)(tl.tensor(x), tl.tensor(t), reduction="none")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(y, getattr(TF, name)(torch.tensor(x), torch.tensor(t), reduction="none"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(L, name)(tl.tensor(x), tl.tensor(r(3, 4)))        # equal sizes: no warning


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_errors_name_the_op(name):
    f = getattr(L, name)
    with pytest.warns(UserWarning), pytest.raises(ShapeError, match=name):
        f(tl.zeros(3), tl.zeros(4))
    with pytest.raises(DomainError, match=name):
        f(tl.zeros(3), tl.zeros(3), reduction="avg")
    with pytest.raises(tl.errors.TorchLeanError, match=name):
        f(np.zeros(3), tl.zeros(3))


@pytest.mark.parametrize("red", REDS)
def test_weighted_mse_l1_huber(red):
    x, t, w = r(3, 4), r(3, 4), rng.uniform(0.1, 2, (3, 4))
    for name in ["mse_loss", "l1_loss", "huber_loss"]:
        both(lambda a, b, c: getattr(L, name)(a, b, reduction=red, weight=c),
             lambda a, b, c: getattr(TF, name)(a, b, reduction=red, weight=c), [x, t, w], grad=[True, True, False])
    with pytest.raises(ShapeError):
        L.mse_loss(tl.tensor(x), tl.tensor(t), weight=tl.ones(4))


def test_legacy_size_average_reduce():
    x, t = r(3, 4), r(3, 4)
    for sa, rd in [(False, None), (None, False), (True, True)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = L.mse_loss(tl.tensor(x), tl.tensor(t), sa, rd)
            b = TF.mse_loss(torch.tensor(x), torch.tensor(t), sa, rd)
        close(a, b)


# ---- class targets --------------------------------------------------------------------------

@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 4), c=st.integers(2, 5), extra=st.lists(st.integers(1, 3), max_size=2),
       red=st.sampled_from(REDS), ls=st.sampled_from([0.0, 0.2]), weighted=st.booleans(), seed=st.integers(0, 999))
def test_cross_entropy_index_and_probability_targets(n, c, extra, red, ls, weighted, seed):
    g = np.random.default_rng(seed)
    shape = (n, c) + tuple(extra)
    x = g.standard_normal(shape)
    idx = g.integers(0, c, (n,) + tuple(extra))
    if idx.size > 1:
        idx.ravel()[0] = -100                                        # one ignored target (not all)
    w = g.uniform(0.5, 2.0, c) if weighted else None
    wt = (lambda m: None if w is None else m.tensor(w))
    both(lambda a, t: L.cross_entropy(a, t, weight=wt(tl), reduction=red, label_smoothing=ls),
         lambda a, t: TF.cross_entropy(a, t, weight=wt(torch), reduction=red, label_smoothing=ls), [x, idx])
    both(lambda a, t: L.nll_loss(a.log_softmax(1), t, weight=wt(tl), reduction=red),
         lambda a, t: TF.nll_loss(a.log_softmax(1), t, weight=wt(torch), reduction=red), [x, idx])
    p = np.moveaxis(g.dirichlet(np.ones(c), (n,) + tuple(extra)), -1, 1)
    both(lambda a, t: L.cross_entropy(a, t, weight=wt(tl), reduction=red, label_smoothing=ls),
         lambda a, t: TF.cross_entropy(a, t, weight=wt(torch), reduction=red, label_smoothing=ls), [x, p])


def test_cross_entropy_unbatched_and_errors():
    x = r(5)
    both(lambda a, t: L.cross_entropy(a, t), lambda a, t: TF.cross_entropy(a, t), [x, np.array(3)])
    both(lambda a, t: L.cross_entropy(a, t, label_smoothing=0.3),
         lambda a, t: TF.cross_entropy(a, t, label_smoothing=0.3), [x, rng.dirichlet(np.ones(5))])
    with pytest.raises(ShapeError):
        L.cross_entropy(tl.tensor(r(3, 4)), tl.tensor(rng.dirichlet(np.ones(4), 2)))


# ---- binary / multi-label -------------------------------------------------------------------

@pytest.mark.parametrize("red", REDS)
def test_binary_cross_entropy(red):
    p, t, w = rng.uniform(0.02, 0.98, (3, 4)), rng.uniform(0, 1, (3, 4)), rng.uniform(0.5, 2, (4,))
    both(lambda a, b: L.binary_cross_entropy(a, b, reduction=red),
         lambda a, b: TF.binary_cross_entropy(a, b, reduction=red), [p, t])
    both(lambda a, b, c: L.binary_cross_entropy(a, b, weight=c, reduction=red),
         lambda a, b, c: TF.binary_cross_entropy(a, b, weight=c, reduction=red), [p, t, w],
         grad=[True, False, False])


def test_binary_cross_entropy_clamps_log_at_minus_100():
    p, t = np.array([0.0, 1.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 1.0])
    y = L.binary_cross_entropy(tl.tensor(p), tl.tensor(t), reduction="none")
    close(y, TF.binary_cross_entropy(torch.tensor(p), torch.tensor(t), reduction="none"))
    np.testing.assert_array_equal(y.numpy(), [100.0, 100.0, 0.0, 0.0])
    with pytest.raises(DomainError):
        L.binary_cross_entropy(tl.tensor([1.5]), tl.tensor([1.0]))
    with pytest.raises(ShapeError):
        L.binary_cross_entropy(tl.tensor([0.5, 0.5]), tl.tensor([1.0]))


@pytest.mark.parametrize("red", REDS)
def test_bce_with_logits(red):
    x, t = r(3, 4) * 4, rng.uniform(0, 1, (3, 4))
    w, pw = rng.uniform(0.5, 2, (3, 4)), rng.uniform(0.5, 3, (4,))
    both(lambda a, b: L.binary_cross_entropy_with_logits(a, b, reduction=red),
         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=red), [x, t])
    both(lambda a, b, c, d: L.binary_cross_entropy_with_logits(a, b, c, reduction=red, pos_weight=d),
         lambda a, b, c, d: TF.binary_cross_entropy_with_logits(a, b, c, reduction=red, pos_weight=d),
         [x, t, w, pw], grad=[True, True, False, False])
    big = np.array([[-200.0, 200.0, 0.0, 50.0]])           # the stable form: finite at large logits
    both(lambda a, b: L.binary_cross_entropy_with_logits(a, b, reduction=red),
         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=red), [big, np.array([[1.0, 0, 1, 0]])])


@pytest.mark.parametrize("red", REDS)
def test_multilabel_soft_margin(red):
    x, t, w = r(3, 5), rng.integers(0, 2, (3, 5)).astype(float), rng.uniform(0.5, 2, 5)
    both(lambda a, b: L.multilabel_soft_margin_loss(a, b, reduction=red),
         lambda a, b: TF.multilabel_soft_margin_loss(a, b, reduction=red), [x, t])
    both(lambda a, b, c: L.multilabel_soft_margin_loss(a, b, c, reduction=red),
         lambda a, b, c: TF.multilabel_soft_margin_loss(a, b, c, reduction=red), [x, t, w],
         grad=[True, True, False])


# ---- distributions --------------------------------------------------------------------------

@pytest.mark.parametrize("red", REDS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(red, log_target):
    lp = np.log(rng.dirichlet(np.ones(4), 3))
    q = rng.dirichlet(np.ones(4), 3)
    t = np.log(q) if log_target else q
    both(lambda a, b: L.kl_div(a, b, reduction=red, log_target=log_target),
         lambda a, b: TF.kl_div(a, b, reduction=red, log_target=log_target), [lp, t])
    if not log_target:
        q[0, 1] = 0.0                                      # 0 log 0 = 0 (torch's target gradient is nan there)
        both(lambda a, b: L.kl_div(a, b, reduction=red), lambda a, b: TF.kl_div(a, b, reduction=red), [lp, q],
             grad=[True, False])
    if red == "mean":
        with pytest.warns(UserWarning, match="batchmean"):
            L.kl_div(tl.tensor(lp), tl.tensor(t), reduction="mean", log_target=log_target)


@pytest.mark.parametrize("red", REDS)
def test_poisson_nll(red):
    x, t = r(3, 4), rng.poisson(2.0, (3, 4)).astype(float) + 0.5     # t > 0: torch's target grad is finite
    for kw in [{}, {"full": True}]:
        both(lambda a, b: L.poisson_nll_loss(a, b, reduction=red, **kw),
             lambda a, b: TF.poisson_nll_loss(a, b, reduction=red, **kw), [x, t])
    xp = rng.uniform(0.1, 3.0, (3, 4))
    both(lambda a, b: L.poisson_nll_loss(a, b, log_input=False, full=True, eps=1e-3, reduction=red),
         lambda a, b: TF.poisson_nll_loss(a, b, log_input=False, full=True, eps=1e-3, reduction=red), [xp, t])


@pytest.mark.parametrize("red", REDS)
def test_gaussian_nll(red):
    x, t = r(3, 4), r(3, 4)
    var = rng.uniform(0.0, 2.0, (3, 4))
    var[0, 0] = 0.05                                       # below eps: clamped, gradient still passes
    both(lambda a, b, v: L.gaussian_nll_loss(a, b, v, full=True, eps=0.1, reduction=red),
         lambda a, b, v: TF.gaussian_nll_loss(a, b, v, full=True, eps=0.1, reduction=red), [x, t, var])
    both(lambda a, b, v: L.gaussian_nll_loss(a, b, v, reduction=red),
         lambda a, b, v: TF.gaussian_nll_loss(a, b, v, reduction=red), [x, t, rng.uniform(0.5, 2, (3,))])
    both(lambda a, b, v: L.gaussian_nll_loss(a, b, v, reduction=red),
         lambda a, b, v: TF.gaussian_nll_loss(a, b, v, reduction=red), [x, t, rng.uniform(0.5, 2, (3, 1))])
    both(lambda a, b: L.gaussian_nll_loss(a, b, 0.7, reduction=red),
         lambda a, b: TF.gaussian_nll_loss(a, b, 0.7, reduction=red), [x, t])
    with pytest.raises(ShapeError):
        L.gaussian_nll_loss(tl.tensor(x), tl.tensor(t), tl.ones(2))
    with pytest.raises(DomainError):
        L.gaussian_nll_loss(tl.tensor(x), tl.tensor(t), tl.tensor(-np.ones((3, 4))))


# ---- embeddings and ranking -----------------------------------------------------------------

@pytest.mark.parametrize("red", REDS)
def test_cosine_embedding_and_margin_ranking(red):
    tg = np.array([1.0, -1.0, 1.0, -1.0, -1.0])
    both(lambda a, b, y: L.cosine_embedding_loss(a, b, y, margin=0.1, reduction=red),
         lambda a, b, y: TF.cosine_embedding_loss(a, b, y, margin=0.1, reduction=red),
         [r(5, 3), r(5, 3), tg], grad=[True, True, False])
    both(lambda a, b, y: L.cosine_embedding_loss(a, b, y, reduction=red),
         lambda a, b, y: TF.cosine_embedding_loss(a, b, y, reduction=red),
         [r(3), r(3), np.array(-1.0)], grad=[True, True, False])
    both(lambda a, b, y: L.margin_ranking_loss(a, b, y, margin=0.2, reduction=red),
         lambda a, b, y: TF.margin_ranking_loss(a, b, y, margin=0.2, reduction=red),
         [r(5), r(5), tg], grad=[True, True, False])


@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin(red, p, swap):
    both(lambda a, b, c: L.triplet_margin_loss(a, b, c, margin=0.7, p=p, swap=swap, reduction=red),
         lambda a, b, c: TF.triplet_margin_loss(a, b, c, margin=0.7, p=p, swap=swap, reduction=red),
         [r(6, 4), r(6, 4), r(6, 4)])
    with pytest.raises(DomainError):
        L.triplet_margin_loss(tl.ones(2, 3), tl.ones(2, 3), tl.ones(2, 3), margin=0)


# ---- CTC ------------------------------------------------------------------------------------

@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("zero_inf", [False, True])
def test_ctc_loss(red, zero_inf):
    T, N, C, S = 10, 3, 5, 4
    tg = rng.integers(1, C, (N, S))
    tg[0, 1] = tg[0, 2]                                    # a repeated label (needs a blank between)
    il, tlen = np.array([10, 9, 7]), np.array([4, 2, 0])
    # torch's CTC gradient assumes log_softmax inputs: compare through log_softmax.
    both(lambda x, t, a, b: L.ctc_loss(x.log_softmax(2), t, a, b, reduction=red, zero_infinity=zero_inf),
         lambda x, t, a, b: TF.ctc_loss(x.log_softmax(2), t, a, b, reduction=red, zero_infinity=zero_inf),
         [r(T, N, C), tg, il, tlen])
    # concatenated targets
    flat = np.concatenate([tg[0, :4], tg[1, :2]])
    both(lambda x, t, a, b: L.ctc_loss(x.log_softmax(2), t, a, b, reduction=red, zero_infinity=zero_inf),
         lambda x, t, a, b: TF.ctc_loss(x.log_softmax(2), t, a, b, reduction=red, zero_infinity=zero_inf),
         [r(T, N, C), flat, il, tlen])


@pytest.mark.parametrize("red", REDS)
def test_ctc_loss_unbatched(red):
    both(lambda x, t: L.ctc_loss(x.log_softmax(1), t, 7, 3, reduction=red),
         lambda x, t: TF.ctc_loss(x.log_softmax(1), t, torch.tensor(7), torch.tensor(3), reduction=red),
         [r(7, 5), np.array([1, 2, 2])])


def test_ctc_loss_impossible_alignment():
    x = r(6, 2, 4)
    tg, il, tlen = np.array([[1, 1, 1], [2, 3, 1]]), np.array([3, 6]), np.array([3, 3])
    y = L.ctc_loss(tl.tensor(x).log_softmax(2), tl.tensor(tg), tl.tensor(il), tl.tensor(tlen), reduction="none")
    yt = TF.ctc_loss(torch.tensor(x).log_softmax(2), torch.tensor(tg), torch.tensor(il), torch.tensor(tlen),
                     reduction="none")
    assert np.isinf(y.numpy()[0]) and np.isinf(yt.numpy()[0])
    close(y[1:], yt[1:])
    both(lambda v: L.ctc_loss(v.log_softmax(2), tl.tensor(tg), tl.tensor(il), tl.tensor(tlen), zero_infinity=True),
         lambda v: TF.ctc_loss(v.log_softmax(2), torch.tensor(tg), torch.tensor(il), torch.tensor(tlen),
                               zero_infinity=True), [x])


# ---- float32 --------------------------------------------------------------------------------

def test_float32_matches_torch():
    x, t = r(4, 6), rng.uniform(0, 1, (4, 6))
    kw = dict(tol=1e-5, dtype=np.float32)
    both(lambda a, b: L.binary_cross_entropy_with_logits(a, b), lambda a, b: TF.binary_cross_entropy_with_logits(a, b),
         [x, t], **kw)
    both(lambda a, b: L.smooth_l1_loss(a, b), lambda a, b: TF.smooth_l1_loss(a, b), [x, r(4, 6)], **kw)
    both(lambda a, b: L.cross_entropy(a, b, label_smoothing=0.1),
         lambda a, b: TF.cross_entropy(a, b, label_smoothing=0.1), [x, rng.integers(0, 6, 4)], **kw)
    both(lambda a, b, c: L.triplet_margin_loss(a, b, c), lambda a, b, c: TF.triplet_margin_loss(a, b, c),
         [x, r(4, 6), r(4, 6)], **kw)


# ---- modules --------------------------------------------------------------------------------

def test_modules_match_functionals_and_torch():
    x, t = r(4, 3), r(4, 3)
    idx = rng.integers(0, 3, 4)
    w = rng.uniform(0.5, 2, 3)
    cases = [
        (M.CrossEntropyLoss(weight=tl.tensor(w), label_smoothing=0.1),
         torch.nn.CrossEntropyLoss(weight=torch.tensor(w), label_smoothing=0.1), [x, idx]),
        (M.NLLLoss(reduction="sum"), torch.nn.NLLLoss(reduction="sum"), [x, idx]),
        (M.MSELoss(), torch.nn.MSELoss(), [x, t]),
        (M.L1Loss(reduction="none"), torch.nn.L1Loss(reduction="none"), [x, t]),
        (M.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5), [x, t]),
        (M.HuberLoss(delta=0.5), torch.nn.HuberLoss(delta=0.5), [x, t]),
        (M.BCELoss(), torch.nn.BCELoss(), [rng.uniform(0.1, 0.9, (4, 3)), rng.uniform(0, 1, (4, 3))]),
        (M.BCEWithLogitsLoss(pos_weight=tl.tensor(w)), torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(w)),
         [x, rng.uniform(0, 1, (4, 3))]),
        (M.KLDivLoss(reduction="batchmean"), torch.nn.KLDivLoss(reduction="batchmean"),
         [np.log(rng.dirichlet(np.ones(3), 4)), rng.dirichlet(np.ones(3), 4)]),
        (M.CosineEmbeddingLoss(0.1), torch.nn.CosineEmbeddingLoss(0.1), [x, t, np.array([1.0, -1, -1, 1])]),
        (M.MarginRankingLoss(0.1), torch.nn.MarginRankingLoss(0.1), [x[:, 0], t[:, 0], np.array([1.0, -1, -1, 1])]),
        (M.TripletMarginLoss(p=1.0, swap=True), torch.nn.TripletMarginLoss(p=1.0, swap=True), [x, t, r(4, 3)]),
        (M.PoissonNLLLoss(full=True), torch.nn.PoissonNLLLoss(full=True), [x, rng.uniform(0.5, 4, (4, 3))]),
        (M.GaussianNLLLoss(full=True), torch.nn.GaussianNLLLoss(full=True), [x, t, rng.uniform(0.5, 2, (4, 3))]),
        (M.MultiLabelSoftMarginLoss(), torch.nn.MultiLabelSoftMarginLoss(),
         [x, rng.integers(0, 2, (4, 3)).astype(float)]),
    ]
    for mt, mr, arrs in cases:
        assert mt.reduction == mr.reduction
        both(mt, mr, arrs)
    assert M.MSELoss(size_average=False).reduction == "sum"
    assert M.L1Loss(reduce=False).reduction == "none"


def test_weighted_loss_state_dict_loads_from_torch():
    w, pw = rng.uniform(0.5, 2, 4), rng.uniform(0.5, 2, 4)
    for tl_mod, th_mod, keys in [
        (M.CrossEntropyLoss(weight=tl.ones(4, dtype=tl.float64)), torch.nn.CrossEntropyLoss(weight=torch.tensor(w)),
         ["weight"]),
        (M.BCEWithLogitsLoss(weight=tl.ones(4, dtype=tl.float64), pos_weight=tl.ones(4, dtype=tl.float64)),
         torch.nn.BCEWithLogitsLoss(weight=torch.tensor(w), pos_weight=torch.tensor(pw)), ["weight", "pos_weight"]),
    ]:
        sd = th_mod.state_dict()
        assert sorted(sd) == sorted(keys) == sorted(tl_mod.state_dict())
        tl_mod.load_state_dict({k: v.detach().numpy() for k, v in sd.items()})
        for k in keys:
            close(tl_mod.state_dict()[k], sd[k])
    assert list(M.MSELoss().state_dict()) == [] and M.NLLLoss().state_dict() == {}
    x, t = r(5, 4), rng.uniform(0, 1, (5, 4))
    both(tl_mod, th_mod, [x, t])


# ---- CUDA -----------------------------------------------------------------------------------

@pytest.mark.cuda
def test_losses_on_cuda_match_cpu():
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("CUDA is not available")
    x, t, p = r(4, 5), r(4, 5), rng.uniform(0, 1, (4, 5))
    idx = rng.integers(0, 5, 4)
    calls = [
        (lambda a, b: L.smooth_l1_loss(a, b, beta=0.5), [x, t]),
        (lambda a, b: L.binary_cross_entropy_with_logits(a, b, pos_weight=tl.ones(5, device=a.device) * 2), [x, p]),
        (lambda a, b: L.cross_entropy(a, b, label_smoothing=0.1), [x, idx]),
        (lambda a, b: L.cross_entropy(a, b.softmax(1)), [x, t]),
        (lambda a, b: L.kl_div(a.log_softmax(1), b.softmax(1), reduction="batchmean"), [x, t]),
        (lambda a, b: L.triplet_margin_loss(a, b, a * 0.5), [x, t]),
        (lambda a, b: L.ctc_loss(a.reshape(4, 1, 5).log_softmax(2), b, [4], [2]), [x, np.array([[1, 2]])]),
    ]
    for f, arrs in calls:
        outs, grads = [], []
        for dev in ["cpu", "cuda"]:
            xs = [tl.tensor(a.astype(np.float32), device=dev, requires_grad=True) if a.dtype.kind == "f"
                  else tl.tensor(a, device=dev) for a in arrs]
            y = f(*xs)
            y.backward()
            outs.append(y.cpu().numpy())
            grads.append(xs[0].grad.cpu().numpy())
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-5)


def test_ctc_loss_errors():
    lp = tl.zeros(5, 2, 4).log_softmax(2)
    with pytest.raises(DomainError, match="ctc_loss"):
        L.ctc_loss(lp, tl.tensor([[1, 2], [1, 0]]), [5, 5], [3, 1])      # longer than the padded targets
    with pytest.raises(DomainError, match="ctc_loss"):
        L.ctc_loss(lp, tl.tensor([[1, 0], [1, 0]]), [5, 5], [2, 1])      # a blank inside a target
    with pytest.raises(DomainError, match="ctc_loss"):
        L.ctc_loss(lp, tl.tensor([[1, 2], [1, 2]]), [6, 5], [2, 2])      # input length above T
    with pytest.raises(ShapeError, match="ctc_loss"):
        L.ctc_loss(lp, tl.tensor([[1, 2], [1, 2]]), [5], [2])
