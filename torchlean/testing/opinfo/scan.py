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
