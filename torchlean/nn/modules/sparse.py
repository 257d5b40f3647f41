"""``torch.nn.modules.sparse``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..sparse import Embedding, EmbeddingBag  # noqa: F401

__all__ = ["Embedding", "EmbeddingBag"]
