"""KL divergence between distributions (torch.distributions.kl): ``kl_divergence(p, q)`` dispatches
on the most specific ``(type(p), type(q))`` pair registered with ``register_kl``.

    >>> import torchlean as tl
    >>> from torchlean.distributions import Normal, kl_divergence
    >>> round(kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0)).item(), 4)
    0.5
"""

from __future__ import annotations

import warnings

from ..errors import AbstractMethodError

from ..nn.functional import softplus
from ..ops import where
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .counts import Geometric, Poisson
from .gamma_family import Dirichlet
from .lognormal import HalfNormal, LogNormal
from .categorical import Categorical, OneHotCategorical
from .exponential import Exponential
from .gamma import Gamma
from .independent import Independent
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis, _solve_lower
from .normal import Normal
from .uniform import Uniform
from .utils import _sum_rightmost, digamma, lgamma

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}  # (type_p, type_q) -> function; filled by register_kl


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as KL(p || q) for instances of ``type_p`` and ``type_q``."""
    if not isinstance(type_p, type) or not isinstance(type_q, type):
        raise TypeError(f"Expected type_p and type_q to be subclasses of Distribution, got {type_p!r} and {type_q!r}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        return fun

    return decorator


def _dispatch_kl(type_p, type_q):
    matches = [(sp, sq) for sp, sq in _KL_REGISTRY if issubclass(type_p, sp) and issubclass(type_q, sq)]
    if not matches:
        return NotImplemented
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    left = min(matches, key=lambda m: (mro_p.index(m[0]), mro_q.index(m[1])))
    right = min(matches, key=lambda m: (mro_q.index(m[1]), mro_p.index(m[0])))
    left_fun, right_fun = _KL_REGISTRY[left], _KL_REGISTRY[right]
    if left_fun is not right_fun:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl"
                      f"({left[0].__name__}, {right[1].__name__})", RuntimeWarning, stacklevel=3)
    return left_fun


def kl_divergence(p, q):
    """KL(p || q), batched over the broadcast batch shape; AbstractMethodError (a NotImplementedError) when no rule applies."""
    fun = _dispatch_kl(type(p), type(q))
    if fun is NotImplemented:
        raise AbstractMethodError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fun(p, q)


_INF = float("inf")


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = where((q.probs == 0).expand_as(t), _INF, t)
    t = where((p.probs == 0).expand_as(t), 0.0, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = where(q.probs == 0, _INF, t1)
    t1 = where(p.probs == 0, 0.0, t1)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = where(q.probs == 1, _INF, t2)
    t2 = where(p.probs == 1, 0.0, t2)
    return t1 + t2


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    pL, qL = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = qL.diagonal(dim1=-2, dim2=-1).log().sum(-1) - pL.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    n = p.event_shape[0]
    term2 = _solve_lower(qL, pL).pow(2).sum((-2, -1))
    term3 = _batch_mahalanobis(qL, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise AbstractMethodError(f"kl_divergence: Independent distributions with {p.reinterpreted_batch_ndims} and "
                                  f"{q.reinterpreted_batch_ndims} reinterpreted batch dims have no KL rule")
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    t1 = -rate_ratio.log()
    return t1 + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return where((q.low > p.low) | (q.high < p.high), _INF, result)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(sum_params_p)
    t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(sum_params_q)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5




@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise AbstractMethodError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return where(p.total_count > q.total_count, _INF, kl)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sp, sq = p.concentration.sum(-1), q.concentration.sum(-1)
    t1 = lgamma(sp) - lgamma(sq)
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sp).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    # exp is a bijection: the KL of the two normals (torch's TransformedDistribution rule)
    return _kl_normal_normal(p.base_dist, q.base_dist)
