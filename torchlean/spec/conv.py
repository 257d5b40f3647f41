"""Convolution and pooling: the reference meaning, channels-first, 1 to 8 spatial axes.

Layouts (PyTorch's):

* input ``x``: ``(N, C, *spatial)`` or, without a batch axis, ``(C, *spatial)``;
* ``conv`` weight ``(C_out, C_in / groups, *k)``, ``conv_transpose`` weight
  ``(C_in, C_out / groups, *k)``, bias ``(C_out,)``;
* ``stride``, ``padding``, ``dilation``, ``output_padding`` and ``kernel_size``:
  one int per spatial axis (a bare int is repeated over the axes; the front end
  expands them anyway). Padding is symmetric zero padding.

Output length along a spatial axis of size ``S`` (floor mode)::

    conv, pools:     (S + 2 p - dil (k - 1) - 1) // s + 1
    conv_transpose:  (S - 1) s - 2 p + dil (k - 1) + output_padding + 1

Pooling conventions (DESIGN.md):

* ``max_pool``: padded cells never win; the cotangent goes to the first winner
  in row-major order of the window (the first NaN if the window holds one). A
  window lying wholly in padding is rejected, and so is ``padding > kernel/2``
  (PyTorch's rule), with a :class:`ShapeError`.
* ``avg_pool``: the divisor is ``prod(kernel_size)``; padded cells count as zeros
  (``count_include_pad=True``, PyTorch's default).
* ``smooth_max_pool``: ``(1/beta) log sum exp(beta x)`` over the window's real
  cells only -- padded cells contribute nothing (not even a zero), so the result
  tends to ``max_pool`` as ``beta -> +inf`` (and to a min-pool as ``beta -> -inf``).
  ``beta`` must be finite and non-zero (:class:`DomainError`). It is computed
  stably around the window maximum of ``beta x``.

The functions here are the definitions, written for clarity: each is a sum (or a
running max) over the ``prod(k)`` kernel offsets of shifted, strided slices. The
host kernels (:mod:`torchlean.kernels.host.conv`) compute the same thing another
way (im2col + BLAS), which is what makes the comparison meaningful.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> SPEC["avg_pool"].forward(np.ones((1, 3, 3)), kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))[0, 0]
    array([0.44444444, 0.66666667, 0.44444444])
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass
from math import prod

import numpy as np

from ..errors import DomainError, ShapeError
from .registry import defspec

MAX_SPATIAL = 8


# ---- attribute checks shared by the shape rules, the runtime rules and the front end --------

def _ints(op, name, v, d, lo):
    """``v`` as a ``d``-tuple of ints >= ``lo`` (a bare int is repeated over the axes)."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (int(v),) * d
    try:
        t = tuple(v)
    except TypeError:
        raise ShapeError(f"{op}: {name} must be an int or a sequence of {d} ints, got {v!r}") from None
    if len(t) != d:
        raise ShapeError(f"{op}: {name} {t} must have {d} entries (one per spatial axis)")
    for e in t:
        if not isinstance(e, numbers.Integral) or isinstance(e, bool):
            raise ShapeError(f"{op}: {name} {t} must hold ints")
        if e < lo:
            what = "positive" if lo == 1 else "non-negative"
            raise ShapeError(f"{op}: {name} {t} must be {what}")
    return tuple(int(e) for e in t)


def _check_d(op, d):
    if d < 1 or d > MAX_SPATIAL:
        raise ShapeError(f"{op}: {d} spatial axes; supported are 1 to {MAX_SPATIAL}")


def _split_input(op, x_shape, d):
    """(batched, N, C, spatial) of an input with ``d`` spatial axes, batch axis optional."""
    x_shape = tuple(x_shape)
    if len(x_shape) == d + 2:
        return True, x_shape[0], x_shape[1], x_shape[2:]
    if len(x_shape) == d + 1:
        return False, 1, x_shape[0], x_shape[1:]
    raise ShapeError(f"{op}: input {x_shape} must have {d + 1} axes (C, *spatial) or {d + 2} axes "
                     f"(N, C, *spatial) for {d} spatial axes")


