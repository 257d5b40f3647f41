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
