"""CUDA kernels of the scan family: the selective scan, serial in time and parallel over batch rows
and state channels (``src/scan.cu``); the recurrences of RNN, LSTM and GRU (per time step one
cuBLAS product on raw pointers and one fused cell kernel, launched with their arguments packed
once); the cumulative ops through CuPy (the host's code)."""

from __future__ import annotations

import math
from functools import partial

import cupy
import numpy as np

from ..host import scan as host_scan
from . import build
from .base import _THREADS, _contig, _dev
from .build import Launcher, blocks, ftype, launch
from .gemm import gemm_ptr, matmul
from .reduce import reduce_sum_axis0

_CELLS = ("lstm_cell_fwd", "lstm_cell_bwd", "gru_cell_fwd", "gru_cell_bwd", "rnn_cell_fwd", "rnn_cell_bwd")
build.declare("scan", [f"{k}<{t}, {v}>" for k in ("scan_fwd", "scan_bwd") for t in build.FLOATS
                       for v in ("false", "true")] + [f"{k}<{t}>" for k in _CELLS for t in build.FLOATS])


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


# ---- recurrences --------------------------------------------------------------------------------
# Pointers into the time-major buffers are computed here (base + offset), so a step costs one
# cuBLAS call and one packed launch. Products: row-major (N, G) += (N, H) @ w_hh^T is, read
# column-major, C^T (G x N) += w_hh (op T on the stored H x G) @ h^T; the backward's
# (N, H) += (N, G) @ w_hh is C^T (H x N) += w_hh^T (op N) @ d^T.

_OP_N, _OP_T = 0, 1
_CELL_THREADS = 256
_CELL_FMT = {"lstm_cell_fwd": "PPPPPqqqq", "lstm_cell_bwd": "PPPPPPPPqqqq", "gru_cell_fwd": "PPPPPPPqqq",
             "gru_cell_bwd": "PPPPPPPPqqq", "rnn_cell_fwd": "PPPqqqq", "rnn_cell_bwd": "PPPPPqqqq"}
_launchers: dict = {}


def _cell(name, dtype, op):
    t = ftype(dtype, op)
    f = _launchers.get((name, t))
    if f is None:
        f = _launchers[(name, t)] = Launcher(build.function("scan", f"{name}<{t}>"), _CELL_FMT[name])
    return f


def _floats(dtype, *xs):
    return tuple(_contig(_dev(x).astype(dtype, copy=False)) for x in xs)


def _mask(mask):
    """The (T, N) bool mask (host or device) as device bytes, and its pointer (0: no held steps)."""
    if mask is None:
        return None, 0
    m = _contig(_dev(mask).astype(cupy.uint8))
    return m, m.data.ptr


def _hprev(h0, hs):
    return cupy.concatenate([h0[None], hs[:-1]]).reshape(-1, h0.shape[-1])


def lstm_scan_fwd(gx, w_hh, h0, c0, mask):
    gx = _contig(_dev(gx))
    dt = gx.dtype
    w, h0, c0 = _floats(dt, w_hh, h0, c0)
    T, N, G = gx.shape
    H = G // 4
    cell = _cell("lstm_cell_fwd", dt, "lstm_scan_fwd")
    acts = gx.copy()
    states = cupy.empty((2, T, N, H), dtype=dt)
    m, mp = _mask(mask)
    isz, nb = dt.itemsize, blocks(N * H, _CELL_THREADS)
    ap, sp, wp = acts.data.ptr, states.data.ptr, w.data.ptr
    for t in range(T):
        hp = sp + (t - 1) * N * H * isz if t else h0.data.ptr
        gemm_ptr(dt, _OP_T, _OP_N, G, N, H, wp, H, hp, H, ap + t * N * G * isz, G, True)
        cell(nb, _CELL_THREADS, ap, sp, h0.data.ptr, c0.data.ptr, mp, t, T, N, H)
    return states, acts


def lstm_scan_bwd(w_hh, h0, c0, mask, states, acts, g):
    acts = _contig(_dev(acts))
    dt = acts.dtype
    w, h0, c0, states, g = _floats(dt, w_hh, h0, c0, states, g)
    T, N, G = acts.shape
    H = G // 4
    cell = _cell("lstm_cell_bwd", dt, "lstm_scan_bwd")
    dgx = cupy.empty_like(acts)
    dh, dc = cupy.zeros((N, H), dtype=dt), cupy.zeros((N, H), dtype=dt)
    m, mp = _mask(mask)
    isz, nb = dt.itemsize, blocks(N * H, _CELL_THREADS)
    dp = dgx.data.ptr
    for t in range(T - 1, -1, -1):
        cell(nb, _CELL_THREADS, acts.data.ptr, states.data.ptr, c0.data.ptr, mp, g.data.ptr, dp, dh.data.ptr,
             dc.data.ptr, t, T, N, H)
        gemm_ptr(dt, _OP_N, _OP_N, H, N, G, w.data.ptr, H, dp + t * N * G * isz, G, dh.data.ptr, H, True)
    dw = matmul(dgx.reshape(-1, G).T, _hprev(h0, states[0]))
    return dgx, dw, dh, dc


