"""PyTorch's products, einsum and torch.linalg against torch itself: values, dtypes, shapes,
gradients and errors."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st

import torchlean as tl
import torchlean.linalg as tla
from torchlean.errors import DomainError, DTypeError, ShapeError

RTOL, ATOL = 2e-4, 2e-5


def _pair(a, dtype=np.float32, grad=True):
    a = np.asarray(a, dtype=dtype)
    return (tl.tensor(a, requires_grad=grad and a.dtype.kind == "f"),
            torch.tensor(a, requires_grad=grad and a.dtype.kind == "f"))


def _np(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else x.numpy()


def _close(got, want, rtol=RTOL, atol=ATOL, msg=""):
    assert tuple(got.shape) == tuple(want.shape), (msg, got.shape, tuple(want.shape))
    np.testing.assert_allclose(_np(got), _np(want), rtol=rtol, atol=atol, err_msg=msg)


def compare(f, g, *arrays, rtol=RTOL, atol=ATOL, grad=True, seed=0, dtype=np.float32):
    """``f`` (torchlean) and ``g`` (torch) on the same inputs: value, dtype, shape, and the gradient
    of a random projection of the output with respect to every float input."""
    pairs = [_pair(a, dtype, grad) for a in arrays]
    y, z = f(*[p[0] for p in pairs]), g(*[p[1] for p in pairs])
    _close(y, z, rtol, atol, "value")
    assert y.dtype.name == str(z.dtype).replace("torch.", ""), (y.dtype, z.dtype)
    if grad and z.requires_grad:
        w = np.random.default_rng(seed).standard_normal(tuple(z.shape)).astype(dtype)
        (y * tl.tensor(w)).sum().backward()
        (z * torch.tensor(w)).sum().backward()
        for (a, b) in pairs:
            if b.grad is not None:
                got = a.grad if a.grad is not None else tl.zeros(*a.shape)
                _close(got, b.grad, rtol * 10, atol * 10, "gradient")
    return y, z


R = np.random.default_rng(1)


def r(*shape):
    return R.standard_normal(shape)


# ---- products -------------------------------------------------------------------------------

PRODUCTS = [
    ("mm", lambda m, a, b: m.mm(a, b), [(2, 3), (3, 4)]),
    ("mv", lambda m, a, b: m.mv(a, b), [(2, 3), (3,)]),
    ("bmm", lambda m, a, b: m.bmm(a, b), [(2, 3, 4), (2, 4, 5)]),
    ("matmul 1-D 1-D", lambda m, a, b: m.matmul(a, b), [(3,), (3,)]),
    ("matmul broadcast", lambda m, a, b: m.matmul(a, b), [(2, 1, 3, 4), (5, 4, 2)]),
    ("matmul vector @ batch", lambda m, a, b: m.matmul(a, b), [(4,), (2, 4, 3)]),
    ("dot", lambda m, a, b: m.dot(a, b), [(5,), (5,)]),
    ("vdot", lambda m, a, b: m.vdot(a, b), [(5,), (5,)]),
    ("outer", lambda m, a, b: m.outer(a, b), [(3,), (4,)]),
    ("ger", lambda m, a, b: m.ger(a, b), [(3,), (2,)]),
    ("inner", lambda m, a, b: m.inner(a, b), [(2, 3), (4, 3)]),
    ("inner 0-d", lambda m, a, b: m.inner(a, b), [(), (2, 3)]),
    ("kron", lambda m, a, b: m.kron(a, b), [(2, 3), (3, 1, 2)]),
    ("tensordot int", lambda m, a, b: m.tensordot(a, b, 2), [(2, 3, 4), (3, 4, 5)]),
    ("tensordot 0", lambda m, a, b: m.tensordot(a, b, 0), [(2, 3), (4,)]),
    ("tensordot lists", lambda m, a, b: m.tensordot(a, b, ([0, 2], [2, 0])), [(2, 3, 4), (4, 5, 2)]),
    ("tensordot negative dims", lambda m, a, b: m.tensordot(a, b, ([-1], [0])), [(2, 3), (3, 2)]),
    ("cross dim", lambda m, a, b: m.cross(a, b, dim=0), [(3, 4), (3, 4)]),
    ("cross default dim", lambda m, a, b: m.cross(a, b), [(2, 3), (2, 3)]),
    ("linalg.cross broadcast", lambda m, a, b: m.linalg.cross(a, b), [(4, 3), (1, 3)]),
    ("linalg.vecdot", lambda m, a, b: m.linalg.vecdot(a, b), [(4, 3), (3,)]),
    ("linalg.vecdot dim", lambda m, a, b: m.linalg.vecdot(a, b, dim=0), [(3, 4), (3, 1)]),
    ("cdist", lambda m, a, b: m.cdist(a, b), [(2, 4, 3), (2, 5, 3)]),
    ("cdist p=1", lambda m, a, b: m.cdist(a, b, p=1), [(4, 3), (5, 3)]),
    ("cdist p=inf", lambda m, a, b: m.cdist(a, b, p=float("inf")), [(4, 3), (5, 3)]),
    ("cdist p=3", lambda m, a, b: m.cdist(a, b, p=3), [(4, 3), (5, 3)]),
    ("cdist broadcast batch", lambda m, a, b: m.cdist(a, b), [(2, 1, 4, 3), (3, 5, 3)]),
]


@pytest.mark.filterwarnings("ignore:Using torch.cross without specifying the dim")
@pytest.mark.parametrize("name,fn,shapes", PRODUCTS, ids=[p[0] for p in PRODUCTS])
def test_products_match_torch(name, fn, shapes):
    compare(lambda *a: fn(tl, *a), lambda *a: fn(torch, *a), *[r(*s) for s in shapes])


ADD = [
    ("addmm", lambda m, i, a, b: m.addmm(i, a, b), [(2, 4), (2, 3), (3, 4)]),
    ("addmm broadcast beta alpha", lambda m, i, a, b: m.addmm(i, a, b, beta=0.5, alpha=-2.0), [(4,), (2, 3), (3, 4)]),
    ("addmv", lambda m, i, a, b: m.addmv(i, a, b, beta=2.0, alpha=0.5), [(2,), (2, 3), (3,)]),
    ("addbmm", lambda m, i, a, b: m.addbmm(i, a, b, alpha=1.5), [(2, 4), (5, 2, 3), (5, 3, 4)]),
    ("baddbmm", lambda m, i, a, b: m.baddbmm(i, a, b, beta=0.25), [(5, 2, 4), (5, 2, 3), (5, 3, 4)]),
    ("baddbmm broadcast", lambda m, i, a, b: m.baddbmm(i, a, b), [(1, 4), (5, 2, 3), (5, 3, 4)]),
    ("method addmm", lambda m, i, a, b: i.addmm(a, b), [(2, 4), (2, 3), (3, 4)]),
]


@pytest.mark.parametrize("name,fn,shapes", ADD, ids=[p[0] for p in ADD])
def test_add_products_match_torch(name, fn, shapes):
    compare(lambda *a: fn(tl, *a), lambda *a: fn(torch, *a), *[r(*s) for s in shapes])


def test_addmm_beta_zero_ignores_nan_input():
    i = np.full((2, 2), np.nan)
    y, _ = compare(lambda i, a, b: tl.addmm(i, a, b, beta=0), lambda i, a, b: torch.addmm(i, a, b, beta=0),
                   i, r(2, 3), r(3, 2))
    assert np.isfinite(y.numpy()).all()


def test_chain_matmul_and_multi_dot():
    mats = [r(2, 3), r(3, 4), r(4, 2)]
    compare(lambda *a: tl.chain_matmul(*a), lambda *a: torch.linalg.multi_dot(list(a)), *mats)
    compare(lambda *a: tla.multi_dot(list(a)), lambda *a: torch.linalg.multi_dot(list(a)), r(3), r(3, 4), r(4))
    compare(lambda *a: tla.multi_dot(list(a)), lambda *a: torch.linalg.multi_dot(list(a)), r(2, 3), r(3, 4), r(4))


def test_trace_and_diag_embed():
    compare(tl.trace, torch.trace, r(3, 4))
    compare(lambda x: x.trace(), lambda x: x.trace(), r(3, 3))
    x = tl.tensor(np.arange(9).reshape(3, 3))
    assert tl.trace(x).item() == 12 and tl.trace(x).dtype == tl.int64
    for kw in ({}, {"offset": 1}, {"offset": -2}, {"offset": 1, "dim1": 0, "dim2": 2}, {"dim1": -1, "dim2": 0}):
        compare(lambda x, kw=kw: tl.diag_embed(x, **kw), lambda x, kw=kw: torch.diag_embed(x, **kw), r(2, 3))


def test_non_contiguous_operands():
    a, b = r(4, 3), r(5, 4)
    compare(lambda a, b: tl.mm(a.transpose(0, 1), b.transpose(0, 1)),
            lambda a, b: torch.mm(a.t(), b.t()), a, b)
    compare(lambda a, b: tl.matmul(a[1:3], b[:3, ::2]), lambda a, b: torch.matmul(a[1:3], b[:3, ::2]), a, b)
    compare(lambda a: tl.einsum("ij->ji", a[:, 1:]), lambda a: torch.einsum("ij->ji", a[:, 1:]), a)


def test_integer_products_stay_integer():
    a, b = np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4)
    for f in (lambda m, a, b: m.mm(a, b), lambda m, a, b: m.matmul(a, b),
              lambda m, a, b: m.einsum("ij,jk->ik", a, b)):
        y, z = f(tl, tl.tensor(a), tl.tensor(b)), f(torch, torch.tensor(a), torch.tensor(b))
        assert y.dtype == tl.int64 and y.tolist() == z.tolist()


def test_empty_dimensions():
    compare(tl.mm, torch.mm, r(2, 0), r(0, 3))
    compare(tl.mm, torch.mm, r(0, 3), r(3, 2))
    compare(lambda a, b: tl.einsum("bij,bjk->bik", a, b), lambda a, b: torch.einsum("bij,bjk->bik", a, b),
            r(0, 2, 3), r(0, 3, 2))
    compare(tl.cdist, torch.cdist, r(0, 3), r(4, 3))


@pytest.mark.parametrize("f", [
    lambda m, a, b: m.mm(a, b), lambda m, a, b: m.matmul(a, b), lambda m, a, b: m.bmm(a[None], b[None]),
    lambda m, a, b: m.einsum("ij,jk", a, b), lambda m, a, b: m.tensordot(a, b, 1),
    lambda m, a, b: m.addmm(a @ a.transpose(0, 1) if m is tl else a @ a.T, a, b),
    lambda m, a, b: m.dot(a[0], b[:, 0]), lambda m, a, b: m.inner(a, b.transpose(0, 1)),
    lambda m, a, b: m.mv(a, b[:, 0]), lambda m, a, b: m.linalg.cross(a, b.transpose(0, 1)),
    lambda m, a, b: m.cdist(a, b.transpose(0, 1)),
], ids=["mm", "matmul", "bmm", "einsum", "tensordot", "addmm", "dot", "inner", "mv", "cross", "cdist"])
def test_mixed_float_dtypes_raise_like_torch(f):
    a32, b64 = np.ones((3, 3), np.float32), np.ones((3, 3), np.float64)
    with pytest.raises(RuntimeError):
        f(torch, torch.tensor(a32), torch.tensor(b64))
    with pytest.raises(DTypeError, match="dtype"):
        f(tl, tl.tensor(a32), tl.tensor(b64))


def test_outer_and_kron_promote_like_torch():
    for f in (lambda m, a, b: m.outer(a, b), lambda m, a, b: m.kron(a, b)):
        y = f(tl, tl.ones(2), tl.ones(3, dtype=tl.float64))
        z = f(torch, torch.ones(2), torch.ones(3, dtype=torch.float64))
        assert y.dtype == tl.float64 and z.dtype == torch.float64


def test_product_shape_errors():
    with pytest.raises(ShapeError, match=r"mm: mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x2\)"):
        tl.mm(tl.ones(2, 3), tl.ones(2, 2))
    with pytest.raises(ShapeError, match="mm"):
        tl.mm(tl.ones(2, 2, 2), tl.ones(2, 2))
    with pytest.raises(ShapeError, match="matmul"):
        tl.matmul(tl.tensor(1.0), tl.ones(3))
    with pytest.raises(ShapeError, match="dot"):
        tl.dot(tl.ones(3), tl.ones(4))
    with pytest.raises(ShapeError, match="trace"):
        tl.trace(tl.ones(2, 2, 2))
    with pytest.raises(ShapeError, match="tensordot"):
        tl.tensordot(tl.ones(2, 3), tl.ones(2, 3), ([1], [1, 0]))
    with pytest.raises(ShapeError, match="cross"):
        tla.cross(tl.ones(2, 4), tl.ones(2, 4))
    with pytest.raises(ShapeError, match="cdist"):
        tl.cdist(tl.ones(3, 2), tl.ones(3, 4))
    with pytest.raises(ShapeError, match="addmm"):
        tl.addmm(tl.ones(3, 3), tl.ones(2, 3), tl.ones(3, 4))


# ---- einsum ---------------------------------------------------------------------------------

EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("iji->j", [(2, 3, 2)]), ("ij->", [(2, 3)]), ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(2,), (3,)]), ("i,j->ji", [(2,), (3,)]), ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 2)]),
    ("...ij->...ji", [(2, 3, 4)]), ("...ij->...", [(2, 3, 4)]), ("bA", [(2, 3)]), ("ba,ab", [(2, 3), (3, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("bi,ci->bci", [(1, 3), (2, 3)]), ("a...,a...->...", [(3, 2), (3, 2)]),
    ("i j , j k -> i k", [(2, 3), (3, 2)]), ("ij,ij->ij", [(2, 3), (2, 3)]), ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("i,i,i->i", [(3,), (3,), (3,)]), (",->", [(), ()]), ("i->", [(0,)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_matches_torch(eq, shapes):
    compare(lambda *a: tl.einsum(eq, *a), lambda *a: torch.einsum(eq, *a), *[r(*s) for s in shapes])


def test_einsum_takes_a_list_and_reduces_to_batched_products():
    a, b = r(2, 3), r(3, 4)
    seen = []
    from torchlean.autograd import tracing
    with tracing(lambda op, inputs, attrs, out: seen.append(op)):
        y = tl.einsum("ij,jk->ik", [tl.tensor(a), tl.tensor(b)])
    assert "bmm" in seen and all(op in ("bmm", "permute", "reshape", "transpose", "broadcast_to", "reduce_sum")
                                 for op in seen), seen
    np.testing.assert_allclose(y.numpy(), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq,shapes,err", [
    ("ij,jk->ik", [(2, 3), (4, 5)], ShapeError), ("ij->k", [(2, 3)], ShapeError),
    ("ij,jk", [(2, 3)], ShapeError), ("i$->i", [(2, 2)], DomainError), ("ijk", [(2, 3)], ShapeError),
])
def test_einsum_errors(eq, shapes, err):
    with pytest.raises(err, match="einsum"):
        tl.einsum(eq, *[tl.ones(*s) for s in shapes])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=2), st.integers(1, 4), st.integers(1, 4),
       st.integers(1, 4), st.booleans())
def test_einsum_and_matmul_random_batches(batch, m, k, n, transpose):
    rng = np.random.default_rng(len(batch) * 100 + m * 10 + n)
    a = rng.standard_normal(tuple(batch) + ((k, m) if transpose else (m, k)))
    b = rng.standard_normal((k, n))
    eq = "...ki,kj->...ij" if transpose else "...ik,kj->...ij"
    compare(lambda x, y: tl.einsum(eq, x, y), lambda x, y: torch.einsum(eq, x, y), a, b)
    compare(lambda x, y: tl.matmul(x.transpose(-1, -2) if transpose else x, y),
            lambda x, y: torch.matmul(x.mT if transpose else x, y), a, b)


# ---- torch.linalg: solves and inverses ------------------------------------------------------

def wellcond(*shape):
    return r(*shape) + shape[-1] * np.eye(shape[-1])


def spd(*shape):
    a = r(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def test_inv_and_solve():
    compare(tla.inv, torch.linalg.inv, wellcond(3, 3))
    compare(tla.inv, torch.linalg.inv, wellcond(2, 4, 4))
    compare(tla.solve, torch.linalg.solve, wellcond(3, 3), r(3))
    compare(tla.solve, torch.linalg.solve, wellcond(2, 3, 3), r(2, 3))
    compare(tla.solve, torch.linalg.solve, wellcond(2, 3, 3), r(3, 2))
    compare(tla.solve, torch.linalg.solve, wellcond(3, 3), r(2, 3, 4))
    compare(lambda a, b: tla.solve(a, b, left=False), lambda a, b: torch.linalg.solve(a, b, left=False),
            wellcond(3, 3), r(2, 3))
    compare(tla.solve, torch.linalg.solve, wellcond(3, 3), r(3, 2), dtype=np.float64, rtol=1e-10, atol=1e-12)
    compare(lambda a, b: tla.solve(a.transpose(0, 1), b[:, 1:]),
            lambda a, b: torch.linalg.solve(a.t(), b[:, 1:]), wellcond(3, 3), r(3, 3))


def test_singular_and_non_square_errors():
    for f, name in ((tla.inv, "linalg.inv"), (lambda a: tla.solve(a, tl.ones(2)), "linalg.solve"),
                    (lambda a: tla.lstsq(a, tl.ones(2, 1)), "linalg.lstsq")):
        with pytest.raises(tla.LinAlgError, match=name + ".*singular"):
            f(tl.zeros(2, 2))
    with pytest.raises(tla.LinAlgError, match="linalg.cholesky.*positive-definite"):
        tla.cholesky(-tl.tensor(np.eye(2, dtype=np.float32)))
    for f in (tla.inv, tla.det, tla.slogdet, tla.cholesky, tla.eigh, tla.eigvalsh,
              lambda a: tla.solve(a, tl.ones(2))):
        with pytest.raises(ShapeError, match="square"):
            f(tl.ones(2, 3))
    for f in (tla.inv, tla.det, tla.svd, tla.qr, tla.vector_norm, tla.norm):
        with pytest.raises(DTypeError, match="floating point"):
            f(tl.tensor(np.ones((2, 2), dtype=np.int64)))
    with pytest.raises(DTypeError, match="same dtype"):
        tla.solve(tl.ones(2, 2), tl.ones(2, dtype=tl.float64))
    with pytest.raises(DomainError, match="mode"):
        tla.qr(tl.ones(2, 2), mode="full")
    with pytest.raises(DomainError, match="UPLO"):
        tla.eigh(tl.ones(2, 2), UPLO="X")


def test_cholesky():
    compare(tla.cholesky, torch.linalg.cholesky, spd(3, 3))
    compare(lambda a: tla.cholesky(a, upper=True), lambda a: torch.linalg.cholesky(a, upper=True), spd(2, 4, 4))


# ---- decompositions -------------------------------------------------------------------------

@pytest.mark.parametrize("shape,mode", [((4, 3), "reduced"), ((3, 5), "reduced"), ((2, 3, 3), "reduced"),
                                        ((3, 4), "complete"), ((2, 2, 3), "complete"), ((4, 3), "r")])
def test_qr(shape, mode):
    a = r(*shape)
    grad = not (mode == "r" or (mode == "complete" and shape[-2] > shape[-1]))
    for i in range(2):
        compare(lambda x, i=i: tla.qr(x, mode=mode)[i], lambda x, i=i: torch.linalg.qr(x, mode=mode)[i], a, grad=grad)
    q, rr = tla.qr(tl.tensor(a, dtype=tl.float32), mode)
    assert tla.qr(tl.tensor(a), mode).Q.shape == q.shape
    if mode != "r":
        np.testing.assert_allclose((q @ rr).numpy(), a, rtol=1e-4, atol=1e-5)


def test_qr_without_q_is_not_differentiable():
    x = tl.tensor(r(4, 3), requires_grad=True)
    with pytest.raises(DomainError, match="mode='r'"):
        tla.qr(x, mode="r").R.sum().backward()


def _sign_fixed(v, axis=-2):
    """torch's vectors with our sign convention: largest-magnitude entry of each positive."""
    i = v.abs().argmax(axis, keepdim=True)
    return v * torch.where(torch.gather(v, axis, i) < 0, -1.0, 1.0)


