"""``torch.nn.modules.linear``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..lazy import LazyLinear  # noqa: F401
from . import Bilinear, Identity, Linear, NonDynamicallyQuantizableLinear  # noqa: F401

__all__ = ["NonDynamicallyQuantizableLinear", "Bilinear", "Identity", "LazyLinear", "Linear"]
