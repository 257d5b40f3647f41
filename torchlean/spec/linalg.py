"""Linear algebra: the reference meaning of matmul, bmm, linear and linear_nobias, and of the
decompositions of ``torch.linalg`` (solve, cholesky, qr, svd, eigh, det, slogdet).

``matmul(a, b)`` is ``torch.matmul``: a 1-D ``a`` is promoted to a row ``(1, n)``
and a 1-D ``b`` to a column ``(n, 1)``, the product is taken over the last two
axes with the leading (batch) axes broadcast like NumPy, and the promoted axes
are removed again (so 1-D @ 1-D is a 0-d dot product). The VJP sums the
cotangent over the batch axes that broadcasting added or stretched.

``linear(w, b, x)`` keeps the seeds' argument order: ``w`` (out, in), ``b``
(out,), ``x`` (..., in), and means ``x @ w.T + b``.

The products are written as explicit index sums (``einsum``), independent of
the BLAS calls that the runtime uses.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> float(SPEC["matmul"].forward(np.array([1.0, 2.0]), np.array([3.0, 4.0])))
    11.0
"""

from __future__ import annotations

import numpy as np

from ..errors import DomainError, ShapeError, fmt_shapes
from ..shape import broadcast_shapes
from .elementwise import sum_to_shape
from .registry import defspec

# ---- matmul ---------------------------------------------------------------------------------

def matmul_plan(a: tuple, b: tuple, op: str = "matmul"):
    """Promoted shapes and output shape of ``torch.matmul`` on shapes ``a`` and ``b``.

    Returns ``(a2, b2, full, out)``: ``a2``/``b2`` are the operands with 1-D
    promotion applied, ``full`` the product shape before the promoted axes are
    removed (batch + (m, p)) and ``out`` the result shape.
    """
    a, b = tuple(a), tuple(b)
    if len(a) == 0 or len(b) == 0:
        raise ShapeError(f"{op}: shapes {fmt_shapes(a, b)}: both arguments need at least 1 axis")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(f"{op}: shapes {fmt_shapes(a, b)}: inner dimensions {a2[-1]} and {b2[-2]} differ")
    try:
        batch = broadcast_shapes(a2[:-2], b2[:-2], op=op)
    except ShapeError:
        raise ShapeError(f"{op}: shapes {fmt_shapes(a, b)}: batch dimensions "
                         f"{fmt_shapes(a2[:-2], b2[:-2])} do not broadcast") from None
    full = batch + (a2[-2], b2[-1])
    out = batch + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())
    return a2, b2, full, out


def _matmul_shape(a, b):
    return matmul_plan(a, b)[3]


def _mm(a, b):
    """Batched product over the last two axes; batch axes already broadcast-compatible."""
    return np.einsum("...ij,...jk->...ik", a, b)


def _matmul(a, b):
    a2, b2, full, out = matmul_plan(a.shape, b.shape)
    return _mm(a.reshape(a2), b.reshape(b2)).reshape(out)


def _matmul_vjp(g, a, b):
    a2, b2, full, _ = matmul_plan(a.shape, b.shape)
    A, B, G = a.reshape(a2), b.reshape(b2), np.asarray(g).reshape(full)
    ga = _mm(G, np.swapaxes(B, -1, -2))   # dL/dA = G B^T, batch-broadcast
    gb = _mm(np.swapaxes(A, -1, -2), G)   # dL/dB = A^T G
    return sum_to_shape(ga, a2).reshape(a.shape), sum_to_shape(gb, b2).reshape(b.shape)


defspec("matmul", _matmul, _matmul_vjp, _matmul_shape, 2)


# ---- bmm ------------------------------------------------------------------------------------

def _bmm_shape(a, b):
    a, b = tuple(a), tuple(b)
    if len(a) != 3 or len(b) != 3:
        raise ShapeError(f"bmm: shapes {fmt_shapes(a, b)}: both arguments must have 3 axes (batch, m, n)")
    if a[0] != b[0]:
        raise ShapeError(f"bmm: shapes {fmt_shapes(a, b)}: batch sizes {a[0]} and {b[0]} differ")
    if a[2] != b[1]:
        raise ShapeError(f"bmm: shapes {fmt_shapes(a, b)}: inner dimensions {a[2]} and {b[1]} differ")
    return (a[0], a[1], b[2])