def _sv_matrix(m, n, batch=()):
    u = np.linalg.qr(r(*batch, m, m))[0]
    v = np.linalg.qr(r(*batch, n, n))[0]
    s = np.zeros(batch + (m, n))
    k = np.arange(min(m, n))
    s[..., k, k] = np.linspace(3.0, 0.5, len(k))
    return u @ s @ v


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 3, 3)])
def test_svd(shape):
    a = _sv_matrix(*shape[-2:], shape[:-2])
    compare(lambda x: tla.svd(x, full_matrices=False).S, lambda x: torch.linalg.svd(x, full_matrices=False).S, a)
    compare(lambda x: tla.svd(x, full_matrices=False).U,
            lambda x: _sign_fixed(torch.linalg.svd(x, full_matrices=False).U), a)

    def vh_torch(x):
        u, _, vh = torch.linalg.svd(x, full_matrices=False)
        i = u.abs().argmax(-2, keepdim=True)
        return vh * torch.where(torch.gather(u, -2, i) < 0, -1.0, 1.0).mT

    compare(lambda x: tla.svd(x, full_matrices=False).Vh, vh_torch, a)
    compare(tla.svdvals, torch.linalg.svdvals, a)
    U, S, Vh = tla.svd(tl.tensor(a, dtype=tl.float32))
    assert U.shape == (*shape[:-1], shape[-2]) and Vh.shape == (*shape[:-2], shape[-1], shape[-1])
    k = min(shape[-2:])
    np.testing.assert_allclose((U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :], a, rtol=1e-4, atol=1e-5)


