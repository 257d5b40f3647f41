"""Runtime rules of the memory family: dtype casts and device moves (meaning: :mod:`torchlean.spec.memory`)."""

from __future__ import annotations

from ...dtypes import is_float_np
from .registry import defrule


def _cast_fwd(K, x, *, dtype):
    y = K.astype(x, dtype)
    # Only a float-to-float cast passes a gradient back (in the source dtype).
    return y, (x.dtype if is_float_np(x.dtype) and is_float_np(y.dtype) else None)


defrule("cast", _cast_fwd, lambda K, src, g, n: (None if src is None else K.astype(g, src),))

# The backward moves the cotangent (on the destination device) back to the source device.
defrule("to_device", lambda K, x, *, device: (K.to_device(x, device), K.device),
        lambda K, src, g, n: (K.to_device(g, src),))
