"""Activation and similarity functions of ``tl.nn.functional``, as compositions of recorded ops.

Signatures, defaults and keyword names are PyTorch's. ``inplace=True`` is accepted everywhere
torch accepts it and has no effect: every function returns a new tensor and leaves its input
unchanged. Subgradients at kinks follow DESIGN.md (relu'(0) = 0, clamp' is 1 strictly inside
its bounds); where a composition uses ``where(x > k, ...)`` the gradient at the kink is that of
the lower branch, as in PyTorch.

    >>> import torchlean as tl
    >>> from torchlean.nn.functional_activations import hardtanh, glu
    >>> hardtanh(tl.tensor([-2.0, 0.5, 3.0])).tolist()
    [-1.0, 0.5, 1.0]
    >>> glu(tl.tensor([1.0, 0.0])).tolist()
    [0.5]
"""

from __future__ import annotations

import numbers
import warnings

from ..autograd import record
from ..errors import DomainError, DTypeError, ShapeError, TorchLeanError
from ..linalg import vector_norm
from ..ops import broadcast_shapes, rand, where
from ..ops import relu as _relu
from ..tensor import Tensor, as_dtype
from ..amp import autocast_namespace

__all__ = ["relu", "relu6", "leaky_relu", "prelu", "rrelu", "elu", "selu", "celu", "gelu", "silu", "mish",
           "hardswish", "hardsigmoid", "hardtanh", "hardshrink", "softshrink", "tanhshrink", "softsign",
           "softplus", "threshold", "logsigmoid", "sigmoid", "tanh", "softmax", "softmin", "log_softmax",
           "glu", "normalize", "cosine_similarity", "pairwise_distance"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _t(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TorchLeanError(f"{op}: {what} must be a Tensor, got {type(x).__name__}")
    return x


def _float(x, op):
    _t(x, op)
    if x.dtype.kind != "f":
        raise DTypeError(f"{op}: expects a floating-point tensor, got dtype {x.dtype.name}")
    return x


def _num(v, op, what):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise DomainError(f"{op}: {what} must be a real number, got {v!r}")
    return float(v)


# ---- piecewise-linear ---------------------------------------------------------------------

def relu(input, inplace=False):  # noqa: A002 - torch's names
    """max(x, 0); relu'(0) = 0. Integer tensors stay integer."""
    return _relu(_t(input, "relu"))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    """clamp(x, min_val, max_val); the gradient is 1 strictly inside (torch's too)."""
    _t(input, "hardtanh")
    if min_val > max_val:
        raise DomainError(f"hardtanh: min_val cannot be greater than max_val ({min_val} > {max_val})")
    return input.clamp(min_val, max_val)


def relu6(input, inplace=False):  # noqa: A002
    """min(max(x, 0), 6) (hardtanh(x, 0, 6)); the gradient is 0 at 0 and at 6."""
    return hardtanh(input, 0, 6)


def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    """x where x > 0, else negative_slope * x; the gradient at 0 is negative_slope (torch's).

        >>> import torchlean as tl
        >>> leaky_relu(tl.tensor([-2.0, 3.0]), 0.5).tolist()
        [-1.0, 3.0]
    """
    _float(input, "leaky_relu")
    return where(input > 0, input, input * _num(negative_slope, "leaky_relu", "negative_slope"))


def prelu(input, weight):  # noqa: A002
    """x where x > 0, else weight * x; ``weight`` has 1 entry or one per channel (axis 1, or axis 0
    of a 1-D input). The gradient at 0 is the weight (torch's)."""
    op = "prelu"
    _float(input, op)
    _t(weight, op, "weight")
    n = weight.numel()
    if weight.ndim > 1:
        raise ShapeError(f"{op}: weight must be 0-D or 1-D, got shape {tuple(weight.shape)}")
    if n == 1:
        w = weight.reshape(())
    else:
        if input.ndim == 0:
            raise ShapeError(f"{op}: a 0-D input takes a weight of one element, got {n}")
        ch = 1 if input.ndim >= 2 else 0
        if input.shape[ch] != n:
            raise ShapeError(f"{op}: mismatch of parameter numbers and input channel size: found "
                             f"parameter numbers = {n} and channel size = {input.shape[ch]}")
        w = weight.reshape((n,) + (1,) * (input.ndim - ch - 1))
    return where(input > 0, input, input * w)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):  # noqa: A002
    """Randomized leaky ReLU. Training: each x <= 0 is scaled by its own slope drawn from
    U(lower, upper) with the counter-based generator (``tl.manual_seed``); eval: the mean slope
    (lower + upper) / 2. The gradient at 0 is the slope (torch's)."""
    op = "rrelu"
    _float(input, op)
    lower, upper = _num(lower, op, "lower"), _num(upper, op, "upper")
    if lower > upper:
        raise DomainError(f"{op}: lower bound must be less than or equal to upper bound ({lower} > {upper})")
    if not training:
        return where(input > 0, input, input * ((lower + upper) / 2))
    u = rand(*input.shape, dtype=input.dtype, device=input.device)
    return where(input > 0, input, input * (u * (upper - lower) + lower))


def hardshrink(input, lambd=0.5):  # noqa: A002
    """x where |x| > lambd, else 0."""
    _float(input, "hardshrink")
    lambd = _num(lambd, "hardshrink", "lambd")
    return where((input > lambd) | (input < -lambd), input, 0.0)


def softshrink(input, lambd=0.5):  # noqa: A002
    """x - lambd above lambd, x + lambd below -lambd, else 0; lambd >= 0."""
    op = "softshrink"
    _float(input, op)
    lambd = _num(lambd, op, "lambd")
    if not lambd >= 0:
        raise DomainError(f"{op}: lambda must be non-negative, got {lambd}")
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, 0.0))