def test_svdvals_gradient_is_finite_at_repeated_values():
    compare(tla.svdvals, torch.linalg.svdvals, np.eye(3) * 2)
    compare(lambda x: tla.eigvalsh(x), torch.linalg.eigvalsh, np.eye(3))


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(uplo):
    a = spd(2, 4, 4) + np.triu(r(4, 4), 1) * (uplo == "L") + np.tril(r(4, 4), -1) * (uplo == "U")
    compare(lambda x: tla.eigh(x, UPLO=uplo).eigenvalues, lambda x: torch.linalg.eigh(x, UPLO=uplo).eigenvalues, a)
    compare(lambda x: tla.eigh(x, UPLO=uplo).eigenvectors,
            lambda x: _sign_fixed(torch.linalg.eigh(x, UPLO=uplo).eigenvectors), a)
    compare(lambda x: tla.eigvalsh(x, UPLO=uplo), lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a)


def test_det_and_slogdet():
    compare(tla.det, torch.linalg.det, r(3, 3))
    compare(tla.det, torch.linalg.det, r(2, 4, 4))
    compare(lambda x: tla.slogdet(x).logabsdet, lambda x: torch.linalg.slogdet(x).logabsdet, wellcond(2, 3, 3) * -1)
    compare(lambda x: tla.slogdet(x).sign, lambda x: torch.linalg.slogdet(x).sign, wellcond(2, 3, 3) * -1, grad=False)
    compare(lambda x: x.det(), lambda x: x.det(), r(3, 3))


