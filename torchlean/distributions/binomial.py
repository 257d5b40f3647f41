"""Binomial and Multinomial (torch.distributions), with torch's ``log_prob`` (its stable form in the
logits), moments and ``enumerate_support``; samples from torchlean's generator (Binomial: the sum of
``total_count`` Bernoulli draws; Multinomial: ``total_count`` categorical draws counted).

    >>> import torchlean as tl
    >>> from torchlean.distributions import Binomial
    >>> round(Binomial(4, tl.tensor(0.5)).log_prob(tl.tensor(2.0)).item(), 4)
    -0.9808
"""

from __future__ import annotations


import numpy as np

from ..errors import UnsupportedError
from ..ops import arange, rand, tensor, where
from ..tensor import Size, no_grad
from . import constraints
from .categorical import Categorical
from .distribution import BinaryParams, Distribution, _size
from .utils import broadcast_all, lgamma

__all__ = ["Binomial", "Multinomial"]


class Binomial(BinaryParams, Distribution):
    """Successes in ``total_count`` Bernoulli(``probs``) trials (``probs`` or ``logits``)."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
            param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
            param = self.logits
        super().__init__(param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_binary(Binomial, batch_shape, _instance, "total_count")

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            n = np.asarray(self.total_count.expand(shape).detach().cpu().numpy()).astype(np.int64)
            p = np.asarray(self.probs.expand(shape).detach().cpu().numpy(), dtype=np.float64)
            top = int(n.max()) if n.size else 0
            u = rand(tuple(shape) + (top,), dtype=self.probs.dtype).numpy() if top else np.zeros(shape + (0,))
            hits = (u < p[..., None]) & (np.arange(top) < n[..., None])
            return tensor(hits.sum(-1).astype(np.float64), dtype=self.probs.dtype, device=self.probs.device)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._log_prob(value)

    def _log_prob(self, value):
        n, lg = self.total_count, self.logits
        # max(logit, 0) with the derivative 1/2 at 0 (torch's _clamp_by_zero): the log-probability's
        # derivative is then k - n p there too, as everywhere else
        clamp0 = (lg.clamp(min=0) + lg - lg.clamp(max=0)) / 2
        normalize = n * clamp0 + n * (-lg.abs()).exp().log1p() - lgamma(n + 1)
        return value * self.logits - lgamma(value + 1) - lgamma(n - value + 1) - normalize

    def entropy(self):
        """-sum_k p(k) log p(k) over k = 0 ... total_count; with total counts that differ across the
        batch (torch raises there) each entry sums over its own support: the counts past it are
        masked, read at k = 0 so that neither the value nor the gradient meets log 0."""
        k = self._values(int(self.total_count.max().item()))
        inside = k <= self.total_count
        lp = self._log_prob(where(inside, k, 0.0))
        return -where(inside, lp.exp() * lp, 0.0).sum(0)

    def _values(self, top):
        values = arange(1 + top, dtype=self.probs.dtype, device=self.probs.device)
        return values.reshape((-1,) + (1,) * len(self.batch_shape))

    def enumerate_support(self, expand=True):
        top = int(self.total_count.max().item())
        if int(self.total_count.min().item()) != top:
            raise UnsupportedError(f"Binomial.enumerate_support: the total counts differ across the batch "
                                   f"({int(self.total_count.min().item())} to {top}), so the supports have "
                                   f"different lengths and no tensor holds them")
        values = self._values(top)
        if expand:
            values = values.expand((-1,) + tuple(self.batch_shape))
        return values


class Multinomial(Distribution):
    """Counts of ``total_count`` draws over the categories of ``probs`` / ``logits`` (last axis)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, (int, np.integer)) or isinstance(total_count, bool):
            raise UnsupportedError(f"Multinomial: total_count must be one int for the whole batch (torch's rule "
                                   f"too), got {type(total_count).__name__} {total_count!r}")
        self.total_count = int(total_count)
        self._categorical = Categorical(probs=probs, logits=logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = _size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        sample_shape = _size(sample_shape)
        with no_grad():
            draws = self._categorical.sample(Size((self.total_count,)) + sample_shape)   # (n, *sample, *batch)
            k = self._categorical.param_shape[-1]
            d = np.asarray(draws.cpu().numpy(), dtype=np.int64)
            counts = (d[..., None] == np.arange(k)).sum(0).astype(np.float64)
            return tensor(counts, dtype=self.probs.dtype, device=self.probs.device)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = logits.where(~((value == 0) & (logits == -float("inf"))), 0.0 * value)
        return lgamma(value.sum(-1) + 1) - lgamma(value + 1).sum(-1) + (logits * value).sum(-1)
