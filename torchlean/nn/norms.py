"""Normalization modules with PyTorch's constructors, parameter and buffer names.

``LayerNorm`` and ``BatchNorm1d/2d/3d`` live in :mod:`torchlean.nn.layers` and are re-exported
here; the rest are defined here over :mod:`torchlean.nn.functional_norms`.
"""

from __future__ import annotations

import numbers
import warnings

from ..errors import DomainError, ShapeError, TorchLeanError
from ..tensor import Tensor, no_grad
from . import functional_norms as FN
from . import init
from .layers import BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm, _BatchNorm
from .module import Module
from .modules import _empty_param

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d", "RMSNorm", "LocalResponseNorm", "SyncBatchNorm", "CrossMapLRN2d"]


class GroupNorm(Module):
    """Group norm over ``(N, C, *)``: ``num_channels`` split into ``num_groups`` groups; per-channel
    ``weight`` (ones) and ``bias`` (zeros) when ``affine``.

        >>> import torchlean as tl
        >>> [n for n, _ in GroupNorm(2, 4).named_parameters()]
        ['weight', 'bias']
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise DomainError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                              f"num_groups ({num_groups})")
        self.num_groups = int(num_groups)
        self.num_channels = int(num_channels)
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = _empty_param((self.num_channels,), device, dtype)
            if bias:
                self.bias = _empty_param((self.num_channels,), device, dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):  # noqa: A002
        return FN.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _InstanceNorm(_BatchNorm):
    """Parameters, buffers and repr as batch norm's (PyTorch's ``_NormBase``); other defaults."""
    _no_batch_dim = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):  # noqa: A002
        """Per-sample statistics in training mode or without running statistics, else the running
        ones. ``momentum=None`` means 0 (the running statistics stay as they are), as in PyTorch."""
        cls = type(self).__name__
        if not isinstance(input, Tensor):
            raise TorchLeanError(f"{cls}: input must be a Tensor, got {type(input).__name__}")
        nb = self._no_batch_dim
        if input.ndim not in (nb, nb + 1):
            raise ShapeError(f"{cls}: expected {nb}D (unbatched) or {nb + 1}D (batched) input, "
                             f"got shape {input.shape}")
        feature_dim = input.ndim - nb
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ShapeError(f"{cls}: expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), got {input.shape[feature_dim]}")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. "
                          "You can silence this warning by not passing in num_features, "
                          "which is not used because affine=False", stacklevel=2)
        batched = input if input.ndim == nb + 1 else input.unsqueeze(0)
        y = FN.instance_norm(batched, self.running_mean, self.running_var, self.weight, self.bias,
                             self.training or not self.track_running_stats,
                             0.0 if self.momentum is None else self.momentum, self.eps)
        return y if input.ndim == nb + 1 else y.squeeze(0)


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over ``(N, C, L)`` or ``(C, L)``; no parameters or buffers by default.

        >>> import torchlean as tl
        >>> list(InstanceNorm1d(3, affine=True, track_running_stats=True).state_dict())
        ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    """
    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over ``(N, C, H, W)`` or ``(C, H, W)`` (see :class:`InstanceNorm1d`)."""
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` (see :class:`InstanceNorm1d`)."""
    _no_batch_dim = 4


class RMSNorm(Module):
    """RMS norm over the trailing ``normalized_shape`` axes; ``weight`` (ones) when
    ``elementwise_affine``; ``eps=None`` is the input dtype's machine epsilon.

        >>> import torchlean as tl
        >>> [n for n, _ in RMSNorm(4).named_parameters()]
        ['weight']
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (int(normalized_shape),)
        self.normalized_shape = tuple(int(v) for v in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = _empty_param(self.normalized_shape, device, dtype)
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, x):
        return FN.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Local response norm across channels (see :func:`torchlean.nn.functional.local_response_norm`).

        >>> import torchlean as tl
        >>> tuple(LocalResponseNorm(2)(tl.ones(1, 3, 2)).shape)
        (1, 3, 2)
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):  # noqa: A002
        return FN.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(Module):
    """The legacy (Lua Torch) local response norm of 4-D inputs: ``x * (k + alpha / size * S)^-beta``,
    ``S`` each channel's sum of squares over the window of its running-sum recurrence (which, as
    torch's, is not centred for every ``size`` and channel count: built here as a 0/1 channel
    matrix from the same recurrence)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def _window(self, channels):
        import numpy as np
        pre = int((self.size - 1) / 2 + 1)
        m = np.zeros((channels, channels))
        m[0, :min(pre, channels)] = 1
        for c in range(1, channels):
            m[c] = m[c - 1]
            if c < channels - pre + 1:
                m[c, c + pre - 1] += 1
            if c > pre:
                m[c, c - pre] -= 1
        return m

    def forward(self, input):  # noqa: A002
        if not isinstance(input, Tensor) or input.ndim != 4:
            got = f"{input.ndim}D" if isinstance(input, Tensor) else type(input).__name__
            raise ShapeError(f"CrossMapLRN2d: Expected input to be 4D, got {got} instead.")
        from ..ops import einsum, tensor
        w = tensor(self._window(input.shape[1]), dtype=input.dtype, device=input.device)
        s = einsum("dc,nchw->ndhw", w, input * input)
        return input * (s * (self.alpha / self.size) + self.k) ** (-self.beta)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


