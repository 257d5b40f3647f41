"""Matrix products through cuBLAS that may be recorded in a CUDA graph.

CuPy's cuBLAS wrappers refuse to run while the current stream is capturing (their
``setStream`` raises ``NotImplementedError``; CuPy issue #6290), although cuBLAS itself
supports stream capture as long as nothing is allocated inside the captured calls. This
module calls the cuBLAS library that CuPy loaded directly (through :mod:`ctypes`), with a
handle of its own per thread and device:

* host pointer mode with the constants alpha = 1, beta = 0: cuBLAS reads host scalars when
  the call is issued, so a recorded call replays with the same constants;
* inside :func:`capture_scope` the handle uses a workspace allocated *before* capture from
  the caller's allocator (a CUDA-graph program's private pool), so cuBLAS allocates nothing
  during capture and the graphs own the scratch memory they replay with;
* strict float32: the handle's math mode is ``CUBLAS_DEFAULT_MATH`` (no TF32) unless
  :func:`torchlean.cuda.set_tf32` allowed TF32, as for CuPy's own products.

Arrays are row-major and cuBLAS is column-major. A row-major ``r x c`` matrix read
column-major is its transpose, so ``C = A @ B`` is issued as ``C^T = B^T A^T`` with the
operands swapped, no copies. A transposed view (last two axes swapped, as ``w.T``) is passed
with cuBLAS's transpose flag; any other strided operand is made contiguous first (a copy
kernel, which captures like any other).

:func:`matmul` is the entry point the CUDA kernels use: inside :func:`capture_scope`, while
the current stream is capturing, or when :data:`ROUTE_ALWAYS` is set it runs :func:`gemm`;
otherwise it is ``cupy.matmul``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading

import cupy
import numpy as np
from cupy._core import _routines_linalg as _linalg

from ...errors import DeviceError, ShapeError

__all__ = ["matmul", "gemm", "gemm_loop", "check_status", "capture_scope", "active", "in_capture_scope", "ROUTE_ALWAYS"]

#: Route every float32/float64 product through :func:`gemm`, not only captured ones. Off: on an
#: H100 a direct call cost 4-7 us more host time than ``cupy.matmul`` (32 x 256 x 256, ctypes and
#: the layout checks in Python) at equal throughput at scale (4096^3 float32: 49.7 vs 49.6
#: TFLOP/s), and eager products are host-bound (the eager MLP step of torchlean/bench/bench_ir.py:
#: 1.29 ms with cupy.matmul, 1.49 ms direct). Inside a graph the host cost is paid once.
ROUTE_ALWAYS = False

_OP_N, _OP_T = 0, 1
_DEFAULT_MATH, _TF32_MATH = 0, 3
_POINTER_MODE_HOST = 0
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)

_lib = None
_lib_lock = threading.Lock()
_local = threading.local()
_workspaces: dict = {}          # stream pointer -> (MemoryPointer, bytes): capture scopes' workspaces
_forced = 0                     # open capture scopes: route through gemm even before capture begins
_ONE = {_F32: ctypes.c_float(1.0), _F64: ctypes.c_double(1.0)}
_ZERO = {_F32: ctypes.c_float(0.0), _F64: ctypes.c_double(0.0)}
_ONE_P = {k: ctypes.addressof(v) for k, v in _ONE.items()}
_ZERO_P = {k: ctypes.addressof(v) for k, v in _ZERO.items()}


class _Lib:
    """The cuBLAS entry points used here, with their C signatures declared."""

    def __init__(self, cdll):
        vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong

        def fn(name, *args):
            f = getattr(cdll, name)
            f.argtypes = list(args)
            f.restype = ctypes.c_int
            return f

        self.path = getattr(cdll, "_name", "?")
        self.create = fn("cublasCreate_v2", ctypes.POINTER(vp))
        self.set_stream = fn("cublasSetStream_v2", vp, vp)
        self.set_workspace = fn("cublasSetWorkspace_v2", vp, vp, ctypes.c_size_t)
        self.set_math_mode = fn("cublasSetMathMode", vp, i32)
        self.set_pointer_mode = fn("cublasSetPointerMode_v2", vp, i32)
        gemm = (vp, i32, i32, i32, i32, i32, vp, vp, i32, vp, i32, vp, vp, i32)
        batched = (vp, i32, i32, i32, i32, i32, vp, vp, i32, i64, vp, i32, i64, vp, vp, i32, i64, i32)
        self.gemm = {_F32: fn("cublasSgemm_v2", *gemm), _F64: fn("cublasDgemm_v2", *gemm)}
        self.batched = {_F32: fn("cublasSgemmStridedBatched", *batched),
                        _F64: fn("cublasDgemmStridedBatched", *batched)}
        arrays = (vp, i32, i32, i32, i32, i32, vp, vp, i32, vp, i32, vp, vp, i32, i32)
        self.arrays = {_F32: fn("cublasSgemmBatched", *arrays), _F64: fn("cublasDgemmBatched", *arrays)}


def _cublas_paths():
    """Candidate library files: the cuBLAS CuPy has loaded first, so both share one copy."""
    try:
        cupy.cuda.device.get_cublas_handle()  # makes CuPy load (and initialise) its cuBLAS
    except Exception:  # noqa: BLE001 - the fallback names below are tried instead
        pass
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    p = parts[5].strip()
                    if os.path.basename(p).startswith("libcublas.so") and p not in paths:
                        paths.append(p)
    except OSError:
        pass
    paths += ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]
    found = ctypes.util.find_library("cublas")
    if found:
        paths.append(found)
    return paths


def _load():
    global _lib
    with _lib_lock:
        if _lib is None:
            errors = []
            for p in _cublas_paths():
                try:
                    _lib = _Lib(ctypes.CDLL(p))
                    break
                except (OSError, AttributeError) as e:
                    errors.append(f"{p}: {e}")
            else:
                raise DeviceError("cuBLAS: could not load the library CuPy uses (" + "; ".join(errors) + ")")
    return _lib


def _check(status, what):
    if status != 0:
        raise DeviceError(f"cuBLAS {what} failed with status {status}")


class _Handle:
    __slots__ = ("ptr", "stream", "ws", "math")

    def __init__(self, lib):
        h = ctypes.c_void_p()
        _check(lib.create(ctypes.byref(h)), "cublasCreate")
        self.ptr = h.value
        _check(lib.set_pointer_mode(self.ptr, _POINTER_MODE_HOST), "cublasSetPointerMode")
        _check(lib.set_math_mode(self.ptr, _DEFAULT_MATH), "cublasSetMathMode")
        self.stream = None
        self.ws = None
        self.math = _DEFAULT_MATH


def _handle(lib):
    """This thread's handle for the current device, bound to the current stream and its workspace."""
    hs = getattr(_local, "handles", None)
    if hs is None:
        hs = _local.handles = {}
    dev = cupy.cuda.runtime.getDevice()
    h = hs.get(dev)
    if h is None:
        h = hs[dev] = _Handle(lib)
    s = cupy.cuda.get_current_stream().ptr
    ws = _workspaces.get(s)
    if s != h.stream or ws is not h.ws:
        # cublasSetStream also puts cuBLAS's own workspace back; a scope's is set after it.
        _check(lib.set_stream(h.ptr, s), "cublasSetStream")
        if ws is not None:
            _check(lib.set_workspace(h.ptr, ws[0].ptr, ws[1]), "cublasSetWorkspace")
        h.stream, h.ws = s, ws
    return h


