"""Activation and similarity modules (``tl.nn.ReLU`` ... ``tl.nn.PairwiseDistance``): PyTorch's
constructors, attributes and parameter names over :mod:`torchlean.nn.functional_activations`.

``inplace=True`` is accepted and stored, and has no effect: the input is never modified.

    >>> import torchlean as tl
    >>> from torchlean.nn.activations import PReLU
    >>> m = PReLU(3)
    >>> m.weight.shape, m.weight.tolist()
    (torchlean.Size([3]), [0.25, 0.25, 0.25])
"""

from __future__ import annotations

from ..errors import DomainError, ShapeError
from ..kernels import get_kernels
from ..tensor import Tensor, as_dtype, float32
from . import functional_activations as A
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "PReLU", "RReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
           "Hardswish", "Hardsigmoid", "Hardtanh", "Hardshrink", "Softshrink", "Tanhshrink", "Softsign",
           "Softplus", "Threshold", "LogSigmoid", "Sigmoid", "Tanh", "Softmax", "Softmin", "LogSoftmax",
           "Softmax2d", "GLU", "CosineSimilarity", "PairwiseDistance"]


class _Inplace(Module):
    """An activation whose only option is ``inplace`` (no effect here)."""

    _fn = None

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return type(self)._fn(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _Plain(Module):
    _fn = None

    def forward(self, input):  # noqa: A002
        return type(self)._fn(input)


class ReLU(_Inplace):
    """max(x, 0); relu'(0) = 0."""
    _fn = staticmethod(A.relu)


class ReLU6(_Inplace):
    """min(max(x, 0), 6)."""
    _fn = staticmethod(A.relu6)


class SELU(_Inplace):
    _fn = staticmethod(A.selu)


class SiLU(_Inplace):
    _fn = staticmethod(A.silu)


class Mish(_Inplace):
    _fn = staticmethod(A.mish)


class Hardswish(_Inplace):
    _fn = staticmethod(A.hardswish)


class Hardsigmoid(_Inplace):
    _fn = staticmethod(A.hardsigmoid)


class Tanhshrink(_Plain):
    _fn = staticmethod(A.tanhshrink)


class Softsign(_Plain):
    _fn = staticmethod(A.softsign)


class LogSigmoid(_Plain):
    _fn = staticmethod(A.logsigmoid)


class Sigmoid(_Plain):
    _fn = staticmethod(A.sigmoid)


class Tanh(_Plain):
    _fn = staticmethod(A.tanh)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return A.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """x where x > 0, else weight * x; ``weight`` (num_parameters,), filled with ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = int(num_parameters)
        self.init = init
        dt = as_dtype(dtype) or float32
        self.weight = Parameter(Tensor(get_kernels(device or "cpu").zeros((self.num_parameters,), dt)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):  # noqa: A002
        return A.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Random slopes U(lower, upper) for x <= 0 in training mode, the mean slope in eval mode."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return A.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return A.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    def forward(self, input):  # noqa: A002
        return A.celu(input, self.alpha)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):  # noqa: A002
        return A.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if min_val > max_val:
            raise DomainError(f"Hardtanh: min_val cannot be greater than max_val ({min_val} > {max_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return A.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class Hardshrink(Module):
    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):  # noqa: A002
        return A.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input):  # noqa: A002
        return A.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):  # noqa: A002
        return A.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Threshold(Module):
    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return A.threshold(input, self.threshold, self.value)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return A.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Softmax):
    def forward(self, input):  # noqa: A002
        return A.softmin(input, self.dim, _stacklevel=5)


class LogSoftmax(Softmax):
    def forward(self, input):  # noqa: A002
        return A.log_softmax(input, self.dim, _stacklevel=5)


class Softmax2d(Module):
    """Softmax over the channel axis (-3) of a (C, H, W) or (N, C, H, W) input."""

    def forward(self, input):  # noqa: A002
        if input.ndim not in (3, 4):
            raise ShapeError(f"Softmax2d: expected a 3-D or 4-D input, got {input.ndim}-D")
        return A.softmax(input, -3, _stacklevel=5)


class GLU(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return A.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return A.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return A.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
