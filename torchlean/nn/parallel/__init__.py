"""``torch.nn.parallel``: :class:`DataParallel` and :func:`data_parallel` (one device per process here)."""

from .data_parallel import DataParallel, data_parallel

__all__ = ["DataParallel", "data_parallel"]
