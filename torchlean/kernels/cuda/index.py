"""CUDA kernels of the index family: gathers and scatter-adds (``src/index.cu``). Index arguments are
validated on the host with :func:`torchlean.kernels.api.check_indices` before anything is launched."""

from __future__ import annotations

import collections
import math
import weakref

import cupy
import numpy as np

from ..api import check_indices
from . import gemm as _gemm
from .base import _THREADS, _contig, _dev
from .memory import INT_UPLOAD_HOOKS, INT_WRITES, is_shared_buffer
from . import build
from .build import blocks, etype, ftype, launch

build.declare("index", [f"{k}<{e}>" for k in ("gather_vec_kernel", "gather_rows_kernel") for e in build.ELEMS]
              + [f"{k}<{t}>" for k in ("scatter_add_rows_kernel", "scatter_add_rows_walk",
                                     "add_row_kernel")
                 for t in build.FLOATS])


# ---- host copies of integer device arrays -----------------------------------------------------

# id(root of a read-only host copy) -> [weak reference to the root, the device array copied, checked]
_DEVICE_COPIES: dict = {}


def _full_view_root(host):
    """The array owning ``host``'s memory when ``host`` is a C-contiguous view of all of it."""
    if not isinstance(host, np.ndarray) or not host.flags.c_contiguous:
        return None
    root = host if host.base is None else host.base
    if not isinstance(root, np.ndarray) or root.size != host.size or root.dtype != host.dtype:
        return None
    return root


def remember_device_copy(host, dev) -> None:
    """Note that read-only host array ``host`` holds the values of device array ``dev``.

    An index or target attribute that is ``host``, or any C-contiguous reshape of all of its
    memory, is then read from ``dev`` with no upload: a device tensor's values reach the host
    once per buffer, for validation, and the kernels keep reading the buffer itself (which a
    captured CUDA graph must do: see ``torchlean.capture``)."""
    root = _full_view_root(host)
    if root is None:
        return
    key = id(root)

    def forget(ref, key=key):
        e = _DEVICE_COPIES.get(key)
        if e is not None and e[0] is ref:
            del _DEVICE_COPIES[key]
    _DEVICE_COPIES[key] = [weakref.ref(root, forget), dev, False]


def _device_entry(host):
    root = _full_view_root(host)
    if root is None:
        return None
    e = _DEVICE_COPIES.get(id(root))
    return e if e is not None and e[0]() is root else None


def device_copy(host):
    """The device array whose values ``host`` holds (see :func:`remember_device_copy`), shaped
    like ``host``, or None."""
    e = _device_entry(host)
    if e is None:
        return None
    dev = e[1]
    return dev if dev.shape == host.shape else dev.reshape(host.shape)


def checked_device_indices(indices, op: str):
    """``device_copy(indices)`` once its values passed :func:`check_indices` (checked once per
    copy), as int64; None when ``indices`` is no copy of a device array."""
    e = _device_entry(indices)
    if e is None:
        return None
    if not e[2]:
        check_indices(indices, op)
        e[2] = True
    dev = e[1]
    if dev.dtype != np.int64:
        dev = dev.astype(np.int64)
    return dev if dev.shape == indices.shape else dev.reshape(indices.shape)


# (id(root array), pointer, shape, strides, dtype) of an integer view -> (root array, INT_WRITES
# count, read-only host copy), the most recently used _ROOTS_KEPT of them.
_HOST_INTS: collections.OrderedDict = collections.OrderedDict()
_ROOTS_KEPT = 8


def host_ints(x):
    """A training loop passes the same target step after step, often as a fresh view of it
    (``y.reshape(-1)``): copying it to the host each time would stop the host until the GPU
    catches up. The copy is kept per allocation (the view's root array) and layout while no
    integer array was written in place since (:func:`~.memory.fill`); it is read-only, and
    :func:`device_ints` finds the device buffer from it. The last few root arrays are held (so an
    address is never reused under a kept copy); buffers shared through DLPack are copied on every
    call."""
    if is_shared_buffer(x):  # another library may write it: copy every time
        a = cupy.asnumpy(x)
        a.flags.writeable = False
        return a
    root = x.base if x.base is not None else x
    key = (id(root), x.data.ptr, x.shape, x.strides, x.dtype.str)
    hit = _HOST_INTS.get(key)
    if hit is not None and hit[0] is root and hit[1] == INT_WRITES[0]:
        _HOST_INTS.move_to_end(key)
        return hit[2]
    a = cupy.asnumpy(x)
    a.flags.writeable = False
    _keep_host_ints(x, root, key, a)
    return a


