"""``torch.nn.modules.normalization``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..layers import LayerNorm  # noqa: F401
from ..norms import GroupNorm, LocalResponseNorm, RMSNorm  # noqa: F401

__all__ = ["GroupNorm", "LayerNorm", "LocalResponseNorm", "RMSNorm"]
