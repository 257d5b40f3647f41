"""Kernel surfaces by device: ``get_kernels("cpu" | "cuda")``.

    >>> from torchlean.kernels import get_kernels
    >>> K = get_kernels("cpu")
    >>> K.reduce_sum_axis0(K.from_host(__import__("numpy").ones((2, 3)), "float32")).tolist()
    [2.0, 2.0, 2.0]
"""

from __future__ import annotations

from types import SimpleNamespace

from ..errors import BackendUnavailableError, DeviceError
from .api import KERNELS, check_surface, check_indices

_CACHE: dict[str, SimpleNamespace] = {}
DEVICES = ("cpu", "cuda")


def _namespace(device: str, modules) -> SimpleNamespace:
    ns = {}
    for m in modules:
        for name in dir(m):
            if not name.startswith("_"):
                ns[name] = getattr(m, name)
    k = SimpleNamespace(**ns)
    k.device = device
    missing = check_surface(k, device)
    if missing and device == "cpu":
        raise RuntimeError(f"kernel surface for {device!r} lacks: {', '.join(missing)}")
    # A kernel not yet written for a device raises an error that says so when called.
    for name in missing:
        setattr(k, name, _unsupported(name, device))
    k.unsupported = tuple(missing)
    return k


def _unsupported(name: str, device: str):
    def kernel(*args, **kwargs):
        raise DeviceError(f"{name}: not supported on {device} yet (the kernel is not implemented there)")
    kernel.__name__ = name
    return kernel


def get_kernels(device: str = "cpu") -> SimpleNamespace:
    """The kernel surface of ``device``; CuPy is imported only on first use of ``"cuda"``."""
    k = _CACHE.get(device)
    if k is not None:
        return k
    if device == "cpu":
        from . import host, host_conv, host_nn
        k = _namespace("cpu", [host, host_conv, host_nn])
    elif device == "cuda":
        from .cuda import load_modules
        k = _namespace("cuda", load_modules())
    else:
        raise DeviceError(f"unknown device {device!r}; expected one of {DEVICES}")
    _CACHE[device] = k
    return k


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    try:
        get_kernels("cuda")
        return True
    except (BackendUnavailableError, ImportError):
        return False


__all__ = ["get_kernels", "cuda_available", "KERNELS", "check_indices", "DEVICES"]
