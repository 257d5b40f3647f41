"""The margin losses, TripletMarginWithDistanceLoss, NLLLoss2d and AdaptiveLogSoftmaxWithLoss against
PyTorch: outputs and input gradients (float64, tight; float32, 1e-5), every reduction, 0-d / 1-d /
batched inputs, errors, and AdaptiveLogSoftmaxWithLoss loading a torch state_dict."""

import warnings

import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional_losses as L
import torchlean.nn.losses as M
from torchlean.errors import DomainError, DTypeError, IndexRangeError, ShapeError

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
    y_tl, y_th = f_tl(*xs_tl), f_th(*xs_th)
    assert tuple(y_tl.shape) == tuple(y_th.shape)
    assert y_tl.dtype.name == str(y_th.dtype).replace("torch.", "")
    close(y_tl, y_th, tol, "output")
    g = np.random.default_rng(seed).standard_normal(tuple(y_th.shape)).astype(dtype)
    y_tl.backward(tl.tensor(g, dtype=tdt))
    y_th.backward(torch.tensor(g))
    for i, (a, b, r) in enumerate(zip(xs_tl, xs_th, grad)):
        if r:
            close(a.grad, b.grad, tol, f"gradient of input {i}")
    return y_tl


rng = np.random.default_rng(0)


def r(*shape):
    return rng.standard_normal(shape)


def signs(*shape):
    return rng.choice([-1.0, 1.0], size=shape)


# ---- hinge embedding / soft margin ----------------------------------------------------------

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@settings(max_examples=12, deadline=None)
@given(shape=shapes, red=st.sampled_from(REDS), seed=st.integers(0, 2**16),
       margin=st.sampled_from([0.5, 1.0, 2.0]))
def test_hinge_and_soft_margin_random_shapes(shape, red, seed, margin):
    g = np.random.default_rng(seed)
    x, t = g.standard_normal(shape), g.choice([-1.0, 1.0], size=shape)
    both(lambda a, b: L.hinge_embedding_loss(a, b, margin=margin, reduction=red),
         lambda a, b: TF.hinge_embedding_loss(a, b, margin=margin, reduction=red), [x, t], [True, False])
    both(lambda a, b: L.soft_margin_loss(a, b, reduction=red),
         lambda a, b: TF.soft_margin_loss(a, b, reduction=red), [x, t], [True, False])


def test_hinge_embedding_loss_other_targets_and_broadcast():
    x = r(3, 4)
    t = np.array([[1.0, -1.0, 0.5, 0.0]] * 3)                  # targets other than +-1 add both terms
    both(lambda a, b: L.hinge_embedding_loss(a, b, reduction="none"),
         lambda a, b: TF.hinge_embedding_loss(a, b, reduction="none"), [x, t], [True, False])
    both(lambda a, b: L.hinge_embedding_loss(a, b, margin=0.3),
         lambda a, b: TF.hinge_embedding_loss(a, b, margin=0.3), [x, signs(4)], [True, False])
    both(lambda a, b: L.hinge_embedding_loss(a, b, reduction="sum"),
         lambda a, b: TF.hinge_embedding_loss(a, b, reduction="sum"), [r(4), signs(3, 4)], [True, False])
    both(lambda a, b: L.hinge_embedding_loss(a, b, reduction="none"),
         lambda a, b: TF.hinge_embedding_loss(a, b, reduction="none"), [x, np.ones((3, 4), np.int64)])
    both(lambda a, b: M.HingeEmbeddingLoss(margin=1.5, reduce=False)(a, b),
         lambda a, b: torch.nn.HingeEmbeddingLoss(margin=1.5, reduce=False)(a, b), [x, signs(3, 4)], [True, False])
    y = L.hinge_embedding_loss(tl.tensor(r(2, 3), dtype=tl.float32), tl.tensor(signs(2, 3), dtype=tl.float32))
    assert y.dtype == tl.float32