def _tf32() -> bool:
    return _linalg.get_compute_type(_F32) == _linalg.COMPUTE_TYPE_TF32


def in_capture_scope() -> bool:
    """True inside :func:`capture_scope` (the warm-up and the capture of a CUDA graph), where
    kernels must not depend on host copies of device data."""
    return _forced > 0


def active() -> bool:
    """True when :func:`matmul` uses :func:`gemm`: a capture scope, a capturing stream, or ROUTE_ALWAYS."""
    return ROUTE_ALWAYS or _forced > 0 or cupy.cuda.get_current_stream().is_capturing()


def matmul(a, b):
    """``a @ b`` with NumPy matmul semantics: :func:`gemm` when :func:`active`, else ``cupy.matmul``."""
    if ROUTE_ALWAYS or _forced > 0 or cupy.cuda.get_current_stream().is_capturing():
        return gemm(a, b)
    if (a.ndim > 2 or b.ndim > 2) and not (a._c_contiguous and b._c_contiguous):
        # CuPy copies a batched operand whose last two axes are swapped (measured: 0.74 ms
        # against 0.31 ms for the direct call on conv2d's weight-gradient product); cuBLAS reads it as is.
        return gemm(a, b)
    if a.ndim and b.ndim and (a.ndim == 1 or a.shape[-2] == 1) and (b.ndim == 1 or b.shape[-1] == 1):
        # One output element per product (a dot): CuPy takes its own reduction kernel, compiled
        # with -ftz=true, which flushes float32 subnormals (.build); cuBLAS does not.
        return gemm(a, b)
    return cupy.matmul(a, b)