def threshold(input, threshold, value, inplace=False):  # noqa: A002
    """x where x > threshold, else value."""
    _t(input, "threshold")
    return where(input > threshold, input, value)


def hardsigmoid(input, inplace=False):  # noqa: A002
    """relu6(x + 3) / 6; the gradient is 1/6 strictly inside (-3, 3) (torch's)."""
    _float(input, "hardsigmoid")
    return (input + 3.0).clamp(0.0, 6.0) / 6.0


def hardswish(input, inplace=False):  # noqa: A002
    """x * relu6(x + 3) / 6; by clamp's convention the gradient is 0 at -3 and 1 at 3 (torch's too)."""
    _float(input, "hardswish")
    return input * ((input + 3.0).clamp(0.0, 6.0) / 6.0)


# ---- smooth -------------------------------------------------------------------------------

def _neg_part(x):
    """x where x <= 0, else 0: the argument of exp in the negative branch, kept finite where the
    positive branch is taken (so its zero cotangent never meets exp(large) = inf)."""
    return where(x > 0, 0.0, x)


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    """x where x > 0, else alpha * (exp(x) - 1); the gradient at 0 is alpha (torch's)."""
    _float(input, "elu")
    alpha = _num(alpha, "elu", "alpha")
    return where(input > 0, input, alpha * _neg_part(input).expm1())


def selu(input, inplace=False):  # noqa: A002
    """scale * elu(x, alpha) with the self-normalizing constants of Klambauer et al."""
    return elu(input, _SELU_ALPHA) * _SELU_SCALE


def celu(input, alpha=1.0, inplace=False):  # noqa: A002
    """x where x > 0, else alpha * (exp(x / alpha) - 1); alpha != 0."""
    _float(input, "celu")
    alpha = _num(alpha, "celu", "alpha")
    if alpha == 0:
        raise DomainError("celu: ZeroDivisionError, alpha must not be 0")
    return where(input > 0, input, alpha * (_neg_part(input) * (1.0 / alpha)).expm1())


def gelu(input, approximate="none"):  # noqa: A002
    """x * Phi(x) (``approximate="none"``) or its tanh approximation (``"tanh"``)."""
    _float(input, "gelu")
    if approximate not in ("none", "tanh"):
        raise DomainError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return record("gelu", (input,), {"approximate": approximate})


def sigmoid(input):  # noqa: A002
    return _t(input, "sigmoid").sigmoid()


def tanh(input):  # noqa: A002
    return _t(input, "tanh").tanh()


def silu(input, inplace=False):  # noqa: A002
    """x * sigmoid(x)."""
    return record("silu", (_float(input, "silu"),), {})


def _softplus1(x):
    """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)) (DESIGN.md): finite for every x."""
    return record("softplus", (x,), {})


def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """(1/beta) log(1 + exp(beta x)), and x itself where beta x > threshold (torch's switch).

    The log term is computed stably as max(z, 0) + log1p(exp(-|z|)), z = beta x, so it is finite
    for every x; the switch is kept so results equal torch's exactly beyond the threshold.
    """
    op = "softplus"
    _float(input, op)
    beta, threshold = _num(beta, op, "beta"), _num(threshold, op, "threshold")
    if beta == 0:
        raise DomainError(f"{op}: beta must be non-zero")
    z = input * beta if beta != 1 else input
    sp = _softplus1(z)
    if beta != 1:
        sp = sp * (1.0 / beta)
    return where(z > threshold, input, sp)


def mish(input, inplace=False):  # noqa: A002
    """x * tanh(softplus(x)), with the stable softplus."""
    _float(input, "mish")
    return input * _softplus1(input).tanh()


def logsigmoid(input):  # noqa: A002
    """log(sigmoid(x)) = -softplus(-x), finite for every x (never log of a rounded 0)."""
    _float(input, "logsigmoid")
    return -_softplus1(-input)


