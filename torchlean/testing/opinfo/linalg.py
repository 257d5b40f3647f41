"""Test records of matmul, bmm, linear and linear_nobias."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand

_MATMUL = [((4,), (4,)), ((1,), (1,)), ((3,), (3, 5)), ((3, 4), (4,)), ((2, 3), (3, 4)),
           ((1, 1), (1, 1)), ((2, 3, 4), (4, 2)), ((3,), (2, 3, 4)), ((2, 3, 4), (4,)),
           ((2, 1, 3, 4), (5, 4, 2)), ((1, 2, 3), (4, 1, 3, 2))]


def _matmul_samples(rng):
    return [Sample((rand(rng, *sa), rand(rng, *sb)), desc=f"{sa} @ {sb}") for sa, sb in _MATMUL]


def _matmul_bad(rng):
    return [BadInput((np.ones((2, 3)), np.ones((4, 5))), {}, ShapeError,
                     "shapes (2, 3) and (4, 5): inner dimensions 3 and 4 differ", "inner mismatch"),
            BadInput((np.ones(3), np.ones(4)), {}, ShapeError, "inner dimensions 3 and 4", "1-D dot mismatch"),
            BadInput((np.ones(()), np.ones(3)), {}, ShapeError, "at least 1 axis", "0-d operand"),
            BadInput((np.ones((2, 3, 4)), np.ones((5, 4, 2))), {}, ShapeError, "(2,) and (5,)", "batch")]


defop(OpInfo("matmul", _matmul_samples, _matmul_bad, torch_ref=lambda torch, a, b: torch.matmul(a, b)))


def _bmm_samples(rng):
    return [Sample((rand(rng, *sa), rand(rng, *sb)), desc=f"{sa} bmm {sb}")
            for sa, sb in [((2, 3, 4), (2, 4, 5)), ((1, 1, 1), (1, 1, 1)), ((3, 1, 6), (3, 6, 2))]]


def _bmm_bad(rng):
    return [BadInput((np.ones((2, 3, 4)), np.ones((3, 4, 5))), {}, ShapeError, "batch sizes 2 and 3"),
            BadInput((np.ones((2, 3, 4)), np.ones((2, 5, 5))), {}, ShapeError, "(2, 3, 4) and (2, 5, 5)"),
            BadInput((np.ones((3, 4)), np.ones((4, 5))), {}, ShapeError, "3 axes")]


defop(OpInfo("bmm", _bmm_samples, _bmm_bad, torch_ref=lambda torch, a, b: torch.bmm(a, b)))

_LINEAR = [((3, 4), (4,)), ((3, 4), (5, 4)), ((2, 3), (2, 4, 3)), ((1, 1), (1,)), ((5, 1), (2, 1))]


def _linear_samples(rng):
    return [Sample((rand(rng, *sw), rand(rng, sw[0]), rand(rng, *sx)), desc=f"w{sw} x{sx}")
            for sw, sx in _LINEAR]


def _linear_bad(rng):
    return [BadInput((np.ones((3, 4)), np.ones(3), np.ones((5, 6))), {}, ShapeError,
                     "input features 6 and weight in-features 4 differ"),
            BadInput((np.ones((3, 4)), np.ones(2), np.ones((5, 4))), {}, ShapeError, "bias must have shape (3,)"),
            BadInput((np.ones(4), np.ones(3), np.ones(4)), {}, ShapeError, "weight must have 2 axes"),
            BadInput((np.ones((3, 4)), np.ones(3), np.ones(())), {}, ShapeError, "at least 1 axis")]


defop(OpInfo("linear", _linear_samples, _linear_bad,
             torch_ref=lambda torch, w, b, x: torch.nn.functional.linear(x, w, b)))


def _linear_nobias_samples(rng):
    return [Sample((rand(rng, *sw), rand(rng, *sx)), desc=f"w{sw} x{sx}") for sw, sx in _LINEAR]


def _linear_nobias_bad(rng):
    return [BadInput((np.ones((3, 4)), np.ones((5, 6))), {}, ShapeError,
                     "(3, 4) and (5, 6): input features 6 and weight in-features 4 differ"),
            BadInput((np.ones((2, 3, 4)), np.ones(4)), {}, ShapeError, "weight must have 2 axes")]


defop(OpInfo("linear_nobias", _linear_nobias_samples, _linear_nobias_bad,
             torch_ref=lambda torch, w, x: torch.nn.functional.linear(x, w)))


# ---- decompositions -------------------------------------------------------------------------
# Well-conditioned samples: a + n I style diagonally dominant matrices for solve and det, A A^T +
# n I for cholesky and eigh, distinct singular values for svd. torch's results are packed the way
# the op packs them (spec.linalg), eigenvector and singular vector signs normalised the same way.

def _spd(rng, *shape):
    a = rand(rng, *shape)
    n = shape[-1]
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _wellcond(rng, *shape):
    return rand(rng, *shape) + shape[-1] * np.eye(shape[-1])


def _tpack(torch, batch, *parts):
    return torch.cat([p.reshape(*batch, -1) for p in parts], -1)


def _tsigns(torch, v):
    i = v.abs().argmax(-2, keepdim=True)
    return torch.where(torch.gather(v, -2, i) < 0, -1.0, 1.0).to(v.dtype)


def _solve_samples(rng):
    return [Sample((_wellcond(rng, *sa), rand(rng, *sb)), desc=f"A{sa} B{sb}")
            for sa, sb in [((3, 3), (3, 2)), ((1, 1), (1, 1)), ((2, 4, 4), (2, 4, 1)), ((2, 3, 3), (3, 4)),
                           ((3, 3), (2, 3, 2)), ((4, 4), (4, 0))]]


def _solve_bad(rng):
    return [BadInput((np.ones((2, 3)), np.ones((2, 1))), {}, ShapeError, "square", "non-square"),
            BadInput((np.eye(3), np.ones((2, 1))), {}, ShapeError, "incompatible shapes", "rows of B")]


defop(OpInfo("linalg_solve", _solve_samples, _solve_bad,
             torch_ref=lambda torch, a, b: torch.linalg.solve(a, b)))


def _cholesky_samples(rng):
    return [Sample((_spd(rng, *s),), desc=f"{s}") for s in [(3, 3), (1, 1), (2, 4, 4), (0, 0)]]


def _cholesky_bad(rng):
    return [BadInput((np.ones((2, 3)),), {}, ShapeError, "square", "non-square")]


# The factor reads one triangle while the gradient is symmetric (torch's convention), so central
# differences in a non-symmetric direction disagree by design: the torch oracle checks the VJP.
defop(OpInfo("linalg_cholesky", _cholesky_samples, _cholesky_bad, fd=False,
             torch_ref=lambda torch, a: torch.linalg.cholesky(a)))


def _qr_samples(rng):
    out = [Sample((rand(rng, *s),), {"mode": "reduced"}, f"{s} reduced")
           for s in [(4, 3), (3, 3), (3, 5), (2, 4, 2), (1, 1)]]
    out += [Sample((rand(rng, *s),), {"mode": "complete"}, f"{s} complete") for s in [(3, 3), (2, 4), (2, 2, 3)]]
    return out


def _qr_bad(rng):
    return [BadInput((np.ones(3),), {"mode": "reduced"}, ShapeError, "at least 2 dimensions", "1-D"),
            BadInput((np.ones((2, 2)),), {"mode": "full"}, DomainError, "unrecognized mode", "mode")]


defop(OpInfo("linalg_qr", _qr_samples, _qr_bad,
             torch_ref=lambda torch, a, mode: _tpack(torch, a.shape[:-2], *torch.linalg.qr(a, mode=mode))))


def _distinct_singular(rng, m, n, batch=()):
    k = min(m, n)
    u = np.linalg.qr(rng.standard_normal(batch + (m, m)))[0]
    v = np.linalg.qr(rng.standard_normal(batch + (n, n)))[0]
    s = np.zeros(batch + (m, n))
    idx = np.arange(k)
    s[..., idx, idx] = np.linspace(2.0, 0.5, k) if k else s[..., idx, idx]
    return u @ s @ v


def _svd_samples(rng):
    out = [Sample((_distinct_singular(rng, m, n, b),), {"full_matrices": False}, f"{b + (m, n)} reduced")
           for b, m, n in [((), 4, 3), ((), 3, 5), ((2,), 3, 3), ((), 1, 1)]]
    out += [Sample((_distinct_singular(rng, m, n, b),), {"full_matrices": True}, f"{b + (m, n)} full")
            for b, m, n in [((), 3, 3), ((2,), 2, 2)]]
    # full_matrices with m != n: the extra vectors get no gradient (torch narrows them away), so
    # central differences disagree there by design; tests/test_torch_linalg.py checks torch's values.
    return out


def _torch_svd(torch, a, full_matrices=True):
    u, s, vh = torch.linalg.svd(a, full_matrices=full_matrices)
    k = s.shape[-1]
    sg = _tsigns(torch, u)
    top = vh[..., :k, :] * sg[..., :k].mT
    rest = vh[..., k:, :]
    rest = rest * _tsigns(torch, rest.mT).mT
    return _tpack(torch, a.shape[:-2], u * sg, s, torch.cat([top, rest], -2))


defop(OpInfo("linalg_svd", _svd_samples,
             lambda rng: [BadInput((np.ones(3),), {"full_matrices": False}, ShapeError, "at least 2 dimensions")],
             torch_ref=_torch_svd))


def _eigh_samples(rng):
    out = [Sample((_spd(rng, *s),), {"upper": False}, f"{s}") for s in [(3, 3), (1, 1), (2, 4, 4)]]
    a = _spd(rng, 3, 3)
    out.append(Sample((a + np.triu(rand(rng, 3, 3), 1),), {"upper": False}, "reads the lower triangle"))
    out.append(Sample((a + np.tril(rand(rng, 3, 3), -1),), {"upper": True}, "reads the upper triangle"))
    return out


def _torch_eigh(torch, a, upper=False):
    w, v = torch.linalg.eigh(a, UPLO="U" if upper else "L")
    return _tpack(torch, a.shape[:-2], w, v * _tsigns(torch, v))


defop(OpInfo("linalg_eigh", _eigh_samples,
             lambda rng: [BadInput((np.ones((2, 3)),), {"upper": False}, ShapeError, "square")],
             fd=False, torch_ref=_torch_eigh))


def _det_samples(rng):
    return [Sample((rand(rng, *s),), desc=f"{s}") for s in [(3, 3), (1, 1), (2, 4, 4), (2, 2)]] + \
        [Sample((np.array([[1.0, 2.0, 3.0], [2.0, 4.001, 6.5], [0.5, 1.0, -1.0]]),), desc="near rank 2")]


defop(OpInfo("linalg_det", _det_samples,
             lambda rng: [BadInput((np.ones((2, 3)),), {}, ShapeError, "square")],
             torch_ref=lambda torch, a: torch.linalg.det(a)))


def _slogdet_samples(rng):
    return [Sample((_wellcond(rng, *s) * sg,), desc=f"{s} sign {sg}") for s in [(3, 3), (2, 4, 4)] for sg in (1, -1)] + \
        [Sample((rand(rng, 1, 1) + 2,), desc="(1, 1)")]


defop(OpInfo("linalg_slogdet", _slogdet_samples,
             lambda rng: [BadInput((np.ones((2, 3)),), {}, ShapeError, "square")],
             torch_ref=lambda torch, a: torch.stack(torch.linalg.slogdet(a), -1)))
