"""Test records of the reductions."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from . import BadInput, OpInfo, Sample, defop, rand


def distinct(rng, *shape, gap=0.05):
    """Entries pairwise at least ``gap`` apart (no ties: max/min stay off their kinks)."""
    n = int(np.prod(shape)) if shape else 1
    v = (rng.permutation(n) - n / 2) * (2 * gap) + rng.uniform(0, gap / 2, size=n)
    return v.reshape(shape)


def _sum_samples(rng):
    return [Sample((rand(rng, *s),), {}, f"{s}") for s in [(7,), (3, 4), (2, 3, 5), (), (1, 1), (0, 3)]]


defop(OpInfo("sum", _sum_samples, torch_ref=lambda torch, x: torch.sum(x)))

_AXES = [((3, 4), 0, False), ((3, 4), 1, True), ((2, 3, 5), -1, False), ((2, 3, 5), (0, 2), True),
         ((2, 3, 5), (-1, 0), False), ((2, 3, 5), (0, 1, 2), False), ((4, 1, 3), 1, False),
         ((), 0, False), ((), -1, True), ((5,), 0, True)]


def _axes_samples(rng):
    return [Sample((rand(rng, *s),), {"axis": a, "keepdim": k}, f"{s} axis={a} keepdim={k}")
            for s, a, k in _AXES]


def _axes_bad():
    def bad(rng):
        x = np.ones((2, 3))
        return [BadInput((x,), {"axis": 2}, ShapeError, "axis 2", "axis out of range"),
                BadInput((x,), {"axis": -3}, ShapeError, "axis -3", "negative axis out of range"),
                BadInput((x,), {"axis": (0, 0)}, ShapeError, "repeated", "repeated axis"),
                BadInput((x,), {"axis": ()}, ShapeError, "at least one", "empty axis tuple"),
                BadInput((x,), {"axis": 1.0}, ShapeError, "int", "float axis")]
    return bad


defop(OpInfo("reduce_sum", _axes_samples, _axes_bad(),
             torch_ref=lambda torch, x, *, axis, keepdim=False: torch.sum(x, dim=axis, keepdim=keepdim)))
defop(OpInfo("reduce_mean", _axes_samples, _axes_bad(),
             torch_ref=lambda torch, x, *, axis, keepdim=False: torch.mean(x, dim=axis, keepdim=keepdim)))

_EXT = [((3, 4), 0, False), ((3, 4), 1, True), ((2, 3, 5), -1, False), ((2, 3, 5), 1, True),
        ((4, 1, 3), 1, False), ((1, 6), -2, False), ((7,), 0, False), ((), 0, False), ((), -1, True)]


def _ext_samples(rng):
    return [Sample((distinct(rng, *s),), {"axis": a, "keepdim": k}, f"{s} axis={a} keepdim={k}")
            for s, a, k in _EXT]


def _ext_bad():
    def bad(rng):
        x = np.ones((2, 3))
        return [BadInput((x,), {"axis": 2}, ShapeError, "axis 2", "axis out of range"),
                BadInput((x,), {"axis": (0, 1)}, ShapeError, "single int", "tuple axis"),
                BadInput((np.ones((2, 0)),), {"axis": 1}, ShapeError, "size 0", "empty axis"),
                BadInput((np.ones((0,)),), {"axis": 0}, ShapeError, "(0,)", "empty vector")]
    return bad


# torch.max(x, dim) routes the cotangent to one index; samples have no ties, so it is the first.
defop(OpInfo("reduce_max", _ext_samples, _ext_bad(),
             torch_ref=lambda torch, x, *, axis, keepdim=False: torch.max(x, dim=axis, keepdim=keepdim).values))
defop(OpInfo("reduce_min", _ext_samples, _ext_bad(),
             torch_ref=lambda torch, x, *, axis, keepdim=False: torch.min(x, dim=axis, keepdim=keepdim).values))


def _arg_samples(rng):
    # Small integers as floats: ties everywhere, exact in float32 (the first extremal entry wins).
    out = []
    for shape, attrs in [((7,), {}), ((3, 4), {"axis": 1}), ((3, 4), {"axis": 0, "keepdim": True}),
                         ((2, 3, 5), {"axis": -1}), ((2, 3, 5), {}), ((3, 4), {"keepdim": True}), ((), {}),
                         ((), {"axis": 0})]:
        out.append(Sample((rng.integers(-2, 3, size=shape).astype(np.float64),), attrs, f"{shape} {attrs}"))
    return out


def _arg_bad(op):
    return lambda rng: [BadInput((np.ones((2, 3)),), {"axis": 2}, ShapeError, "axis 2"),
                        BadInput((np.ones((2, 0)),), {"axis": 1}, ShapeError, "size 0"),
                        BadInput((np.ones((0, 3)),), {}, ShapeError, "empty")]


for _op in ("argmax", "argmin"):
    defop(OpInfo(_op, _arg_samples, _arg_bad(_op), diff=(), fd=False,
                 torch_ref=(lambda f: lambda torch, x, *, axis=None, keepdim=False: getattr(torch, f)(
                     x, dim=axis, keepdim=keepdim))(_op)))


def _argsort_samples(rng):
    out = []
    for shape, attrs in [((7,), {}), ((3, 8), {"axis": 1}), ((3, 8), {"axis": 0, "descending": True}),
                         ((2, 3, 9), {"axis": -1, "descending": True}), ((2, 3, 5), {"axis": 1}), ((), {}),
                         ((), {"axis": 0, "descending": True}), ((0, 3), {"axis": 0}), ((4, 0), {})]:
        out.append(Sample((rng.integers(-2, 3, size=shape).astype(np.float64),), attrs, f"ties {shape} {attrs}"))
    x = rng.integers(-2, 3, size=(3, 7)).astype(np.float64)
    x[0, 1] = x[1, 3] = x[1, 5] = np.nan
    out += [Sample((x,), {"axis": 1}, "NaNs"), Sample((x,), {"axis": 1, "descending": True}, "NaNs descending")]
    return out


def _argsort_bad(rng):
    x = np.ones((2, 3))
    return [BadInput((x,), {"axis": 2}, ShapeError, "axis 2", "axis out of range"),
            BadInput((x,), {"axis": (0, 1)}, ShapeError, "single int", "tuple axis")]


defop(OpInfo("argsort", _argsort_samples, _argsort_bad, diff=(), fd=False,
             torch_ref=lambda torch, x, *, axis=-1, descending=False: torch.argsort(
                 x, dim=axis, descending=descending, stable=True)))
