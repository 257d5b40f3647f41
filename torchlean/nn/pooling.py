"""Convolution, pooling and unpooling modules of ``tl.nn`` with every PyTorch option.

Attribute names, ``extra_repr``, parameter layouts and default initializations are PyTorch's,
so a PyTorch ``state_dict`` loads as is. A convolution with ``padding_mode`` other than
``'zeros'`` pads with :func:`torchlean.nn.functional.pad` first and convolves unpadded, as
PyTorch does (``'same'`` puts the extra cell of an odd total padding on the right).

    >>> import torchlean as tl
    >>> conv = Conv2d(3, 8, kernel_size=4, padding="same", padding_mode="reflect")
    >>> conv(tl.zeros(2, 3, 16, 16)).shape
    torchlean.Size([2, 8, 16, 16])
    >>> pool = MaxPool2d(2, return_indices=True)
    >>> y, i = pool(tl.arange(16.0).reshape(1, 1, 4, 4))
    >>> MaxUnpool2d(2)(y, i).shape
    torchlean.Size([1, 1, 4, 4])
"""

from __future__ import annotations

import math
import numbers

from ..errors import DomainError, ShapeError
from . import functional_layers as FL
from . import functional_pooling as FP
from . import init
from .functional_resample import pad
from .module import Module
from .modules import _empty_param

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
           "MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
           "AvgPool1d", "AvgPool2d", "AvgPool3d", "FeatureAlphaDropout"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(v, d, name, cls):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),) * d
    t = tuple(v)
    if len(t) == 1:
        t = t * d
    if len(t) != d or not all(isinstance(e, numbers.Integral) and not isinstance(e, bool) for e in t):
        raise ShapeError(f"{cls}: {name} {v!r} must be an int or {d} ints (one per spatial axis)")
    return tuple(int(e) for e in t)


# ---- convolution ----------------------------------------------------------------------------