defspec("bmm", _mm,
        lambda g, a, b: (_mm(g, np.swapaxes(b, 1, 2)), _mm(np.swapaxes(a, 1, 2), g)),
        _bmm_shape, 2)


# ---- linear ---------------------------------------------------------------------------------

def linear_shape(w, b, x, op: str = "linear"):
    """Output shape of ``x @ w.T (+ b)``; ``b`` is None for the bias-free form."""
    w, x = tuple(w), tuple(x)
    shapes = (w, x) if b is None else (w, tuple(b), x)
    names = "weight and input" if b is None else "weight, bias and input"
    if len(w) != 2:
        raise ShapeError(f"{op}: {names} {fmt_shapes(*shapes)}: weight must have 2 axes (out, in)")
    if len(x) == 0:
        raise ShapeError(f"{op}: {names} {fmt_shapes(*shapes)}: input must have at least 1 axis (..., in)")
    if x[-1] != w[1]:
        raise ShapeError(f"{op}: {names} {fmt_shapes(*shapes)}: input features {x[-1]} "
                         f"and weight in-features {w[1]} differ")
    if b is not None and tuple(b) != (w[0],):
        raise ShapeError(f"{op}: {names} {fmt_shapes(*shapes)}: bias must have shape ({w[0]},)")
    return x[:-1] + (w[0],)


def _affine(w, x):
    return np.einsum("...i,oi->...o", x, w)


def _linear_vjp_wx(g, w, x):
    # Leading axes of x are rows of one big product: dL/dw = sum over rows of g_row x_row^T.
    gw = np.einsum("no,ni->oi", np.reshape(g, (-1, w.shape[0])), x.reshape(-1, w.shape[1]))
    gx = np.einsum("...o,oi->...i", g, w)
    return gw, gx


def _linear_vjp(g, w, b, x):
    gw, gx = _linear_vjp_wx(g, w, x)
    gb = np.asarray(g).reshape(-1, w.shape[0]).sum(axis=0)
    return gw, gb, gx


# matmul(x, transpose(w)) + b as one op: one GEMM reading w in PyTorch's (out, in) layout (no
# transposed copy), the bias added in the same pass, dw and db from one pass over g.
_LINEAR_WHY = "one GEMM on w as stored, bias in the same pass, where matmul + transpose + add is three ops"
defspec("linear", lambda w, b, x: _affine(w, x) + b, _linear_vjp,
        lambda w, b, x: linear_shape(w, b, x), 3, why=_LINEAR_WHY)
defspec("linear_nobias", _affine, _linear_vjp_wx,
        lambda w, x: linear_shape(w, None, x, op="linear_nobias"), 2, why=_LINEAR_WHY)

__all__ = ["matmul_plan", "linear_shape"]


# ---- decompositions -------------------------------------------------------------------------
#
# Each decomposition with several results (qr, svd, eigh, slogdet) is one op whose value packs
# them: every result flattened over its matrix axes and concatenated along one last axis, in
# torch's order (``linalg_qr``: Q then R). The front end splits the packed value with recorded
# slices, so a cotangent reaches the op as one packed array.
#
# The cores below take the array module as ``xp`` (NumPy here and on the host, CuPy on CUDA),
# so the meaning and the kernels run one formula. VJPs follow Giles' "collected matrix
# derivative results" and Townsend's SVD derivative; a coefficient 1/(s_j - s_i) meets only
# its own entry of the cotangent, and an entry that is exactly zero contributes zero (so the
# gradient of the eigenvalues alone is finite at repeated eigenvalues, as in torch).


def square_shape(op, a):
    a = tuple(a)
    if len(a) < 2:
        raise ShapeError(f"{op}: the input tensor A must have at least 2 dimensions, got shape {a}")
    if a[-1] != a[-2]:
        raise ShapeError(f"{op}: A must be batches of square matrices, but they are {a[-2]} by {a[-1]} matrices")
    return a


