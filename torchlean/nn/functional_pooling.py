"""Pooling with every PyTorch option, unpooling, grid sampling and channel dropout, as compositions.

``max_pool*`` and ``avg_pool*`` run the fused ``max_pool`` / ``avg_pool`` ops; ``ceil_mode``
adds an explicit right pad (-inf for max, zeros for average) so the floor-mode op yields the
ceil-mode windows, and average pooling rescales by a host-computed divisor map (PyTorch's
divisor rules). ``return_indices`` gathers each window, picks PyTorch's winner (first maximum in
scan order, the last NaN if any, the first real cell of an all ``-inf`` window) and takes the
values with ``gather`` so the gradient goes to the returned index. ``grid_sample`` gathers the
corner (or 16 bicubic tap) values and weights them with coefficients that are formulas of the
grid, so gradients reach both the input and the grid.

    >>> import torchlean as tl
    >>> max_pool1d(tl.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]), 2, ceil_mode=True, return_indices=True)[1].tolist()
    [[[1, 3, 4]]]
    >>> avg_pool1d(tl.tensor([[[1.0, 3.0, 2.0]]]), 2, ceil_mode=True).tolist()
    [[[2.0, 2.0]]]
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..autograd import record
from ..errors import DomainError, DTypeError, IndexRangeError, ShapeError, TorchLeanError
from ..ops import cat, einsum, full, rand, tensor, where, zeros
from ..tensor import Tensor, int64
from ..amp import autocast_namespace

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
           "max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d", "avg_pool1d",
           "avg_pool2d", "avg_pool3d", "grid_sample", "affine_grid", "dropout1d", "dropout2d", "dropout3d",
           "alpha_dropout", "feature_alpha_dropout", "bilinear"]


def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TorchLeanError(f"{op}: {what} must be a Tensor, got {type(x).__name__}")
    return x


def _is_int(v):
    return isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool)


def _ints(op, v, d, what):
    """An int repeated over ``d`` axes, or a sequence of 1 or ``d`` ints (PyTorch's pooling rule)."""
    if _is_int(v):
        return (int(v),) * d
    if isinstance(v, (list, tuple)) and len(v) in (1, d) and all(_is_int(e) for e in v):
        return tuple(int(e) for e in v) * (d if len(v) == 1 else 1)
    raise ShapeError(f"{op}: {what} must be a single int or a tuple of {d} ints, got {v!r}")


def _const(x, a, dtype=None):
    return tensor(np.ascontiguousarray(a), dtype=dtype or x.dtype, device=x.device)


# ---- pooling geometry -----------------------------------------------------------------------

def _out_len(S, k, s, p, dil, ceil_mode):
    """PyTorch's pooling_output_shape: with ceil_mode the last window must start inside the input
    or the left padding."""
    span = S + 2 * p - dil * (k - 1) - 1
    n = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (n - 1) * s >= S + p:
        n -= 1
    return n


def _geometry(op, x, d, kernel_size, stride, padding, dilation, ceil_mode):
    """(lead, spatial, k, s, p, dil, out) of a pooling call, checked as PyTorch checks it."""
    _tensor(x, op)
    if x.ndim not in (d + 1, d + 2):
        raise ShapeError(f"{op}: expected a {d + 1}D or {d + 2}D (batch mode) input, got shape {tuple(x.shape)}")
    k = _ints(op, kernel_size, d, "kernel_size")
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        s = k
    else:
        s = _ints(op, stride, d, "stride")
    p = _ints(op, padding, d, "padding")
    dil = _ints(op, dilation, d, "dilation")
    if any(v <= 0 for v in k):
        raise ShapeError(f"{op}: kernel_size should be greater than zero, but got {k}")
    if any(v <= 0 for v in s):
        raise ShapeError(f"{op}: stride should be greater than zero, but got {s}")
    if any(v <= 0 for v in dil):
        raise ShapeError(f"{op}: dilation should be greater than zero, but got {dil}")
    if any(v < 0 for v in p):
        raise ShapeError(f"{op}: padding must be non-negative, but got {p}")
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise ShapeError(f"{op}: padding should be at most half of kernel size, but got padding={p} and "
                         f"kernel_size={k}")
    spatial = tuple(x.shape[x.ndim - d:])
    lead = tuple(x.shape[:x.ndim - d])
    out = tuple(_out_len(S, ki, si, pi, di, ceil_mode) for S, ki, si, pi, di in zip(spatial, k, s, p, dil))
    if any(o < 1 for o in out) or any(c == 0 for c in lead[-1:]):
        raise ShapeError(f"{op}: given input size {tuple(x.shape)}, kernel {k}, stride {s}, padding {p}, "
                         f"dilation {dil}: calculated output size {out} is too small")
    return lead, spatial, k, s, p, dil, out


def _ceil_extra(spatial, k, s, p, dil, out):
    """Cells to add on the right so the floor-mode windows of the padded input are the ``out`` ones."""
    return tuple(max(0, (o - 1) * si + di * (ki - 1) + 1 - (S + 2 * pi))
                 for S, ki, si, pi, di, o in zip(spatial, k, s, p, dil, out))


def _right_pad(x, extra, value):
    """``x`` with ``extra[a]`` cells of ``value`` appended along its a-th spatial axis."""
    d = len(extra)
    for a, e in enumerate(extra):
        if e:
            ax = x.ndim - d + a
            shape = list(x.shape)
            shape[ax] = e
            x = cat([x, full(tuple(shape), value, dtype=x.dtype, device=x.device)], dim=ax)
    return x


# ---- max pooling ----------------------------------------------------------------------------

def _axis_positions(S, k, s, p, dil, o):
    """(o, k) input positions of the windows along one axis, and PyTorch's clamped window start."""
    pos = np.arange(o)[:, None] * s - p + np.arange(k)[None, :] * dil
    start = pos[:, 0] + np.maximum(0, -(pos[:, 0] // dil)) * dil * (pos[:, 0] < 0)
    return pos, start


def _window_table(spatial, k, s, p, dil, out):
    """(n_out, K) flat input index of every window cell (-1 in padding), the valid mask, each window's
    first real cell, and, for windows lying wholly in padding, PyTorch's index (its clamped start)."""
    d = len(k)
    flat = np.zeros((1,) * (2 * d), np.int64)
    valid = np.ones((1,) * (2 * d), bool)
    start = np.zeros((1,) * d, np.int64)
    for a in range(d):
        pos, st = _axis_positions(spatial[a], k[a], s[a], p[a], dil[a], out[a])
        shape = [1] * (2 * d)
        shape[a], shape[d + a] = out[a], k[a]
        pos = pos.reshape(shape)
        valid = valid & (pos >= 0) & (pos < spatial[a])
        flat = flat * spatial[a] + pos
        sshape = [1] * d
        sshape[a] = out[a]
        start = start * spatial[a] + st.reshape(sshape)
    n_out, K = int(np.prod(out)), int(np.prod(k))
    valid = np.broadcast_to(valid, tuple(out) + tuple(k)).reshape(n_out, K)
    table = np.where(valid, np.broadcast_to(flat, tuple(out) + tuple(k)).reshape(n_out, K), -1)
    first = np.where(valid.any(1), valid.argmax(1), 0)
    return table, valid, first, np.broadcast_to(start, tuple(out)).reshape(n_out)


def _has_padding_window(spatial, k, s, p, dil, out):
    for S, ki, si, pi, di, o in zip(spatial, k, s, p, dil, out):
        pos = _axis_positions(S, ki, si, pi, di, o)[0]
        if not ((pos >= 0) & (pos < S)).any(1).all():
            return True
    return False


def _max_pool_indices(x, lead, spatial, k, s, p, dil, out):
    table, valid, first, start = _window_table(spatial, k, s, p, dil, out)
    n_out, K = table.shape
    P = int(np.prod(spatial))
    xf = x.reshape(lead + (P,))
    w = xf.detach().index_select(-1, np.maximum(table, 0).reshape(-1)).reshape(lead + (n_out, K))
    w = where(tensor(valid, device=x.device), w, -math.inf)
    nan = w.isnan()
    best = where(nan, -math.inf, w)
    k_max = best.argmax(dim=-1)
    k_nan = (K - 1) - nan.flip(-1).to(dtype=int64).argmax(dim=-1)
    top = best.amax(dim=-1)
    sel = where(nan.any(dim=-1), k_nan, where(top == -math.inf, tensor(first, device=x.device), k_max))
    sel = sel.numpy().astype(np.int64)
    idx = table[np.arange(n_out), sel] if sel.size else np.zeros(sel.shape, np.int64)
    empty = ~valid.any(1)
    y = xf.gather(-1, np.maximum(idx, 0))
    if empty.any():                       # windows wholly in padding: -inf at PyTorch's index
        y = where(tensor(empty, device=x.device), -math.inf, y)
        idx = np.where(empty, start, idx)
    return y.reshape(lead + tuple(out)), tensor(idx.reshape(lead + tuple(out)), dtype=int64, device=x.device)


def _max_pool(op, d, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):  # noqa: A002
    lead, spatial, k, s, p, dil, out = _geometry(op, input, d, kernel_size, stride, padding, dilation, ceil_mode)
    if return_indices:
        return _max_pool_indices(input, lead, spatial, k, s, p, dil, out)
    if input.dtype.kind != "f" or _has_padding_window(spatial, k, s, p, dil, out):
        return _max_pool_indices(input, lead, spatial, k, s, p, dil, out)[0]
    x = _right_pad(input, _ceil_extra(spatial, k, s, p, dil, out), -math.inf)
    return record("max_pool", (x,), {"kernel_size": k, "stride": s, "padding": p, "dilation": dil})


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """Max over windows of ``(N, C, L)`` or ``(C, L)``; ``stride`` defaults to ``kernel_size``.

    ``return_indices=True`` also returns the int64 position of each maximum in its ``L`` axis.

        >>> import torchlean as tl
        >>> max_pool1d(tl.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[3.0, 2.0]]]
    """
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """Max over windows of ``(N, C, H, W)`` or ``(C, H, W)``; indices are flat ``h * W + w``."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """Max over windows of ``(N, C, D, H, W)`` or ``(C, D, H, W)``; indices are flat ``(d H + h) W + w``."""
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=True):
    """:func:`max_pool1d` returning ``(values, indices)``."""
    return _max_pool("max_pool1d_with_indices", 1, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=True):
    """:func:`max_pool2d` returning ``(values, indices)``."""
    return _max_pool("max_pool2d_with_indices", 2, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=True):
    """:func:`max_pool3d` returning ``(values, indices)``."""
    return _max_pool("max_pool3d_with_indices", 3, input, kernel_size, stride, padding, dilation, ceil_mode, True)


# ---- max unpooling --------------------------------------------------------------------------

def _unpool_size(op, x, d, k, s, p, output_size):
    """PyTorch's _unpool_output_size: the default, or ``output_size`` within one stride of it."""
    default = [(x.shape[x.ndim - d + a] - 1) * s[a] + k[a] - 2 * p[a] for a in range(d)]
    if output_size is None:
        return tuple(default)
    size = [int(v) for v in output_size]
    if len(size) == d + 2:
        size = size[2:]
    if len(size) != d:
        raise ShapeError(f"{op}: output_size should be a sequence containing {d} or {d + 2} elements, but it "
                         f"has a length of '{len(size)}'")
    for a in range(d):
        lo, hi = default[a] - s[a], default[a] + s[a]
        if not lo < size[a] < hi:
            raise ShapeError(f'{op}: invalid output_size "{tuple(size)}" (dim {a} must be between {lo} and {hi})')
    return tuple(size)


def _max_unpool(op, d, input, indices, kernel_size, stride, padding, output_size):  # noqa: A002
    x = _tensor(input, op)
    _tensor(indices, op, "indices")
    if x.ndim not in (d + 1, d + 2):
        raise ShapeError(f"{op}: expected a {d + 1}D or {d + 2}D input, got shape {tuple(x.shape)}")
    if indices.dtype.kind not in "iu":
        raise DTypeError(f"{op}: indices must be an int64 tensor, got dtype {indices.dtype.name}")
    if tuple(indices.shape) != tuple(x.shape):
        raise ShapeError(f"{op}: expected shape of indices to be same as that of the input tensor "
                         f"({tuple(x.shape)}) but got indices tensor with shape: {tuple(indices.shape)}")
    k = _ints(op, kernel_size, d, "kernel_size")
    s = k if stride is None else _ints(op, stride, d, "stride")
    p = _ints(op, padding, d, "padding")
    size = _unpool_size(op, x, d, k, s, p, output_size)
    lead = tuple(x.shape[:x.ndim - d])
    P = int(np.prod(size))
    idx = indices.numpy().astype(np.int64).reshape(lead + (-1,))
    if idx.size and (idx.min() < 0 or idx.max() >= P):
        bad = idx[(idx < 0) | (idx >= P)].flat[0]
        raise IndexRangeError(f"{op}: found an invalid max index {bad} (output volumes are of size "
                              f"{'x'.join(map(str, size))})")
    out = zeros(*(lead + (P,)), dtype=x.dtype, device=x.device)
    return out.scatter(-1, idx, x.reshape(lead + (-1,))).reshape(lead + size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The partial inverse of :func:`max_pool1d`: values scattered to ``indices``, zeros elsewhere.

        >>> import torchlean as tl
        >>> y, i = max_pool1d(tl.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2, return_indices=True)
        >>> max_unpool1d(y, i, 2).tolist()
        [[[0.0, 3.0, 2.0, 0.0]]]
    """
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The partial inverse of :func:`max_pool2d` (flat ``h * W + w`` indices per plane)."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The partial inverse of :func:`max_pool3d`."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)


# ---- average pooling ------------------------------------------------------------------------

def _divisors(spatial, k, s, p, out, count_include_pad):
    """PyTorch's divisor of every output cell: the window clipped to input + padding, or to the input."""
    div = np.ones((1,) * len(k))
    for a, (S, ki, si, pi, o) in enumerate(zip(spatial, k, s, p, out)):
        start = np.arange(o) * si - pi
        end = np.minimum(start + ki, S + pi)
        n = end - start if count_include_pad else np.minimum(end, S) - np.maximum(start, 0)
        shape = [1] * len(k)
        shape[a] = o
        div = div * n.reshape(shape)
    return div


def _avg_pool(op, d, input, kernel_size, stride, padding, ceil_mode, count_include_pad,  # noqa: A002
              divisor_override):
    _, spatial, k, s, p, _, out = _geometry(op, input, d, kernel_size, stride, padding, 1, ceil_mode)
    if input.dtype.kind != "f":
        raise DTypeError(f"{op}: expects a floating-point input, got dtype {input.dtype.name}")
    x = _right_pad(input, _ceil_extra(spatial, k, s, p, (1,) * d, out), 0.0)
    y = record("avg_pool", (x,), {"kernel_size": k, "stride": s, "padding": p})
    kprod = float(math.prod(k))
    if divisor_override is not None:
        if not isinstance(divisor_override, numbers.Real) or isinstance(divisor_override, bool) \
                or divisor_override == 0:
            raise DomainError(f"{op}: divisor must be not zero, got divisor_override={divisor_override!r}")
        return y * (kprod / float(divisor_override))
    scale = kprod / _divisors(spatial, k, s, p, out, count_include_pad)
    if np.all(scale == 1.0):
        return y
    return y * _const(input, scale)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """Mean over windows of ``(N, C, L)`` or ``(C, L)`` with PyTorch's divisors.

    The divisor is the window clipped to input + padding (``count_include_pad``, so a ceil-mode
    window overhanging the padding counts only its part inside) or to the input, or
    ``divisor_override``.

        >>> import torchlean as tl
        >>> avg_pool1d(tl.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[2.0, 1.0]]]
    """
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """Mean over windows of ``(N, C, H, W)`` or ``(C, H, W)``; see :func:`avg_pool1d`."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """Mean over windows of ``(N, C, D, H, W)`` or ``(C, D, H, W)``; see :func:`avg_pool1d`."""
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# ---- grid sampling --------------------------------------------------------------------------

_CUBIC_A = -0.75


def _align_default(op, align_corners):
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since "
                      "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
                      "documentation of grid_sample for details.", UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


def _unnormalize(g, size, align_corners):
    """Grid coordinate in [-1, 1] to pixel coordinate, in the arithmetic order of PyTorch's CPU kernel."""
    if align_corners:
        return (g + 1) * ((size - 1) / 2)
    return (g + 1) * (size / 2) - 0.5


def _reflect(c, lo2, hi2):
    """Reflect ``c`` into [lo2/2, hi2/2]; the gradient is +-1 as PyTorch's (sign +1 at the fold origin)."""
    if lo2 == hi2:
        return c * 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    u = c - lo
    a = u * where(u.detach() < 0, -1.0, 1.0)
    extra = a.fmod(span)
    flips = (a.detach() / span).floor()
    even = flips.remainder(2) == 0
    return where(even, extra + lo, (span + lo) - extra)


def _source_index(g, size, padding_mode, align_corners):
    c = _unnormalize(g, size, align_corners)
    if padding_mode == "border":
        return c.clamp(0, size - 1)
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        return c.clamp(0, size - 1)
    return c


def _host_coords(i, size, padding_mode, align_corners):
    """Integer tap coordinates mapped by the padding mode (PyTorch's compute_coordinates), on the host."""
    i = i.astype(np.float64)
    if padding_mode == "border":
        i = np.clip(i, 0, size - 1)
    elif padding_mode == "reflection":
        lo2, hi2 = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        if lo2 == hi2:
            i = np.zeros_like(i)
        else:
            lo, span = lo2 / 2, (hi2 - lo2) / 2
            a = np.abs(i - lo)
            extra, flips = np.fmod(a, span), np.floor(a / span)
            i = np.where(flips % 2 == 0, extra + lo, span - extra + lo)
        i = np.clip(i, 0, size - 1)
    return i


def _gather_taps(xf, taps, sizes, weights):
    """``sum_t w_t * x[tap_t]`` (zero where a tap is out of bounds) for (N, C, P) ``xf``.

    ``taps`` holds per-tap lists of host integer coordinates (N, Q), innermost axis last;
    ``weights`` per-tap tensors (N, 1, Q).
    """
    N, C = xf.shape[0], xf.shape[1]
    y = None
    for coords, w in zip(taps, weights):
        ok = np.ones(coords[0].shape, bool)
        flat = np.zeros(coords[0].shape, np.int64)
        for c, S in zip(coords, sizes):
            ok &= (c >= 0) & (c < S)
            flat = flat * S + np.clip(np.nan_to_num(c, nan=0.0), 0, S - 1).astype(np.int64)
        idx = np.broadcast_to(np.where(ok, flat, 0)[:, None, :], (N, C, flat.shape[1]))
        mask = tensor(ok[:, None, :], device=xf.device)
        # A tap outside reads 0 (never the stand-in cell 0, which may be inf), times its weight
        # (NaN for a non-finite coordinate, which propagates as in PyTorch's CPU kernel).
        t = where(mask, xf.gather(2, idx), 0.0) * (w * mask.to(dtype=w.dtype))
        y = t if y is None else y + t
    return y


def _cubic_coeffs(t):
    A = _CUBIC_A
    def near(v):
        return ((A + 2) * v - (A + 3)) * v * v + 1
    def far(v):
        return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A
    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):  # noqa: A002
    """Sample ``input`` ``(N, C, H, W)`` (or ``(N, C, D, H, W)``) at ``grid`` ``(N, H_out, W_out, 2)``
    (``(..., 3)``), coordinates ``(x, y[, z])`` normalized to [-1, 1].

    ``mode`` ``'bilinear'``, ``'nearest'`` (round half to even) or ``'bicubic'`` (4-D only,
    A = -0.75); ``padding_mode`` ``'zeros'``, ``'border'`` or ``'reflection'``. Gradients reach
    the input and, except for ``'nearest'``, the grid.

        >>> import torchlean as tl
        >>> x = tl.arange(4.0).reshape(1, 1, 2, 2)
        >>> grid_sample(x, tl.zeros(1, 1, 1, 2), align_corners=False).item()
        1.5
    """
    op = "grid_sample"
    _tensor(input, op)
    _tensor(grid, op, "grid")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise DomainError(f"{op}: expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise DomainError(f"{op}: expected padding_mode to be 'zeros', 'border', or 'reflection', but got: "
                          f"{padding_mode!r}")
    align_corners = _align_default(op, align_corners)
    if input.ndim not in (4, 5):
        raise ShapeError(f"{op}: expected 4D or 5D input, but got input with sizes {list(input.shape)}")
    d = input.ndim - 2
    if grid.ndim != input.ndim:
        raise ShapeError(f"{op}: expected grid to have {input.ndim} dimensions, but got grid with sizes "
                         f"{list(grid.shape)}")
    if grid.shape[-1] != d:
        raise ShapeError(f"{op}: expected grid to have size {d} in last dimension, but got grid with sizes "
                         f"{list(grid.shape)}")
    if grid.shape[0] != input.shape[0]:
        raise ShapeError(f"{op}: expected grid and input to have same batch size, but got input with sizes "
                         f"{list(input.shape)} and grid with sizes {list(grid.shape)}")
    if mode == "bicubic" and d != 2:
        raise ShapeError(f"{op}: bicubic interpolation only supports 4D input")
    if input.dtype.kind != "f" or grid.dtype != input.dtype:
        raise DTypeError(f"{op}: expected input and grid to be floating point of the same dtype, got "
                         f"{input.dtype.name} and {grid.dtype.name}")
    if any(v == 0 for v in input.shape[2:]):
        raise ShapeError(f"{op}: expected input to have non-empty spatial dimensions, got {list(input.shape)}")
    N, C = input.shape[0], input.shape[1]
    sizes = tuple(input.shape[2:])
    out = tuple(grid.shape[1:-1])
    Q = int(np.prod(out))
    xf = input.reshape(N, C, int(np.prod(sizes)))
    g = grid.reshape(N, 1, Q, d)
    # Axis a of the input (innermost last) reads grid component d - 1 - a.
    comps = [g[..., d - 1 - a] for a in range(d)]
    if mode == "bicubic":
        cs = [_unnormalize(c, S, align_corners) for c, S in zip(comps, sizes)]
        base = [np.floor(c.detach().numpy()[:, 0, :]) for c in cs]
        coeffs = [_cubic_coeffs(c - _const(c, b[:, None, :])) for c, b in zip(cs, base)]
        taps, weights = [], []
        for i in range(4):
            for j in range(4):
                taps.append([_host_coords(base[0] - 1 + i, sizes[0], padding_mode, align_corners),
                             _host_coords(base[1] - 1 + j, sizes[1], padding_mode, align_corners)])
                weights.append(coeffs[1][j] * coeffs[0][i])
        y = _gather_taps(xf, taps, sizes, weights)
        return y.reshape((N, C) + out)
    cs = [_source_index(c, S, padding_mode, align_corners) for c, S in zip(comps, sizes)]
    hs = [c.detach().numpy()[:, 0, :] for c in cs]
    if mode == "nearest":
        taps = [[np.nan_to_num(np.rint(h), nan=-1.0) for h in hs]]
        # A constant weight wired to the grid, so the grid's gradient is zeros (not absent) as in PyTorch.
        one = where(tensor(np.zeros((N, 1, Q), bool), device=input.device), comps[0], 1.0)
        y = _gather_taps(xf, taps, sizes, [one])
        return y.reshape((N, C) + out)
    base = [np.floor(h) for h in hs]
    taps, weights = [], []
    for bits in np.ndindex(*(2,) * d):
        coords, w = [], None
        for a in reversed(range(d)):
            b0 = base[a]
            coords.append(b0 + bits[a])
            lo = _const(input, b0[:, None, :])
            f = (cs[a] - lo) if bits[a] else ((lo + 1.0) - cs[a])
            w = f if w is None else w * f
        taps.append([np.nan_to_num(c, nan=-1.0) for c in reversed(coords)])
        weights.append(w)
    y = _gather_taps(xf, taps, sizes, weights)
    return y.reshape((N, C) + out)


def _linspace_neg_one(n, align_corners):
    if n <= 1:
        return np.zeros(max(n, 1))
    r = np.linspace(-1.0, 1.0, n)
    return r if align_corners else r * (n - 1) / n


def affine_grid(theta, size, align_corners=None):
    """The sampling grid ``(N, H, W, 2)`` (or ``(N, D, H, W, 3)``) of affine maps ``theta``
    ``(N, 2, 3)`` (``(N, 3, 4)``) for an output of ``size`` ``(N, C, H, W)`` (``(N, C, D, H, W)``).

        >>> import torchlean as tl
        >>> affine_grid(tl.tensor([[[1.0, 0, 0], [0, 1.0, 0]]]), (1, 1, 1, 2), align_corners=True).tolist()
        [[[[-1.0, 0.0], [1.0, 0.0]]]]
    """
    op = "affine_grid"
    _tensor(theta, op, "theta")
    if theta.dtype.kind != "f":
        raise DTypeError(f"{op}: expected theta to have floating point type, but got {theta.dtype.name}")
    align_corners = _align_default(op, align_corners)
    size = tuple(int(v) for v in size)
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
            raise ShapeError(f"{op}: expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. "
                             f"Got {tuple(theta.shape)}.")
        spatial = size[2:]
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (3, 4):
            raise ShapeError(f"{op}: expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. "
                             f"Got {tuple(theta.shape)}.")
        spatial = size[2:]
    else:
        raise ShapeError(f"{op}: only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. "
                         f"Got size {size}.")
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the "
                      "documentation of affine_grid for details.", UserWarning, stacklevel=2)
    elif min(size) <= 0:
        raise ShapeError(f"{op}: expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise ShapeError(f"{op}: theta batch {theta.shape[0]} does not match size[0] = {size[0]}")
    d = len(spatial)
    axes = [_linspace_neg_one(n, align_corners) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack([mesh[d - 1 - a] for a in range(d)] + [np.ones(spatial)], axis=-1)
    base = _const(theta, base.reshape(1, -1, d + 1))
    grid = base @ theta.transpose(1, 2)
    return grid.reshape((size[0],) + tuple(spatial) + (d,))


# ---- channel dropout and bilinear -----------------------------------------------------------

def _check_p(op, p):
    if not isinstance(p, numbers.Real) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise DomainError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    return float(p)


def _feature_noise(op, x, p, alpha):
    """PyTorch's feature (alpha) dropout: one Bernoulli(1-p) draw per (N, C) pair."""
    if x.ndim < 2:
        raise ShapeError(f"{op}: Feature dropout requires at least 2 dimensions in the input")
    if p == 1:
        return x * 0.0
    shape = tuple(x.shape[:2])
    keep = (rand(*shape, dtype=x.dtype, device=x.device) >= p).to(dtype=x.dtype)
    keep = keep.reshape(shape + (1,) * (x.ndim - 2))
    if not alpha:
        return x * (keep * (1.0 / (1.0 - p)))
    a_ = 1.7580993408473766
    a = 1.0 / math.sqrt((a_ * a_ * p + 1) * (1 - p))
    return x * (keep * a) + ((keep - 1.0) * (a_ * a) + a_ * a * p)


def dropout1d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` with probability ``p``, scaling the rest by 1/(1-p).

        >>> import torchlean as tl
        >>> dropout1d(tl.ones(2, 3), 0.5, training=False).tolist()
        [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    op = "dropout1d"
    x = _tensor(input, op)
    p = _check_p(op, p)
    if x.ndim not in (2, 3):
        raise ShapeError(f"{op}: Expected 2D or 3D input, but received a {x.ndim}D input")
    if not training or p == 0:
        return x
    if x.ndim == 2:
        return _feature_noise(op, x.unsqueeze(0), p, False).squeeze(0)
    return _feature_noise(op, x, p, False)


def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Channel dropout of ``(N, C, H, W)``; as PyTorch, a 3-D input is taken as ``(N, C, L)`` (with a
    warning) and other ranks warn and drop over the first two axes."""
    op = "dropout2d"
    x = _tensor(input, op)
    p = _check_p(op, p)
    if x.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {x.ndim}-D input to dropout2d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this "
                      "warning, please use dropout instead.", UserWarning, stacklevel=2)
    if x.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
                      "dim.", UserWarning, stacklevel=2)
    if not training or p == 0:
        return x
    return _feature_noise(op, x, p, False)


def dropout3d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Channel dropout of ``(N, C, D, H, W)`` or ``(C, D, H, W)``; other ranks warn, as in PyTorch."""
    op = "dropout3d"
    x = _tensor(input, op)
    p = _check_p(op, p)
    if x.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {x.ndim}-D input to dropout3d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this "
                      "warning, please use dropout instead.", UserWarning, stacklevel=2)
    if not training or p == 0:
        return x
    if x.ndim != 5:
        return _feature_noise(op, x.unsqueeze(0), p, False).squeeze(0)
    return _feature_noise(op, x, p, False)


def alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """SELU-preserving dropout: ``x * keep * a + (keep - 1) * alpha * a + alpha * a * p`` per entry."""
    op = "alpha_dropout"
    x = _tensor(input, op)
    p = _check_p(op, p)
    if not training or p == 0:
        return x
    if p == 1:
        return x * 0.0
    a_ = 1.7580993408473766
    a = 1.0 / math.sqrt((a_ * a_ * p + 1) * (1 - p))
    keep = (rand(*x.shape, dtype=x.dtype, device=x.device) >= p).to(dtype=x.dtype)
    return x * (keep * a) + ((keep - 1.0) * (a_ * a) + a_ * a * p)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """:func:`alpha_dropout` with one draw per channel (the mask is ``(N, C, 1, ...)``)."""
    op = "feature_alpha_dropout"
    x = _tensor(input, op)
    p = _check_p(op, p)
    if not training or p == 0:
        return x
    return _feature_noise(op, x, p, True)


def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]``; weight ``(out, in1, in2)``.

        >>> import torchlean as tl
        >>> bilinear(tl.ones(2, 3), tl.ones(2, 4), tl.ones(5, 3, 4)).shape
        torchlean.Size([2, 5])
    """
    op = "bilinear"
    for name, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        _tensor(t, op, name)
    if weight.ndim != 3:
        raise ShapeError(f"{op}: expected weight to be 3-D (out, in1, in2), got shape {tuple(weight.shape)}")
    if input1.ndim != input2.ndim or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ShapeError(f"{op}: input1 {tuple(input1.shape)} and input2 {tuple(input2.shape)} must have the "
                         "same number of dimensions and batch sizes")
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise ShapeError(f"{op}: input sizes {input1.shape[-1]}, {input2.shape[-1]} do not match weight "
                         f"{tuple(weight.shape)}")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise ShapeError(f"{op}: bias {tuple(bias.shape)} must have shape ({weight.shape[0]},)")
    y = einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else y + bias


# The ops of autocast's lists cast their inputs while an autocast region is on (torchlean.amp).
autocast_namespace(globals())