def test_top_level_inverse_det_logdet_matrix_power_diagonal():
    a = wellcond(2, 3, 3)
    compare(tl.inverse, torch.inverse, a)
    compare(lambda x: x.inverse(), lambda x: x.inverse(), a)
    compare(lambda x: x.det(), lambda x: x.det(), a)
    compare(lambda x: tl.slogdet(x).logabsdet, lambda x: torch.slogdet(x).logabsdet, a)
    compare(tl.logdet, torch.logdet, spd(3, 3))
    y, z = tl.logdet(tl.tensor(-np.eye(3))), torch.logdet(torch.tensor(-np.eye(3)))
    assert math.isnan(y.item()) and math.isnan(z.item())
    for n in (0, 1, 2, 5, -1, -3):
        compare(lambda x, n=n: x.matrix_power(n), lambda x, n=n: x.matrix_power(n), a * 0.4, rtol=1e-3, atol=1e-4)
        compare(lambda x, n=n: tla.matrix_power(x, n), lambda x, n=n: torch.linalg.matrix_power(x, n), a * 0.4,
                rtol=1e-3, atol=1e-4)
    for kw in ({}, {"offset": 1}, {"offset": -1}, {"dim1": 0, "dim2": 2}):
        compare(lambda x, kw=kw: tla.diagonal(x, **kw), lambda x, kw=kw: torch.linalg.diagonal(x, **kw), r(2, 3, 4))
    x = tl.tensor(np.arange(4).reshape(2, 2))
    assert tl.matrix_power(x, 3).tolist() == torch.tensor(np.arange(4).reshape(2, 2)).matrix_power(3).tolist()


