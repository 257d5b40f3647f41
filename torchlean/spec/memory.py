"""Spec family: dtype casts and device moves (identity on values, up to rounding; a cast to an
integer dtype truncates toward zero and, like a cast to bool, passes no gradient)."""

from __future__ import annotations

import numpy as np

from ..dtypes import is_float_np
from ..errors import DeviceError, DTypeError
from .registry import defspec


def _np(dtype):
    try:
        return np.dtype(dtype)
    except TypeError:   # "bfloat16" without ml_dtypes, or not a dtype at all
        return None


def _cast_shape(x, *, dtype):
    d = _np(dtype)
    if d is None or not (d.kind in ("i", "u", "b") or is_float_np(d)):
        raise DTypeError(f"cast: dtype must be a float, integer or bool dtype, got {dtype!r}")
    return tuple(x)


def _cast(x, *, dtype):
    # Float to integer truncates toward zero, as PyTorch's .long() does.
    return np.asarray(x).astype(np.dtype(dtype))


def _cast_vjp(g, x, *, dtype):
    # Only a float-to-float cast passes a gradient (an integer or bool result is not differentiable).
    if not is_float_np(np.dtype(dtype)) or not is_float_np(np.asarray(x).dtype):
        return (None,)
    return (np.asarray(g).astype(x.dtype),)


defspec("cast", _cast, _cast_vjp, _cast_shape, 1)


def _to_device_shape(x, *, device):
    if device not in ("cpu", "cuda"):
        raise DeviceError(f"to_device: unknown device {device!r}; expected 'cpu' or 'cuda'")
    return tuple(x)


# The meaning of a device move is the identity: the same numbers on another device.
defspec("to_device", lambda x, *, device: np.array(x, copy=True), lambda g, x, *, device: (g,),
        _to_device_shape, 1)
