"""Every failure a user can cause ends in a subclass of :class:`TorchLeanError`.

Messages name the op and the offending shapes or values, so a user can find the
line of their model that caused it::

    >>> import torchlean as tl
    >>> try:
    ...     tl.ones(2, 3) + tl.ones(4)
    ... except tl.TorchLeanError as e:
    ...     print(type(e).__name__)
    ShapeError
"""

from __future__ import annotations


class TorchLeanError(Exception):
    """Base class of every error a user of torchlean can cause."""


class ShapeError(TorchLeanError, ValueError):
    """Shapes that do not fit an op (mismatch, bad axis, empty output, ...)."""


class DTypeError(TorchLeanError, TypeError):
    """A value of the wrong dtype (e.g. float indices, gradients of int tensors)."""


class DeviceError(TorchLeanError, ValueError):
    """Values on different devices, or an op not supported on a device yet."""


class IndexRangeError(TorchLeanError, IndexError):
    """An index that is negative or >= 2**32 (DESIGN.md), or a target out of range."""


class DomainError(TorchLeanError, ValueError):
    """An argument outside an op's domain (log of x <= 0 in the IR interpreter, beta = 0, ...)."""


class ResourceError(TorchLeanError, MemoryError):
    """An allocation larger than the limit (``set_options(max_alloc_bytes=...)``) or the memory
    the machine has available, refused before anything is allocated; a ``MemoryError`` so code
    written for torch's out-of-memory errors still catches it."""


class DimRangeError(ShapeError, IndexError):
    """A dimension (axis) argument outside ``[-ndim, ndim)``: torch raises ``IndexError`` there, and
    NumPy's ``AxisError`` is both kinds too, so ``except IndexError`` and ``except ValueError`` both work."""


class NonFiniteError(DomainError, RuntimeError):
    """A total that must be finite is NaN or inf (``clip_grad_norm_(error_if_nonfinite=True)``): torch
    raises RuntimeError there; a DomainError too, as the value is outside the op's domain."""


class BackendUnavailableError(TorchLeanError, RuntimeError):
    """An optional backend (CuPy, safetensors, onnx, ...) is not installed or has no device."""


class DistributedError(TorchLeanError, RuntimeError):
    """A process group or collective failed: a timeout (naming the operation and the ranks that
    did not arrive), a store that cannot be reached, a call before init_process_group."""


class AutogradError(TorchLeanError, RuntimeError):
    """Misuse of autograd: backward twice, backward of a non-scalar without a gradient, ..."""


class IRError(TorchLeanError, ValueError):
    """A malformed IR graph, file or unsupported imported op."""


class LinAlgError(TorchLeanError, RuntimeError):
    """A matrix outside a decomposition's domain (singular for inv/solve, not positive-definite for
    cholesky): torch.linalg.LinAlgError."""


class SerializationError(TorchLeanError, ValueError):
    """A saved file that cannot be used: damaged bytes (naming the tensor), a malformed or crafted
    metadata record (naming the field), an unknown format."""


class DatasetError(TorchLeanError, RuntimeError):
    """A dataset that is not there: its files missing from the folder it names (and not downloadable
    here), or an optional package it needs not installed."""


class AbstractMethodError(TorchLeanError, NotImplementedError):
    """A base class's method that a user's subclass must define was called (torch's
    ``NotImplementedError`` of ``Dataset.__getitem__``, ``Sampler.__iter__``, ...)."""


class UnsupportedError(TorchLeanError, NotImplementedError):
    """A request no result exists for in torchlean's (and torch's) representation, naming what was
    asked: a ragged tensor (the support of binomials with different total counts), a multinomial
    whose total count differs across the batch. A ``NotImplementedError``, as torch raises there."""


def fmt_shapes(*shapes) -> str:
    """Render shapes the same way in every message: ``(2, 3) and (4,)``."""
    return " and ".join(str(tuple(s)) for s in shapes)
