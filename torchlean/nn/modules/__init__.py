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

from ...errors import DomainError
from ...ops import einsum, rand
from ...tensor import Tensor, as_dtype, float32
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter, int_arg, zeros_value

__all__ = ["Identity", "Linear", "Flatten", "Unflatten", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "Bilinear"]


def _empty_param(shape, device, dtype):
    """A zero Parameter, filled by the layer's reset_parameters()."""
    dt = as_dtype(dtype) or float32
    return Parameter(Tensor(zeros_value(shape, dt, device)))


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
        self.in_features = int_arg(type(self).__name__, "in_features", in_features)
        self.out_features = int_arg(type(self).__name__, "out_features", out_features)
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


class NonDynamicallyQuantizableLinear(Linear):
    """A :class:`Linear` (torch's name for MultiheadAttention's ``out_proj``; quantization is not a
    concern here)."""


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


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size`` (the inverse of Flatten)."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, x):
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class _ChannelDropout(Module):
    spatial = 1

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise DomainError(f"{type(self).__name__}: p must lie in [0, 1], got {p!r}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return getattr(F, f"dropout{self.spatial}d")(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_ChannelDropout):
    """Zero whole channels of (N, C, L) or (C, L) inputs (``inplace`` has no effect here)."""
    spatial = 1


class Dropout2d(_ChannelDropout):
    """Zero whole channels of (N, C, H, W) inputs; a 3-D input is (N, C, L), with torch's warning."""
    spatial = 2


class Dropout3d(_ChannelDropout):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs."""
    spatial = 3


class AlphaDropout(Module):
    """Dropout that keeps SELU's zero mean and unit variance: with ``keep`` the Bernoulli(1-p) mask,
    ``x * keep * a + (keep - 1) * alpha * a + alpha * a * p``, ``a = ((alpha^2 p + 1)(1 - p))^-1/2``
    (torch's formula; alpha = SELU's scale * alpha)."""

    _ALPHA = 1.7580993408473766

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise DomainError(f"AlphaDropout: p must lie in [0, 1], got {p!r}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if self.p == 1:
            return x * 0.0
        p, alpha = self.p, self._ALPHA
        a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
        keep = (rand(*x.shape, dtype=x.dtype, device=x.device) >= p).to(dtype=x.dtype)
        return x * keep * a + (keep - 1.0) * (alpha * a) + alpha * a * p

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(Module):
    """Dropout in training mode, identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise DomainError(f"Dropout: p must lie in [0, 1], got {p!r}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Bilinear(Module):
    """``y = x1^T A x2 + b`` per output feature: weight (out, in1, in2), bias (out,), both
    U(-1/sqrt(in1), 1/sqrt(in1)) as torch initializes them."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = _empty_param((out_features, in1_features, in2_features), device, dtype)
        self.bias = _empty_param((out_features,), device, dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in1_features)
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x1, x2):
        y = einsum("...i,oij,...j->...o", x1, self.weight, x2)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


_SUBMODULES = frozenset({"activation", "adaptive", "batchnorm", "channelshuffle", "container", "conv", "distance",
                         "dropout", "flatten", "fold", "instancenorm", "lazy", "linear", "loss", "module",
                         "normalization", "padding", "pixelshuffle", "pooling", "rnn", "sparse", "transformer",
                         "upsampling"})


def __getattr__(name):
    # torch.nn.modules imports its submodules, so `torch.nn.modules.dropout.Dropout` works without an import;
    # here they load on first access (importing them with this package would be circular).
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
