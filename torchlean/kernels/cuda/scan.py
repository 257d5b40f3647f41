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
from . import gemm, graphs
from .gemm import matmul
from .reduce import reduce_sum_axis0

_CELLS = ("lstm_cell_fwd", "lstm_cell_bwd", "gru_cell_fwd", "gru_cell_bwd", "rnn_cell_fwd", "rnn_cell_bwd")
build.declare("scan", [f"{k}<{t}, {v}>" for k in ("scan_fwd", "scan_bwd") for t in build.FLOATS
                       for v in ("false", "true")] + [f"{k}<{t}>" for k in _CELLS for t in build.FLOATS]
              + ["rec_fill_table"] + [f"cumsum_k<{t}>" for t in build.FLOATS])


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
# A layer's time loop is T steps of (one cuBLAS product, one cell kernel). The products run on
# scratch buffers (w_hh copied in; the state h or the step's gate cotangents, which the cells copy
# there; the result); the cells find the call's buffers through a small device table that one
# kernel fills per call (src/scan.cu). So the loop is captured once per (kernel, dtype, T, N, H)
# as a CUDA graph, with its scratch, and replayed: on an H100 one cuBLAS call costs about 14 us
# of host time and one launch 5 us, more than the GPU spends on a step of a 512-unit LSTM at
# batch 64 (16 us for both), so a loop issued step by step is host-bound. Inside a capture
# (tl.cuda.capture_step) and for short sequences the steps are issued one by one.
#
# Products: row-major (N, G) = (N, H) @ w_hh^T is, read column-major, C^T (G x N) = w_hh (op T on
# the stored H x G) @ h^T; the backward's (N, H) += (N, G) @ w_hh is C^T (H x N) += w_hh^T (op N) @ d^T.

_OP_N, _OP_T = 0, 1
_CELL_THREADS = 256
_CELL_FMT = {"lstm_cell_fwd": "Pqqqq", "lstm_cell_bwd": "Pqqqq", "gru_cell_fwd": "Pqqq", "gru_cell_bwd": "Pqqq",
             "rnn_cell_fwd": "Pqqqq", "rnn_cell_bwd": "Pqqqq"}
_launchers: dict = {}
_loops: dict = {}       # (kernel, dtype, T, N, H, relu, device) -> (scratch, table, graph)
_captures: dict = {}    # device -> the GraphCapture (pool, stream, cuBLAS workspace) the loop graphs share
#: Replay each recurrence's time loop as a CUDA graph (False: issue the steps one by one).
GRAPH_LOOPS = True
_MIN_GRAPH_T = 4
_MAX_LOOPS = 64


def _cell(name, dtype, op):
    t = ftype(dtype, op)
    f = _launchers.get((name, t))
    if f is None:
        f = _launchers[(name, t)] = Launcher(build.function("scan", f"{name}<{t}>"), _CELL_FMT[name])
    return f


def _filler():
    f = _launchers.get("fill")
    if f is None:
        f = _launchers["fill"] = Launcher(build.function("scan", "rec_fill_table"), "P" * 11 + "i")
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


def _loop(key, scratch_shapes, prepare, steps):
    """Run one time loop; returns its scratch arrays (valid until the next loop of this ``key``).

    ``key`` = (kernel, dtype, T, N, H, relu) names the loop's graph; ``scratch_shapes`` the
    product's buffers; ``prepare(scratch)`` copies the call's inputs into them and returns the
    table's addresses; ``steps(table address, scratch, mm, handle, one, zero)`` issues the steps."""
    dt, T = key[1], key[2]
    graphed = (GRAPH_LOOPS and T >= _MIN_GRAPH_T and not gemm.in_capture_scope()
               and not cupy.cuda.get_current_stream().is_capturing())
    dev = cupy.cuda.runtime.getDevice() if graphed else None
    entry = _loops.get(key + (dev,)) if graphed else None
    if entry is None:
        scratch = tuple(cupy.empty(shape, dtype=dt) for shape in scratch_shapes)
        tab = cupy.empty(10, dtype=np.uint64)
    else:
        scratch, tab, graph = entry
    bases = prepare(scratch)
    _filler()(1, 32, tab.data.ptr, *bases, *([0] * (10 - len(bases))), len(bases))
    if entry is not None:
        graph.launch()
        return scratch

    def run():
        mm, hd, one, zero = gemm.gemm_loop(dt)
        steps(tab.data.ptr, scratch, mm, hd, one, zero)

    if not graphed:
        run()
        return scratch
    cap = _captures.get(dev)
    if cap is None:
        cap = _captures[dev] = graphs.GraphCapture()
    else:
        cupy.cuda.Device().synchronize()  # the inputs, written on other streams, are ready
    with cap.scope():
        run()                               # the warm-up computes this call's result
        graph = cap.capture(run)
    if len(_loops) >= _MAX_LOOPS:  # sequences of many lengths: keep the most recent graphs
        _loops.pop(next(iter(_loops)))
    _loops[key + (dev,)] = (scratch, tab, graph)
    return scratch


