"""Exponential (torch.distributions.exponential) with ``rate``; ``rsample`` is ``-log1p(-u) / rate``.

    >>> import torchlean as tl
    >>> from torchlean.distributions import Exponential
    >>> e = Exponential(tl.tensor([2.0]))
    >>> e.mean.tolist(), [round(v, 4) for v in e.log_prob(tl.tensor([1.0])).tolist()]
    ([0.5], [-1.3069])
"""

from __future__ import annotations

from ..ops import rand, zeros_like
from ..tensor import Size, no_grad
from . import constraints
from .distribution import Distribution
from .utils import batch_of, broadcast_all

__all__ = ["Exponential"]


class Exponential(Distribution):
    """Density ``rate * exp(-rate * x)`` on ``x >= 0``."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = batch_of(rate, like=self.rate)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Exponential, batch_shape, _instance, ('rate',))

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def sample(self, sample_shape=Size()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        u = rand(shape, dtype=self.rate.dtype, device=self.rate.device)
        return -(-u).log1p() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()
