"""Model layers of ``tl.nn``: layer and batch normalization, the spectral convolution and the
selective scan (convolution and pooling live in :mod:`torchlean.nn.pooling`, attention and the
transformers in :mod:`torchlean.nn.transformer`).

Parameter and buffer names, layouts and default initializations are PyTorch's
(drawn from the counter-based generator, ``tl.manual_seed``), so a PyTorch
``state_dict`` loads as is.

    >>> import torchlean as tl
    >>> bn = tl.nn.BatchNorm2d(8)
    >>> bn.weight.shape, bn(tl.zeros(2, 8, 4, 4)).shape
    (torchlean.Size([8]), torchlean.Size([2, 8, 4, 4]))
"""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..tensor import Tensor, as_dtype, float32, int64, no_grad
from . import functional_layers as FL
from . import init
from .module import Module
from .modules import _empty_param
from .parameter import int_arg, zeros_value

__all__ = ["LayerNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SpectralConv1d", "SelectiveScan"]


def _buffer(shape, value, device, dtype):
    dt = as_dtype(dtype) or float32
    z = zeros_value(shape, dt, device)
    return Tensor(get_kernels(device or "cpu").full(z.shape, value, dt) if value else z)


# ---- normalization --------------------------------------------------------------------------

class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape`` axes; ``weight`` starts at 1, ``bias`` at 0.

        >>> import torchlean as tl
        >>> ln = tl.nn.LayerNorm(4)
        >>> [n for n, _ in ln.named_parameters()]
        ['weight', 'bias']
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (int(normalized_shape),)
        self.normalized_shape = tuple(int(v) for v in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = _empty_param(self.normalized_shape, device, dtype)
            if bias:
                self.bias = _empty_param(self.normalized_shape, device, dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):  # noqa: A002
        return FL.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class _BatchNorm(Module):
    _version = 2

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """A checkpoint older than version 2 has no ``num_batches_tracked``: the layer keeps its own
        (0 for a new layer), as torch does."""
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                                   else Tensor(np.zeros((), dtype=np.int64)))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    _ndims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = int_arg(type(self).__name__, "num_features", num_features)
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = _empty_param((self.num_features,), device, dtype)
            if bias:
                self.bias = _empty_param((self.num_features,), device, dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _buffer((self.num_features,), 0, device, dtype))
            self.register_buffer("running_var", _buffer((self.num_features,), 1, device, dtype))
            self.register_buffer("num_batches_tracked", Tensor(get_kernels(device or "cpu").full((), 0, int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean._value[...] = 0
            self.running_var._value[...] = 1
            self.num_batches_tracked._value[...] = 0

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):  # noqa: A002
        """Batch statistics in training mode (updating the running ones), running statistics in eval.

        With ``momentum=None`` the running statistics are the cumulative average over
        the batches seen (factor ``1 / num_batches_tracked``), as in PyTorch.
        """
        cls = type(self).__name__
        if not isinstance(input, Tensor):
            raise TorchLeanError(f"{cls}: input must be a Tensor, got {type(input).__name__}")
        if input.ndim not in self._ndims:
            raise ShapeError(f"{cls}: expected a {' or '.join(f'{n}-d' for n in self._ndims)} input, "
                             f"got shape {input.shape}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            nbt = self.num_batches_tracked
            nbt._value[...] = nbt._value + 1
            if self.momentum is None:
                factor = 1.0 / int(nbt.item())
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return FL.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                             self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over ``(N, C)`` or ``(N, C, L)``; buffers ``running_mean``, ``running_var``,
    ``num_batches_tracked``. ``train()`` uses batch statistics and updates the running ones
    (unbiased variance, ``momentum``); ``eval()`` uses the running ones.

        >>> import torchlean as tl
        >>> bn = tl.nn.BatchNorm1d(3)
        >>> list(bn.state_dict())
        ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    """
    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over ``(N, C, H, W)`` (see :class:`BatchNorm1d`)."""
    _ndims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm over ``(N, C, D, H, W)`` (see :class:`BatchNorm1d`)."""
    _ndims = (5,)


# ---- spectral convolution and selective scan ------------------------------------------------

class SpectralConv1d(Module):
    """FNO's 1-d spectral convolution, channels last: ``(batch, grid, in)`` -> ``(batch, grid, out)``.

    Parameters ``w_re``, ``w_im`` ``(modes, in_channels, out_channels)``: the real and
    imaginary parts of the complex weights of the first ``modes`` Fourier modes,
    initialized to ``1/(in*out) * U[0, 1)`` as in the FNO reference code.

        >>> import torchlean as tl
        >>> tl.nn.SpectralConv1d(3, 5, modes=4)(tl.zeros(2, 16, 3)).shape
        torchlean.Size([2, 16, 5])
    """

    def __init__(self, in_channels, out_channels, modes, device=None, dtype=None):
        super().__init__()
        self.in_channels, self.out_channels, self.modes = int(in_channels), int(out_channels), int(modes)
        if min(self.in_channels, self.out_channels, self.modes) < 1:
            raise ShapeError(f"SpectralConv1d: in_channels {in_channels}, out_channels {out_channels} and "
                             f"modes {modes} must be positive")
        shape = (self.modes, self.in_channels, self.out_channels)
        self.w_re = _empty_param(shape, device, dtype)
        self.w_im = _empty_param(shape, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        scale = 1.0 / (self.in_channels * self.out_channels)
        init.uniform_(self.w_re, 0.0, scale)
        init.uniform_(self.w_im, 0.0, scale)

    def forward(self, x):
        return FL.spectral_conv1d(x, self.w_re, self.w_im)

    def extra_repr(self):
        return f"{self.in_channels}, {self.out_channels}, modes={self.modes}"


class SelectiveScan(Module):
    """A learned diagonal linear recurrence ``h[t] = A * h[t-1] + B * x[t]`` over ``(..., L, S)``.

    ``A = sigmoid(A_logit)`` keeps every decay in (0, 1), so the state cannot blow up
    however the parameter moves; ``A_logit`` and ``B`` are the parameters (shape
    ``(state_dim,)``). Initially ``A`` is drawn from U(0.5, 0.99) (memories of about 2
    to 100 steps) and ``B = 1 - A``, making each channel an exponential moving
    average of its input (unit gain at rest). ``forward(x, h0=None)`` returns every state.

        >>> import torchlean as tl
        >>> tl.nn.SelectiveScan(4)(tl.ones(2, 10, 4)).shape
        torchlean.Size([2, 10, 4])
    """

    def __init__(self, state_dim, device=None, dtype=None):
        super().__init__()
        self.state_dim = int(state_dim)
        if self.state_dim < 1:
            raise ShapeError(f"SelectiveScan: state_dim must be positive, got {state_dim}")
        self.A_logit = _empty_param((self.state_dim,), device, dtype)
        self.B = _empty_param((self.state_dim,), device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.uniform_(self.A_logit, 0.5, 0.99)
        with no_grad():
            a = Tensor(self.A_logit._value.copy())
            self.A_logit._value[...] = (a / (1.0 - a)).log()._value
            self.B._value[...] = (1.0 - a)._value

    @property
    def A(self):
        """The decays ``sigmoid(A_logit)`` (a recorded op: gradients reach ``A_logit``)."""
        return self.A_logit.sigmoid()

    def forward(self, x, h0=None):
        return FL.selective_scan(x, self.A, self.B, h0)

    def extra_repr(self):
        return f"state_dim={self.state_dim}"
