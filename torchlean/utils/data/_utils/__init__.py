"""Helpers of :mod:`torchlean.utils.data`, laid out as torch's ``torch.utils.data._utils``."""

from . import collate, fetch, worker

__all__ = ["collate", "fetch", "worker"]
