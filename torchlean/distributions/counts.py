"""Count distributions (torch.distributions): Poisson and Geometric, with torch's ``log_prob``,
moments and entropy; samples from torchlean's generator (Poisson: Knuth's product of uniforms below a
rate of 10, Hormann's transformed rejection (PTRS) above; Geometric: inversion).

    >>> import torchlean as tl
    >>> from torchlean.distributions import Poisson
    >>> round(Poisson(tl.tensor(2.0)).log_prob(tl.tensor(3.0)).item(), 4)
    -1.7123
"""

from __future__ import annotations

from numbers import Number

import numpy as np

from ..dtypes import finfo, float64
from ..nn.functional import binary_cross_entropy_with_logits
from ..ops import rand, tensor, xlogy
from ..ops.gamma import _LGAMMA
from ..tensor import Size, no_grad
from . import constraints
from .distribution import BinaryParams, Distribution
from .utils import batch_of, broadcast_all, lgamma

__all__ = ["Poisson", "Geometric"]


def _poisson_draws(lam: np.ndarray) -> np.ndarray:
    """One Poisson draw per entry of ``lam`` (float64, >= 0), from ``tl.rand`` uniforms."""
    out = np.zeros(lam.shape)
    small = np.flatnonzero((lam > 0) & (lam < 10))
    if small.size:                                   # Knuth: multiply uniforms until below exp(-lam)
        limit, prod, count = np.exp(-lam[small]), np.ones(small.size), np.zeros(small.size)
        live = np.arange(small.size)
        while live.size:
            prod[live] *= rand(live.size, dtype=float64).numpy()
            go = prod[live] > limit[live]
            count[live[go]] += 1
            live = live[go]
        out[small] = count
    big = np.flatnonzero(lam >= 10)
    pending = big.copy()
    while pending.size:                              # PTRS (Hormann 1993)
        lm = lam[pending]
        slam, loglam = np.sqrt(lm), np.log(lm)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        u = rand(pending.size, dtype=float64).numpy() - 0.5
        v = rand(pending.size, dtype=float64).numpy()
        us = 0.5 - np.abs(u)
        k = np.floor((2 * a / us + b) * u + lm + 0.43)
        quick = (us >= 0.07) & (v <= vr)
        with np.errstate(divide="ignore", invalid="ignore"):
            slow = (k >= 0) & ~((us < 0.013) & (v > us)) & (
                np.log(v * inv_alpha / (a / (us * us) + b))
                <= -lm + k * loglam - _LGAMMA(np.maximum(k, 0) + 1).astype(np.float64))
        ok = quick | (~quick & slow)
        out[pending[ok]] = k[ok]
        pending = pending[~ok]
    return out


class Poisson(Distribution):
    """Counts with mean ``rate``."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(batch_of(rate, like=self.rate), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Poisson, batch_shape, _instance, ('rate',))

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            lam = np.asarray(self.rate.expand(shape).detach().cpu().numpy(), dtype=np.float64)
            return tensor(_poisson_draws(lam.reshape(-1)).reshape(shape), dtype=self.rate.dtype,
                          device=self.rate.device)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - lgamma(value + 1)


class Geometric(BinaryParams, Distribution):
    """The number of failures before the first success of Bernoulli(``probs``) trials (``probs`` or
    ``logits``)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            scalar = isinstance(probs, Number)
        else:
            (self.logits,) = broadcast_all(logits)
            scalar = isinstance(logits, Number)
        param = self.probs if probs is not None else self.logits
        super().__init__(Size() if scalar else param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(Geometric, batch_shape, _instance)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return 0.0 * self.probs

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            u = rand(shape, dtype=self.probs.dtype, device=self.probs.device)
            return (u.clamp(min=finfo(u.dtype).tiny).log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = probs.clone()
        probs = probs.where(~((probs == 1) & (value == 0)), 0.0 * probs)   # 0 * log(0) = 0 when p = 1
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
