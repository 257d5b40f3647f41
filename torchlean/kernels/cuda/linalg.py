"""CUDA kernels of the linalg family: cuBLAS through CuPy (strict float32), or direct cuBLAS calls
inside a CUDA graph capture scope (:mod:`.gemm`)."""

from __future__ import annotations


from . import build
from . import gemm as _gemm
from .base import _EW_PER_BLOCK, _ND, _THREADS, _dev
from .elementwise import _BIN_L, _OP_ADD, _bin_launcher
from .reduce import _reduce


def bmm(a, b):
    return _gemm.matmul(a, b)


# ---- linear algebra (cuBLAS through CuPy, strict float32) -----------------------------------


def matmul(a, b):
    return _gemm.matmul(a, b)  # cupy.matmul, or direct cuBLAS where a CUDA graph is captured


def linear(x, w, b=None):
    x = _dev(x)
    x2 = x.reshape(-1, x.shape[-1])
    y = _gemm.matmul(x2, w.T)  # the transpose is a cuBLAS operand flag, not a copy
    if b is not None:
        if (type(b) is _ND and type(y) is _ND and b.dtype == y.dtype and y.dtype in build._FLOAT_NAME
                and b.ndim == 1 and b._c_contiguous and y._c_contiguous and y.size and b.shape[0] == y.shape[-1]):
            dt, n = y.dtype, y.size
            L = _BIN_L.get((dt, _OP_ADD, 3)) or _bin_launcher(dt, _OP_ADD, 3)
            L((n + _EW_PER_BLOCK - 1) // _EW_PER_BLOCK, _THREADS, y.data.ptr, b.data.ptr, y.data.ptr, n, b.shape[0])
        else:
            y += b
    return y.reshape(x.shape[:-1] + (w.shape[0],))


def linear_bwd(x, w, g, need_x=True, need_w=True, need_b=True):
    g2 = g.reshape(-1, g.shape[-1])
    dx = _gemm.matmul(g2, w).reshape(x.shape) if need_x else None
    dw = _gemm.matmul(g2.T, x.reshape(-1, x.shape[-1])) if need_w else None
    db = _reduce(g2, (0,), False, 0, "linear_bwd") if need_b else None
    return dx, dw, db
