"""``torch.nn.modules.flatten``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from . import Flatten, Unflatten  # noqa: F401

__all__ = ["Flatten", "Unflatten"]
