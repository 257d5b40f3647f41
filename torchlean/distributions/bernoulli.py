"""Bernoulli (torch.distributions.bernoulli): 0/1 outcomes with ``probs`` or ``logits``.

    >>> import torchlean as tl
    >>> from torchlean.distributions import Bernoulli
    >>> b = Bernoulli(tl.tensor([0.25]))
    >>> [round(v, 4) for v in b.log_prob(tl.tensor([1.0])).tolist()]
    [-1.3863]
"""

from __future__ import annotations

from numbers import Number

from ..nn.functional import binary_cross_entropy_with_logits
from ..ops import arange
from ..ops import bernoulli as _bernoulli
from ..tensor import Size, no_grad
from . import constraints
from .distribution import BinaryParams, Distribution
from .utils import broadcast_all

__all__ = ["Bernoulli"]


class Bernoulli(BinaryParams, Distribution):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0; exactly one parameter is given."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = Size() if is_scalar else self._param.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_binary(Bernoulli, batch_shape, _instance)
        new._param = new.__dict__["probs"] if "probs" in self.__dict__ else new.__dict__["logits"]
        return new

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        from ..ops import where
        mode = (self.probs >= 0.5).to(self.probs)
        return where(self.probs == 0.5, float("nan"), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    @property
    def param_shape(self):
        return self._param.shape

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            return _bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value.to(logits.dtype), reduction="none")

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