def test_soft_margin_loss_broadcast_module_float32():
    x, t = r(3, 5), signs(5)
    both(lambda a, b: L.soft_margin_loss(a, b, reduction="none"),
         lambda a, b: TF.soft_margin_loss(a, b, reduction="none"), [x, t], [True, False])
    both(lambda a, b: M.SoftMarginLoss(reduction="sum")(a, b),
         lambda a, b: torch.nn.SoftMarginLoss(reduction="sum")(a, b), [x, signs(3, 5)], [True, False],
         tol=1e-5, dtype=np.float32)
    both(lambda a, b: M.SoftMarginLoss(size_average=False)(a, b),
         lambda a, b: torch.nn.SoftMarginLoss(size_average=False)(a, b), [x, signs(3, 5)], [True, False])
    big = L.soft_margin_loss(tl.tensor([-100.0, 100.0]), tl.tensor([1.0, -1.0]), reduction="none")
    np.testing.assert_allclose(big.numpy(), [100.0, 100.0])           # finite where torch's log1p(exp) overflows


def test_hinge_soft_margin_errors():
    x = tl.zeros(2, 3)
    with pytest.raises(ShapeError, match="hinge_embedding_loss"):
        L.hinge_embedding_loss(x, tl.ones(2))
    with pytest.raises(ShapeError, match="soft_margin_loss"):
        L.soft_margin_loss(x, tl.ones(2))
    with pytest.raises(DomainError, match="reduction"):
        L.hinge_embedding_loss(x, tl.ones(2, 3), reduction="xx")
    with pytest.raises(DomainError, match="reduction"):
        M.SoftMarginLoss(reduction="avg")(x, tl.ones(2, 3))


# ---- multi margin ---------------------------------------------------------------------------

@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 5), c=st.integers(1, 5), p=st.sampled_from([1, 2]), red=st.sampled_from(REDS),
       weighted=st.booleans(), margin=st.sampled_from([0.5, 1.0, 1.7]), seed=st.integers(0, 2**16))
def test_multi_margin_loss_random(n, c, p, red, weighted, margin, seed):
    g = np.random.default_rng(seed)
    x, t = g.standard_normal((n, c)), g.integers(0, c, n)
    w = g.uniform(0.2, 2.0, c) if weighted else None
    wl = None if w is None else tl.tensor(w, dtype=tl.float64)
    wt = None if w is None else torch.tensor(w)
    both(lambda a, b: L.multi_margin_loss(a, b, p=p, margin=margin, weight=wl, reduction=red),
         lambda a, b: TF.multi_margin_loss(a, b, p=p, margin=margin, weight=wt, reduction=red), [x, t])


def test_multi_margin_loss_unbatched_shapes_and_module():
    x = r(4)
    for tgt in (np.array(2), np.array([2])):                    # "none" keeps the target's shape
        for red in REDS:
            both(lambda a, b, red=red: L.multi_margin_loss(a, b, p=2, reduction=red),
                 lambda a, b, red=red: TF.multi_margin_loss(a, b, p=2, reduction=red), [x, tgt])
    both(lambda a, b: L.multi_margin_loss(a, b, reduction="none"),
         lambda a, b: TF.multi_margin_loss(a, b, reduction="none"), [r(1, 4), np.array(1)])
    both(lambda a, b: L.multi_margin_loss(a, b, reduction="none"),
         lambda a, b: TF.multi_margin_loss(a, b, reduction="none"), [np.array(0.3), np.array(0)])
    w = r(5) ** 2
    lm = M.MultiMarginLoss(p=1, margin=0.8, weight=tl.tensor(w, dtype=tl.float32))
    tm = torch.nn.MultiMarginLoss(p=1, margin=0.8, weight=torch.tensor(w, dtype=torch.float32))
    assert list(lm.state_dict()) == list(tm.state_dict()) == ["weight"]
    lm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()}, strict=True)
    both(lm, tm, [r(6, 5), rng.integers(0, 5, 6)], tol=1e-5, dtype=np.float32)
    y = L.multi_margin_loss(tl.zeros(0, 3), tl.tensor(np.zeros(0, np.int64)), reduction="none")
    assert tuple(y.shape) == (0,)