def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix():
    a = tl.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    tla.det(a).backward()
    np.testing.assert_allclose(a.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-5)


@pytest.mark.parametrize("shape_a,shape_b", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 5, 3), (2, 5, 2)),
                                             ((5, 3), (5,)), ((4, 4), (4, 1))])
def test_lstsq(shape_a, shape_b):
    a, b = r(*shape_a), r(*shape_b)
    compare(lambda x, y: tla.lstsq(x, y).solution, lambda x, y: torch.linalg.lstsq(x, y).solution, a, b,
            rtol=1e-3, atol=1e-4)
    got, want = tla.lstsq(tl.tensor(a, dtype=tl.float32), tl.tensor(b, dtype=tl.float32)), \
        torch.linalg.lstsq(torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32))
    assert got.rank.tolist() == want.rank.tolist() and got.rank.dtype == tl.int64
    assert got.residuals.shape == tuple(want.residuals.shape) == (0,)
    for driver in ("gelsd", "gels"):
        g = tla.lstsq(tl.tensor(a, dtype=tl.float32), tl.tensor(b, dtype=tl.float32), driver=driver)
        w = torch.linalg.lstsq(torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32),
                               driver=driver)
        for field in ("residuals", "singular_values", "rank"):
            _close(getattr(g, field), getattr(w, field), 1e-3, 1e-4, f"{driver} {field}")


