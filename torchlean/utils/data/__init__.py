"""torch.utils.data under torchlean's name: datasets, samplers, collation and the DataLoader (with
real worker processes), with torch's signatures and semantics.

    >>> import torchlean as tl
    >>> from torchlean.utils.data import DataLoader, TensorDataset
    >>> loader = DataLoader(TensorDataset(tl.arange(6).float()), batch_size=4, shuffle=True,
    ...                     generator=tl.Generator().manual_seed(0))
    >>> [tuple(b[0].shape) for b in loader]
    [(4,), (2,)]
"""

from ._utils.collate import default_collate, default_convert
from ._utils.errors import CollateShapeError, DataLoaderError
from ._utils.worker import WorkerInfo, get_worker_info
from .dataloader import DataLoader
from .dataset import (
                      ChainDataset,
                      ConcatDataset,
                      Dataset,
                      IterableDataset,
                      StackDataset,
                      Subset,
                      TensorDataset,
                      random_split,
)
from .distributed import DistributedSampler
from .sampler import (
                      BatchSampler,
                      RandomSampler,
                      Sampler,
                      SequentialSampler,
                      SubsetRandomSampler,
                      WeightedRandomSampler,
)

__all__ = [
                      "BatchSampler",
                      "ChainDataset",
                      "CollateShapeError",
                      "ConcatDataset",
                      "DataLoader",
                      "DataLoaderError",
                      "Dataset",
                      "DistributedSampler",
                      "IterableDataset",
                      "RandomSampler",
                      "Sampler",
                      "SequentialSampler",
                      "StackDataset",
                      "Subset",
                      "SubsetRandomSampler",
                      "TensorDataset",
                      "WeightedRandomSampler",
                      "WorkerInfo",
                      "default_collate",
                      "default_convert",
                      "get_worker_info",
                      "random_split",
]