def _check(st):
    if st:
        gemm.check_status(st)


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
    nblk = blocks(N * H, _CELL_THREADS)

    def prepare(S):
        zb, hb, wb = S
        wb[...] = w
        hb[...] = h0
        return acts.data.ptr, states.data.ptr, h0.data.ptr, c0.data.ptr, mp, zb.data.ptr, hb.data.ptr

    def steps(tp, S, mm, hd, one, zero):
        z, h, wp = (a.data.ptr for a in S)
        for t in range(T):
            _check(mm(hd, _OP_T, _OP_N, G, N, H, one, wp, H, h, H, zero, z, G))
            cell(nblk, _CELL_THREADS, tp, t, T, N, H)

    _loop(("lstm_fwd", dt, T, N, H, 0), ((N, G), (N, H), (G, H)), prepare, steps)
    return states, acts


def lstm_scan_bwd(w_hh, h0, c0, mask, states, acts, g):
    acts = _contig(_dev(acts))
    dt = acts.dtype
    w, h0, c0, states, g = _floats(dt, w_hh, h0, c0, states, g)
    T, N, G = acts.shape
    H = G // 4
    cell = _cell("lstm_cell_bwd", dt, "lstm_scan_bwd")
    dgx = cupy.empty_like(acts)
    dc = cupy.zeros((N, H), dtype=dt)
    m, mp = _mask(mask)
    nblk = blocks(N * H, _CELL_THREADS)

    def prepare(S):
        db, dh, wb = S
        wb[...] = w
        dh.fill(0)
        return (acts.data.ptr, states.data.ptr, c0.data.ptr, mp, g.data.ptr, dgx.data.ptr, dh.data.ptr, dc.data.ptr,
                db.data.ptr)

    def steps(tp, S, mm, hd, one, zero):
        d, dh, wp = (a.data.ptr for a in S)
        for t in range(T - 1, -1, -1):
            cell(nblk, _CELL_THREADS, tp, t, T, N, H)
            _check(mm(hd, _OP_N, _OP_N, H, N, G, one, wp, H, d, G, one, dh, H))

    dh = _loop(("lstm_bwd", dt, T, N, H, 0), ((N, G), (N, H), (G, H)), prepare, steps)[1].copy()
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
    m, mp = _mask(mask)
    nblk = blocks(N * H, _CELL_THREADS)

    def prepare(S):
        ab, hb, wb = S
        wb[...] = w
        hb[...] = h0
        return (gx.data.ptr, ab.data.ptr, b.data.ptr, acts.data.ptr, hs.data.ptr, h0.data.ptr, mp, hb.data.ptr)

    def steps(tp, S, mm, hd, one, zero):
        a, h, wp = (v.data.ptr for v in S)
        for t in range(T):
            _check(mm(hd, _OP_T, _OP_N, G, N, H, one, wp, H, h, H, zero, a, G))
            cell(nblk, _CELL_THREADS, tp, t, N, H)

    _loop(("gru_fwd", dt, T, N, H, 0), ((N, G), (N, H), (G, H)), prepare, steps)
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
    m, mp = _mask(mask)
    nblk = blocks(N * H, _CELL_THREADS)

    def prepare(S):
        db, dh, wb = S
        wb[...] = w
        dh.fill(0)
        return (acts.data.ptr, hs.data.ptr, h0.data.ptr, mp, g.data.ptr, dgx.data.ptr, da.data.ptr, dh.data.ptr,
                db.data.ptr)

    def steps(tp, S, mm, hd, one, zero):
        d, dh, wp = (v.data.ptr for v in S)
        for t in range(T - 1, -1, -1):
            cell(nblk, _CELL_THREADS, tp, t, N, H)
            _check(mm(hd, _OP_N, _OP_N, H, N, G, one, wp, H, d, G, one, dh, H))

    dh = _loop(("gru_bwd", dt, T, N, H, 0), ((N, G), (N, H), (G, H)), prepare, steps)[1].copy()
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
    nblk = blocks(N * H, _CELL_THREADS)
    r = int(bool(relu))

    def prepare(S):
        zb, hb, wb = S
        wb[...] = w
        hb[...] = h0
        return hs.data.ptr, h0.data.ptr, mp, zb.data.ptr, hb.data.ptr

    def steps(tp, S, mm, hd, one, zero):
        z, h, wp = (v.data.ptr for v in S)
        for t in range(T):
            _check(mm(hd, _OP_T, _OP_N, H, N, H, one, wp, H, h, H, zero, z, H))
            cell(nblk, _CELL_THREADS, tp, t, N, H, r)

    _loop(("rnn_fwd", dt, T, N, H, r), ((N, H), (N, H), (H, H)), prepare, steps)
    return hs


