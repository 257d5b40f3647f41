"""``Parameter``: a leaf tensor that a :class:`~torchlean.nn.Module` registers.

    >>> import torchlean as tl
    >>> p = tl.nn.Parameter(tl.zeros(2))
    >>> p.requires_grad, p.is_leaf
    (True, True)
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from ..ops import tensor
from ..tensor import Tensor, float32


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
