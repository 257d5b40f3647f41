"""The base class of probability distributions (torch.distributions.Distribution).

Shapes: ``sample(sample_shape)`` has shape ``sample_shape + batch_shape + event_shape``; ``log_prob``
reduces the event axes. Validation (on by default, as in torch; ``set_default_validate_args(False)``
or ``validate_args=False`` turns it off) checks parameters against ``arg_constraints`` and values
against ``support``, raising ValueError with torch's messages.

    >>> import torchlean as tl
    >>> from torchlean.distributions import Normal
    >>> d = Normal(tl.zeros(3), tl.ones(3))
    >>> d.batch_shape, d.event_shape, d.sample((2,)).shape
    (torchlean.Size([3]), torchlean.Size([]), torchlean.Size([2, 3]))
"""

from __future__ import annotations

import warnings

from ..errors import AbstractMethodError
from ..ops import exp
from ..tensor import Size, Tensor, no_grad
from . import constraints
from .utils import lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Distribution"]


def _size(shape) -> Size:
    if isinstance(shape, Size):
        return shape
    if isinstance(shape, int):
        return Size([shape])
    return Size(tuple(int(s) for s in shape))


def _abstract(obj, what) -> AbstractMethodError:
    """The error of a member a Distribution subclass does not define (torch: NotImplementedError)."""
    return AbstractMethodError(f"{type(obj).__name__}.{what} is not defined for this distribution")


class Distribution:
    """Abstract base class of probability distributions (torch's contract; see the module docs)."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for every distribution built afterwards."""
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:  # AbstractMethodError: the subclass defines none
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = "
                              "{}` or initialize the distribution with `validate_args=False` to turn off "
                              "validation.", stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A distribution with batch axes expanded to ``batch_shape`` (parameters are expanded, not copied)."""
        raise _abstract(self, "expand")

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        raise _abstract(self, "arg_constraints")

    @property
    def support(self):
        raise _abstract(self, "support")

    @property
    def mean(self) -> Tensor:
        raise _abstract(self, "mean")

    @property
    def mode(self) -> Tensor:
        raise _abstract(self, "mode")

    @property
    def variance(self) -> Tensor:
        raise _abstract(self, "variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()) -> Tensor:
        """A sample (no gradient) of shape ``sample_shape + batch_shape + event_shape``."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()) -> Tensor:
        """A reparameterized sample: differentiable with respect to the parameters."""
        raise _abstract(self, "rsample")

    def sample_n(self, n: int) -> Tensor:
        """Deprecated form of ``sample((n,))`` (warns FutureWarning, as torch does)."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value) -> Tensor:
        raise _abstract(self, "log_prob")

    def cdf(self, value) -> Tensor:
        raise _abstract(self, "cdf")

    def icdf(self, value) -> Tensor:
        raise _abstract(self, "icdf")

    def enumerate_support(self, expand=True) -> Tensor:
        raise _abstract(self, "enumerate_support")

    def entropy(self) -> Tensor:
        raise _abstract(self, "entropy")

    def perplexity(self) -> Tensor:
        return exp(self.entropy())

    def _extended_shape(self, sample_shape=Size()) -> Size:
        return Size(tuple(_size(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape!r} vs "
                             f"{self._event_shape!r}.")
        actual_shape = tuple(value.shape)
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {Size(actual_shape)!r} vs "
                                 f"{Size(expected_shape)!r}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                          "initialize the distribution with `validate_args=False` to turn off validation.",
                          stacklevel=2)
            return
        valid = support.check(value)
        if not bool(valid.all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def _expand_params(self, cls, batch_shape, _instance, names):
        """torch's ``expand`` for a family whose parameters ``names`` all have the batch shape: each
        is expanded (a view, not a copy) into a new instance that keeps the validation flag."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = _size(batch_shape)
        for name in names:
            setattr(new, name, getattr(self, name).expand(tuple(batch_shape)))
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise AbstractMethodError(f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        param_names = [k for k in self.arg_constraints if k in self.__dict__]
        args_string = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else repr(self.__dict__[p].shape)}"
            for p in param_names)
        return self.__class__.__name__ + "(" + args_string + ")"


class BinaryParams:
    """``logits`` from ``probs`` and ``probs`` from ``logits`` (binary form), whichever was not given:
    the two lazy properties of Bernoulli, Binomial and Geometric."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def _expand_binary(self, cls, batch_shape, _instance, *others):
        """``expand`` of such a distribution: whichever of probs / logits it holds, and ``others``."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = _size(batch_shape)
        for name in ("probs", "logits") + others:
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(tuple(batch_shape)))
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new
