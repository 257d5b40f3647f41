"""``torchlean.backends.cudnn``: torch's cuDNN flags.

torchlean does not call cuDNN (its convolutions are its own kernels and cuBLAS GEMMs), so:

* ``allow_tf32`` (default True, as torch's): whether convolutions may use TF32. This backend has
  one TF32 switch for matmul and convolution GEMMs; it is on only when this flag and
  ``backends.cuda.matmul.allow_tf32`` both allow it (nothing is less precise than asked).
* ``benchmark`` (default False): no effect here (there are no cuDNN algorithms to time and pick).
* ``deterministic`` (default False): no effect here (it selects among cuDNN algorithms).
* ``enabled`` (default True): no effect here (cuDNN is never used).
* :func:`is_available` is False and :func:`version` None: cuDNN is not used.

    >>> import torchlean as tl
    >>> tl.backends.cudnn.benchmark = True
    >>> tl.backends.cudnn.benchmark
    True
    >>> tl.backends.cudnn.benchmark = False
"""

import sys
import types

from .. import cuda as _cuda

__all__ = ["benchmark", "deterministic", "enabled", "is_available", "version"]  # and allow_tf32


def is_available() -> bool:
    """False: torchlean does not use cuDNN."""
    return False


def version():
    """None: torchlean does not use cuDNN."""
    return


class _CudnnModule(types.ModuleType):
    """The module's class, so that assigning ``allow_tf32`` reaches the TF32 switch (as torch's)."""

    @property
    def allow_tf32(self) -> bool:
        return _cuda._TF32.cudnn

    @allow_tf32.setter
    def allow_tf32(self, value) -> None:
        _cuda._TF32.cudnn = bool(value)
        _cuda._apply_tf32()


benchmark = False
deterministic = False
enabled = True

sys.modules[__name__].__class__ = _CudnnModule
