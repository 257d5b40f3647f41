"""The CUDA device from the user's side: availability, synchronization, allocator telemetry.

Nothing here imports CuPy until a function is called, and every function but
:func:`is_available` raises :class:`~torchlean.errors.BackendUnavailableError` (with the
install command) when there is no usable GPU.

    >>> import torchlean as tl
    >>> if tl.cuda.is_available():
    ...     tl.cuda.reset_peak_memory_stats()
    ...     x = tl.ones(1024, 1024).cuda()          # 4 MiB of float32
    ...     tl.cuda.synchronize()
    ...     assert tl.cuda.memory_stats()["peak_bytes"] >= 4 * 1024 * 1024
"""

from __future__ import annotations

import sys
import types

from . import amp as _amp
from .capture import capture_step as _capture
from .device import cuda_index as _index, device as _device, normalize as _normalize
from .errors import DeviceError
from .kernels import cuda_available, get_kernels
from .tensor import manual_seed as _seed_stream

__all__ = ["is_available", "synchronize", "memory_stats", "reset_peak_memory_stats", "empty_cache",
           "set_tf32", "tf32_enabled", "device_name", "capture_step", "device_count", "current_device",
           "set_device", "get_device_name", "manual_seed", "manual_seed_all", "memory_allocated",
           "max_memory_allocated", "amp"]


def is_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    return cuda_available()


def _load():
    get_kernels("cuda")  # raises BackendUnavailableError with the install command
    import cupy
    return cupy


def synchronize(device=None) -> None:
    """Wait until every kernel queued on the current GPU has finished."""
    cupy = _load()
    _cuda_index(device, "synchronize")
    from .kernels.cuda.memory import WAIT_HOOKS
    for hook in WAIT_HOOKS:
        hook()
    cupy.cuda.Device().synchronize()


def memory_stats() -> dict:
    """The seeds' allocator telemetry for torchlean's CUDA buffers, as a dict:

    ``live_bytes`` (bytes of buffers alive now), ``peak_bytes`` (most live at once since the
    start or the last :func:`reset_peak_memory_stats`), ``allocations`` and ``frees`` (counts
    since the start), ``live_buffers``, and the CuPy memory pool's ``pool_used_bytes`` and
    ``pool_reserved_bytes`` (memory held from the driver, used or cached for reuse).
    """
    _load()
    from .kernels.cuda import alloc
    return alloc.stats()


def reset_peak_memory_stats() -> None:
    """Restart the peak at the bytes live now."""
    _load()
    from .kernels.cuda import alloc
    alloc.reset_peak()


def empty_cache() -> None:
    """Give the pool's cached, unused blocks back to the driver (no effect without CUDA, as torch's)."""
    if not is_available():
        return
    _load()
    from .kernels.cuda import alloc
    alloc.free_cached()


def set_tf32(enabled: bool) -> None:
    """Allow TF32 tensor cores in float32 matmul / bmm / linear (off by default: strict float32)."""
    _load()
    _TF32.precision = "high" if enabled else "highest"
    if enabled:
        _TF32.cudnn = True
    _apply_tf32()


def tf32_enabled() -> bool:
    """True when float32 matrix products may use TF32."""
    _load()
    from .kernels.cuda import tf32_enabled as _get
    return _get()


def device_name() -> str:
    """The name of the current GPU, e.g. ``"NVIDIA H100 80GB HBM3"``."""
    cupy = _load()
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def capture_step(fn, *example_inputs, warmup: int = 2):
    """Capture a training step's forward, loss and backward as a CUDA graph (see
    :mod:`torchlean.capture`); returns a :class:`~torchlean.capture.CapturedStep`."""
    return _capture(fn, *example_inputs, warmup=warmup)


# ---- torch.cuda's device queries (one GPU per process: cuda:0 unless set_device chose another) --

def _cuda_index(device, where: str) -> int:
    """The index of the GPU ``device`` names (None: this process's); DeviceError for a CPU device, or for
    another GPU than this process's once CUDA memory is in use (see :func:`set_device`)."""
    if device is None:
        return _index()
    if isinstance(device, int) and not isinstance(device, bool):
        device = f"cuda:{device}"
    if _normalize(device, where) != "cuda":
        raise DeviceError(f"{where}: expected a CUDA device, got {device!r}")
    return _index()


def device_count() -> int:
    """The number of GPUs visible to this process (0 without CUDA), as torch's.

        >>> import torchlean as tl
        >>> tl.cuda.device_count() >= (1 if tl.cuda.is_available() else 0)
        True
    """
    if not is_available():
        return 0
    import cupy
    return int(cupy.cuda.runtime.getDeviceCount())


