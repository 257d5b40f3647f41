"""Beta (torch.distributions.beta) with ``concentration1`` (alpha) and ``concentration0`` (beta).

Samples are ``X / (X + Y)`` with ``X ~ Gamma(concentration1)``, ``Y ~ Gamma(concentration0)``; no
reparameterized gradient here (``has_rsample`` False; torch's goes through its Dirichlet sampler).

    >>> import torchlean as tl
    >>> from torchlean.distributions import Beta
    >>> b = Beta(tl.tensor([2.0]), tl.tensor([2.0]))
    >>> b.mean.tolist(), [round(v, 4) for v in b.log_prob(tl.tensor([0.5])).tolist()]
    ([0.5], [0.4055])
"""

from __future__ import annotations

from numbers import Real

from ..errors import AbstractMethodError
from ..ops import stack, tensor, where, xlogy
from ..tensor import Size, no_grad
from . import constraints
from .distribution import Distribution, _size
from .gamma import standard_gamma
from .utils import broadcast_all, digamma, lgamma

__all__ = ["Beta"]


class Beta(Distribution):
    """Density ``x^(a-1) (1-x)^(b-1) / B(a, b)`` on ``[0, 1]``."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = False

    def __init__(self, concentration1, concentration0, validate_args=None):
        if isinstance(concentration1, Real) and isinstance(concentration0, Real):
            self._c10 = tensor([float(concentration1), float(concentration0)])
        else:
            c1, c0 = broadcast_all(concentration1, concentration0)
            self._c10 = stack([c1, c0], -1)
        super().__init__(self._c10.shape[:-1], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = _size(batch_shape)
        new._c10 = self._c10.expand(tuple(batch_shape) + (2,))
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def concentration1(self):
        return self._c10[..., 0]

    @property
    def concentration0(self):
        return self._c10[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        # Dirichlet's mode on two components: interior when both > 1, else the larger one's corner.
        a, b = self.concentration1, self.concentration0
        am1, bm1 = (a - 1).clamp(min=0.0), (b - 1).clamp(min=0.0)
        interior = am1 / (am1 + bm1)
        corner = (a >= b).to(a.dtype)
        return where((a < 1) & (b < 1), corner, interior)

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()):
        raise AbstractMethodError("Beta.rsample: reparameterized Beta samples are not available on this backend "
                                  "(has_rsample is False); use sample(), which carries no gradient")

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            x = standard_gamma(self.concentration1.expand(shape))
            y = standard_gamma(self.concentration0.expand(shape))
            return x / (x + y)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self._c10
        heads_tails = stack([value, 1.0 - value], -1)
        return (xlogy(c - 1.0, heads_tails).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1))

    def entropy(self):
        c = self._c10
        k = c.shape[-1]
        a0 = c.sum(-1)
        return lgamma(c).sum(-1) - lgamma(a0) - (k - a0) * digamma(a0) - ((c - 1.0) * digamma(c)).sum(-1)

    @property
    def _natural_params(self):
        return (self.concentration1, self.concentration0)


