"""Padding, adaptive pooling, resampling and im2col of ``tl.nn.functional``, as compositions.

Every function here is a formula of recorded ops (index_select, gather, cat, where, matmul,
reshape, permute), so gradients, devices and the IR come from the parts. Resampling along one
axis gathers the 2 (linear) or 4 (cubic) source slices and adds them with constant weights
computed on the host by PyTorch's index and weight rules, the same formula as PyTorch's kernels
(so a NaN or inf stays local); adaptive average pooling gathers each window, padded to the
longest one, and averages it.

    >>> import torchlean as tl
    >>> pad(tl.ones(1, 2), (1, 1)).tolist()
    [[0.0, 1.0, 1.0, 0.0]]
    >>> interpolate(tl.tensor([[[0.0, 1.0]]]), size=4, mode="linear").tolist()
    [[[0.0, 0.25, 0.75, 1.0]]]
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..errors import DomainError, DTypeError, ShapeError, TorchLeanError
from ..ops import cat, full, index_select, tensor, where
from ..tensor import Tensor
from .functional_pooling import avg_pool1d, avg_pool2d, avg_pool3d
from ..amp import autocast_namespace

__all__ = ["pad", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear",
           "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "unfold", "fold", "lp_pool1d", "lp_pool2d", "lp_pool3d"]


def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TorchLeanError(f"{op}: {what} must be a Tensor, got {type(x).__name__}")
    return x


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _tup(op, v, d, what):
    """An int repeated over ``d`` axes or a sequence of ``d`` ints."""
    if _is_int(v):
        return (int(v),) * d
    if isinstance(v, (list, tuple)) and len(v) == d and all(_is_int(e) for e in v):
        return tuple(int(e) for e in v)
    raise ShapeError(f"{op}: {what} must be an int or a sequence of {d} ints, got {v!r}")


def _const(x, a):
    """A constant tensor of ``x``'s dtype and device holding host array ``a``."""
    return tensor(np.ascontiguousarray(a), dtype=x.dtype, device=x.device)


def _host_dtype(x):
    """The host dtype PyTorch's CPU kernels compute indices and weights in (opmath of the input)."""
    return np.float64 if x.dtype.name == "float64" else np.float32


def _float_input(op, x):
    if x.dtype.kind != "f":
        raise DTypeError(f"{op}: expects a floating-point input, got dtype {x.dtype.name}")


# ---- padding --------------------------------------------------------------------------------

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_index(mode, L, lo, hi):
    j = np.arange(-lo, L + hi)
    if mode == "replicate":
        return np.clip(j, 0, L - 1)
    if mode == "circular":                          # crop first, then wrap within what is left
        s, e = max(-lo, 0), L - max(-hi, 0)
        return s + np.mod(np.arange(-max(lo, 0), e - s + max(hi, 0)), max(e - s, 1))
    j = np.abs(j)                                    # reflect, without repeating the edge
    return np.where(j > L - 1, 2 * (L - 1) - j, j)


def _take_runs(x, ax, idx):
    """``index_select(x, ax, idx)`` for an index vector of a few runs of consecutive indices, ascending
    or descending (the non-constant pads): one ``narrow`` per run (flipped when it descends) joined by
    one ``cat``, which copies the border slabs and the result once, where ``index_select`` moves the
    axis to the front and back (two transposing copies of the whole tensor). More than 8 runs (a
    replicate pad wider than that): ``index_select``."""
    runs, i, n = [], 0, len(idx)
    while i < n:
        j = i + 1
        step = int(idx[j] - idx[i]) if j < n else 1
        if step in (1, -1):
            while j < n and idx[j] - idx[j - 1] == step:
                j += 1
        runs.append((int(min(idx[i], idx[j - 1])), j - i, step == -1 and j - i > 1))
        i = j
    if len(runs) > 8:
        return index_select(x, ax, idx)
    parts = [x.narrow(ax, lo, length).flip(ax) if down else x.narrow(ax, lo, length) for lo, length, down in runs]
    return parts[0].clone() if len(parts) == 1 else cat(parts, dim=ax)


