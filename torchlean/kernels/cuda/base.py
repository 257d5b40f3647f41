"""Helpers shared by the CUDA kernel families: array coercion, launch geometry, the GPU's size."""

from __future__ import annotations

import builtins

import cupy
import numpy as np


_THREADS = 256


_EW_PER_BLOCK = _THREADS * 4  # elementwise and RNG kernels handle 4 elements per thread


_SMS: dict = {}


def _sm_count() -> int:
    """Multiprocessors of the current device (CuPy's ``attributes`` queries every attribute: once)."""
    dev = cupy.cuda.Device().id
    n = _SMS.get(dev)
    if n is None:
        n = _SMS[dev] = cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrMultiProcessorCount, dev)
    return n


_FILL_THREADS = None


def _fill_threads() -> int:
    """Threads that fill the GPU once (2048 per multiprocessor); reductions split to reach it.

    One wave measured best on an H100 (column sums of 8192 x 8192: 73% of copy bandwidth with
    one wave, 64% with four)."""
    global _FILL_THREADS
    if _FILL_THREADS is None:
        _FILL_THREADS = _sm_count() * 2048
    return _FILL_THREADS


_ND = cupy.ndarray


def _contig(x):
    return x if x._c_contiguous else cupy.ascontiguousarray(x)


def _dev(x):
    """A device array: NumPy arrays (and scalars) are uploaded, CuPy arrays pass through."""
    return x if isinstance(x, cupy.ndarray) else cupy.asarray(x)


_FLOAT_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_BOOL = np.dtype(np.bool_)


def cast(x, dtype):
    """``x`` as ``dtype``: float32 <-> float64 by the IEEE conversion of ``src/elementwise.cu``'s
    ``cast_kernel`` and float -> bool by ``to_bool_kernel`` (CuPy's ``astype`` flushes float32
    subnormals to zero), any other pair by ``astype``; ``x`` itself when it already has that dtype."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    src, dst = _FLOAT_C.get(x.dtype), _FLOAT_C.get(dtype)
    if src is None or (dst is None and dtype != _BOOL):
        return x.astype(dtype)
    from .build import launch
    x = _contig(x)
    y = cupy.empty(x.shape, dtype)
    if y.size:
        name = f"to_bool_kernel<{src}>" if dst is None else f"cast_kernel<{src}, {dst}>"
        launch("elementwise", name, ((y.size + 255) // 256,), (256,), (x, y, np.int64(y.size)))
    return y


def _aligned(*arrays):
    """Broadcast to one shape and dtype (NumPy's rules), each C-contiguous: raw kernels index flat."""
    arrays = [_dev(a) for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    dtype = np.result_type(*(a.dtype for a in arrays))
    out = []
    for a in arrays:
        if a.dtype != dtype:
            a = cast(a, dtype)
        if a.shape != shape:
            a = cupy.broadcast_to(a, shape)
        out.append(_contig(a))
    return shape, dtype, out


_RESIDENT: dict = {}


def _resident_blocks(f, threads: int) -> int:
    """Blocks of ``threads`` that the whole GPU holds at once for kernel ``f`` (registers and
    shared memory permitting): one wave, the grid size of the grid-stride and split reductions."""
    key = (id(f), threads)
    r = _RESIDENT.get(key)
    if r is None:
        regs = int(getattr(f, "num_regs", 0) or 64)
        smem = int(getattr(f, "shared_size_bytes", 0) or 0)
        warps = -(-threads // 32)
        per_warp = -(-regs * 32 // 256) * 256        # registers are allocated per warp, 256 at a time
        by_regs = (65536 // per_warp) // warps
        by_smem = (227 * 1024) // (smem + 1024) if smem else 32
        per_sm = builtins.max(1, builtins.min(by_regs, by_smem, 2048 // threads, 32))
        r = _RESIDENT[key] = per_sm * _sm_count()
    return r


