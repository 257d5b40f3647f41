"""CUDA kernels of the scan family: the selective scan, serial in time and parallel over batch rows
and state channels (``src/scan.cu``); the cumulative ops through CuPy (the host's code)."""

from __future__ import annotations

import math
from functools import partial

import cupy
import numpy as np

from ..host import scan as host_scan
from . import build
from .base import _THREADS, _contig, _dev
from .build import blocks, ftype, launch
from .reduce import reduce_sum_axis0

build.declare("scan", [f"{k}<{t}, {v}>" for k in ("scan_fwd", "scan_bwd") for t in build.FLOATS
                       for v in ("false", "true")])


def _scan_inputs(a, b, x, h0, var, name):
    x = _contig(_dev(x))
    dtype = x.dtype
    t = ftype(dtype, name)
    L, S = x.shape[-2], x.shape[-1]
    lead = x.shape[:-2]
    shape_as = x.shape if var else (S,)

    def prep(v, shape):
        return _contig(cupy.broadcast_to(_dev(v), shape).astype(dtype, copy=False))

    return t, prep(a, shape_as), prep(b, shape_as), x, prep(h0, lead + (S,)), math.prod(lead), L, S


def _scan_fwd(a, b, x, h0, var):
    name = "selective_scan_diag_var_fwd" if var else "selective_scan_diag_fwd"
    t, a, b, x, h0, B, L, S = _scan_inputs(a, b, x, h0, var, name)
    h = cupy.empty(x.shape, dtype=x.dtype)
    launch("scan", f"scan_fwd<{t}, {'true' if var else 'false'}>", blocks(B * S, _THREADS) if L else 0, _THREADS,
           (a, b, x, h0, h, np.int64(B), np.int64(L), np.int64(S)))
    return h


def _scan_bwd(a, b, x, h0, h, g, var):
    name = "selective_scan_diag_var_bwd" if var else "selective_scan_diag_bwd"
    t, a, b, x, h0, B, L, S = _scan_inputs(a, b, x, h0, var, name)
    h = _contig(_dev(h).astype(x.dtype, copy=False))
    g = _contig(cupy.broadcast_to(_dev(g), x.shape).astype(x.dtype, copy=False))
    dx = cupy.empty(x.shape, dtype=x.dtype)
    dh0 = cupy.zeros(h0.shape, dtype=x.dtype)
    if var:
        da, db = cupy.empty(x.shape, dtype=x.dtype), cupy.empty(x.shape, dtype=x.dtype)
    else:
        da, db = cupy.zeros((B, S), dtype=x.dtype), cupy.zeros((B, S), dtype=x.dtype)
    launch("scan", f"scan_bwd<{t}, {'true' if var else 'false'}>", blocks(B * S, _THREADS) if L else 0, _THREADS,
           (a, b, x, h0, h, g, dx, dh0, da, db, np.int64(B), np.int64(L), np.int64(S)))
    if not var:
        da, db = reduce_sum_axis0(da), reduce_sum_axis0(db)
    return da, db, dx, dh0


def selective_scan_diag_fwd(a, b, x, h0):
    return _scan_fwd(a, b, x, h0, False)


def selective_scan_diag_bwd(a, b, x, h0, h, g):
    return _scan_bwd(a, b, x, h0, h, g, False)


def selective_scan_diag_var_fwd(a, b, x, h0):
    return _scan_fwd(a, b, x, h0, True)


def selective_scan_diag_var_bwd(a, b, x, h0, h, g):
    return _scan_bwd(a, b, x, h0, h, g, True)


# ---- cumulative ops along one axis: the host's code on CuPy -------------------------------------

cumsum = partial(host_scan.cumsum, xp=cupy)
cumprod = partial(host_scan.cumprod, xp=cupy)
cumprod_bwd = partial(host_scan.cumprod_bwd, xp=cupy)
cumargmax = partial(host_scan.cumargmax, xp=cupy)
cumargmin = partial(host_scan.cumargmin, xp=cupy)
