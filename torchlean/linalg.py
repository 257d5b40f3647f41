"""``torch.linalg``: norms, solves and decompositions with torch's signatures, results and gradients.

The decompositions are ops of the linalg family (:mod:`torchlean.spec.linalg`); one whose results are
several tensors (qr, svd, eigh, slogdet) returns one packed value that is split here by recorded
slices, so each result is differentiable on its own. Everything else is a formula over them.

Conventions: eigenvectors (eigh) and singular vectors (svd) are normalised so that the entry of
largest magnitude of each is positive, so every device and dtype gives the same vectors (torch
returns LAPACK's signs). A singular or not positive-definite matrix raises :class:`~torchlean.errors.LinAlgError`.

    >>> import torchlean as tl
    >>> a = tl.tensor([[4.0, 1.0], [1.0, 3.0]])
    >>> tl.linalg.solve(a, tl.tensor([1.0, 2.0])).tolist()
    [0.09090909361839294, 0.6363636255264282]
"""

from __future__ import annotations

import math
from collections import namedtuple
from numbers import Number

import numpy as np

from .autograd import no_grad
from .errors import DomainError, DTypeError, LinAlgError, ShapeError, fmt_shapes
from .ops.linalg import (SINGULAR, amax_even, checked, const, det, inv, linalg_cross, matrix_power, mT, multi_dot,
                         pnorm_last, same_dtype, slogdet)
from .ops.linalg import diagonal as _diagonal
from .ops.linalg import float_only as _float
from .ops.linalg import matmul as _matmul
from .ops.linalg import square as _square
from .spec.linalg import QR_MODES, qr_shapes, svd_shapes
from .ops import where
from .tensor import Tensor, record
from .amp import autocast_namespace

__all__ = ["LinAlgError", "norm", "vector_norm", "matrix_norm", "inv", "solve", "lstsq", "cholesky", "qr", "svd",
           "svdvals", "eigh", "eigvalsh", "det", "slogdet", "matrix_rank", "pinv", "cross", "matmul",
           "multi_dot", "vecdot", "diagonal", "matrix_power"]


_QR = namedtuple("linalg_qr", ["Q", "R"])
_SVD = namedtuple("linalg_svd", ["U", "S", "Vh"])
_EIGH = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
_LSTSQ = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def _split(y: Tensor, batch: tuple, shapes) -> list:
    """The results packed in ``y`` (see :mod:`torchlean.spec.linalg`), each a recorded slice."""
    out, at = [], 0
    for s in shapes:
        s = tuple(s)
        if len(s) < len(batch) or s[:len(batch)] != batch:
            out.append(const(np.zeros(s), y))
            continue
        k = math.prod(s[len(batch):])
        out.append(y[..., at:at + k].reshape(s))
        at += k
    return out


# ---- products -------------------------------------------------------------------------------

def matmul(input, other) -> Tensor:
    return _matmul(input, other)


def cross(input, other, *, dim=-1) -> Tensor:
    return linalg_cross(input, other, dim)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1) -> Tensor:
    """The ``offset`` diagonal of the matrices on axes ``dim1``, ``dim2``, as a last axis."""
    if not isinstance(A, Tensor) or A.ndim < 2:
        raise ShapeError("linalg.diagonal: expected a tensor with at least 2 dimensions")
    d1, d2 = (_dims("linalg.diagonal", d, A.ndim)[0] for d in (dim1, dim2))
    if d1 == d2:
        raise ShapeError(f"linalg.diagonal: diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = [i for i in range(A.ndim) if i not in (d1, d2)]
    x = A.permute(*rest, d1, d2)
    x = x[..., :, offset:] if offset >= 0 else x[..., -offset:, :]
    return _diagonal(x)


def vecdot(x, y, *, dim=-1) -> Tensor:
    """Dot products along ``dim`` after broadcasting (real tensors: no conjugation)."""
    same_dtype("linalg.vecdot", x, y)
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise ShapeError(f"linalg.vecdot: shapes {fmt_shapes(x.shape, y.shape)} do not broadcast") from None
    if not shape:
        raise ShapeError("linalg.vecdot: expected tensors with at least 1 dimension")
    return (x * y).sum(dim=dim)


# ---- solves and inverses --------------------------------------------------------------------

def solve(A, B, *, left=True) -> Tensor:
    """X with ``A X = B`` (``left=False``: ``X A = B``). ``B`` of shape (..., n) is a batch of
    vectors when it is 1-D or has A's batch shape; batch axes broadcast."""
    _square("linalg.solve", A)
    _float("linalg.solve", B)
    if A.dtype != B.dtype:
        raise DTypeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                         f"{A.dtype.name} and B of type {B.dtype.name} instead")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    if not left:
        if vector:
            raise ShapeError("linalg.solve: vector case is not supported when left=False")
        return mT(solve(mT(A), mT(B)))
    b = B.unsqueeze(-1) if vector else B
    x = checked("linalg.solve", record("linalg_solve", (A, b), {}), (A, b), SINGULAR)
    return x.squeeze(-1) if vector else x


