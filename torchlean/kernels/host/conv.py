"""Host kernels of convolution and pooling (N-d, channels-first, batched).

Every kernel takes a batched input ``(N, C, *spatial)`` (pools: any leading axes
before the ``d`` spatial ones) and normalized tuples of per-axis ints; shape
checks are the shape rules' job (:mod:`torchlean.spec.conv`). Every kernel (and
every helper that computes on arrays) takes the array namespace as the keyword
``xp`` (NumPy by default; :mod:`torchlean.kernels.cuda.conv` passes CuPy for the
inputs its native kernels do not take). Convolution is im2col + BLAS:
``xp.lib.stride_tricks.sliding_window_view`` gives the windows as a view, one
copy lays them out as ``(N, groups, C_in/groups * K, P)`` (``K = prod(kernel)``,
``P`` output positions) and ``xp.matmul`` does the rest. On the host a batch runs either
as one GEMM over all its columns (few positions per sample, :func:`_one_gemm`) or one
sample at a time through a reused, cache-sized column buffer (:class:`_SampleCols`).
The input gradient (and the transposed convolution, which is the same map) is
again a convolution when the strides are 1; otherwise the column gradient is
scattered back with one strided ``+=`` per kernel offset (col2im), never a loop
over pixels. Nothing here depends on the number of spatial axes.

    >>> import numpy as np
    >>> x = np.arange(5.0).reshape(1, 1, 5)
    >>> conv_forward(x, np.ones((1, 1, 2)), None, (1,), (0,), (1,), 1)[0, 0].tolist()
    [1.0, 3.0, 5.0, 7.0]
"""

from __future__ import annotations

import itertools
from math import prod

import numpy as np

from .base import select

# ---- helpers ---------------------------------------------------------------------------------


def _pad(x, p, value=0.0, *, xp=np):
    """``x`` padded by ``p[i]`` cells on both sides of its last ``len(p)`` axes."""
    if not any(p):
        return x
    d = len(p)
    sp = x.shape[x.ndim - d:]
    out = xp.full(x.shape[:x.ndim - d] + tuple(S + 2 * v for S, v in zip(sp, p)), value, dtype=x.dtype)
    out[(Ellipsis,) + tuple(slice(v, v + S) for v, S in zip(p, sp))] = x
    return out


def _crop(a, p):
    """The inner cells of ``a`` (the adjoint of :func:`_pad`): a view, no array namespace needed."""
    if not any(p):
        return a
    d = len(p)
    sp = a.shape[a.ndim - d:]
    return a[(Ellipsis,) + tuple(slice(v, S - v) for v, S in zip(p, sp))]


def _windows(a, k, s, dil, out, *, xp=np):
    """View ``(..., *out, *k)`` of ``a``: element ``[o, j]`` is ``a[o * s + j * dil]`` per axis."""
    d = len(k)
    keff = tuple(di * (ki - 1) + 1 for ki, di in zip(k, dil))
    v = xp.lib.stride_tricks.sliding_window_view(a, keff, axis=tuple(range(a.ndim - d, a.ndim)))
    sl = ((Ellipsis,) + tuple(slice(0, si * (n - 1) + 1, si) for si, n in zip(s, out))
          + tuple(slice(None, None, di) for di in dil))
    return v[sl]


def _slab(off, s, dil, out):
    """Slices over the last axes selecting cells ``o * s + off * dil`` for every output position ``o``."""
    return (Ellipsis,) + tuple(slice(j * di, j * di + si * (n - 1) + 1, si)
                               for j, si, di, n in zip(off, s, dil, out))


