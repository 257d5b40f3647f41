"""Basic layers: ``Linear``, activations, ``Flatten``, ``Dropout``, ``Embedding``, ``Identity``.

Parameter names, layouts and default initializations are PyTorch's, drawn from
the counter-based generator (``tl.manual_seed``).

    >>> import torchlean as tl
    >>> lin = tl.nn.Linear(3, 2)
    >>> lin.weight.shape, lin.bias.shape
    (torchlean.Size([2, 3]), torchlean.Size([2]))
"""

from __future__ import annotations

import math

from ..errors import DomainError
from ..kernels import get_kernels
from ..tensor import Tensor, as_dtype, float32
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Identity", "Linear", "ReLU", "LeakyReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "Softplus", "Softmax",
           "LogSoftmax", "Flatten", "Dropout", "Embedding"]


def _empty_param(shape, device, dtype):
    """A zero Parameter, filled by the layer's reset_parameters()."""
    dt = as_dtype(dtype) or float32
    return Parameter(Tensor(get_kernels(device or "cpu").zeros(tuple(shape), dt)))


class Identity(Module):
    """Returns its input unchanged (extra constructor arguments are ignored, as in PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Linear(Module):
    """``y = x @ weight.T + bias``; weight ``(out_features, in_features)``, bias ``(out_features,)``.

    Both start as U(-1/sqrt(in_features), 1/sqrt(in_features)) — PyTorch's
    ``kaiming_uniform_(a=sqrt(5))`` for the weight and its bias rule.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.weight = _empty_param((self.out_features, self.in_features), device, dtype)
        if bias:
            self.bias = _empty_param((self.out_features,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.in_features > 0:
            init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()

    def forward(self, x):
        return F.relu(x)


class LeakyReLU(Module):
    """``x`` where ``x > 0``, else ``negative_slope * x`` (``inplace`` has no effect: every op
    here returns a new tensor)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return F.sigmoid(x)


class SiLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()

    def forward(self, x):
        return F.silu(x)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, x):
        return F.log_softmax(x, self.dim)


class Flatten(Module):
    """Flatten axes ``start_dim`` .. ``end_dim`` (the batch axis is kept by default)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Dropout(Module):
    """Dropout in training mode, identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise DomainError(f"Dropout: p must lie in [0, 1], got {p!r}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class Embedding(Module):
    """A lookup table ``weight`` (num_embeddings, embedding_dim), initialized N(0, 1)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        if padding_idx is not None:
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise DomainError(f"Embedding: padding_idx {padding_idx} must lie in "
                                  f"[-{self.num_embeddings}, {self.num_embeddings})")
            padding_idx = padding_idx % self.num_embeddings
        self.padding_idx = padding_idx
        self.weight = _empty_param((self.num_embeddings, self.embedding_dim), device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._value[self.padding_idx] = 0

    def forward(self, indices):
        return F.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"
