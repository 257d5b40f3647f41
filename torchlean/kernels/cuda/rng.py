"""CUDA kernels of the rng family: bit-identical to the host's splitmix64 stream (``src/rng.cu``)."""

from __future__ import annotations

import math

import cupy
import numpy as np

from ...spec.rng import stream_key as _key
from . import build
from .base import _EW_PER_BLOCK, _THREADS
from .build import blocks, launch

build.declare("rng", ["uniform_f32", "uniform_f64"] + [f"{k}<{t}>" for k in ("randn_kernel", "bernoulli_kernel")
                                                        for t in build.FLOATS])


# ---- counter-based random numbers (bit-identical to the host's splitmix64 stream) -----------


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
