"""Spectral convolution (the FNO layer) on the GPU: the real transforms by cuBLAS or cuFFT, the
mode mixing and the weight reduction by native kernels (``src/spectral.cu``).

Semantics are those of :mod:`torchlean.kernels.host.spectral` (``spectral_conv1d_rfft_*``). ``x`` is
``(batch, grid, in)`` and the transform runs along the grid axis. Two ways to the spectrum:

* few modes (``modes <= DFT_MAX_MODES``): only bins ``k < modes`` are ever used, so the forward
  transform is a truncated DFT, one strided-batched GEMM of a ``(2 modes, grid)`` cos/sin table
  with ``x`` in its own layout, and the inverse is one GEMM of a ``(grid, 2 modes)`` table (bin
  weights ``c_k / n`` folded in) with the mixed modes, written straight in ``(batch, grid, out)``
  order. No transposes, no full-spectrum buffers. When the batch alone gives cuBLAS too few
  output tiles (the product is ``(2 modes) x in`` per sample, long in the grid), the grid axis
  is split into ``S`` chunks of ``L`` points that share the first chunk's table, and one small
  kernel finishes the DFT with the chunk twiddles ``exp(-2 pi i k s L / n)``.
* otherwise cuFFT (CuPy's plan cache): a tiled transpose to ``(batch, in, grid)``, a batched R2C,
  the mixing kernel into a zeroed ``(batch, out, bins)`` spectrum (``1/n`` folded in), an
  unnormalized C2R, and a transpose back. cuFFT's advanced layout cannot batch over both the
  leading batch axis and the channel axis of ``x`` (one batch stride only), hence the transposes.

The tables depend only on ``(grid, modes, S, dtype)`` and are cached per device. The imaginary
parts of the DC and (even grid) Nyquist bins are written as 0 before the inverse transform: the
inverse real FFT ignores them by definition, and cuFFT's C2R does not promise to. Any shape or
dtype the kernels do not take (empty axes, modes out of range, non-float dtypes) runs the host
kernels of :mod:`torchlean.kernels.host.spectral` with ``xp=cupy``, which gives the host's
behaviour, errors included. Nothing is kept between calls but the tables.
``spectral_conv1d_rfft_bwd`` computes the three gradients from one transform of g (and one of
x); the single-gradient entries are that call with the other gradients off (the weight kernel
computes Re and Im at once). The packed real FFT (``rfft1d_packed``, ``irfft1d_packed``) has no
native kernel: it is the host kernel over CuPy arrays (cuFFT through ``cupy.fft``).
"""

from __future__ import annotations

import functools
import math

import cupy
import cupyx.scipy.fft as _cfft
import numpy as np

from . import gemm as _gemm
from . import build
from .build import blocks, ftype, launch
from .base import _contig, _dev, _sm_count
from .shape import _swap
from ..host import spectral as _host

build.declare("spectral", [f"spectral_mix<{t}, {a}>" for t in build.FLOATS for a in ("false", "true")]
              + [f"{k}<{t}>" for k in ("spectral_dw", "spectral_finish") for t in build.FLOATS])

DFT_MAX_MODES = 64          # above this the DFT GEMM's flops (4 modes per element) outgrow cuFFT's passes
DFT_MAX_TABLE = 1 << 24     # entries of the (2 modes, grid) table: larger grids go to cuFFT
FORCE_PATH = None           # "dft" or "fft" to pin the path (benchmarks and tests); None: by shape
SPLIT = None                # chunks of the grid axis in the DFT GEMM; None: by shape

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_MIX_TB = 4                 # MIX_TB of src/spectral.cu
_DW_TI = 4                  # DW_TI of src/spectral.cu
_TABLES: dict = {}


def _inputs(x, w_re, w_im, g=None):
    """Device, C-contiguous operands in x's dtype, or None where the native path does not apply."""
    x, w_re, w_im = _dev(x), _dev(w_re), _dev(w_im)
    if x.ndim != 3 or x.dtype not in (_F32, _F64) or w_re.ndim != 3 or w_im.shape != w_re.shape:
        return None
    B, n, cin = x.shape
    modes, wi, cout = w_re.shape
    if wi != cin or not 1 <= modes <= n // 2 + 1 or 0 in (B, n, cin, cout):
        return None
    if g is not None:
        g = _dev(g)
        if g.shape != (B, n, cout) or g.dtype.kind != "f":
            return None
        g = _contig(g.astype(x.dtype, copy=False))
    cast = [_contig(a.astype(x.dtype, copy=False)) if a.dtype.kind == "f" else None for a in (w_re, w_im)]
    if cast[0] is None or cast[1] is None:
        return None
    return _contig(x), cast[0], cast[1], g


