"""Allocator telemetry of the seeds' CUDA buffers, on top of CuPy's memory pool.

CuPy's pool reports bytes in use and bytes reserved, but not how many buffers were allocated
or freed, nor the peak. :func:`install` puts a thin allocator in front of the pool: each
allocation is counted, and wrapped so that its release is counted when CuPy drops the last
reference. Bytes are the sizes asked for (the pool rounds blocks up to 512 bytes; its own
figures are reported as ``pool_used_bytes`` and ``pool_reserved_bytes``).

The allocator also keeps the blocks of small buffers it was given back, by device, stream and
rounded size, and hands them out again without a trip through the pool: an eager op allocates
its output every call, and the pool's best-fit search and locking cost more host time than the
kernel launch itself at small sizes. Reuse is stream-ordered, as in the pool: a block freed on
one stream is handed out again only on that stream, so work queued before the free finishes
before work queued after the reuse. At most :data:`CACHE_LIMIT` bytes are kept this way;
:func:`free_cached` (``tl.cuda.empty_cache()``) and an allocation that finds the pool out of
memory give them all back to the pool.
"""

from __future__ import annotations

import cupy

# live bytes, peak bytes, allocations, frees
_STATS = [0, 0, 0, 0]
_POOL = None

#: Buffers up to this many bytes are recycled by the allocator itself (see the module docs).
SMALL_BYTES = 1 << 22
#: Most bytes the allocator keeps for reuse; freed blocks beyond it go back to the pool.
CACHE_LIMIT = 1 << 28
_FREE: dict = {}        # (device, stream pointer, rounded size) -> [pool MemoryPointer, ...]
_CACHED = [0]           # bytes held in _FREE
#: The GPU of this process (:func:`torchlean.device.use_cuda`): a thread whose current device is
#: another one (CUDA's default for a new thread is device 0) is switched to it at its first allocation.
DEVICE = [0]


class _Block(tuple):
    """(pool pointer, size, free-list key or None): owns one pool allocation; its finalizer is
    the "free" event, and returns a small block to the free list.

    A tuple subclass is built without a Python-level ``__init__``: the allocator runs for
    every array, so its cost is part of every kernel call."""

    __slots__ = ()

    def __del__(self):
        s = _STATS
        if s is None:  # interpreter shutdown
            return
        s[0] -= self[1]
        s[3] += 1
        key = self[2]
        if key is not None and _CACHED[0] < CACHE_LIMIT:
            lst = _FREE.get(key)
            if lst is None:
                lst = _FREE[key] = []
            lst.append(self[0])
            _CACHED[0] += key[2]


_Unowned = cupy.cuda.memory.UnownedMemory
_Pointer = cupy.cuda.memory.MemoryPointer
_OutOfMemory = cupy.cuda.memory.OutOfMemoryError
_device_id = cupy.cuda.device.get_device_id
_current_stream = cupy.cuda.stream.get_current_stream
_pool_malloc = None


def _malloc(size):
    dev = _device_id()
    if dev != DEVICE[0]:
        dev = _rebind()
    if size == 0:
        return _pool_malloc(0)
    key = None
    if size <= SMALL_BYTES:
        key = (dev, _current_stream().ptr, (size + 511) & ~511)
        lst = _FREE.get(key)
        mp = None
        if lst:
            try:
                mp = lst.pop()
                _CACHED[0] -= key[2]
            except IndexError:  # another thread took the last one
                pass
        if mp is None:
            mp = _pool_alloc(key[2])
    else:
        mp = _pool_alloc(size)
    s = _STATS
    live = s[0] + size
    s[0] = live
    s[2] += 1
    if live > s[1]:
        s[1] = live
    return _Pointer(_Unowned(mp.ptr, size, _Block((mp, size, key)), mp.device_id), 0)


def _rebind():
    cupy.cuda.runtime.setDevice(DEVICE[0])
    return DEVICE[0]


def used() -> bool:
    """True once any CUDA buffer was allocated in this process."""
    return _STATS[2] > 0


def _pool_alloc(size):
    try:
        return _pool_malloc(size)
    except _OutOfMemory:
        if not _FREE:
            raise
        _release_free_list()  # the blocks kept for reuse go back to the pool, which retries
        return _pool_malloc(size)


def _release_free_list() -> None:
    _FREE.clear()
    _CACHED[0] = 0


def install() -> None:
    """Route CuPy's allocations through the counting allocator (idempotent)."""
    global _POOL, _pool_malloc
    if _POOL is None:
        _POOL = cupy.get_default_memory_pool()
        _pool_malloc = _POOL.malloc
    cupy.cuda.set_allocator(_malloc)


def stats() -> dict:
    """Live bytes, peak bytes, allocation and free counts, and the pool's used / reserved bytes.

    ``pool_used_bytes`` counts the blocks of live buffers; blocks kept for reuse count as
    reserved, like the pool's own cached blocks."""
    live, peak, allocs, frees = _STATS
    pool = _POOL if _POOL is not None else cupy.get_default_memory_pool()
    return {
        "live_bytes": live,
        "peak_bytes": peak,
        "allocations": allocs,
        "frees": frees,
        "live_buffers": allocs - frees,
        "pool_used_bytes": pool.used_bytes() - _CACHED[0],
        "pool_reserved_bytes": pool.total_bytes(),
    }


def reset_peak() -> None:
    """Set the peak to the bytes live now."""
    _STATS[1] = _STATS[0]


def free_cached() -> None:
    """Return the unused blocks to the driver (what ``pool_reserved_bytes`` counts beyond use):
    first the blocks kept for reuse go back to the pool, then the pool's cached blocks."""
    _release_free_list()
    (_POOL or cupy.get_default_memory_pool()).free_all_blocks()
