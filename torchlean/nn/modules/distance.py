"""``torch.nn.modules.distance``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..activations import CosineSimilarity, PairwiseDistance  # noqa: F401

__all__ = ["CosineSimilarity", "PairwiseDistance"]