def _im2col(a, k, s, dil, out, groups, *, xp=np, batched=False):
    """Columns ``(N, G, C/G * K, P)`` of the padded input ``a (N, C, *Sp)`` (one copy); ``batched``:
    ``(G, C/G * K, N * P)``, the whole batch side by side for one GEMM (see :func:`_one_gemm`)."""
    n, c = a.shape[:2]
    d = len(k)
    w = _windows(a, k, s, dil, out, xp=xp)                 # (N, C, *out, *k), a view
    w = w.reshape((n, groups, c // groups) + w.shape[2:])  # still a view: C splits into (G, C/G)
    kaxes, oaxes = tuple(range(3 + d, 3 + 2 * d)), tuple(range(3, 3 + d))
    if batched:
        return w.transpose((1, 2) + kaxes + (0,) + oaxes).reshape(groups, (c // groups) * prod(k), n * prod(out))
    return w.transpose((0, 1, 2) + kaxes + oaxes).reshape(n, groups, (c // groups) * prod(k), prod(out))


def _one_gemm(x, out):
    """Whether the products of batch ``x (N, ...)`` run as one GEMM over ``N * P`` columns rather than
    N GEMMs over P: for NumPy arrays whose output has few positions per sample (P < 512), where N thin
    products (down to GEMVs at P = 1, and an ``(N, C_out, C_in K)`` temporary for the weight gradient)
    cost up to 200x more; at larger P the output's transpose costs what the GEMM gains (BENCHMARKS.md).
    CuPy arrays keep the per-sample products."""
    return type(x).__module__ == "numpy" and x.shape[0] > 1 and prod(out) < 512


#: Elements of one block of columns on the host (8 MB of float32): larger column sets are built and
#: multiplied a band of output rows at a time.
_COLS_BLOCK = 1 << 21


def _per_sample(x, c, k, out):
    """Whether the columns are built one sample (and, past :data:`_COLS_BLOCK` elements, one band of
    output rows) at a time into one reused buffer, each block followed by its GEMM (NumPy arrays, N > 1
    or large columns): a block's columns are still in cache when its GEMM reads them, where the columns
    of the whole batch (hundreds of MB at ImageNet sizes, 1.1 GB for a 9x9 convolution of a 1080^2
    image) are written out to memory and read back; 1.2-1.7x per layer at batch 32 (BENCHMARKS.md)."""
    return type(x).__module__ == "numpy" and (x.shape[0] > 1 or c * prod(k) * prod(out) > _COLS_BLOCK)


class _SampleCols:
    """Columns ``(G, C/G * K, rows * Q)`` of one sample of ``x (N, C, *S)`` padded by ``p``, a band of
    ``rows`` output rows (first output axis; ``Q`` the positions of one row) at a time: ``cols(i, r, rows)``
    pads sample ``i`` into one reused buffer (its border zeroed once) and lays the windows of rows
    ``r, r + 1, ...`` out in a second one. :attr:`bands` lists each sample's ``(r, rows)``; a batch costs
    two buffers of at most one sample each (no padded copy of the batch)."""

    def __init__(self, x, p, k, s, dil, out, groups, *, xp=np):
        c = x.shape[1]
        self.xp, self.groups = xp, groups
        self.x, self.k, self.s, self.dil, self.out = x, tuple(k), s, dil, tuple(out)
        self.inner = (slice(None),) + tuple(slice(v, v + S) for v, S in zip(p, x.shape[2:]))
        self.pad = xp.zeros((c,) + tuple(S + 2 * v for S, v in zip(x.shape[2:], p)), dtype=x.dtype) \
            if any(p) else None
        self.q = prod(out[1:])
        step = max(1, min(out[0], _COLS_BLOCK // max(1, c * prod(k) * self.q)))
        self.bands = [(r, min(step, out[0] - r)) for r in range(0, out[0], step)]
        self.buf = xp.empty(c * prod(k) * step * self.q, dtype=x.dtype)
        self._at = -1

    def __call__(self, i, r, rows):
        xp, k, out, d = self.xp, self.k, self.out, len(self.k)
        if self._at != i:
            self._at = i
            a = self.x[i]
            if self.pad is not None:
                self.pad[self.inner] = a
                a = self.pad
            self.win = _windows(a, k, self.s, self.dil, out, xp=xp)   # (C, *out, *k), a view
        c = self.x.shape[1]
        w = self.win[:, r:r + rows]
        buf = self.buf[:c * prod(k) * rows * self.q]
        xp.copyto(buf.reshape((c,) + k + (rows,) + out[1:]),
                  w.transpose((0,) + tuple(range(1 + d, 1 + 2 * d)) + tuple(range(1, 1 + d))))
        return buf.reshape(self.groups, -1, rows * self.q)


def _batch_cols(g, groups):
    """``g (N, C_out, *out)`` as ``(G, C_out/G, N * P)``, the layout of batched columns."""
    n, co = g.shape[:2]
    return g.reshape(n, groups, co // groups, -1).transpose(1, 2, 0, 3).reshape(groups, co // groups, -1)


def _col2im(cols, sp, k, s, dil, out, *, xp=np):
    """Adjoint of :func:`_im2col` (groups merged): ``cols (N, C, *k, *out)`` -> ``(N, C, *sp)``."""
    dxp = xp.zeros(cols.shape[:2] + tuple(sp), dtype=cols.dtype)
    # One strided += per kernel offset; within one offset the target cells are distinct.
    for off in itertools.product(*(range(v) for v in k)):
        dxp[_slab(off, s, dil, out)] += cols[(slice(None), slice(None)) + off]
    return dxp


#: Elements of one group of channels the direct depthwise convolution works on (256 KB of float32).
_DEPTHWISE_BLOCK = 1 << 16


def _depthwise_direct(x, p, w, out, *, xp=np):
    """A 2-d depthwise convolution with unit strides and dilations (``w (C, 1, kh, kw)``, groups = C),
    computed directly: each channel group is padded into a flat buffer, and every kernel offset is one
    contiguous slice of it (outputs on the padded width, cropped at the end), multiplied by that
    offset's weights and added: ``kh kw`` multiply-adds over cache-resident rows instead of columns
    ``kh kw`` times the input's size (1.4-1.9x at batch 32 and at 3x3)."""
    n, c, h, wd = x.shape
    kh, kw = w.shape[2:]
    hp, wp = h + 2 * p[0], wd + 2 * p[1]
    ho, wo = out
    span = ho * wp
    wf = w.reshape(c, kh * kw)
    y = xp.empty((n, c, ho, wo), dtype=xp.result_type(x, w))
    cs = max(1, min(c, _DEPTHWISE_BLOCK // (hp * wp)))
    pad = xp.zeros((cs, hp * wp + kw), dtype=x.dtype)   # + kw: the last offsets read past the last row
    acc, tmp = xp.empty((cs, span), dtype=y.dtype), xp.empty((cs, span), dtype=y.dtype)
    for i in range(n):
        for c0 in range(0, c, cs):
            m = min(cs, c - c0)
            pad[:m, :hp * wp].reshape(m, hp, wp)[:, p[0]:p[0] + h, p[1]:p[1] + wd] = x[i, c0:c0 + m]
            a, t = acc[:m], tmp[:m]
            for j in range(kh * kw):
                off = (j // kw) * wp + j % kw
                if j == 0:
                    xp.multiply(pad[:m, off:off + span], wf[c0:c0 + m, j:j + 1], out=a)
                else:
                    a += xp.multiply(pad[:m, off:off + span], wf[c0:c0 + m, j:j + 1], out=t)
            y[i, c0:c0 + m] = a.reshape(m, ho, wp)[:, :, :wo]
    return y


def _conv_core(x, p, w, s, dil, out, groups, *, xp=np):
    """``(N, C_out, *out)`` = conv of ``x`` padded by ``p`` with weight ``w (C_out, C_in/G, *k)``."""
    n = x.shape[0]
    co, k = w.shape[0], w.shape[2:]
    wm = w.reshape(groups, co // groups, -1)
    if type(x).__module__ == "numpy" and not any(p) and all(v == 1 for v in tuple(k) + tuple(s)):
        # a pointwise convolution: the columns are the input itself, no copy
        return xp.matmul(wm, x.reshape(n, groups, x.shape[1] // groups, -1)).reshape((n, co) + tuple(out))
    if type(x).__module__ == "numpy" and len(k) == 2 and groups == x.shape[1] == co and n * co \
            and all(v == 1 for v in tuple(s) + tuple(dil)) and (n > 1 or prod(k) <= 9):
        return _depthwise_direct(x, p, w, out, xp=xp)
    if _one_gemm(x, out):
        y = xp.matmul(wm, _im2col(_pad(x, p, xp=xp), k, s, dil, out, groups, xp=xp, batched=True))
        return xp.ascontiguousarray(y.reshape((co, n) + tuple(out)).swapaxes(0, 1))   # from (G, C_out/G, N * P)
    if _per_sample(x, x.shape[1], k, out):
        y = xp.empty((n, groups, co // groups, prod(out)), dtype=xp.result_type(x, w))
        cols = _SampleCols(x, p, k, s, dil, out, groups, xp=xp)
        q = cols.q
        for i in range(n):
            for r, rows in cols.bands:
                xp.matmul(wm, cols(i, r, rows), out=y[i, :, :, r * q:(r + rows) * q])
        return y.reshape((n, co) + tuple(out))
    cols = _im2col(_pad(x, p, xp=xp), k, s, dil, out, groups, xp=xp)
    return xp.matmul(wm, cols).reshape((n, co) + tuple(out))


def _conv_data_grad(g, w, spatial, s, p, dil, groups, *, xp=np):
    """Adjoint of the convolution in its input: ``g (N, C_out, *out)`` -> ``(N, C_in, *spatial)``.

    With unit strides the adjoint is itself a convolution (of ``g`` padded by
    ``(k-1) dil - p``, with the kernel flipped and its channel axes swapped), which
    runs as im2col + GEMM; otherwise the column gradient is scattered back (col2im).
    """
    n, co = g.shape[:2]
    out = g.shape[2:]
    cig, k = w.shape[1], w.shape[2:]
    q = tuple(di * (ki - 1) - pi for ki, di, pi in zip(k, dil, p))
    if all(v == 1 for v in s) and all(v >= 0 for v in q) and tuple(spatial) == tuple(
            o + 2 * qi - di * (ki - 1) for o, qi, di, ki in zip(out, q, dil, k)):
        wf = w.reshape((groups, co // groups, cig) + tuple(k)).swapaxes(1, 2)
        wf = wf[(Ellipsis,) + (slice(None, None, -1),) * len(k)].reshape((groups * cig, co // groups) + tuple(k))
        return _conv_core(g, q, wf, s, dil, tuple(spatial), groups, xp=xp)
    wm = w.reshape(groups, co // groups, -1)
    if _one_gemm(g, out):
        dcols = xp.matmul(wm.transpose(0, 2, 1), _batch_cols(g, groups))   # (G, C_in/G * K, N * P)
        d = len(k)
        dcols = dcols.reshape((groups * cig,) + tuple(k) + (n,) + tuple(out))
        dcols = dcols.transpose((1 + d, 0) + tuple(range(1, 1 + d)) + tuple(range(2 + d, 2 + 2 * d)))
    else:
        gm = g.reshape(n, groups, co // groups, prod(out))
        dcols = xp.matmul(wm.transpose(0, 2, 1), gm)           # (N, G, C_in/G * K, P)
        dcols = dcols.reshape((n, groups * cig) + tuple(k) + tuple(out))
    sp = tuple(S + 2 * pi for S, pi in zip(spatial, p))
    return xp.ascontiguousarray(_crop(_col2im(dcols, sp, k, s, dil, out, xp=xp), p))


def _conv_weight_grad(x, p, g, k, s, dil, groups, *, xp=np):
    """Adjoint of :func:`_conv_core` in its weight (``x`` padded by ``p``): ``(C_out, C_in/G, *k)``."""
    n, co = g.shape[:2]
    out = g.shape[2:]
    if _one_gemm(g, out):
        cols = _im2col(_pad(x, p, xp=xp), k, s, dil, out, groups, xp=xp, batched=True)  # (G, C_in/G * K, N * P)
        dw = xp.matmul(_batch_cols(g, groups), cols.transpose(0, 2, 1))        # (G, C_out/G, C_in/G * K)
        return dw.reshape((co, x.shape[1] // groups) + tuple(k))
    gm = g.reshape(n, groups, co // groups, prod(out))
    if _per_sample(x, x.shape[1], k, out):
        cols = _SampleCols(x, p, k, s, dil, out, groups, xp=xp)
        q = cols.q
        dw = part = None
        for i in range(n):
            for r, rows in cols.bands:
                gb = gm[i, :, :, r * q:(r + rows) * q]
                if dw is None:
                    dw = xp.matmul(gb, cols(i, r, rows).transpose(0, 2, 1))   # (G, C_out/G, C_in/G * K)
                    part = xp.empty_like(dw)
                else:
                    dw += xp.matmul(gb, cols(i, r, rows).transpose(0, 2, 1), out=part)
        return dw.reshape((co, x.shape[1] // groups) + tuple(k))
    a = _pad(x, p, xp=xp)
    cols = _im2col(a, k, s, dil, out, groups, xp=xp)
    dw = xp.matmul(gm, cols.transpose(0, 1, 3, 2))        # (N, G, C_out/G, C_in/G * K)
    dw = dw.sum(axis=0) if n != 1 else dw[0]
    return dw.reshape((co, a.shape[1] // groups) + tuple(k))


def _bias_grad(g):
    return g.sum(axis=(0,) + tuple(range(2, g.ndim)))


def _add_bias(y, b):
    if b is not None:
        y += b.reshape((-1,) + (1,) * (y.ndim - 2))
    return y


# ---- convolution -----------------------------------------------------------------------------

def _conv_out(spatial, k, s, p, dil):
    return tuple((S + 2 * pi - di * (ki - 1) - 1) // si + 1 for S, ki, si, pi, di in zip(spatial, k, s, p, dil))


def conv_forward(x, w, b, stride, padding, dilation, groups, *, xp=np):
    """``(N, C_in, *S)``, ``w (C_out, C_in/G, *k)``, ``b (C_out,) | None`` -> ``(N, C_out, *out)``."""
    out = _conv_out(x.shape[2:], w.shape[2:], stride, padding, dilation)
    y = _conv_core(x, padding, w, stride, dilation, out, groups, xp=xp)
    return _add_bias(y, b)


def conv_backward(x, w, g, stride, padding, dilation, groups, need_x=True, need_w=True, need_b=True, *, xp=np):
    """Cotangents ``(dx, dw, db)`` of :func:`conv_forward` for output cotangent ``g``; None where not needed."""
    dx = dw = db = None
    if need_x:
        dx = _conv_data_grad(g, w, x.shape[2:], stride, padding, dilation, groups, xp=xp)
    if need_w:
        dw = _conv_weight_grad(x, padding, g, w.shape[2:], stride, dilation, groups, xp=xp)
    if need_b:
        db = _bias_grad(g)
    return dx, dw, db


def _convt_out(spatial, k, s, p, op, dil):
    return tuple((S - 1) * si - 2 * pi + di * (ki - 1) + oi + 1
                 for S, ki, si, pi, oi, di in zip(spatial, k, s, p, op, dil))


def conv_transpose_forward(x, w, b, stride, padding, output_padding, dilation, groups, *, xp=np):
    """``(N, C_in, *S)``, ``w (C_in, C_out/G, *k)`` -> ``(N, C_out, *out)``: the adjoint of conv in its input."""
    out = _convt_out(x.shape[2:], w.shape[2:], stride, padding, output_padding, dilation)
    y = _conv_data_grad(x, w, out, stride, padding, dilation, groups, xp=xp)
    return _add_bias(y, b)


def conv_transpose_backward(x, w, g, stride, padding, output_padding, dilation, groups,
                            need_x=True, need_w=True, need_b=True, *, xp=np):
    """Cotangents ``(dx, dw, db)`` of :func:`conv_transpose_forward`; None where not needed."""
    dx = dw = db = None
    out = x.shape[2:]  # the conv of g seen from x: exactly x's positions (extra output_padding cells dropped)
    if need_x:
        dx = _conv_core(g, padding, w, stride, dilation, out, groups, xp=xp)
    if need_w:
        dw = _conv_weight_grad(g, padding, x, w.shape[2:], stride, dilation, groups, xp=xp)
    if need_b:
        db = _bias_grad(g)
    return dx, dw, db


# ---- pooling ---------------------------------------------------------------------------------

def _first_valid_offset(k, s, p, dil, out, *, xp=np):
    """Row-major offset index of the first real (unpadded) cell of every window."""
    idx = xp.zeros(out, dtype=np.intp)
    d = len(k)
    for a, (ki, si, pi, di, n) in enumerate(zip(k, s, p, dil, out)):
        o = xp.arange(n)
        j = xp.maximum(0, -((o * si - pi) // di))  # smallest j with o*s - p + j*dil >= 0
        shape = [1] * d
        shape[a] = n
        idx = idx * ki + j.reshape(shape)
    return idx


#: Input bytes of the group of planes the host max pooling reduces at a time (about a quarter of L2).
_POOL_CHUNK_BYTES = 512 * 1024


def _clipped(off, spatial, s, p, dil, out):
    """For kernel offset ``off``: ``(out_slices, in_slices)`` selecting the outputs whose window cell
    at ``off`` is a real (unpadded) cell and those cells of the unpadded input, or None when no
    output has one."""
    osl, isl = [], []
    for o, S, si, pi, di, n in zip(off, spatial, s, p, dil, out):
        c = o * di - pi                                  # input cell of output 0
        lo = max(0, -(c // si) if c < 0 else 0)          # first output reaching cell >= 0
        hi = min(n, (S - 1 - c) // si + 1) if S - 1 - c >= 0 else 0
        if lo >= hi:
            return None
        osl.append(slice(lo, hi))
        isl.append(slice(lo * si + c, (hi - 1) * si + c + 1, si))
    return (Ellipsis,) + tuple(osl), (Ellipsis,) + tuple(isl)


def max_pool_forward(x, kernel_size, stride, padding, dilation, winners=True, *, xp=np):
    """``(y, idx)``: window maxima over the last ``d`` axes and the row-major offset of the first winner.

    Padding is ``-inf`` and never wins: windows whose maximum is ``-inf`` route to
    their first real cell. NaN propagates (the first NaN wins). ``winners=False``
    (a forward nothing differentiates): ``(y, None)``, the maxima alone, at about a
    third of the cost on the host.
    """
    k = tuple(kernel_size)
    d = len(k)
    out = _conv_out(x.shape[x.ndim - d:], k, stride, padding, dilation)
    # One strided slab per kernel offset, in row-major order: a later cell wins only when strictly
    # larger, or NaN over a number (argmax's first-winner rule). Slabs are plain strided views, so
    # CuPy runs this without copying a 2d-dimensional window view (whose copy needs a host transfer
    # of its strides and cannot be captured in a CUDA graph).
    offsets = list(itertools.product(*(range(v) for v in k)))
    if xp is np:
        lead = x.shape[:x.ndim - d]
        planes = prod(lead)
        step = max(1, _POOL_CHUNK_BYTES // max(1, x.itemsize * prod(x.shape[x.ndim - d:])))
        if planes > step:
            # A cache-sized group of planes at a time: every offset's pass then reads the group
            # from cache, not the whole input from memory once per offset (3x at 3x3 windows).
            xs = x.reshape((planes,) + x.shape[x.ndim - d:])
            y = xp.empty((planes,) + out, dtype=x.dtype)
            idx = xp.empty((planes,) + out, dtype=np.int64) if winners else None
            for a in range(0, planes, step):
                ya, ia = max_pool_forward(xs[a:a + step], k, stride, padding, dilation, winners, xp=xp)
                y[a:a + step] = ya
                if winners:
                    idx[a:a + step] = ia
            return y.reshape(lead + out), (idx.reshape(lead + out) if winners else None)
        # On the host, with no padded copy: each offset meets the real cells of a block of the
        # output (its clipped slab), so padding never takes part. The maxima first (maximum keeps
        # a NaN), then each window's first winner, assigning the offsets in reverse so that the
        # smallest one that reaches the maximum stays (and, where the maximum is NaN, the first
        # NaN; where it is -inf, the first real cell): the result of the loop below at about a
        # third of its passes over the output.
        blocks = [(j,) + b for j, b in enumerate(_clipped(off, x.shape[x.ndim - d:], stride, padding, dilation,
                                                          out) for off in offsets) if b is not None]
        y = xp.full(lead + out, -np.inf, dtype=x.dtype)
        for _, osl, isl in blocks:
            ys = y[osl]
            xp.maximum(ys, x[isl], out=ys)
        if not winners:
            return y, None
        idx = xp.zeros(y.shape, dtype=np.int64)
        nan = xp.isnan(y)
        any_nan = bool(nan.any())
        for j, osl, isl in reversed(blocks):
            v = x[isl]
            hit = v == y[osl]
            if any_nan:
                hit |= nan[osl] & xp.isnan(v)
            xp.copyto(idx[osl], j, where=hit)
        return y, idx
    xpad = _pad(x, padding, -np.inf, xp=xp)
    y = idx = None
    for j, off in enumerate(offsets):
        v = xpad[_slab(off, stride, dilation, out)]
        if y is None:
            y, idx = v.copy(), xp.zeros(v.shape, dtype=np.int64)
            continue
        take = (v > y) | (xp.isnan(v) & ~xp.isnan(y))
        y = xp.where(take, v, y)
        idx = xp.where(take, np.int64(j), idx)
    if not winners:
        return y, None
    if any(padding):
        neg = xp.isneginf(y)
        if neg.any():
            idx = xp.where(neg, _first_valid_offset(k, stride, padding, dilation, out, xp=xp), idx)
    return y, idx


def max_pool_backward(g, idx, x_shape, kernel_size, stride, padding, dilation, *, xp=np):
    """Route ``g`` to the winners ``idx`` of :func:`max_pool_forward` -> cotangent of shape ``x_shape``."""
    k = tuple(kernel_size)
    d = len(k)
    out = g.shape[g.ndim - d:]
    if xp is np:
        # On the host: a cache-sized group of planes at a time, each offset adding its winners' share
        # to the real cells it meets (no padded gradient to crop).
        spatial = tuple(x_shape[len(x_shape) - d:])
        planes = prod(x_shape[:len(x_shape) - d])
        gs, ids = g.reshape((planes,) + tuple(out)), idx.reshape((planes,) + tuple(out))
        dx = xp.zeros((planes,) + spatial, dtype=g.dtype)
        blocks = [(j,) + b for j, b in enumerate(_clipped(off, spatial, stride, padding, dilation, out)
                                                 for off in itertools.product(*(range(v) for v in k)))
                  if b is not None]
        step = max(1, _POOL_CHUNK_BYTES // max(1, g.itemsize * prod(spatial)))
        zero = g.dtype.type(0)
        for a in range(0, planes, step):
            ga, ia, da = gs[a:a + step], ids[a:a + step], dx[a:a + step]
            for j, osl, isl in blocks:
                da[isl] += select(ia[osl] == j, ga[osl], zero)   # np.where's bits, without its branches
        return dx.reshape(tuple(x_shape))
    sp = tuple(S + 2 * p for S, p in zip(x_shape[len(x_shape) - d:], padding))
    dxp = xp.zeros(tuple(x_shape[:len(x_shape) - d]) + sp, dtype=g.dtype)
    zero = g.dtype.type(0)
    for j, off in enumerate(itertools.product(*(range(v) for v in k))):
        dxp[_slab(off, stride, dilation, out)] += xp.where(idx == j, g, zero)
    return xp.ascontiguousarray(_crop(dxp, padding))


def avg_pool_forward(x, kernel_size, stride, padding, *, xp=np):
    """Window means over the last ``d`` axes; padded cells count as zeros (divisor ``prod(kernel_size)``)."""
    k = tuple(kernel_size)
    d = len(k)
    ones = (1,) * d
    out = _conv_out(x.shape[x.ndim - d:], k, stride, padding, ones)
    w = _windows(_pad(x, padding, xp=xp), k, stride, ones, out, xp=xp)
    y = w.sum(axis=tuple(range(w.ndim - d, w.ndim)))
    y *= x.dtype.type(1.0 / prod(k))
    return y


def avg_pool_backward(g, x_shape, kernel_size, stride, padding, *, xp=np):
    """Cotangent of :func:`avg_pool_forward`: ``g / prod(k)`` spread over each window."""
    k = tuple(kernel_size)
    d = len(k)
    sp = tuple(S + 2 * p for S, p in zip(x_shape[len(x_shape) - d:], padding))
    out = g.shape[g.ndim - d:]
    gs = g * g.dtype.type(1.0 / prod(k))
    dxp = xp.zeros(tuple(x_shape[:len(x_shape) - d]) + sp, dtype=g.dtype)
    for off in itertools.product(*(range(v) for v in k)):
        dxp[_slab(off, stride, (1,) * d, out)] += gs
    return xp.ascontiguousarray(_crop(dxp, padding))


def smooth_max_pool_forward(x, kernel_size, beta, stride, padding, *, xp=np):
    """``(y, m, lse)``: ``y = (1/beta) log sum exp(beta x)`` per window over the real cells (padding
    contributes nothing), ``m`` the window max of ``beta x`` and ``lse = log sum exp(beta x - m)``.

    ``m`` and ``lse`` let the backward form the softmax weights without going through
    ``beta * y``, which would cost the weights ``ulp(beta y)`` of absolute accuracy.
    """
    k = tuple(kernel_size)
    d = len(k)
    ones = (1,) * d
    out = _conv_out(x.shape[x.ndim - d:], k, stride, padding, ones)
    # Working on z = beta x with -inf padding excludes padded cells for either sign of beta.
    zp = _pad(x * x.dtype.type(beta), padding, -np.inf, xp=xp)
    w = _windows(zp, k, stride, ones, out, xp=xp)
    axes = tuple(range(w.ndim - d, w.ndim))
    m = w.max(axis=axes)
    lse = xp.log(xp.exp(w - m.reshape(m.shape + ones)).sum(axis=axes))
    return (m + lse) * x.dtype.type(1.0 / beta), m, lse


def smooth_max_pool_backward(x, m, lse, g, kernel_size, beta, stride, padding, *, xp=np):
    """Cotangent of :func:`smooth_max_pool_forward`: each cell gets ``g exp(beta x - m - lse)`` per window."""
    k = tuple(kernel_size)
    d = len(k)
    ones = (1,) * d
    zp = _pad(x * x.dtype.type(beta), padding, -np.inf, xp=xp)
    out = g.shape[g.ndim - d:]
    dxp = xp.zeros(zp.shape, dtype=g.dtype)
    for off in itertools.product(*(range(v) for v in k)):
        sl = _slab(off, stride, ones, out)
        dxp[sl] += g * xp.exp((zp[sl] - m) - lse)  # (z - m) first: exact near the window max
    return xp.ascontiguousarray(_crop(dxp, padding))