def cholesky(A, *, upper=False) -> Tensor:
    _square("linalg.cholesky", A)
    L = checked("linalg.cholesky", record("linalg_cholesky", (A,), {}), (A,),
                "the factorization could not be completed because the input is not positive-definite")
    return mT(L) if upper else L


# ---- decompositions -------------------------------------------------------------------------

def _matrix(op, A):
    _float(op, A)
    if A.ndim < 2:
        raise ShapeError(f"{op}: The input tensor A must have at least 2 dimensions, got shape {A.shape}")


def qr(A, mode="reduced"):
    """``(Q, R)``; ``mode`` 'reduced', 'complete' or 'r' (Q empty)."""
    _matrix("linalg.qr", A)
    if mode not in QR_MODES:
        raise DomainError(f"linalg.qr: qr received unrecognized mode {mode!r} but expected one of "
                          f"'reduced' (default), 'r', or 'complete'")
    y = record("linalg_qr", (A,), {"mode": mode})
    return _QR(*_split(y, A.shape[:-2], qr_shapes(A.shape, mode)))


def svd(A, full_matrices=True, *, driver=None):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, S descending; vectors sign-normalised."""
    _matrix("linalg.svd", A)
    y = record("linalg_svd", (A,), {"full_matrices": bool(full_matrices)})
    return _SVD(*_split(y, A.shape[:-2], svd_shapes(A.shape, bool(full_matrices))))


def svdvals(A, *, driver=None) -> Tensor:
    """The singular values; their gradient is ``U diag(g) Vh``, finite at repeated values."""
    _matrix("linalg.svdvals", A)
    return svd(A, full_matrices=False).S


def _uplo(op, UPLO):
    if UPLO not in ("L", "U"):
        raise DomainError(f"{op}: Expected UPLO argument to be 'L' or 'U', but got {UPLO!r}")
    return UPLO == "U"


def eigh(A, UPLO="L"):
    """``(eigenvalues, eigenvectors)`` of the symmetric matrix read from one triangle; eigenvalues
    ascending, eigenvectors sign-normalised; gradients symmetric (torch's)."""
    _square("linalg.eigh", A)
    upper = _uplo("linalg.eigh", UPLO)
    n = A.shape[-1]
    y = record("linalg_eigh", (A,), {"upper": upper})
    batch = A.shape[:-2]
    return _EIGH(*_split(y, batch, (batch + (n,), batch + (n, n))))


def eigvalsh(A, UPLO="L") -> Tensor:
    _square("linalg.eigvalsh", A)
    return eigh(A, UPLO).eigenvalues


def lstsq(A, B, rcond=None, *, driver=None):
    """Least squares (m >= n) or minimum-norm (m < n) solution of ``A X = B`` for full-rank A, through
    the QR decomposition: ``X = R^-1 Q^T B`` or, with ``A^T = Q R``, ``X = Q R^-T B``. The other fields
    follow torch's CPU drivers ('gelsy' by default: rank, no residuals or singular values)."""
    _matrix("linalg.lstsq", A)
    _float("linalg.lstsq", B)
    if A.dtype != B.dtype:
        raise DTypeError(f"linalg.lstsq: Expected input and other to have the same dtype, but got "
                         f"{A.dtype.name} and {B.dtype.name}")
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise DomainError(f"linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
                          f"got {driver!r}")
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2:]
    if b.ndim < 2 or b.shape[-2] != m:
        raise ShapeError(f"linalg.lstsq: input.size(-2) should match other.size(-2), got shapes "
                         f"{fmt_shapes(A.shape, B.shape)}")
    if m >= n:
        Q, R = qr(A)
        x = checked("linalg.lstsq", record("linalg_solve", (R, _matmul(mT(Q), b)), {}), (A, b), SINGULAR)
    else:
        Q, R = qr(mT(A))
        x = _matmul(Q, checked("linalg.lstsq", record("linalg_solve", (mT(R), b), {}), (A, b), SINGULAR))
    sol = x.squeeze(-1) if vector else x
    empty = const(np.zeros(0), A)
    residuals = empty
    if driver in ("gels", "gelsd", "gelss") and m > n:
        r = _matmul(A, x) - b
        residuals = (r * r).sum(dim=-2)
    rank = Tensor(np.zeros(0, dtype=np.int64)) if driver == "gels" else matrix_rank(A.detach(), rtol=rcond)
    if A.device != "cpu" and driver == "gels":
        rank = rank.to("cuda")
    sv = svdvals(A) if driver in ("gelsd", "gelss") else empty
    return _LSTSQ(sol, residuals, rank, sv)