def tanhshrink(input):  # noqa: A002
    """x - tanh(x)."""
    _float(input, "tanhshrink")
    return input - input.tanh()


def softsign(input):  # noqa: A002
    """x / (1 + |x|)."""
    _float(input, "softsign")
    return input / (input.abs() + 1.0)


# ---- softmax family -----------------------------------------------------------------------

def _softmax_dim(op, ndim, dim, stacklevel):
    """torch's implicit axis (deprecated there, with the same warning): 0 for 0-, 1- and 3-D
    inputs, else 1."""
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include "
                  f"dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def _cast(input, op, dtype):
    _t(input, op)
    if dtype is not None:
        input = input.to(dtype=as_dtype(dtype))
    if input.dtype.kind != "f":
        raise DTypeError(f"{op}: expects a floating-point tensor, got dtype {input.dtype.name}")
    return input


def _axis(op, ndim, dim):
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ShapeError(f"{op}: dim {dim} out of range for a {ndim}-D input")
    return dim % max(ndim, 1)


def _softmax_like(kind, op, input, dim, stacklevel, dtype):
    x = _cast(input, op, dtype)
    d = _axis(op, x.ndim, _softmax_dim(op, x.ndim, dim, stacklevel + 1))
    if x.ndim == 0:
        return record(kind, (x.reshape(1),), {"axis": 0}).reshape(())
    return record(kind, (x,), {"axis": d})


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """exp(x - max) / sum exp(x - max) along ``dim``; ``dtype`` casts the input first."""
    return _softmax_like("softmax", "softmax", input, dim, _stacklevel, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """softmax(-x) along ``dim``."""
    x = _cast(input, "softmin", dtype)
    return _softmax_like("softmax", "softmin", -x, dim, _stacklevel, None)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """x - max - log sum exp(x - max) along ``dim`` (never log of softmax)."""
    return _softmax_like("log_softmax", "log_softmax", input, dim, _stacklevel, dtype)


def glu(input, dim=-1):  # noqa: A002
    """a * sigmoid(b), where a and b are the two halves of ``input`` along ``dim``."""
    op = "glu"
    _float(input, op)
    if input.ndim == 0:
        raise ShapeError(f"{op}: glu does not support scalars because halving size must be even")
    d = _axis(op, input.ndim, dim)
    n = input.shape[d]
    if n % 2:
        raise ShapeError(f"{op}: halving dimension must be even, but dimension {d} is size {n}")
    return input.narrow(d, 0, n // 2) * input.narrow(d, n // 2, n // 2).sigmoid()


# ---- similarity ---------------------------------------------------------------------------

def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):  # noqa: A002
    """x / max(||x||_p, eps) along ``dim`` (torch's ``clamp_min`` of the norm, in the graph)."""
    op = "normalize"
    _float(input, op)
    if out is not None:
        raise TorchLeanError(f"{op}: out= is not supported (every op here returns a new tensor)")
    p = _num(p, op, "p")
    n = vector_norm(input, p, dim, keepdim=True).clamp(min=float(eps))
    return input / n


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) along ``dim``, after broadcasting.

    As in torch, the clamp of each norm is applied to its value only (outside the graph), so the
    gradient is that of x / ||x|| wherever ||x|| >= eps.
    """
    op = "cosine_similarity"
    _t(x1, op, "x1")
    _t(x2, op, "x2")
    if x1.dtype.kind != "f" or x2.dtype.kind != "f":
        raise DTypeError(f"{op}: expects floating-point tensors, got {x1.dtype.name} and {x2.dtype.name}")
    if x1.shape != x2.shape:
        x1, x2 = x1.broadcast_to(_bshape(op, x1, x2)), x2.broadcast_to(_bshape(op, x1, x2))
    eps = float(eps)

    def unit(x):
        n = vector_norm(x, 2, dim, keepdim=True)
        return x / (n + (n.detach().clamp(min=eps) - n.detach()))
    return (unit(x1) * unit(x2)).sum(dim=dim)


def _bshape(op, a, b):
    try:
        return broadcast_shapes(a.shape, b.shape)
    except TorchLeanError:
        raise
    except Exception as e:  # report as the op's ShapeError
        raise ShapeError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} do not broadcast") from e


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last axis (torch's: eps is added to the difference)."""
    op = "pairwise_distance"
    _t(x1, op, "x1")
    _t(x2, op, "x2")
    p = _num(p, op, "p")
    d = x1 - x2 + float(eps)
    if d.ndim == 0:
        return d.abs() if p != 0 else (d != 0).to(dtype=d.dtype)
    return vector_norm(d, p, -1, keepdim=keepdim)


# The ops of autocast's lists cast their inputs while an autocast region is on (torchlean.amp).
autocast_namespace(globals())