def _matrix_shape(op, a):
    a = tuple(a)
    if len(a) < 2:
        raise ShapeError(f"{op}: the input tensor A must have at least 2 dimensions, got shape {a}")
    return a


def mT(x, xp=np):
    return xp.swapaxes(x, -1, -2)


def _safe_mul(f, x, xp=np):
    """``f * x`` with 0 where ``x`` is exactly 0 (an unused cotangent meets an infinite coefficient)."""
    with np.errstate(invalid="ignore"):
        return xp.where(x == 0, 0, f * x)


def _off_diag_inv(d, xp=np):
    """``F[..., i, j] = 1 / (d[j] - d[i])`` off the diagonal, 0 on it (inf where d[i] == d[j])."""
    e = d[..., None, :] - d[..., :, None]
    n = d.shape[-1]
    eye = xp.eye(n, dtype=bool)
    with np.errstate(divide="ignore"):
        return xp.where(eye, 0, 1 / xp.where(eye, 1, e)).astype(d.dtype)


def lapack(fn, shape, dtype, xp=np):
    """``fn()``, or NaN of ``shape`` where LAPACK reports a singular or not positive-definite matrix:
    the kernels follow IEEE (a failed factorization is NaN, as 0/0 is) and the front end raises
    torch's error for it (``linalg.cholesky``, ``linalg.solve``, ``linalg.inv``)."""
    try:
        return fn()
    except np.linalg.LinAlgError:
        return xp.full(shape, np.nan, dtype=dtype)


def fix_signs(v, xp=np):
    """Columns of ``v`` scaled by +-1 so that each one's entry of largest magnitude is positive (the
    first such entry on ties): a convention, so that every device and dtype gives one answer."""
    if v.shape[-2] == 0 or v.shape[-1] == 0:
        return v, xp.ones(v.shape[:-2] + (v.shape[-1],), dtype=v.dtype)
    i = xp.argmax(xp.abs(v), axis=-2)[..., None, :]
    s = xp.where(xp.take_along_axis(v, i, axis=-2) < 0, -1, 1).astype(v.dtype)
    return v * s, s[..., 0, :]


# -- solve

def solve_plan(a, b, op="linalg_solve"):
    """Batch shape of ``solve(a, b)`` for a (..., n, n) and b (..., n, k)."""
    a, b = square_shape(op, a), tuple(b)
    if len(b) < 2 or b[-2] != a[-1]:
        raise ShapeError(f"{op}: incompatible shapes of A and B for the equation AX = B "
                         f"({a[-2]}x{a[-1]} and {'x'.join(map(str, b[-2:])) or b})")
    try:
        return broadcast_shapes(a[:-2], b[:-2], op=op)
    except ShapeError:
        raise ShapeError(f"{op}: batch dimensions {fmt_shapes(a[:-2], b[:-2])} of A and B do not broadcast") from None


def solve_core(a, b, xp=np):
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    return lapack(lambda: xp.linalg.solve(a, b), b.shape, np.result_type(a.dtype, b.dtype), xp)


def solve_vjp_core(g, a, x, a_shape, b_shape, xp=np):
    batch = x.shape[:-2]
    at = mT(xp.broadcast_to(a, batch + a.shape[-2:]), xp)
    gb = lapack(lambda: xp.linalg.solve(at, g), g.shape, g.dtype, xp)
    ga = -(gb @ mT(x, xp))
    return ga, gb


defspec("linalg_solve", solve_core,
        lambda g, a, b: tuple(sum_to_shape(t, s) for t, s in
                              zip(solve_vjp_core(g, a, solve_core(a, b), a.shape, b.shape), (a.shape, b.shape))),
        lambda a, b: solve_plan(a, b) + (a[-1], b[-1]), 2)


# -- cholesky

def cholesky_core(a, xp=np):
    return lapack(lambda: xp.linalg.cholesky(a), a.shape, a.dtype, xp)


