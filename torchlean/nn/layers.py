"""Model layers of ``tl.nn``: convolution, pooling, normalization, attention, spectral
convolution and the selective scan.

Parameter and buffer names, layouts and default initializations are PyTorch's
(drawn from the counter-based generator, ``tl.manual_seed``), so a PyTorch
``state_dict`` loads as is.

    >>> import torchlean as tl
    >>> conv = tl.nn.Conv2d(3, 8, kernel_size=3, padding=1)
    >>> conv.weight.shape, conv(tl.zeros(2, 3, 16, 16)).shape
    (torchlean.Size([8, 3, 3, 3]), torchlean.Size([2, 8, 16, 16]))
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import DomainError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..tensor import Tensor, as_dtype, float32, int64, no_grad
from . import functional_layers as FL
from . import init
from .functional import linear
from .module import Module
from .modules import Linear, _empty_param

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
           "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "LayerNorm",
           "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "MultiheadAttention", "SpectralConv1d",
           "SelectiveScan"]


def _ntuple(v, d, name, cls):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),) * d
    t = tuple(v)
    if len(t) != d:
        raise ShapeError(f"{cls}: {name} {t} must have {d} entries (one per spatial axis)")
    return tuple(int(e) for e in t)


def _buffer(shape, value, device, dtype):
    dt = as_dtype(dtype) or float32
    return Tensor(get_kernels(device or "cpu").full(tuple(shape), value, dt))


# ---- convolution ----------------------------------------------------------------------------

class _ConvNd(Module):
    _d = 0
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", output_padding=0, device=None, dtype=None):
        super().__init__()
        cls, d = type(self).__name__, self._d
        if padding_mode != "zeros":
            raise DomainError(f"{cls}: padding_mode {padding_mode!r} is not supported (only 'zeros')")
        if not isinstance(groups, numbers.Integral) or groups < 1:
            raise ShapeError(f"{cls}: groups must be a positive int, got {groups!r}")
        if in_channels % groups or out_channels % groups:
            raise ShapeError(f"{cls}: in_channels {in_channels} and out_channels {out_channels} must be "
                             f"divisible by groups {groups}")
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = _ntuple(kernel_size, d, "kernel_size", cls)
        self.stride = _ntuple(stride, d, "stride", cls)
        if isinstance(padding, str):
            if self._transposed:
                raise DomainError(f"{cls}: string padding {padding!r} is not supported")
            if padding not in ("valid", "same"):
                raise DomainError(f"{cls}: padding must be 'valid', 'same', an int or a tuple, got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise DomainError(f"{cls}: padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, d, "padding", cls)
        self.dilation = _ntuple(dilation, d, "dilation", cls)
        self.output_padding = _ntuple(output_padding, d, "output_padding", cls)
        self.padding_mode = padding_mode
        if self._transposed:
            wshape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        else:
            wshape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        self.weight = _empty_param(wshape, device, dtype)
        if bias:
            self.bias = _empty_param((self.out_channels,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's: weight kaiming_uniform(a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

        fan_in is ``weight.shape[1] * prod(kernel)``, also for transposed convolutions
        (where it counts output channels per group, as in PyTorch).
        """
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = init._calculate_fan_in_and_fan_out(self.weight)[0]
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._d:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._d:
            s += f", dilation={self.dilation}"
        if self._transposed and self.output_padding != (0,) * self._d:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, device, dtype)

    def forward(self, input):  # noqa: A002
        return FL._conv(type(self).__name__, self._d, input, self.weight, self.bias, self.stride,
                        self.padding, self.dilation, self.groups)


class Conv1d(_Conv):
    """1-d convolution over ``(N, C_in, L)`` or ``(C_in, L)``; weight ``(C_out, C_in/groups, k)``.

        >>> import torchlean as tl
        >>> tl.nn.Conv1d(2, 4, 3)(tl.zeros(1, 2, 10)).shape
        torchlean.Size([1, 4, 8])
    """
    _d = 1


class Conv2d(_Conv):
    """2-d convolution over ``(N, C_in, H, W)`` or ``(C_in, H, W)``; weight ``(C_out, C_in/groups, kh, kw)``."""
    _d = 2


