"""CUDA kernels of the memory family: allocation, copies, host transfers, dtype casts, masks and
DLPack exchange.

Two caches live here: device copies of small host masks (by content), and the allocations shared
with other libraries through DLPack, whose contents may change behind this process's back (the
index family then never reuses a host copy of them)."""

from __future__ import annotations

import weakref
from functools import partial

import cupy
import numpy as np

from ..host import memory as host_memory
from .base import _contig, cast


# ---- memory and transfer --------------------------------------------------------------------


zeros = partial(host_memory.zeros, xp=cupy)
full = partial(host_memory.full, xp=cupy)
empty = partial(host_memory.empty, xp=cupy)
copy = partial(host_memory.copy, xp=cupy)
astype = cast   # float32 <-> float64 keeps subnormals (CuPy's astype flushes them)
ascontiguous = partial(host_memory.ascontiguous, xp=cupy)


# Device copies of small host arrays, keyed by content. A program that builds the same constant
# at every step (``torch.arange(T, device="cuda")`` for positions, the weights of an adaptive
# pooling) would otherwise upload it each time: an upload from pageable host memory makes the
# host wait behind the GPU's queue, and inside a CUDA-graph capture it is refused. A hit costs
# a device-to-device copy (the caller owns the result and may write to it), which captures.
CONSTANTS: dict = {}
_CONSTANTS_MAX = 256
_CONSTANT_BYTES = 1 << 16


def from_host(a, dtype):
    if isinstance(a, cupy.ndarray):
        return _contig(cast(a, dtype))
    # NumPy's float64 -> float32 cast rounds to nearest even; the upload then copies bytes.
    h = np.asarray(a, dtype=dtype, order="C")
    if h.nbytes > _CONSTANT_BYTES:
        return cupy.asarray(h)
    key = (h.dtype.str, h.shape, h.tobytes(), cupy.cuda.Device().id)
    d = CONSTANTS.get(key)
    if d is None:
        if len(CONSTANTS) >= _CONSTANTS_MAX:
            CONSTANTS.pop(next(iter(CONSTANTS)))
        d = CONSTANTS[key] = cupy.asarray(h)
    out = d.copy()
    if h.dtype.kind in "iu":
        for hook in INT_UPLOAD_HOOKS:
            hook(out, h)
    return out


#: Called as ``hook(device_array, host_array)`` after an integer upload: the index family keeps
#: the host copy (:func:`.index.note_upload`), so indices made on the host are never read back.
INT_UPLOAD_HOOKS: list = []


#: Called (no arguments) before a device-to-host copy waits for the device: a hook may wait first in a
#: way that lets other threads call CUDA meanwhile (the NCCL watchdog, which must see a hung
#: collective while the main thread waits for its result; a blocking copy would stall it).
WAIT_HOOKS: list = []


def to_host(x):
    if isinstance(x, cupy.ndarray):
        for hook in WAIT_HOOKS:
            hook()
        return cupy.asnumpy(x)
    return np.array(x, copy=True)


def fill(x, value):
    x.fill(value)
    if x.dtype.kind in "iub":
        note_int_write()


def assign(dst, src):
    if isinstance(src, cupy.ndarray):
        dst[...] = src
    else:  # a host array, scalar or list: one host-to-device copy of its broadcast (0-d stays 0-d)
        h = np.asarray(src, dtype=dst.dtype)
        dst.set(np.ascontiguousarray(np.broadcast_to(h, dst.shape)) if h.shape != dst.shape else
                np.asarray(h, order="C"))
    if dst.dtype.kind in "iub":
        note_int_write()


# In-place writes to integer arrays so far: host copies of integer device arrays (loss targets,
# indices) taken before one are stale (see index.host_ints).
INT_WRITES = [0]


def note_int_write() -> None:
    INT_WRITES[0] += 1


# ---- masks ----------------------------------------------------------------------------------

# Device copies of host masks, keyed by content: a causal mask is rebuilt on the host at every
# call, and uploading it each time would make the host wait for the GPU at every attention layer.
MASKS: dict = {}
_MASKS_MAX = 64
_MASK_CACHE_BYTES = 1 << 22


def bool_mask(mask, shape):
    """Only the distinct entries of a host mask travel: axes it is broadcast along (stride 0)
    stay broadcast on the device, and small masks are uploaded once per content."""
    shape = tuple(shape)
    if isinstance(mask, cupy.ndarray):
        m = mask if mask.dtype == np.bool_ else mask != 0
        return cupy.broadcast_to(m, shape)
    m = np.asarray(mask)
    core = m[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in zip(m.strides, m.shape))]
    core = np.ascontiguousarray(core != 0)
    key = (cupy.cuda.Device().id, core.shape, core.tobytes()) if core.nbytes <= _MASK_CACHE_BYTES else None
    d = MASKS.get(key) if key is not None else None
    if d is None:
        d = cupy.asarray(core)
        if key is not None:
            if len(MASKS) >= _MASKS_MAX:
                MASKS.pop(next(iter(MASKS)))
            MASKS[key] = d
    return cupy.broadcast_to(cupy.broadcast_to(d, m.shape), shape)


# ---- DLPack ---------------------------------------------------------------------------------

# Device buffers shared with other libraries through DLPack (exported or imported): their owners
# may write them at any time, so no host copy of them is ever reused. Base address -> weak
# reference to the array that owns the allocation here: once that array is gone the address may
# hold a new, unshared buffer.
SHARED_BUFFERS: dict = {}


def buffer_base(v):
    """The base address of the device allocation holding array ``v`` (views included), or None."""
    mem = getattr(getattr(v, "data", None), "mem", None)
    return getattr(mem, "ptr", None)


def _note_shared(v) -> None:
    base = buffer_base(v)
    if base is not None:
        root = v.base if getattr(v, "base", None) is not None else v
        SHARED_BUFFERS[base] = weakref.ref(root)


def is_shared_buffer(v) -> bool:
    """True when ``v`` lies in a live allocation shared through DLPack (see SHARED_BUFFERS)."""
    base = buffer_base(v)
    ref = SHARED_BUFFERS.get(base)
    if ref is None:
        return False
    if ref() is None:  # its arrays are gone: the address was freed and may be reused
        del SHARED_BUFFERS[base]
        return False
    return True


def from_dlpack(obj):
    v = cupy.from_dlpack(obj)
    _note_shared(v)
    return v


def dlpack(x, **kw):
    _note_shared(x)
    return x.__dlpack__(**kw)