def cholesky_vjp_core(l, g, xp=np):
    """Murray (2016): gA = sym(L^-T Phi(L^T gL) L^-1), Phi = lower triangle with half the diagonal."""
    n = l.shape[-1]
    phi = xp.tril(mT(l, xp) @ g)
    phi = phi - 0.5 * phi * xp.eye(n, dtype=l.dtype)
    linv = lapack(lambda: xp.linalg.inv(l), l.shape, l.dtype, xp)
    ga = mT(linv, xp) @ phi @ linv
    return 0.5 * (ga + mT(ga, xp))


defspec("linalg_cholesky", cholesky_core, lambda g, a: (cholesky_vjp_core(cholesky_core(a), g),),
        lambda a: square_shape("linalg_cholesky", a), 1)


# -- qr

QR_MODES = ("reduced", "complete", "r")


def qr_shapes(a, mode, op="linalg_qr"):
    """Shapes of Q and R (Q is (0,) in mode 'r', as in torch)."""
    a = _matrix_shape(op, a)
    if mode not in QR_MODES:
        raise DomainError(f"{op}: qr received unrecognized mode {mode!r} but expected one of "
                          f"'reduced' (default), 'r', or 'complete'")
    batch, (m, n) = a[:-2], a[-2:]
    k = min(m, n)
    if mode == "r":
        return (0,), batch + (k, n)
    if mode == "complete":
        return batch + (m, m), batch + (m, n)
    return batch + (m, k), batch + (k, n)


def _packed_size(batch, shapes):
    return sum(int(np.prod(s[len(batch):])) if len(s) > len(batch) else 0 for s in shapes)


def qr_core(a, mode, xp=np):
    q, r = xp.linalg.qr(a, mode="reduced" if mode == "r" else mode) if a.size else (None, None)
    sq, sr = qr_shapes(a.shape, mode)
    if q is None:
        q, r = xp.zeros(sq, dtype=a.dtype), xp.zeros(sr, dtype=a.dtype)
    if mode == "r":
        q = xp.zeros((0,), dtype=a.dtype)
    return q, r


def _qr_square_vjp(q, r, gq, gr, xp=np):
    # m >= n (reduced): M = R gR^T - gQ^T Q; gA = (gQ + Q copyltu(M)) R^-T
    m_ = r @ mT(gr, xp) - mT(gq, xp) @ q
    low = xp.tril(m_, -1)
    c = low + mT(low, xp) + m_ * xp.eye(m_.shape[-1], dtype=m_.dtype)
    b = gq + q @ c
    bt = mT(b, xp)
    return mT(lapack(lambda: xp.linalg.solve(r, bt), bt.shape, bt.dtype, xp), xp)


def qr_vjp_core(a, q, r, gq, gr, mode, xp=np):
    m, n = a.shape[-2:]
    if mode == "r":
        raise DomainError("linalg_qr: the derivative of linalg.qr depends on Q, which is not computed when "
                          "mode='r'; use mode='reduced' to differentiate")
    if mode == "complete" and m > n:
        raise DomainError("linalg_qr: the QR decomposition is not differentiable when mode='complete' "
                          "and nrows > ncols")
    if m >= n:
        return _qr_square_vjp(q, r, gq, gr, xp)
    # m < n: A = [X | Y], R = [U | V], X = Q U square; Y = Q V adds Y gV^T to gQ.
    y, gu, gv = a[..., :, m:], gr[..., :, :m], gr[..., :, m:]
    gx = _qr_square_vjp(q, r[..., :, :m], gq + y @ mT(gv, xp), gu, xp)
    return xp.concatenate([gx, q @ gv], axis=-1)


def pack(parts, batch, xp=np):
    """Results flattened over their own axes and concatenated along one last axis."""
    return xp.concatenate([xp.reshape(p, batch + (-1,)) if p.ndim >= len(batch) and p.shape[:len(batch)] == batch
                           else xp.zeros(batch + (0,), dtype=p.dtype) for p in parts], axis=-1)


def unpack(y, batch, shapes, xp=np):
    out, at = [], 0
    for s in shapes:
        if len(s) < len(batch) or tuple(s[:len(batch)]) != batch:
            out.append(xp.zeros(s, dtype=y.dtype))
            continue
        k = int(np.prod(s[len(batch):]))
        out.append(xp.reshape(y[..., at:at + k], s))
        at += k
    return out


