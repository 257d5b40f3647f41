"""Runtime options (the seeds' ``Torch.Options``).

* ``fast_kernels`` (default True): CPU ops run the fast kernels; False runs them
  through the spec functions (reference mode).
* ``use_gpu`` (default False): route CPU float matmul/linear through cuBLAS when a
  GPU is present (a hint: ignored without one), in ``gpu_precision``;
* ``gpu_precision``: ``"fp32"`` (SGEMM, inputs rounded to float32) or ``"fp64"`` (DGEMM).
* ``max_alloc_bytes`` (default None): the most bytes one creation function or module constructor
  may ask for; None means the machine's available memory (the device's free memory on CUDA).
  A larger request raises :class:`~torchlean.errors.ResourceError` before anything is allocated,
  so a typo such as ``zeros(10**12)`` fails at once instead of swapping or being killed.

    >>> import torchlean as tl
    >>> with tl.options(fast_kernels=False):
    ...     tl.get_options().fast_kernels
    False
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace

from .errors import TorchLeanError


@dataclass(frozen=True)
class Options:
    fast_kernels: bool = True
    use_gpu: bool = False
    gpu_precision: str = "fp32"
    max_alloc_bytes: int | None = None


_current = [Options()]


def get_options() -> Options:
    return _current[0]


def _validated(**kw) -> Options:
    unknown = set(kw) - {"fast_kernels", "use_gpu", "gpu_precision", "max_alloc_bytes"}
    if unknown:
        raise TorchLeanError(f"set_options: unknown option(s) {sorted(unknown)}")
    if "gpu_precision" in kw and kw["gpu_precision"] not in ("fp32", "fp64"):
        raise TorchLeanError(f"set_options: gpu_precision must be 'fp32' or 'fp64', got {kw['gpu_precision']!r}")
    m = kw.get("max_alloc_bytes")
    if m is not None and (type(m) is not int or m <= 0):
        raise TorchLeanError(f"set_options: max_alloc_bytes must be a positive int or None, got {m!r}")
    return replace(_current[0], **kw)


def set_options(**kw) -> Options:
    """Set options globally; returns the new options."""
    _current[0] = _validated(**kw)
    return _current[0]


@contextlib.contextmanager
def options(**kw):
    """Context manager form of :func:`set_options`; restores the previous options on exit."""
    old = _current[0]
    _current[0] = _validated(**kw)
    try:
        yield _current[0]
    finally:
        _current[0] = old
