"""Modules over :mod:`~torchlean.nn.functional_extra`: fractional max pooling; and ``Container``, torch's
deprecated module holder."""

from __future__ import annotations

import warnings

from ..errors import DomainError
from . import functional_extra as FE
from .module import Module

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d", "Container"]


class Container(Module):
    """Deprecated in torch (a ``FutureWarning``, as there): a Module holding the keyword arguments as
    submodules; subclass ``Module`` instead."""

    def __init__(self, **kwargs):
        super().__init__()
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. "
                      "Subclass that instead.", FutureWarning, stacklevel=2)
        for key, value in kwargs.items():
            self.add_module(key, value)


class _FractionalMaxPool(Module):
    _d = 0

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        cls, d = type(self).__name__, self._d
        tup = lambda v: tuple(v) if isinstance(v, (list, tuple)) else (v,) * d
        self.kernel_size = tup(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = tup(output_size) if output_size is not None else None
        self.output_ratio = tup(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise DomainError(f"{cls} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise DomainError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise DomainError(f"output_ratio must be between 0 and 1 (got {output_ratio})")


class FractionalMaxPool2d(_FractionalMaxPool):
    """Fractional max pooling over ``(N, C, H, W)`` or ``(C, H, W)`` (see
    :func:`~torchlean.nn.functional_extra.fractional_max_pool2d`); a given ``_random_samples`` is a buffer.

        >>> import torchlean as tl
        >>> FractionalMaxPool2d(3, output_ratio=0.5)(tl.randn(2, 4, 10, 12)).shape
        torchlean.Size([2, 4, 5, 6])
    """
    _d = 2

    def forward(self, input):
        return FE.fractional_max_pool2d(input, self.kernel_size, self.output_size, self.output_ratio,
                                        self.return_indices, _random_samples=self._random_samples)


class FractionalMaxPool3d(_FractionalMaxPool):
    """Fractional max pooling over ``(N, C, T, H, W)`` or ``(C, T, H, W)`` (see :class:`FractionalMaxPool2d`)."""
    _d = 3

    def forward(self, input):
        return FE.fractional_max_pool3d(input, self.kernel_size, self.output_size, self.output_ratio,
                                        self.return_indices, _random_samples=self._random_samples)