def _qr(a, *, mode="reduced"):
    return pack(qr_core(a, mode), a.shape[:-2])


def _qr_vjp(g, a, *, mode="reduced"):
    q, r = qr_core(a, mode)
    gq, gr = unpack(np.asarray(g), a.shape[:-2], (q.shape, r.shape))
    return (qr_vjp_core(a, q, r, gq, gr, mode),)


def _qr_shape(a, *, mode="reduced"):
    sq, sr = qr_shapes(a, mode)
    batch = tuple(a[:-2])
    return batch + (_packed_size(batch, (sq, sr)),)


defspec("linalg_qr", _qr, _qr_vjp, _qr_shape, 1)


# -- svd

def svd_shapes(a, full_matrices, op="linalg_svd"):
    a = _matrix_shape(op, a)
    batch, (m, n) = a[:-2], a[-2:]
    k = min(m, n)
    if full_matrices:
        return batch + (m, m), batch + (k,), batch + (n, n)
    return batch + (m, k), batch + (k,), batch + (k, n)


def svd_core(a, full_matrices, xp=np):
    su, ss, sv = svd_shapes(a.shape, full_matrices)
    if a.size == 0:
        u = xp.zeros(su, dtype=a.dtype)
        vh = xp.zeros(sv, dtype=a.dtype)
        if full_matrices:  # torch returns identities for the empty side
            u = u + xp.eye(su[-1], dtype=a.dtype)
            vh = vh + xp.eye(sv[-1], dtype=a.dtype)
        return u, xp.zeros(ss, dtype=a.dtype), vh
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    k = s.shape[-1]
    u, su_ = fix_signs(u, xp)
    vh = xp.concatenate([vh[..., :k, :] * su_[..., :k, None], fix_signs(mT(vh[..., k:, :], xp), xp)[0].swapaxes(-1, -2)],
                        axis=-2) if vh.shape[-2] > k else vh * su_[..., :k, None]
    return u, s, vh


def svd_vjp_core(u, s, vh, gu, gs, gvh, xp=np):
    """Townsend (2016), real case, on the first k = len(s) singular vectors (torch narrows the full
    matrices the same way)."""
    k = s.shape[-1]
    m, n = u.shape[-2], vh.shape[-1]
    u, gu, vh, gvh = u[..., :, :k], gu[..., :, :k], vh[..., :k, :], gvh[..., :k, :]
    v, gv = mT(vh, xp), mT(gvh, xp)
    f = _off_diag_inv(s * s, xp)
    j = _safe_mul(f, mT(u, xp) @ gu - mT(gu, xp) @ u, xp)
    kk = _safe_mul(f, mT(v, xp) @ gv - mT(gv, xp) @ v, xp)
    inner = j * s[..., None, :] + s[..., :, None] * kk + gs[..., :, None] * xp.eye(k, dtype=u.dtype)
    ga = u @ inner @ vh
    with np.errstate(divide="ignore", invalid="ignore"):
        if m > k:
            pu = gu - u @ (mT(u, xp) @ gu)
            ga = ga + _safe_mul(1 / s[..., None, :], pu, xp) @ vh
        if n > k:
            pv = gv - v @ (mT(v, xp) @ gv)
            ga = ga + u @ mT(_safe_mul(1 / s[..., None, :], pv, xp), xp)
    return ga


def _svd(a, *, full_matrices=True):
    return pack(svd_core(a, full_matrices), a.shape[:-2])


def _svd_vjp(g, a, *, full_matrices=True):
    u, s, vh = svd_core(a, full_matrices)
    gu, gs, gvh = unpack(np.asarray(g), a.shape[:-2], (u.shape, s.shape, vh.shape))
    return (svd_vjp_core(u, s, vh, gu, gs, gvh),)


def _svd_shape(a, *, full_matrices=True):
    batch = tuple(a[:-2]) if len(a) >= 2 else ()
    return batch + (_packed_size(batch, svd_shapes(a, full_matrices)),)


defspec("linalg_svd", _svd, _svd_vjp, _svd_shape, 1)


# -- eigh

