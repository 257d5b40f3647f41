"""Runtime rules of the memory family: dtype casts and device moves (meaning: :mod:`torchlean.spec.memory`)."""

from __future__ import annotations

from .registry import defrule

defrule("cast", lambda K, x, *, dtype: (K.astype(x, dtype), x.dtype), lambda K, src, g, n: (K.astype(g, src),))

# The backward moves the cotangent (on the destination device) back to the source device.
defrule("to_device", lambda K, x, *, device: (K.to_device(x, device), K.device),
        lambda K, src, g, n: (K.to_device(g, src),))
