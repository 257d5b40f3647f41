"""LogNormal, Cauchy and HalfNormal (torch.distributions): ``exp`` of a normal, the Cauchy
distribution, and ``|N(0, scale)|``, with torch's formulas for ``log_prob``, ``cdf``, ``icdf``,
``entropy`` and the moments, and ``rsample`` differentiable through the tape.

    >>> import torchlean as tl
    >>> from torchlean.distributions import LogNormal
    >>> round(LogNormal(0.0, 1.0).log_prob(tl.tensor(1.0)).item(), 4)
    -0.9189
"""

from __future__ import annotations

import math

from ..ops import atan, erf, erfinv, full, rand, randn, tan
from ..tensor import Size, no_grad
from . import constraints
from .distribution import Distribution
from .normal import Normal
from .utils import batch_of, broadcast_all

__all__ = ["LogNormal", "Cauchy", "HalfNormal"]


class LogNormal(Distribution):
    """``exp(X)`` for ``X ~ Normal(loc, scale)``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        self.base_dist = Normal(self.loc, self.scale, validate_args=validate_args)
        batch_shape = batch_of(loc, scale, like=self.loc)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(LogNormal, batch_shape, _instance, ('loc', 'scale'))
        new.base_dist = Normal(new.loc, new.scale, validate_args=False)
        return new

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def sample(self, sample_shape=Size()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = value.log()
        return self.base_dist.log_prob(y) - y

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.base_dist.cdf(value.log())

    def icdf(self, value):
        return self.base_dist.icdf(value).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class Cauchy(Distribution):
    """The Cauchy distribution (median ``loc``, half width ``scale``): no mean or variance (nan, inf)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = batch_of(loc, scale, like=self.loc)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Cauchy, batch_shape, _instance, ('loc', 'scale'))

    @property
    def mean(self):
        return full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def sample(self, sample_shape=Size()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        u = rand(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class HalfNormal(Distribution):
    """``|X|`` for ``X ~ Normal(0, scale)``."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (self.scale,) = broadcast_all(scale)
        self.base_dist = Normal(0.0 * self.scale, self.scale, validate_args=validate_args)
        batch_shape = batch_of(scale, like=self.scale)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(HalfNormal, batch_shape, _instance, ('scale',))
        new.base_dist = Normal(0.0 * new.scale, new.scale, validate_args=False)
        return new

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return 0.0 * self.scale

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def sample(self, sample_shape=Size()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        eps = randn(tuple(self._extended_shape(sample_shape)), dtype=self.scale.dtype, device=self.scale.device)
        return (eps * self.scale).abs()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return lp.where(value >= 0, full((), -math.inf, dtype=lp.dtype, device=lp.device))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return erf(value / (self.scale * math.sqrt(2)))

    def icdf(self, prob):
        return self.scale * erfinv(prob) * math.sqrt(2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)
