"""``torch.nn.parallel``: :class:`DataParallel` and :func:`data_parallel` (one device per process here),
:class:`DistributedDataParallel` (one process per replica, gradients averaged over a process group)."""

from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "data_parallel", "DistributedDataParallel"]
