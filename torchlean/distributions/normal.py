"""Normal (torch.distributions.normal): ``rsample`` is ``loc + eps * scale`` with ``eps`` from
``torchlean.randn``, differentiable through the tape.

    >>> import torchlean as tl
    >>> from torchlean.distributions import Normal
    >>> d = Normal(0.0, 1.0)
    >>> round(d.log_prob(tl.tensor(0.0)).item(), 4), round(d.cdf(tl.tensor(0.0)).item(), 4)
    (-0.9189, 0.5)
"""

from __future__ import annotations

import math
from numbers import Real

from ..ops import erf, erfinv, randn
from ..tensor import Size, no_grad
from . import constraints
from .distribution import Distribution
from .utils import batch_of, broadcast_all

__all__ = ["Normal"]


def _standard_normal(shape, like):
    return randn(tuple(shape), dtype=like.dtype, device=like.device)


class Normal(Distribution):
    """The normal distribution with mean ``loc`` and standard deviation ``scale``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = batch_of(loc, scale, like=self.loc)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Normal, batch_shape, _instance, ('loc', 'scale'))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def sample(self, sample_shape=Size()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, self.loc)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        log_scale = math.log(self.scale) if isinstance(self.scale, Real) else self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()
