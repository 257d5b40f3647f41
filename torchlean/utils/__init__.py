"""torch.utils's layout under torchlean: :mod:`torchlean.utils.data` (datasets, samplers, DataLoader),
:mod:`torchlean.utils.model_zoo` (``load_url``) and :mod:`torchlean.utils.checkpoint` (accepted, no
recomputation)."""

from . import checkpoint, data, model_zoo

__all__ = ["checkpoint", "data", "model_zoo"]
