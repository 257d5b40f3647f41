"""CUDA kernels of the optim family: each update one launch, Adam over many tensors at once
(``src/optim.cu``)."""

from __future__ import annotations

import math
import struct

import cupy
import numpy as np

from . import build
from .base import _EW_PER_BLOCK, _ND, _THREADS, _contig, _dev
from .build import blocks, ftype, launch, launch_function

MULTI_TENSORS = 24  # tensors per launch of the multi-tensor optimizer kernels (MT in src/optim.cu)

build.declare("optim", [f"{k}<{t}>" for k in ("sgd_kernel", "adam_kernel", "adagrad_kernel", "rmsprop_kernel",
                                               "adadelta_kernel", "adam_multi_kernel") for t in build.FLOATS])


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


_MT = MULTI_TENSORS


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
