"""Random numbers: the counter-based generator and dropout, their reference meaning.

The generator is splitmix64 of (seed, counter, element index): ``random_bits`` gives
64 bits per element, ``uniform`` the float in [0, 1) they stand for, and every device's
rng kernels compute the same integers, so the same seed gives the same numbers
everywhere. ``dropout(x; p, seed, counter)`` multiplies by the keep-mask
``uniform(x.shape) < 1 - p`` (float32 uniforms) scaled by ``1 / (1 - p)``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import DomainError
from .registry import defspec


# ---- the generator --------------------------------------------------------------------------

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def stream_key(seed, counter) -> np.uint64:
    """The key of the stream ``(seed, counter)``: what every element's bits are mixed with (the
    CUDA kernels take it as an argument)."""
    with np.errstate(over="ignore"):
        return _mix(np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF) * _GOLD + np.uint64(int(counter) & 0xFFFFFFFFFFFFFFFF))


def random_bits(n, seed, counter, offset=0):
    """64 random bits per element index ``offset .. offset + n - 1``."""
    key = stream_key(seed, counter)
    with np.errstate(over="ignore"):
        i = np.arange(offset, offset + n, dtype=np.uint64)
        return _mix(key ^ (i * _GOLD + _GOLD))


def uniform(n, seed, counter, dtype, offset=0):
    """``n`` uniforms in [0, 1): the top 53 bits for float64, the top 24 for float32."""
    bits = random_bits(n, seed, counter, offset)
    if np.dtype(dtype) == np.float64:
        return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 2 ** 53)
    return ((bits >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 2 ** 24)).astype(dtype)


# ---- dropout --------------------------------------------------------------------------------

def _dropout_shape(x, *, p, seed, counter):
    if (not isinstance(p, numbers.Real) or isinstance(p, bool) or not math.isfinite(p)
            or not 0.0 <= p < 1.0):
        raise DomainError(f"dropout: p must lie in [0, 1), got {p!r}")
    for name, v in (("seed", seed), ("counter", counter)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
            raise DomainError(f"dropout: {name} must be a non-negative int, got {v!r}")
    return tuple(x)


def dropout_mask(shape, p, seed, counter):
    """The float64 keep-mask of dropout (1 where kept): float32 uniforms below ``1 - p``."""
    u = uniform(math.prod(shape), seed, counter, np.float32).reshape(tuple(shape))
    return (u < np.float32(1.0 - p)).astype(np.float64)


def _dropout(x, *, p, seed, counter):
    if p == 0:
        return x.copy()
    return x * dropout_mask(x.shape, p, seed, counter) / (1.0 - p)


def _dropout_vjp(g, x, *, p, seed, counter):
    if p == 0:
        return (np.asarray(g).copy(),)
    return (g * dropout_mask(x.shape, p, seed, counter) / (1.0 - p),)


defspec("dropout", _dropout, _dropout_vjp, _dropout_shape, 1,
        why="the mask is drawn inside the op from (seed, counter): nothing random leaves it, and no mask is stored")
