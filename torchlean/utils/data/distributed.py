"""DistributedSampler as torch's: each of ``num_replicas`` processes reads its own strided share of
one (optionally shuffled) order of the dataset.

    >>> from torchlean.utils.data import DistributedSampler
    >>> [list(DistributedSampler(range(5), num_replicas=2, rank=r, shuffle=False)) for r in (0, 1)]
    [[0, 2, 4], [1, 3, 0]]
"""

from __future__ import annotations

import math
import os

from ...errors import DomainError
from ...ops import Generator, randperm
from ._utils.errors import DataLoaderError
from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _env_int(name, who):
    v = os.environ.get(name)
    if v is None:
        raise DataLoaderError(f"{who}: {name.lower()} not given and no process group is initialized "
                              f"(set {name}, as torchrun does, or pass it explicitly)")
    return int(v)


class DistributedSampler(Sampler):
    """Indices for replica ``rank`` of ``num_replicas``: the order (``range(n)``, or with ``shuffle`` a
    permutation seeded by ``seed + epoch``, see :meth:`set_epoch`) is padded by wrapping around to a
    multiple of ``num_replicas`` (or, with ``drop_last``, cut to one), and the replica takes every
    ``num_replicas``-th index from ``rank``. Unshuffled index lists equal torch's; shuffled ones are
    reproducible but differ (another random stream). Without ``num_replicas``/``rank`` the
    ``WORLD_SIZE``/``RANK`` environment variables (torchrun's) are read.

        >>> from torchlean.utils.data import DistributedSampler
        >>> s = DistributedSampler(range(10), num_replicas=3, rank=2, shuffle=False, drop_last=True)
        >>> list(s), len(s)
        ([2, 5, 8], 3)
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        from ... import distributed as dist
        if num_replicas is None:
            num_replicas = dist.get_world_size() if dist.is_initialized() else _env_int("WORLD_SIZE", "DistributedSampler")
        if rank is None:
            rank = dist.get_rank() if dist.is_initialized() else _env_int("RANK", "DistributedSampler")
        if rank >= num_replicas or rank < 0:
            raise DomainError(f"DistributedSampler: invalid rank {rank}, rank should be in the interval "
                              f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(self.dataset) % self.num_replicas != 0:
            self.num_samples = math.ceil((len(self.dataset) - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(len(self.dataset) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        if self.shuffle:
            g = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(len(self.dataset), generator=g).tolist()
        else:
            indices = list(range(len(self.dataset)))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass use the order of ``epoch`` (call it before each epoch when shuffling, so
        every epoch has its own order and all replicas agree on it)."""
        self.epoch = epoch
