"""Normalization functionals with PyTorch's signatures, composed from recorded ops.

``batch_norm`` and ``layer_norm`` are the ``batch_norm_*``/``layer_norm*`` primitives; group and
instance norm reuse ``layer_norm_noaffine`` on a reshaped view; RMS and local response norm are
formulas of elementwise ops and reductions. Gradients come from the parts.
"""

from __future__ import annotations

import math
import numbers

from ..dtypes import finfo
from ..errors import DomainError, ShapeError, TorchLeanError
from ..ops import cat, zeros
from ..tensor import Tensor, no_grad
from . import functional_layers as FL

__all__ = ["batch_norm", "group_norm", "instance_norm", "layer_norm", "rms_norm", "local_response_norm"]


def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TorchLeanError(f"{op}: {what} must be a Tensor, got {type(x).__name__}")
    return x


def _shape_tuple(op, normalized_shape):
    if isinstance(normalized_shape, numbers.Integral) and not isinstance(normalized_shape, bool):
        return (int(normalized_shape),)
    try:
        return tuple(int(v) for v in normalized_shape)
    except TypeError:
        raise TorchLeanError(f"{op}: normalized_shape must be an int or a sequence of ints, "
                             f"got {normalized_shape!r}") from None


def _channel_view(t, ndim):
    """A per-channel vector ``(C,)`` viewed as ``(1, C, 1, ..., 1)`` for an ``ndim``-d input."""
    return t.reshape((1, t.shape[0]) + (1,) * (ndim - 2))