class _ConvNd(Module):
    _d = 0
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                 padding_mode, output_padding, device, dtype):
        super().__init__()
        cls, d = type(self).__name__, self._d
        if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups <= 0:
            raise DomainError(f"{cls}: groups must be a positive integer, got {groups!r}")
        if in_channels % groups:
            raise DomainError(f"{cls}: in_channels must be divisible by groups ({in_channels} % {groups} != 0)")
        if out_channels % groups:
            raise DomainError(f"{cls}: out_channels must be divisible by groups ({out_channels} % {groups} != 0)")
        if padding_mode not in _PADDING_MODES:
            raise DomainError(f"{cls}: padding_mode must be one of {_PADDING_MODES}, but got "
                              f"padding_mode={padding_mode!r}")
        if self._transposed and padding_mode != "zeros":
            raise DomainError(f'{cls}: Only "zeros" padding mode is supported for {cls}')
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _ntuple(kernel_size, d, "kernel_size", cls)
        self.stride = _ntuple(stride, d, "stride", cls)
        self.dilation = _ntuple(dilation, d, "dilation", cls)
        if isinstance(padding, str):
            if self._transposed:
                raise DomainError(f"{cls}: padding must be an int or a tuple, got {padding!r}")
            if padding not in ("same", "valid"):
                raise DomainError(f"{cls}: Invalid padding string {padding!r}, should be one of "
                                  "{'same', 'valid'}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise DomainError(f"{cls}: padding='same' is not supported for strided convolutions")
            self.padding = padding
            twice = []
            for dl, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                total = dl * (k - 1) if padding == "same" else 0
                twice += [total // 2, total - total // 2]
            self._reversed_padding_repeated_twice = twice
        else:
            self.padding = _ntuple(padding, d, "padding", cls)
            self._reversed_padding_repeated_twice = [p for p in reversed(self.padding) for _ in range(2)]
        self.transposed = self._transposed
        self.output_padding = _ntuple(output_padding, d, "output_padding", cls)
        self.groups = int(groups)
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
            if fan_in != 0:
                bound = 1.0 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        d = self._d
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * d:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * d:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * d:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, device, dtype)

    def _conv_forward(self, input, weight, bias):  # noqa: A002
        cls = type(self).__name__
        if self.padding_mode != "zeros":
            x = pad(input, tuple(self._reversed_padding_repeated_twice), mode=self.padding_mode)
            return FL._conv(cls, self._d, x, weight, bias, self.stride, 0, self.dilation, self.groups)
        return FL._conv(cls, self._d, input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):  # noqa: A002
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-d convolution over ``(N, C_in, L)`` or ``(C_in, L)``; weight ``(C_out, C_in/groups, k)``.

        >>> import torchlean as tl
        >>> Conv1d(2, 4, 3, padding=1, padding_mode="circular")(tl.zeros(1, 2, 10)).shape
        torchlean.Size([1, 4, 10])
    """
    _d = 1


class Conv2d(_Conv):
    """2-d convolution over ``(N, C_in, H, W)`` or ``(C_in, H, W)``; weight ``(C_out, C_in/groups, kh, kw)``.

        >>> import torchlean as tl
        >>> Conv2d(3, 8, 3, stride=2, padding=1)(tl.zeros(1, 3, 9, 9)).shape
        torchlean.Size([1, 8, 5, 5])
    """
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
        if output_size is None:
            return self.output_padding
        cls, d = type(self).__name__, self._d
        size = [int(v) for v in output_size]
        lead = 2 if input.ndim == d + 2 else 1
        if len(size) == lead + d:
            size = size[lead:]
        if len(size) != d:
            raise ShapeError(f"{cls}: for {input.ndim}D input, output_size must have {d} or {lead + d} "
                             f"elements (got {len(size)})")
        spatial = tuple(input.shape[input.ndim - d:])
        lo = [(spatial[a] - 1) * self.stride[a] - 2 * self.padding[a]
              + self.dilation[a] * (self.kernel_size[a] - 1) + 1 for a in range(d)]
        hi = [lo[a] + self.stride[a] - 1 for a in range(d)]
        if any(not lo[a] <= size[a] <= hi[a] for a in range(d)):
            raise ShapeError(f"{cls}: requested an output size of {size}, not reachable: valid sizes range "
                             f"from {lo} to {hi} (for an input of {list(spatial)})")
        return tuple(size[a] - lo[a] for a in range(d))

    def forward(self, input, output_size=None):  # noqa: A002
        op = self._output_padding(input, output_size)
        return FL._conv_transpose(type(self).__name__, self._d, input, self.weight, self.bias, self.stride,
                                  self.padding, op, self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-d transposed convolution; weight ``(C_in, C_out/groups, k)``.

        >>> import torchlean as tl
        >>> ConvTranspose1d(2, 4, 3, stride=2)(tl.zeros(1, 2, 5), output_size=[12]).shape
        torchlean.Size([1, 4, 12])
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
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):  # noqa: A002
        return FP._max_pool(type(self).__name__, self._d, input, self.kernel_size, self.stride, self.padding,
                            self.dilation, self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPool):
    """Max over windows of ``(N, C, L)`` or ``(C, L)``; padded cells never win.

        >>> import torchlean as tl
        >>> MaxPool1d(2, ceil_mode=True)(tl.tensor([[1.0, 3.0, 2.0]])).tolist()
        [[3.0, 2.0]]
    """
    _d = 1


class MaxPool2d(_MaxPool):
    """Max over windows of ``(N, C, H, W)``; ``return_indices=True`` adds flat ``h * W + w`` indices.

        >>> import torchlean as tl
        >>> MaxPool2d(2)(tl.zeros(1, 3, 8, 8)).shape
        torchlean.Size([1, 3, 4, 4])
    """
    _d = 2


class MaxPool3d(_MaxPool):
    """Max over windows of ``(N, C, D, H, W)``."""
    _d = 3


class _MaxUnpool(Module):
    _d = 0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        cls, d = type(self).__name__, self._d
        self.kernel_size = _ntuple(kernel_size, d, "kernel_size", cls)
        self.stride = _ntuple(stride if stride is not None else kernel_size, d, "stride", cls)
        self.padding = _ntuple(padding, d, "padding", cls)

    def forward(self, input, indices, output_size=None):  # noqa: A002
        return FP._max_unpool(type(self).__name__, self._d, input, indices, self.kernel_size, self.stride,
                              self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """The partial inverse of :class:`MaxPool1d`: values put back at their indices, zeros elsewhere.

        >>> import torchlean as tl
        >>> y, i = MaxPool1d(2, return_indices=True)(tl.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
        >>> MaxUnpool1d(2)(y, i).tolist()
        [[[0.0, 3.0, 2.0, 0.0]]]
    """
    _d = 1


class MaxUnpool2d(_MaxUnpool):
    """The partial inverse of :class:`MaxPool2d`."""
    _d = 2


class MaxUnpool3d(_MaxUnpool):
    """The partial inverse of :class:`MaxPool3d`."""
    _d = 3


class _AvgPool(Module):
    _d = 0

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):  # noqa: A002
        return FP._avg_pool(type(self).__name__, self._d, input, self.kernel_size, self.stride, self.padding,
                            self.ceil_mode, self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPool):
    """Mean over windows of ``(N, C, L)`` or ``(C, L)`` with PyTorch's divisor rules.

        >>> import torchlean as tl
        >>> AvgPool1d(2, ceil_mode=True)(tl.tensor([[1.0, 3.0, 2.0]])).tolist()
        [[2.0, 2.0]]
    """
    _d = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__(_ntuple(kernel_size, 1, "kernel_size", "AvgPool1d"),
                         _ntuple(stride if stride is not None else kernel_size, 1, "stride", "AvgPool1d"),
                         _ntuple(padding, 1, "padding", "AvgPool1d"), ceil_mode, count_include_pad)


class AvgPool2d(_AvgPool):
    """Mean over windows of ``(N, C, H, W)``; ``divisor_override`` replaces the window size."""
    _d = 2


class AvgPool3d(_AvgPool):
    """Mean over windows of ``(N, C, D, H, W)``."""
    _d = 3


class FeatureAlphaDropout(Module):
    """Alpha dropout of whole channels (one draw per ``(N, C)`` pair), identity in eval mode.

        >>> import torchlean as tl
        >>> FeatureAlphaDropout(0.2).eval()(tl.ones(2, 3, 4)).shape
        torchlean.Size([2, 3, 4])
    """

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        self.p = FP._check_p("FeatureAlphaDropout", p)
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return FP.feature_alpha_dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
