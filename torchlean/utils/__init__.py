"""torch.utils's layout under torchlean: :mod:`torchlean.utils.data` (datasets, samplers, DataLoader) and
:mod:`torchlean.utils.model_zoo` (``load_url``)."""

from . import data, model_zoo

__all__ = ["data", "model_zoo"]
