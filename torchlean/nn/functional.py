"""``tl.nn.functional`` (also ``tl.nn.F``): PyTorch's functional API over the op registry.

Each function records one op of docs/OPS.md (or a short composition of them);
integer targets, indices and class weights travel as host-array attributes.

    >>> import torchlean as tl
    >>> import torchlean.nn.functional as F
    >>> F.relu(tl.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..kernels import get_kernels
from ..errors import DomainError, DTypeError, ShapeError, TorchLeanError
from ..autograd import record
from ..ops import arange, where
from ..tensor import Tensor, next_rng_key

__all__ = ["linear", "relu", "leaky_relu", "gelu", "sigmoid", "tanh", "softplus", "silu", "softmax", "log_softmax",
           "dropout", "mse_loss", "l1_loss", "cross_entropy", "nll_loss", "embedding", "one_hot"]

_REDUCTIONS = ("mean", "sum", "none")


def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TorchLeanError(f"{op}: {what} must be a Tensor, got {type(x).__name__}")
    return x


def _host_ints(t, op, what="target"):
    """An integer Tensor / array / list as a host int array (an op attribute). A tensor's values
    come through its kernels' ``host_ints``: on CUDA the copy is kept per buffer and the kernels
    read the buffer itself."""
    if isinstance(t, Tensor):
        if t.dtype.kind not in "iu":
            raise DTypeError(f"{op}: {what} must hold integers, got dtype {t.dtype}")
        return get_kernels(t.device).host_ints(t._value)
    a = np.asarray(t)
    if a.dtype.kind not in "iu":
        raise DTypeError(f"{op}: {what} must hold integers, got dtype {a.dtype}")
    return a


def _host_weight(w, op):
    if w is None:
        return None
    a = w.numpy() if isinstance(w, Tensor) else np.asarray(w)
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: weight must be a float tensor, got dtype {a.dtype}")
    return a.astype(np.float64)


def _check_reduction(op, reduction):
    if reduction not in _REDUCTIONS:
        raise DomainError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


# ---- linear and activations -----------------------------------------------------------------

def linear(input, weight, bias=None):  # noqa: A002 - PyTorch's names
    """``input @ weight.T + bias``; input ``(..., in)``, weight ``(out, in)``, bias ``(out,)``.

        >>> import torchlean as tl
        >>> linear(tl.ones(2, 3), tl.ones(4, 3), tl.zeros(4)).shape
        torchlean.Size([2, 4])
    """
    if bias is None:
        return record("linear_nobias", (weight, _tensor(input, "linear")), {})
    return record("linear", (weight, bias, _tensor(input, "linear")), {})


def relu(input, inplace=False):  # noqa: A002
    """max(x, 0); relu'(0) = 0. ``inplace`` is accepted for compatibility and ignored."""
    return record("relu", (input,), {})


def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    """``x`` where ``x > 0``, else ``negative_slope * x`` (a compound op: ``relu(x) - s relu(-x)``).

    ``inplace`` has no effect (every op here returns a new tensor).

        >>> import torchlean as tl
        >>> leaky_relu(tl.tensor([-2.0, 3.0]), 0.5).tolist()
        [-1.0, 3.0]
    """
    return record("leaky_relu", (_tensor(input, "leaky_relu"),), {"negative_slope": negative_slope})


def gelu(input, approximate="none"):  # noqa: A002
    """x * Phi(x) (``approximate="none"``) or its tanh approximation (``"tanh"``)."""
    return record("gelu", (input,), {"approximate": approximate})


def sigmoid(input):  # noqa: A002
    return record("sigmoid", (input,), {})


def tanh(input):  # noqa: A002
    return record("tanh", (input,), {})


def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """(1/beta) log(1 + exp(beta x)), computed stably as max(z,0) + log1p(exp(-|z|)).

    The stable form makes PyTorch's ``threshold`` switch to the identity unnecessary;
    it is accepted for compatibility (the two differ by less than exp(-threshold)).
    """
    if beta == 1:
        return record("softplus", (input,), {})
    if not isinstance(beta, numbers.Real) or beta == 0:
        raise DomainError(f"softplus: beta must be a non-zero number, got {beta!r}")
    return record("softplus", (input * float(beta),), {}) * (1.0 / float(beta))