def _unit(r, n):
    """cos and sin of 2 pi r / n (r integer in [0, n)), exactly 0 on the axes."""
    a = r.astype(np.float64) * (2.0 * math.pi / n)
    c, s = cupy.cos(a), cupy.sin(a)
    s[(2 * r) % n == 0] = 0.0
    c[((4 * r) % n == 0) & ((2 * r) % n != 0)] = 0.0
    return c, s


def _tables(n, modes, S, dtype):
    """(forward table (2 modes, n/S), inverse table (n, 2 modes), chunk twiddles (2, modes, S) or None)."""
    key = (n, modes, S, dtype, cupy.cuda.Device().id)
    t = _TABLES.get(key)
    if t is not None:
        return t
    if len(_TABLES) >= 32:
        _TABLES.clear()
    L = n // S
    k = cupy.arange(modes, dtype=np.int64)[:, None]
    c, s = _unit(k * cupy.arange(n, dtype=np.int64)[None, :] % n, n)           # (modes, n)
    fwd = cupy.ascontiguousarray(cupy.concatenate([c[:, :L], -s[:, :L]]).astype(dtype))
    w = cupy.where((k == 0) | (2 * k == n), 1.0, 2.0) / n
    inv = cupy.ascontiguousarray(cupy.concatenate([w * c, -w * s]).T.astype(dtype))
    tw = None
    if S > 1:
        tc, ts = _unit(k * cupy.arange(S, dtype=np.int64)[None, :] * L % n, n)
        tw = cupy.ascontiguousarray(cupy.stack([tc, -ts]).astype(dtype))
    t = _TABLES[key] = (fwd, inv, tw)
    return t


