"""Layer functions of ``tl.nn.functional``: convolution, pooling, normalization,
attention, spectral convolution, the selective scan and the real FFT.

Signatures and semantics are PyTorch's where PyTorch has the function; each call
records one op of docs/OPS.md (``conv``, ``max_pool``, ``batch_norm_train``,
``flash_attention``, ...) or a short composition of them. Layouts are
channels-first for convolution and pooling, with or without a batch axis.

    >>> import torchlean as tl
    >>> import torchlean.nn.functional as F
    >>> F.conv2d(tl.ones(1, 2, 5, 5), tl.ones(3, 2, 3, 3), padding=1).shape
    torchlean.Size([1, 3, 5, 5])
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import DeviceError, DomainError, DTypeError, ShapeError, TorchLeanError
from ..spec.conv import MAX_SPATIAL
from ..autograd import record
from ..kernels import get_kernels
from ..ops import ones, zeros
from ..tensor import Tensor
from ..amp import autocast_namespace

__all__ = ["conv1d", "conv2d", "conv3d", "conv_nd", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "conv_transpose_nd", "smooth_max_pool", "multi_head_attention", "spectral_conv1d",
           "selective_scan", "rfft", "irfft"]


# ---- argument helpers -----------------------------------------------------------------------

def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TorchLeanError(f"{op}: {what} must be a Tensor, got {type(x).__name__}")
    return x


def _tup(v, d):
    """An int repeated over ``d`` axes, or a sequence as a tuple; the op's shape rule checks it."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),) * d
    if isinstance(v, (list, tuple)):
        return tuple(int(e) if isinstance(e, numbers.Integral) and not isinstance(e, bool) else e for e in v)
    return v


def _const(like, value, shape):
    """A constant (no gradient) of ``like``'s dtype and device."""
    return (ones if value == 1 else zeros)(*shape, dtype=like.dtype, device=like.device)


def _check_spatial(op, d):
    if d < 1 or d > MAX_SPATIAL:
        raise ShapeError(f"{op}: {d} spatial axes; supported are 1 to {MAX_SPATIAL}")


# ---- convolution ----------------------------------------------------------------------------