def _keep_host_ints(x, root, key, a) -> None:
    _HOST_INTS[key] = (root, INT_WRITES[0], a)
    _HOST_INTS.move_to_end(key)
    while len(_HOST_INTS) > _ROOTS_KEPT:
        _HOST_INTS.popitem(last=False)
    remember_device_copy(a, x)


def note_upload(x, host) -> None:
    """``x`` (a fresh device array) was just uploaded from ``host``: keep a read-only copy as
    :func:`host_ints` would, so that indices made on the host (``arange`` positions) are not
    copied back at every step (a copy to the host waits for the GPU, and a CUDA-graph capture
    refuses it)."""
    a = np.array(host, copy=True)
    a.flags.writeable = False
    _keep_host_ints(x, x, (id(x), x.data.ptr, x.shape, x.strides, x.dtype.str), a)


INT_UPLOAD_HOOKS.append(note_upload)


def device_ints(a):
    dev = device_copy(a) if type(a) is np.ndarray else None
    if dev is not None:
        return dev if dev.dtype == np.int64 else dev.astype(np.int64)
    return _cached_upload(np.asarray(a, dtype=np.int64, order="C"))  # (ascontiguousarray makes 0-d 1-d)


# Device copies of small host index arrays, keyed by content (kernels only read them). An
# upload from pageable memory makes the host wait for the GPU to drain its queue: an embedding
# would do it in its forward and again in its backward, and position ids at every step.
_INDICES: dict = {}


_INDICES_MAX = 64


_INDICES_CACHE_BYTES = 1 << 20


def _upload_indices(indices, op):
    """Validate on the host (IndexRangeError before any launch), then upload as int64.

    Indices that are the host copy of a device tensor (an embedding's input on the GPU) are read
    from that tensor instead, checked once per copy: nothing is uploaded, and a captured CUDA
    graph reads whatever the tensor holds when it is replayed."""
    if type(indices) is np.ndarray:
        dev = checked_device_indices(indices, op)
        if dev is not None:
            return dev.reshape(-1) if dev._c_contiguous else cupy.ascontiguousarray(dev).reshape(-1)
    return _cached_upload(np.ascontiguousarray(check_indices(indices, op), dtype=np.int64))


def _cached_upload(idx):
    """A device copy of host int64 array ``idx``: small ones once per content (see _INDICES)."""
    if idx.nbytes > _INDICES_CACHE_BYTES:
        return cupy.asarray(idx)
    key = (cupy.cuda.Device().id, idx.shape, idx.tobytes())
    d = _INDICES.get(key)
    if d is None:
        if len(_INDICES) >= _INDICES_MAX:
            _INDICES.pop(next(iter(_INDICES)))
        d = _INDICES[key] = cupy.asarray(idx)
    return d


def gather_vec(v, indices):
    v = _contig(_dev(v))
    idx = _upload_indices(indices, "gather_vec")
    out = cupy.empty(idx.shape[0], dtype=v.dtype)
    launch("index", f"gather_vec_kernel<{etype(v.dtype)}>", blocks(out.size, _THREADS), _THREADS,
           (v, np.int64(v.shape[0]), idx, np.int64(idx.shape[0]), out))
    return out


def gather_rows(mat, indices):
    mat = _contig(_dev(mat))
    idx = _upload_indices(indices, "gather_rows")
    cols = math.prod(mat.shape[1:])
    out = cupy.empty((idx.shape[0],) + mat.shape[1:], dtype=mat.dtype)
    launch("index", f"gather_rows_kernel<{etype(mat.dtype)}>", blocks(out.size, _THREADS),
           _THREADS, (mat, np.int64(mat.shape[0]), np.int64(cols), idx, np.int64(idx.shape[0]), out))
    return out


