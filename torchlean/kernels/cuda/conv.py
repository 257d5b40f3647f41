"""Convolutions on CUDA: cuDNN first (:mod:`.cudnn`), else native kernels, im2col and its adjoint
(``src/conv.cu``) around cuBLAS GEMMs.

Each of the three maps (:func:`_conv`, :func:`_data_grad`, :func:`_weight_grad`, which serve the
transposed convolution too, with roles exchanged) asks cuDNN first; it runs float32 cases of one
to three spatial axes (0.8-1.4x torch's time per call at ResNet-18 shapes on an H100, where these
native kernels took 1.1-3x, ``benchmarks/probe_cudnn_conv.py``) and declines the rest, which the
native kernels below take: float64 (a reference-like path), more axes, cuDNN absent or disabled.

Semantics are those of :mod:`torchlean.kernels.host.conv` (channels-first, N-d for
1 <= d <= 8 spatial axes, stride, padding, dilation, groups, batched). The algorithm:

* forward: ``cols (n, C_in, K, P)`` (``K = prod(kernel)``, ``P = prod(out)``) from one native
  im2col pass that reads the unpadded input (padding cells are zeros of the kernel, never
  materialized), then one strided-batched GEMM ``W (G, C_out/G, C_in/G * K) @ cols`` whose
  output already is ``(n, C_out, *out)``; the weight has batch stride 0 when ``groups == 1``;
* weight gradient: per sample ``g[n] @ cols[n]^T`` (one batched GEMM, ``cols^T`` a cuBLAS
  operand flag), then a deterministic sum over samples;
* input gradient: with unit strides, the convolution of ``g`` with the flipped kernel (as on
  the host); otherwise ``dcols = W^T @ g`` (batched GEMM), then a native col2im written as a
  gather (each input cell sums the column entries that read it, in the host's offset order):
  no atomics;
* bias: a native pass over the output; its gradient a deterministic reduction of ``g``.

The transposed convolution is the same three maps with roles exchanged, as on the host. The
batch is processed in chunks so that a column buffer stays within :data:`COLS_BUDGET` bytes. 1x1
kernels with unit stride and no padding skip im2col (the input already is its columns).
Inputs outside what the native kernels take (dtypes other than float32 / float64, empty
axes, coordinates beyond 32-bit) run the host kernels of :mod:`torchlean.kernels.host.conv`
with ``xp=cupy`` (the same algorithm over CuPy arrays). Max and average pooling are native (one
launch each way, :func:`max_pool_forward`); smooth max pooling is the host kernel bound to CuPy.
GEMMs are strict float32 unless :func:`torchlean.cuda.set_tf32` allowed TF32.
"""

from __future__ import annotations

import functools
import struct
from math import prod

import cupy
import numpy as np

from . import cudnn as _cudnn
from . import gemm as _gemm
from . import build
from .build import blocks, ftype, launch
from .base import _contig, _dev
from .reduce import _reduce, reduce_sum_axis0
from ..host import conv as _host

__all__ = ["conv_forward", "conv_backward", "conv_transpose_forward", "conv_transpose_backward",
           "max_pool_forward", "max_pool_backward", "avg_pool_forward", "avg_pool_backward",
           "smooth_max_pool_forward", "smooth_max_pool_backward", "COLS_BUDGET"]

_POOL_MAXD = 8   # as the convolutions (CONV_MAXD): every pool the spec admits runs here
build.declare("conv", [f"{k}<{t}, {d}>" for k in ("im2col_k", "col2im_k") for t in build.FLOATS for d in range(1, 9)]
              + [f"bias_add_k<{t}>" for t in build.FLOATS]
              + [f"{k}<{t}, {d}>" for k in ("max_pool_fwd_k", "avg_pool_fwd_k") for t in build.FLOATS
                 for d in range(1, _POOL_MAXD + 1)]
              + [f"pool_bwd_k<{t}, {d}, {m}>" for t in build.FLOATS for d in range(1, _POOL_MAXD + 1)
                 for m in ("true", "false")])

#: Upper bound, in bytes, of one column buffer (cols or dcols); the batch is chunked to fit it.
COLS_BUDGET = 256 * 2 ** 20

