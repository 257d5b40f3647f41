"""Less common functionals of ``torch.nn.functional``: fractional max pooling, the ``*_with_indices``
forms of adaptive max pooling, Gumbel-softmax, ``pdist``, ``conv_tbc``, and the in-place
activations (``relu_``, ``elu_``, ...). All are compositions of recorded ops.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..errors import DomainError, DTypeError, ShapeError, TorchLeanError
from ..ops import index_select, rand, tensor, where, zeros_like
from ..ops.inplace import apply_inplace
from ..tensor import Tensor, no_grad
from . import functional_activations as FA
from .functional_layers import conv1d
from .functional_resample import (
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    channel_shuffle,
)
from ..amp import autocast_namespace

__all__ = [
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "celu_",
    "conv_tbc",
    "elu_",
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
    "gumbel_softmax",
    "hardtanh_",
    "leaky_relu_",
    "native_channel_shuffle",
    "pdist",
    "relu_",
    "rrelu_",
    "selu_",
    "threshold_",
]


def _check_tensor(x, op, name="input"):
    if not isinstance(x, Tensor):
        raise TorchLeanError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


# ---- fractional max pooling ----------------------------------------------------------------

def _tuple(v, d, op, name):
    if isinstance(v, (list, tuple)):
        if len(v) != d:
            raise ShapeError(f"{op}: {name} must be a number or a tuple of {d}, got {tuple(v)}")
        return tuple(v)
    return (v,) * d


def _intervals(sample, in_size, out_size, pool):
    """torch's window starts: ``int((i + u) * a) - int(u * a)`` with ``a = (in - pool) / (out - 1)``,
    computed in the samples' dtype, and the last window ending at the input's end."""
    seq = np.empty(sample.shape + (out_size,), np.int64)
    if out_size > 1:
        ft = sample.dtype.type
        alpha = ft(in_size - pool) / ft(out_size - 1)
        i = np.arange(out_size - 1, dtype=sample.dtype)
        seq[..., :-1] = (((i + sample[..., None]) * alpha).astype(np.int64)
                         - (sample * alpha).astype(np.int64)[..., None])
    if out_size > 0:
        seq[..., -1] = in_size - pool
    return seq


def _fractional_max_pool(op, d, input, kernel_size, output_size, output_ratio, _random_samples):
    _check_tensor(input, op)
    if input.dtype.kind != "f":
        raise DTypeError(f"{op}: expected a floating point input, got {input.dtype.name}")
    if input.ndim not in (d + 1, d + 2):
        raise ShapeError(f"{op}: expected {d + 1}D or {d + 2}D input, got shape {tuple(input.shape)}")
    if output_size is None and output_ratio is None:
        raise DomainError(f"{op} requires specifying either an output_size or an output_ratio")
    kernel = tuple(int(k) for k in _tuple(kernel_size, d, op, "kernel_size"))
    spatial = tuple(input.shape[-d:])
    if output_size is None:
        ratio = _tuple(output_ratio, d, op, "output_ratio")
        out = tuple(int(s * r) for s, r in zip(spatial, ratio))
    else:
        out = tuple(int(o) for o in _tuple(output_size, d, op, "output_size"))
    names = ("time", "height", "width")[3 - d:]
    for k, o, s, n in zip(kernel, out, spatial, names):
        if k <= 0 or o < 0:
            raise DomainError(f"{op}: kernel_size must be positive and output size non-negative, got "
                              f"kernel {kernel}, output {out}")
        if o + k - 1 > s:
            raise ShapeError(f"{op}(): pool {n} {k} too large relative to input {n} {s}")
    batched = input.ndim == d + 2
    n_batch = int(input.shape[0]) if batched else 1
    channels = int(input.shape[-d - 1])
    if _random_samples is None:
        with no_grad():
            _random_samples = rand(n_batch, channels, d, dtype=input.dtype, device=input.device)
    _check_tensor(_random_samples, op, "_random_samples")
    if tuple(_random_samples.shape) != (n_batch, channels, d):
        raise ShapeError(f"{op}: _random_samples must have shape {(n_batch, channels, d)}, got "
                         f"{tuple(_random_samples.shape)}")
    samples = _random_samples.detach().numpy().astype(input.dtype.np).reshape(n_batch * channels, d)
    starts = [_intervals(samples[:, a], spatial[a], out[a], kernel[a]) for a in range(d)]
    # flat[p, o_1..o_d, k_1..k_d]: the flat in-plane index of window cell k of output o of plane p.
    P = n_batch * channels
    flat = np.zeros((P,) + out + kernel, np.int64)
    for a in range(d):
        pos = (starts[a].reshape((P,) + tuple(out[a] if b == a else 1 for b in range(d)) + (1,) * d)
               + np.arange(kernel[a]).reshape((1,) * (1 + d) + tuple(kernel[a] if b == a else 1 for b in range(d))))
        flat = flat * spatial[a] + pos
    K = int(np.prod(kernel))
    flat = flat.reshape((P,) + out + (K,))
    planes = input.reshape(P, int(np.prod(spatial)))
    if flat.size:
        windows = planes.detach().gather(-1, tensor(flat.reshape(P, -1), device=input.device))
        win = windows.reshape((P,) + out + (K,)).argmax(dim=-1).numpy()
        idx = np.take_along_axis(flat, win[..., None], axis=-1)[..., 0]
    else:
        idx = np.zeros((P,) + out, np.int64)
    y = planes.gather(-1, tensor(idx.reshape(P, -1), device=input.device))
    shape = tuple(input.shape[:-d]) + out
    return y.reshape(shape), tensor(idx.reshape(shape), device=input.device)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """Fractional max pooling over the last two axes of ``(N, C, H, W)`` or ``(C, H, W)``: windows of
    ``kernel_size`` start at pseudo-random, increasing offsets (Graham, 2014) drawn per plane from
    ``_random_samples`` (``(N, C, 2)`` in [0, 1), uniform when None; [..., 0] places the width
    windows, [..., 1] the height ones, as in torch). Returns ``(output, indices)``, indices flat
    ``h * W + w``; the gradient goes to the first maximal entry of each window."""
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio,
                                None if _random_samples is None else _swap_last(_random_samples))


def _swap_last(samples):
    """torch reads a 2-d sample as (width, height) and a 3-d one as (time, height, width)."""
    if not isinstance(samples, Tensor):
        raise TorchLeanError(f"fractional_max_pool2d: _random_samples must be a Tensor, got "
                             f"{type(samples).__name__}")
    return samples.flip(-1)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """See :func:`fractional_max_pool2d_with_indices`; the indices only with ``return_indices``.

        >>> import torchlean as tl
        >>> x = tl.arange(25.0).reshape(1, 1, 5, 5)
        >>> fractional_max_pool2d(x, 2, output_size=2, _random_samples=tl.zeros(1, 1, 2)).tolist()
        [[[[6.0, 9.0], [21.0, 24.0]]]]
    """
    y, i = fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio, True,
                                              _random_samples)
    return (y, i) if return_indices else y


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """Fractional max pooling over the last three axes (see :func:`fractional_max_pool2d_with_indices`);
    ``_random_samples`` is ``(N, C, 3)``, [..., 0] for depth, [..., 1] height, [..., 2] width;
    indices flat ``(t H + h) W + w``."""
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio,
                                _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """See :func:`fractional_max_pool3d_with_indices`; the indices only with ``return_indices``."""
    y, i = fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio, True,
                                              _random_samples)
    return (y, i) if return_indices else y


# ---- adaptive max pooling with indices -----------------------------------------------------

def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """``(output, indices)`` of :func:`adaptive_max_pool1d` (torch returns both whatever ``return_indices``)."""
    return adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """``(output, indices)`` of :func:`adaptive_max_pool2d`."""
    return adaptive_max_pool2d(input, output_size, return_indices=True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """``(output, indices)`` of :func:`adaptive_max_pool3d`."""
    return adaptive_max_pool3d(input, output_size, return_indices=True)


# ---- sampling, distances, sequence convolution ---------------------------------------------

def _gumbel_softmax(logits, gumbels, tau, hard, dim):
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.detach().argmax(dim=dim, keepdim=True)
    y_hard = zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) along ``dim`` with g standard Gumbel noise (-log of Exp(1) draws).
    ``hard=True`` returns the one-hot of the argmax whose gradient is the soft sample's
    (straight-through estimator). ``eps`` is deprecated and unused, as in torch.

        >>> import torchlean as tl
        >>> y = gumbel_softmax(tl.zeros(4, 3), hard=True)
        >>> y.sum(-1).tolist()
        [1.0, 1.0, 1.0, 1.0]
    """
    _check_tensor(logits, "gumbel_softmax", "logits")
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    with no_grad():
        gumbels = -zeros_like(logits).exponential_().log()
    return _gumbel_softmax(logits, gumbels, tau, hard, dim)


