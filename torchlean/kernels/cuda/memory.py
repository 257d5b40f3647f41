"""Allocator telemetry of the seeds' CUDA buffers, on top of CuPy's memory pool.

CuPy's pool reports bytes in use and bytes reserved, but not how many buffers were allocated
or freed, nor the peak. :func:`install` puts a thin allocator in front of the pool: each
allocation is counted, and wrapped so that its release is counted when CuPy drops the last
reference. Bytes are the sizes asked for (the pool rounds blocks up to 512 bytes; its own
figures are reported as ``pool_used_bytes`` and ``pool_reserved_bytes``).
"""

from __future__ import annotations

import cupy

# live bytes, peak bytes, allocations, frees
_STATS = [0, 0, 0, 0]
_POOL = None


class _Block(tuple):
    """(pool pointer, size): owns one pool allocation; its finalizer is the "free" event.

    A tuple subclass is built without a Python-level ``__init__``: the allocator runs for
    every array, so its cost is part of every kernel call."""

    __slots__ = ()

    def __del__(self):
        s = _STATS
        if s is not None:
            s[0] -= self[1]
            s[3] += 1


_Unowned = cupy.cuda.memory.UnownedMemory
_Pointer = cupy.cuda.memory.MemoryPointer
_pool_malloc = None


def _malloc(size):
    mp = _pool_malloc(size)
    if size == 0:
        return mp
    s = _STATS
    live = s[0] + size
    s[0] = live
    s[2] += 1
    if live > s[1]:
        s[1] = live
    return _Pointer(_Unowned(mp.ptr, size, _Block((mp, size)), mp.device_id), 0)


def install() -> None:
    """Route CuPy's allocations through the counting allocator (idempotent)."""
    global _POOL, _pool_malloc
    if _POOL is None:
        _POOL = cupy.get_default_memory_pool()
        _pool_malloc = _POOL.malloc
    cupy.cuda.set_allocator(_malloc)


def stats() -> dict:
    """Live bytes, peak bytes, allocation and free counts, and the pool's used / reserved bytes."""
    live, peak, allocs, frees = _STATS
    pool = _POOL if _POOL is not None else cupy.get_default_memory_pool()
    return {
        "live_bytes": live,
        "peak_bytes": peak,
        "allocations": allocs,
        "frees": frees,
        "live_buffers": allocs - frees,
        "pool_used_bytes": pool.used_bytes(),
        "pool_reserved_bytes": pool.total_bytes(),
    }


def reset_peak() -> None:
    """Set the peak to the bytes live now."""
    _STATS[1] = _STATS[0]


def free_cached() -> None:
    """Return the pool's unused blocks to the driver (what ``pool_reserved_bytes`` counts beyond use)."""
    (_POOL or cupy.get_default_memory_pool()).free_all_blocks()