def _out_len(S, k, s, p, dil):
    return (S + 2 * p - dil * (k - 1) - 1) // s + 1


def _empty_check(op, spatial, k, s, p, dil, out):
    if any(S < 1 for S in spatial) or any(o < 1 for o in out) or any(S + 2 * pi < di * (ki - 1) + 1
                                      for S, ki, pi, di in zip(spatial, k, p, dil)):
        extra = f", dilation {dil}" if any(v != 1 for v in dil) else ""
        raise ShapeError(f"{op}: empty output: input spatial shape {tuple(spatial)}, kernel {k}, "
                         f"stride {s}, padding {p}{extra}")


@dataclass(frozen=True)
class ConvParams:
    """Normalized arguments of conv / conv_transpose for given shapes."""
    batched: bool
    n: int
    c_in: int
    c_out: int
    spatial: tuple
    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    out_spatial: tuple
    output_padding: tuple = ()

    @property
    def out_shape(self):
        lead = (self.n,) if self.batched else ()
        return lead + (self.c_out,) + self.out_spatial


def conv_params(op, x_shape, w_shape, b_shape=None, *, stride=1, padding=0, dilation=1, groups=1,
                output_padding=None, transpose=False) -> ConvParams:
    """Check and normalize a (transposed) convolution; ShapeError naming ``op`` on any misfit."""
    w_shape = tuple(w_shape)
    if len(w_shape) < 3:
        raise ShapeError(f"{op}: weight {w_shape} must have at least 3 axes "
                         f"({'C_in, C_out/groups' if transpose else 'C_out, C_in/groups'}, *kernel)")
    d = len(w_shape) - 2
    _check_d(op, d)
    batched, n, c, spatial = _split_input(op, x_shape, d)
    k = w_shape[2:]
    if any(v == 0 for v in k) or w_shape[0] == 0 or w_shape[1] == 0:
        raise ShapeError(f"{op}: zero-size kernel/weight {w_shape}")
    s = _ints(op, "stride", stride, d, 1)
    p = _ints(op, "padding", padding, d, 0)
    dil = _ints(op, "dilation", dilation, d, 1)
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
        raise ShapeError(f"{op}: groups must be a positive int, got {groups!r}")
    groups = int(groups)
    if c == 0:
        raise ShapeError(f"{op}: input {tuple(x_shape)} has no channels")
    if c % groups:
        raise ShapeError(f"{op}: input channels {c} are not divisible by groups {groups}")
    if transpose:
        if w_shape[0] != c:
            raise ShapeError(f"{op}: weight {w_shape} expects {w_shape[0]} input channels "
                             f"(weight in-channels), input {tuple(x_shape)} has {c}")
        c_out = w_shape[1] * groups
        op_ = _ints(op, "output_padding", 0 if output_padding is None else output_padding, d, 0)
        for a, (o, si, di) in enumerate(zip(op_, s, dil)):
            if o >= si and o >= di:
                raise ShapeError(f"{op}: output_padding {op_} must be smaller than stride {s} or "
                                 f"dilation {dil} (axis {a})")
        out = tuple((S - 1) * si - 2 * pi + di * (ki - 1) + o + 1
                    for S, ki, si, pi, di, o in zip(spatial, k, s, p, dil, op_))
        if any(v < 1 for v in out) or any(S < 1 for S in spatial):
            raise ShapeError(f"{op}: empty output {out}: input spatial shape {tuple(spatial)}, kernel {k}, "
                             f"stride {s}, padding {p}, output_padding {op_}, dilation {dil}")
    else:
        if w_shape[0] % groups:
            raise ShapeError(f"{op}: weight {w_shape} out-channels {w_shape[0]} are not divisible "
                             f"by groups {groups}")
        if w_shape[1] * groups != c:
            raise ShapeError(f"{op}: weight {w_shape} expects {w_shape[1] * groups} input channels "
                             f"(weight in-channels {w_shape[1]} x groups {groups}), input "
                             f"{tuple(x_shape)} has {c}")
        c_out = w_shape[0]
        op_ = ()
        out = tuple(_out_len(S, ki, si, pi, di) for S, ki, si, pi, di in zip(spatial, k, s, p, dil))
        _empty_check(op, spatial, k, s, p, dil, out)
    if b_shape is not None and tuple(b_shape) != (c_out,):
        raise ShapeError(f"{op}: bias {tuple(b_shape)} must have shape ({c_out},)")
    return ConvParams(batched, n, c, c_out, tuple(spatial), tuple(k), s, p, dil, groups, out, op_)