def _layout(x, r, c, isz):
    """(op, ld) reading the last two axes of ``x`` (``r x c``, row-major meaning) without a copy, or None."""
    s = x.strides
    s1, s2 = s[-2], s[-1]
    if (c == 1 or s2 == isz) and (r == 1 or (s1 >= c * isz and s1 % isz == 0)):
        return _OP_N, (s1 // isz if r > 1 else max(c, 1))
    if (r == 1 or s1 == isz) and (c == 1 or (s2 >= r * isz and s2 % isz == 0)):
        return _OP_T, (s2 // isz if c > 1 else max(r, 1))
    return None


def _batch_stride(x, nb, isz):
    """Element stride between the matrices of ``x`` (all batch axes as one), or None if not uniform."""
    if nb == 1:
        return 0
    step = None
    expect = None
    for n, st in zip(reversed(x.shape[:-2]), reversed(x.strides[:-2])):
        if n == 1:
            continue
        if step is None:
            if st <= 0 or st % isz:
                return None
            step, expect = st, st * n
        elif st != expect:
            return None
        else:
            expect = st * n
    return step // isz


def _operand(x, bshape, nb, isz):
    """(array, op, ld, batch stride) for one operand broadcast to batch shape ``bshape``."""
    r, c = x.shape[-2], x.shape[-1]
    own = 1
    for n in x.shape[:-2]:
        own *= n
    if own != nb and own != 1:  # a genuine broadcast of some batch axes: materialise it
        x = cupy.ascontiguousarray(cupy.broadcast_to(x, bshape + (r, c)))
        own = nb
    lay = _layout(x, r, c, isz)
    bs = _batch_stride(x, own, isz) if lay is not None else None
    if lay is None or bs is None:
        x = cupy.ascontiguousarray(x)
        lay = (_OP_N, max(c, 1))
        bs = r * c if own > 1 else 0
    return x, lay[0], max(lay[1], 1), bs


def gemm(a, b):
    """``a @ b`` (NumPy matmul semantics: 1-d operands, broadcast batch axes) by direct cuBLAS calls.

    float32 and float64 operands of one dtype are computed here; other dtypes go to
    ``cupy.matmul``. Safe inside a CUDA stream capture once the current thread has a handle
    and the stream a workspace (see :func:`capture_scope`). The result is a new C-contiguous
    array.
    """
    if not isinstance(a, cupy.ndarray):
        a = cupy.asarray(a)
    if not isinstance(b, cupy.ndarray):
        b = cupy.asarray(b)
    dt = a.dtype
    if (dt != _F32 and dt != _F64) or b.dtype != dt or a.ndim == 0 or b.ndim == 0:
        return cupy.matmul(a, b)
    dt = _F32 if dt == _F32 else _F64
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    if a_vec:
        a = a.reshape(1, a.shape[0])
    if b_vec:
        b = b.reshape(b.shape[0], 1)
    m, k = a.shape[-2], a.shape[-1]
    k2, n = b.shape[-2], b.shape[-1]
    if k != k2:
        raise ShapeError(f"matmul: inner dimensions differ: {a.shape} @ {b.shape}")
    if a.ndim == 2 and b.ndim == 2:
        bshape = ()
    else:
        try:
            bshape = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        except ValueError:
            raise ShapeError(f"matmul: batch axes do not broadcast: {a.shape} @ {b.shape}") from None
    nb = 1
    for d in bshape:
        nb *= d
    out_shape = bshape + (m, n)
    if m == 0 or n == 0 or nb == 0:
        y = cupy.empty(out_shape, dt)
    elif k == 0:
        y = cupy.zeros(out_shape, dt)
    else:
        y = cupy.empty(out_shape, dt)
        isz = dt.itemsize
        a, op_a, lda, sa = _operand(a, bshape, nb, isz)
        b, op_b, ldb, sb = _operand(b, bshape, nb, isz)
        lib = _lib or _load()
        h = _handle(lib)
        math_mode = _TF32_MATH if dt is _F32 and _tf32() else _DEFAULT_MATH
        if math_mode != h.math:
            _check(lib.set_math_mode(h.ptr, math_mode), "cublasSetMathMode")
            h.math = math_mode
        # Column-major: C^T (n x m) = op(B)^T (n x k) @ op(A)^T (k x m).
        if nb == 1:
            st = lib.gemm[dt](h.ptr, op_b, op_a, n, m, k, _ONE_P[dt], b.data.ptr, ldb,
                              a.data.ptr, lda, _ZERO_P[dt], y.data.ptr, n)
        else:
            st = lib.batched[dt](h.ptr, op_b, op_a, n, m, k, _ONE_P[dt], b.data.ptr, ldb, sb,
                                 a.data.ptr, lda, sa, _ZERO_P[dt], y.data.ptr, n, m * n, nb)
        _check(st, "gemm")
    if a_vec and b_vec:
        return y.reshape(bshape)
    if a_vec:
        return y.reshape(bshape + (n,))
    if b_vec:
        return y.reshape(bshape + (m,))
    return y


def gemm_loop(dt, arrays: bool = False):
    """``(call, handle, one, zero)`` for many products in a loop on raw device pointers (ints) of
    ``dt`` (float32 / float64), the handle bound to the current stream and its math mode set once:
    ``call(handle, op_a, op_b, m, n, k, one, a, lda, b, ldb, one or zero, c, ldc)`` is the
    column-major ``C (m x n) = op(A) op(B)`` (plus ``C`` with ``one`` as beta) and returns cuBLAS's
    status (check it with :func:`check_status`). With ``arrays`` the call is cublas<t>gemmBatched:
    ``a``, ``b``, ``c`` are device addresses of device pointers (read when the product runs, so a
    captured graph replays on whatever they point at), and a last argument, the count (1).
    A recurrence issues one per time step, where the host time of a step is the cost: no array
    objects, layout checks or handle lookups per call."""
    dt = _F32 if dt == _F32 else _F64
    lib = _lib or _load()
    h = _handle(lib)
    math_mode = _TF32_MATH if dt is _F32 and _tf32() else _DEFAULT_MATH
    if math_mode != h.math:
        _check(lib.set_math_mode(h.ptr, math_mode), "cublasSetMathMode")
        h.math = math_mode
    return (lib.arrays if arrays else lib.gemm)[dt], h.ptr, _ONE_P[dt], _ZERO_P[dt]


def check_status(status) -> None:
    _check(status, "gemm")


def _workspace_bytes() -> int:
    # cuBLAS's documented recommendation: 32 MiB on Hopper and later, 4 MiB before.
    return (32 if int(cupy.cuda.Device().compute_capability) >= 90 else 4) * 1024 * 1024


@contextlib.contextmanager
def capture_scope(stream):
    """Route products through :func:`gemm` and give ``stream`` a workspace of its own.

    Enter it (outside capture, with ``stream`` current or not) around the warm-up and the
    capture of a CUDA graph: the handle is created and the workspace allocated here, from the
    current CuPy allocator, so nothing is allocated by cuBLAS while capturing, and the warm-up
    runs exactly the calls the capture records. Yields the workspace, which must stay alive
    as long as the captured graphs.
    """
    global _forced
    lib = _lib or _load()
    nbytes = _workspace_bytes()
    ws = (cupy.cuda.alloc(nbytes), nbytes)
    prev = _workspaces.get(stream.ptr)
    _workspaces[stream.ptr] = ws
    _forced += 1
    try:
        with stream:
            _handle(lib)  # create and bind the handle now: cublasCreate allocates
        yield ws[0]
    finally:
        _forced -= 1
        for h in getattr(_local, "handles", {}).values():
            if h.ws is ws:  # unbind, so the handle does not keep (or use) the graphs' workspace
                h.stream = h.ws = None
        if prev is None:
            _workspaces.pop(stream.ptr, None)
        else:
            _workspaces[stream.ptr] = prev
