"""Runtime rules of matmul, bmm, linear and linear_nobias (meaning: :mod:`torchlean.spec.linalg`).

Every product goes through :func:`_gemm`, which honours the seeds' ``use_gpu``
hint: on the CPU device, with ``set_options(use_gpu=True)`` and a GPU present,
the product is uploaded, computed by cuBLAS (SGEMM for ``gpu_precision="fp32"``,
inputs rounded to float32; DGEMM for ``"fp64"``) and downloaded in the input
dtype. Without a GPU the hint is ignored and the CPU kernels run.
"""

from __future__ import annotations

import functools

import numpy as np

from ...errors import TorchLeanError
from ...options import get_options
from ...spec.linalg import matmul_plan
from .registry import defrule

_GPU_DTYPE = {"fp32": np.float32, "fp64": np.float64}


@functools.lru_cache(maxsize=1)
def _cuda_kernels():
    """The CUDA kernel surface, or None when no GPU (or no CuPy) is present; probed once."""
    try:
        from ...kernels import cuda_available, get_kernels
        return get_kernels("cuda") if cuda_available() else None
    except (TorchLeanError, ImportError):
        return None


def _gpu_for(K):
    """The CUDA kernels when the use_gpu hint applies to a product on ``K``'s device, else None."""
    if K.device != "cpu" or not get_options().use_gpu:
        return None
    return _cuda_kernels()


def _gemm(K, a, b):
    """``a @ b`` with NumPy matmul semantics, on ``K``'s device or routed to cuBLAS by ``use_gpu``."""
    G = _gpu_for(K)
    if G is None:
        return K.matmul(a, b)
    dt = _GPU_DTYPE[get_options().gpu_precision]
    y = G.to_host(G.matmul(G.from_host(a, dt), G.from_host(b, dt)))
    return K.astype(K.from_host(y, y.dtype), a.dtype)


def _mT(K, x):
    """Contiguous transpose of the last two axes (pure data movement)."""
    return K.ascontiguous(K.xp.swapaxes(x, -1, -2))


# ---- matmul ---------------------------------------------------------------------------------

def _matmul_fwd(K, a, b):
    return _gemm(K, a, b), (a, b)


def _matmul_bwd(K, s, g, n):
    a, b = s
    a2, b2, full, _ = matmul_plan(a.shape, b.shape)
    A, B, G = a.reshape(a2), b.reshape(b2), g.reshape(full)
    da = K.sum_to_shape(_gemm(K, G, _mT(K, B)), a2).reshape(a.shape) if n[0] else None
    db = K.sum_to_shape(_gemm(K, _mT(K, A), G), b2).reshape(b.shape) if n[1] else None
    return da, db


defrule("matmul", _matmul_fwd, _matmul_bwd)


# ---- bmm ------------------------------------------------------------------------------------

def _bmm_fwd(K, a, b):
    return (K.bmm(a, b) if _gpu_for(K) is None else _gemm(K, a, b)), (a, b)


def _bmm_bwd(K, s, g, n):
    a, b = s
    mm = K.bmm if _gpu_for(K) is None else (lambda p, q: _gemm(K, p, q))
    return (mm(g, _mT(K, b)) if n[0] else None, mm(_mT(K, a), g) if n[1] else None)


defrule("bmm", _bmm_fwd, _bmm_bwd)


# ---- linear (seeds' order: w, b, x) ---------------------------------------------------------

def _affine_fwd(K, w, b, x):
    if _gpu_for(K) is None:
        return K.linear(x, w, b)
    y = _gemm(K, x, _mT(K, w))
    return y if b is None else K.add(y, b)


def _affine_bwd(K, w, x, g, need_w, need_b, need_x):
    """(dw, db, dx) of ``x @ w.T + b``; only the requested ones are computed."""
    if _gpu_for(K) is None:
        dx, dw, db = K.linear_bwd(x, w, g, need_x, need_w, need_b)
        return dw, db, dx
    g2 = g.reshape(-1, g.shape[-1])
    dw = _gemm(K, _mT(K, g2), x.reshape(-1, x.shape[-1])) if need_w else None
    db = K.sum(g2, (0,), False) if need_b else None
    dx = _gemm(K, g, w) if need_x else None
    return dw, db, dx


defrule("linear",
        lambda K, w, b, x: (_affine_fwd(K, w, b, x), (w, x)),
        lambda K, s, g, n: _affine_bwd(K, s[0], s[1], g, n[0], n[1], n[2]))
defrule("linear_nobias",
        lambda K, w, x: (_affine_fwd(K, w, None, x), (w, x)),
        lambda K, s, g, n: (lambda r: (r[0], r[2]))(_affine_bwd(K, s[0], s[1], g, n[0], False, n[1])))
