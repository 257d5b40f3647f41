"""``torch.nn.modules.batchnorm``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..layers import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from ..lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]