def pdist(input, p=2):
    """The p-norm distances between the rows of ``(N, M)`` ``input``, pairs ``i < j`` in row-major order
    (the upper triangle of ``cdist(input, input)``, ``N (N - 1) / 2`` values); ``p >= 0``. The
    gradient of a zero distance is 0, as in torch.

        >>> import torchlean as tl
        >>> pdist(tl.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])).tolist()
        [5.0, 1.0, 4.242640495300293]
    """
    _check_tensor(input, "pdist")
    if input.ndim != 2:
        raise ShapeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if input.dtype.kind != "f":
        raise DTypeError(f"pdist only supports floating-point dtypes, got {input.dtype.name}")
    if not p >= 0:
        raise DomainError(f"pdist only supports non-negative p values, got p={p}")
    i, j = np.triu_indices(int(input.shape[0]), 1)
    diff = index_select(input, 0, i.astype(np.int64)) - index_select(input, 0, j.astype(np.int64))
    if p == 0:
        return diff.norm(p=p, dim=1)
    same = (diff.detach() == 0).all(dim=1)
    dist = where(same.unsqueeze(1), 1.0, diff).norm(p=p, dim=1)
    return where(same, 0.0, dist)


def native_channel_shuffle(input, groups):
    """Same as :func:`channel_shuffle`."""
    return channel_shuffle(input, groups)