def _tolerance(A, S, atol, rtol, op):
    """torch's cutoff ``max(atol, rtol * max(S))``; without either, rtol = eps * max(m, n)."""
    if rtol is None:
        rtol = 0.0 if atol is not None and (not isinstance(atol, Number) or atol > 0) else \
            float(np.finfo(A.dtype.np).eps) * max(A.shape[-2:])
    smax = record("reduce_max", (S,), {"axis": -1, "keepdim": True}) if S.shape[-1] else S.sum(dim=-1, keepdim=True)
    tol = smax * float(rtol) if isinstance(rtol, Number) else smax * rtol.unsqueeze(-1)
    if atol is not None:
        a = const(np.asarray(float(atol)), A) if isinstance(atol, Number) else atol.unsqueeze(-1)
        tol = record("maximum", (tol, a.broadcast_to(tol.shape) if a.shape != tol.shape else a), {})
    return tol


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None) -> Tensor:
    """Number of singular values above ``max(atol, rtol * largest)`` (int64, no gradient)."""
    _matrix("linalg.matrix_rank", A)
    if tol is not None:
        atol, rtol = tol, 0.0
    with no_grad():
        S = eigvalsh(A).abs() if hermitian else svdvals(A)
        return (S > _tolerance(A, S, atol, rtol, "linalg.matrix_rank")).sum(dim=-1)


def pinv(A, *, atol=None, rtol=None, hermitian=False) -> Tensor:
    """Moore-Penrose pseudo-inverse. A matrix of full rank goes through the QR decomposition (its
    gradient is finite at repeated singular values); otherwise the SVD with torch's cutoff."""
    _matrix("linalg.pinv", A)
    m, n = A.shape[-2:]
    k = min(m, n)
    if k and atol is None and rtol is None and not hermitian and bool((matrix_rank(A).numpy() == k).all()):
        if m >= n:
            Q, R = qr(A)
            return solve(R, mT(Q))
        Q, R = qr(mT(A))
        return mT(solve(R, mT(Q)))
    U, S, Vh = svd(A, full_matrices=False)
    with no_grad():
        keep = S > _tolerance(A, S, atol, rtol, "linalg.pinv")
    s_inv = where(keep, 1.0 / where(keep, S, 1.0), 0.0)
    return _matmul(mT(Vh) * s_inv.unsqueeze(-2), mT(U))


# ---- norms ----------------------------------------------------------------------------------

