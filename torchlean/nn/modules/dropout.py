"""``torch.nn.modules.dropout``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from . import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d  # noqa: F401
from ..pooling import FeatureAlphaDropout  # noqa: F401

__all__ = ["AlphaDropout", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout"]
