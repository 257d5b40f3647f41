"""``torch.nn.modules.module``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..module import Module  # noqa: F401

__all__ = ["Module"]
