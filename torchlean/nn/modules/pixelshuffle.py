"""``torch.nn.modules.pixelshuffle``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..resample import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]
