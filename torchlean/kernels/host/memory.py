"""Host kernels of the memory family: allocation, copies, host transfers and dtype casts.

The kernels that read the same on every device take the array namespace ``xp`` (NumPy here);
the CUDA family module binds them to CuPy."""

from __future__ import annotations

import numpy as np


# ---- memory and transfer --------------------------------------------------------------------


def zeros(shape, dtype, *, xp=np):
    return xp.zeros(shape, dtype=dtype)


def full(shape, value, dtype, *, xp=np):
    return xp.full(shape, value, dtype=dtype)


def empty(shape, dtype, *, xp=np):
    return xp.empty(shape, dtype=dtype)


def copy(x, *, xp=np):
    return xp.array(x, copy=True, order="C")


def from_host(a, dtype):
    # NumPy's float64 -> float32 cast rounds to nearest even.
    return np.asarray(a, dtype=dtype, order="C")


def to_host(x):
    return np.array(x, copy=True)


def astype(x, dtype):
    return x.astype(dtype, copy=False)


def ascontiguous(x, *, xp=np):
    # (ascontiguousarray alone would make a 0-d array 1-d)
    return x if x.flags.c_contiguous else xp.ascontiguousarray(x)


def fill(x, value):
    x[...] = value


def assign(dst, src):
    dst[...] = src.get() if hasattr(src, "__cuda_array_interface__") else src


def bool_mask(mask, shape):
    m = np.asarray(mask)
    return np.broadcast_to(m if m.dtype == np.bool_ else m != 0, tuple(shape))


def from_dlpack(obj):
    return np.from_dlpack(obj)


def dlpack(x, **kw):
    return x.__dlpack__(**kw)