def _dims(op, dim, ndim):
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise ShapeError(f"{op}: dimension {d} out of range for a tensor with {ndim} dimensions")
        out.append(int(d) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: dim {dim} appears multiple times")
    return tuple(out)


def _last(x: Tensor, dims: tuple):
    """``x`` with ``dims`` moved to the end and merged into one axis; and the shape that keepdim
    restores."""
    if x.ndim == 0:
        return x.reshape(1), ()
    rest = [i for i in range(x.ndim) if i not in dims]
    y = x.permute(*(rest + list(dims))) if rest + list(dims) != list(range(x.ndim)) else x
    y = y.reshape(tuple(x.shape[i] for i in rest) + (math.prod(x.shape[i] for i in dims),))
    keep = tuple(1 if i in dims else s for i, s in enumerate(x.shape))
    return y, keep


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """``(sum |x|^ord)^(1/ord)`` over ``dim`` (all axes when None); ord inf / -inf: max / min |x|,
    ord 0: the count of nonzeros. The gradient at x = 0 is 0, and ties of the inf norms share it."""
    _float("linalg.vector_norm", x)
    if dtype is not None:
        x = x.to(dtype=dtype)
    if isinstance(ord, bool) or not isinstance(ord, Number):
        raise DomainError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    dims = _dims("linalg.vector_norm", dim, x.ndim)
    y, keep = _last(x, dims)
    p = float(ord)
    if y.shape[-1] == 0 and p < 0:
        raise ShapeError(f"linalg.vector_norm: cannot compute the {ord} norm of an empty tensor")
    if p in (1.0, 2.0, 0.0, math.inf, -math.inf):
        out = pnorm_last(y, p, "linalg.vector_norm")
    else:
        a = y.abs()
        nz = a > 0
        t = where(nz, where(nz, a, 1.0) ** p, 0.0).sum(dim=-1)
        pos = t > 0
        out = where(pos, where(pos, t, 1.0) ** (1.0 / p), 0.0)
    if x.ndim == 0:
        out = out.reshape(())
    return out.reshape(keep) if keepdim else out


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None) -> Tensor:
    """'fro', 'nuc', 1, -1, 2, -2, inf, -inf over the two axes ``dim``."""
    _float("linalg.matrix_norm", A)
    if dtype is not None:
        A = A.to(dtype=dtype)
    if A.ndim < 2:
        raise ShapeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, got {A.shape}")
    d = _dims("linalg.matrix_norm", dim, A.ndim)
    if len(d) != 2:
        raise ShapeError(f"linalg.matrix_norm: dim must be a 2-tuple, got {dim}")
    rest = [i for i in range(A.ndim) if i not in d]
    M = A.permute(*(rest + list(d))) if rest + list(d) != list(range(A.ndim)) else A
    if ord == "fro":
        out = vector_norm(M, 2, dim=(-2, -1))
    elif ord == "nuc":
        out = svdvals(M).sum(dim=-1)
    elif ord in (2, -2):
        S = svdvals(M)
        out = S[..., 0] if ord == 2 else S[..., -1]
    elif ord in (1, -1, math.inf, -math.inf):
        axis = -2 if ord in (1, -1) else -1
        if M.shape[axis] == 0 or M.shape[-1 if axis == -2 else -2] == 0:
            raise ShapeError(f"linalg.matrix_norm: cannot compute the {ord} norm of an empty matrix")
        sums = M.abs().sum(dim=axis)
        out = amax_even(sums, -1, largest=ord > 0)
    else:
        raise DomainError(f"linalg.matrix_norm: Order {ord!r} not supported.")
    if keepdim:
        shape = tuple(1 if i in d else s for i, s in enumerate(A.shape))
        out = out.reshape(shape)
    return out


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    """``vector_norm`` or ``matrix_norm`` as torch picks: a 2-tuple ``dim`` (or a 2-D input with an
    ``ord`` and no ``dim``) is a matrix norm; no ord and no dim: the 2-norm of the flattened input."""
    _float("linalg.norm", A)
    if isinstance(ord, str) or (dim is not None and not isinstance(dim, (int, np.integer)) and len(dim) == 2) or \
            (dim is None and ord is not None and A.ndim == 2):
        if dim is None and A.ndim != 2:
            raise ShapeError(f"linalg.norm: input must be 1-D or 2-D when dim is None and ord is not None, "
                             f"got shape {A.shape}")
        return matrix_norm(A, "fro" if ord is None else ord, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if dim is None and ord is not None and A.ndim != 1:
        raise ShapeError(f"linalg.norm: input must be 1-D or 2-D when dim is None and ord is not None, "
                         f"got shape {A.shape}")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


# The decompositions of autocast's lists run in float32 inside an autocast region (torchlean.amp).
autocast_namespace(globals(), prefix="linalg_")