def _string_padding(op, padding, kernel, stride, dilation, d):
    """PyTorch's ``"valid"`` / ``"same"`` as symmetric padding plus a per-axis leading crop.

    ``"same"`` pads ``dil * (k - 1)`` in total, the extra cell of an odd total on the
    right (PyTorch's choice); symmetric padding by the larger half gives one extra
    output in front, which the crop removes.
    """
    if padding == "valid":
        return (0,) * d, None
    if padding != "same":
        raise DomainError(f"{op}: padding must be an int, a tuple, 'valid' or 'same', got {padding!r}")
    if any(s != 1 for s in _tup(stride, d)):
        raise DomainError(f"{op}: padding='same' is not supported for strided convolutions (stride {stride})")
    total = tuple(di * (k - 1) for di, k in zip(_tup(dilation, d), kernel))
    pad = tuple((t + 1) // 2 for t in total)
    crop = tuple(t % 2 for t in total)
    return pad, (crop if any(crop) else None)


def _crop_front(y, crop):
    d = len(crop)
    index = (Ellipsis,) + tuple(slice(c, None) for c in crop)
    return y[index] if y.ndim >= d else y


def _conv_args(op, d, input, weight, bias, layout):  # noqa: A002
    """The number of spatial axes of a (transposed) convolution, its arguments checked."""
    _tensor(input, op)
    _tensor(weight, op, "weight")
    if bias is not None:
        _tensor(bias, op, "bias")
    if d is None:
        d = weight.ndim - 2
    _check_spatial(op, d)
    if weight.ndim != d + 2:
        raise ShapeError(f"{op}: weight {weight.shape} must have {d + 2} axes ({layout}, *kernel) "
                         f"for {d} spatial axes")
    return d


def _conv(op, d, input, weight, bias, stride, padding, dilation, groups):  # noqa: A002
    d = _conv_args(op, d, input, weight, bias, "C_out, C_in/groups")
    crop = None
    if isinstance(padding, str):
        padding, crop = _string_padding(op, padding, weight.shape[2:], stride, dilation, d)
    attrs = {"stride": _tup(stride, d), "padding": _tup(padding, d), "dilation": _tup(dilation, d),
             "groups": groups}
    if bias is None:
        y = record("conv_nobias", (input, weight), attrs)
    else:
        y = record("conv", (input, weight, bias), attrs)
    return y if crop is None else _crop_front(y, crop)


def conv_nd(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """Convolution (cross-correlation) over 1 to 8 spatial axes, their number taken from ``weight``.

    ``input`` ``(N, C_in, *spatial)`` or ``(C_in, *spatial)``; ``weight``
    ``(C_out, C_in / groups, *kernel)``; ``bias`` ``(C_out,)``. ``padding`` is an int,
    a tuple, ``"valid"`` or ``"same"`` (stride 1 only; an odd total padding puts the
    extra zero on the right, as PyTorch does).

        >>> import torchlean as tl
        >>> conv_nd(tl.ones(1, 1, 4, 4, 4, 4), tl.ones(2, 1, 2, 2, 2, 2)).shape
        torchlean.Size([1, 2, 3, 3, 3, 3])
    """
    return _conv("conv_nd", None, input, weight, bias, stride, padding, dilation, groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """PyTorch's ``conv1d``: input ``(N, C_in, L)`` or ``(C_in, L)``, weight ``(C_out, C_in/groups, k)``.

        >>> import torchlean as tl
        >>> conv1d(tl.ones(1, 1, 5), tl.ones(1, 1, 3)).tolist()
        [[[3.0, 3.0, 3.0]]]
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """PyTorch's ``conv2d``: input ``(N, C_in, H, W)`` or ``(C_in, H, W)``, weight ``(C_out, C_in/groups, kh, kw)``."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """PyTorch's ``conv3d``: input ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(op, d, input, weight, bias, stride, padding, output_padding, groups, dilation):  # noqa: A002
    d = _conv_args(op, d, input, weight, bias, "C_in, C_out/groups")
    if isinstance(padding, str):
        raise DomainError(f"{op}: string padding {padding!r} is not supported for transposed convolution")
    attrs = {"stride": _tup(stride, d), "padding": _tup(padding, d),
             "output_padding": _tup(output_padding, d), "dilation": _tup(dilation, d), "groups": groups}
    if bias is None:
        return record("conv_transpose_nobias", (input, weight), attrs)
    return record("conv_transpose", (input, weight, bias), attrs)


def conv_transpose_nd(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                      dilation=1):
    """Transposed convolution over 1 to 8 spatial axes (the adjoint of :func:`conv_nd` in ``input``).

    ``weight`` ``(C_in, C_out / groups, *kernel)``; output length per axis
    ``(S - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.
    """
    return _conv_transpose("conv_transpose_nd", None, input, weight, bias, stride, padding, output_padding,
                           groups, dilation)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """PyTorch's ``conv_transpose1d``; weight ``(C_in, C_out/groups, k)``.

        >>> import torchlean as tl
        >>> conv_transpose1d(tl.ones(1, 1, 3), tl.ones(1, 1, 2), stride=2).tolist()
        [[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]
    """
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding,
                           groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """PyTorch's ``conv_transpose2d``; weight ``(C_in, C_out/groups, kh, kw)``."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding,
                           groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """PyTorch's ``conv_transpose3d``; weight ``(C_in, C_out/groups, kd, kh, kw)``."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding,
                           groups, dilation)


# ---- pooling --------------------------------------------------------------------------------

def _pool_common(op, d, input, kernel_size, stride, padding, ceil_mode):  # noqa: A002
    _tensor(input, op)
    if ceil_mode:
        raise DomainError(f"{op}: ceil_mode=True is not supported (output lengths use floor mode)")
    k = _tup(kernel_size, d)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _tup(stride, d)
    return {"kernel_size": k, "stride": s, "padding": _tup(padding, d)}


def smooth_max_pool(x, kernel_size, beta, stride=None, padding=0):
    """``(1/beta) log sum exp(beta x)`` over each window (real cells only): a smooth max-pool.

    ``kernel_size`` is a sequence with one entry per spatial axis; a bare int is
    repeated over ``x.ndim - 2`` spatial axes (an ``(N, C, *spatial)`` input).
    It tends to max-pooling as ``beta -> +inf``; ``beta`` must be finite and non-zero.

        >>> import torchlean as tl
        >>> round(smooth_max_pool(tl.tensor([[[0.0, 0.0]]]), 2, beta=1.0).item(), 6)
        0.693147
    """
    op = "smooth_max_pool"
    _tensor(x, op)
    if isinstance(kernel_size, numbers.Integral) and not isinstance(kernel_size, bool):
        kernel_size = (int(kernel_size),) * max(x.ndim - 2, 1)
    d = len(kernel_size) if isinstance(kernel_size, (list, tuple)) else 1
    attrs = _pool_common(op, d, x, kernel_size, stride, padding, False)
    attrs["beta"] = beta
    return record(op, (x,), attrs)


# ---- normalization --------------------------------------------------------------------------


def _update_running_stats(op, x, running_mean, running_var, momentum):
    """running = (1 - momentum) * running + momentum * batch statistic, in place (PyTorch's rule).

    The variance folded into ``running_var`` is the unbiased one (divisor n - 1).
    """
    if not isinstance(momentum, numbers.Real) or isinstance(momentum, bool) or not math.isfinite(momentum):
        raise DomainError(f"{op}: momentum must be a finite number, got {momentum!r}")
    m = float(momentum)
    c = x.shape[1]
    for buf in (running_mean, running_var):
        if buf is None:
            continue
        if buf.shape != (c,):
            raise ShapeError(f"{op}: running statistics must have shape ({c},), got {buf.shape} "
                             f"for input {x.shape}")
        if buf.device != x.device:
            raise DeviceError(f"{op}: running statistics on {buf.device} for an input on {x.device}")
    v = x.detach()._value
    v = (v if v.flags.c_contiguous else v.copy()).reshape(x.shape[0], c, -1)
    # One kernel: a statistics pass over x and the update, in float64. It updates buffers of x's
    # dtype in place; another dtype (or layout) goes through a copy that is written back.
    bufs = [None if b is None else b._value for b in (running_mean, running_var)]
    work = [b if b is None or (b.dtype == v.dtype and b.flags.c_contiguous) else b.astype(v.dtype, order="C")
            for b in bufs]
    get_kernels(x.device).batch_norm_running_update(v, work[0], work[1], m)
    for b, w in zip(bufs, work):
        if w is not b:
            b[...] = w.astype(b.dtype)


# ---- attention ------------------------------------------------------------------------------

def _host_mask(m):
    """A mask (Tensor, array, nested list) as a host array."""
    return m.numpy() if isinstance(m, Tensor) else np.asarray(m)


def _attention_shapes(op, q, k, v):
    for name, t in (("query", q), ("key", k), ("value", v)):
        _tensor(t, op, name)
        if t.ndim < 2:
            raise ShapeError(f"{op}: {name} must have at least 2 axes (..., length, dim), got {t.shape}")
    L, E = q.shape[-2:]
    S, Ek = k.shape[-2:]
    if E != Ek:
        raise ShapeError(f"{op}: query {q.shape} and key {k.shape} have different embedding dims")
    if v.shape[-2] != S:
        raise ShapeError(f"{op}: key {k.shape} and value {v.shape} have different lengths")
    lead = q.shape[:-2]
    if k.shape[:-2] == lead == v.shape[:-2]:
        return lead, L, S, E, v.shape[-1]
    try:
        lead = tuple(np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))
    except ValueError:
        raise ShapeError(f"{op}: batch axes of query {q.shape}, key {k.shape}, value {v.shape} "
                         "do not broadcast") from None
    return lead, L, S, E, v.shape[-1]


def _split_mask(op, attn_mask, is_causal, L, S):
    """(allowed, additive): a host bool array (True = may attend), or a float mask added to the logits."""
    if is_causal:
        if attn_mask is not None:
            raise DomainError(f"{op}: pass either attn_mask or is_causal=True, not both")
        return np.tril(np.ones((L, S), dtype=bool)), None
    if attn_mask is None:
        return None, None
    kind = attn_mask.dtype.kind if isinstance(attn_mask, Tensor) else np.asarray(attn_mask).dtype.kind
    if kind == "b":
        return _host_mask(attn_mask), None
    if kind != "f":
        raise DTypeError(f"{op}: attn_mask must be bool (True = may attend) or float (added to the "
                         f"logits), got dtype {attn_mask.dtype}")
    return None, attn_mask


def _bcast_mask(op, m, shape):
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise ShapeError(f"{op}: attn_mask of shape {np.shape(m)} does not broadcast to the attention "
                         f"shape {shape} (..., L, S)") from None


def _attend_unfused(q, k, v, allowed, additive, scale):
    """(output, weights): softmax(q k^T * scale + additive, restricted to ``allowed``) @ v."""
    logits = (q @ k.transpose(-2, -1)) * scale
    if additive is not None:
        if not isinstance(additive, Tensor):
            additive = Tensor(np.asarray(additive, dtype=q.dtype)).to(device=q.device)
        logits = logits + additive
    if allowed is None:
        p = record("softmax", (logits,), {"axis": -1})
    else:
        p = record("hard_masked_softmax", (logits,), {"mask": _bcast_mask("scaled_dot_product_attention",
                                                                          allowed, logits.shape)})
    return p @ v, p


def _sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None, need_weights=False):
    op = "scaled_dot_product_attention"
    lead, L, S, E, Ev = _attention_shapes(op, q, k, v)
    if scale is not None and (not isinstance(scale, numbers.Real) or isinstance(scale, bool)
                              or not math.isfinite(scale)):
        raise DomainError(f"{op}: scale must be a finite number or None, got {scale!r}")
    fused_causal = is_causal and attn_mask is None and not need_weights
    allowed, additive = _split_mask(op, attn_mask, is_causal and not fused_causal, L, S)
    if additive is not None or need_weights:
        sc = 1.0 / math.sqrt(E) if scale is None else float(scale)
        return _attend_unfused(q, k, v, allowed, additive, sc)
    if not lead:  # the op needs at least one batch axis
        q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
    full = lead or (1,)
    attrs = {"scale": None if scale is None else float(scale)}
    if fused_causal:  # the kernels skip the key tiles above the diagonal
        attrs["causal"] = attrs["hard"] = True
    if allowed is not None:
        attrs["mask"] = _bcast_mask(op, allowed, full + (L, S))
        attrs["hard"] = True
    if q.shape[:-2] != full or k.shape[:-2] != full or v.shape[:-2] != full:
        q, k, v = q.broadcast_to(full + (L, E)), k.broadcast_to(full + (S, E)), v.broadcast_to(full + (S, Ev))
    out = record("flash_attention", (q, k, v), attrs)
    return (out if lead else out.reshape(L, Ev)), None


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalize over the trailing ``normalized_shape`` axes (biased variance), then scale and shift.

        >>> import torchlean as tl
        >>> [round(v, 4) for v in layer_norm(tl.tensor([[1.0, 3.0]]), (2,)).tolist()[0]]
        [-1.0, 1.0]
    """
    op = "layer_norm"
    _tensor(input, op)
    ns = (int(normalized_shape),) if isinstance(normalized_shape, numbers.Integral) else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or k > input.ndim or input.shape[input.ndim - k:] != ns:
        raise ShapeError(f"{op}: normalized_shape {ns} does not match the trailing axes of input {input.shape}")
    attrs = {"normalized_ndim": k, "eps": float(eps)}
    if weight is None and bias is None:
        return record("layer_norm_noaffine", (input,), attrs)
    weight = _const(input, 1, ns) if weight is None else weight
    bias = _const(input, 0, ns) if bias is None else bias
    return record("layer_norm", (input, weight, bias), attrs)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,  # noqa: A002
               momentum=0.1, eps=1e-5):
    """PyTorch's ``batch_norm`` over channel axis 1 of ``(N, C)`` or ``(N, C, *spatial)``.

    ``training=True`` normalizes with the batch statistics (op ``batch_norm_train``,
    biased variance) and, when given, updates ``running_mean``/``running_var`` in place:
    ``r = (1 - momentum) r + momentum * stat`` with the *unbiased* batch variance.
    ``training=False`` uses the running statistics (op ``batch_norm_eval``), which
    receive no gradient.

        >>> import torchlean as tl
        >>> rm, rv = tl.zeros(2), tl.ones(2)
        >>> _ = batch_norm(tl.tensor([[1.0, 2.0], [3.0, 6.0]]), rm, rv, training=True)
        >>> [round(v, 4) for v in rm.tolist()]
        [0.2, 0.4]
    """
    op = "batch_norm"
    _tensor(input, op)
    if input.ndim < 2:
        raise ShapeError(f"{op}: input must be (N, C) or (N, C, *spatial), got shape {input.shape}")
    c = input.shape[1]
    gamma = _const(input, 1, (c,)) if weight is None else weight
    beta = _const(input, 0, (c,)) if bias is None else bias
    if training:
        if input.numel() // max(c, 1) <= 1:
            raise ShapeError(f"{op}: expected more than 1 value per channel when training, got input "
                             f"of shape {input.shape}")
        y = record("batch_norm_train", (input, gamma, beta), {"eps": float(eps)})
        if running_mean is not None or running_var is not None:
            _update_running_stats(op, input, running_mean, running_var, momentum)
        return y
    if running_mean is None or running_var is None:
        raise DomainError(f"{op}: running_mean and running_var are required when training=False")
    return record("batch_norm_eval", (input, gamma, beta, running_mean, running_var), {"eps": float(eps)})


def multi_head_attention(x, wq, wk, wv, wo, num_heads, mask=None, use_flash=True):
    """The seeds' multi-head self-attention layer (no biases): ``concat_h(attn_h(x Wq, x Wk, x Wv)) @ Wo``.

    ``x`` ``(n, d_model)`` or ``(batch, n, d_model)``; ``wq``/``wk``/``wv``
    ``(d_model, heads * head_dim)``; ``wo`` ``(heads * head_dim, d_model)``; ``mask`` an
    optional 0/1 ``(n, n)`` array shared by heads and batch entries, with the seeds'
    convention (a blocked logit is replaced by -1000). ``use_flash`` picks the
    runtime path only. For PyTorch's layer with biases see
    :class:`torchlean.nn.MultiheadAttention`.
    """
    attrs = {"num_heads": num_heads, "use_flash": bool(use_flash)}
    if mask is not None:
        attrs["mask"] = _host_mask(mask)
    return record("multi_head_attention", (_tensor(x, "multi_head_attention"), wq, wk, wv, wo), attrs)


# ---- spectral convolution, selective scan, real FFT -----------------------------------------

def spectral_conv1d(x, w_re, w_im):
    """FNO's spectral convolution along the grid axis; channels last.

    ``x`` ``(grid, width)`` or ``(batch, grid, width)``; ``w_re``/``w_im``
    ``(modes, width, width_out)``. ``Y[k] = X[k] @ (w_re[k] + 1j w_im[k])`` for the
    first ``modes`` bins of ``X = rfft(x)``, the other bins zero, ``y = irfft(Y)``.
    """
    return record("spectral_conv1d", (_tensor(x, "spectral_conv1d"), w_re, w_im), {})


def selective_scan(x, A, B, h0=None):
    """Every state of the diagonal linear recurrence ``h[t] = A * h[t-1] + B * x[t]``.

    ``x`` ``(..., L, S)`` scans along its second-last axis; ``A`` and ``B`` have shape
    ``(S,)`` (op ``selective_scan``) or, token-dependent, ``x``'s shape (op
    ``selective_scan_var``; an ``(S,)`` coefficient next to a token-dependent one is
    broadcast). ``h0`` ``(..., S)`` defaults to zeros. Returns ``h`` of ``x``'s shape.

        >>> import torchlean as tl
        >>> selective_scan(tl.ones(3, 1), tl.tensor([0.5]), tl.tensor([1.0])).tolist()
        [[1.0], [1.5], [1.75]]
    """
    op = "selective_scan"
    for name, t in (("x", x), ("A", A), ("B", B)):
        _tensor(t, op, name)
    if x.ndim < 2:
        raise ShapeError(f"{op}: x must be (..., L, S), got shape {x.shape}")
    S = x.shape[-1]
    if h0 is None:
        h0 = _const(x, 0, x.shape[:-2] + (S,))
    if A.shape == (S,) and B.shape == (S,):
        return record("selective_scan", (x, A, B, h0), {})
    if A.shape == (S,) and B.shape == x.shape:
        A = A.broadcast_to(x.shape)
    elif B.shape == (S,) and A.shape == x.shape:
        B = B.broadcast_to(x.shape)
    return record("selective_scan_var", (x, A, B, h0), {})


def rfft(x):
    """Unnormalized real DFT of the last axis, packed ``(..., n//2 + 1, 2)`` with [re, im] last.

        >>> import torchlean as tl
        >>> rfft(tl.tensor([1.0, 2.0, 3.0, 4.0])).tolist()[0]
        [10.0, 0.0]
    """
    return record("rfft", (_tensor(x, "rfft"),), {})


def irfft(p, n=None):
    """Inverse of :func:`rfft` (normalized by 1/n) of a packed half-spectrum ``(..., bins, 2)``.

    ``n`` defaults to ``2 * (bins - 1)``, as in ``torch.fft.irfft``; the imaginary
    parts at DC (and Nyquist for even ``n``) are ignored.
    """
    _tensor(p, "irfft")
    if n is None:
        if p.ndim < 2:
            raise ShapeError(f"irfft: input must be a packed half-spectrum (..., bins, 2), got shape {p.shape}")
        n = 2 * (p.shape[-2] - 1)
    return record("irfft", (p,), {"n": n})


# The ops of autocast's lists cast their inputs while an autocast region is on (torchlean.amp).
autocast_namespace(globals())
