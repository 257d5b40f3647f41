"""Test records of the loss family."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, DTypeError, IndexRangeError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand


# ---- mse_loss -------------------------------------------------------------------------------

def _mse_samples(rng):
    return [Sample((rand(rng, *s), rand(rng, *s)), desc=str(s)) for s in [(7,), (3, 4), (2, 3, 2), (), (1, 1)]]


defop(OpInfo("mse_loss", _mse_samples,
             lambda rng: [BadInput((np.ones((2, 3)), np.ones((3, 2))), {}, ShapeError, "(2, 3) and (3, 2)")],
             torch_ref=lambda torch, a, b: torch.nn.functional.mse_loss(a, b)))


# ---- nll_loss / cross_entropy ---------------------------------------------------------------

def _class_samples(rng, smoothing):
    w3 = rng.uniform(0.5, 2.0, size=3)
    t4 = np.array([0, 2, 1, 2])
    t_ign = np.array([0, -100, 2, 1])
    out = [
        Sample((rand(rng, 5, lo=-2, hi=2),), {"target": np.array(3)}, "(C,) with 0-d target"),
        Sample((rand(rng, 4, 3, lo=-2, hi=2),), {"target": t4}, "(N, C)"),
        Sample((rand(rng, 4, 3, lo=-2, hi=2),), {"target": t4, "weight": w3}, "class weights"),
        Sample((rand(rng, 4, 3, lo=-2, hi=2),), {"target": t_ign, "weight": w3}, "ignore_index -100"),
        Sample((rand(rng, 4, 3, lo=-2, hi=2),), {"target": t4, "ignore_index": 2, "reduction": "sum"},
               "ignore_index 2, sum"),
        Sample((rand(rng, 4, 3, lo=-2, hi=2),), {"target": t_ign, "reduction": "none"}, "none"),
        Sample((rand(rng, 2, 3, 4, lo=-2, hi=2),), {"target": rng.integers(0, 3, size=(2, 4))}, "(N, C, d)"),
        Sample((rand(rng, 2, 3, 2, 2, lo=-2, hi=2),),
               {"target": rng.integers(0, 3, size=(2, 2, 2)), "weight": w3, "reduction": "none"},
               "(N, C, d1, d2), none"),
        Sample((rand(rng, 1, 1),), {"target": np.array([0])}, "one class"),
    ]
    if smoothing:
        out += [
            Sample((rand(rng, 4, 3, lo=-2, hi=2),), {"target": t4, "label_smoothing": 0.1}, "smoothing"),
            Sample((rand(rng, 4, 3, lo=-2, hi=2),), {"target": t_ign, "weight": w3, "label_smoothing": 0.2},
                   "smoothing, weights, ignore"),
            Sample((rand(rng, 2, 3, 4, lo=-2, hi=2),),
                   {"target": np.array([[0, 1, -100, 2], [2, 2, 1, 0]]), "weight": w3,
                    "label_smoothing": 0.3, "reduction": "none"}, "smoothing, (N, C, d), none"),
            Sample((rand(rng, 4, 3, lo=-2, hi=2),),
                   {"target": t_ign, "label_smoothing": 0.05, "reduction": "sum"}, "smoothing, sum"),
        ]
    return out


def _class_bad(op):
    def bad(rng):
        x = np.ones((4, 3))
        out = [BadInput((x,), {"target": np.array([0, 1, 3, 0])}, IndexRangeError, "target 3", "target == C"),
               BadInput((x,), {"target": np.array([0, -1, 1, 0])}, IndexRangeError, "[0, 3)", "negative target"),
               BadInput((x,), {"target": np.array([0.0, 1.0, 2.0, 0.0])}, DTypeError, "float64", "float target"),
               BadInput((x,), {"target": np.array([0, 1, 2])}, ShapeError, "(3,)", "target shape"),
               BadInput((x,), {"target": np.array([0, 1, 2, 0]), "reduction": "avg"}, DomainError, "'avg'"),
               BadInput((x,), {"target": np.array([0, 1, 2, 0]), "weight": np.ones(4)}, ShapeError,
                        "(4,)", "weight shape"),
               BadInput((np.ones(()),), {"target": np.array(0)}, ShapeError, "class axis", "0-d input")]
        if op == "cross_entropy":
            out.append(BadInput((x,), {"target": np.array([0, 1, 2, 0]), "label_smoothing": 1.0}, DomainError,
                                "label_smoothing", "smoothing 1"))
        return out
    return bad


def _torch_class_ref(fn_name):
    def ref(torch, x, *, target, weight=None, **kw):
        w = None if weight is None else torch.as_tensor(np.asarray(weight, dtype=np.float64))
        return getattr(torch.nn.functional, fn_name)(x, torch.as_tensor(np.asarray(target, dtype=np.int64)),
                                                     weight=w, **kw)
    return ref


defop(OpInfo("cross_entropy", lambda rng: _class_samples(rng, True), _class_bad("cross_entropy"),
             torch_ref=_torch_class_ref("cross_entropy")))


defop(OpInfo("nll_loss", lambda rng: _class_samples(rng, False), _class_bad("nll_loss"),
             torch_ref=_torch_class_ref("nll_loss")))
