"""``torch.nn.modules.channelshuffle``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..resample import ChannelShuffle  # noqa: F401

__all__ = ["ChannelShuffle"]
