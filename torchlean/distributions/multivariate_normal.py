"""MultivariateNormal (torch.distributions.multivariate_normal), parameterized by exactly one of
``covariance_matrix``, ``precision_matrix`` or ``scale_tril`` (factored with
``torchlean.linalg.cholesky``).

    >>> import torchlean as tl
    >>> from torchlean.distributions import MultivariateNormal
    >>> m = MultivariateNormal(tl.zeros(2), covariance_matrix=tl.eye(2))
    >>> round(m.log_prob(tl.zeros(2)).item(), 4), m.sample((5,)).shape
    (-1.8379, torchlean.Size([5, 2]))
"""

from __future__ import annotations

import math

from .. import linalg
from ..ops import broadcast_shapes, randn
from ..tensor import Size, no_grad
from . import constraints
from .distribution import Distribution, _size
from .utils import lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat, bvec):
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _solve_lower(L, B):
    """L^{-1} B for lower-triangular L (..., n, n) and B (..., n, k), broadcasting the batch axes."""
    L = L.tril()  # only the lower triangle is read, as solve_triangular does (and its gradient)
    batch = tuple(broadcast_shapes(tuple(L.shape[:-2]), tuple(B.shape[:-2])))
    return linalg.solve(L.expand(batch + tuple(L.shape[-2:])), B.expand(batch + tuple(B.shape[-2:])))


def _batch_mahalanobis(bL, bx):
    """x^T (L L^T)^{-1} x over the broadcast batch of L (..., n, n) and x (..., n)."""
    return _solve_lower(bL, bx.unsqueeze(-1)).squeeze(-1).pow(2).sum(-1)


def _precision_to_scale_tril(P):
    return linalg.cholesky(linalg.inv(P))


class MultivariateNormal(Distribution):
    """Normal vectors with mean ``loc`` (..., n) and covariance ``L L^T``; ``rsample`` is
    ``loc + L @ eps`` with ``eps`` from ``tl.randn``, differentiable."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            if scale_tril.dim() < 2:
                raise ValueError("scale_tril matrix must be at least two-dimensional, with optional leading batch "
                                 "dimensions")
            batch_shape = tuple(broadcast_shapes(tuple(scale_tril.shape[:-2]), tuple(loc.shape[:-1])))
            self.scale_tril = scale_tril.expand(batch_shape + (-1, -1))
        elif covariance_matrix is not None:
            if covariance_matrix.dim() < 2:
                raise ValueError("covariance_matrix must be at least two-dimensional, with optional leading batch "
                                 "dimensions")
            batch_shape = tuple(broadcast_shapes(tuple(covariance_matrix.shape[:-2]), tuple(loc.shape[:-1])))
            self.covariance_matrix = covariance_matrix.expand(batch_shape + (-1, -1))
        else:
            if precision_matrix.dim() < 2:
                raise ValueError("precision_matrix must be at least two-dimensional, with optional leading batch "
                                 "dimensions")
            batch_shape = tuple(broadcast_shapes(tuple(precision_matrix.shape[:-2]), tuple(loc.shape[:-1])))
            self.precision_matrix = precision_matrix.expand(batch_shape + (-1, -1))
        self.loc = loc.expand(batch_shape + (-1,))
        event_shape = self.loc.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(_size(batch_shape))
        loc_shape = batch_shape + tuple(self.event_shape)
        cov_shape = batch_shape + tuple(self.event_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(cov_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        L_inv = linalg.inv(self._unbroadcasted_scale_tril)
        return (L_inv.mT @ L_inv).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) +
                                                                    tuple(self._event_shape))

    def sample(self, sample_shape=Size()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        eps = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - half_log_det

    def entropy(self):
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))
