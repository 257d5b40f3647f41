"""torch.utils's layout under torchlean: :mod:`torchlean.utils.data` (datasets, samplers, DataLoader)."""

from . import data

__all__ = ["data"]
