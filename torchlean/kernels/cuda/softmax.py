"""CUDA kernels of the softmax family: rows held in registers where they fit (``src/softmax.cu``)."""

from __future__ import annotations

import builtins

import cupy
import numpy as np

from . import build
from .base import _THREADS, _aligned, _contig, _dev
from .build import blocks, ftype, launch

REG_WARP = (1, 2, 4, 8)         # elements per lane of the register-resident softmax rows (a warp a row)
REG_BLOCK = (2, 4, 8, 16, 32)   # elements per thread when a block of 64..1024 threads holds a row
# Largest N per thread that fits the 64 registers that __launch_bounds__(1024) allows without
# (more than a few bytes of) spilling, from ptxas's report on sm_90.
REG_BLOCK_MAX = {("softmax_reg", "float"): 32, ("softmax_reg", "double"): 16,
                 ("softmax_bwd_reg", "float"): 16, ("softmax_bwd_reg", "double"): 8}

build.declare("softmax",
              [f"softmax_fwd<{t}, {m}, {b}>" for t in build.FLOATS for m in (0, 1) for b in ("false", "true")]
              + [f"masked_softmax_fwd<{t}, {b}>" for t in build.FLOATS for b in ("false", "true")]
              + [f"softmax_bwd<{t}, {m}, {b}>" for t in build.FLOATS for m in (0, 1) for b in ("false", "true")]
              + [f"{k}<{t}, {m}, {n}, false>" for k in ("softmax_reg", "softmax_bwd_reg") for t in build.FLOATS
                 for m in (0, 1) for n in REG_WARP]
              + [f"{k}<{t}, {m}, {n}, true>" for k in ("softmax_reg", "softmax_bwd_reg") for t in build.FLOATS
                 for m in (0, 1) for n in REG_BLOCK if n <= REG_BLOCK_MAX[(k, t)]])


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
    n = builtins.max(n, REG_BLOCK[0])
    return (threads, n) if n <= top else None


def _reg_launch(kernel, t, rows, cols, args, mode) -> bool:
    """Launch the register-resident row kernel when the row fits; False when it does not.

    Up to 256 columns a warp holds a row (eight rows per block); longer rows get a block of
    64 to 1024 threads with N elements each.
    """
    if cols <= 32 * REG_WARP[-1]:
        n = next(k for k in REG_WARP if 32 * k >= cols)
        launch("softmax", f"{kernel}<{t}, {mode}, {n}, false>", blocks(rows, _THREADS // 32), _THREADS, args)
        return True
    tn = _row_block(cols, REG_BLOCK_MAX[(kernel, t)])
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