@dataclass(frozen=True)
class PoolParams:
    """Normalized arguments of a pooling op for a given input shape."""
    lead: tuple
    spatial: tuple
    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    out_spatial: tuple

    @property
    def out_shape(self):
        return self.lead + self.out_spatial


def pool_params(op, x_shape, *, kernel_size, stride=None, padding=0, dilation=1) -> PoolParams:
    """Check and normalize a pooling op; ShapeError naming ``op`` on any misfit.

    ``stride=None`` means ``stride = kernel_size`` (PyTorch's default).
    """
    if isinstance(kernel_size, numbers.Integral) and not isinstance(kernel_size, bool):
        raise ShapeError(f"{op}: kernel_size must be a sequence with one entry per spatial axis, "
                         f"got {kernel_size!r}")
    try:
        d = len(kernel_size)
    except TypeError:
        raise ShapeError(f"{op}: kernel_size must be a sequence of ints, got {kernel_size!r}") from None
    _check_d(op, d)
    k = _ints(op, "kernel_size", kernel_size, d, 0)
    if any(v == 0 for v in k):
        raise ShapeError(f"{op}: zero-size kernel {k}")
    _, _, _, spatial = _split_input(op, x_shape, d)
    lead = tuple(x_shape)[:len(x_shape) - d]
    s = k if stride is None else _ints(op, "stride", stride, d, 1)
    p = _ints(op, "padding", padding, d, 0)
    dil = _ints(op, "dilation", dilation, d, 1)
    for a, (pi, ki) in enumerate(zip(p, k)):
        if 2 * pi > ki:
            raise ShapeError(f"{op}: padding {p} should be at most half of kernel_size {k} (axis {a})")
    out = tuple(_out_len(S, ki, si, pi, di) for S, ki, si, pi, di in zip(spatial, k, s, p, dil))
    _empty_check(op, spatial, k, s, p, dil, out)
    return PoolParams(lead, tuple(spatial), k, s, p, dil, out)


def check_no_padding_windows(op, P: PoolParams):
    """Reject a pooling window that lies wholly in padding (only dilation can make one)."""
    for a, (S, k, s, p, dil, n) in enumerate(zip(P.spatial, P.kernel, P.stride, P.padding,
                                                 P.dilation, P.out_spatial)):
        for o in range(n):
            if not any(0 <= o * s - p + j * dil < S for j in range(k)):
                raise ShapeError(f"{op}: output position {o} along spatial axis {a} reads a window lying "
                                 f"wholly in padding (input spatial shape {P.spatial}, kernel {P.kernel}, "
                                 f"stride {P.stride}, padding {P.padding}, dilation {P.dilation})")


def check_beta(op, beta):
    """``beta`` as a float; DomainError naming ``op`` unless it is finite and non-zero."""
    if not isinstance(beta, numbers.Real) or isinstance(beta, bool) or not math.isfinite(beta) or beta == 0:
        raise DomainError(f"{op}: beta must be a finite, non-zero number, got {beta!r}")
    return float(beta)


# ---- helpers of the definitions --------------------------------------------------------------

def _offsets(k):
    """Kernel offsets in row-major order."""
    return itertools.product(*(range(v) for v in k))