def eigh_core(a, upper, xp=np):
    if a.size == 0:
        return xp.zeros(a.shape[:-1], dtype=a.dtype), xp.zeros(a.shape, dtype=a.dtype)
    w, v = xp.linalg.eigh(a, UPLO="U" if upper else "L")
    return w, fix_signs(v, xp)[0]


def eigh_vjp_core(w, v, gw, gv, xp=np):
    """gA = V (diag(gw) + F o skew(V^T gV) / 2) V^T, F[i, j] = 1 / (w[j] - w[i]): the gradient
    among symmetric matrices (torch's), so it is symmetric whichever triangle was read."""
    x = mT(v, xp) @ gv
    inner = _safe_mul(_off_diag_inv(w, xp), 0.5 * (x - mT(x, xp)), xp) + \
        gw[..., :, None] * xp.eye(w.shape[-1], dtype=w.dtype)
    return v @ inner @ mT(v, xp)


def _eigh(a, *, upper=False):
    return pack(eigh_core(a, upper), a.shape[:-2])


def _eigh_vjp(g, a, *, upper=False):
    w, v = eigh_core(a, upper)
    gw, gv = unpack(np.asarray(g), a.shape[:-2], (w.shape, v.shape))
    return (eigh_vjp_core(w, v, gw, gv),)


def _eigh_shape(a, *, upper=False):
    a = square_shape("linalg_eigh", a)
    return a[:-2] + (a[-1] + a[-1] * a[-1],)


defspec("linalg_eigh", _eigh, _eigh_vjp, _eigh_shape, 1)


# -- det, slogdet

def det_vjp_core(a, g, xp=np):
    """g times the cofactor matrix, det(U) det(V) U diag(prod_{j != i} s_j) V^T from the SVD: finite
    for singular matrices too."""
    n = a.shape[-1]
    if n == 0 or a.size == 0:
        return xp.zeros(a.shape, dtype=a.dtype)
    u, s, vh = xp.linalg.svd(a)
    ones = xp.ones(s.shape[:-1] + (1,), dtype=s.dtype)
    before = xp.cumprod(xp.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    after = xp.flip(xp.cumprod(xp.concatenate([ones, xp.flip(s[..., 1:], axis=-1)], axis=-1), axis=-1), axis=-1)
    sign = xp.linalg.det(u) * xp.linalg.det(vh)
    cof = (u * (before * after)[..., None, :]) @ vh
    return (g * sign)[..., None, None] * cof


defspec("linalg_det", lambda a: np.linalg.det(a) if a.shape[-1] else np.ones(a.shape[:-2], dtype=a.dtype),
        lambda g, a: (det_vjp_core(a, np.asarray(g)),),
        lambda a: square_shape("linalg_det", a)[:-2], 1)


def slogdet_core(a, xp=np):
    if a.shape[-1] == 0:
        return xp.ones(a.shape[:-2], dtype=a.dtype), xp.zeros(a.shape[:-2], dtype=a.dtype)
    sign, logabs = xp.linalg.slogdet(a)
    return sign.astype(a.dtype), logabs.astype(a.dtype)


def slogdet_vjp_core(a, g, xp=np):
    """Only logabsdet is differentiable: g * A^-T."""
    if a.shape[-1] == 0:
        return xp.zeros(a.shape, dtype=a.dtype)
    inv = lapack(lambda: xp.linalg.inv(a), a.shape, a.dtype, xp)
    return g[..., None, None] * mT(inv, xp)


defspec("linalg_slogdet", lambda a: np.stack(slogdet_core(a), axis=-1),
        lambda g, a: (slogdet_vjp_core(a, np.asarray(g)[..., 1]),),
        lambda a: square_shape("linalg_slogdet", a)[:-2] + (2,), 1)

__all__ += ["square_shape", "solve_plan", "solve_core", "solve_vjp_core", "cholesky_core",
            "cholesky_vjp_core", "QR_MODES", "qr_shapes", "qr_core", "qr_vjp_core", "svd_shapes", "svd_core",
            "svd_vjp_core", "eigh_core", "lapack", "eigh_vjp_core", "det_vjp_core", "slogdet_core", "slogdet_vjp_core",
            "fix_signs", "pack", "unpack", "mT"]
