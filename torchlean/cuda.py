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

from .capture import capture_step as _capture
from .kernels import cuda_available, get_kernels

__all__ = ["is_available", "synchronize", "memory_stats", "reset_peak_memory_stats", "empty_cache",
           "set_tf32", "tf32_enabled", "device_name", "capture_step"]


def is_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    return cuda_available()


def _load():
    get_kernels("cuda")  # raises BackendUnavailableError with the install command
    import cupy
    return cupy


def synchronize() -> None:
    """Wait until every kernel queued on the current GPU has finished."""
    _load().cuda.Device().synchronize()


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
    """Give the pool's cached, unused blocks back to the driver."""
    _load()
    from .kernels.cuda import alloc
    alloc.free_cached()


def set_tf32(enabled: bool) -> None:
    """Allow TF32 tensor cores in float32 matmul / bmm / linear (off by default: strict float32)."""
    _load()
    from .kernels.cuda import set_tf32 as _set
    _set(enabled)


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
