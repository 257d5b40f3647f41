"""Native flash attention on CUDA (``src/attention.cu``): one tiled online-softmax forward
kernel, and a backward of two kernels (dq per query tile, dk/dv per key tile), float32. On
tensor cores the backward first computes delta = rowsum(dO * O) on its own, and the two kernels
then run at once on two streams (:data:`CONCURRENT_BWD`).

Device memory is O(n): the forward keeps the row log-sum-exp and nothing of size n x m. The
semantics are those of :func:`torchlean.kernels.host.attention.flash_attention_fwd` (soft fill -1000,
hard masking, rows without an allowed key give 0 and lse +inf).

On compute capability 8.0 and later the tile products run on tensor cores in 3xTF32 (each
float32 operand split into two TF32 parts, three products accumulated in float32: float32
accuracy, the arithmetic PyTorch's fp32 memory-efficient attention uses there); before that,
in plain float32 FMA. Float64 inputs, head sizes above 128, empty inputs and kernels whose
shared memory the device cannot give run the host kernels of
:mod:`torchlean.kernels.host.attention` with ``xp=cupy``, which have the same semantics.
"""

from __future__ import annotations

import cupy
import numpy as np

from . import build
from .build import Launcher, function
from .base import _contig, _dev
from ..host import attention as _host

build.declare("attention", ["fa_delta"] + [f"{k}<{dm}>" for k in ("fa_fwd", "fa_bwd_dq", "fa_bwd_kv", "ft_fwd",
                                                                 "ft_bwd_dq", "ft_bwd_kv") for dm in (64, 128)])

_ND = cupy.ndarray
_F32 = np.dtype(np.float32)

_TILE = 64           # columns per tile (FA_T in the source)
_DMS = (64, 128)


def _head_dim(q, k, v, mask):
    """(DM, tensor cores) of the native kernels for these inputs, or None when the host code must run on CuPy."""
    if not (q.dtype == k.dtype == v.dtype == np.float32):
        return None
    B, n, d = q.shape
    m, e = k.shape[1], v.shape[2]
    if B == 0 or n == 0 or m == 0 or d == 0 or e == 0:
        return None
    need = max(d, e)
    for dm in _DMS:
        if need <= dm:
            tc = _variant(dm)
            return None if tc is None else (dm, tc)
    return None


def _smem(kind: str, dm: int, tc: bool) -> int:
    """Dynamic shared memory in bytes of one block of kernel ``kind``."""
    ln = dm + 4            # row stride of row-major tiles
    if tc:                 # tensor-core kernels: float32 tiles, and split tiles of (hi, lo) pairs
        floats = {"fwd": 5 * _TILE * ln, "dq": 6 * _TILE * ln, "kv": 6 * _TILE * ln + 2 * _TILE}[kind]
    else:
        lt = 68            # FA_LT, the stride of transposed tiles
        floats = {"fwd": dm * lt + _TILE * lt + 4 * _TILE * ln,     # key/value tiles double-buffered
                  "dq": 2 * dm * lt + _TILE * lt + 2 * _TILE * ln,
                  "kv": 2 * dm * lt + 2 * _TILE * lt + 2 * _TILE * ln + 2 * _TILE}[kind]
    return 4 * floats


_NAMES = {False: {"fwd": "fa_fwd", "dq": "fa_bwd_dq", "kv": "fa_bwd_kv"},
          True: {"fwd": "ft_fwd", "dq": "ft_bwd_dq", "kv": "ft_bwd_kv"}}
_THREADS = {False: 256, True: 128}
_READY: dict = {}
_DEVICE: dict = {}
#: None: tensor cores where the device has them; False: the FMA kernels everywhere (tests and
#: benchmarks compare the two).
FORCE_TENSOR_CORES = None


def _variant(dm: int):
    """True for the tensor-core kernels, False for the FMA ones, None when neither fits the
    device (cached per device, head size and :data:`FORCE_TENSOR_CORES`)."""
    dev = cupy.cuda.runtime.getDevice()
    key = (dev, dm, FORCE_TENSOR_CORES)
    if key in _DEVICE:
        return _DEVICE[key]
    d = cupy.cuda.Device(dev)
    tc = int(d.compute_capability) >= 80 and FORCE_TENSOR_CORES is not False
    limit = int(d.attributes.get("MaxSharedMemoryPerBlockOptin", 48 * 1024))
    found = None
    for v in ((True, False) if tc else (False,)):
        if all(_smem(kind, dm, v) <= limit for kind in ("fwd", "dq", "kv")):
            found = v
            break
    _DEVICE[key] = found
    return found


