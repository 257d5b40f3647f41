"""Runtime rules: dtype casts and device moves."""

from __future__ import annotations

from ...kernels import get_kernels
from .registry import defrule


def _cast_fwd(K, x, *, dtype):
    return K.astype(x, dtype), x.dtype


defrule("cast", _cast_fwd, lambda K, src, g, n: (K.astype(g, src),))


def _move(x, src: str, dst: str):
    if src == dst:
        return x
    if dst == "cpu":
        return get_kernels(src).to_host(x)
    return get_kernels(dst).from_host(x, x.dtype)


def _to_device_fwd(K, x, *, device):
    return _move(x, K.device, device), (K.device, device)


defrule("to_device", _to_device_fwd, lambda K, s, g, n: (_move(g, s[1], s[0]),))
