"""``torch.nn.modules.fold``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..resample import Fold, Unfold  # noqa: F401

__all__ = ["Fold", "Unfold"]