def test_multi_margin_loss_errors():
    x = tl.zeros(2, 3)
    with pytest.raises(DomainError, match="p == 1"):
        L.multi_margin_loss(x, tl.tensor([0, 1]), p=3)
    with pytest.raises(DomainError, match="p == 1"):
        M.MultiMarginLoss(p=0)
    with pytest.raises(ShapeError, match="one-dimensional"):
        L.multi_margin_loss(x, tl.tensor([0, 1]), weight=tl.ones(1, 3))
    with pytest.raises(ShapeError, match="1D tensor"):
        M.MultiMarginLoss(weight=tl.ones(1, 3))
    with pytest.raises(ShapeError, match="inconsistent weight size"):
        L.multi_margin_loss(x, tl.tensor([0, 1]), weight=tl.ones(2))
    with pytest.raises(DTypeError, match="weight"):
        L.multi_margin_loss(x, tl.tensor([0, 1]), weight=tl.ones(3, dtype=tl.float64))
    with pytest.raises(IndexRangeError, match="target out of range"):
        L.multi_margin_loss(x, tl.tensor([3, 0]))
    with pytest.raises(IndexRangeError, match="target out of range"):
        L.multi_margin_loss(x, tl.tensor([-1, 0]))
    with pytest.raises(ShapeError, match="Expected target size \\[2\\]"):
        L.multi_margin_loss(x, tl.tensor([0, 1, 1]))
    with pytest.raises(ShapeError, match="Expected target size"):
        L.multi_margin_loss(x, tl.tensor([[0], [1]]))
    with pytest.raises(ShapeError, match="non-empty vector or matrix"):
        L.multi_margin_loss(tl.zeros(2, 3, 4), tl.tensor([0, 1]))
    with pytest.raises(DTypeError, match="integers"):
        L.multi_margin_loss(x, tl.tensor([0.0, 1.0]))


# ---- multilabel margin ----------------------------------------------------------------------

def _ml_targets(g, n, c):
    t = np.full((n, c), -1, np.int64)
    for i in range(n):
        k = g.integers(0, c + 1)
        t[i, :k] = g.choice(c, size=k, replace=bool(g.integers(0, 2)))      # repeats count once per occurrence
        t[i, k + 1:] = g.integers(-1, c, c - k - 1) if k + 1 < c else t[i, k + 1:]   # junk after the first -1
    return t


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 4), c=st.integers(1, 5), red=st.sampled_from(REDS), seed=st.integers(0, 2**16))
def test_multilabel_margin_loss_random(n, c, red, seed):
    g = np.random.default_rng(seed)
    x, t = g.standard_normal((n, c)), _ml_targets(g, n, c)
    both(lambda a, b: L.multilabel_margin_loss(a, b, reduction=red),
         lambda a, b: TF.multilabel_margin_loss(a, b, reduction=red), [x, t])


def test_multilabel_margin_loss_unbatched_hand_value_and_module():
    x = np.array([0.1, 0.2, 0.4, 0.8])
    y = L.multilabel_margin_loss(tl.tensor(x), tl.tensor([3, 0, -1, 1]))
    assert abs(y.item() - 0.85) < 1e-12                                # torch's documented example
    for t in (np.array([3, 0, -1, 1]), np.array([0, 0, -1, 1]), np.array([-1, 0, 1, 2])):
        for red in REDS:
            both(lambda a, b, red=red: L.multilabel_margin_loss(a, b, reduction=red),
                 lambda a, b, red=red: TF.multilabel_margin_loss(a, b, reduction=red), [x, t])
    both(lambda a, b: L.multilabel_margin_loss(a, b, reduction="none"),
         lambda a, b: TF.multilabel_margin_loss(a, b, reduction="none"), [np.array(0.5), np.array(0)])
    g = np.random.default_rng(3)
    both(M.MultiLabelMarginLoss(), torch.nn.MultiLabelMarginLoss(), [g.standard_normal((3, 6)), _ml_targets(g, 3, 6)],
         tol=1e-5, dtype=np.float32)


def test_multilabel_margin_loss_errors():
    x = tl.zeros(2, 3)
    with pytest.raises(ShapeError, match="inconsistent target size"):
        L.multilabel_margin_loss(x, tl.tensor([[0, 1], [1, 2]]))
    with pytest.raises(ShapeError, match="inconsistent target size"):
        L.multilabel_margin_loss(tl.zeros(3), tl.tensor([[0, 1, 2]]))
    with pytest.raises(IndexRangeError, match="out of range"):
        L.multilabel_margin_loss(x, tl.tensor([[0, -1, 5], [0, 1, 2]]))
    with pytest.raises(IndexRangeError, match="out of range"):
        L.multilabel_margin_loss(x, tl.tensor([[-2, -1, 0], [0, 1, 2]]))
    with pytest.raises(ShapeError, match="non-empty vector or matrix"):
        L.multilabel_margin_loss(tl.zeros(2, 0), tl.tensor(np.zeros((2, 0), np.int64)))
    with pytest.raises(DTypeError, match="integers"):
        L.multilabel_margin_loss(x, tl.zeros(2, 3))