def pad(input, pad, mode="constant", value=None):  # noqa: A002 - PyTorch's names
    """torch.nn.functional.pad: ``pad`` lists (left, right) pairs from the last axis backwards.

    ``constant`` pads any axes with ``value`` (default 0; negative pads crop); ``reflect``,
    ``replicate`` and ``circular`` pad the last 1-3 axes of a batched or unbatched input.
    """
    x = _tensor(input, "pad")
    pad = tuple(pad)
    if len(pad) % 2 or not all(_is_int(p) for p in pad):
        raise ShapeError(f"pad: padding length must be even and hold ints, got {pad!r}")
    n = len(pad) // 2
    if n > x.ndim:
        raise ShapeError(f"pad: padding length {len(pad)} is too large for an input of {x.ndim} dimensions")
    if mode not in _PAD_MODES:
        raise DomainError(f"pad: mode must be one of {_PAD_MODES}, got {mode!r}")
    if mode != "constant" and value is not None and value != 0:
        raise DomainError(f"pad: padding mode {mode!r} doesn't take in value argument")
    pairs = [(x.ndim - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(n)]
    if mode == "constant":
        fill = 0 if value is None else value
        for ax, lo, hi in pairs:
            L = x.shape[ax]
            if lo + L + hi < 0:
                raise ShapeError(f"pad: resulting size of dimension {ax} would be negative")
            if lo < 0 or hi < 0:
                x = x.narrow(ax, max(-lo, 0), L - max(-lo, 0) - max(-hi, 0))
            parts = []
            for p in (lo, None, hi):
                if p is None:
                    parts.append(x)
                elif p > 0:
                    shape = list(x.shape)
                    shape[ax] = p
                    parts.append(full(tuple(shape), fill, dtype=x.dtype, device=x.device))
            if len(parts) > 1:
                x = cat(parts, dim=ax)
        return x.clone() if x is input else x
    if not 1 <= n <= 3 or x.ndim not in (n + 1, n + 2):
        raise ShapeError(f"pad: {mode} padding of {n} dimension(s) expects a {n + 1}D or {n + 2}D input, "
                         f"got {x.ndim}D")
    for ax, lo, hi in pairs:
        L = x.shape[ax]
        if mode == "reflect" and (lo >= L or hi >= L):
            raise ShapeError(f"pad: padding size should be less than the corresponding input dimension, "
                             f"but got padding ({lo}, {hi}) at dimension {ax} of size {L}")
        kept = L - max(-lo, 0) - max(-hi, 0)
        if mode == "circular" and (lo > kept or hi > kept):
            raise ShapeError(f"pad: circular padding ({lo}, {hi}) exceeds the size {kept} left of dimension {ax}")
        if mode == "replicate" and L == 0 and (lo > 0 or hi > 0):
            raise ShapeError(f"pad: cannot replicate-pad an empty dimension {ax}")
        if lo + L + hi < 1:
            raise ShapeError(f"pad: input of size {L} at dimension {ax} is too small for padding ({lo}, {hi}): "
                             f"calculated output size {lo + L + hi}")
        if lo or hi:
            x = _take_runs(x, ax, _pad_index(mode, L, lo, hi))
    return x.clone() if x is input else x


# ---- adaptive pooling -----------------------------------------------------------------------

def _adaptive_bounds(L, out):
    i = np.arange(out)
    return (i * L) // out, -((-(i + 1) * L) // out)   # floor(i L / out), ceil((i+1) L / out)


def _weights(x, ax, w):
    """Constant per-position weights ``w`` (length of axis ``ax``) shaped to broadcast over ``x``."""
    return _const(x, np.asarray(w).reshape((-1,) + (1,) * (x.ndim - 1 - ax)))


def _combine(x, ax, idxs, ws):
    """``sum_j w_j * x.index_select(ax, i_j)``: resampling along one axis."""
    y = None
    for i, w in zip(idxs, ws):
        t = index_select(x, ax, i) * _weights(x, ax, w)
        y = t if y is None else y + t
    return y


def _adaptive_mean_axis(x, ax, out):
    L = x.shape[ax]
    if out == L:
        return x
    idx, K = _window_index(L, out)
    s, e = _adaptive_bounds(L, out)
    w = index_select(x, ax, idx.reshape(-1))
    w = w.reshape(tuple(x.shape[:ax]) + (out, K) + tuple(x.shape[ax + 1:]))
    if (e - s).min() < K:                                   # drop the repeats padding short windows
        keep = (np.arange(K)[None, :] < (e - s)[:, None]).reshape((out, K) + (1,) * (x.ndim - 1 - ax))
        w = where(tensor(keep, device=x.device), w, 0.0)
    return w.sum(dim=ax + 1) * _weights(x, ax, 1.0 / (e - s))


def _out_sizes(op, x, output_size, d):
    if output_size is None or _is_int(output_size):
        output_size = (output_size,) * d
    output_size = tuple(output_size)
    if len(output_size) != d:
        raise ShapeError(f"{op}: output_size must have {d} elements, got {output_size!r}")
    sizes = tuple(x.shape[x.ndim - d + i] if s is None else s for i, s in enumerate(output_size))
    if not all(_is_int(s) and s >= 0 for s in sizes):
        raise ShapeError(f"{op}: output_size must hold non-negative ints, got {output_size!r}")
    return tuple(int(s) for s in sizes)


def _check_adaptive(op, x, d):
    _tensor(x, op)
    if x.ndim not in (d + 1, d + 2):
        raise ShapeError(f"{op}: expects a {d + 1}D or {d + 2}D input, got {x.ndim}D of shape {tuple(x.shape)}")
    if any(s == 0 for s in x.shape[-d:]):
        raise ShapeError(f"{op}: expects non-zero spatial sizes, got input shape {tuple(x.shape)}")


def _adaptive_avg(op, x, output_size, d):
    _check_adaptive(op, x, d)
    _float_input(op, x)
    sizes = _out_sizes(op, x, output_size, d)
    y = x
    for i, out in enumerate(sizes):
        y = _adaptive_mean_axis(y, x.ndim - d + i, out)
    return y.clone() if y is x else y


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """Mean over cells ``[floor(i L / out), ceil((i+1) L / out))`` of ``(N, C, L)`` or ``(C, L)``."""
    return _adaptive_avg("adaptive_avg_pool1d", input, output_size, 1)


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """Adaptive mean over the last two axes; an entry of ``output_size`` may be None (keep)."""
    return _adaptive_avg("adaptive_avg_pool2d", input, output_size, 2)


def adaptive_avg_pool3d(input, output_size):  # noqa: A002
    """Adaptive mean over the last three axes."""
    return _adaptive_avg("adaptive_avg_pool3d", input, output_size, 3)


def _window_index(L, out):
    """(out, K) input positions of each adaptive window, short windows padded with their last
    position (a repeat never wins the first-max rule)."""
    s, e = _adaptive_bounds(L, out)
    K = int((e - s).max()) if out else 1
    idx = s[:, None] + np.arange(K)[None, :]
    return np.minimum(idx, (e - 1)[:, None]), K


def _adaptive_max(op, x, output_size, d, return_indices):
    _check_adaptive(op, x, d)
    sizes = _out_sizes(op, x, output_size, d)
    lead = tuple(x.shape[:-d])
    spatial = tuple(x.shape[-d:])
    idxs = [_window_index(L, o) for L, o in zip(spatial, sizes)]
    w = x.detach()
    for i, (idx, K) in enumerate(idxs):
        w = index_select(w, len(lead) + i, idx.reshape(-1))
    # w: (*lead, o1, K1, o2, K2, ...) -> (*lead, o1, o2, ..., K1 K2 ...)
    w = w.reshape(lead + tuple(v for (idx, K), o in zip(idxs, sizes) for v in (o, K)))
    nl = len(lead)
    perm = tuple(range(nl)) + tuple(nl + 2 * i for i in range(d)) + tuple(nl + 2 * i + 1 for i in range(d))
    Ks = tuple(K for _, K in idxs)
    w = w.permute(perm).reshape(lead + sizes + (int(np.prod(Ks)),))
    k = w.argmax(dim=-1).numpy() if w.numel() else np.zeros(lead + sizes, np.int64)
    sub = np.unravel_index(k, Ks) if d > 1 else (k,)
    flat = np.zeros(k.shape, np.int64)
    for i, (idx, K) in enumerate(idxs):
        o_i = np.arange(sizes[i]).reshape((1,) * (nl + i) + (-1,) + (1,) * (d - 1 - i))
        flat = flat * spatial[i] + idx[o_i, sub[i]]
    flat = flat.reshape(lead + (-1,))
    y = x.reshape(lead + (int(np.prod(spatial)),)).gather(-1, flat).reshape(lead + sizes)
    if return_indices:
        return y, tensor(flat.reshape(lead + sizes), device=x.device)
    return y


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """Max over adaptive windows of ``(N, C, L)`` or ``(C, L)``; the gradient goes to the first
    maximal entry, whose index along ``L`` ``return_indices`` gives."""
    return _adaptive_max("adaptive_max_pool1d", input, output_size, 1, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    """Max over adaptive windows of the last two axes; indices are flat ``h * W + w``."""
    return _adaptive_max("adaptive_max_pool2d", input, output_size, 2, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):  # noqa: A002
    """Max over adaptive windows of the last three axes; indices are flat ``(d H + h) W + w``."""
    return _adaptive_max("adaptive_max_pool3d", input, output_size, 3, return_indices)


# ---- interpolation --------------------------------------------------------------------------

_MODES = {"nearest": None, "nearest-exact": None, "area": None, "linear": 1, "bilinear": 2, "bicubic": 2,
          "trilinear": 3}


def _scale(in_size, out_size, align_corners, scale, dt):
    """PyTorch's area_pixel_compute_scale, in the kernels' opmath dtype."""
    if align_corners:
        return dt((in_size - 1) / (out_size - 1)) if out_size > 1 else dt(0)
    if scale is not None and scale > 0:
        return dt(1.0 / scale)
    return dt(in_size) / dt(out_size)


def _nearest_index(L, out, scale, exact):
    if out == L and not exact:
        return np.arange(out)
    if out == 2 * L and not exact:
        return np.arange(out) >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(L) / np.float32(out)
    o = np.arange(out, dtype=np.float32)
    src = np.floor((o + np.float32(0.5)) * s) if exact else np.floor(o * s)
    return np.minimum(src.astype(np.int64), L - 1)


def _linear_taps(L, out, align_corners, scale, dt, cubic):
    """Source indices and weights of each output position: 2 taps (linear) or 4 (cubic, A = -0.75)."""
    s = _scale(L, out, align_corners, scale, dt)
    o = np.arange(out, dtype=dt)
    src = s * o if align_corners else s * (o + dt(0.5)) - dt(0.5)
    if not align_corners and not cubic:
        src = np.maximum(src, dt(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), L - 1)
    t = np.clip(src - i0.astype(dt), dt(0), dt(1)).astype(dt)
    if not cubic:
        same = out == L and not align_corners               # PyTorch reads one source twice here
        return [i0, i0 if same else i0 + (i0 < L - 1)], [(dt(1) - t).astype(dt), t]
    A = dt(-0.75)

    def near(v):    # |v| <= 1
        return ((A + 2) * v - (A + 3)) * v * v + 1

    def far(v):     # 1 < |v| < 2
        return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A

    ws = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    return [np.clip(i0 - 1 + j, 0, L - 1) for j in range(4)], [w.astype(dt) for w in ws]


def _aa_taps(L, out, align_corners, scale, dt, cubic):
    """Source indices and weights of antialiased bilinear / bicubic resampling (PyTorch's and PIL's
    filter): output i averages the inputs within ``support`` of its centre ``s (i + 0.5)``, weighed by
    the triangle (bilinear) or the cubic with a = -0.5 (bicubic) stretched by ``s`` when downscaling,
    the weights normalized. Returned as tap slots: one index and weight array per slot, padded with
    zero weights where a row has fewer taps."""
    s = float(_scale(L, out, align_corners, scale, np.float64))
    support = (2.0 if cubic else 1.0) * max(s, 1.0)
    inv = 1.0 / s if s >= 1.0 else 1.0
    o = np.arange(out, dtype=np.float64)
    center = s * (o + 0.5)
    xmin = np.maximum((center - support + 0.5).astype(np.int64), 0)
    xmax = np.minimum((center + support + 0.5).astype(np.int64), L)
    taps = max(1, int((xmax - xmin).max()))
    j = np.arange(taps)
    u = np.abs((xmin[:, None] + j[None, :] - center[:, None] + 0.5) * inv)
    if cubic:
        a = -0.5
        w = np.where(u < 1, ((a + 2) * u - (a + 3)) * u * u + 1, np.where(u < 2, (((u - 5) * u + 8) * u - 4) * a, 0.0))
    else:
        w = np.maximum(0.0, 1.0 - u)
    w = np.where(j[None, :] < (xmax - xmin)[:, None], w, 0.0)
    total = w.sum(axis=1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1.0), 0.0)
    idx = np.minimum(xmin[:, None] + j[None, :], L - 1)
    return [idx[:, k] for k in range(taps)], [w[:, k].astype(dt) for k in range(taps)]


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate over the spatial axes of ``(N, C, *spatial)``.

    Modes nearest, nearest-exact, linear (3D), bilinear / bicubic (4D), trilinear (5D) and area
    (adaptive average pooling); PyTorch's source-index rules, including the use of a given
    ``scale_factor`` (unless ``recompute_scale_factor``) in place of the size ratio.
    ``antialias=True`` (bilinear, bicubic) widens the filter when downscaling (:func:`_aa_taps`).
    """
    op = "interpolate"
    x = _tensor(input, op)
    if mode not in _MODES:
        raise DomainError(f"{op}: mode must be one of {tuple(_MODES)}, got {mode!r}")
    if antialias and mode not in ("bilinear", "bicubic"):
        raise DomainError(f"{op}: anti-alias option is restricted to bilinear and bicubic modes and requires "
                          f"a 4-D tensor as input, got mode {mode!r}")
    d = x.ndim - 2
    if d < 1 or d > 3:
        raise ShapeError(f"{op}: expects a 3D, 4D or 5D input (N, C, *spatial), got {x.ndim}D")
    if _MODES[mode] is not None and _MODES[mode] != d:
        raise ShapeError(f"{op}: mode {mode!r} expects a {_MODES[mode] + 2}D input, got {x.ndim}D")
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise DomainError(f"{op}: align_corners option can only be set with the interpolating modes: "
                              f"linear | bilinear | bicubic | trilinear")
    else:
        align_corners = bool(align_corners)
    spatial = tuple(x.shape[2:])
    if size is not None and scale_factor is not None:
        raise DomainError(f"{op}: only one of size or scale_factor should be defined")
    if size is not None:
        if _is_int(size):
            size = (int(size),) * d
        size = tuple(size)
        if len(size) != d or not all(_is_int(s) for s in size):
            raise ShapeError(f"{op}: size must be an int or {d} ints for a {x.ndim}D input, got {size!r}")
        out = tuple(int(s) for s in size)
        scales = (None,) * d
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != d:
                raise ShapeError(f"{op}: scale_factor must have {d} elements, got {scale_factor!r}")
            scales = tuple(float(s) for s in scale_factor)
        else:
            scales = (float(scale_factor),) * d
        out = tuple(math.floor(float(L) * s) for L, s in zip(spatial, scales))
        if recompute_scale_factor:
            scales = (None,) * d
    else:
        raise DomainError(f"{op}: either size or scale_factor should be defined")
    if any(o <= 0 for o in out):
        raise ShapeError(f"{op}: output size {out} must be positive (input spatial size {spatial})")
    if any(L == 0 for L in spatial):
        raise ShapeError(f"{op}: input spatial size {spatial} must be positive")
    if mode == "area":
        return _adaptive_avg(op, x, out, d)
    if mode in ("nearest", "nearest-exact"):
        idxs = [_nearest_index(spatial[i], out[i], scales[i], mode == "nearest-exact") for i in range(d)]
        if all(o % L == 0 and np.array_equal(j, np.arange(o) // (o // L)) for j, L, o in zip(idxs, spatial, out)):
            # whole-number factors: each source repeated k times, one broadcast (the same values, faster)
            if out == spatial:
                return x.clone()                            # a new tensor, as PyTorch's
            lead = tuple(x.shape[:2])
            inter = lead + tuple(v for L in spatial for v in (L, 1))
            rep = lead + tuple(v for L, o in zip(spatial, out) for v in (L, o // L))
            return x.reshape(inter).expand(rep).reshape(lead + out)
        for i in range(d):
            if not (out[i] == spatial[i] and np.array_equal(idxs[i], np.arange(spatial[i]))):
                x = index_select(x, 2 + i, idxs[i])
        return x
    _float_input(op, x)
    dt = _host_dtype(x)
    taps = _aa_taps if antialias else _linear_taps
    for i in range(d):
        idxs, ws = taps(spatial[i], out[i], align_corners, scales[i], dt, mode == "bicubic")
        x = _combine(x, 2 + i, idxs, ws)
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    """Deprecated (warns, as in PyTorch): :func:`interpolate`."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    """Deprecated (warns): :func:`interpolate` in ``nearest`` mode."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    """Deprecated (warns): :func:`interpolate` in ``bilinear`` mode with ``align_corners=True``."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- pixel and channel shuffles -------------------------------------------------------------

def pixel_shuffle(input, upscale_factor):  # noqa: A002
    """``(*, C r^2, H, W) -> (*, C, H r, W r)``."""
    x = _tensor(input, "pixel_shuffle")
    r = int(upscale_factor)
    if x.ndim < 3:
        raise ShapeError(f"pixel_shuffle: expects at least 3 dimensions, got {x.ndim}")
    if r <= 0 or x.shape[-3] % (r * r):
        raise ShapeError(f"pixel_shuffle: channels {x.shape[-3]} must be divisible by upscale_factor^2 = {r * r}")
    lead, (C, H, W) = tuple(x.shape[:-3]), tuple(x.shape[-3:])
    n = len(lead)
    y = x.reshape(lead + (C // (r * r), r, r, H, W))
    y = y.permute(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return y.reshape(lead + (C // (r * r), H * r, W * r))


def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    """``(*, C, H r, W r) -> (*, C r^2, H, W)``, the inverse of :func:`pixel_shuffle`."""
    x = _tensor(input, "pixel_unshuffle")
    r = int(downscale_factor)
    if x.ndim < 3:
        raise ShapeError(f"pixel_unshuffle: expects at least 3 dimensions, got {x.ndim}")
    lead, (C, H, W) = tuple(x.shape[:-3]), tuple(x.shape[-3:])
    if r <= 0 or H % r or W % r:
        raise ShapeError(f"pixel_unshuffle: height {H} and width {W} must be divisible by downscale_factor {r}")
    n = len(lead)
    y = x.reshape(lead + (C, H // r, r, W // r, r))
    y = y.permute(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return y.reshape(lead + (C * r * r, H // r, W // r))


def channel_shuffle(input, groups):  # noqa: A002
    """``(N, C, *)``: channels regrouped as ``(groups, C/groups)`` and transposed."""
    x = _tensor(input, "channel_shuffle")
    g = int(groups)
    if x.ndim < 3:
        raise ShapeError(f"channel_shuffle: expects an input of at least 3 dimensions, got {x.ndim}")
    if g <= 0 or x.shape[1] % g:
        raise ShapeError(f"channel_shuffle: channels {x.shape[1]} must be divisible by groups {g}")
    N, C, rest = x.shape[0], x.shape[1], tuple(x.shape[2:])
    return x.reshape((N, g, C // g) + rest).transpose(1, 2).reshape((N, C) + rest)


# ---- im2col ---------------------------------------------------------------------------------

def _im2col_args(op, kernel_size, dilation, padding, stride):
    k, dl, p, s = (_tup(op, v, 2, w) for v, w in ((kernel_size, "kernel_size"), (dilation, "dilation"),
                                                  (padding, "padding"), (stride, "stride")))
    if min(k) <= 0 or min(dl) <= 0 or min(s) <= 0 or min(p) < 0:
        raise DomainError(f"{op}: kernel_size, dilation and stride must be positive and padding non-negative")
    return k, dl, p, s


def _blocks(op, size, k, dl, p, s):
    L = tuple((size[i] + 2 * p[i] - dl[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))
    if min(L) <= 0:
        raise ShapeError(f"{op}: the computed number of sliding blocks {L} is not positive for spatial size "
                         f"{size}, kernel_size {k}, dilation {dl}, padding {p}, stride {s}")
    return L


def _rows(i, k, dl, s, L):
    """Padded positions read by kernel tap ki at block li, ordered (ki, li)."""
    return (np.arange(k)[:, None] * dl + np.arange(L)[None, :] * s).reshape(-1)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """im2col: ``(N, C, H, W) -> (N, C kh kw, L)`` (or unbatched), blocks in row-major order."""
    op = "unfold"
    x = _tensor(input, op)
    if x.ndim not in (3, 4):
        raise ShapeError(f"{op}: expects a 3D or 4D input, got {x.ndim}D")
    k, dl, p, s = _im2col_args(op, kernel_size, dilation, padding, stride)
    unbatched = x.ndim == 3
    if unbatched:
        x = x.unsqueeze(0)
    N, C, H, W = x.shape
    L = _blocks(op, (H, W), k, dl, p, s)
    if p[0] or p[1]:
        x = pad(x, (p[1], p[1], p[0], p[0]))
    y = index_select(x, 2, _rows(0, k[0], dl[0], s[0], L[0]))
    y = index_select(y, 3, _rows(1, k[1], dl[1], s[1], L[1]))
    y = y.reshape((N, C, k[0], L[0], k[1], L[1])).permute(0, 1, 2, 4, 3, 5)
    y = y.reshape((N, C * k[0] * k[1], L[0] * L[1]))
    return y[0] if unbatched else y


def _fold_axis(y, ax, size, k, dl, p, s, L):
    """Sum each (tap, block) slice of axis ``ax`` into its unpadded position (slices in padding drop)."""
    pos = _rows(0, k, dl, s, L) - p
    ok = np.nonzero((pos >= 0) & (pos < size))[0]
    shape = list(y.shape)
    shape[ax] = size
    base = full(tuple(shape), 0, dtype=y.dtype, device=y.device)
    return base.index_add(ax, pos[ok], index_select(y, ax, ok) if ok.size < pos.size else y)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """col2im, the adjoint of :func:`unfold`: ``(N, C kh kw, L) -> (N, C, H, W)``; overlapping
    blocks add up."""
    op = "fold"
    x = _tensor(input, op)
    if x.ndim not in (2, 3):
        raise ShapeError(f"{op}: expects a 2D or 3D input, got {x.ndim}D")
    size = _tup(op, output_size, 2, "output_size")
    k, dl, p, s = _im2col_args(op, kernel_size, dilation, padding, stride)
    unbatched = x.ndim == 2
    if unbatched:
        x = x.unsqueeze(0)
    N, CK, Ltot = x.shape
    if CK % (k[0] * k[1]):
        raise ShapeError(f"{op}: expected size of input's dimension 1 ({CK}) to be divisible by the product "
                         f"of kernel_size {k}")
    L = _blocks(op, size, k, dl, p, s)
    if L[0] * L[1] != Ltot:
        raise ShapeError(f"{op}: expected input's dimension 2 ({Ltot}) to match the number of sliding blocks "
                         f"{L[0]} * {L[1]} = {L[0] * L[1]}")
    C = CK // (k[0] * k[1])
    y = x.reshape((N, C, k[0], k[1], L[0], L[1])).permute(0, 1, 2, 4, 3, 5)
    y = y.reshape((N, C, k[0] * L[0], k[1] * L[1]))
    y = _fold_axis(y, 2, size[0], k[0], dl[0], p[0], s[0], L[0])
    y = _fold_axis(y, 3, size[1], k[1], dl[1], p[1], s[1], L[1])
    return y[0] if unbatched else y


# ---- power-average pooling ------------------------------------------------------------------

def _lp_finish(out, p, kprod):
    return (out.sign() * out.abs().relu()).mul(kprod).pow(1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """``(sum over window of x^p)^(1/p)``, as PyTorch: ``avg_pool(x^p) * k`` then the 1/p power."""
    k = kernel_size[0] if isinstance(kernel_size, (list, tuple)) else kernel_size
    out = avg_pool1d(input.pow(norm_type), k, stride, 0, ceil_mode)
    return _lp_finish(out, float(norm_type), int(k))


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """2-d :func:`lp_pool1d` over the last two axes."""
    kh, kw = _tup("lp_pool2d", kernel_size, 2, "kernel_size")
    out = avg_pool2d(input.pow(norm_type), (kh, kw), stride, 0, ceil_mode)
    return _lp_finish(out, float(norm_type), kh * kw)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """3-d :func:`lp_pool1d` over the last three axes."""
    k = _tup("lp_pool3d", kernel_size, 3, "kernel_size")
    out = avg_pool3d(input.pow(norm_type), k, stride, 0, ceil_mode)
    return _lp_finish(out, float(norm_type), k[0] * k[1] * k[2])


# The ops of autocast's lists cast their inputs while an autocast region is on (torchlean.amp).
autocast_namespace(globals())