def conv_tbc(input, weight, bias, pad=0):
    """1-d convolution of a ``(time, batch, in_channels)`` sequence with weight ``(kernel, in, out)`` and
    bias ``(out,)``, zero-padded by ``pad`` steps at both ends; the output is ``(time', batch, out)``.

        >>> import torchlean as tl
        >>> conv_tbc(tl.ones(5, 2, 3), tl.ones(2, 3, 4), tl.zeros(4), 1).shape
        torchlean.Size([6, 2, 4])
    """
    op = "conv_tbc"
    for t, name in ((input, "input"), (weight, "weight"), (bias, "bias")):
        _check_tensor(t, op, name)
    if input.ndim != 3:
        raise ShapeError(f"{op}: Input must have 3 dims: time, batch, in_channel; got shape {tuple(input.shape)}")
    if weight.ndim != 3:
        raise ShapeError(f"{op}: Weight tensor must have 3 dims: kernel_width, in_channels, out_channels; "
                         f"got shape {tuple(weight.shape)}")
    if bias.ndim != 1:
        raise ShapeError(f"{op}: Bias must be 1-D, got shape {tuple(bias.shape)}")
    if input.shape[2] != weight.shape[1]:
        raise ShapeError(f"{op}: Input dim 2 (input channels) is not == dim 1 in the weight tensor "
                         f"({input.shape[2]} != {weight.shape[1]})")
    if weight.shape[2] != bias.shape[0]:
        raise ShapeError(f"{op}: Bias size must equal dim 2 in the weight tensor "
                         f"({bias.shape[0]} != {weight.shape[2]})")
    if not isinstance(pad, numbers.Integral) or pad < 0:
        raise DomainError(f"{op}: pad must be a non-negative integer, got {pad!r}")
    y = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=int(pad))
    return y.permute(2, 0, 1)


# ---- in-place activations ------------------------------------------------------------------

def _inplace(op, fn):
    def f(input, *args, **kwargs):
        _check_tensor(input, op)
        return apply_inplace(input, fn(input, *args, **kwargs), op)
    f.__name__ = f.__qualname__ = op
    f.__doc__ = (f"In-place :func:`{fn.__name__}`: writes the result into ``input`` and returns it "
                 "(autograd's in-place rules apply: not on a leaf that requires grad).")
    return f


relu_ = _inplace("relu_", FA.relu)
elu_ = _inplace("elu_", FA.elu)
celu_ = _inplace("celu_", FA.celu)
selu_ = _inplace("selu_", FA.selu)
leaky_relu_ = _inplace("leaky_relu_", FA.leaky_relu)
hardtanh_ = _inplace("hardtanh_", FA.hardtanh)
rrelu_ = _inplace("rrelu_", FA.rrelu)
threshold_ = _inplace("threshold_", FA.threshold)


# The ops of autocast's lists cast their inputs while an autocast region is on (torchlean.amp).
autocast_namespace(globals())
