"""Padding, adaptive pooling, upsampling, pixel / channel shuffles, im2col and power-average
pooling modules, over :mod:`torchlean.nn.functional_resample`. None has parameters or buffers.

    >>> import torchlean as tl
    >>> Upsample(scale_factor=2)(tl.zeros(1, 3, 4, 4)).shape
    torchlean.Size([1, 3, 8, 8])
"""

from __future__ import annotations

import numbers

from ..errors import ShapeError
from . import functional_resample as FR
from .module import Module

__all__ = ["ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
           "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle",
           "ChannelShuffle", "Unfold", "Fold", "LPPool1d", "LPPool2d", "LPPool3d"]


def _pad_tuple(cls, padding, d):
    """An int padded on every side of ``d`` axes, or a ``2 d``-tuple in F.pad's order."""
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        return (int(padding),) * (2 * d)
    padding = tuple(padding)
    if len(padding) != 2 * d:
        raise ShapeError(f"{cls}: padding must be an int or a {2 * d}-tuple, got {padding!r}")
    return padding


# ---- padding --------------------------------------------------------------------------------

class _PadNd(Module):
    _d = 0
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _pad_tuple(type(self).__name__, padding, self._d)

    def forward(self, input):  # noqa: A002
        return FR.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):  # noqa: A002
        return FR.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last axis with ``value``; ``padding``: int or (left, right)."""
    _d = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two axes with ``value``; ``padding``: int or (left, right, top, bottom)."""
    _d = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three axes with ``value``; ``padding``: int or a 6-tuple."""
    _d = 3


class ZeroPad1d(ConstantPad1d):
    """:class:`ConstantPad1d` with value 0."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """:class:`ConstantPad2d` with value 0."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """:class:`ConstantPad3d` with value 0."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Mirror padding of the last axis (the edge is not repeated); pads smaller than the size."""
    _d, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Mirror padding of the last two axes."""
    _d, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Mirror padding of the last three axes."""
    _d, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Edge-value padding of the last axis."""
    _d, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Edge-value padding of the last two axes."""
    _d, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Edge-value padding of the last three axes."""
    _d, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Periodic padding of the last axis."""
    _d, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Periodic padding of the last two axes."""
    _d, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """Periodic padding of the last three axes."""
    _d, _mode = 3, "circular"


# ---- adaptive pooling -----------------------------------------------------------------------

class _AdaptiveAvgPoolNd(Module):
    _fn = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002
        return type(self)._fn(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Adaptive mean pooling of ``(N, C, L)`` to ``output_size`` cells."""
    _fn = staticmethod(FR.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Adaptive mean pooling of the last two axes (an entry of ``output_size`` may be None).

        >>> import torchlean as tl
        >>> AdaptiveAvgPool2d(1)(tl.ones(2, 3, 5, 7)).shape
        torchlean.Size([2, 3, 1, 1])
    """
    _fn = staticmethod(FR.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Adaptive mean pooling of the last three axes."""
    _fn = staticmethod(FR.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    _fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):  # noqa: A002
        return type(self)._fn(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling of ``(N, C, L)``; ``return_indices`` adds the argmax positions."""
    _fn = staticmethod(FR.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling of the last two axes (flat ``h * W + w`` indices)."""
    _fn = staticmethod(FR.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling of the last three axes."""
    _fn = staticmethod(FR.adaptive_max_pool3d)


# ---- upsampling -----------------------------------------------------------------------------

class Upsample(Module):
    """:func:`~torchlean.nn.functional.interpolate` with fixed ``size`` or ``scale_factor``."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, numbers.Real) else (
            tuple(float(f) for f in scale_factor) if scale_factor is not None else None)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):  # noqa: A002
        return FR.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                              recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of ``(N, C, H, W)``."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of ``(N, C, H, W)`` with ``align_corners=True``."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


# ---- shuffles -------------------------------------------------------------------------------

class PixelShuffle(Module):
    """``(*, C r^2, H, W) -> (*, C, H r, W r)``."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):  # noqa: A002
        return FR.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H r, W r) -> (*, C r^2, H, W)``."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):  # noqa: A002
        return FR.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleaves ``groups`` channel groups of ``(N, C, *)``."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):  # noqa: A002
        return FR.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


# ---- im2col ---------------------------------------------------------------------------------

class Unfold(Module):
    """Sliding blocks as columns (im2col): ``(N, C, H, W) -> (N, C kh kw, L)``."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):  # noqa: A002
        return FR.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """Columns summed back into an image (col2im): ``(N, C kh kw, L) -> (N, C, *output_size)``."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):  # noqa: A002
        return FR.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


# ---- power-average pooling ------------------------------------------------------------------

class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):  # noqa: A002
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """``(sum over a window of x^p)^(1/p)`` over ``(N, C, L)``."""
    _fn = staticmethod(FR.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """``(sum over a window of x^p)^(1/p)`` over the last two axes."""
    _fn = staticmethod(FR.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """``(sum over a window of x^p)^(1/p)`` over the last three axes."""
    _fn = staticmethod(FR.lp_pool3d)