# ---- triplet with distance ------------------------------------------------------------------

@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("red", REDS)
def test_triplet_margin_with_distance_loss(swap, red):
    a, p, n = r(5, 4), r(5, 4), r(5, 4)
    both(lambda x, y, z: L.triplet_margin_with_distance_loss(x, y, z, swap=swap, margin=1.3, reduction=red),
         lambda x, y, z: TF.triplet_margin_with_distance_loss(x, y, z, swap=swap, margin=1.3, reduction=red),
         [a, p, n])

    def cos_tl(u, v):
        return 1.0 - tl.nn.functional.cosine_similarity(u, v)

    def cos_th(u, v):
        return 1.0 - TF.cosine_similarity(u, v)

    both(lambda x, y, z: L.triplet_margin_with_distance_loss(x, y, z, distance_function=cos_tl, swap=swap,
                                                             margin=0.4, reduction=red),
         lambda x, y, z: TF.triplet_margin_with_distance_loss(x, y, z, distance_function=cos_th, swap=swap,
                                                              margin=0.4, reduction=red), [a, p, n])


def test_triplet_margin_with_distance_module_unbatched_and_errors():
    both(lambda x, y, z: M.TripletMarginWithDistanceLoss(swap=True)(x, y, z),
         lambda x, y, z: torch.nn.TripletMarginWithDistanceLoss(swap=True)(x, y, z), [r(4), r(4), r(4)])
    both(lambda x, y, z: M.TripletMarginWithDistanceLoss(reduction="none")(x, y, z),
         lambda x, y, z: torch.nn.TripletMarginWithDistanceLoss(reduction="none")(x, y, z),
         [r(3, 4), r(3, 4), r(3, 4)], tol=1e-5, dtype=np.float32)
    lm = M.TripletMarginWithDistanceLoss()
    assert isinstance(lm.distance_function, tl.nn.PairwiseDistance)
    assert [n for n, _ in lm.named_children()] == ["distance_function"]
    custom = M.TripletMarginWithDistanceLoss(distance_function=lambda u, v: (u - v).abs().sum(-1), margin=2.0)
    out = custom(tl.tensor([[0.0, 0.0]]), tl.tensor([[1.0, 0.0]]), tl.tensor([[0.5, 0.0]]))
    assert abs(out.item() - 2.5) < 1e-6
    x = tl.zeros(2, 3)
    with pytest.raises(DomainError, match="margin"):
        L.triplet_margin_with_distance_loss(x, x, x, margin=0)
    with pytest.raises(DomainError, match="margin"):
        M.TripletMarginWithDistanceLoss(margin=-1.0)
    with pytest.raises(DomainError, match="reduction"):
        L.triplet_margin_with_distance_loss(x, x, x, reduction="x")
    with pytest.raises(ShapeError, match="same number of dimensions"):
        L.triplet_margin_with_distance_loss(x, tl.zeros(3), tl.zeros(3))
    with pytest.raises(TypeError):
        L.triplet_margin_with_distance_loss(x, x, x, None)          # distance_function is keyword-only


# ---- NLLLoss2d ------------------------------------------------------------------------------

def test_nll_loss_2d_is_deprecated_nll_loss():
    w = np.array([0.5, 1.0, 2.0])
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        lm = M.NLLLoss2d(weight=tl.tensor(w), ignore_index=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = torch.nn.NLLLoss2d(weight=torch.tensor(w), ignore_index=1)
    assert isinstance(lm, M.NLLLoss)
    assert list(lm.state_dict()) == list(tm.state_dict()) == ["weight"]
    lp = np.log(np.random.default_rng(1).dirichlet(np.ones(3), size=(2, 4, 5))).transpose(0, 3, 1, 2).copy()
    both(lm, tm, [lp, rng.integers(0, 3, (2, 4, 5))])


# ---- AdaptiveLogSoftmaxWithLoss -------------------------------------------------------------

def _asm_pair(in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, dtype=np.float64):
    torch.manual_seed(0)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value=div_value,
                                             head_bias=head_bias)
    tdt = tl.float64 if dtype == np.float64 else tl.float32
    lm = M.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value=div_value, head_bias=head_bias,
                                      dtype=tdt)
    if dtype == np.float64:
        tm = tm.double()
    assert [(k, tuple(v.shape)) for k, v in lm.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    lm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()}, strict=True)
    return lm, tm