def test_matrix_rank_and_pinv():
    low = r(5, 2) @ r(2, 4)
    for x in (low, r(3, 4), np.zeros((3, 3)), r(2, 4, 3)):
        assert tla.matrix_rank(tl.tensor(x, dtype=tl.float32)).tolist() == \
            torch.linalg.matrix_rank(torch.tensor(x, dtype=torch.float32)).tolist()
    assert tla.matrix_rank(tl.tensor(low, dtype=tl.float32)).dtype == tl.int64
    s = spd(3, 3)
    s[2] = s[1]
    s[:, 2] = s[:, 1]
    assert tla.matrix_rank(tl.tensor(s, dtype=tl.float32), hermitian=True).item() == \
        torch.linalg.matrix_rank(torch.tensor(s, dtype=torch.float32), hermitian=True).item()
    assert tla.matrix_rank(tl.tensor(low, dtype=tl.float32), atol=1e3).item() == 0
    compare(tla.pinv, torch.linalg.pinv, r(5, 3))
    compare(tla.pinv, torch.linalg.pinv, r(3, 5))
    compare(tla.pinv, torch.linalg.pinv, np.eye(3))
    compare(tla.pinv, torch.linalg.pinv, low, grad=False, rtol=1e-3, atol=1e-4)


# ---- norms ----------------------------------------------------------------------------------

