"""``Parameter``: a leaf tensor that a :class:`~torchlean.nn.Module` registers.

    >>> import torchlean as tl
    >>> p = tl.nn.Parameter(tl.zeros(2))
    >>> p.requires_grad, p.is_leaf
    (True, True)
"""

from __future__ import annotations

import sys

import numpy as np

from ..errors import DTypeError, ShapeError
from ..kernels import get_kernels
from ..ops import tensor
from ..ops.creation import check_alloc
from ..tensor import Tensor, float32


def _constructing() -> str:
    """The class name of the module whose ``__init__`` is on the stack (the op a user typed), so a
    refused parameter names ``Linear`` rather than an internal helper."""
    f = sys._getframe(2)
    while f is not None:
        obj = f.f_locals.get("self")
        if f.f_code.co_name == "__init__" and obj is not None and not isinstance(obj, Tensor):
            return type(obj).__name__
        f = f.f_back
    return "Parameter"


def int_arg(op, what, v) -> int:
    """A module's size argument: an int (NumPy ints too), never a bool, float or None. ``int(2.5)``
    would silently build a smaller layer than asked for; torch raises TypeError."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise DTypeError(f"{op}: {what} must be an int, got {type(v).__name__} {v!r}")
    return int(v)


def zeros_value(shape, dt, device=None):
    """The zero array of a module's parameter or buffer, its sizes checked first: a negative or
    non-int size raises ShapeError/DTypeError and a too-large one ResourceError, naming the module,
    before NumPy or CuPy is asked for the memory."""
    shape = tuple(shape)
    device = device or "cpu"
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise DTypeError(f"{_constructing()}: sizes must be ints, got {type(d).__name__} {d!r} in {shape}")
        if d < 0:
            raise ShapeError(f"{_constructing()}: negative dimension {d} in parameter shape {shape}")
    shape = tuple(int(d) for d in shape)
    dt = getattr(dt, "dtype", dt)
    check_alloc(_constructing(), shape, dt, device)
    return get_kernels(device).zeros(shape, dt)


class Parameter(Tensor):
    """A tensor that is a module parameter (``requires_grad=True`` by default).

    ``Parameter(t)`` shares ``t``'s buffer, as in PyTorch; NumPy arrays and nested
    lists are accepted too (a copy, Python floats become float32).
    """

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            value = np.zeros((0,), dtype=float32)
        elif isinstance(data, Tensor):
            value = data._value
        else:
            value = tensor(data)._value
        if requires_grad and value.dtype.kind != "f":
            raise DTypeError(f"Parameter: only float tensors can require gradients, got dtype {value.dtype}")
        super().__init__(value, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Buffer(Tensor):
    """A tensor that registers itself as a buffer when assigned to a :class:`~torchlean.nn.Module`
    attribute (torch's ``nn.Buffer``); ``persistent=False`` keeps it out of ``state_dict``.

    ``Buffer(t)`` shares ``t``'s values (torch's ``t.detach()``), keeping ``t.requires_grad``.

        >>> import torchlean as tl
        >>> from torchlean.nn.parameter import Buffer
        >>> m = tl.nn.Module()
        >>> m.scale = Buffer(tl.ones(2))
        >>> m.tmp = Buffer(tl.zeros(1), persistent=False)
        >>> list(m.state_dict()), [n for n, _ in m.named_buffers()]
        (['scale'], ['scale', 'tmp'])
    """

    __slots__ = ("persistent",)

    def __init__(self, data=None, *, persistent=True):
        if data is None:
            value, rg = np.zeros((0,), dtype=float32), False
        elif isinstance(data, Tensor):
            value, rg = data._value, data.requires_grad
        else:
            value, rg = tensor(data)._value, False
        super().__init__(value, requires_grad=rg)
        self.persistent = bool(persistent)