def _scatter_plan(indices, op):
    """(order, seg_row, start, nseg) on the device: the stable sort of the validated indices and
    its segments of equal indices, one upload, cached by content like the gathers' indices."""
    idx = np.ascontiguousarray(check_indices(indices, op), dtype=np.int64)
    key = ("scatter", cupy.cuda.Device().id, idx.shape, idx.tobytes()) \
        if idx.nbytes <= _INDICES_CACHE_BYTES else None
    plan = _INDICES.get(key) if key is not None else None
    if plan is None:
        order = np.argsort(idx, kind="stable")
        srt = idx[order]
        first = np.flatnonzero(np.r_[True, srt[1:] != srt[:-1]]) if srt.size else np.zeros(0, np.int64)
        k, nseg = idx.size, first.size
        packed = cupy.asarray(np.concatenate([order, srt[first], first, [k]]).astype(np.int64))
        plan = (packed[:k], packed[k:k + nseg], packed[k + nseg:], nseg)
        if key is not None:
            if len(_INDICES) >= _INDICES_MAX:
                _INDICES.pop(next(iter(_INDICES)))
            _INDICES[key] = plan
    return plan


#: About how many threads a captured (planless) scatter-add runs: each owns one column of a span of
#: target rows and reads every index (see ``scatter_add_rows_walk`` in src/index.cu).
PLANLESS_THREADS = 1 << 17


def _scatter_rows(mat, values, indices, name):
    t = ftype(mat.dtype, name)
    rows, cols = mat.shape[0], math.prod(mat.shape[1:])
    if _gemm.in_capture_scope():
        # A sort plan is computed on the host from the indices' values, which a captured graph
        # must not bake in: the sums run without one, in the same (index) order.
        return _scatter_rows_planless(mat, values, _upload_indices(indices, name), t)
    order, seg_row, start, nseg = _scatter_plan(indices, name)
    out = _contig(mat).copy()
    values = _contig(_dev(values).astype(mat.dtype, copy=False))
    launch("index", f"scatter_add_rows_kernel<{t}>", blocks(nseg * cols, _THREADS), _THREADS,
           (out, np.int64(rows), np.int64(cols), values, order, seg_row, start, np.int64(nseg)))
    return out


def _scatter_rows_planless(mat, values, idx, t):
    """Scatter-add with device indices and no sort plan: each thread walks the indices for one column
    of a span of target rows, adding in index order (bit-identical to the planned kernel)."""
    rows, cols = mat.shape[0], math.prod(mat.shape[1:])
    k = idx.shape[0]
    out = _contig(mat).copy()
    values = _contig(_dev(values).astype(mat.dtype, copy=False))
    if out.size and k:
        groups = min(rows, max(1, PLANLESS_THREADS // cols))
        span = -(-rows // groups)
        n = -(-rows // span) * cols
        launch("index", f"scatter_add_rows_walk<{t}>", blocks(n, _THREADS), _THREADS,
               (out, np.int64(rows), np.int64(cols), values, idx, np.int64(k), np.int64(span)))
    return out


def scatter_add(x, values, indices):
    return _scatter_rows(_dev(x), values, indices, "scatter_add")


def scatter_add_row(mat, row, i):
    check_indices([i], "scatter_add_row")
    mat = _dev(mat)
    out = _contig(mat).copy()
    i = int(i)
    if i < mat.shape[0]:
        cols = math.prod(mat.shape[1:])
        row = _contig(_dev(row).astype(mat.dtype, copy=False))
        launch("index", f"add_row_kernel<{ftype(mat.dtype, 'scatter_add_row')}>", blocks(cols, _THREADS),
               _THREADS, (out, np.int64(cols), row, np.int64(i)))
    return out


def scatter_add_rows(mat, values, indices):
    return _scatter_rows(_dev(mat), values, indices, "scatter_add_rows")