def _affine(op, y, weight, bias):
    """``y * weight + bias`` with per-channel ``(C,)`` weight and bias (either may be None)."""
    c = y.shape[1]
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            _tensor(t, op, name)
            if t.shape != (c,):
                raise ShapeError(f"{op}: {name} must have shape ({c},), got {t.shape}")
    if weight is not None:
        y = y * _channel_view(weight, y.ndim)
    if bias is not None:
        y = y + _channel_view(bias, y.ndim)
    return y


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,  # noqa: A002
               momentum=0.1, eps=1e-5):
    """Batch norm over channel axis 1 of ``(N, C, *)``: batch statistics (biased variance) when
    ``training``, updating the given running ones in place with the unbiased variance; else the
    running statistics.

        >>> import torchlean as tl
        >>> rm, rv = tl.zeros(2), tl.ones(2)
        >>> _ = batch_norm(tl.tensor([[1.0, 2.0], [3.0, 6.0]]), rm, rv, training=True)
        >>> [round(v, 4) for v in rm.tolist()]
        [0.2, 0.4]
    """
    return FL.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalize over the trailing ``normalized_shape`` axes (biased variance), then scale and shift.

        >>> import torchlean as tl
        >>> [round(v, 4) for v in layer_norm(tl.tensor([[1.0, 3.0]]), (2,)).tolist()[0]]
        [-1.0, 1.0]
    """
    op = "layer_norm"
    _tensor(input, op)
    ns = _shape_tuple(op, normalized_shape)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (not isinstance(t, Tensor) or t.shape != ns):
            raise ShapeError(f"{op}: {name} must have shape {ns}, got "
                             f"{t.shape if isinstance(t, Tensor) else type(t).__name__}")
    return FL.layer_norm(input, ns, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalize each of ``num_groups`` channel groups of every sample of ``(N, C, *)`` (biased
    variance), then apply per-channel ``weight`` and ``bias``.

        >>> import torchlean as tl
        >>> y = group_norm(tl.tensor([[1.0, 3.0, 0.0, 4.0]]), 2)
        >>> [round(v, 4) for v in y.tolist()[0]]
        [-1.0, 1.0, -1.0, 1.0]
    """
    op = "group_norm"
    _tensor(input, op)
    if input.ndim < 2:
        raise ShapeError(f"{op}: expected an input of at least 2 axes (N, C, *), got shape {input.shape}")
    if not isinstance(num_groups, numbers.Integral) or isinstance(num_groups, bool) or num_groups <= 0:
        raise DomainError(f"{op}: num_groups must be a positive int, got {num_groups!r}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise ShapeError(f"{op}: expected the number of channels ({c}) to be divisible by "
                         f"num_groups ({num_groups})")
    spatial = 1
    for v in input.shape[2:]:
        spatial *= v
    if (n * c // num_groups) * spatial == 1:
        raise ShapeError(f"{op}: expected more than 1 value per channel when training, got input "
                         f"of shape {input.shape}")
    per = (c // num_groups) * spatial
    if n == 0 or per == 0:
        return _affine(op, input * 1.0, weight, bias)
    g = input.reshape((n, num_groups, per))
    y = FL.layer_norm(g, (per,), None, None, eps).reshape(input.shape)
    return _affine(op, y, weight, bias)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalize each channel of each sample of ``(N, C, *spatial)`` over its spatial axes.

    With ``use_input_stats`` the statistics are the sample's own (biased variance), and given
    running statistics are updated in place, as PyTorch does, with the batch mean of the
    per-instance means and unbiased variances; otherwise the running statistics are used.

        >>> import torchlean as tl
        >>> [round(v, 4) for v in instance_norm(tl.tensor([[[1.0, 3.0]]])).flatten().tolist()]
        [-1.0, 1.0]
    """
    op = "instance_norm"
    _tensor(input, op)
    if input.ndim < 3:
        raise ShapeError(f"{op}: expected an input (N, C, *spatial), got shape {input.shape}")
    n, c = input.shape[0], input.shape[1]
    size = input.numel() // max(n * c, 1)
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise DomainError(f"{op}: running_mean and running_var are required when use_input_stats=False")
        return FL.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if size <= 1:
        raise ShapeError(f"{op}: expected more than 1 spatial element when training, got input "
                         f"of shape {input.shape}")
    if running_mean is not None or running_var is not None:
        _update_instance_stats(op, input, running_mean, running_var, momentum)
    flat = input.reshape((n, c, size))
    y = FL.layer_norm(flat, (size,), None, None, eps).reshape(input.shape)
    return _affine(op, y, weight, bias)


def _update_instance_stats(op, x, running_mean, running_var, momentum):
    """``r = (1 - m) r + m * mean over the batch of the per-instance statistic`` (unbiased var)."""
    if not isinstance(momentum, numbers.Real) or isinstance(momentum, bool) or not math.isfinite(momentum):
        raise DomainError(f"{op}: momentum must be a finite number, got {momentum!r}")
    m = float(momentum)
    n, c = x.shape[0], x.shape[1]
    with no_grad():
        flat = x.detach().reshape((n, c, -1))
        stats = (flat.mean(dim=2).mean(dim=0), flat.var(dim=2, correction=1).mean(dim=0))
        for buf, stat in zip((running_mean, running_var), stats):
            if buf is None:
                continue
            if buf.shape != (c,):
                raise ShapeError(f"{op}: running statistics must have shape ({c},), got {buf.shape}")
            buf._value[...] = (buf * (1.0 - m) + stat.to(dtype=buf.dtype) * m)._value


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` axes;
    ``eps=None`` is ``finfo(input.dtype).eps``.

        >>> import torchlean as tl
        >>> [round(v, 4) for v in rms_norm(tl.tensor([[3.0, 4.0]]), (2,)).tolist()[0]]
        [0.8485, 1.1314]
    """
    op = "rms_norm"
    _tensor(input, op)
    ns = _shape_tuple(op, normalized_shape)
    k = len(ns)
    if k > input.ndim or tuple(input.shape[input.ndim - k:]) != ns:
        raise ShapeError(f"{op}: normalized_shape {ns} does not match the trailing axes of input {input.shape}")
    if weight is not None:
        _tensor(weight, op, "weight")
        if weight.shape != ns:
            raise ShapeError(f"{op}: weight must have shape {ns}, got {weight.shape}")
    if eps is None:
        eps = finfo(input.dtype).eps
    dims = tuple(range(input.ndim - k, input.ndim))
    if k == 0:
        ms = input * input
    else:
        ms = (input * input).mean(dim=dims, keepdim=True)
    y = input * (ms + float(eps)).rsqrt()
    return y if weight is None else y * weight


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002
    """``x / (k + alpha * mean of x**2 over a window of size channels) ** beta`` on ``(N, C, *)``;
    the window covers channels ``c - size//2 .. c + (size-1)//2``, zero-padded (PyTorch's rule).

        >>> import torchlean as tl
        >>> y = local_response_norm(tl.tensor([[[2.0], [0.0]]]), 2, alpha=1.0, beta=1.0, k=0.0)
        >>> [round(v, 4) for v in y.flatten().tolist()]
        [1.0, 0.0]
    """
    op = "local_response_norm"
    _tensor(input, op)
    if input.ndim < 3:
        raise ShapeError(f"{op}: expected 3D or higher dimensional input, got shape {input.shape}")
    if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size <= 0:
        raise DomainError(f"{op}: size must be a positive int, got {size!r}")
    size = int(size)
    c = input.shape[1]
    sq = input * input
    lo, hi = size // 2, (size - 1) // 2
    parts = []
    if lo:
        parts.append(zeros(*((input.shape[0], lo) + tuple(input.shape[2:])), dtype=input.dtype, device=input.device))
    parts.append(sq)
    if hi:
        parts.append(zeros(*((input.shape[0], hi) + tuple(input.shape[2:])), dtype=input.dtype, device=input.device))
    padded = cat(parts, dim=1) if len(parts) > 1 else sq
    acc = padded.narrow(1, 0, c)
    for j in range(1, size):
        acc = acc + padded.narrow(1, j, c)
    div = (acc * (float(alpha) / size) + float(k)) ** float(beta)
    return input / div
