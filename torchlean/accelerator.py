"""``torchlean.accelerator``: torch's device-agnostic accelerator API (torch 2.6+).

The accelerator of this backend is CUDA (one GPU per process, ``cuda:0`` unless chosen), when CuPy sees a GPU; otherwise
there is none, and the functions that need one raise :class:`~torchlean.errors.DeviceError` as
torch's raise.

    >>> import torchlean as tl
    >>> dev = tl.accelerator.current_accelerator() if tl.accelerator.is_available() else tl.device("cpu")
    >>> dev.type in ("cpu", "cuda")
    True
"""

from __future__ import annotations

from . import cuda as _cuda
from .device import device, normalize
from .errors import DeviceError

__all__ = [
    "current_accelerator",
    "current_device_index",
    "device_count",
    "is_available",
    "set_device_index",
    "synchronize",
]


def _need(where: str) -> None:
    if not _cuda.is_available():
        raise DeviceError(f"accelerator.{where}: cannot access accelerator device when none is available")


def is_available() -> bool:
    """True when an accelerator (CUDA) is available."""
    return _cuda.is_available()


def current_accelerator(check_available: bool = False):
    """``tl.device("cuda")`` when CUDA is available, else None (``check_available`` changes nothing:
    this backend names no accelerator it cannot use)."""
    return device("cuda") if _cuda.is_available() else None


def device_count() -> int:
    """The number of GPUs visible to this process (0 without CUDA)."""
    return _cuda.device_count()


def current_device_index() -> int:
    """The index of this process's GPU (DeviceError without an accelerator, as torch's RuntimeError)."""
    _need("current_device_index")
    return _cuda.current_device()


def set_device_index(device) -> None:
    """Choose this process's GPU, as :func:`torchlean.cuda.set_device` (before the first CUDA tensor)."""
    _need("set_device_index")
    if isinstance(device, int) and not isinstance(device, bool):
        device = f"cuda:{device}"
    if normalize(device, "accelerator.set_device_index") != "cuda":
        raise DeviceError(f"accelerator.set_device_index: {device!r} is not an accelerator device")


def synchronize(device=None) -> None:
    """Wait for every kernel queued on the accelerator (DeviceError without one)."""
    _need("synchronize")
    _cuda.synchronize(device)