def current_device() -> int:
    """The index of this process's GPU (BackendUnavailableError without CUDA, as torch raises)."""
    _load()
    return _index()


def set_device(device) -> None:
    """Choose this process's GPU (an index, ``"cuda:<index>"`` or a device object), as the workers of a
    multi-GPU job do with their ``LOCAL_RANK``. torchlean drives one GPU per process: the choice is
    made before the first CUDA tensor; naming another GPU once CUDA memory is in use raises
    DeviceError, as does an index past :func:`device_count`."""
    _load()
    _cuda_index(device, "set_device")


def get_device_name(device=None) -> str:
    """The name of the GPU ``device`` (default: this process's), as torch's; any visible GPU may be asked."""
    cupy = _load()
    if device is None:
        i = _index()
    else:
        i = device if isinstance(device, int) and not isinstance(device, bool) else _device(device).index
        i = _index() if i is None else i
        if not 0 <= i < device_count():
            raise DeviceError(f"get_device_name: CUDA device index {i} is out of range ({device_count()} visible)")
    name = cupy.cuda.runtime.getDeviceProperties(i)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def manual_seed(seed: int) -> None:
    """Seed the stream CUDA tensors draw from. torchlean has one counter-based stream for every device,
    so with CUDA available this seeds it as :func:`torchlean.manual_seed` does; without CUDA it has no
    effect, as torch's (which queues the seed for a CUDA that never starts)."""
    seed = int(seed)
    if is_available():
        _seed_stream(seed)


def manual_seed_all(seed: int) -> None:
    """:func:`manual_seed` for every GPU (this backend uses one)."""
    manual_seed(seed)


def memory_allocated(device=None) -> int:
    """Bytes held by live CUDA tensors now (0 without CUDA, as torch's before CUDA starts)."""
    _cuda_index(device, "memory_allocated")
    return memory_stats()["live_bytes"] if is_available() else 0


def max_memory_allocated(device=None) -> int:
    """The most bytes held by live CUDA tensors at once since the start or the last
    :func:`reset_peak_memory_stats` (0 without CUDA)."""
    _cuda_index(device, "max_memory_allocated")
    return memory_stats()["peak_bytes"] if is_available() else 0


# ---- the TF32 switch behind torch.backends and set_float32_matmul_precision ---------------------

class _TF32:
    """What the program asked for: ``precision`` of float32 matrix products (torch's
    ``get_float32_matmul_precision``; not ``"highest"`` = ``backends.cuda.matmul.allow_tf32``) and
    ``cudnn`` (``backends.cudnn.allow_tf32``, True by default as torch's)."""
    precision = "highest"
    cudnn = True


def _apply_tf32() -> None:
    """Set the one TF32 switch of this backend (it covers matmul and the GEMMs of convolutions):
    on only when both the matmul precision and ``cudnn.allow_tf32`` allow it, so no product is less
    precise than asked. Without CUDA there is no product to switch."""
    if is_available():
        from .kernels.cuda import set_tf32 as _set
        _set(_TF32.precision != "highest" and _TF32.cudnn)


def set_float32_matmul_precision(precision: str) -> None:
    """torch's ``set_float32_matmul_precision``: ``"highest"`` (strict float32, the default), ``"high"``
    or ``"medium"`` (both allow TF32 on CUDA here: there is no bfloat16 product path). An unknown
    value warns and changes nothing, as torch's.

        >>> import torchlean as tl
        >>> tl.set_float32_matmul_precision("high"); tl.get_float32_matmul_precision()
        'high'
        >>> tl.backends.cuda.matmul.allow_tf32
        True
        >>> tl.set_float32_matmul_precision("highest")
    """
    if precision not in ("highest", "high", "medium"):
        import warnings
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    _TF32.precision = precision
    _apply_tf32()


def get_float32_matmul_precision() -> str:
    """The precision set by :func:`set_float32_matmul_precision` (``"highest"`` by default)."""
    return _TF32.precision


# ---- torch.cuda.amp: the CUDA spelling of torchlean.amp (deprecated in torch, warned the same) ----

amp = types.ModuleType(__name__ + ".amp", "torch.cuda.amp: ``autocast`` and ``GradScaler`` for CUDA "
                       "(see :mod:`torchlean.amp`; mixed precision is not supported yet).")
amp.autocast = _amp.CudaAutocast
amp.GradScaler = _amp.CudaGradScaler
amp.__all__ = ["autocast", "GradScaler"]
sys.modules[amp.__name__] = amp
