"""``torch.nn.modules.transformer``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..transformer import (  # noqa: F401
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
    TransformerEncoderLayer)

__all__ = ["Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer"]