class Conv3d(_Conv):
    """3-d convolution over ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``."""
    _d = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):  # noqa: A002
        """The output_padding that makes the spatial output ``output_size`` (PyTorch's rule)."""
        cls, d = type(self).__name__, self._d
        size = tuple(int(v) for v in output_size)
        if len(size) > d:
            size = size[len(size) - d:]
        if len(size) != d:
            raise ShapeError(f"{cls}: output_size {tuple(output_size)} must give {d} spatial sizes")
        spatial = input.shape[input.ndim - d:]
        out = []
        for a in range(d):
            lo = ((spatial[a] - 1) * self.stride[a] - 2 * self.padding[a]
                  + self.dilation[a] * (self.kernel_size[a] - 1) + 1)
            hi = lo + self.stride[a] - 1
            if not lo <= size[a] <= hi:
                raise ShapeError(f"{cls}: requested output size {size} is not reachable from input "
                                 f"{input.shape}: axis {a} must lie in [{lo}, {hi}]")
            out.append(size[a] - lo)
        return tuple(out)

    def forward(self, input, output_size=None):  # noqa: A002
        op = self.output_padding if output_size is None else self._output_padding(input, output_size)
        return FL._conv_transpose(type(self).__name__, self._d, input, self.weight, self.bias, self.stride,
                                  self.padding, op, self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-d transposed convolution; weight ``(C_in, C_out/groups, k)``.

        >>> import torchlean as tl
        >>> tl.nn.ConvTranspose1d(2, 4, 3, stride=2)(tl.zeros(1, 2, 5)).shape
        torchlean.Size([1, 4, 11])
    """
    _d = 1


class ConvTranspose2d(_ConvTranspose):
    """2-d transposed convolution; weight ``(C_in, C_out/groups, kh, kw)``."""
    _d = 2


class ConvTranspose3d(_ConvTranspose):
    """3-d transposed convolution; weight ``(C_in, C_out/groups, kd, kh, kw)``."""
    _d = 3


# ---- pooling --------------------------------------------------------------------------------

class _MaxPool(Module):
    _d = 0

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        cls = type(self).__name__
        if return_indices or ceil_mode:
            raise DomainError(f"{cls}: return_indices and ceil_mode are not supported")
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.dilation = dilation
        self.return_indices = False
        self.ceil_mode = False

    def forward(self, input):  # noqa: A002
        return FL._max_pool(type(self).__name__, self._d, input, self.kernel_size, self.stride, self.padding,
                            self.dilation, False, False)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}")


class MaxPool1d(_MaxPool):
    """Max over windows of ``(N, C, L)``; padded cells never win."""
    _d = 1


class MaxPool2d(_MaxPool):
    """Max over windows of ``(N, C, H, W)``.

        >>> import torchlean as tl
        >>> tl.nn.MaxPool2d(2)(tl.zeros(1, 3, 8, 8)).shape
        torchlean.Size([1, 3, 4, 4])
    """
    _d = 2


class MaxPool3d(_MaxPool):
    """Max over windows of ``(N, C, D, H, W)``."""
    _d = 3


class _AvgPool(Module):
    _d = 0

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        if ceil_mode:
            raise DomainError(f"{type(self).__name__}: ceil_mode=True is not supported")
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.ceil_mode = False
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):  # noqa: A002
        return FL._avg_pool(type(self).__name__, self._d, input, self.kernel_size, self.stride, self.padding,
                            False, self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPool):
    """Mean over windows of ``(N, C, L)``; padding counts as zeros unless ``count_include_pad=False``."""
    _d = 1


class AvgPool2d(_AvgPool):
    """Mean over windows of ``(N, C, H, W)``."""
    _d = 2


class AvgPool3d(_AvgPool):
    """Mean over windows of ``(N, C, D, H, W)``."""
    _d = 3


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
    _ndims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = int(num_features)
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


# ---- attention ------------------------------------------------------------------------------

def _mask_array(m, what):
    a = m.numpy() if isinstance(m, Tensor) else np.asarray(m)
    if a.dtype.kind not in "bf":
        raise TorchLeanError(f"MultiheadAttention: {what} must be bool or float, got dtype {a.dtype}")
    return a


class MultiheadAttention(Module):
    """PyTorch's ``nn.MultiheadAttention`` (same parameter names, layouts and initialization).

    Parameters: ``in_proj_weight`` ``(3E, E)`` (rows: query, key, value projections),
    ``in_proj_bias`` ``(3E,)``, ``out_proj.weight`` ``(E, E)``, ``out_proj.bias`` ``(E,)``;
    a PyTorch ``state_dict`` loads as is. ``batch_first=True`` by default here: inputs
    ``(N, L, E)`` (``(L, N, E)`` with ``batch_first=False``, ``(L, E)`` unbatched).

    Masks follow PyTorch's ``nn.MultiheadAttention`` (not SDPA's) convention: a
    boolean ``attn_mask`` ``(L, S)`` or ``(N * num_heads, L, S)`` and a boolean
    ``key_padding_mask`` ``(N, S)`` mark with True what may NOT be attended; float
    masks are added to the logits. ``is_causal=True`` without ``attn_mask`` applies
    the causal mask (with an ``attn_mask`` it is a hint and the mask is used).
    Boolean masks run the fused attention with exact masking; float masks and
    ``need_weights=True`` take the unfused path. ``forward`` returns
    ``(output, weights)``; ``weights`` is None unless ``need_weights=True`` (then the
    attention weights, averaged over heads unless ``average_attn_weights=False``).
    Attention dropout, ``add_bias_kv``, ``add_zero_attn`` and ``kdim``/``vdim``
    different from ``embed_dim`` are not supported.

        >>> import torchlean as tl
        >>> mha = tl.nn.MultiheadAttention(8, 2)
        >>> x = tl.zeros(2, 5, 8)
        >>> out, w = mha(x, x, x)
        >>> out.shape, w
        (torchlean.Size([2, 5, 8]), None)
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=True, device=None, dtype=None):
        super().__init__()
        cls = "MultiheadAttention"
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ShapeError(f"{cls}: embed_dim {embed_dim} must be a positive multiple of num_heads {num_heads}")
        if dropout:
            raise DomainError(f"{cls}: attention dropout ({dropout!r}) is not supported; use dropout=0.0")
        if add_bias_kv or add_zero_attn:
            raise DomainError(f"{cls}: add_bias_kv and add_zero_attn are not supported")
        if (kdim is not None and kdim != embed_dim) or (vdim is not None and vdim != embed_dim):
            raise DomainError(f"{cls}: kdim/vdim different from embed_dim ({kdim}, {vdim} vs {embed_dim}) "
                              "are not supported")
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.head_dim = self.embed_dim // self.num_heads
        self.kdim = self.vdim = self.embed_dim
        self.dropout = 0.0
        self.batch_first = batch_first
        E = self.embed_dim
        self.in_proj_weight = _empty_param((3 * E, E), device, dtype)
        if bias:
            self.in_proj_bias = _empty_param((3 * E,), device, dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(E, E, bias=bias, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's: in_proj_weight xavier_uniform, biases 0, out_proj.weight Linear's default."""
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _masks(self, N, L, S, key_padding_mask, attn_mask, is_causal):
        """(allowed, additive) of shapes broadcasting to (N, H, L, S): a host bool array
        (True = may attend) and/or a float tensor added to the logits."""
        H = self.num_heads
        blocked, additive = None, None
        if attn_mask is None and is_causal:
            blocked = ~np.tril(np.ones((L, S), dtype=bool))
        elif attn_mask is not None:
            a = _mask_array(attn_mask, "attn_mask")
            if a.shape == (L, S):
                a4 = a
            elif a.shape == (N * H, L, S):
                a4 = a.reshape(N, H, L, S)
            else:
                raise ShapeError(f"MultiheadAttention: attn_mask has shape {a.shape}, expected ({L}, {S}) "
                                 f"or ({N * H}, {L}, {S})")
            if a.dtype == bool:
                blocked = a4
            else:
                additive = attn_mask.reshape(a4.shape) if isinstance(attn_mask, Tensor) else a4
        if key_padding_mask is not None:
            kp = _mask_array(key_padding_mask, "key_padding_mask")
            if kp.shape != (N, S):
                raise ShapeError(f"MultiheadAttention: key_padding_mask has shape {kp.shape}, expected ({N}, {S})")
            if kp.dtype == bool:
                kp4 = kp.reshape(N, 1, 1, S)
                blocked = kp4 if blocked is None else (blocked | kp4)
            else:
                kadd = (key_padding_mask.reshape(N, 1, 1, S) if isinstance(key_padding_mask, Tensor)
                        else kp.reshape(N, 1, 1, S))
                additive = kadd if additive is None else additive + kadd
        if additive is not None and blocked is not None:
            # PyTorch turns boolean masks into -inf additions once a float mask is present.
            additive = additive + np.where(blocked, -np.inf, 0.0)
            blocked = None
        return (None if blocked is None else ~blocked), additive

    def forward(self, query, key, value, key_padding_mask=None, need_weights=False, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """Attention of ``query`` over ``key``/``value``; returns ``(output, weights or None)``."""
        cls = "MultiheadAttention"
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TorchLeanError(f"{cls}: {name} must be a Tensor, got {type(t).__name__}")
            if t.ndim != query.ndim or t.ndim not in (2, 3) or t.shape[-1] != self.embed_dim:
                raise ShapeError(f"{cls}: query, key, value must all be 3-d (batched) or 2-d (unbatched) with "
                                 f"last axis {self.embed_dim}; got {query.shape}, {key.shape}, {value.shape}")
        batched = query.ndim == 3
        if not batched:
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = _mask_array(key_padding_mask, "key_padding_mask")[None]
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        N, L, E = query.shape
        S = key.shape[1]
        if key.shape[0] != N or value.shape[:2] != (N, S):
            raise ShapeError(f"{cls}: batch and length of query {query.shape}, key {key.shape}, value "
                             f"{value.shape} do not fit")
        H, hd = self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        if query is key and key is value:
            # Self-attention: one (E -> 3E) projection instead of three.
            qkv = linear(query, w, b).reshape(N, L, 3, H, hd).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:
            q, k, v = (linear(t, w[i * E:(i + 1) * E], None if b is None else b[i * E:(i + 1) * E])
                       for i, t in enumerate((query, key, value)))
            q, k, v = (t.reshape(N, n, H, hd).transpose(1, 2) for t, n in ((q, L), (k, S), (v, S)))
        allowed, additive = self._masks(N, L, S, key_padding_mask, attn_mask, is_causal)
        mask = allowed if additive is None else additive
        o, p = FL._sdpa(q, k, v, attn_mask=mask, need_weights=need_weights)
        out = self.out_proj(o.transpose(1, 2).reshape(N, L, E))
        if p is not None and average_attn_weights:
            p = p.mean(dim=1)
        if not batched:
            return out[0], (None if p is None else p[0])
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, p

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


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
