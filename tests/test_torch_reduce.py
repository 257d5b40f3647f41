"""Reductions, scans, sorting and counting against PyTorch: values, dtypes, shapes and gradients."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings
from hypothesis import strategies as st

import torchlean as tl
from torchlean.errors import DomainError, DTypeError, IndexRangeError, ShapeError

RNG = np.random.default_rng(0)


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def same(ours, theirs, atol=1e-5, rtol=1e-5):
    """Equal values (NaN where torch has NaN), dtype and shape; tuples field by field."""
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        if hasattr(theirs, "_fields") or hasattr(theirs, "values"):
            for f in ("values", "indices"):
                if hasattr(theirs, f):
                    same(getattr(ours, f), getattr(theirs, f), atol, rtol)
        for a, b in zip(ours, theirs):
            same(a, b, atol, rtol)
        return
    assert isinstance(ours, tl.Tensor), type(ours)
    assert ours.shape == tuple(theirs.shape), (ours.shape, tuple(theirs.shape))
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(_np(ours).astype(np.float64), _np(theirs).astype(np.float64), atol=atol, rtol=rtol)


def first(out):
    return out[0] if isinstance(out, tuple) else out


def grads(f_tl, f_torch, x, atol=1e-5):
    """Forward values and the gradient of a random linear functional of the (first) output."""
    a = tl.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    ya, yb = f_tl(a), f_torch(b)
    same(ya, yb, atol)
    ya, yb = first(ya), first(yb)
    if not yb.requires_grad:
        return
    g = RNG.standard_normal(tuple(yb.shape)).astype(np.float32)
    (ya * tl.tensor(g)).sum().backward()
    (yb * torch.tensor(g)).sum().backward()
    assert a.grad is not None
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=atol, rtol=1e-4)


def rand(*shape):
    return RNG.uniform(-2, 2, size=shape).astype(np.float32)


def ties(*shape, hi=3):
    return RNG.integers(0, hi, size=shape).astype(np.float32)


# ---- sum / mean / prod ------------------------------------------------------------------------

SHAPES_DIMS = [((3, 4), None, False), ((3, 4), 1, False), ((3, 4), -1, True), ((2, 3, 4), (0, 2), False),
               ((2, 3, 4), (-1, 0), True), ((2, 3, 4), [1], False), ((), None, False), ((), 0, True),
               ((0, 3), 0, False), ((0, 3), 1, True), ((2, 0), None, False)]


@pytest.mark.parametrize("op", ["sum", "mean", "nansum", "nanmean"])
@pytest.mark.parametrize("shape,dim,keepdim", SHAPES_DIMS)
def test_sum_mean(op, shape, dim, keepdim):
    x = rand(*shape)
    if x.size > 2:
        x.reshape(-1)[1] = np.nan if op.startswith("nan") else x.reshape(-1)[1]
    kw = {} if dim is None and not keepdim else {"dim": dim, "keepdim": keepdim}
    grads(lambda t: getattr(tl, op)(t, **kw), lambda t: getattr(torch, op)(t, **kw), x)


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "uint8"])
def test_integer_sums_and_products_are_int64(dtype):
    x = RNG.integers(0, 3, size=(3, 4)).astype(dtype)
    a, b = tl.tensor(x), torch.tensor(x)
    same(a.sum(), b.sum())
    same(a.sum(1), b.sum(1))
    same(a.prod(), b.prod())
    same(a.prod(0), b.prod(0))
    same(tl.cumsum(a, 1), torch.cumsum(b, 1))
    same(a.cumprod(0), b.cumprod(0))
    same(a.sum(dim=0, dtype=tl.float64), b.sum(dim=0, dtype=torch.float64))
    same(a.mean(dtype=tl.float32), b.mean(dtype=torch.float32))


@pytest.mark.parametrize("op", ["mean", "var", "std", "nanmean", "var_mean", "std_mean"])
def test_float_only_reductions_refuse_integers(op):
    with pytest.raises(DTypeError, match=op):
        getattr(tl, op)(tl.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError):
        getattr(torch, op)(torch.tensor([1, 2, 3]))


@pytest.mark.parametrize("shape,dim,keepdim", [((5,), None, False), ((3, 4), 1, False), ((3, 4), 0, True),
                                               ((2, 3, 4), -2, False), ((), None, False), ((3, 0), 1, False),
                                               ((0, 3), None, False)])
def test_prod_with_zeros(shape, dim, keepdim):
    x = rand(*shape)
    if x.size >= 4:
        x.reshape(-1)[[0, 3]] = 0.0
    kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    grads(lambda t: tl.prod(t, **kw), lambda t: torch.prod(t, **kw), x)


def test_prod_single_zero_gradient():
    grads(lambda t: t.prod(), lambda t: t.prod(), np.array([2.0, 0.0, 3.0, -1.5], np.float32))


# ---- max / min / amax / argmax -----------------------------------------------------------------

@pytest.mark.parametrize("op", ["max", "min"])
def test_max_dim_is_a_named_tuple_with_first_index(op):
    x = ties(4, 6)
    a, b = tl.tensor(x), torch.tensor(x)
    out = getattr(a, op)(1)
    same(out, getattr(b, op)(1))
    vals, idx = out
    assert isinstance(out, tuple) and out.values is vals and out.indices is idx
    _, pred = getattr(a, op)(dim=0, keepdim=True)
    same(pred, getattr(b, op)(dim=0, keepdim=True).indices)
    same(getattr(tl, op)(a, -1, True), getattr(torch, op)(b, -1, True))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("shape,dim", [((4, 6), 1), ((4, 6), 0), ((2, 3, 5), -1), ((), 0), ((0, 3), 1)])
def test_max_dim_gradient_goes_to_the_selected_entry(op, shape, dim):
    x = ties(*shape)
    grads(lambda t: getattr(t, op)(dim), lambda t: getattr(t, op)(dim), x)
    grads(lambda t: getattr(t, op)(dim, keepdim=True), lambda t: getattr(t, op)(dim, keepdim=True), x)


@pytest.mark.parametrize("op", ["max", "min", "amax", "amin"])
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), ()])
def test_full_reduction_splits_ties_evenly(op, shape):
    x = ties(*shape, hi=2)
    grads(lambda t: getattr(t, op)(), lambda t: getattr(t, op)(), x)


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("dim,keepdim", [(1, False), ((0, 2), True), ((-1, 0), False), (-2, True), ((), False)])
def test_amax_dims_and_tied_gradient(op, dim, keepdim):
    x = ties(3, 4, 5, hi=2)
    grads(lambda t: getattr(tl, op)(t, dim, keepdim), lambda t: getattr(torch, op)(t, dim, keepdim), x)


def test_amax_with_infinities_keeps_the_value():
    x = np.array([[1.0, np.inf, 2.0], [-np.inf, -np.inf, -np.inf]], np.float32)
    a = tl.tensor(x, requires_grad=True)
    same(a.amax(1), torch.tensor(x).amax(1))
    same(a.amin(1), torch.tensor(x).amin(1))


def test_binary_max_is_maximum():
    x, y = rand(3, 4), rand(4)
    same(tl.max(tl.tensor(x), tl.tensor(y)), torch.max(torch.tensor(x), torch.tensor(y)))
    same(tl.tensor(x).min(tl.tensor(y)), torch.tensor(x).min(torch.tensor(y)))


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_of_empty_raises_like_torch(op):
    with pytest.raises(ShapeError, match=op):
        getattr(tl.zeros(0, 3), op)()
    with pytest.raises(ShapeError, match=op):
        getattr(tl.zeros(3, 0), op)(1)
    with pytest.raises(ShapeError, match="amax"):
        tl.zeros(3, 0).amax(1)
    same(tl.zeros(0, 3).max(1), torch.zeros(0, 3).max(1))


def test_nan_propagates_through_max_and_median():
    x = np.array([[1.0, np.nan, 2.0, np.nan], [3.0, 1.0, 2.0, 0.0]], np.float32)
    a, b = tl.tensor(x), torch.tensor(x)
    for f in (lambda t: t.max(1), lambda t: t.min(1), lambda t: t.median(1), lambda t: t.argmax(1),
              lambda t: t.sort(1), lambda t: t.sort(1, descending=True), lambda t: t.topk(2, 1),
              lambda t: t.cummax(1), lambda t: t.cummin(1), lambda t: t.nanmedian(1), lambda t: t.max(),
              lambda t: t.median(), lambda t: t.nansum(1), lambda t: t.nanmean(0)):
        same(f(a), f(b))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (1, False), (-1, True), (0, False)])
def test_argmax(op, dim, keepdim):
    x = ties(3, 5)
    same(getattr(tl, op)(tl.tensor(x), dim, keepdim), getattr(torch, op)(torch.tensor(x), dim, keepdim))
    same(getattr(tl.tensor(x), op)(dim=dim, keepdim=keepdim), getattr(torch.tensor(x), op)(dim=dim, keepdim=keepdim))


def test_aminmax():
    x = rand(3, 4)
    same(tl.aminmax(tl.tensor(x)), torch.aminmax(torch.tensor(x)))
    out = tl.tensor(x).aminmax(dim=1, keepdim=True)
    ref = torch.tensor(x).aminmax(dim=1, keepdim=True)
    same(out.min, ref.min)
    same(out.max, ref.max)


# ---- var / std / logsumexp --------------------------------------------------------------------

VAR_ARGS = [((), {}), ((1,), {}), ((0,), {"keepdim": True}), (((0, 2),), {}), ((1, False), {}), ((1, True, True), {}),
            ((), {"dim": -1, "correction": 0}), ((), {"dim": (0, 1), "correction": 2, "keepdim": True}),
            ((False,), {}), ((), {"unbiased": False})]


@pytest.mark.parametrize("op", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("args,kw", VAR_ARGS)
def test_var_std(op, args, kw):
    x = rand(3, 4, 5)
    grads(lambda t: getattr(tl, op)(t, *args, **kw), lambda t: getattr(torch, op)(t, *args, **kw), x)
    if op in ("var", "std"):
        same(getattr(tl.tensor(x), op)(*args, **kw), getattr(torch.tensor(x), op)(*args, **kw))


def test_var_with_too_few_entries_is_nan_or_inf():
    same(tl.tensor([1.0]).var(), torch.tensor([1.0]).var())
    same(tl.tensor([1.0, 2.0]).var(correction=3), torch.tensor([1.0, 2.0]).var(correction=3))


@pytest.mark.parametrize("dim,keepdim", [(1, False), ((0, 1), True), (-1, True), (0, False)])
def test_logsumexp(dim, keepdim):
    x = rand(3, 4) * 40
    grads(lambda t: tl.logsumexp(t, dim, keepdim), lambda t: torch.logsumexp(t, dim, keepdim), x, atol=1e-4)
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]], np.float32)
    same(tl.tensor(x).logsumexp(1), torch.tensor(x).logsumexp(1))
    same(tl.tensor([[1, 2], [3, 4]]).logsumexp(1), torch.tensor([[1, 2], [3, 4]]).logsumexp(1))
    same(tl.zeros(2, 0).logsumexp(1), torch.zeros(2, 0).logsumexp(1))


# ---- scans ------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), 1), ((), 0), ((0, 3), 1)])
def test_cumsum_cumprod(op, shape, dim):
    x = rand(*shape)
    if op == "cumprod" and x.size > 4:
        x.reshape(-1)[[1, 4]] = 0.0
    grads(lambda t: getattr(tl, op)(t, dim), lambda t: getattr(torch, op)(t, dim), x)
    grads(lambda t: getattr(t, op)(dim=dim, dtype=tl.float64), lambda t: getattr(t, op)(dim=dim, dtype=torch.float64),
          x)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 6), 1), ((3, 6), 0), ((2, 3, 4), -1), ((), 0)])
def test_cummax(op, shape, dim):
    grads(lambda t: getattr(t, op)(dim), lambda t: getattr(t, op)(dim), ties(*shape))
    x = RNG.integers(-3, 3, size=shape)
    same(getattr(tl.tensor(x), op)(dim), getattr(torch.tensor(x), op)(dim))


# ---- all / any / count_nonzero ----------------------------------------------------------------

@pytest.mark.parametrize("op", ["all", "any", "count_nonzero"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 1)])
def test_logical_reductions(op, dim):
    for x in (RNG.integers(0, 2, size=(3, 4)), RNG.integers(0, 2, size=(3, 4)).astype(bool),
              np.array([[0.0, np.nan, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0], [0.0] * 4], np.float32), np.ones((3, 4))):
        a, b = tl.tensor(x), torch.tensor(x)
        if op == "count_nonzero":
            same(tl.count_nonzero(a, dim), torch.count_nonzero(b, dim))
        elif dim is None:
            same(getattr(a, op)(), getattr(b, op)())
        else:
            same(getattr(tl, op)(a, dim), getattr(torch, op)(b, dim))
            same(getattr(a, op)(dim, keepdim=True), getattr(b, op)(dim, keepdim=True))
    same(tl.zeros(0).all(), torch.zeros(0).all())
    same(tl.zeros(0).any(), torch.zeros(0).any())


# ---- sorting and selection --------------------------------------------------------------------

@pytest.mark.parametrize("shape,dim", [((9,), -1), ((4, 9), 1), ((4, 9), 0), ((2, 5, 3), 1), ((), 0), ((0, 3), 1)])
@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort(shape, dim, descending):
    x = ties(*shape)
    f = lambda m: lambda t: m.sort(t, dim=dim, descending=descending, stable=True)
    grads(f(tl), f(torch), x)
    same(tl.argsort(tl.tensor(x), dim, descending, stable=True),
         torch.argsort(torch.tensor(x), dim=dim, descending=descending, stable=True))
    same(tl.tensor(x).sort(dim, descending), torch.tensor(x).sort(dim=dim, descending=descending, stable=True))


def test_sort_without_ties_and_msort():
    x = rand(5, 6)
    same(tl.tensor(x).sort(), torch.tensor(x).sort())
    same(tl.tensor(x).argsort(dim=0), torch.tensor(x).argsort(dim=0))
    same(tl.msort(tl.tensor(x)), torch.msort(torch.tensor(x)))
    same(tl.tensor(x.astype(np.int64) * 3).sort(1), torch.tensor(x.astype(np.int64) * 3).sort(dim=1, stable=True))


@pytest.mark.parametrize("k,dim,largest", [(3, -1, True), (2, 0, True), (1, 1, False), (4, -1, False), (0, 1, True)])
def test_topk(k, dim, largest):
    x = rand(4, 6)
    grads(lambda t: t.topk(k, dim, largest), lambda t: t.topk(k, dim, largest), x)
    grads(lambda t: tl.topk(t, k, dim=dim, largest=largest, sorted=True),
          lambda t: torch.topk(t, k, dim=dim, largest=largest, sorted=True), x)
    with pytest.raises(IndexRangeError, match="topk"):
        tl.tensor(x).topk(7)


@pytest.mark.parametrize("k,dim,keepdim", [(1, -1, False), (3, 1, True), (2, 0, False), (4, 0, True)])
def test_kthvalue(k, dim, keepdim):
    x = rand(4, 6)
    grads(lambda t: t.kthvalue(k, dim, keepdim), lambda t: t.kthvalue(k, dim, keepdim), x)
    with pytest.raises(IndexRangeError, match="kthvalue"):
        tl.tensor(x).kthvalue(0)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("shape,dim,keepdim", [((7,), None, False), ((6,), None, False), ((4, 6), 1, False),
                                               ((4, 5), 0, True), ((2, 3, 4), -1, False), ((), None, False),
                                               ((), 0, False)])
def test_median(op, shape, dim, keepdim):
    x = ties(*shape, hi=4)
    if dim is None:
        grads(lambda t: getattr(t, op)(), lambda t: getattr(t, op)(), rand(*shape))
    else:
        grads(lambda t: getattr(t, op)(dim, keepdim), lambda t: getattr(t, op)(dim, keepdim), x)


def test_median_ignores_nothing_and_nanmedian_ignores_nans():
    x = np.array([[np.nan, 1.0, 3.0, 2.0], [np.nan] * 4, [4.0, np.nan, 1.0, np.nan]], np.float32)
    same(tl.tensor(x).median(1), torch.tensor(x).median(1))
    # torch's index for an all-NaN row of nanmedian depends on its unstable sort: rows with numbers only.
    same(tl.tensor(x[[0, 2]]).nanmedian(1), torch.tensor(x[[0, 2]]).nanmedian(1))
    assert np.isnan(tl.tensor(x).nanmedian(1).values.numpy()[1])
    for op in ("median", "nanmedian"):
        same(getattr(tl.tensor(x[2]), op)(), getattr(torch.tensor(x[2]), op)())


@pytest.mark.parametrize("shape,dim,keepdim", [((9,), -1, False), ((4, 9), 1, True), ((4, 9), 0, False),
                                               ((2, 3, 7), 1, False)])
def test_mode(shape, dim, keepdim):
    x = ties(*shape, hi=3)
    grads(lambda t: t.mode(dim, keepdim), lambda t: t.mode(dim, keepdim), x)
    same(tl.mode(tl.tensor(x.astype(np.int64)), dim), torch.mode(torch.tensor(x.astype(np.int64)), dim))


# ---- counting ---------------------------------------------------------------------------------

def test_unique():
    x = np.array([[3, 1, 3], [2, 1, 3]])
    for kw in ({}, {"return_inverse": True}, {"return_counts": True}, {"return_inverse": True, "return_counts": True},
               {"dim": 0, "return_inverse": True, "return_counts": True}, {"dim": 1, "return_counts": True},
               {"sorted": False}):
        same(tl.unique(tl.tensor(x), **kw), torch.unique(torch.tensor(x), **kw))
        same(tl.tensor(x).unique(**kw), torch.tensor(x).unique(**kw))
    f = np.array([np.nan, 1.0, np.nan, 0.5, 1.0], np.float32)
    same(tl.unique(tl.tensor(f), return_inverse=True, return_counts=True),
         torch.unique(torch.tensor(f), return_inverse=True, return_counts=True))
    same(tl.unique(tl.tensor(5.0), return_inverse=True), torch.unique(torch.tensor(5.0), return_inverse=True))
    same(tl.unique(tl.zeros(0)), torch.unique(torch.zeros(0)))
    rows = np.array([[1, 2], [1, 2], [0, 5], [1, 2], [1, 2]])
    for kw in ({}, {"return_inverse": True, "return_counts": True}, {"dim": 0, "return_counts": True}):
        same(tl.unique_consecutive(tl.tensor(rows), **kw), torch.unique_consecutive(torch.tensor(rows), **kw))


def test_bincount():
    x = np.array([1, 1, 3, 0, 7])
    same(tl.bincount(tl.tensor(x)), torch.bincount(torch.tensor(x)))
    same(tl.tensor(x).bincount(minlength=10), torch.tensor(x).bincount(minlength=10))
    for w in (rand(5), rand(5).astype(np.float64), np.arange(5)):
        same(tl.bincount(tl.tensor(x), tl.tensor(w)), torch.bincount(torch.tensor(x), torch.tensor(w)))
    same(tl.bincount(tl.tensor(np.zeros(0, np.int64))), torch.bincount(torch.tensor(np.zeros(0, np.int64))))
    with pytest.raises(DomainError, match="bincount"):
        tl.bincount(tl.tensor([1, -1]))
    with pytest.raises(DTypeError, match="bincount"):
        tl.bincount(tl.tensor([1.0]))


def test_histc():
    x = np.array([0.0, 0.1, 0.2, 0.3, 0.7, 1.0, 0.99999, 2.0, -1.0, np.nan], np.float32)
    for args in ((), (10, 0, 1), (4, -1, 1), (3, 0.25, 0.5)):
        same(tl.histc(tl.tensor(x[:-1]), *args), torch.histc(torch.tensor(x[:-1]), *args))
    same(tl.tensor(x).histc(10, 0, 1), torch.tensor(x).histc(10, 0, 1))
    r = rand(1000)
    same(tl.histc(tl.tensor(r), bins=17), torch.histc(torch.tensor(r), bins=17))
    same(tl.histc(tl.tensor([1.0, 1.0]), bins=4), torch.histc(torch.tensor([1.0, 1.0]), bins=4))
    same(tl.histc(tl.zeros(0), bins=3), torch.histc(torch.zeros(0), bins=3))
    same(tl.histc(tl.tensor(r.astype(np.float64)), 5, -1, 1), torch.histc(torch.tensor(r.astype(np.float64)), 5, -1, 1))
    with pytest.raises(DTypeError, match="histc"):
        tl.histc(tl.tensor([1, 2]))
    with pytest.raises(DomainError, match="histc"):
        tl.histc(tl.tensor([1.0]), 3, 2, 1)


def test_searchsorted_and_bucketize():
    seq = np.array([1, 3, 3, 5, 7])
    vals = np.array([[0, 3, 8], [5, 4, 1]])
    for kw in ({}, {"right": True}, {"side": "right"}, {"side": "left"}, {"out_int32": True}):
        same(tl.searchsorted(tl.tensor(seq), tl.tensor(vals), **kw),
             torch.searchsorted(torch.tensor(seq), torch.tensor(vals), **kw))
        same(tl.bucketize(tl.tensor(vals), tl.tensor(seq), right=kw.get("right", False)),
             torch.bucketize(torch.tensor(vals), torch.tensor(seq), right=kw.get("right", False)))
    nd = np.sort(rand(2, 3, 6), axis=-1)
    v = rand(2, 3, 4)
    v[..., 0] = nd[..., 2]
    for right in (False, True):
        same(tl.searchsorted(tl.tensor(nd), tl.tensor(v), right=right),
             torch.searchsorted(torch.tensor(nd), torch.tensor(v), right=right))
    same(tl.searchsorted(tl.tensor(seq), 3), torch.searchsorted(torch.tensor(seq), 3))
    same(tl.searchsorted(tl.tensor([0.1, 0.2]), 0.1), torch.searchsorted(torch.tensor([0.1, 0.2]), 0.1))
    perm = np.array([2, 0, 1])
    unsorted = np.array([3.0, 5.0, 1.0])
    same(tl.searchsorted(tl.tensor(unsorted), tl.tensor([2.0, 4.0]), sorter=tl.tensor(perm)),
         torch.searchsorted(torch.tensor(unsorted), torch.tensor([2.0, 4.0]), sorter=torch.tensor(perm)))
    with pytest.raises(ShapeError, match="searchsorted"):
        tl.searchsorted(tl.tensor(nd), tl.tensor(rand(3, 4)))
    with pytest.raises(ShapeError, match="bucketize"):
        tl.bucketize(tl.tensor(v), tl.tensor(nd))


def test_diff():
    x = rand(3, 5)
    grads(lambda t: t.diff(), lambda t: t.diff(), x)
    grads(lambda t: tl.diff(t, n=2, dim=0), lambda t: torch.diff(t, n=2, dim=0), x)
    grads(lambda t: t.diff(dim=1, prepend=tl.tensor(x[:, :2]), append=tl.tensor(x[:, :1])),
          lambda t: t.diff(dim=1, prepend=torch.tensor(x[:, :2]), append=torch.tensor(x[:, :1])), x)
    b = np.array([True, True, False, True])
    same(tl.tensor(b).diff(), torch.tensor(b).diff())


# ---- layouts, errors, random shapes -------------------------------------------------------------

def test_non_contiguous_inputs():
    x = rand(5, 6)
    cases = [lambda t: t.sum(0), lambda t: t.amax(1), lambda t: t.max(0), lambda t: t.sort(1),
             lambda t: t.cumsum(0), lambda t: t.cumprod(1), lambda t: t.var(1), lambda t: t.median(0),
             lambda t: t.topk(2, 0), lambda t: t.logsumexp(1), lambda t: t.cummax(1)]
    for f in cases:
        grads(lambda t, f=f: f(t.transpose(0, 1)), lambda t, f=f: f(t.t()), x)
        grads(lambda t, f=f: f(t[1:, ::2]), lambda t, f=f: f(t[1:, ::2]), x)


def test_bad_dims_raise_shape_errors():
    x = tl.ones(2, 3)
    for f in (lambda: x.sum(2), lambda: x.max(-3), lambda: x.cumsum(5), lambda: x.sort(2), lambda: x.amax((0, 0)),
              lambda: x.prod((0, 1)), lambda: x.median(3), lambda: tl.logsumexp(x, 4)):
        with pytest.raises(ShapeError):
            f()


def test_return_types_unpack_and_index():
    out = tl.tensor([[1.0, 3.0], [4.0, 2.0]]).max(1)
    values, indices = out
    assert out[0] is values and out[1] is indices and len(out) == 2
    assert indices.dtype == tl.int64 and indices.tolist() == [1, 0]
    assert type(out).__name__ == "max" and "values" in repr(out)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), data=st.data())
def test_random_shapes(shape, data):
    x = ties(*shape, hi=4)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdim = data.draw(st.booleans())
    grads(lambda t: t.sum(dim, keepdim), lambda t: t.sum(dim, keepdim), x)
    grads(lambda t: t.cumsum(dim), lambda t: t.cumsum(dim), x)
    grads(lambda t: t.sort(dim, stable=True), lambda t: t.sort(dim=dim, stable=True), x)
    if shape[dim % len(shape)]:
        grads(lambda t: t.amax(dim, keepdim), lambda t: t.amax(dim, keepdim), x)
        grads(lambda t: t.max(dim, keepdim), lambda t: t.max(dim, keepdim), x)
        grads(lambda t: t.cummin(dim), lambda t: t.cummin(dim), x)


@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"p": 1, "dim": 0}, {"p": float("inf")}, {"p": -float("inf"), "dim": 1},
                                {"p": 3, "dim": 1, "keepdim": True}, {"p": 0}, {"p": "fro", "dim": (0, 1)}])
def test_norm_matches_torch(kw):
    a = np.random.default_rng(4).standard_normal((3, 4))
    x = tl.tensor(a.tolist(), requires_grad=True)
    t = torch.tensor(a.tolist(), requires_grad=True)
    r, q = x.norm(**kw), t.norm(**kw)
    np.testing.assert_allclose(r.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    if kw.get("p") != 0:
        r.sum().backward()
        q.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert tl.norm(x, **kw).shape == torch.norm(t, **kw).shape
