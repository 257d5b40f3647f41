"""Runtime rules of the norm family (meaning: :mod:`torchlean.spec.norm`)."""

from __future__ import annotations

import math

from .registry import defrule, pick


def _prod(shape):
    return math.prod(shape)


# ---- normalization --------------------------------------------------------------------------

def _ln_fwd(K, x, gamma=None, beta=None, *, normalized_ndim, eps=1e-5):
    n = _prod(x.shape[x.ndim - normalized_ndim:])
    x2 = x.reshape(-1, n)
    y, mu, rstd = K.layer_norm_fwd(x2, None if gamma is None else gamma.reshape(n),
                                   None if beta is None else beta.reshape(n), eps)
    gshape = x.shape[x.ndim - normalized_ndim:]
    return y.reshape(x.shape), (x2, gamma, mu, rstd, x.shape, gshape)


def _ln_bwd(K, s, g, needs):
    x2, gamma, mu, rstd, shape, gshape = s
    dx, dg, db = K.layer_norm_bwd(x2, None if gamma is None else gamma.reshape(-1), mu, rstd,
                                  g.reshape(x2.shape))
    if gamma is None:
        return (dx.reshape(shape),)
    return pick(needs, dx.reshape(shape), dg.reshape(gshape), db.reshape(gshape))


defrule("layer_norm", _ln_fwd, _ln_bwd)


defrule("layer_norm_noaffine",
        lambda K, x, *, normalized_ndim, eps=1e-5: _ln_fwd(K, x, normalized_ndim=normalized_ndim, eps=eps),
        _ln_bwd)


def _ncs(x):
    """(N, C, *spatial) -> (N, C, S) view."""
    return x.reshape(x.shape[0], x.shape[1], _prod(x.shape[2:]))


def _bn_fwd(K, x, gamma, beta, *, eps=1e-5):
    x3 = _ncs(x)
    y, mu, rstd = K.batch_norm_fwd(x3, gamma, beta, eps)
    return y.reshape(x.shape), (x3, gamma, mu, rstd, x.shape)


def _bn_bwd(K, s, g, needs):
    x3, gamma, mu, rstd, shape = s
    dx, dg, db = K.batch_norm_bwd(x3, gamma, mu, rstd, g.reshape(x3.shape))
    return pick(needs, dx.reshape(shape), dg, db)


defrule("batch_norm_train", _bn_fwd, _bn_bwd)


def _bn_chw_fwd(K, x, gamma, beta, *, eps=1e-5):
    # One (C, H, W) image is a batch of one: the channel statistics run over H*W.
    x3 = x.reshape(1, x.shape[0], _prod(x.shape[1:]))
    y, mu, rstd = K.batch_norm_fwd(x3, gamma, beta, eps)
    return y.reshape(x.shape), (x3, gamma, mu, rstd, x.shape)


defrule("batch_norm_chw", _bn_chw_fwd, _bn_bwd)


def _bne_fwd(K, x, gamma, beta, mean, var, *, eps=1e-5):
    c = x.shape[1]
    x3 = _ncs(x)
    rstd = K.inv(K.sqrt(K.add_scalar(var, eps)))
    k = K.mul(rstd, gamma).reshape(1, c, 1)
    xc = K.sub(x3, mean.reshape(1, c, 1))
    y = K.add(K.mul(xc, k), beta.reshape(1, c, 1))
    return y.reshape(x.shape), (xc, k, rstd.reshape(1, c, 1), x.shape)


def _bne_bwd(K, s, g, needs):
    xc, k, rstd, shape = s
    g3 = g.reshape(xc.shape)
    dx = K.mul(g3, k).reshape(shape) if needs[0] else None
    dg = K.sum(K.mul(K.mul(g3, xc), rstd), (0, 2), False) if needs[1] else None
    db = K.sum(g3, (0, 2), False) if needs[2] else None
    return dx, dg, db, None, None


defrule("batch_norm_eval", _bne_fwd, _bne_bwd)