def _param_grads_close(lm, tm, tol):
    tg = dict(tm.named_parameters())
    for k, p in lm.named_parameters():
        if tg[k].grad is None:
            assert p.grad is None or not np.any(p.grad.numpy()), k
        else:
            close(p.grad, tg[k].grad, tol, k)


@pytest.mark.parametrize("head_bias", [False, True])
def test_adaptive_log_softmax_forward_log_prob_predict(head_bias):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                              # torch warns on a zero-size tail layer
        lm, tm = _asm_pair(16, 20, [4, 9, 15], div_value=2.0, head_bias=head_bias)
    x = r(7, 16)
    target = np.array([0, 5, 19, 3, 10, 16, 8])
    xl, xt = tl.tensor(x, dtype=tl.float64, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_l, out_t = lm(xl, tl.tensor(target)), tm(xt, torch.tensor(target))
    assert out_l._fields == ("output", "loss")
    close(out_l.output, out_t.output)
    close(out_l.loss, out_t.loss)
    g = r(7)
    (out_l.loss + (out_l.output * tl.tensor(g)).sum()).backward()
    (out_t.loss + (out_t.output * torch.tensor(g)).sum()).backward()
    close(xl.grad, xt.grad, what="input gradient")
    _param_grads_close(lm, tm, TOL)
    close(lm.log_prob(tl.tensor(x)), tm.log_prob(torch.tensor(x)))
    xs = r(40, 16) * 3
    np.testing.assert_array_equal(lm.predict(tl.tensor(xs)).numpy(), tm.predict(torch.tensor(xs)).numpy())
    if head_bias:                            # every row's head argmax in the shortlist, then in a cluster
        for col, shift in ((0, 100.0), (5, 100.0)):
            b = tm.head.bias.detach().numpy().copy()
            b[col] += shift
            tm.head.bias.data = torch.tensor(b)
            lm.head.bias = tl.nn.Parameter(tl.tensor(b))
            pred = lm.predict(tl.tensor(xs)).numpy()
            np.testing.assert_array_equal(pred, tm.predict(torch.tensor(xs)).numpy())
            np.testing.assert_array_equal(pred, lm.log_prob(tl.tensor(xs)).argmax(1).numpy())


def test_adaptive_log_softmax_unbatched_float32_and_init():
    lm, tm = _asm_pair(16, 10, [3, 6], dtype=np.float32)
    x = r(16).astype(np.float32)
    for t in (1, 4, 9):
        xl, xt = tl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out_l, out_t = lm(xl, tl.tensor(t)), tm(xt, torch.tensor(t))
        assert tuple(out_l.output.shape) == tuple(out_t.output.shape) == ()
        close(out_l.output, out_t.output, 1e-5)
        out_l.loss.backward()
        out_t.loss.backward()
        close(xl.grad, xt.grad, 1e-5)
    _ = tl.manual_seed(0)
    big = M.AdaptiveLogSoftmaxWithLoss(64, 100, [10, 50])
    w = big.head.weight.numpy()
    assert np.abs(w).max() <= 1 / 8 + 1e-7 and np.abs(w).max() > 0.1                 # U(-1/sqrt(64), 1/sqrt(64))
    assert big.head.bias is None and tuple(big.tail[1][0].weight.shape) == (4, 64)


def test_adaptive_log_softmax_zero_width_tail_forward():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm, tm = _asm_pair(8, 10, [3, 6])                          # tail 1 projects to 8 // 16 = 0 features
    x, t = r(3, 8), np.array([9, 1, 4])
    close(lm(tl.tensor(x), tl.tensor(t)).output, tm(torch.tensor(x), torch.tensor(t)).output)
    close(lm.log_prob(tl.tensor(x)), tm.log_prob(torch.tensor(x)))


def test_adaptive_log_softmax_zero_width_tail_backward():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm, tm = _asm_pair(8, 10, [3, 6])
    x = r(3, 8)
    xl, xt = tl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lm(xl, tl.tensor([9, 1, 4])).loss.backward()
    tm(xt, torch.tensor([9, 1, 4])).loss.backward()
    close(xl.grad, xt.grad)


def test_adaptive_log_softmax_errors():
    for cutoffs in ([], [3, 3], [0, 3], [3, 10], [6, 3], [2.5]):
        with pytest.raises(DomainError, match="cutoffs"):
            M.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)
    lm = M.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6])
    with pytest.raises(IndexRangeError, match="Target values should be in \\[0, 9\\]"):
        lm(tl.zeros(2, 8), tl.tensor([1, 10]))
    with pytest.raises(ShapeError, match="same size in the batch dimension"):
        lm(tl.zeros(3, 8), tl.tensor([1, 2]))
    with pytest.raises(ShapeError, match="1D target tensor expects 2D input"):
        lm(tl.zeros(8), tl.tensor([1]))
    with pytest.raises(ShapeError, match="0D target tensor expects 1D input"):
        lm(tl.zeros(1, 8), tl.tensor(1))
    with pytest.raises(ShapeError, match="multi-target"):
        lm(tl.zeros(1, 8), tl.tensor([[1]]))


