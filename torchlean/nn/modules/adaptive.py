"""``torch.nn.modules.adaptive``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..losses import AdaptiveLogSoftmaxWithLoss  # noqa: F401

__all__ = ["AdaptiveLogSoftmaxWithLoss"]