# Argument layouts (struct formats) of the kernels: pointers, the mask's strides (int64), then
# n, m, d, e, scale, hard and the tile count. The FMA family's dq kernel also takes ``out`` and
# writes delta; the tensor-core one reads delta from fa_delta.
_FORMATS = {("fwd", False): "PPPPqqqPPiiiifii", ("fwd", True): "PPPPqqqPPiiiifii",
            ("dq", False): "PPPPqqqPPPPPiiiifii", ("dq", True): "PPPPqqqPPPPiiiifii",
            ("kv", False): "PPPPqqqPPPPPiiiifii", ("kv", True): "PPPPqqqPPPPPiiiifii"}


_MAX_DYNAMIC_SHARED = 8   # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


def _kernel(kind: str, dm: int, tc: bool):
    """The compiled kernel as a fixed-layout launcher, its dynamic shared memory limit raised
    (above 48 KiB) once."""
    key = (kind, dm, tc)
    f = _READY.get(key)
    if f is None:
        fn = function("attention", f"{_NAMES[tc][kind]}<{dm}>")
        cupy.cuda.driver.funcSetAttribute(fn.ptr, _MAX_DYNAMIC_SHARED, _smem(kind, dm, tc))
        f = _READY[key] = Launcher(fn, _FORMATS[(kind, tc)], _smem(kind, dm, tc))
    return f


_NO_MASK = (0, 0, 0, 0)


def _mask_args(mask, shape):
    """(pointer or 0, batch stride, row stride, column stride) of a 0/1 mask broadcast to ``shape``,
    and the device array that must stay alive until the launch."""
    if mask is None:
        return _NO_MASK, None
    mk = _dev(mask)
    if mk.dtype != np.bool_:
        mk = mk != 0
    mk = cupy.broadcast_to(mk, shape)
    return (mk.data.ptr,) + tuple(mk.strides), mk  # bool: byte strides are element strides


def _padded(x, width=None):
    """``x`` C-contiguous, 16-byte aligned, its last axis zero-padded to a multiple of 4 (or to
    ``width``): the kernels move rows as float4."""
    if type(x) is not _ND:
        x = _dev(x)
    w = x.shape[-1]
    want = width if width is not None else (w + 3) & ~3
    if want != w:
        out = cupy.zeros(x.shape[:-1] + (want,), dtype=x.dtype)
        out[..., :w] = x
        return out
    if not x._c_contiguous:
        x = cupy.ascontiguousarray(x)
    return x if x.data.ptr % 16 == 0 else x.copy()


def _unpad(x, w):
    return x if x.shape[-1] == w else _contig(x[..., :w])


def _launch(kind, variant, B, rows, *args):
    """One block per (batch, tile of the kernel's rows); ``args`` (pointers and numbers) end
    before the tile count."""
    tiles = (rows + _TILE - 1) // _TILE
    _kernel(kind, *variant)(tiles * B, _THREADS[variant[1]], *args, tiles)


def _flags(hard, causal):
    """The kernels' ``hard`` argument: bit 0 hard masking, bit 1 causal (skip the tiles above the diagonal)."""
    return int(bool(hard)) | (2 if causal else 0)


def flash_attention_fwd(q, k, v, mask, scale, hard=False, causal=False):
    var = _head_dim(q, k, v, mask)
    if var is None:
        return _host.flash_attention_fwd(q, k, v, mask, scale, hard, causal, xp=cupy)
    e0 = v.shape[2]
    q, k, v = _padded(q), _padded(k), _padded(v)
    B, n, d = q.shape
    m, e = k.shape[1], v.shape[2]
    mk, _keep = _mask_args(mask, (B, n, m))
    out = _ND((B, n, e), _F32)
    lse = _ND((B, n), _F32)
    _launch("fwd", var, B, n, q.data.ptr, k.data.ptr, v.data.ptr, *mk, out.data.ptr, lse.data.ptr, n, m, d, e,
            scale, _flags(hard, causal))
    return _unpad(out, e0), lse


