"""``torchlean.backends.cudnn``: torch's cuDNN flags, driving the float32 convolutions on CUDA.

Convolutions (forward, input and weight gradients, transposed ones) run through cuDNN's graph
API when ``nvidia-cudnn-frontend`` and the cuDNN library are installed (the ``[cuda]`` extra);
otherwise, and for what cuDNN does not take (float64, more than three spatial axes), through
torchlean's own im2col + GEMM kernels. Either path is checked against the same spec.

* ``enabled`` (default True): use cuDNN where it takes a case; False: torchlean's own kernels.
* ``benchmark`` (default False): time every allowed cuDNN engine once per case (shapes and
  geometry) and keep the fastest, as torch does; False: cuDNN's heuristics choose.
* ``deterministic`` (default False, as torch's): stored and read back; torchlean always excludes
  cuDNN's nondeterministic engines (atomics), so results are reproducible either way.
* ``allow_tf32`` (default True, as torch's): whether convolutions may use TF32. This backend has
  one TF32 switch for matmul and convolutions; it is on only when this flag and
  ``backends.cuda.matmul.allow_tf32`` both allow it (nothing is less precise than asked).
* :func:`is_available` and :func:`version`: whether cuDNN loads, and its version as an int.

    >>> import torchlean as tl
    >>> tl.backends.cudnn.benchmark = True
    >>> tl.backends.cudnn.benchmark
    True
    >>> tl.backends.cudnn.benchmark = False
"""

import sys
import types

from .. import cuda as _cuda
from ..kernels.cuda import CudnnFlags as _FLAGS

__all__ = ["benchmark", "deterministic", "enabled", "is_available", "version"]  # and allow_tf32


def is_available() -> bool:
    """True when CUDA is available and the cuDNN frontend and library load."""
    if not _cuda.is_available():
        return False
    from ..kernels.cuda import cudnn
    return cudnn.available()


def version():
    """cuDNN's version as an int (91900 for 9.19.0), or None when it is not available."""
    if not _cuda.is_available():
        return None
    from ..kernels.cuda import cudnn
    return cudnn.version()


class _CudnnModule(types.ModuleType):
    """The module's class, so that assigning a flag reaches the switch it drives (as torch's)."""

    @property
    def allow_tf32(self) -> bool:
        return _cuda._TF32.cudnn

    @allow_tf32.setter
    def allow_tf32(self, value) -> None:
        _cuda._TF32.cudnn = bool(value)
        _cuda._apply_tf32()

    @property
    def enabled(self) -> bool:
        return _FLAGS.enabled

    @enabled.setter
    def enabled(self, value) -> None:
        _FLAGS.enabled = bool(value)

    @property
    def benchmark(self) -> bool:
        return _FLAGS.benchmark

    @benchmark.setter
    def benchmark(self, value) -> None:
        _FLAGS.benchmark = bool(value)


deterministic = False

sys.modules[__name__].__class__ = _CudnnModule
