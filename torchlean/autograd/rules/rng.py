"""Runtime rules of the rng family: dropout (meaning: :mod:`torchlean.spec.rng`)."""

from __future__ import annotations

from .registry import defrule


# ---- dropout --------------------------------------------------------------------------------

def _dropout_fwd(K, x, *, p, seed, counter):
    if p == 0:
        return K.copy(x), None
    # The keep-mask already scaled by 1 / (1 - p): forward and backward multiply by it.
    m = K.scale(K.bernoulli_mask(x.shape, 1.0 - p, seed, counter, x.dtype), 1.0 / (1.0 - p))
    return K.mul(x, m), m


defrule("dropout", _dropout_fwd, lambda K, m, g, n: (K.copy(g) if m is None else K.mul(g, m),))
