"""Test records of the norm family."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand


# ---- normalization --------------------------------------------------------------------------

_LN = [((4, 5), 1, 1e-5), ((2, 3, 4), 2, 1e-5), ((3,), 1, 1e-5), ((2, 1, 3), 1, 1e-3),
       ((3, 1), 1, 1e-5), ((2, 3), 2, 1e-5)]


def _ln_samples(rng):
    out = []
    for shape, nd, eps in _LN:
        norm = shape[len(shape) - nd:]
        out.append(Sample((rand(rng, *shape), rand(rng, *norm, lo=0.5, hi=1.5), rand(rng, *norm)),
                          {"normalized_ndim": nd, "eps": eps}, f"{shape} nd={nd}"))
    return out


def _ln_bad(rng):
    x, g = np.ones((2, 3)), np.ones(3)
    return [BadInput((x, g, g), {"normalized_ndim": 3}, ShapeError, "normalized_ndim 3", "nd too large"),
            BadInput((x, g, g), {"normalized_ndim": 0}, ShapeError, "normalized_ndim", "nd zero"),
            BadInput((x, np.ones(2), g), {"normalized_ndim": 1}, ShapeError, "(2,)", "gamma shape"),
            BadInput((x, g, np.ones((2, 3))), {"normalized_ndim": 1}, ShapeError, "beta", "beta shape"),
            BadInput((x, g, g), {"normalized_ndim": 1, "eps": -1.0}, DomainError, "eps", "negative eps")]


def _torch_ln(torch, x, gamma=None, beta=None, *, normalized_ndim, eps=1e-5):
    return torch.nn.functional.layer_norm(x, tuple(x.shape[x.ndim - normalized_ndim:]), gamma, beta, eps)


defop(OpInfo("layer_norm", _ln_samples, _ln_bad, torch_ref=_torch_ln))


defop(OpInfo("layer_norm_noaffine",
             lambda rng: [Sample(s.inputs[:1], s.attrs, s.desc) for s in _ln_samples(rng)],
             lambda rng: [BadInput((np.ones((2, 3)),), {"normalized_ndim": 3}, ShapeError, "normalized_ndim 3"),
                          BadInput((np.ones((2, 0)),), {"normalized_ndim": 1}, ShapeError, "empty")],
             torch_ref=_torch_ln))


_BN = [(4, 3), (2, 3, 5), (2, 2, 3, 4), (1, 2, 3), (3, 1, 2, 1, 2)]


def _bn_params(rng, c):
    return rand(rng, c, lo=0.5, hi=1.5), rand(rng, c)


def _bn_train_samples(rng):
    return [Sample((rand(rng, *s),) + _bn_params(rng, s[1]), {"eps": 1e-5}, str(s)) for s in _BN] + \
        [Sample((rand(rng, 3, 2, 4),) + _bn_params(rng, 2), {"eps": 0.1}, "eps 0.1")]


def _bn_bad(name, n_stats):
    def bad(rng):
        st = (np.ones(3),) * n_stats
        return [BadInput((np.ones((2, 3, 4)), np.ones(4), np.ones(3)) + st, {}, ShapeError, "gamma", "gamma"),
                BadInput((np.ones(3), np.ones(3), np.ones(3)) + st, {}, ShapeError, "(3,)", "1-D x"),
                BadInput((np.ones((2, 3)), np.ones(3), np.ones(3)) + st, {"eps": float("nan")}, DomainError,
                         "eps", "nan eps")]
    return bad


defop(OpInfo("batch_norm_train", _bn_train_samples, _bn_bad("batch_norm_train", 0),
             torch_ref=lambda torch, x, g, b, *, eps=1e-5: torch.nn.functional.batch_norm(
                 x, None, None, g, b, training=True, eps=eps)))


def _bn_eval_samples(rng):
    return [Sample((rand(rng, *s),) + _bn_params(rng, s[1]) + (rand(rng, s[1]), rand(rng, s[1], lo=0.5, hi=2.0)),
                   {"eps": 1e-5}, str(s)) for s in _BN]


defop(OpInfo("batch_norm_eval", _bn_eval_samples,
             lambda rng: _bn_bad("batch_norm_eval", 2)(rng) + [
                 BadInput((np.ones((2, 3)), np.ones(3), np.ones(3), np.ones(2), np.ones(3)), {}, ShapeError,
                          "mean", "mean shape")],
             diff=(0, 1, 2),
             torch_ref=lambda torch, x, g, b, mu, var, *, eps=1e-5: torch.nn.functional.batch_norm(
                 x, mu, var, g, b, training=False, eps=eps)))


def _bn_chw_samples(rng):
    return [Sample((rand(rng, *s),) + _bn_params(rng, s[0]), {"eps": 1e-5}, str(s))
            for s in [(3, 4, 5), (1, 2, 2), (2, 1, 3), (4, 3, 1)]]


defop(OpInfo("batch_norm_chw", _bn_chw_samples,
             lambda rng: [BadInput((np.ones((2, 3, 4, 5)), np.ones(3), np.ones(3)), {}, ShapeError, "(C, H, W)"),
                          BadInput((np.ones((3, 4, 5)), np.ones(4), np.ones(3)), {}, ShapeError, "gamma")],
             torch_ref=lambda torch, x, g, b, *, eps=1e-5: torch.nn.functional.batch_norm(
                 x[None], None, None, g, b, training=True, eps=eps)[0]))
