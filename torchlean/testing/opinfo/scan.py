"""Test records of the scan family."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from . import BadInput, OpInfo, Sample, defop, rand

# ---- selective scan -------------------------------------------------------------------------

_SCAN = [(5, 3), (2, 4, 3), (2, 2, 3, 2), (1, 4), (3, 1)]


def _scan_samples(var):
    def samples(rng):
        out = []
        for s in _SCAN:
            coef = s if var else s[-1:]
            out.append(Sample((rand(rng, *s), rand(rng, *coef, lo=-0.95, hi=0.95), rand(rng, *coef),
                               rand(rng, *(s[:-2] + s[-1:]))), {}, str(s)))
        return out
    return samples


def _scan_bad(var):
    def bad(rng):
        x = np.ones((2, 4, 3))
        c = x if var else np.ones(3)
        return [BadInput((x, np.ones(2) if not var else np.ones((2, 4, 2)), c, np.ones((2, 3))), {}, ShapeError,
                         "a and b", "a shape"),
                BadInput((x, c, c, np.ones(3)), {}, ShapeError, "h0", "h0 shape"),
                BadInput((np.ones(3), np.ones(3), np.ones(3), np.ones(3)), {}, ShapeError, "(3,)", "1-D x")]
    return bad


defop(OpInfo("selective_scan", _scan_samples(False), _scan_bad(False)))


defop(OpInfo("selective_scan_var", _scan_samples(True), _scan_bad(True)))


# ---- cumulative ops ---------------------------------------------------------------------------

_CUM = [((7,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 5), -1), ((2, 3, 5), 1), ((4, 1, 3), -2), ((), 0), ((), -1),
        ((0, 3), 1), ((2, 0), 1)]


def _cum_samples(rng):
    return [Sample((rand(rng, *s),), {"axis": a}, f"{s} axis={a}") for s, a in _CUM]


def _cumprod_samples(rng):
    out = _cum_samples(rng)
    for zeros in ([2], [1, 4], [0], [5]):  # one zero, two zeros, at either end: the exact path of the VJP
        x = rand(rng, 2, 6, lo=0.5, hi=1.5) * np.where(rng.random((2, 6)) < 0.5, -1.0, 1.0)
        x[:, zeros] = 0.0
        out.append(Sample((x,), {"axis": 1}, f"zeros at {zeros}"))
    x = rand(rng, 5, 3)
    x[2, 1] = 0.0
    out.append(Sample((x,), {"axis": 0}, "a zero down axis 0"))
    return out


def _cum_bad(rng):
    x = np.ones((2, 3))
    return [BadInput((x,), {"axis": 2}, ShapeError, "axis 2", "axis out of range"),
            BadInput((x,), {"axis": (0, 1)}, ShapeError, "single int", "tuple axis"),
            BadInput((x,), {"axis": 1.0}, ShapeError, "int", "float axis")]


defop(OpInfo("cumsum", _cum_samples, _cum_bad,
             torch_ref=lambda torch, x, *, axis: torch.cumsum(x, axis)))
defop(OpInfo("cumprod", _cumprod_samples, _cum_bad,
             torch_ref=lambda torch, x, *, axis: torch.cumprod(x, axis)))


def _cumarg_samples(rng):
    # Small integers as floats: ties everywhere (the last tied entry wins), exact in float32.
    out = [Sample((rng.integers(-2, 3, size=s).astype(np.float64),), {"axis": a}, f"{s} axis={a}") for s, a in _CUM]
    x = rng.integers(-2, 3, size=(3, 6)).astype(np.float64)
    x[0, 2] = x[1, 0] = x[1, 4] = np.nan
    out.append(Sample((x,), {"axis": 1}, "NaNs"))
    return out


def _cumarg_ref(name):
    return lambda torch, x, *, axis: getattr(torch, name)(x, axis).indices


defop(OpInfo("cumargmax", _cumarg_samples, _cum_bad, diff=(), fd=False, torch_ref=_cumarg_ref("cummax")))
defop(OpInfo("cumargmin", _cumarg_samples, _cum_bad, diff=(), fd=False, torch_ref=_cumarg_ref("cummin")))
