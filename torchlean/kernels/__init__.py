"""Kernel surfaces by device: ``get_kernels("cpu" | "cuda")``.

A surface has exactly the names of the contract (:data:`~torchlean.kernels.api.KERNELS`), and two
attributes that are not kernels: ``device`` and ``unsupported`` (the contract names that device
lacks). Each kernel comes from the module of its family: ``kernels/host/<family>.py`` on
the CPU, ``kernels/cuda/<family>.py`` on a GPU (CuPy is imported only when ``"cuda"`` is first
used). A kernel a device lacks raises :class:`~torchlean.errors.DeviceError` saying so.

    >>> from torchlean.kernels import get_kernels
    >>> K = get_kernels("cpu")
    >>> K.reduce_sum_axis0(K.from_host(__import__("numpy").ones((2, 3)), "float32")).tolist()
    [2.0, 2.0, 2.0]
"""

from __future__ import annotations

import warnings
from importlib import import_module
from types import SimpleNamespace

import numpy as np

from ..device import set_cuda_hooks
from ..errors import BackendUnavailableError, DeviceError
from . import cuda  # the optional backend: CuPy is imported on its first use, not here
from .api import CONTRACT, KERNELS, check_indices, check_surface

DEVICES = ("cpu", "cuda")

# IEEE results (log 0 = -inf, x / 0, sqrt of a negative, inf - inf) come silently, as torch gives them:
# NumPy's floating-point RuntimeWarnings are ignored where torchlean's own code calls NumPy. A filter,
# not np.errstate around each kernel, so the hot path pays nothing; other code keeps NumPy's warnings.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"torchlean\.")


def surface(device: str, package: str, strict: bool) -> SimpleNamespace:
    """The surface of ``device`` from the family modules of ``package``: each family module gives
    its own contract names and nothing else. ``strict``: a missing kernel is a bug (the CPU, the
    reference surface); otherwise it becomes a kernel that raises DeviceError."""
    ns = {"device": device, "to_device": to_device}
    missing = []
    for family, names in CONTRACT.items():
        mod = import_module(f"{package}.{family}")
        for name in names:
            if name in ns:
                continue
            fn = getattr(mod, name, None)
            if callable(fn):
                ns[name] = fn
            else:
                missing.append(name)
                ns[name] = _unsupported(name, device)
    if missing and strict:
        raise RuntimeError(f"kernel surface for {device!r} lacks: {', '.join(missing)}")
    k = SimpleNamespace(**ns)
    k.unsupported = tuple(missing)
    return k


def _unsupported(name: str, device: str):
    def kernel(*args, **kwargs):
        raise DeviceError(f"{name}: not supported on {device} yet (the kernel is not implemented there)")
    kernel.__name__ = name
    return kernel


def to_device(x, device: str):
    """``x`` (an array of any device) on ``device``; ``x`` itself when it is already there."""
    src = "cpu" if isinstance(x, (np.ndarray, np.generic)) else "cuda"
    if src == device:
        return x
    if device == "cpu":
        return get_kernels(src).to_host(x)
    return get_kernels(device).from_host(x, x.dtype)


HOST = surface("cpu", f"{__name__}.host", strict=True)


def get_kernels(device: str = "cpu") -> SimpleNamespace:
    """The kernel surface of ``device``; CuPy is imported only on first use of ``"cuda"``."""
    if device == "cpu":
        return HOST
    if device == "cuda":
        k = cuda.SURFACE.get("cuda")
        if k is None:
            cuda.load()
            k = cuda.SURFACE["cuda"] = surface("cuda", cuda.__name__, strict=False)
        return k
    raise DeviceError(f"unknown device {device!r}; expected one of {DEVICES}")


_PRECISION = {"fp32": np.float32, "fp64": np.float64}


def routed(host, gpu, precision: str) -> SimpleNamespace:
    """``host`` with matmul, matmul_t, bmm, linear and linear_bwd computed on the surface ``gpu``: the
    inputs are uploaded (rounded to float32 for ``"fp32"``), multiplied there (SGEMM or DGEMM on
    CUDA), and the result comes back in the inputs' dtype."""
    dt = _PRECISION[precision]

    def mm(a, b):
        return host.astype(gpu.to_host(gpu.matmul(gpu.from_host(a, dt), gpu.from_host(b, dt))), a.dtype)

    def mm_t(a, b, ta=False, tb=False):
        return host.astype(gpu.to_host(gpu.matmul_t(gpu.from_host(a, dt), gpu.from_host(b, dt), ta, tb)), a.dtype)

    def linear(x, w, b=None):
        y = mm(x, host.transpose2d(w))
        return y if b is None else host.add(y, b)

    def linear_bwd(x, w, g, need_x=True, need_w=True, need_b=True):
        g2 = g.reshape(-1, g.shape[-1])
        dx = mm(g, w) if need_x else None
        dw = mm(host.transpose2d(g2), x.reshape(-1, x.shape[-1])) if need_w else None
        db = host.sum(g2, (0,), False) if need_b else None
        return dx, dw, db

    return SimpleNamespace(**{**vars(host), "matmul": mm, "matmul_t": mm_t, "bmm": mm, "linear": linear,
                              "linear_bwd": linear_bwd})


def routed_host(precision: str) -> SimpleNamespace:
    """The CPU surface with its matrix products routed to cuBLAS (the seeds' ``use_gpu`` hint, in
    ``precision`` "fp32" or "fp64"), or the plain CPU surface when no GPU is present."""
    if not cuda_available():
        return HOST
    key = ("cpu", precision)
    k = cuda.SURFACE.get(key)
    if k is None:
        k = cuda.SURFACE[key] = routed(HOST, get_kernels("cuda"), precision)
    return k


def _load_cuda() -> None:
    get_kernels("cuda")


set_cuda_hooks(load=_load_cuda)


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    try:
        get_kernels("cuda")
        return True
    except (BackendUnavailableError, ImportError):
        return False


__all__ = ["get_kernels", "cuda_available", "KERNELS", "CONTRACT", "check_indices", "check_surface", "DEVICES",
           "HOST", "to_device", "routed", "routed_host"]
