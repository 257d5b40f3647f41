"""Gamma (torch.distributions.gamma) with ``concentration`` and ``rate``.

Samples come from Marsaglia and Tsang's squeeze method over torchlean's generator (normals and
uniforms from ``tl.randn``/``tl.rand``); there is no reparameterized gradient, so ``has_rsample`` is
False here (torch differentiates its sampler).

    >>> import torchlean as tl
    >>> from torchlean.distributions import Gamma
    >>> g = Gamma(tl.tensor([2.0]), tl.tensor([3.0]))
    >>> [round(v, 4) for v in g.log_prob(tl.tensor([1.0])).tolist()], [round(v, 4) for v in g.mean.tolist()]
    ([-0.8028], [0.6667])
"""

from __future__ import annotations

from numbers import Number

import numpy as np

from ..dtypes import finfo, float64
from ..errors import AbstractMethodError
from ..ops import rand, randn, tensor, xlogy
from ..tensor import Size, no_grad
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, digamma, lgamma

__all__ = ["Gamma", "standard_gamma"]


def standard_gamma(alpha):
    """Gamma(alpha, 1) draws, one per element of the tensor ``alpha`` (no gradient), in its dtype,
    clamped below at the dtype's smallest normal number (as torch does)."""
    a = np.asarray(alpha.detach().cpu().numpy(), dtype=np.float64).reshape(-1)
    boost = a < 1
    d = np.where(boost, a + 1, a) - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.empty_like(a)
    pending = np.arange(a.size)
    while pending.size:
        x = randn(pending.size, dtype=float64).numpy()
        u = rand(pending.size, dtype=float64).numpy()
        v = (1 + c[pending] * x) ** 3
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = (v > 0) & (np.log(u) < 0.5 * x * x + d[pending] - d[pending] * v + d[pending] * np.log(v))
        out[pending[ok]] = d[pending[ok]] * v[ok]
        pending = pending[~ok]
    if boost.any():
        u = rand(int(boost.sum()), dtype=float64).numpy()
        out[boost] *= u ** (1.0 / a[boost])
    out = np.maximum(out, finfo(alpha.dtype).tiny).reshape(tuple(alpha.shape))
    return tensor(out, dtype=alpha.dtype, device=alpha.device)


class Gamma(Distribution):
    """Density ``rate^c x^(c-1) exp(-rate x) / Gamma(c)`` on ``x >= 0``. ``cdf`` is not provided
    (it needs the regularized incomplete gamma function)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = False
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        scalar = isinstance(concentration, Number) and isinstance(rate, Number)
        super().__init__(Size() if scalar else self.concentration.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Gamma, batch_shape, _instance, ('concentration', 'rate'))

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()):
        raise AbstractMethodError("Gamma.rsample: reparameterized Gamma samples are not available on this backend "
                                  "(has_rsample is False); use sample(), which carries no gradient")

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
            return value.clamp(min=finfo(value.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value if not isinstance(value, Number) else tensor(value, dtype=self.rate.dtype)
        return (xlogy(self.concentration, self.rate) + xlogy(self.concentration - 1, value)
                - self.rate * value - lgamma(self.concentration))

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + lgamma(c) + (1.0 - c) * digamma(c)