_MAXD = 8
_GRID_Y = 65535
_INT_LIMIT = 2 ** 30  # per-axis coordinates (with padding and dilation) stay far inside int32
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _geom(in_sp, out_sp, k, s, p, dil) -> bytes:
    """The ``ConvGeom`` struct of ``src/conv.cu``, passed by value."""
    def pad(v):
        return list(v) + [0] * (_MAXD - len(v))
    return struct.pack(f"@{6 * _MAXD}i", *pad(in_sp), *pad(out_sp), *pad(k), *pad(s), *pad(p), *pad(dil))


def _threads(n: int) -> int:
    return 256 if n >= 256 else max(32, -(-n // 32) * 32)


def _grid(n: int, rows: int):
    return (blocks(n, _threads(n)), min(rows, _GRID_Y))


def _native(arrays, spatial, out, k, s, p, dil) -> bool:
    """True when the native path takes these operands (otherwise the host code runs on CuPy)."""
    dt = arrays[0].dtype
    if dt not in _FLOATS or any(a.dtype != dt for a in arrays[1:]):
        return False
    d = len(k)
    if not 1 <= d <= _MAXD or any(a.ndim != d + 2 for a in arrays[:2]):
        return False
    if any(v <= 0 for a in arrays for v in a.shape) or any(v <= 0 for v in tuple(out) + tuple(spatial)):
        return False
    for S, o, ki, si, pi, di in zip(spatial, out, k, s, p, dil):
        if max(S + 2 * pi, o * si + ki * di + pi) >= _INT_LIMIT:
            return False
    return True


def _trivial(k, s, p, spatial, out) -> bool:
    """1x1 kernel, unit stride, no padding, as many outputs as inputs: the columns are the input itself."""
    return (all(v == 1 for v in k) and all(v == 1 for v in s) and not any(p)
            and tuple(spatial) == tuple(out))


def _chunk(n: int, per_sample: int) -> int:
    return n if per_sample <= 0 else max(1, min(n, COLS_BUDGET // per_sample))


def _im2col(x, spatial, out, k, s, p, dil):
    """``(nb, C, K, P)`` columns of a contiguous chunk ``x (nb, C, *spatial)``."""
    nb, c = x.shape[:2]
    K, P, S = prod(k), prod(out), prod(spatial)
    if _trivial(k, s, p, spatial, out):
        return x.reshape(nb, c, 1, P)
    cols = cupy.empty((nb, c, K, P), dtype=x.dtype)
    t = ftype(x.dtype, "conv")
    launch("conv", f"im2col_k<{t}, {len(k)}>", _grid(P, nb * c), _threads(P),
           (_geom(spatial, out, k, s, p, dil), x, cols, np.int64(nb * c), np.int64(K), np.int64(P), np.int64(S)))
    return cols


def _conv(x, w, out, s, p, dil, groups):
    """``(N, C_out, *out)``: the convolution of ``x (N, C, *S)`` with ``w (C_out, C/G, *k)``."""
    n, c = x.shape[:2]
    co, k = w.shape[0], tuple(w.shape[2:])
    spatial, out = tuple(x.shape[2:]), tuple(out)
    y = _cudnn.fprop(x, w, (n, co) + out, p, s, dil, groups)
    if y is not None:
        return y
    G, K, P = groups, prod(k), prod(out)
    wm = w.reshape(G, co // G, (c // G) * K)
    a = wm[0] if G == 1 else wm  # 2-d: batch stride 0 in the batched GEMM
    nb = _chunk(n, 0 if _trivial(k, s, p, spatial, out) else c * K * P * x.dtype.itemsize)
    y = None if nb == n else cupy.empty((n, co) + out, dtype=x.dtype)
    for n0 in range(0, n, nb):
        n1 = min(n, n0 + nb)
        cols = _im2col(x[n0:n1], spatial, out, k, s, p, dil)
        b = cols.reshape(n1 - n0, (c // G) * K, P) if G == 1 else cols.reshape(n1 - n0, G, (c // G) * K, P)
        r = _gemm.gemm(a, b)
        if y is None:
            return r.reshape((n, co) + out)
        y[n0:n1] = r.reshape((n1 - n0, co) + out)
    return y


def _data_grad(g, w, spatial, s, p, dil, groups):
    """``(N, G * C_w1, *spatial)``: the adjoint in its input of :func:`_conv` with weight ``w``."""
    n, co = g.shape[:2]
    cg, k = w.shape[1], tuple(w.shape[2:])
    out, spatial = tuple(g.shape[2:]), tuple(spatial)
    G, K, P, S = groups, prod(k), prod(out), prod(spatial)
    c = G * cg
    dx = _cudnn.dgrad(g, w, (n, c) + spatial, p, s, dil, groups)
    if dx is not None:
        return dx
    trivial = _trivial(k, s, p, spatial, out)
    q = tuple(di * (ki - 1) - pi for ki, di, pi in zip(k, dil, p))
    if (not trivial and all(v == 1 for v in s) and all(v >= 0 for v in q)
            and spatial == tuple(o + 2 * qi - di * (ki - 1) for o, qi, di, ki in zip(out, q, dil, k))):
        # Unit strides: the adjoint is the convolution of g (padded by q) with the kernel flipped
        # and its channel axes swapped, as on the host; im2col + GEMM moves fewer bytes than
        # GEMM + col2im here (measured on an H100).
        wf = w.reshape((G, co // G, cg) + k).swapaxes(1, 2)[(Ellipsis,) + (slice(None, None, -1),) * len(k)]
        wf = _contig(wf).reshape((c, co // G) + k)
        return _conv(g, wf, spatial, s, q, dil, groups)
    wt = w.reshape(G, co // G, cg * K).swapaxes(1, 2)  # a transposed view: a cuBLAS operand flag
    a = wt[0] if G == 1 else wt
    nb = _chunk(n, 0 if trivial else c * K * P * g.dtype.itemsize)
    dx = None if (trivial and nb == n) else cupy.empty((n, c) + spatial, dtype=g.dtype)
    t = ftype(g.dtype, "conv")
    for n0 in range(0, n, nb):
        n1 = min(n, n0 + nb)
        gm = g[n0:n1].reshape(n1 - n0, co, P) if G == 1 else g[n0:n1].reshape(n1 - n0, G, co // G, P)
        dcols = _gemm.gemm(a, gm)  # (nb, C, K, P) in memory
        if trivial:
            if dx is None:
                return dcols.reshape((n, c) + spatial)
            dx[n0:n1] = dcols.reshape((n1 - n0, c) + spatial)
            continue
        launch("conv", f"col2im_k<{t}, {len(k)}>", _grid(S, (n1 - n0) * c), _threads(S),
               (_geom(spatial, out, k, s, p, dil), dcols, dx[n0:n1], np.int64((n1 - n0) * c), np.int64(K),
                np.int64(P), np.int64(S)))
    return dx


def _weight_grad(x, g, k, s, p, dil, groups):
    """``(C_g, C_x / G, *k)``: the adjoint in its weight of :func:`_conv` (``g``'s positions are the outputs)."""
    n, c = x.shape[:2]
    co = g.shape[1]
    k, spatial, out = tuple(k), tuple(x.shape[2:]), tuple(g.shape[2:])
    dw = _cudnn.wgrad(x, g, (co, c // groups) + k, p, s, dil, groups)
    if dw is not None:
        return dw
    G, K, P = groups, prod(k), prod(out)
    nb = _chunk(n, 0 if _trivial(k, s, p, spatial, out) else c * K * P * x.dtype.itemsize)
    parts = []
    for n0 in range(0, n, nb):
        n1 = min(n, n0 + nb)
        cols = _im2col(x[n0:n1], spatial, out, k, s, p, dil).reshape(n1 - n0, G, (c // G) * K, P)
        gm = g[n0:n1].reshape(n1 - n0, G, co // G, P)
        parts.append(_gemm.gemm(gm, cols.swapaxes(-1, -2)).reshape(n1 - n0, -1))
    allp = parts[0] if len(parts) == 1 else cupy.concatenate(parts)
    # Per-sample products summed in a fixed order: deterministic, unlike split-K atomics.
    dw = allp[0] if n == 1 else reduce_sum_axis0(allp)
    return dw.reshape((co, c // G) + k)


def _bias_grad(g):
    return _reduce(g, (0,) + tuple(range(2, g.ndim)), False, 0, "conv_backward")


def _add_bias(y, b):
    if b is not None:
        b = _contig(_dev(b).astype(y.dtype, copy=False))
        n, c = y.shape[:2]
        P = prod(y.shape[2:])
        launch("conv", f"bias_add_k<{ftype(y.dtype, 'conv')}>", _grid(P, n * c), _threads(P),
               (y, b, np.int64(n * c), np.int64(c), np.int64(P)))
    return y


def _conv_out(spatial, k, s, p, dil):
    return tuple((S + 2 * pi - di * (ki - 1) - 1) // si + 1 for S, ki, si, pi, di in zip(spatial, k, s, p, dil))


def _convt_out(spatial, k, s, p, op, dil):
    return tuple((S - 1) * si - 2 * pi + di * (ki - 1) + oi + 1
                 for S, ki, si, pi, oi, di in zip(spatial, k, s, p, op, dil))


def _prep(*arrays):
    return [None if a is None else _contig(_dev(a)) for a in arrays]


def conv_forward(x, w, b, stride, padding, dilation, groups):
    """``(N, C_in, *S)``, ``w (C_out, C_in/G, *k)``, ``b (C_out,) | None`` -> ``(N, C_out, *out)``.

    Example (on a GPU)::

        >>> y = conv_forward(cupy.ones((1, 1, 5)), cupy.ones((1, 1, 2)), None, (1,), (0,), (1,), 1)
        >>> y[0, 0].tolist()
        [2.0, 2.0, 2.0, 2.0]
    """
    x, w, b = _prep(x, w, b)
    k = tuple(w.shape[2:])
    out = _conv_out(x.shape[2:], k, stride, padding, dilation)
    if not _native((x, w), x.shape[2:], out, k, stride, padding, dilation):
        return _host.conv_forward(x, w, b, stride, padding, dilation, groups, xp=cupy)
    return _add_bias(_conv(x, w, out, stride, padding, dilation, groups), b)


def conv_backward(x, w, g, stride, padding, dilation, groups, need_x=True, need_w=True, need_b=True):
    """Cotangents ``(dx, dw, db)`` of :func:`conv_forward` for output cotangent ``g``; None where not needed."""
    x, w, g = _prep(x, w, g)
    k = tuple(w.shape[2:])
    if not _native((x, w, g), x.shape[2:], g.shape[2:], k, stride, padding, dilation):
        return _host.conv_backward(x, w, g, stride, padding, dilation, groups, need_x, need_w, need_b, xp=cupy)
    dx = _data_grad(g, w, x.shape[2:], stride, padding, dilation, groups) if need_x else None
    dw = _weight_grad(x, g, k, stride, padding, dilation, groups) if need_w else None
    db = _bias_grad(g) if need_b else None
    return dx, dw, db


def conv_transpose_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    """``(N, C_in, *S)``, ``w (C_in, C_out/G, *k)`` -> ``(N, C_out, *out)``: the adjoint of conv in its input."""
    x, w, b = _prep(x, w, b)
    k = tuple(w.shape[2:])
    out = _convt_out(x.shape[2:], k, stride, padding, output_padding, dilation)
    if not _native((x, w), out, x.shape[2:], k, stride, padding, dilation):
        return _host.conv_transpose_forward(x, w, b, stride, padding, output_padding, dilation, groups, xp=cupy)
    return _add_bias(_data_grad(x, w, out, stride, padding, dilation, groups), b)


def conv_transpose_backward(x, w, g, stride, padding, output_padding, dilation, groups,
                            need_x=True, need_w=True, need_b=True):
    """Cotangents ``(dx, dw, db)`` of :func:`conv_transpose_forward`; None where not needed."""
    x, w, g = _prep(x, w, g)
    k = tuple(w.shape[2:])
    # Seen from x, the transposed convolution's adjoint is a convolution of g whose outputs are
    # exactly x's positions (cells added by output_padding are never read).
    if not _native((g, w, x), g.shape[2:], x.shape[2:], k, stride, padding, dilation):
        return _host.conv_transpose_backward(x, w, g, stride, padding, output_padding, dilation, groups,
                                             need_x, need_w, need_b, xp=cupy)
    out = tuple(x.shape[2:])
    dx = _conv(g, w, out, stride, padding, dilation, groups) if need_x else None
    dw = _weight_grad(g, x, k, stride, padding, dilation, groups) if need_w else None
    db = _bias_grad(g) if need_b else None
    return dx, dw, db


# ---- pooling: native kernels over 1-8 spatial axes (the host's code on CuPy beyond) -------------
# One launch each way. The host's slab loop ran one CuPy kernel per window offset, and CuPy's
# kernels flush float32 subnormals to zero (.build); these keep them, and visit the offsets in the
# host's order, so winners and backward sums are the host's.

def _pool_plan(shape, dtype, k, stride, padding, dilation):
    """``(geometry, R, K, P, S, out)`` of a native pool of an input of ``shape`` over its last
    ``len(k)`` axes (``R`` rows of ``S`` cells, ``P`` outputs per row, ``K`` window offsets), or None."""
    d = len(k)
    if not 1 <= d <= _POOL_MAXD or len(shape) <= d or dtype not in _FLOATS:
        return None
    spatial = tuple(shape[len(shape) - d:])
    out = _conv_out(spatial, k, stride, padding, dilation)
    sizes = [*spatial, *out, *k, *(v + 2 * p for v, p in zip(spatial, padding))]
    if min(out) <= 0 or max(sizes) >= _INT_LIMIT:
        return None
    geo = _geom(spatial, out, k, stride, padding, dilation)
    return geo, prod(shape[:len(shape) - d]), prod(k), prod(out), prod(spatial), out


def max_pool_forward(x, kernel_size, stride, padding, dilation, winners=True):
    """``(y, idx)`` as :func:`torchlean.kernels.host.conv.max_pool_forward`, in one launch (which
    writes the winners either way; ``winners=False`` returns None in their place)."""
    k = tuple(kernel_size)
    plan = _pool_plan(x.shape, x.dtype, k, stride, padding, dilation)
    if plan is None:
        return _host.max_pool_forward(x, k, stride, padding, dilation, winners, xp=cupy)
    x = _contig(_dev(x))
    geo, R, K, P, S, out = plan
    shape = x.shape[:x.ndim - len(k)] + out
    y, idx = cupy.empty(shape, x.dtype), cupy.empty(shape, np.int64)
    if R:
        launch("conv", f"max_pool_fwd_k<{ftype(x.dtype, 'max_pool')}, {len(k)}>", _grid(P, R), _threads(P),
               (geo, x, y, idx, np.int64(R), np.int64(K), np.int64(P), np.int64(S), np.int32(any(padding))))
    return y, (idx if winners else None)


def _pool_bwd(g, idx, x_shape, k, stride, padding, dilation, is_max):
    d = len(k)
    plan = _pool_plan(tuple(x_shape), g.dtype, k, stride, padding, dilation)
    if plan is None or tuple(g.shape) != tuple(x_shape[:len(x_shape) - d]) + plan[5]:
        return None
    geo, R, K, P, S, _ = plan
    g = _contig(_dev(g))
    dx = cupy.empty(tuple(x_shape), g.dtype)
    if R and S:
        t = ftype(g.dtype, "max_pool" if is_max else "avg_pool")
        inv = g.dtype.type(1.0 / prod(k))
        launch("conv", f"pool_bwd_k<{t}, {d}, {'true' if is_max else 'false'}>", _grid(S, R), _threads(S),
               (geo, g, idx if is_max else None, dx, np.int64(R), np.int64(K), np.int64(P), np.int64(S), inv))
    return dx


def max_pool_backward(g, idx, x_shape, kernel_size, stride, padding, dilation):
    k = tuple(kernel_size)
    dx = _pool_bwd(g, _contig(_dev(idx)), x_shape, k, stride, padding, dilation, True)
    if dx is None:
        return _host.max_pool_backward(g, idx, x_shape, k, stride, padding, dilation, xp=cupy)
    return dx


def avg_pool_forward(x, kernel_size, stride, padding):
    k = tuple(kernel_size)
    ones = (1,) * len(k)
    plan = _pool_plan(x.shape, x.dtype, k, stride, padding, ones)
    if plan is None:
        return _host.avg_pool_forward(x, k, stride, padding, xp=cupy)
    x = _contig(_dev(x))
    geo, R, K, P, S, out = plan
    y = cupy.empty(x.shape[:x.ndim - len(k)] + out, x.dtype)
    if R:
        launch("conv", f"avg_pool_fwd_k<{ftype(x.dtype, 'avg_pool')}, {len(k)}>", _grid(P, R), _threads(P),
               (geo, x, y, np.int64(R), np.int64(K), np.int64(P), np.int64(S), x.dtype.type(1.0 / prod(k))))
    return y


def avg_pool_backward(g, x_shape, kernel_size, stride, padding):
    k = tuple(kernel_size)
    dx = _pool_bwd(g, None, x_shape, k, stride, padding, (1,) * len(k), False)
    if dx is None:
        return _host.avg_pool_backward(g, x_shape, k, stride, padding, xp=cupy)
    return dx


smooth_max_pool_forward = functools.partial(_host.smooth_max_pool_forward, xp=cupy)
smooth_max_pool_backward = functools.partial(_host.smooth_max_pool_backward, xp=cupy)
