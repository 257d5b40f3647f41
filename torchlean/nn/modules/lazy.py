"""``torch.nn.modules.lazy``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..lazy import LazyModuleMixin  # noqa: F401

__all__ = ["LazyModuleMixin"]
