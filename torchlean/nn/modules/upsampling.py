"""``torch.nn.modules.upsampling``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..resample import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
