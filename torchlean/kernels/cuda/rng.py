"""CUDA kernels of the rng family: bit-identical to the host's splitmix64 stream (``src/rng.cu``)."""

from __future__ import annotations

import math

import cupy
import numpy as np

from .base import _EW_PER_BLOCK, _THREADS
from . import build
from .build import blocks, launch

build.declare("rng", ["uniform_f32", "uniform_f64"] + [f"{k}<{t}>" for k in ("randn_kernel", "bernoulli_kernel")
                                                        for t in build.FLOATS])


# ---- counter-based random numbers (bit-identical to the host's splitmix64 stream) -----------

_M64 = 0xFFFFFFFFFFFFFFFF


_GOLD = 0x9E3779B97F4A7C15


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _key(seed, counter) -> np.uint64:
    return np.uint64(_mix(((int(seed) & _M64) * _GOLD + (int(counter) & _M64)) & _M64))


def _shape(shape):
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


def rand_uniform(shape, seed, counter, dtype):
    shape = _shape(shape)
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    if dtype == np.float64:
        out = cupy.empty(shape, dtype=np.float64)
        launch("rng", "uniform_f64", blocks(n, _EW_PER_BLOCK), _THREADS, (out, np.int64(n), _key(seed, counter)))
        return out
    out = cupy.empty(shape, dtype=np.float32)
    launch("rng", "uniform_f32", blocks(n, _EW_PER_BLOCK), _THREADS, (out, np.int64(n), _key(seed, counter)))
    return out.astype(dtype, copy=False)


def randn(shape, seed, counter, dtype):
    shape = _shape(shape)
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    t = "float" if dtype == np.float32 else "double"
    out = cupy.empty(shape, dtype=np.float32 if t == "float" else np.float64)
    launch("rng", f"randn_kernel<{t}>", blocks(n, _EW_PER_BLOCK), _THREADS, (out, np.int64(n), _key(seed, counter)))
    return out.astype(dtype, copy=False)


def bernoulli_mask(shape, p_keep, seed, counter, dtype):
    shape = _shape(shape)
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    t = "double" if dtype == np.float64 else "float"
    out = cupy.empty(shape, dtype=np.float64 if t == "double" else np.float32)
    launch("rng", f"bernoulli_kernel<{t}>", blocks(n, _EW_PER_BLOCK), _THREADS,
           (out, np.int64(n), _key(seed, counter), np.float32(p_keep)))
    return out.astype(dtype, copy=False)
