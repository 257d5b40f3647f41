"""PyTorch's tensor functions and methods, by family, over the recorded ops of the core.

Each module registers its names in :mod:`torchlean.ops.table`; importing this package installs the
methods on :class:`~torchlean.tensor.Tensor` and gives ``torchlean`` its functions.
"""

from importlib import import_module

from ..tensor import Tensor
from .table import FUNCTIONS, METHODS, install  # noqa: F401 - METHODS: the registered Tensor methods

_FAMILIES = ("creation", "math", "reduce", "index", "shape", "linalg", "higher", "gamma", "sparse")
for _f in _FAMILIES:
    import_module(f"{__name__}.{_f}")
from .inplace import install_inplace  # noqa: E402 - after every family: it derives the in-place forms

install_inplace()
install(Tensor)

__all__ = sorted(FUNCTIONS)
globals().update(FUNCTIONS)