# ---- SyncBatchNorm: batch statistics over every process of the group ------------------------------

def _all_reduce_sum(x, group):
    """``x`` summed over the processes of ``group``, differentiably: every process's result depends on
    every process's ``x``, so the backward all-reduces the cotangent the same way."""
    from ..autograd import Function
    from .. import distributed as dist

    class AllReduceSum(Function):
        @staticmethod
        def forward(ctx, t):
            y = t.clone()
            dist.all_reduce(y, group=group)
            return y

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            dist.all_reduce(g, group=group)
            return g

    return AllReduceSum.apply(x)


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose training statistics are those of the whole batch across the processes of
    ``process_group`` (the default group): per channel, the sum and then the centred sum of squares are
    all-reduced (two passes, not E[x^2] - E[x]^2), and the backward all-reduces their cotangents, so
    every process sees the gradients of full-batch batch norm. Running statistics use the global count
    (unbiased variance). In eval mode, or without an initialized process group of more than one
    process, it is ``BatchNorm``. Inputs ``(N, C, *)`` with at least 2 axes.

        >>> import torchlean as tl
        >>> bn = tl.nn.SyncBatchNorm(3)
        >>> tuple(bn(tl.ones(2, 3, 4)).shape)     # no process group: plain batch norm
        (2, 3, 4)
    """

    _ndims = (2, 3, 4, 5, 6, 7, 8)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _sync_world(self) -> int:
        from .. import distributed as dist
        if not (self.training and dist.is_available() and dist.is_initialized()):
            return 1
        return dist.get_world_size(self.process_group)

    def forward(self, input):  # noqa: A002
        if not isinstance(input, Tensor):
            raise TorchLeanError(f"SyncBatchNorm: input must be a Tensor, got {type(input).__name__}")
        if input.ndim < 2:
            raise ShapeError(f"SyncBatchNorm: expected at least 2D input (got {input.ndim}D input)")
        if self._sync_world() <= 1:
            return super().forward(input)
        from .. import distributed as dist
        C = input.shape[1]
        if C != self.num_features:
            raise ShapeError(f"SyncBatchNorm: expected {self.num_features} channels, got input of shape "
                             f"{tuple(input.shape)}")
        dims = (0,) + tuple(range(2, input.ndim))
        shape = (1, C) + (1,) * (input.ndim - 2)
        count = input.new_full((1,), float(input.numel() // max(C, 1)))
        dist.all_reduce(count, group=self.process_group)
        n = float(count.item())
        if n <= 1:
            raise ShapeError(f"SyncBatchNorm: expected more than 1 value per channel when training, got "
                             f"{int(n)} over the process group")
        mean = _all_reduce_sum(input.sum(dim=dims), self.process_group) / n
        centred = input - mean.reshape(shape)
        var = _all_reduce_sum((centred * centred).sum(dim=dims), self.process_group) / n
        y = centred * (var + self.eps).rsqrt().reshape(shape)
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        if self.bias is not None:
            y = y + self.bias.reshape(shape)
        if self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
                f = (1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum)
                self.running_mean.mul_(1 - f).add_(mean.detach() * f)
                self.running_var.mul_(1 - f).add_(var.detach() * (f * n / (n - 1)))
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every ``BatchNorm*D`` replaced by a ``SyncBatchNorm`` holding the same
        parameters, buffers and training flag (the module itself when it is one)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                with no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
