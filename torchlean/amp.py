"""``torchlean.amp``: torch's mixed-precision names, honest about what runs.

float16 / bfloat16 autocast is not supported yet (issue 20). What works now is what programs
write when mixed precision is off: ``autocast(..., enabled=False)`` is a context manager and
decorator that changes nothing, and ``GradScaler(enabled=False)`` is torch's disabled scaler, a
pass-through (``scale`` returns the loss, ``step`` calls ``optimizer.step``). As in torch, asking
for CUDA autocast or a CUDA scaler where CUDA is not available warns and disables them. Any
autocast or scaler that would really change precision raises :class:`MixedPrecisionUnsupported`.

    >>> import torchlean as tl
    >>> scaler = tl.amp.GradScaler(enabled=False)
    >>> with tl.autocast("cpu", enabled=False):
    ...     loss = (tl.ones(2, requires_grad=True) * 3).sum()
    >>> scaler.scale(loss) is loss, scaler.state_dict()
    (True, {})
"""

from __future__ import annotations

import functools
import warnings

from .errors import BackendUnavailableError, DeviceError, DTypeError

__all__ = ["GradScaler", "MixedPrecisionUnsupported", "autocast", "is_autocast_available"]

_ISSUE = ("mixed precision (float16 / bfloat16 autocast and gradient scaling) is not supported by "
          "torchlean yet (issue 20); pass enabled=False, or remove the autocast / GradScaler")


class MixedPrecisionUnsupported(BackendUnavailableError):
    """An enabled autocast or GradScaler: this installation cannot run mixed precision yet."""


def _cuda_available() -> bool:
    from .kernels import cuda_available
    return cuda_available()


def is_autocast_available(device_type: str) -> bool:
    """torch's: whether autocast exists for ``device_type``. False: not supported yet (issue 20)."""
    if not isinstance(device_type, str):
        raise DeviceError(f"is_autocast_available: expected device_type of type str, got {type(device_type)}")
    return False


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None).

    Disabled (``enabled=False``, or CUDA asked for where CUDA is not available, or a CPU dtype
    that torch's CPU autocast refuses, each with torch's warning) it runs the block or function
    unchanged. Enabled it raises :class:`MixedPrecisionUnsupported` (issue 20).
    ``cache_enabled`` only concerns the cast cache of an enabled autocast: no effect here.

        >>> import torchlean as tl
        >>> with tl.autocast(device_type="cpu", enabled=False):
        ...     (tl.ones(2) * 2).tolist()
        [2.0, 2.0]
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise DeviceError(f"autocast: expected device_type of type str, got {type(device_type)}")
        from .device import normalize
        from .dtypes import as_dtype, bfloat16, float16
        normalize(device_type, "autocast")
        self.device = device_type
        self.fast_dtype = as_dtype(dtype) if dtype is not None else (float16 if device_type == "cuda"
                                                                     else bfloat16)
        if self.fast_dtype is None:
            raise DTypeError(f"autocast: dtype must be a dtype, got {dtype!r}")
        self._cache_enabled = cache_enabled
        if enabled and device_type == "cuda" and not _cuda_available():
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                          UserWarning, stacklevel=2)
            enabled = False
        if enabled and device_type == "cpu" and self.fast_dtype not in (bfloat16, float16):
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                          UserWarning, stacklevel=2)
            enabled = False
        if enabled:
            raise MixedPrecisionUnsupported(
                f"autocast(device_type={device_type!r}, dtype={self.fast_dtype.name}): {_ISSUE}")
        self._enabled = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapped


class GradScaler:
    """torch.amp.GradScaler(device="cuda", init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True).

    Disabled (``enabled=False``, or a CUDA scaler where CUDA is not available, with torch's
    warning) it is torch's disabled scaler: ``scale`` returns its argument, ``unscale_`` and
    ``update`` do nothing, ``step(optimizer, *args, **kwargs)`` returns ``optimizer.step(*args,
    **kwargs)``, ``get_scale()`` is 1.0, ``state_dict()`` is ``{}`` and ``load_state_dict`` ignores
    its argument. Enabled it raises :class:`MixedPrecisionUnsupported` (issue 20).

        >>> import torchlean as tl
        >>> s = tl.amp.GradScaler(enabled=False)
        >>> s.is_enabled(), s.get_scale()
        (False, 1.0)
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        from .device import normalize
        self._device = device
        normalize(device, "GradScaler")
        if enabled and device == "cuda" and not _cuda_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          UserWarning, stacklevel=2)
            enabled = False
        if enabled:
            raise MixedPrecisionUnsupported(f"GradScaler(device={device!r}, enabled=True): {_ISSUE}")
        self._enabled = False
        self._init_scale, self._growth_factor = init_scale, growth_factor
        self._backoff_factor, self._growth_interval = backoff_factor, growth_interval

    def is_enabled(self) -> bool:
        return self._enabled

    def scale(self, outputs):
        """The outputs unchanged (a disabled scaler multiplies by nothing)."""
        return outputs

    def unscale_(self, optimizer) -> None:
        return None

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)``, its return value returned."""
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        return None

    def get_scale(self) -> float:
        return 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def state_dict(self) -> dict:
        """``{}``, as torch's disabled scaler (so checkpoints written by torch with it load here)."""
        return {}

    def load_state_dict(self, state_dict) -> None:
        """Ignored, as by torch's disabled scaler."""
        return


class CudaAutocast(autocast):
    """torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True): deprecated in
    torch for ``autocast("cuda", ...)`` and warned the same way here."""

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        from .dtypes import float16
        super().__init__("cuda", dtype=float16 if dtype is None else dtype, enabled=enabled,
                         cache_enabled=cache_enabled)


class CudaGradScaler(GradScaler):
    """torch.cuda.amp.GradScaler(init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True): deprecated in torch for ``amp.GradScaler("cuda", ...)``."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
