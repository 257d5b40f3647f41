"""Test records of the softmax family."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand


# ---- softmax / log_softmax ------------------------------------------------------------------

_SOFTMAX = [((5,), -1), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -3), ((3, 1), -1),
            ((1,), 0), ((4, 1), 0)]


def _softmax_samples(rng):
    out = [Sample((rand(rng, *s, lo=-3, hi=3),), {"axis": a}, f"{s} axis={a}") for s, a in _SOFTMAX]
    out.append(Sample((rand(rng, 2, 6, lo=-3, hi=3),), {}, "default axis"))
    return out


def _softmax_bad(op):
    return lambda rng: [BadInput((np.ones((2, 3)),), {"axis": 2}, ShapeError, "axis 2", "axis out of range"),
                        BadInput((np.ones(()),), {}, ShapeError, "at least 1 axis", "0-d input")]


defop(OpInfo("softmax", _softmax_samples, _softmax_bad("softmax"),
             torch_ref=lambda torch, x, *, axis=-1: torch.softmax(x, axis)))


defop(OpInfo("log_softmax", _softmax_samples, _softmax_bad("log_softmax"),
             torch_ref=lambda torch, x, *, axis=-1: torch.log_softmax(x, axis)))


# ---- hard_masked_softmax --------------------------------------------------------------------

def _masked_samples(rng):
    m = rng.uniform(size=(4, 5)) > 0.4
    m[1] = False                     # a fully blocked row
    m[2] = True
    m3 = (rng.uniform(size=(3, 4)) > 0.5).astype(np.float64)
    m3[0] = 0.0
    return [Sample((rand(rng, 4, 5, lo=-3, hi=3),), {"mask": m}, "bool mask, blocked row"),
            Sample((rand(rng, 2, 3, 4, lo=-3, hi=3),), {"mask": m3}, "0/1 float mask broadcast over batch"),
            Sample((rand(rng, 3, 6),), {"mask": np.array([1, 0, 1, 1, 0, 1])}, "int mask over last axis"),
            Sample((rand(rng, 2, 1),), {"mask": np.ones((2, 1), bool)}, "size-1 rows"),
            Sample((rand(rng, 5),), {"mask": np.ones(5, bool)}, "1-D, nothing blocked")]


def _masked_bad(rng):
    return [BadInput((np.ones((3, 5)),), {"mask": np.ones(4, bool)}, ShapeError, "(4,)", "mask shape"),
            BadInput((np.ones((3, 5)),), {"mask": np.ones((2, 3, 5), bool)}, ShapeError, "(2, 3, 5)",
                     "mask larger than input"),
            BadInput((np.ones((3, 5)),), {"mask": np.full((3, 5), 2.0)}, DomainError, "0 or 1", "mask values")]


def _masked_torch(torch, x, *, mask):
    m = torch.as_tensor(np.broadcast_to(np.asarray(mask) != 0, tuple(x.shape)).copy())
    # A large finite fill keeps fully blocked rows finite (uniform), then the mask zeroes them.
    return torch.softmax(x.masked_fill(~m, -1e300), -1) * m


defop(OpInfo("hard_masked_softmax", _masked_samples, _masked_bad, torch_ref=_masked_torch))