def _slab(off, stride, dil, count):
    """Slices over the last axes picking, for each output position o, the cell o*s + off*dil."""
    return (Ellipsis,) + tuple(slice(j * di, j * di + si * (n - 1) + 1, si)
                               for j, si, di, n in zip(off, stride, dil, count))


def _zero_pad(x, p):
    d = len(p)
    return np.pad(x, [(0, 0)] * (x.ndim - d) + [(v, v) for v in p])


def _crop(xp, p):
    d = len(p)
    return xp[(Ellipsis,) + tuple(slice(v, xp.shape[xp.ndim - d + i] - v) for i, v in enumerate(p))]


def _letters(d):
    return "pqrstuvw"[:d]


# ---- conv ------------------------------------------------------------------------------------

def _conv_forward(x, w, b=None, *, stride=1, padding=0, dilation=1, groups=1):
    P = conv_params("conv", x.shape, w.shape, None if b is None else b.shape, stride=stride,
                    padding=padding, dilation=dilation, groups=groups)
    G, d = P.groups, len(P.kernel)
    xb = x if P.batched else x[None]
    xg = _zero_pad(xb, P.padding).reshape(P.n, G, P.c_in // G, *[S + 2 * p for S, p in zip(P.spatial, P.padding)])
    wg = w.reshape(G, P.c_out // G, P.c_in // G, *P.kernel)
    O = _letters(d)
    y = np.zeros((P.n, G, P.c_out // G) + P.out_spatial, dtype=np.result_type(x, w))
    # y[n, o, P] = sum over offsets j and channels c of w[o, c, j] * xpad[n, c, P*s + j*dil]
    for off in _offsets(P.kernel):
        y += np.einsum(f"ngc{O},goc->ngo{O}", xg[_slab(off, P.stride, P.dilation, P.out_spatial)],
                       wg[(Ellipsis,) + off])
    y = y.reshape((P.n, P.c_out) + P.out_spatial)
    if b is not None:
        y = y + b.reshape((P.c_out,) + (1,) * d)
    return y if P.batched else y[0]


def _conv_vjp(g, x, w, b=None, *, stride=1, padding=0, dilation=1, groups=1):
    P = conv_params("conv", x.shape, w.shape, None if b is None else b.shape, stride=stride,
                    padding=padding, dilation=dilation, groups=groups)
    G, d = P.groups, len(P.kernel)
    xb = x if P.batched else x[None]
    gb = g if P.batched else g[None]
    xg = _zero_pad(xb, P.padding).reshape(P.n, G, P.c_in // G, *[S + 2 * p for S, p in zip(P.spatial, P.padding)])
    wg = w.reshape(G, P.c_out // G, P.c_in // G, *P.kernel)
    gg = gb.reshape((P.n, G, P.c_out // G) + P.out_spatial)
    O = _letters(d)
    dxg = np.zeros_like(xg, dtype=np.result_type(g, x))
    dwg = np.zeros_like(wg, dtype=np.result_type(g, w))
    for off in _offsets(P.kernel):
        sl = _slab(off, P.stride, P.dilation, P.out_spatial)
        dxg[sl] += np.einsum(f"ngo{O},goc->ngc{O}", gg, wg[(Ellipsis,) + off])
        dwg[(Ellipsis,) + off] = np.einsum(f"ngc{O},ngo{O}->goc", xg[sl], gg)
    dx = _crop(dxg.reshape((P.n, P.c_in) + dxg.shape[3:]), P.padding)
    dx = dx if P.batched else dx[0]
    dw = dwg.reshape(w.shape)
    db = None if b is None else gb.sum(axis=(0,) + tuple(range(2, 2 + d)))
    return dx, dw, db


def _conv_shape(x, w, b=None, *, stride=1, padding=0, dilation=1, groups=1):
    return conv_params("conv", x, w, b, stride=stride, padding=padding, dilation=dilation,
                       groups=groups).out_shape


def _conv_nobias_forward(x, w, *, stride=1, padding=0, dilation=1, groups=1):
    return _conv_forward(x, w, None, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _conv_nobias_vjp(g, x, w, *, stride=1, padding=0, dilation=1, groups=1):
    return _conv_vjp(g, x, w, None, stride=stride, padding=padding, dilation=dilation, groups=groups)[:2]


def _conv_nobias_shape(x, w, *, stride=1, padding=0, dilation=1, groups=1):
    return conv_params("conv_nobias", x, w, None, stride=stride, padding=padding, dilation=dilation,
                       groups=groups).out_shape


defspec("conv", _conv_forward, _conv_vjp, _conv_shape, 3)
defspec("conv_nobias", _conv_nobias_forward, _conv_nobias_vjp, _conv_nobias_shape, 2,
        why="conv without a zero bias to make, add and differentiate")


# ---- conv_transpose --------------------------------------------------------------------------

def _convt_setup(x, w, b, attrs):
    P = conv_params("conv_transpose", x.shape, w.shape, None if b is None else b.shape,
                    transpose=True, **attrs)
    G = P.groups
    xb = x if P.batched else x[None]
    xg = xb.reshape((P.n, G, P.c_in // G) + P.spatial)
    wg = w.reshape(G, P.c_in // G, P.c_out // G, *P.kernel)
    # The uncropped output: every x[i] scatters to i*s + j*dil - p, before the padding is cut off.
    full = tuple((S - 1) * s + di * (k - 1) + 1 + o
                 for S, s, di, k, o in zip(P.spatial, P.stride, P.dilation, P.kernel, P.output_padding))
    return P, xg, wg, full


def _convt_forward(x, w, b=None, *, stride=1, padding=0, output_padding=None, dilation=1, groups=1):
    attrs = dict(stride=stride, padding=padding, output_padding=output_padding, dilation=dilation, groups=groups)
    P, xg, wg, full = _convt_setup(x, w, b, attrs)
    d, G = len(P.kernel), P.groups
    O = _letters(d)
    yfull = np.zeros((P.n, G, P.c_out // G) + full, dtype=np.result_type(x, w))
    # y[n, o, i*s + j*dil - p] += x[n, c, i] * w[c, o, j]
    for off in _offsets(P.kernel):
        yfull[_slab(off, P.stride, P.dilation, P.spatial)] += np.einsum(
            f"ngc{O},gco->ngo{O}", xg, wg[(Ellipsis,) + off])
    y = _crop(yfull, P.padding).reshape((P.n, P.c_out) + P.out_spatial)
    if b is not None:
        y = y + b.reshape((P.c_out,) + (1,) * d)
    return y if P.batched else y[0]


def _convt_vjp(g, x, w, b=None, *, stride=1, padding=0, output_padding=None, dilation=1, groups=1):
    attrs = dict(stride=stride, padding=padding, output_padding=output_padding, dilation=dilation, groups=groups)
    P, xg, wg, full = _convt_setup(x, w, b, attrs)
    d, G = len(P.kernel), P.groups
    O = _letters(d)
    gb = g if P.batched else g[None]
    gfull = np.zeros((P.n, G, P.c_out // G) + full, dtype=g.dtype)
    _crop(gfull, P.padding)[...] = gb.reshape((P.n, G, P.c_out // G) + P.out_spatial)
    dxg = np.zeros_like(xg, dtype=np.result_type(g, x))
    dwg = np.zeros_like(wg, dtype=np.result_type(g, w))
    for off in _offsets(P.kernel):
        gs = gfull[_slab(off, P.stride, P.dilation, P.spatial)]
        dxg += np.einsum(f"ngo{O},gco->ngc{O}", gs, wg[(Ellipsis,) + off])
        dwg[(Ellipsis,) + off] = np.einsum(f"ngc{O},ngo{O}->gco", xg, gs)
    dx = dxg.reshape(x.shape)
    db = None if b is None else gb.sum(axis=(0,) + tuple(range(2, 2 + d)))
    return dx, dwg.reshape(w.shape), db


def _convt_shape(x, w, b=None, *, stride=1, padding=0, output_padding=None, dilation=1, groups=1):
    return conv_params("conv_transpose", x, w, b, stride=stride, padding=padding, dilation=dilation,
                       groups=groups, output_padding=output_padding, transpose=True).out_shape


def _convt_nobias_forward(x, w, *, stride=1, padding=0, output_padding=None, dilation=1, groups=1):
    return _convt_forward(x, w, None, stride=stride, padding=padding, output_padding=output_padding,
                          dilation=dilation, groups=groups)


def _convt_nobias_vjp(g, x, w, *, stride=1, padding=0, output_padding=None, dilation=1, groups=1):
    return _convt_vjp(g, x, w, None, stride=stride, padding=padding, output_padding=output_padding,
                      dilation=dilation, groups=groups)[:2]


def _convt_nobias_shape(x, w, *, stride=1, padding=0, output_padding=None, dilation=1, groups=1):
    return conv_params("conv_transpose_nobias", x, w, None, stride=stride, padding=padding,
                       dilation=dilation, groups=groups, output_padding=output_padding,
                       transpose=True).out_shape


defspec("conv_transpose", _convt_forward, _convt_vjp, _convt_shape, 3)
defspec("conv_transpose_nobias", _convt_nobias_forward, _convt_nobias_vjp, _convt_nobias_shape, 2,
        why="conv_transpose without a zero bias to make, add and differentiate")


# ---- pooling ---------------------------------------------------------------------------------

def _valid(P: PoolParams, off):
    """Boolean mask over the output positions: does offset ``off`` read a real (unpadded) cell?"""
    d = len(P.kernel)
    m = np.ones(P.out_spatial, dtype=bool)
    for a, (j, S, s, p, di, n) in enumerate(zip(off, P.spatial, P.stride, P.padding, P.dilation,
                                                P.out_spatial)):
        pos = np.arange(n) * s - p + j * di
        shape = [1] * d
        shape[a] = n
        m = m & ((pos >= 0) & (pos < S)).reshape(shape)
    return m


def _max_pool_winners(x, P: PoolParams):
    """(values, row-major offset index of the first winner) of every window, real cells only."""
    xp = _zero_pad(x, P.padding)
    best = np.full(P.out_shape, -np.inf, dtype=x.dtype)
    idx = np.full(P.out_shape, -1, dtype=np.int64)
    for j, off in enumerate(_offsets(P.kernel)):
        v = xp[_slab(off, P.stride, P.dilation, P.out_spatial)]
        # Strict ">" keeps the first winner; the first NaN of a window wins and stays.
        upd = _valid(P, off) & ((idx < 0) | (v > best) | (np.isnan(v) & ~np.isnan(best)))
        best = np.where(upd, v, best)
        idx = np.where(upd, j, idx)
    return best, idx


def _pool_attrs(kernel_size, stride, padding, dilation=1):
    return dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)


def _max_pool_forward(x, *, kernel_size, stride=None, padding=0, dilation=1):
    P = pool_params("max_pool", x.shape, **_pool_attrs(kernel_size, stride, padding, dilation))
    return _max_pool_winners(x, P)[0]


def _max_pool_vjp(g, x, *, kernel_size, stride=None, padding=0, dilation=1):
    P = pool_params("max_pool", x.shape, **_pool_attrs(kernel_size, stride, padding, dilation))
    _, idx = _max_pool_winners(x, P)
    dxp = np.zeros_like(_zero_pad(x, P.padding), dtype=g.dtype)
    for j, off in enumerate(_offsets(P.kernel)):
        dxp[_slab(off, P.stride, P.dilation, P.out_spatial)] += np.where(idx == j, g, 0.0)
    return (_crop(dxp, P.padding),)


def _max_pool_shape(x, *, kernel_size, stride=None, padding=0, dilation=1):
    P = pool_params("max_pool", x, **_pool_attrs(kernel_size, stride, padding, dilation))
    check_no_padding_windows("max_pool", P)
    return P.out_shape


defspec("max_pool", _max_pool_forward, _max_pool_vjp, _max_pool_shape, 1)


def _avg_pool_forward(x, *, kernel_size, stride=None, padding=0):
    P = pool_params("avg_pool", x.shape, kernel_size=kernel_size, stride=stride, padding=padding)
    xp = _zero_pad(x, P.padding)
    y = np.zeros(P.out_shape, dtype=x.dtype)
    for off in _offsets(P.kernel):
        y += xp[_slab(off, P.stride, P.dilation, P.out_spatial)]
    return y / prod(P.kernel)


def _avg_pool_vjp(g, x, *, kernel_size, stride=None, padding=0):
    P = pool_params("avg_pool", x.shape, kernel_size=kernel_size, stride=stride, padding=padding)
    dxp = np.zeros_like(_zero_pad(x, P.padding), dtype=g.dtype)
    for off in _offsets(P.kernel):
        dxp[_slab(off, P.stride, P.dilation, P.out_spatial)] += g / prod(P.kernel)
    return (_crop(dxp, P.padding),)


def _avg_pool_shape(x, *, kernel_size, stride=None, padding=0):
    return pool_params("avg_pool", x, kernel_size=kernel_size, stride=stride, padding=padding).out_shape


defspec("avg_pool", _avg_pool_forward, _avg_pool_vjp, _avg_pool_shape, 1)


def _smooth_parts(x, P: PoolParams, beta):
    """(beta * padded x, window max of beta x over real cells, log sum exp(beta x - max))."""
    zp = _zero_pad(x, P.padding) * beta
    m = np.full(P.out_shape, -np.inf, dtype=zp.dtype)
    for off in _offsets(P.kernel):
        m = np.where(_valid(P, off), np.maximum(m, zp[_slab(off, P.stride, P.dilation, P.out_spatial)]), m)
    s = np.zeros(P.out_shape, dtype=zp.dtype)
    for off in _offsets(P.kernel):
        e = np.exp(zp[_slab(off, P.stride, P.dilation, P.out_spatial)] - m)
        s += np.where(_valid(P, off), e, 0.0)
    return zp, m, np.log(s)


def _smooth_forward(x, *, kernel_size, beta, stride=None, padding=0):
    P = pool_params("smooth_max_pool", x.shape, kernel_size=kernel_size, stride=stride, padding=padding)
    beta = check_beta("smooth_max_pool", beta)
    _, m, lse = _smooth_parts(x, P, beta)
    return (m + lse) / beta


def _smooth_vjp(g, x, *, kernel_size, beta, stride=None, padding=0):
    P = pool_params("smooth_max_pool", x.shape, kernel_size=kernel_size, stride=stride, padding=padding)
    beta = check_beta("smooth_max_pool", beta)
    zp, m, lse = _smooth_parts(x, P, beta)
    dxp = np.zeros_like(zp, dtype=g.dtype)
    # d y / d x_i = softmax weight of beta x_i within the window (real cells only).
    for off in _offsets(P.kernel):
        sl = _slab(off, P.stride, P.dilation, P.out_spatial)
        dxp[sl] += np.where(_valid(P, off), g * np.exp(zp[sl] - m - lse), 0.0)
    return (_crop(dxp, P.padding),)


def _smooth_shape(x, *, kernel_size, beta, stride=None, padding=0):
    P = pool_params("smooth_max_pool", x, kernel_size=kernel_size, stride=stride, padding=padding)
    check_beta("smooth_max_pool", beta)
    check_no_padding_windows("smooth_max_pool", P)
    return P.out_shape


defspec("smooth_max_pool", _smooth_forward, _smooth_vjp, _smooth_shape, 1,
        why="stability: a log-sum-exp per window with the window max subtracted, padding excluded")