def silu(input, inplace=False):  # noqa: A002
    """x * sigmoid(x)."""
    return record("silu", (input,), {})


def softmax(input, dim=-1, dtype=None):  # noqa: A002
    """exp(x - max) / sum exp(x - max) along ``dim``."""
    if dtype is not None:
        input = input.to(dtype=dtype)
    return record("softmax", (input,), {"axis": dim})


def log_softmax(input, dim=-1, dtype=None):  # noqa: A002
    """x - max - log sum exp(x - max) along ``dim`` (never log of softmax)."""
    if dtype is not None:
        input = input.to(dtype=dtype)
    return record("log_softmax", (input,), {"axis": dim})


def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero each entry with probability ``p`` and scale the rest by 1/(1-p) (training only).

    The mask comes from the counter-based generator (``tl.manual_seed``): the same seed
    gives the same mask on every device. Identity when ``training`` is False or p == 0.
    """
    if not isinstance(p, numbers.Real) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise DomainError(f"dropout: p must lie in [0, 1], got {p!r}")
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0.0
    seed, counter = next_rng_key()
    return record("dropout", (input,), {"p": float(p), "seed": int(seed), "counter": int(counter)})


# ---- losses ---------------------------------------------------------------------------------

def mse_loss(input, target, reduction="mean"):  # noqa: A002
    """Mean (or sum, or elementwise) squared error; shapes must be equal."""
    _check_reduction("mse_loss", reduction)
    if reduction == "mean":
        return record("mse_loss", (input, target), {})
    if input.shape != target.shape:
        raise ShapeError(f"mse_loss: shapes {input.shape} and {target.shape} must be equal")
    d = input - target
    sq = d * d
    return sq.sum() if reduction == "sum" else sq


def l1_loss(input, target, reduction="mean"):  # noqa: A002
    """Mean (or sum, or elementwise) absolute error; abs'(0) = 0 (a compound op).

    Shapes broadcast as in PyTorch, which warns when they differ; so does this function.
    """
    if isinstance(input, Tensor) and isinstance(target, Tensor) and input.shape != target.shape:
        warnings.warn(f"l1_loss: target size {target.shape} differs from input size {input.shape}; "
                      f"they will be broadcast", UserWarning, stacklevel=2)
    return record("l1_loss", (_tensor(input, "l1_loss"), _tensor(target, "l1_loss", "target")),
                  {"reduction": reduction})


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):  # noqa: A002
    """Negative log-likelihood of integer class targets, given log-probabilities.

    input ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)``; target ``()``, ``(N,)`` or
    ``(N, d1, ...)``; ``"mean"`` is the weighted mean over non-ignored targets.
    """
    return record("nll_loss", (_tensor(input, "nll_loss"),),
                  {"target": _host_ints(target, "nll_loss"), "weight": _host_weight(weight, "nll_loss"),
                   "ignore_index": int(ignore_index), "reduction": reduction})


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",  # noqa: A002
                  label_smoothing=0.0):
    """Cross entropy of logits against integer classes or class probabilities (PyTorch's).

    Integer targets run the fused ``cross_entropy`` op; a float target of the input's
    shape is read as class probabilities (the class axis is 1, or 0 for a 1-D input).

        >>> import torchlean as tl
        >>> round(cross_entropy(tl.zeros(2, 4), tl.tensor([0, 3])).item(), 4)
        1.3863
    """
    _tensor(input, "cross_entropy")
    if isinstance(target, Tensor) and target.dtype.kind == "f":
        return _soft_cross_entropy(input, target, weight, reduction, label_smoothing)
    return record("cross_entropy", (input,),
                  {"target": _host_ints(target, "cross_entropy"),
                   "weight": _host_weight(weight, "cross_entropy"), "ignore_index": int(ignore_index),
                   "reduction": reduction, "label_smoothing": float(label_smoothing)})


def _soft_cross_entropy(input, target, weight, reduction, label_smoothing):
    op = "cross_entropy"
    _check_reduction(op, reduction)
    if target.shape != input.shape:
        raise ShapeError(f"{op}: probability target of shape {target.shape} must match input shape {input.shape}")
    if input.ndim == 0:
        raise ShapeError(f"{op}: input of shape () needs a class axis")
    if not 0.0 <= label_smoothing < 1.0:
        raise DomainError(f"{op}: label_smoothing must lie in [0, 1), got {label_smoothing!r}")
    axis = 0 if input.ndim == 1 else 1
    C = input.shape[axis]
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / C
    logp = log_softmax(input, dim=axis)
    if weight is not None:
        w = Tensor(_host_weight(weight, op).astype(input.dtype))
        if w.shape != (C,):
            raise ShapeError(f"{op}: weight of shape {w.shape} must have shape ({C},) for {C} classes")
        logp = logp * w.reshape((C,) + (1,) * (input.ndim - axis - 1))
    per = -(logp * target).sum(dim=axis)
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    return per.sum() * (1.0 / max(per.numel(), 1))


# ---- embedding ------------------------------------------------------------------------------

def embedding(input, weight, padding_idx=None):  # noqa: A002
    """Rows of ``weight`` (num, dim) picked by the integer ``input`` (any shape).

    Rows at ``padding_idx`` are returned but receive no gradient, as in PyTorch.
    """
    idx = _host_ints(input, "embedding", "input")
    out = record("embedding", (weight,), {"indices": idx})
    if padding_idx is None:
        return out
    num = weight.shape[0]
    pad = int(padding_idx) + num if padding_idx < 0 else int(padding_idx)
    keep = idx != pad
    if keep.all():
        return out
    frozen = record("embedding", (weight.detach(),), {"indices": idx})
    return where(Tensor(keep[..., None]), out, frozen)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot rows (a last axis of ``num_classes``; -1: the largest class + 1), as a comparison
    against the class indices, so it runs on the tensor's device."""
    t = _tensor(tensor, "one_hot", "tensor")
    if t.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: expects an integer (long) tensor, got dtype {t.dtype.name}")
    if t.numel() and int(t.min()) < 0:
        raise DomainError("one_hot: class values must be non-negative")
    if num_classes == -1:
        num_classes = int(t.max()) + 1 if t.numel() else 0
    if num_classes < 0 or (t.numel() and int(t.max()) >= num_classes):
        raise DomainError(f"one_hot: class values must be smaller than num_classes={num_classes}")
    classes = arange(num_classes, device=t.device)
    return (t.unsqueeze(-1) == classes).long()


from .functional_layers import *  # noqa: E402,F401,F403 - conv, pooling, normalization, attention, ...
from . import functional_layers as _fl  # noqa: E402

__all__ += _fl.__all__

# The families of functionals, each in its own module; a later family's name is the exported one.
from . import functional_norms as _fnorms  # noqa: E402
from .functional_norms import *  # noqa: E402,F401,F403 - batch/group/instance/layer/rms/local-response norm

__all__ += [n for n in _fnorms.__all__ if n not in __all__]
from . import functional_activations as _fact  # noqa: E402
from .functional_activations import *  # noqa: E402,F401,F403 - the activations, normalize, similarities

__all__ += [n for n in _fact.__all__ if n not in __all__]
from . import functional_losses as _floss  # noqa: E402
from .functional_losses import *  # noqa: E402,F401,F403 - every loss of torch.nn.functional

__all__ += [n for n in _floss.__all__ if n not in __all__]
from . import functional_resample as _fres  # noqa: E402
from .functional_resample import *  # noqa: E402,F401,F403 - pad, adaptive pools, interpolate, fold/unfold, ...

__all__ += [n for n in _fres.__all__ if n not in __all__]