@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, float("inf"), -float("inf")])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_vector_norm(ord, dim, keepdim):
    x = r(2, 3, 4)
    x[0, 0, 0] = 0.0
    compare(lambda t: tla.vector_norm(t, ord, dim, keepdim), lambda t: torch.linalg.vector_norm(t, ord, dim, keepdim),
            x, grad=ord != 0)


def test_vector_norm_gradients_at_zero_and_ties():
    compare(tla.vector_norm, torch.linalg.vector_norm, np.zeros(3))
    compare(lambda t: tla.vector_norm(t, 3), lambda t: torch.linalg.vector_norm(t, 3), np.zeros(3))
    compare(lambda t: tla.vector_norm(t, float("inf")), lambda t: torch.linalg.vector_norm(t, float("inf")),
            np.array([1.0, -2.0, 2.0, 0.5]))
    compare(tla.vector_norm, torch.linalg.vector_norm, np.array(3.0))
    compare(lambda t: tla.vector_norm(t, dtype=tl.float64), lambda t: torch.linalg.vector_norm(t, dtype=torch.float64),
            r(3))


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, float("inf"), -float("inf")])
def test_matrix_norm(ord):
    a = _sv_matrix(3, 4, (2,))
    compare(lambda t: tla.matrix_norm(t, ord), lambda t: torch.linalg.matrix_norm(t, ord), a)
    compare(lambda t: tla.matrix_norm(t, ord, dim=(0, 2), keepdim=True),
            lambda t: torch.linalg.matrix_norm(t, ord, dim=(0, 2), keepdim=True), a)


