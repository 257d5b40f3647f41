"""Test records of matmul, bmm, linear and linear_nobias."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
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
