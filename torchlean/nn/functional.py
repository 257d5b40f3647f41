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

import numpy as np

from ..kernels import get_kernels
from ..errors import DomainError, DTypeError, IndexRangeError, TorchLeanError
from ..autograd import record
from ..ops import arange, where
from ..tensor import Tensor, next_rng_key
from ..amp import autocast_namespace

__all__ = ["linear", "dropout", "one_hot"]


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


def one_hot(tensor, num_classes=-1):
    """int64 one-hot rows (a last axis of ``num_classes``; -1: the largest class + 1), as a comparison
    against the class indices, so it runs on the tensor's device."""
    t = _tensor(tensor, "one_hot", "tensor")
    if t.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: expects an integer (long) tensor, got dtype {t.dtype.name}")
    lo, hi = (int(t.min()), int(t.max())) if t.numel() else (0, -1)
    if lo < 0:
        raise IndexRangeError(f"one_hot: class values must be non-negative, got {lo}")
    if num_classes == -1:
        num_classes = hi + 1
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 0:
        raise DomainError(f"one_hot: num_classes must be -1 or a non-negative int, got {num_classes!r}")
    if hi >= num_classes:
        raise IndexRangeError(f"one_hot: class value {hi} is not smaller than num_classes={num_classes}")
    classes = arange(num_classes, device=t.device)
    return (t.unsqueeze(-1) == classes).long()


def _reexport(namespace: dict, package: str, families) -> list:
    """Bind every ``__all__`` name of the modules ``package.<family>`` in ``namespace`` (a star
    import per family, in order: a later family's name wins) and return the names."""
    import importlib
    names = []
    for family in families:
        mod = importlib.import_module(f"{package}.{family}")
        namespace.update((n, getattr(mod, n)) for n in mod.__all__)
        names += [n for n in mod.__all__ if n not in names]
    return names


# The families of functionals, each in its own module.
__all__ += [n for n in _reexport(globals(), __name__.rpartition(".")[0],
                                 ("functional_layers", "functional_norms", "functional_activations",
                                  "functional_losses", "functional_resample", "functional_pooling",
                                  "functional_attention", "functional_sparse", "functional_extra"))
            if n not in __all__]


# The ops of autocast's lists cast their inputs while an autocast region is on (torchlean.amp).
autocast_namespace(globals())
