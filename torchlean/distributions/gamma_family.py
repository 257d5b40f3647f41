"""Distributions built on Gamma draws (torch.distributions): Chi2 (``Gamma(df / 2, 1 / 2)``),
StudentT (a normal over the square root of a scaled Chi2) and Dirichlet (normalized Gammas), with
torch's ``log_prob``, ``entropy`` and moments. Their samples carry no gradient (``has_rsample`` is
False here: the Gamma sampler has no reparameterized gradient, docs/differences.md).

    >>> import torchlean as tl
    >>> from torchlean.distributions import StudentT
    >>> round(StudentT(3.0).log_prob(tl.tensor(0.0)).item(), 4)
    -1.0009
"""

from __future__ import annotations

import math
from numbers import Number

from ..dtypes import finfo
from ..errors import AbstractMethodError
from ..ops import full, randn, xlogy
from ..tensor import Size, no_grad
from . import constraints
from .distribution import Distribution
from .gamma import Gamma, standard_gamma
from .utils import broadcast_all, digamma, lgamma

__all__ = ["Chi2", "StudentT", "Dirichlet"]


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom: ``Gamma(df / 2, 1 / 2)``."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5 * df.new_ones(df.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Chi2, batch_shape, _instance, ('concentration', 'rate'))

    @property
    def df(self):
        return self.concentration * 2


class StudentT(Distribution):
    """Student's t with ``df`` degrees of freedom, location ``loc`` and scale ``scale``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        scalar = all(isinstance(v, Number) for v in (df, loc, scale))
        super().__init__(Size() if scalar else self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(StudentT, batch_shape, _instance, ('df', 'loc', 'scale'))

    @property
    def mean(self):
        m = self.loc.clone()
        return m.where(self.df > 1, full((), math.nan, dtype=m.dtype, device=m.device))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        v = self.scale.pow(2) * self.df / (self.df - 2)
        v = v.where(self.df > 2, full((), math.inf, dtype=v.dtype, device=v.device))
        return v.where(self.df > 1, full((), math.nan, dtype=v.dtype, device=v.device))

    def rsample(self, sample_shape=Size()):
        raise AbstractMethodError("StudentT.rsample: reparameterized samples are not available on this backend "
                                  "(its Chi2 draws carry no gradient); use sample()")

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            x = randn(shape, dtype=self.df.dtype, device=self.df.device)
            z = standard_gamma((0.5 * self.df).expand(shape)) * 2
            y = x * (self.df.expand(shape) / z).sqrt()
            return self.loc + self.scale * y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + lgamma(0.5 * self.df)
             - lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - z

    def entropy(self):
        lbeta = lgamma(0.5 * self.df) + math.lgamma(0.5) - lgamma(0.5 * (self.df + 1))
        return (self.scale.log() + 0.5 * (self.df + 1) * (digamma(0.5 * (self.df + 1)) - digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)


class Dirichlet(Distribution):
    """The Dirichlet distribution over the simplex of the last axis of ``concentration``."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = False

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        Distribution.__init__(new, Size(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        c = (self.concentration - 1).clamp(min=0.0)
        m = c / c.sum(-1, True)
        return m

    @property
    def variance(self):
        c0 = self.concentration.sum(-1, True)
        return self.concentration * (c0 - self.concentration) / (c0.pow(2) * (c0 + 1))

    def rsample(self, sample_shape=Size()):
        raise AbstractMethodError("Dirichlet.rsample: reparameterized samples are not available on this backend "
                                  "(its Gamma draws carry no gradient); use sample()")

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            g = standard_gamma(self.concentration.expand(shape))
            x = g / g.sum(-1, True)
            tiny = finfo(x.dtype).tiny
            return x.clamp(min=tiny, max=1 - finfo(x.dtype).eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    def entropy(self):
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (lgamma(self.concentration).sum(-1) - lgamma(a0) - (k - a0) * digamma(a0)
                - ((self.concentration - 1.0) * digamma(self.concentration)).sum(-1))
