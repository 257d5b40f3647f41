"""The CUDA device of the kernel surface: CuPy arrays, cuBLAS, and our NVRTC-compiled kernels.

:func:`load` is what ``get_kernels("cuda")`` calls first; it imports CuPy, which nothing in this
package does at import time, so ``import torchlean`` never needs a GPU. The surface is then built
from the family modules beside this file (``elementwise.py`` next to ``src/elementwise.cu``, ...). Without CuPy, or with CuPy but no visible GPU,
it raises :class:`~torchlean.errors.BackendUnavailableError` with the install command.

Matrix products are strict float32: CuPy would use TF32 tensor cores for float32 only if its
``CUPY_TF32`` environment variable is set, and loading this device resets CuPy's float32
compute type to the default (plain SGEMM), so that variable has no effect here. Call
:func:`torchlean.cuda.set_tf32` to opt in. (NVIDIA's own ``NVIDIA_TF32_OVERRIDE=1`` forces
TF32 below every library and cannot be undone from inside the process.)
"""

from __future__ import annotations

from ...errors import BackendUnavailableError

INSTALL = 'pip install "torchlean[cuda]"  (or: pip install cupy-cuda13x)'


def _import_cupy():
    try:
        import cupy
    except Exception as e:  # ImportError, or a CuPy build that does not match the driver
        raise BackendUnavailableError(
            f"device 'cuda' needs CuPy, which could not be imported ({type(e).__name__}: {e}). "
            f"Install it with: {INSTALL}") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        raise BackendUnavailableError(
            f"device 'cuda': CuPy sees no usable GPU ({type(e).__name__}: {e}). "
            f"Check the NVIDIA driver; the CuPy package must match the CUDA version ({INSTALL}).") from None
    if n < 1:
        raise BackendUnavailableError(f"device 'cuda': CuPy found no GPU. {INSTALL}")
    return cupy


def set_tf32(enabled: bool) -> None:
    """Allow (True) or forbid (False, the default) TF32 tensor cores in float32 matmul / bmm / linear."""
    import numpy as np
    from cupy._core import _routines_linalg as linalg
    linalg.set_compute_type(np.dtype(np.float32),
                            linalg.COMPUTE_TYPE_TF32 if enabled else linalg.COMPUTE_TYPE_DEFAULT)


def tf32_enabled() -> bool:
    """True when float32 matrix products may use TF32 tensor cores."""
    import numpy as np
    from cupy._core import _routines_linalg as linalg
    return linalg.get_compute_type(np.dtype(np.float32)) == linalg.COMPUTE_TYPE_TF32


class CudnnFlags:
    """What the program asked of cuDNN (``torchlean.backends.cudnn``), read by :mod:`.cudnn` at each
    call; kept here so that setting a flag imports no CuPy. ``enabled``: use cuDNN where it takes a
    case; ``benchmark``: time every engine once per case and keep the fastest."""
    enabled = True
    benchmark = False


#: The surfaces built on this backend: "cuda" -> the CUDA surface, ("cpu", precision) -> the CPU
#: surface with its matrix products routed to cuBLAS (:func:`torchlean.kernels.routed_host`).
SURFACE: dict = {}


#: The message of the BackendUnavailableError of the first failed :func:`load`: CuPy is not
#: imported again on every call (the ``use_gpu`` hint asks on every CPU op).
UNAVAILABLE: list = []


def load() -> None:
    """Import CuPy (BackendUnavailableError when absent or without a GPU), forbid TF32, install the
    allocator. The family modules are imported by the surface builder afterwards."""
    if UNAVAILABLE:
        raise BackendUnavailableError(UNAVAILABLE[0])
    try:
        _import_cupy()
    except BackendUnavailableError as e:
        UNAVAILABLE.append(str(e))
        raise
    set_tf32(False)
    from . import alloc  # imports CuPy
    from ...device import cuda_index, set_cuda_hooks
    _switch(cuda_index(), "device 'cuda'")
    alloc.install()
    set_cuda_hooks(switch=_switch)


def _switch(index: int, where: str) -> None:
    """Make GPU ``index`` current for this process (the choice of :func:`torchlean.device.use_cuda`):
    possible while no CUDA buffer was ever allocated here, since every buffer, compiled kernel and
    library handle belongs to the GPU that was current when it was made."""
    import cupy
    from ...errors import DeviceError
    from . import alloc
    n = cupy.cuda.runtime.getDeviceCount()
    if not 0 <= index < n:
        raise DeviceError(f"{where}: CUDA device index {index} is out of range: this machine has {n} GPU(s) "
                          f"visible (cuda:0 to cuda:{n - 1})")
    current = cupy.cuda.runtime.getDevice()
    if index != current and alloc.used():
        raise DeviceError(f"{where}: this process already uses cuda:{current}, and torchlean drives one GPU per "
                          f"process: choose the GPU (torch.cuda.set_device({index})) before the first CUDA tensor, "
                          f"or run one process per GPU (torchlean launch)")
    cupy.cuda.runtime.setDevice(index)
    alloc.DEVICE[0] = index


__all__ = ["load", "SURFACE", "UNAVAILABLE", "set_tf32", "tf32_enabled", "INSTALL", "CudnnFlags"]
