"""Probability distributions with torch.distributions' API: parameters, shapes, validation,
``sample``/``rsample``/``log_prob``/``entropy``/``cdf``/``icdf``, and ``kl_divergence``.

Random draws come from torchlean's counter-based generator (``tl.manual_seed`` makes them
reproducible; they are not torch's draws). Everything deterministic follows torch's formulas.

    >>> import torchlean as tl
    >>> from torchlean.distributions import Categorical
    >>> _ = tl.manual_seed(0)
    >>> m = Categorical(tl.tensor([0.1, 0.9]))
    >>> a = m.sample()
    >>> m.log_prob(a).shape, isinstance(a.item(), int)
    (torchlean.Size([]), True)
"""

from . import constraints
from .bernoulli import Bernoulli
from .binomial import Binomial, Multinomial
from .beta import Beta
from .categorical import Categorical, OneHotCategorical
from .counts import Geometric, Poisson
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Gamma
from .gamma_family import Chi2, Dirichlet, StudentT
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .lognormal import Cauchy, HalfNormal, LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet", "Distribution", "Exponential", "Gamma",
           "Geometric", "HalfNormal", "Multinomial", "Poisson", "StudentT",
           "Independent", "Laplace", "LogNormal",
           "MultivariateNormal", "Normal", "OneHotCategorical", "Uniform", "constraints", "kl_divergence",
           "register_kl"]