# ---- CUDA -----------------------------------------------------------------------------------

@pytest.mark.cuda
def test_more_losses_on_cuda_match_cpu():
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("CUDA is not available")
    x, s = r(4, 5), signs(4, 5)
    calls = [
        (lambda a, b: L.hinge_embedding_loss(a, b, margin=0.5), [x, s]),
        (lambda a, b: L.soft_margin_loss(a, b), [x, s]),
        (lambda a, b: L.multi_margin_loss(a, b, p=2, weight=tl.ones(5, device=a.device) * 1.5),
         [x, rng.integers(0, 5, 4)]),
        (lambda a, b: L.multilabel_margin_loss(a, b), [x, _ml_targets(np.random.default_rng(0), 4, 5)]),
        (lambda a, b: L.triplet_margin_with_distance_loss(a, b, a * 0.5, swap=True), [x, s]),
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
    lm = M.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6])
    xin, tg = r(5, 8).astype(np.float32), np.array([0, 4, 9, 2, 7])
    res = []
    for dev in ["cpu", "cuda"]:
        lm.to(dev)
        xi = tl.tensor(xin, device=dev, requires_grad=True)
        out = lm(xi, tl.tensor(tg, device=dev))
        out.loss.backward()
        res.append((out.output.cpu().numpy(), xi.grad.cpu().numpy(), lm.predict(xi.detach()).cpu().numpy()))
    for a, b in zip(res[0], res[1]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bce_at_probabilities_0_and_1_has_torchs_finite_gradients(dtype):
    # a sigmoid that saturates to exactly 0 or 1 used to give NaN gradients (0 x inf in the clamped
    # log) and NaN weights a step later; torch's boundary slope is (x - t) / 1e-12
    x = np.array([1.0, 0.0, 1.0, 0.0, 0.5, 0.25], dtype)
    t = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.7], dtype)
    out = []
    for m in (tl, torch):
        xt, tt = m.tensor(x, requires_grad=True), m.tensor(t, requires_grad=True)
        loss = m.nn.functional.binary_cross_entropy(xt, tt, reduction="sum")
        loss.backward()
        out.append((loss.item(), xt.grad.numpy(), tt.grad.numpy()))
    (lv, gx, gt), (tv, tgx, tgt) = out
    assert lv == pytest.approx(tv, rel=1e-6) and np.isfinite(gx).all() and np.isfinite(gt).all()
    np.testing.assert_allclose(gx, tgx, rtol=1e-6)
    ok = np.isfinite(tgt)                   # torch's target gradient is -inf / inf where x is 0 or 1
    np.testing.assert_allclose(gt[ok], tgt[ok], rtol=1e-6)
    np.testing.assert_allclose(gt[~ok], np.where(x[~ok] == 1, -100.0, 100.0))   # the clamped logs' difference
    z = tl.tensor(np.array([40.0, -120.0, 3.0], dtype), requires_grad=True)      # sigmoid -> exactly 1, 0
    L.binary_cross_entropy(tl.sigmoid(z), tl.tensor(np.array([1.0, 0.0, 1.0], dtype))).backward()
    assert np.isfinite(z.grad.numpy()).all()
