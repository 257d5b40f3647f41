"""The errors of :mod:`torchlean.utils.data`: TorchLeanError subclasses that also derive from the
class torch raises in the same place (RuntimeError for mismatched batch shapes, a dead worker, a
timeout), so code written for torch still catches them."""

from __future__ import annotations

from ....errors import IndexRangeError, ShapeError, TorchLeanError


class CollateShapeError(ShapeError, RuntimeError):
    """Samples of a batch whose sizes or lengths differ (torch raises RuntimeError there)."""


class DataLoaderError(TorchLeanError, RuntimeError):
    """A DataLoader worker that died or timed out, or a worker-side error whose type cannot be rebuilt."""


class IndexValueError(IndexRangeError, ValueError):
    """An index beyond a dataset's length where torch raises ValueError (ConcatDataset's negative index)."""