#: Run the tensor-core backward's dq and dk/dv kernels on two streams at once (tests and
#: benchmarks turn it off to compare): neither waits for the other's last wave of blocks. On an
#: H100 the backward took 1.5% less time at n = 2048 and 4096, the same at 512.
CONCURRENT_BWD = True
_SIDE: dict = {}  # device -> (side stream, fork event, join event)


def _side(dev: int):
    s = _SIDE.get(dev)
    if s is None:
        s = _SIDE[dev] = (cupy.cuda.Stream(non_blocking=True), cupy.cuda.Event(disable_timing=True),
                          cupy.cuda.Event(disable_timing=True))
    return s


def _bwd(q, k, v, mask, out, lse, g, scale, hard, causal, want_kv=True):
    var = _head_dim(q, k, v, mask)
    if var is None:
        return _host.flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard, causal, xp=cupy)
    d0, e0 = q.shape[2], v.shape[2]
    q, k, v = _padded(q), _padded(k), _padded(v)
    B, n, d = q.shape
    m, e = k.shape[1], v.shape[2]
    out = _padded(_dev(out).astype(np.float32, copy=False), e)
    lse = _contig(_dev(lse).astype(np.float32, copy=False))
    g = _dev(g)
    if g.shape != (B, n, e0):
        g = cupy.broadcast_to(g, (B, n, e0))
    g = _padded(g.astype(np.float32, copy=False), e)
    mk, _keep = _mask_args(mask, (B, n, m))
    dq = _ND(q.shape, _F32)
    delta = _ND((B, n), _F32)
    qkv = (q.data.ptr, k.data.ptr, v.data.ptr) + mk
    tail = (n, m, d, e, scale, _flags(hard, causal))
    dk = dv = None
    if want_kv:
        dk = _ND(k.shape, _F32)
        dv = _ND(v.shape, _F32)
        kv_args = qkv + (lse.data.ptr, delta.data.ptr, g.data.ptr, dk.data.ptr, dv.data.ptr) + tail
    if not var[1]:  # FMA kernels: dq first, it also writes delta = rowsum(g * out) for the dk/dv kernel
        _launch("dq", var, B, n, *qkv, out.data.ptr, lse.data.ptr, g.data.ptr, dq.data.ptr, delta.data.ptr, *tail)
        if want_kv:
            _launch("kv", var, B, m, *kv_args)
    else:
        rows = B * n
        _delta_kernel()((rows + 7) // 8, 256, out.data.ptr, g.data.ptr, delta.data.ptr, rows, e)
        dq_args = qkv + (lse.data.ptr, delta.data.ptr, g.data.ptr, dq.data.ptr) + tail
        if want_kv and CONCURRENT_BWD:
            main = cupy.cuda.get_current_stream()
            side, fork, join = _side(q.device.id)
            fork.record(main)
            side.wait_event(fork)
            with side:
                _launch("kv", var, B, m, *kv_args)
            _launch("dq", var, B, n, *dq_args)
            join.record(side)
            main.wait_event(join)
        else:
            _launch("dq", var, B, n, *dq_args)
            if want_kv:
                _launch("kv", var, B, m, *kv_args)
    if not want_kv:
        return _unpad(dq, d0), None, None
    return _unpad(dq, d0), _unpad(dk, d0), _unpad(dv, e0)


def _delta_kernel():
    f = _READY.get("delta")
    if f is None:
        f = _READY["delta"] = Launcher(function("attention", "fa_delta"), "PPPqi")
    return f


def flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard, causal=False):
    return _bwd(q, k, v, mask, out, lse, g, scale, hard, causal)


def flash_attention_bwd_q(q, k, v, mask, out, lse, g, scale, hard, causal=False):
    return _bwd(q, k, v, mask, out, lse, g, scale, hard, causal, want_kv=False)[0]


def flash_attention_bwd_k(q, k, v, mask, out, lse, g, scale, hard, causal=False):
    return flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard, causal)[1]


def flash_attention_bwd_v(q, k, v, mask, out, lse, g, scale, hard, causal=False):
    return flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard, causal)[2]