@pytest.mark.parametrize("args", [{}, {"ord": "fro"}, {"ord": 1}, {"dim": 1}, {"dim": (0, 1), "ord": "nuc"},
                                  {"ord": float("inf"), "dim": 0, "keepdim": True}])
def test_norm_dispatch(args):
    compare(lambda t: tla.norm(t, **args), lambda t: torch.linalg.norm(t, **args), _sv_matrix(3, 4))
    if "dim" not in args and args.get("ord") in (None, 1):
        compare(lambda t: tla.norm(t, **args), lambda t: torch.linalg.norm(t, **args), r(5))


def test_results_are_named_tuples_with_torchs_fields():
    a = tl.tensor(spd(3, 3), dtype=tl.float32)
    assert tla.qr(a)._fields == ("Q", "R")
    assert tla.svd(a)._fields == ("U", "S", "Vh")
    assert tla.eigh(a)._fields == ("eigenvalues", "eigenvectors")
    assert tla.slogdet(a)._fields == ("sign", "logabsdet")
    assert tla.lstsq(a, a)._fields == ("solution", "residuals", "rank", "singular_values")
    assert tla.det(a).dtype == tl.float32 and tla.det(tl.tensor(spd(3, 3))).dtype == tl.float64
    assert issubclass(tla.LinAlgError, tl.TorchLeanError) and issubclass(tla.LinAlgError, RuntimeError)


def test_reference_mode_agrees():
    a, b = wellcond(2, 3, 3), r(2, 3, 2)
    with tl.options(fast_kernels=False):
        x = tla.solve(tl.tensor(a, dtype=tl.float32), tl.tensor(b, dtype=tl.float32))
        w = tla.eigh(tl.tensor(spd(3, 3), dtype=tl.float32)).eigenvalues
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-4, atol=1e-5)
    assert w.shape == (3,)


def test_decomposition_gradients_match_finite_differences_in_float64():
    """A sign-invariant scalar of several decompositions, its gradient against central differences."""
    a0 = wellcond(3, 3)

    def f(x):
        u, s, _ = tla.svd(x, full_matrices=False)
        _, rr = tla.qr(x)
        w, v = tla.eigh(x @ x.transpose(0, 1))
        return ((u * u[:, :1]).sum() + s.sum() + (rr * rr).sum() + tla.det(x) + (v * v * w).sum()
                + tla.inv(x).sum() + tla.cholesky(x @ x.transpose(0, 1)).sum())

    x = tl.tensor(a0, requires_grad=True)
    f(x).backward()
    eps, num = 1e-6, np.zeros_like(a0)
    for i in range(3):
        for j in range(3):
            d = np.zeros_like(a0)
            d[i, j] = eps
            num[i, j] = (f(tl.tensor(a0 + d)).item() - f(tl.tensor(a0 - d)).item()) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), num, rtol=1e-5, atol=1e-6)
    assert math.isfinite(float(x.grad.sum()))
