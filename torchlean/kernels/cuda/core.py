"""CuPy implementation of the kernel surface (float32 and float64 on one GPU).

Same names and semantics as :mod:`torchlean.kernels.host` (the reference). Where one pass can
replace several, the kernel is ours (``src/*.cu``, compiled by NVRTC on first use): fused
activations and their backward, reductions, softmax rows, the seeds' layout and index kernels,
the counter-based generator and the optimizer steps. cuBLAS (through CuPy, strict float32:
see :mod:`torchlean.kernels.cuda`) does matmul, bmm and linear; plain arithmetic with NumPy
broadcasting uses CuPy's ufuncs. Index arguments are validated on the host with
:func:`torchlean.kernels.api.check_indices` before anything is launched.
"""

from __future__ import annotations

import builtins
import math
import struct

import cupy
import numpy as np

from ...errors import DeviceError, ShapeError
from ..api import check_indices, checked_device_indices
from . import build
from . import gemm as _gemm
from .build import blocks, etype, ftype, launch, launch_function

xp = cupy
SAFE_LOG_EPS = 1e-6

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


def _aligned(*arrays):
    """Broadcast to one shape and dtype (NumPy's rules), each C-contiguous: raw kernels index flat."""
    arrays = [_dev(a) for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    dtype = np.result_type(*(a.dtype for a in arrays))
    out = []
    for a in arrays:
        if a.dtype != dtype:
            a = a.astype(dtype)
        if a.shape != shape:
            a = cupy.broadcast_to(a, shape)
        out.append(_contig(a))
    return shape, dtype, out


# ---- the seeds' kernels ---------------------------------------------------------------------


def _split(n_out_threads: int, n: int, min_seg: int) -> tuple[int, int]:
    """(chunks, seg) so that n_out_threads * chunks fills the GPU, each segment >= min_seg long."""
    chunks = 1
    if n_out_threads < _fill_threads() and n > min_seg:
        chunks = builtins.min(-(-_fill_threads() // builtins.max(n_out_threads, 1)), -(-n // min_seg))
    seg = -(-n // chunks) if n else 0
    chunks = -(-n // seg) if seg else 1
    return chunks, seg


def _reduce_mid(x, outer: int, n: int, inner: int, op: int, name: str, scale: float = 1.0):
    """Reduce a contiguous float array viewed as (outer, n, inner) over n: returns (outer, inner) flat.

    op 0 sums (double accumulators) and multiplies by ``scale`` in the last pass; op 1 takes the
    NaN-propagating max.
    """
    t = ftype(x.dtype, name)
    if outer * inner == 0:
        return cupy.empty(outer * inner, dtype=x.dtype)
    if n == 0:
        if op == 1:
            raise ShapeError(f"{name}: max over an empty axis of {x.shape}")
        return cupy.zeros(outer * inner, dtype=x.dtype)
    if inner == 1 and outer == 1 and x.dtype == np.float32 and n >= (1 << 16) and x.data.ptr % 16 == 0:
        # One long row of float32: 16-byte loads, segments a multiple of 4 elements.
        chunks, seg = _split(_THREADS, n, _THREADS * 64)
        seg = -(-seg // 4) * 4
        chunks = -(-n // seg)
        part = cupy.empty(chunks, dtype=x.dtype)
        launch("reduce", f"reduce_vec4<{op}>", chunks, _THREADS,
               (x, part, np.int64(n), np.int64(seg), np.float64(scale if chunks == 1 else 1.0)))
        if chunks == 1:
            return part
        return _reduce_mid(part, 1, chunks, 1, op, name, scale)
    vec = 16 // x.dtype.itemsize
    if inner == 1 and n % vec == 0 and n <= 32 * vec and x.data.ptr % 16 == 0:
        # Short rows: lanes of a warp share a row with one 16-byte load each.
        nv = n // vec
        gw = 1 << (nv - 1).bit_length()
        f = build.function("reduce", f"reduce_rows_v<{t}, {op}>")
        out = cupy.empty(outer, dtype=x.dtype)
        warps = -(-outer // (4 * (32 // gw)))
        nb = builtins.min(-(-warps // (_THREADS // 32)), _resident_blocks(f, _THREADS))
        launch_function(f, (nb,), (_THREADS,), (x, out, np.int64(outer), np.int64(nv), np.int32(gw),
                                                 np.float64(scale)))
        return out
    if inner > 1 and inner % vec == 0 and x.data.ptr % 16 == 0:
        return _reduce_cols_v(x, outer, n, inner, op, t, name, scale, vec)
    if inner == 1:
        block_mode = n >= 1024
        # A row shorter than a warp gets the next power of two of lanes, so a warp still loads
        # 32 adjacent elements at a time.
        gw = 32 if n >= 32 else 1 << (n - 1).bit_length()
        gsize = _THREADS if block_mode else gw
        chunks, seg = _split(outer * gsize, n, gsize * 8)
        groups = outer * chunks
        part = cupy.empty(groups, dtype=x.dtype)
        b = "true" if block_mode else "false"
        nb = groups if block_mode else blocks(groups, _THREADS // gw)
        launch("reduce", f"reduce_rows<{t}, {op}, {b}>", nb, _THREADS,
               (x, part, np.int64(groups), np.int64(n), np.int64(chunks), np.int64(seg), np.int32(gw),
                np.float64(scale if chunks == 1 else 1.0)))
        if chunks == 1:
            return part
        return _reduce_mid(part, outer, chunks, 1, op, name, scale)
    chunks, seg = _split(outer * inner, n, 64)
    total = outer * chunks * inner
    part = cupy.empty(total, dtype=x.dtype)
    launch("reduce", f"reduce_cols<{t}, {op}>", blocks(total, _THREADS), _THREADS,
           (x, part, np.int64(outer), np.int64(n), np.int64(inner), np.int64(chunks), np.int64(seg),
            np.float64(scale if chunks == 1 else 1.0)))
    if chunks == 1:
        return part
    return _reduce_mid(part, outer, chunks, inner, op, name, scale)


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


def _reduce_cols_v(x, outer, n, inner, op, t, name, scale, vec):
    """Column reduction with 16-byte loads (inner a multiple of ``vec``, x aligned): (outer, inner) flat.

    Blocks are (bx, by) = (lanes across column vectors, rows in flight); the long axis is split
    into chunks so that one wave fills the GPU, and a second pass reduces the chunks."""
    nv = inner // vec
    bx = 32 if nv >= 32 else nv
    by = 1 << ((_THREADS // bx).bit_length() - 1)
    ncb = -(-nv // bx)
    f = build.function("reduce", f"reduce_cols_v<{t}, {op}>")
    fill = _resident_blocks(f, bx * by)
    chunks = 1
    # Up to 32 rows a thread stay in one pass: a second launch costs more than those loads, and
    # so does it below 512 KiB (a bias gradient of a small layer: launch-bound either way).
    # Rounded down: a few blocks past one wave would run alone at the end, as long as a wave.
    if n > 32 * by and x.nbytes > (1 << 19):
        chunks = builtins.max(1, builtins.min(fill // (outer * ncb), -(-n // (8 * by))))
    seg = -(-n // chunks)
    chunks = -(-n // seg)
    part = cupy.empty(outer * chunks * inner, dtype=x.dtype)
    launch_function(f, (outer * chunks * ncb,), (bx, by),
                    (x, part, np.int64(n), np.int64(inner), np.int64(chunks), np.int64(seg), np.int64(ncb),
                     np.float64(scale if chunks == 1 else 1.0)))
    if chunks == 1:
        return part
    return _reduce_mid(part, outer, chunks, inner, op, name, scale)


def _norm_axes(axes, ndim):
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < builtins.max(ndim, 1):
            raise ShapeError(f"reduction: axis {a} out of range for {ndim}-d input")
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(set(out)))


def _reduce(x, axes, keepdim, op, name, scale=1.0):
    """Reduce over ``axes`` by runs of adjacent axes, last run first (each run is one (outer, n, inner)).

    Sums are multiplied by ``scale`` in the very last pass.
    """
    x = _dev(x)
    if x.dtype.kind not in "f":
        # Integer and bool data take CuPy's reduction (NumPy's dtype rules for them).
        f = cupy.sum if op == 0 else cupy.max
        return cupy.asarray(f(x, axis=None if axes is None else axes, keepdims=keepdim))
    shape = tuple(x.shape)
    ax = _norm_axes(axes, len(shape))
    keep_shape = tuple(1 if i in ax else d for i, d in enumerate(shape))
    if not ax:
        return x * _c(x, scale) if scale != 1.0 else x.copy()
    runs = []
    for a in ax:
        if runs and runs[-1][1] == a - 1:
            runs[-1][1] = a
        else:
            runs.append([a, a])
    cur = list(shape)
    y = _contig(x)
    for r, (lo, hi) in enumerate(reversed(runs)):
        outer = math.prod(cur[:lo])
        n = math.prod(cur[lo:hi + 1])
        inner = math.prod(cur[hi + 1:])
        y = _reduce_mid(y, outer, n, inner, op, name, scale if r == len(runs) - 1 else 1.0)
        cur[lo:hi + 1] = [1]
    out_shape = keep_shape if keepdim else tuple(d for i, d in enumerate(shape) if i not in ax)
    return y.reshape(out_shape)


def reduce_sum_axis0(x):
    return _reduce(x, (0,), False, 0, "reduce_sum_axis0")


def reduce_sum_axis1(x):
    return _reduce(x, (1,), False, 0, "reduce_sum_axis1")


def reduce_max_axis0(x):
    return _reduce(x, (0,), False, 1, "reduce_max_axis0")


def reduce_max_axis1(x):
    return _reduce(x, (1,), False, 1, "reduce_max_axis1")


def reduce_sum_axis(x, axis):
    return _reduce(x, (axis,), False, 0, "reduce_sum_axis")


def concat1d(a, b):
    a, b = _contig(_dev(a)), _contig(_dev(b))
    dtype = np.result_type(a.dtype, b.dtype)
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    out = cupy.empty(a.size + b.size, dtype=dtype)
    launch("layout", f"concat2<{etype(dtype)}>", blocks(out.size, _THREADS), _THREADS,
           (a, np.int64(a.size), b, np.int64(b.size), out))
    return out


def slice1d(x, start, length):
    x = _contig(_dev(x))
    # Python slicing clips to the array, and so does the host kernel.
    start = builtins.min(builtins.max(int(start), 0), x.shape[0])
    length = builtins.max(builtins.min(int(length), x.shape[0] - start), 0)
    out = cupy.empty((length,) + x.shape[1:], dtype=x.dtype)
    n = out.size
    inner = math.prod(x.shape[1:])
    launch("layout", f"copy_range<{etype(x.dtype)}>", blocks(n, _THREADS), _THREADS,
           (x, np.int64(start * inner), out, np.int64(n)))
    return out


def broadcast_vec_to_rows(v, rows):
    v = _contig(_dev(v))
    cols = v.shape[0]
    out = cupy.empty((int(rows), cols), dtype=v.dtype)
    launch("layout", f"vec_to_rows<{etype(v.dtype)}>", blocks(out.size, _THREADS), _THREADS,
           (v, out, np.int64(out.size), np.int64(cols)))
    return out


def broadcast_vec_to_cols(v, cols):
    v = _contig(_dev(v))
    out = cupy.empty((v.shape[0], int(cols)), dtype=v.dtype)
    launch("layout", f"vec_to_cols<{etype(v.dtype)}>", blocks(out.size, _THREADS), _THREADS,
           (v, out, np.int64(out.size), np.int64(cols)))
    return out


_META: dict[tuple, object] = {}


def _broadcast_meta(in_dims, out_dims, axis_map):
    """Device array [out_dims..., input stride per output axis...], uploaded once per plan."""
    key = (in_dims, out_dims, axis_map)
    m = _META.get(key)
    if m is None:
        in_strides = [0] * len(in_dims)
        s = 1
        for k in range(len(in_dims) - 1, -1, -1):
            in_strides[k] = s
            s *= in_dims[k]
        strides = [0 if a == 0 or (in_dims[a - 1] == 1 and d != 1) else in_strides[a - 1]
                   for a, d in zip(axis_map, out_dims)]
        if len(_META) > 4096:
            _META.clear()
        m = _META[key] = cupy.asarray(np.array(list(out_dims) + strides, dtype=np.int64))
    return m


def broadcast_to(x, in_dims, out_dims, axis_map):
    in_dims, out_dims, axis_map = tuple(map(int, in_dims)), tuple(map(int, out_dims)), tuple(map(int, axis_map))
    x = _contig(_dev(x))
    out = cupy.empty(out_dims, dtype=x.dtype)
    if out.size == 0:
        return out
    meta = _broadcast_meta(in_dims, out_dims, axis_map)
    launch("layout", f"broadcast_nd<{etype(x.dtype)}>", blocks(out.size, _THREADS), _THREADS,
           (x, out, np.int64(out.size), np.int32(len(out_dims)), meta))
    return out


def reduce_from_broadcast_to(g, in_dims, out_dims, axis_map):
    in_dims, out_dims = tuple(map(int, in_dims)), tuple(map(int, out_dims))
    view = tuple(1 if a == 0 else in_dims[a - 1] for a in axis_map)
    axes = tuple(j for j, (v, o) in enumerate(zip(view, out_dims)) if v == 1 and o != 1)
    g = _dev(g).reshape(out_dims)
    if not axes:
        return _contig(g).copy().reshape(in_dims)
    return _reduce(g, axes, True, 0, "reduce_from_broadcast_to").reshape(in_dims)


def _swap(x, A, B, C, D):
    """x viewed as (A, B, C, D) -> contiguous (A, C, B, D)."""
    out = cupy.empty(x.size, dtype=x.dtype)
    if out.size == 0:
        return out
    e = etype(x.dtype)
    if D == 1:
        tr, tc = blocks(B, 32), blocks(C, 32)
        launch("layout", f"transpose_tiled<{e}>", A * tr * tc, (32, 8),
               (x, out, np.int64(B), np.int64(C), np.int64(tr), np.int64(tc)))
    else:
        launch("layout", f"swap_middle<{e}>", blocks(out.size, _THREADS), _THREADS,
               (x, out, np.int64(A), np.int64(B), np.int64(C), np.int64(D)))
    return out


def swap_adjacent_at_depth(x, dims, depth):
    dims = tuple(map(int, dims))
    x = _contig(_dev(x))
    if depth < 0 or depth + 1 >= len(dims):
        return x.copy()
    A, B, C, D = math.prod(dims[:depth]), dims[depth], dims[depth + 1], math.prod(dims[depth + 2:])
    out_dims = dims[:depth] + (C, B) + dims[depth + 2:]
    return _swap(x, A, B, C, D).reshape(out_dims)


def transpose2d(x):
    x = _contig(_dev(x))
    r, c = x.shape
    return _swap(x, 1, r, c, 1).reshape(c, r)


def bmm(a, b):
    return _gemm.matmul(a, b)


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
    idx = np.ascontiguousarray(check_indices(indices, op), dtype=np.int64)
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


#: Most rows * indices for which a captured scatter-add (no sort plan) is allowed.
SCAN_SCATTER_MAX = 1 << 26


def _scatter_rows(mat, values, indices, name):
    t = ftype(mat.dtype, name)
    rows, cols = mat.shape[0], math.prod(mat.shape[1:])
    if _gemm.in_capture_scope():
        # A sort plan is computed on the host from the indices' values, which a captured graph
        # must not bake in: every target element scans the indices instead (same summation order).
        idx = _upload_indices(indices, name)
        k = idx.shape[0]
        if rows * k > SCAN_SCATTER_MAX:
            raise DeviceError(f"{name}: {rows} rows x {k} indices is too large to scatter inside a captured "
                              f"CUDA graph (at most {SCAN_SCATTER_MAX}); run this step eagerly")
        out = _contig(mat).copy()
        values = _contig(_dev(values).astype(mat.dtype, copy=False))
        launch("index", f"scatter_add_rows_scan<{t}>", blocks(rows * cols, _THREADS), _THREADS,
               (out, np.int64(rows), np.int64(cols), values, idx, np.int64(k)))
        return out
    order, seg_row, start, nseg = _scatter_plan(indices, name)
    out = _contig(mat).copy()
    values = _contig(_dev(values).astype(mat.dtype, copy=False))
    launch("index", f"scatter_add_rows_kernel<{t}>", blocks(nseg * cols, _THREADS), _THREADS,
           (out, np.int64(rows), np.int64(cols), values, order, seg_row, start, np.int64(nseg)))
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


# ---- memory and transfer --------------------------------------------------------------------


def zeros(shape, dtype):
    return cupy.zeros(shape, dtype=dtype)


def full(shape, value, dtype):
    return cupy.full(shape, value, dtype=dtype)


def empty(shape, dtype):
    return cupy.empty(shape, dtype=dtype)


def copy(x):
    return _dev(x).copy(order="C")


def from_host(a, dtype):
    if isinstance(a, cupy.ndarray):
        return _contig(a.astype(dtype, copy=False))
    # NumPy's float64 -> float32 cast rounds to nearest even; the upload then copies bytes.
    return cupy.asarray(np.asarray(a, dtype=dtype, order="C"))


def to_host(x):
    if isinstance(x, cupy.ndarray):
        return cupy.asnumpy(x)
    return np.array(x, copy=True)


def astype(x, dtype):
    return x.astype(dtype, copy=False)


def ascontiguous(x):
    return _contig(x)


# ---- elementwise ----------------------------------------------------------------------------

_BIN_FN: dict = {}
_BIN_L: dict = {}   # (dtype, op, mode) -> Launcher of binary_kernel
_OP_ADD, _OP_SUB, _OP_MUL, _OP_DIV = range(4)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _bin_fn(dtype, op, mode):
    key = (dtype, op, mode)
    f = _BIN_FN.get(key)
    if f is None:
        f = _BIN_FN[key] = build.function("fused", f"binary_kernel<{build._FLOAT_NAME[dtype]}, {op}, {mode}>")
    return f


def _bin_launcher(dtype, op, mode):
    L = _BIN_L[(dtype, op, mode)] = build.Launcher(_bin_fn(dtype, op, mode), "PPPqq")
    return L


def _bin_plan(a, b):
    """(mode, out shape, cols) of a one-launch binary op on float arrays of one dtype, else None.

    Modes: 0 same shape, 1 b holds one element, 2 a holds one element, 3 b a row over a's last axis."""
    sa, sb = a.shape, b.shape
    if sa == sb:
        return (0, sa, 1) if a._c_contiguous and b._c_contiguous else None
    if b.size == 1 and len(sb) <= len(sa):
        return (1, sa, 1) if a._c_contiguous else None
    if a.size == 1 and len(sa) <= len(sb):
        return (2, sb, 1) if b._c_contiguous else None
    if len(sb) == 1 and sa and sa[-1] == sb[0] and a._c_contiguous and b._c_contiguous:
        return (3, sa, sb[0])
    return None


def _binary(a, b, op, ufunc):
    """NumPy-broadcast a (op) b: same-dtype float arrays in the common layouts take one raw launch,
    everything else (mixed dtypes, scalars, general broadcasting) CuPy's ufunc."""
    if type(a) is _ND and type(b) is _ND:
        dt = a.dtype
        if (dt is b.dtype or dt == b.dtype) and (dt is _F32 or dt == _F64 or dt == _F32):
            sa = a.shape
            if sa == b.shape and a._c_contiguous and b._c_contiguous:
                mode, shape, cols = 0, sa, 1
            else:
                plan = _bin_plan(a, b)
                if plan is None:
                    return ufunc(a, b)
                mode, shape, cols = plan
            out = _ND(shape, dt)
            n = out.size
            if n:
                L = _BIN_L.get((dt, op, mode)) or _bin_launcher(dt, op, mode)
                L((n + _EW_PER_BLOCK - 1) // _EW_PER_BLOCK, _THREADS, a.data.ptr, b.data.ptr, out.data.ptr, n, cols)
            return out
    return ufunc(a, b)


def add(a, b):
    return _binary(a, b, _OP_ADD, cupy.add)


def sub(a, b):
    return _binary(a, b, _OP_SUB, cupy.subtract)


def mul(a, b):
    return _binary(a, b, _OP_MUL, cupy.multiply)


def div(a, b):
    return _binary(a, b, _OP_DIV, cupy.divide)


maximum, minimum, neg, abs, sqrt = cupy.maximum, cupy.minimum, cupy.negative, cupy.abs, cupy.sqrt
exp, log, sin, cos, tanh, sign = cupy.exp, cupy.log, cupy.sin, cupy.cos, cupy.tanh, cupy.sign


def where(cond, a, b):
    # Python scalars stay scalars: NumPy-2 promotion treats them as weak, 0-d arrays not.
    def arr(v):
        return _dev(v) if isinstance(v, (np.ndarray, np.generic)) else v
    return cupy.where(arr(cond), arr(a), arr(b))


def _c(x, c):
    """A Python scalar as x's dtype, so float32 never promotes to float64."""
    return x.dtype.type(c)


def scale(x, c):
    return x * _c(x, c)


def add_scalar(x, c):
    return x + _c(x, c)


def inv(x):
    return cupy.reciprocal(x)


_EW_FN: dict = {}
_EW_L: dict = {}    # (kind, dtype, op) -> Launcher


def _ew_fn(kind, dtype, op, name):
    """The compiled ``unary_kernel`` / ``bwd_kernel`` of (dtype, op), cached by key (no name building)."""
    key = (kind, dtype, op)
    f = _EW_FN.get(key)
    if f is None:
        f = _EW_FN[key] = build.function("elementwise", f"{kind}<{ftype(dtype, name)}, {op}>")
    return f


def _ew_launcher(kind, dtype, op, name):
    f = _ew_fn(kind, dtype, op, name)
    t = "f" if dtype == _F32 else "d"
    fmt = "PPq" + 2 * t if kind == "unary_kernel" else "PPPq" + 2 * t + "i"
    L = _EW_L[(kind, dtype, op)] = build.Launcher(f, fmt)
    return L


def _params(dt, p0, p1):
    """Scalar parameters as the kernel's type would hold them (float32 overflow gives inf, as a cast)."""
    T = dt.type
    return float(T(p0)), float(T(p1))


def _unary(x, op, name, p0=0.0, p1=0.0):
    if type(x) is not _ND:
        x = _dev(x)
    if not x._c_contiguous:
        x = cupy.ascontiguousarray(x)
    dt = x.dtype
    L = _EW_L.get(("unary_kernel", dt, op)) or _ew_launcher("unary_kernel", dt, op, name)
    y = _ND(x.shape, dt)
    n = x.size
    if n:
        if p0 or p1:
            p0, p1 = _params(dt, p0, p1)
        L((n + _EW_PER_BLOCK - 1) // _EW_PER_BLOCK, _THREADS, x.data.ptr, y.data.ptr, n, p0, p1)
    return y


# Operation codes of src/elementwise.cu.
_U_RELU, _U_SIGMOID, _U_SOFTPLUS, _U_SILU, _U_GELU_ERF, _U_GELU_TANH, _U_SAFE_LOG, _U_CLAMP, _U_POW = range(9)
(_B_RELU, _B_ABS, _B_SQRT, _B_SIGMOID, _B_TANH, _B_SOFTPLUS, _B_SILU, _B_GELU_ERF, _B_GELU_TANH,
 _B_SAFE_LOG, _B_CLAMP, _B_POW) = range(12)


def pow_scalar(x, p):
    if p == 2:
        return x * x
    return _unary(x, _U_POW, "pow_scalar", p)


def relu(x):
    return _unary(x, _U_RELU, "relu")


def sigmoid(x):
    return _unary(x, _U_SIGMOID, "sigmoid")


def softplus(x):
    return _unary(x, _U_SOFTPLUS, "softplus")


def silu(x):
    return _unary(x, _U_SILU, "silu")


def gelu(x, approximate="none"):
    return _unary(x, _U_GELU_TANH if approximate == "tanh" else _U_GELU_ERF, "gelu")


def safe_log(x):
    return _unary(x, _U_SAFE_LOG, "safe_log")


def clamp(x, lo, hi):
    return _unary(x, _U_CLAMP, "clamp", -math.inf if lo is None else lo, math.inf if hi is None else hi)


_CMP = {"lt": cupy.less, "le": cupy.less_equal, "gt": cupy.greater, "ge": cupy.greater_equal,
        "eq": cupy.equal, "ne": cupy.not_equal}


def compare(a, b, op):
    return _CMP[op](a, b)


# ---- fused backward of elementwise ops ------------------------------------------------------


def _bwd(a, g, op, name, p0=0.0, p1=0.0, flags=0):
    if (type(a) is _ND and type(g) is _ND and a.dtype == g.dtype and a.shape == g.shape and a._c_contiguous
            and g._c_contiguous):
        shape, dtype = a.shape, a.dtype
    else:
        shape, dtype, (a, g) = _aligned(a, g)
    L = _EW_L.get(("bwd_kernel", dtype, op)) or _ew_launcher("bwd_kernel", dtype, op, name)
    out = _ND(shape, dtype)
    n = out.size
    if n:
        if p0 or p1:
            p0, p1 = _params(dtype, p0, p1)
        L((n + _EW_PER_BLOCK - 1) // _EW_PER_BLOCK, _THREADS, a.data.ptr, g.data.ptr, out.data.ptr, n, p0, p1,
          flags)
    return out


def relu_bwd(x, g):
    return _bwd(x, g, _B_RELU, "relu_bwd")


def abs_bwd(x, g):
    return _bwd(x, g, _B_ABS, "abs_bwd")


def sqrt_bwd(y, g):
    return _bwd(y, g, _B_SQRT, "sqrt_bwd")


def sigmoid_bwd(y, g):
    return _bwd(y, g, _B_SIGMOID, "sigmoid_bwd")


def tanh_bwd(y, g):
    return _bwd(y, g, _B_TANH, "tanh_bwd")


def softplus_bwd(x, g):
    return _bwd(x, g, _B_SOFTPLUS, "softplus_bwd")


def silu_bwd(x, g):
    return _bwd(x, g, _B_SILU, "silu_bwd")


def gelu_bwd(x, g, approximate="none"):
    return _bwd(x, g, _B_GELU_TANH if approximate == "tanh" else _B_GELU_ERF, "gelu_bwd")


def safe_log_bwd(x, g):
    return _bwd(x, g, _B_SAFE_LOG, "safe_log_bwd")


def clamp_bwd(x, g, lo, hi):
    flags = (lo is not None) | ((hi is not None) << 1)
    return _bwd(x, g, _B_CLAMP, "clamp_bwd", 0.0 if lo is None else lo, 0.0 if hi is None else hi, flags)


def minmax_bwd(a, b, g, is_max):
    shape, dtype, (a, b, g) = _aligned(a, b, g)
    t = ftype(dtype, "minmax_bwd")
    ga = cupy.empty(shape, dtype=dtype)
    gb = cupy.empty(shape, dtype=dtype)
    launch("elementwise", f"minmax_bwd_kernel<{t}>", blocks(ga.size, _EW_PER_BLOCK), _THREADS,
           (a, b, g, ga, gb, np.int64(ga.size), np.int32(bool(is_max))))
    return ga, gb


def pow_bwd(x, g, p):
    if p == 0:
        shape, dtype, _ = _aligned(x, g)
        return cupy.zeros(shape, dtype=dtype)
    return _bwd(x, g, _B_POW, "pow_bwd", p, 0.0, 1 if p == 2 else 0)


# ---- reductions -----------------------------------------------------------------------------


def sum(x, axes=None, keepdim=False):  # noqa: A001 - the surface's name
    return _reduce(x, axes, keepdim, 0, "sum")


def mean(x, axes=None, keepdim=False):
    x = _dev(x)
    if x.dtype.kind != "f":
        return cupy.asarray(cupy.mean(x, axis=axes, keepdims=keepdim))
    ax = _norm_axes(axes, x.ndim)
    count = math.prod(x.shape[a] for a in ax)
    if count == 0:  # 0 / 0: NaN, as NumPy's mean gives
        return _reduce(x, axes, keepdim, 0, "mean") * _c(x, math.nan)
    # The division rides on the last reduction pass (in double), not a separate launch.
    return _reduce(x, axes, keepdim, 0, "mean", 1.0 / count)


def amax(x, axis, keepdim=False):
    return _reduce(x, axis, keepdim, 1, "amax")


def max_bwd(x, y_keep, g_keep, axis):
    x = _contig(_dev(x))
    ax = _norm_axes(axis, x.ndim)[0] if x.ndim else 0
    shape = x.shape
    outer, n, inner = math.prod(shape[:ax]), (shape[ax] if shape else 1), math.prod(shape[ax + 1:])
    g = _dev(g_keep)
    keep_shape = shape[:ax] + (1,) + shape[ax + 1:] if shape else ()
    g = _contig(cupy.broadcast_to(g, keep_shape).astype(x.dtype, copy=False))
    out = cupy.zeros(shape, dtype=x.dtype)
    if outer * inner and n:
        launch("reduce", f"max_bwd_kernel<{ftype(x.dtype, 'max_bwd')}>", blocks(outer * inner, _THREADS),
               _THREADS, (x, g, out, np.int64(outer), np.int64(n), np.int64(inner)))
    return out


def sum_to_shape(g, shape):
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape) if d == 1 and g.shape[lead + k] != 1)
    return _reduce(g, axes, False, 0, "sum_to_shape").reshape(shape)


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


# ---- softmax family and losses --------------------------------------------------------------


def _rows(x):
    cols = x.shape[-1] if x.ndim else 1
    rows = x.size // cols if cols else 0
    return rows, cols


def _row_launch(kernel, t, rows, cols, args, extra=""):
    """One warp per row up to 1024 columns (eight rows per block), else one 512-thread block per row."""
    if cols <= 1024:
        launch("softmax", f"{kernel}<{t}{extra}, false>", blocks(rows, _THREADS // 32), _THREADS, args)
    else:
        launch("softmax", f"{kernel}<{t}{extra}, true>", rows, 512, args)


def _row_block(cols: int, top: int):
    """(threads, N) for a block that holds a row of ``cols`` in registers, N <= ``top`` per thread;
    None when the row is too long. Blocks stay small (N near 8) so that many fit on a multiprocessor."""
    threads = builtins.min(builtins.max(1 << (-(-cols // 8) - 1).bit_length(), 64), 1024)
    n = 1 << (-(-cols // threads) - 1).bit_length()
    n = builtins.max(n, build.REG_BLOCK[0])
    return (threads, n) if n <= top else None


def _reg_launch(kernel, t, rows, cols, args, mode) -> bool:
    """Launch the register-resident row kernel when the row fits; False when it does not.

    Up to 256 columns a warp holds a row (eight rows per block); longer rows get a block of
    64 to 1024 threads with N elements each.
    """
    if cols <= 32 * build.REG_WARP[-1]:
        n = next(k for k in build.REG_WARP if 32 * k >= cols)
        launch("softmax", f"{kernel}<{t}, {mode}, {n}, false>", blocks(rows, _THREADS // 32), _THREADS, args)
        return True
    tn = _row_block(cols, build.REG_BLOCK_MAX[(kernel, t)])
    if tn is None:
        return False
    threads, n = tn
    launch("softmax", f"{kernel}<{t}, {mode}, {n}, true>", rows, threads, args)
    return True


def _softmax(x, mode, name):
    x = _contig(_dev(x))
    t = ftype(x.dtype, name)
    y = cupy.empty(x.shape, dtype=x.dtype)
    rows, cols = _rows(x)
    if rows and cols:
        args = (x, y, np.int64(rows), np.int64(cols))
        if not _reg_launch("softmax_reg", t, rows, cols, args, mode):
            _row_launch("softmax_fwd", t, rows, cols, args, f", {mode}")
    return y


def softmax(x):
    return _softmax(x, 0, "softmax")


def log_softmax(x):
    return _softmax(x, 1, "log_softmax")


def _softmax_bwd(y, g, mode, name):
    shape, dtype, (y, g) = _aligned(y, g)
    t = ftype(dtype, name)
    out = cupy.empty(shape, dtype=dtype)
    rows, cols = _rows(out)
    if rows and cols:
        args = (y, g, out, np.int64(rows), np.int64(cols))
        if not _reg_launch("softmax_bwd_reg", t, rows, cols, args, mode):
            _row_launch("softmax_bwd", t, rows, cols, args, f", {mode}")
    return out


def softmax_bwd(y, g):
    return _softmax_bwd(y, g, 0, "softmax_bwd")


def log_softmax_bwd(y, g):
    return _softmax_bwd(y, g, 1, "log_softmax_bwd")


def masked_softmax(x, mask):
    x, mask = _dev(x), _dev(mask)
    shape = np.broadcast_shapes(x.shape, mask.shape)
    x = _contig(cupy.broadcast_to(x, shape))
    keep = _contig(cupy.broadcast_to(mask != 0, shape))
    t = ftype(x.dtype, "masked_softmax")
    y = cupy.empty(shape, dtype=x.dtype)
    rows, cols = _rows(y)
    if rows and cols:
        _row_launch("masked_softmax_fwd", t, rows, cols, (x, keep, y, np.int64(rows), np.int64(cols)))
    return y


def mse_loss(yhat, target):
    d = _dev(yhat) - _dev(target)
    if d.size == 0:
        return cupy.asarray(np.nan, dtype=yhat.dtype)
    return (cupy.vdot(d, d) / _c(d, d.size)).astype(yhat.dtype, copy=False)


def mse_loss_bwd(yhat, target, g):
    d = (_dev(yhat) - _dev(target)) * (_c(yhat, 2.0 / builtins.max(yhat.size, 1)) * _dev(g).astype(yhat.dtype))
    return d, -d


def _nll_weights(target, weight, ignore_index, dtype):
    n = target.shape[0]
    ign = target == ignore_index
    if weight is None:
        w = cupy.ones(n, dtype=dtype)
    else:
        w = _dev(weight)[cupy.where(ign, 0, target)].astype(dtype)
    return cupy.where(ign, dtype.type(0), w)


def _nll_fused(logp, target, weight):
    """(logp, target, weight) ready for the fused NLL kernels, or None for the generic path."""
    logp, target = _dev(logp), _dev(target)
    if (logp.ndim != 2 or logp.dtype not in build._FLOAT_NAME or target.dtype != np.int64 or target.ndim != 1
            or target.shape[0] != logp.shape[0] or logp.shape[1] == 0):
        return None
    if weight is not None:
        weight = _dev(weight)
        if weight.dtype != logp.dtype or weight.shape != (logp.shape[1],):
            return None
        weight = _contig(weight)
    return _contig(logp), _contig(target), weight


def nll_loss(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    f = _nll_fused(logp, target, weight)
    if f is not None:
        lp, t, w = f
        M, C = lp.shape
        ty = ftype(lp.dtype, "nll_loss")
        mode = {"none": 0, "sum": 1}.get(reduction, 2)
        out = cupy.empty((M,) if mode == 0 else (), dtype=lp.dtype)
        args = (lp, t, w, out, np.int64(M), np.int64(C), np.int64(ignore_index), np.int32(mode),
                np.int32(w is not None))
        if mode == 0:
            launch("fused", f"nll_fwd_kernel<{ty}>", blocks(M, _THREADS), _THREADS, args)
        else:
            launch("fused", f"nll_fwd_kernel<{ty}>", 1, 1024, args)
        return out
    return _nll_loss_generic(logp, target, weight, ignore_index, reduction)


def _nll_loss_generic(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    logp = _dev(logp)
    target = _dev(target)
    n = logp.shape[0]
    w = _nll_weights(target, weight, ignore_index, logp.dtype)
    safe_t = cupy.where(target == ignore_index, 0, target)
    picked = -logp[cupy.arange(n), safe_t] * w
    if reduction == "none":
        return picked
    if reduction == "sum":
        return cupy.asarray(picked.sum(), dtype=logp.dtype)
    return cupy.asarray(picked.sum() / w.sum(), dtype=logp.dtype)


def nll_loss_bwd(logp, target, weight, ignore_index, reduction, g):
    f = _nll_fused(logp, target, weight)
    if f is not None:
        lp, t, w = f
        M, C = lp.shape
        g = _contig(_dev(g).astype(lp.dtype, copy=False))
        if g.size == (M if reduction == "none" else 1):
            ty = ftype(lp.dtype, "nll_loss_bwd")
            out = cupy.empty((M, C), dtype=lp.dtype)
            if reduction not in ("none", "sum"):
                scale = cupy.empty((), dtype=lp.dtype)
                launch("fused", f"nll_scale_kernel<{ty}>", 1, 1024,
                       (t, w, g, scale, np.int64(M), np.int64(C), np.int64(ignore_index), np.int32(w is not None)))
                g = scale
            launch("fused", f"nll_bwd_kernel<{ty}>", blocks(M * C, _THREADS), _THREADS,
                   (t, w, g, out, np.int64(M), np.int64(C), np.int64(ignore_index), np.int32(w is not None),
                    np.int32(reduction == "none")))
            return out
    return _nll_loss_bwd_generic(logp, target, weight, ignore_index, reduction, g)


def _nll_loss_bwd_generic(logp, target, weight, ignore_index, reduction, g):
    logp = _dev(logp)
    target = _dev(target)
    g = _dev(g).astype(logp.dtype, copy=False)
    n = logp.shape[0]
    w = _nll_weights(target, weight, ignore_index, logp.dtype)
    safe_t = cupy.where(target == ignore_index, 0, target)
    coef = -w * g if reduction in ("none", "sum") else -w * (g / w.sum())
    out = cupy.zeros_like(logp)
    # Each row receives exactly one entry, so a plain scatter is the host's add.at.
    out[cupy.arange(n), safe_t] = coef.astype(logp.dtype, copy=False)
    return out


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


# ---- optimizer steps (in place, one launch each) --------------------------------------------


class _InPlace:
    """Contiguous views of state arrays for a raw kernel; a non-contiguous one is written back after."""

    def __init__(self, *arrays):
        self.orig = arrays
        self.work = [None if a is None else _contig(a) for a in arrays]
        self.copied = any(w is not a for a, w in zip(arrays, self.work))

    def finish(self):
        if self.copied:
            for a, w in zip(self.orig, self.work):
                if a is not None and w is not a:
                    a[...] = w


def _opt_args(p, g, *state):
    t = ftype(p.dtype, "optimizer step")
    if not (type(g) is cupy.ndarray and g.shape == p.shape and g.dtype == p.dtype and g._c_contiguous):
        g = _contig(cupy.broadcast_to(_dev(g), p.shape).astype(p.dtype, copy=False))
    io = _InPlace(p, *state)
    return t, g, io, np.int64(p.size), p.dtype.type


def sgd_step(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, first):
    t, g, io, n, T = _opt_args(p, g, buf)
    pw, bw = io.work
    flags = (1 if weight_decay else 0) | (2 if momentum else 0) | (4 if nesterov else 0) | (8 if first else 0)
    launch("optim", f"sgd_kernel<{t}>", blocks(p.size, _THREADS), _THREADS,
           (pw, g, pw if bw is None else bw, n, T(lr), T(momentum or 0), T(1 - (dampening or 0)), T(weight_decay or 0),
            np.int32(flags)))
    io.finish()


def adam_step(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled, vmax=None):
    t, g, io, n, T = _opt_args(p, g, m, v, vmax)
    pw, mw, vw, xw = io.work
    flags = (4 if vmax is not None else 0)
    if weight_decay:
        flags |= 2 if decoupled else 1
    weight_decay = weight_decay or 0
    bc1 = 1 - beta1 ** step
    bc2 = 1 - beta2 ** step
    launch("optim", f"adam_kernel<{t}>", blocks(p.size, _THREADS), _THREADS,
           (pw, g, mw, vw, vw if xw is None else xw, n, T(beta1), T(1 - beta1), T(beta2), T(1 - beta2),
            T(weight_decay), T(1 - lr * weight_decay), T(math.sqrt(bc2)), T(eps), T(lr / bc1), np.int32(flags)))
    io.finish()


def adagrad_step(p, g, sum_sq, step, lr, lr_decay, weight_decay, eps):
    t, g, io, n, T = _opt_args(p, g, sum_sq)
    pw, sw = io.work
    clr = lr / (1 + (step - 1) * lr_decay)
    launch("optim", f"adagrad_kernel<{t}>", blocks(p.size, _THREADS), _THREADS,
           (pw, g, sw, n, T(clr), T(weight_decay or 0), T(eps), np.int32(1 if weight_decay else 0)))
    io.finish()


def rmsprop_step(p, g, sq_avg, buf, grad_avg, lr, alpha, eps, weight_decay, momentum):
    t, g, io, n, T = _opt_args(p, g, sq_avg, buf, grad_avg)
    pw, sw, bw, gw = io.work
    momentum, weight_decay = momentum or 0, weight_decay or 0
    use_mom = momentum > 0
    flags = (1 if weight_decay else 0) | (2 if grad_avg is not None else 0) | (4 if use_mom else 0)
    launch("optim", f"rmsprop_kernel<{t}>", blocks(p.size, _THREADS), _THREADS,
           (pw, g, sw, bw if use_mom else sw, sw if gw is None else gw, n, T(lr), T(alpha), T(1 - alpha), T(eps),
            T(weight_decay), T(momentum), np.int32(flags)))
    io.finish()


def adadelta_step(p, g, sq_avg, acc_delta, lr, rho, eps, weight_decay):
    t, g, io, n, T = _opt_args(p, g, sq_avg, acc_delta)
    pw, sw, aw = io.work
    launch("optim", f"adadelta_kernel<{t}>", blocks(p.size, _THREADS), _THREADS,
           (pw, g, sw, aw, n, T(lr), T(rho), T(1 - rho), T(eps), T(weight_decay or 0),
            np.int32(1 if weight_decay else 0)))
    io.finish()


_MT = build.MULTI_TENSORS


def adam_step_multi(ps, gs, ms, vs, vmaxs, steps, lr, beta1, beta2, eps, weight_decay, decoupled, maximize=False):
    """``adam_step`` of many parameters, one launch per run of up to ``MULTI_TENSORS`` of them.

    Lists are parallel (``vmaxs`` entries None without AMSGrad; ``steps`` the per-parameter step
    counts: parameters of one step count share a launch). ``maximize`` negates every gradient.
    Each element's update is that of ``adam_step``, bit for bit. A parameter whose arrays are
    not contiguous takes ``adam_step`` itself."""
    runs: dict = {}
    for i, (p, m, v, x) in enumerate(zip(ps, ms, vs, vmaxs)):
        g = gs[i]
        if not (type(g) is _ND and g.shape == p.shape and g.dtype == p.dtype and g._c_contiguous):
            g = _contig(cupy.broadcast_to(_dev(g), p.shape).astype(p.dtype, copy=False))
        if (p.dtype in build._FLOAT_NAME and p._c_contiguous and m._c_contiguous and v._c_contiguous
                and (x is None or x._c_contiguous)):
            if p.size:
                runs.setdefault((p.dtype, steps[i], x is not None), []).append((p, g, m, v, x))
        else:
            adam_step(p, -g if maximize else g, m, v, steps[i], lr, beta1, beta2, eps, weight_decay, decoupled, x)
    for (dtype, step, ams), items in runs.items():
        T = dtype.type
        flags = (4 if ams else 0) | (8 if maximize else 0)
        if weight_decay:
            flags |= 2 if decoupled else 1
        wd = weight_decay or 0
        bc1 = 1 - beta1 ** step
        bc2 = 1 - beta2 ** step
        scalars = (T(beta1), T(1 - beta1), T(beta2), T(1 - beta2), T(wd), T(1 - lr * wd), T(math.sqrt(bc2)),
                   T(eps), T(lr / bc1), np.int32(flags))
        f = build.function("optim", f"adam_multi_kernel<{build._FLOAT_NAME[dtype]}>")
        for lo in range(0, len(items), _MT):
            chunk = items[lo:lo + _MT]
            ptrs = [[0] * _MT for _ in range(5)]
            sizes = [0] * _MT
            start = [0] * (_MT + 1)
            for k, arrays in enumerate(chunk):
                for j, a in enumerate(arrays):
                    ptrs[j][k] = 0 if a is None else a.data.ptr
                sizes[k] = arrays[0].size
                start[k + 1] = start[k] + blocks(arrays[0].size, _EW_PER_BLOCK)
            for k in range(len(chunk), _MT):
                start[k + 1] = start[k]
            table = struct.pack(f"@{5 * _MT}Q{2 * _MT + 1}q", *ptrs[0], *ptrs[1], *ptrs[2], *ptrs[3], *ptrs[4],
                                *sizes, *start)
            launch_function(f, (start[len(chunk)],), (_THREADS,), (table, np.int32(len(chunk))) + scalars)