def _split(B, n, modes, c):
    """Chunks S of the grid axis: enough independent (2 modes x c) GEMM tiles for one per SM.

    At batch 32, grid 4096, 64 channels, 32 modes an H100 ran the forward GEMM in 98, 71, 45,
    33, 34, 36 us for S = 1, 2, 4, 8, 16, 32; this rule picks 8 there (chunks of at least 256)."""
    if SPLIT is not None:
        return SPLIT if n % SPLIT == 0 else 1
    tiles = B * -(-2 * modes // 64) * -(-c // 64)
    S = 1
    while tiles * S < _sm_count() and n % (2 * S) == 0 and n // (2 * S) >= 256:
        S *= 2
    return S


def _use_fft(n, modes):
    if FORCE_PATH is not None:
        return FORCE_PATH == "fft"
    return modes > DFT_MAX_MODES or 2 * modes * n > DFT_MAX_TABLE


def _spectrum(v, modes, fft, S, tabs):
    """Bins k < modes of rfft(v) along axis 1, as (array, its strides (b, k, c, im) in reals)."""
    B, n, c = v.shape
    if fft:
        bins = n // 2 + 1
        z = _cfft.rfft(_swap(v, B, n, c, 1).reshape(B, c, n), axis=-1)     # (B, c, bins) complex
        return z, (2 * c * bins, 2, 2 * bins, 1)
    z = _gemm.gemm(tabs[0], v.reshape(B * S, n // S, c))                    # (B S, 2 modes, c)
    if S > 1:
        p, z = z, cupy.empty((B, 2 * modes, c), dtype=v.dtype)
        i64 = np.int64
        launch("spectral", f"spectral_finish<{ftype(v.dtype, 'spectral_conv1d_rfft')}>",
               blocks(B * modes * c, 256), 256, (p, tabs[2], z, i64(B), np.int32(S), i64(modes), i64(c)))
    return z, (2 * modes * c, c, 1, modes * c)


def _threads(c):
    return min(128, 32 * -(-c // 32))


def _conv(v, w_re, w_im, adj):
    """irfft of the mixed modes of rfft(v): the forward (adj False) or the input gradient (adj True)."""
    B, n, C = v.shape
    modes = w_re.shape[0]
    fft = _use_fft(n, modes)
    S = 1 if fft else _split(B, n, modes, C)
    tabs = None if fft else _tables(n, modes, S, v.dtype)
    z, zs = _spectrum(v, modes, fft, S, tabs)
    return _mix_back(z, zs, w_re, w_im, adj, B, n, C, v.dtype, fft, tabs)


def _mix_back(z, zs, w_re, w_im, adj, B, n, C, dtype, fft, tabs):
    """irfft of spectrum ``z`` (bins < modes, strides ``zs``) mixed by W (adj: W^H), (B, n, D)."""
    modes, cin, cout = w_re.shape
    D = cin if adj else cout
    t = ftype(dtype, "spectral_conv1d_rfft")
    if fft:
        bins = n // 2 + 1
        y = cupy.zeros((B, D, bins), dtype=np.complex64 if dtype == _F32 else np.complex128)
        ys, scale = (2 * D * bins, 2, 2 * bins, 1), 1.0 / n
    else:
        y = cupy.empty((B, 2 * modes, D), dtype=dtype)
        ys, scale = (2 * modes * D, D, 1, modes * D), 1.0
    th = _threads(D)
    nbt, ndt = blocks(B, _MIX_TB), blocks(D, th)
    i64 = np.int64
    launch("spectral", f"spectral_mix<{t}, {'true' if adj else 'false'}>", modes * nbt * ndt, th,
           (z, *map(i64, zs), w_re, w_im, y, *map(i64, ys),
            i64(B), i64(modes), i64(C), i64(D), i64(n), i64(nbt), i64(ndt), dtype.type(scale)))
    if fft:
        yt = _cfft.irfft(y, n=n, axis=-1, norm="forward", overwrite_x=True)   # unnormalized: 1/n is in y
        return _swap(yt, B, D, n, 1).reshape(B, n, D)
    return _gemm.gemm(tabs[1], y)                                            # (B, n, D)


def _bwd(x, w_re, w_im, g, need_x, need_w):
    """(dx, dw_re, dw_im), None where not needed; rfft(g) is computed once for all three."""
    B, n, cin = x.shape
    modes, _, cout = w_re.shape
    fft = _use_fft(n, modes)
    S = 1 if fft else _split(B, n, modes, min(cin, cout))
    tabs = None if fft else _tables(n, modes, S, x.dtype)
    zg, gs = _spectrum(g, modes, fft, S, tabs)
    dx = _mix_back(zg, gs, w_re, w_im, True, B, n, cout, x.dtype, fft, tabs) if need_x else None
    if not need_w:
        return dx, None, None
    return (dx,) + _dw_from(_spectrum(x, modes, fft, S, tabs), (zg, gs), B, n, cin, cout, modes, x.dtype)


def _dw_from(x_spec, g_spec, B, n, cin, cout, modes, dtype):
    (zx, xs), (zg, gs) = x_spec, g_spec
    t = ftype(dtype, "spectral_conv1d_rfft_bwd_w")
    dre = cupy.empty((modes, cin, cout), dtype=dtype)
    dim = cupy.empty((modes, cin, cout), dtype=dtype)
    th = _threads(cout)
    nit, nott = blocks(cin, _DW_TI), blocks(cout, th)
    i64 = np.int64
    launch("spectral", f"spectral_dw<{t}>", modes * nit * nott, th,
           (zx, *map(i64, xs), zg, *map(i64, gs), dre, dim,
            i64(B), i64(modes), i64(cin), i64(cout), i64(n), i64(nit), i64(nott)))
    return dre, dim


def spectral_conv1d_rfft_fwd(x, w_re, w_im):
    """y = irfft(Y) along axis 1, Y[:, k] = rfft(x)[:, k] (w_re[k] + i w_im[k]) for k < modes, else 0.

    ``x`` (batch, grid, in), weights (modes, in, out) -> (batch, grid, out) in x's dtype."""
    ops = _inputs(x, w_re, w_im)
    if ops is None:
        return _host.spectral_conv1d_rfft_fwd(x, w_re, w_im, xp=cupy)
    x, w_re, w_im, _ = ops
    return _conv(x, w_re, w_im, False)


def spectral_conv1d_rfft_bwd_x(x, w_re, w_im, g):
    """dx = irfft(rfft(g)[:, :modes] W^H): the forward with the conjugate-transposed weights."""
    return spectral_conv1d_rfft_bwd(x, w_re, w_im, g, True, False)[0]


def spectral_conv1d_rfft_bwd_wre(x, w_re, w_im, g):
    """dw_re = Re(sum_b conj(X) c rfft(g)), c = 1/n at DC and Nyquist, 2/n inside; (modes, in, out)."""
    return spectral_conv1d_rfft_bwd(x, w_re, w_im, g, False, True)[1]


def spectral_conv1d_rfft_bwd_wim(x, w_re, w_im, g):
    """dw_im = Im(sum_b conj(X) c rfft(g)); computed with dw_re by one kernel."""
    return spectral_conv1d_rfft_bwd(x, w_re, w_im, g, False, True)[2]


def spectral_conv1d_rfft_bwd(x, w_re, w_im, g, need_x, need_w):
    """(dx, dw_re, dw_im), None where not needed: the three gradients with one rfft of g (and
    one of x when the weight gradients are needed)."""
    ops = _inputs(x, w_re, w_im, g)
    if ops is None:
        return _host.spectral_conv1d_rfft_bwd(x, w_re, w_im, g, need_x, need_w, xp=cupy)
    x, w_re, w_im, g = ops
    return _bwd(x, w_re, w_im, g, need_x, need_w)


# ---- the packed real FFT: the host kernels over CuPy arrays (no native kernels) -------------

rfft1d_packed = functools.partial(_host.rfft1d_packed, xp=cupy)
irfft1d_packed = functools.partial(_host.irfft1d_packed, xp=cupy)
