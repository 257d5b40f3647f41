"""Host kernels of the memory family: allocation, copies, host transfers and dtype casts."""

from __future__ import annotations

import numpy as np


# ---- memory and transfer --------------------------------------------------------------------


def zeros(shape, dtype):
    return np.zeros(shape, dtype=dtype)


def full(shape, value, dtype):
    return np.full(shape, value, dtype=dtype)


def empty(shape, dtype):
    return np.empty(shape, dtype=dtype)


def copy(x):
    return np.array(x, copy=True, order="C")


def from_host(a, dtype):
    # NumPy's float64 -> float32 cast rounds to nearest even.
    return np.asarray(a, dtype=dtype, order="C")


def to_host(x):
    return np.array(x, copy=True)


def astype(x, dtype):
    return x.astype(dtype, copy=False)


def ascontiguous(x):
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def fill(x, value):
    x[...] = value


def assign(dst, src):
    dst[...] = src if isinstance(src, (np.ndarray, np.generic)) else src.get()


def bool_mask(mask, shape):
    m = np.asarray(mask)
    return np.broadcast_to(m if m.dtype == np.bool_ else m != 0, tuple(shape))


def from_dlpack(obj):
    return np.from_dlpack(obj)


def dlpack(x, **kw):
    return x.__dlpack__(**kw)