def gru_scan_fwd(gx, w_hh, b_hh, h0, mask):
    gx = _contig(_dev(gx))
    dt = gx.dtype
    w, b, h0 = _floats(dt, w_hh, b_hh, h0)
    T, N, G = gx.shape
    H = G // 3
    cell = _cell("gru_cell_fwd", dt, "gru_scan_fwd")
    acts = cupy.empty((T, N, 4 * H), dtype=dt)
    hs = cupy.empty((T, N, H), dtype=dt)
    a = cupy.empty((N, G), dtype=dt)
    m, mp = _mask(mask)
    isz, nb = dt.itemsize, blocks(N * H, _CELL_THREADS)
    hsp = hs.data.ptr
    for t in range(T):
        hp = hsp + (t - 1) * N * H * isz if t else h0.data.ptr
        gemm_ptr(dt, _OP_T, _OP_N, G, N, H, w.data.ptr, H, hp, H, a.data.ptr, G, False)
        cell(nb, _CELL_THREADS, gx.data.ptr, a.data.ptr, b.data.ptr, acts.data.ptr, hsp, h0.data.ptr, mp, t, N, H)
    return hs, acts


def gru_scan_bwd(w_hh, h0, mask, hs, acts, g):
    hs = _contig(_dev(hs))
    dt = hs.dtype
    w, h0, acts, g = _floats(dt, w_hh, h0, acts, g)
    T, N, H = hs.shape
    G = 3 * H
    cell = _cell("gru_cell_bwd", dt, "gru_scan_bwd")
    dgx = cupy.empty((T, N, G), dtype=dt)
    da = cupy.empty((T, N, G), dtype=dt)
    dh = cupy.zeros((N, H), dtype=dt)
    m, mp = _mask(mask)
    isz, nb = dt.itemsize, blocks(N * H, _CELL_THREADS)
    for t in range(T - 1, -1, -1):
        cell(nb, _CELL_THREADS, acts.data.ptr, hs.data.ptr, h0.data.ptr, mp, g.data.ptr, dgx.data.ptr, da.data.ptr,
             dh.data.ptr, t, N, H)
        gemm_ptr(dt, _OP_N, _OP_N, H, N, G, w.data.ptr, H, da.data.ptr + t * N * G * isz, G, dh.data.ptr, H, True)
    da2 = da.reshape(-1, G)
    return dgx, matmul(da2.T, _hprev(h0, hs)), reduce_sum_axis0(da2), dh


def rnn_scan_fwd(gx, w_hh, h0, mask, relu):
    gx = _contig(_dev(gx))
    dt = gx.dtype
    w, h0 = _floats(dt, w_hh, h0)
    T, N, H = gx.shape
    cell = _cell("rnn_cell_fwd", dt, "rnn_scan_fwd")
    hs = gx.copy()
    m, mp = _mask(mask)
    isz, nb = dt.itemsize, blocks(N * H, _CELL_THREADS)
    hsp = hs.data.ptr
    for t in range(T):
        hp = hsp + (t - 1) * N * H * isz if t else h0.data.ptr
        gemm_ptr(dt, _OP_T, _OP_N, H, N, H, w.data.ptr, H, hp, H, hsp + t * N * H * isz, H, True)
        cell(nb, _CELL_THREADS, hsp, h0.data.ptr, mp, t, N, H, int(bool(relu)))
    return hs


def rnn_scan_bwd(w_hh, h0, mask, hs, g, relu):
    hs = _contig(_dev(hs))
    dt = hs.dtype
    w, h0, g = _floats(dt, w_hh, h0, g)
    T, N, H = hs.shape
    cell = _cell("rnn_cell_bwd", dt, "rnn_scan_bwd")
    dgx = cupy.empty_like(hs)
    dh = cupy.zeros((N, H), dtype=dt)
    m, mp = _mask(mask)
    isz, nb = dt.itemsize, blocks(N * H, _CELL_THREADS)
    for t in range(T - 1, -1, -1):
        cell(nb, _CELL_THREADS, hs.data.ptr, mp, g.data.ptr, dgx.data.ptr, dh.data.ptr, t, N, H, int(bool(relu)))
        gemm_ptr(dt, _OP_N, _OP_N, H, N, H, w.data.ptr, H, dgx.data.ptr + t * N * H * isz, H, dh.data.ptr, H, True)
    return dgx, matmul(dgx.reshape(-1, H).T, _hprev(h0, hs)), dh


# ---- cumulative ops along one axis: the host's code on CuPy -------------------------------------

cumsum = partial(host_scan.cumsum, xp=cupy)
cumprod = partial(host_scan.cumprod, xp=cupy)
cumprod_bwd = partial(host_scan.cumprod_bwd, xp=cupy)
cumargmax = partial(host_scan.cumargmax, xp=cupy)
cumargmin = partial(host_scan.cumargmin, xp=cupy)
