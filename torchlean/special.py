"""torch.special under torchlean: the functions the op families already have, under torch.special's
names, and a few compositions of them (``logit``, ``ndtr``, ``sinc``, ``xlog1py``), each with torch's
values and gradients.

    >>> import torchlean as tl
    >>> [round(v, 4) for v in tl.special.ndtr(tl.tensor([0.0, 1.0])).tolist()]
    [0.5, 0.8413]
"""

from __future__ import annotations

import math

__all__ = ["erf", "erfc", "erfinv", "expm1", "log1p", "exp2", "expit", "logit", "xlogy", "xlog1py", "logsumexp",
           "softmax", "log_softmax", "round", "ndtr", "sinc", "gammaln", "digamma", "psi", "polygamma",
           "multigammaln"]


def _ops():
    from . import ops
    return ops


def __getattr__(name):
    # the functions of the op families under their torch.special names
    if name in ("erf", "erfc", "erfinv", "expm1", "log1p", "exp2", "xlogy", "logsumexp", "softmax", "log_softmax",
                "round"):
        return getattr(_ops(), name)
    if name == "expit":
        return _ops().sigmoid
    gamma = {"gammaln": "lgamma", "digamma": "digamma", "psi": "digamma", "polygamma": "polygamma",
             "multigammaln": "mvlgamma"}
    if name in gamma:
        return getattr(_ops(), gamma[name])
    raise AttributeError(f"module 'torchlean.special' has no attribute {name!r}")


def logit(input, eps=None):  # noqa: A002
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    o = _ops()
    p = input if eps is None else o.clamp(input, eps, 1 - eps)
    return o.log(p / (1 - p))


def ndtr(input):  # noqa: A002
    """The standard normal CDF, ``erfc(-x / sqrt 2) / 2`` (accurate in the lower tail)."""
    return _ops().erfc(input * (-1.0 / math.sqrt(2.0))) * 0.5


def sinc(input):  # noqa: A002
    """``sin(pi x) / (pi x)``, 1 at 0 (with gradient 0 there, as torch's)."""
    o = _ops()
    zero = input == 0
    safe = o.where(zero, o.ones_like(input), input) * math.pi
    return o.where(zero, o.ones_like(input), o.sin(safe) / safe)


def xlog1py(input, other):  # noqa: A002
    """``x * log1p(y)``, and 0 where ``x`` is 0 and ``y <= -1`` (where the product would be 0 x -inf or
    NaN); the gradient in ``x`` is ``log1p(y)`` elsewhere, 0 there, as torch's."""
    o = _ops()
    x, y = (v if hasattr(v, "shape") else o.tensor(v) for v in (input, other))
    hole = (x == 0) & (y <= -1)
    safe_y = o.where(hole, o.zeros_like(y), y)
    prod = x * o.log1p(safe_y)
    return o.where(hole, o.zeros_like(prod), prod)


def __dir__():
    return sorted(__all__)