def rnn_scan_bwd(w_hh, h0, mask, hs, g, relu):
    hs = _contig(_dev(hs))
    dt = hs.dtype
    w, h0, g = _floats(dt, w_hh, h0, g)
    T, N, H = hs.shape
    cell = _cell("rnn_cell_bwd", dt, "rnn_scan_bwd")
    dgx = cupy.empty_like(hs)
    m, mp = _mask(mask)
    nblk = blocks(N * H, _CELL_THREADS)
    r = int(bool(relu))

    def prepare(S):
        db, dh, wb = S
        wb[...] = w
        dh.fill(0)
        return hs.data.ptr, mp, g.data.ptr, dgx.data.ptr, dh.data.ptr, db.data.ptr

    def steps(tp, S, mm, hd, one, zero):
        d, dh, wp = (v.data.ptr for v in S)
        for t in range(T - 1, -1, -1):
            cell(nblk, _CELL_THREADS, tp, t, N, H, r)
            _check(mm(hd, _OP_N, _OP_N, H, N, H, one, wp, H, d, H, one, dh, H))

    dh = _loop(("rnn_bwd", dt, T, N, H, r), ((N, H), (N, H), (H, H)), prepare, steps)[1].copy()
    return dgx, matmul(dgx.reshape(-1, H).T, _hprev(h0, hs)), dh


# ---- cumulative ops along one axis --------------------------------------------------------------

def cumsum(x, axis):
    """Running sum along ``axis``: floats in ``cumsum_k`` (one thread per line, float64 accumulator:
    the host's bits, and no CuPy kernel, which would flush float32 subnormals); others on CuPy."""
    x = _dev(x)
    if x.dtype.kind != "f" or x.dtype.itemsize < 4:
        return host_scan.cumsum(x, axis, xp=cupy)
    x = _contig(x)
    axis = axis % x.ndim
    n = x.shape[axis]
    outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    y = cupy.empty(x.shape, x.dtype)
    lines = outer * inner
    if lines and n:
        launch("scan", f"cumsum_k<{ftype(x.dtype, 'cumsum')}>", blocks(lines, _THREADS), _THREADS,
               (x, y, np.int64(outer), np.int64(n), np.int64(inner)))
    return y


cumprod = partial(host_scan.cumprod, xp=cupy)
cumprod_bwd = partial(host_scan.cumprod_bwd, xp=cupy)
cumargmax = partial(host_scan.cumargmax, xp=cupy)
cumargmin = partial(host_scan.cumargmin, xp=cupy)
