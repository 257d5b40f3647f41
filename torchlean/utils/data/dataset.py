"""Datasets as torch's ``torch.utils.data.dataset``.

A map-style :class:`Dataset` answers ``ds[i]`` (and usually ``len(ds)``); an :class:`IterableDataset`
is a stream (``iter(ds)``). ``ds1 + ds2`` concatenates (:class:`ConcatDataset`, or
:class:`ChainDataset` for streams); :class:`Subset` picks indices; :func:`random_split` splits at
random (lengths as counts or fractions).

    >>> import torchlean as tl
    >>> from torchlean.utils.data import TensorDataset, random_split
    >>> ds = TensorDataset(tl.arange(10).float(), tl.arange(10))
    >>> a, b = random_split(ds, [0.7, 0.3], generator=tl.Generator().manual_seed(0))
    >>> len(a), len(b), len(ds + ds)
    (7, 3, 20)
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from typing import Generic, TypeVar

from ...errors import AbstractMethodError, DTypeError, ShapeError
from ...ops import randperm
from ._utils.errors import IndexValueError

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "StackDataset",
    "Subset",
    "TensorDataset",
    "random_split",
]


class Dataset(Generic[T_co]):
    """A map from keys (usually ``0 .. len - 1``) to samples: subclasses define ``__getitem__`` and,
    for the default samplers, ``__len__``; an optional ``__getitems__(indices)`` returns a whole
    batch's samples at once (the DataLoader then calls it instead of ``__getitem__`` per index).

        >>> from torchlean.utils.data import Dataset
        >>> class Squares(Dataset):
        ...     def __len__(self): return 4
        ...     def __getitem__(self, i): return i * i
        >>> [Squares()[i] for i in range(4)], len(Squares() + Squares())
        ([0, 1, 4, 9], 8)
    """

    def __getitem__(self, index):
        raise AbstractMethodError(f"{type(self).__name__}: subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A dataset that is a stream: subclasses define ``__iter__``. With ``num_workers > 0`` every
    worker iterates its own copy of the whole stream unless ``__iter__`` splits it by
    :func:`get_worker_info` (as torch).

        >>> from torchlean.utils.data import IterableDataset
        >>> class Count(IterableDataset):
        ...     def __iter__(self): return iter(range(3))
        >>> list(Count() + Count())
        [0, 1, 2, 0, 1, 2]
    """

    def __iter__(self):
        raise AbstractMethodError(f"{type(self).__name__}: subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


def _first_dim(t):
    shape = t.shape if hasattr(t, "shape") else None
    if shape is None or len(shape) == 0:
        raise ShapeError(f"TensorDataset: every tensor needs a first (sample) axis, got {type(t).__name__} "
                         f"of shape {tuple(shape) if shape is not None else None}")
    return shape[0]


class TensorDataset(Dataset):
    """Samples are the rows of tensors sharing their first axis: ``ds[i] == tuple(t[i] for t in
    tensors)`` (any index a tensor takes, a slice or a list too).

        >>> import torchlean as tl
        >>> from torchlean.utils.data import TensorDataset
        >>> ds = TensorDataset(tl.ones(4, 3), tl.arange(4))
        >>> len(ds), [tuple(t.shape) for t in ds[1]]
        (4, [(3,), ()])
    """

    def __init__(self, *tensors):
        sizes = [_first_dim(t) for t in tensors]
        if any(s != sizes[0] for s in sizes):
            raise ShapeError(f"TensorDataset: size mismatch between tensors: first-axis sizes {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class StackDataset(Dataset):
    """Datasets of one length zipped: positional (``ds[i]`` a tuple) or by keyword (a dict).

        >>> from torchlean.utils.data import StackDataset
        >>> StackDataset([1, 2], ["a", "b"])[1], StackDataset(x=[1, 2], y=["a", "b"])[0]
        ((2, 'b'), {'x': 1, 'y': 'a'})
    """

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ShapeError("StackDataset: supported either tuple-like (positional) or dict-like (keyword) "
                             "input, but both types are given")
        if args:
            self._length = len(args[0])
            if any(self._length != len(d) for d in args):
                raise ShapeError(f"StackDataset: size mismatch between datasets: {[len(d) for d in args]}")
            self.datasets = args
        elif kwargs:
            values = list(kwargs.values())
            self._length = len(values[0])
            if any(self._length != len(d) for d in values):
                raise ShapeError(f"StackDataset: size mismatch between datasets: "
                                 f"{ {k: len(d) for k, d in kwargs.items()} }")
            self.datasets = kwargs
        else:
            raise ShapeError("StackDataset: at least one dataset should be passed")

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """Map-style datasets one after another; ``cumulative_sizes`` holds the running lengths.

        >>> from torchlean.utils.data import ConcatDataset
        >>> ds = ConcatDataset([[0, 1, 2], [10, 11]])
        >>> len(ds), ds[3], ds[-1], ds.cumulative_sizes
        (5, 10, 11, [3, 5])
    """

    @staticmethod
    def cumsum(sequence):
        r, s = [], 0
        for e in sequence:
            s += len(e)
            r.append(s)
        return r

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ShapeError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise DTypeError("ConcatDataset does not support IterableDataset (use ChainDataset)")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise IndexValueError(f"ConcatDataset: absolute value of index {idx} should not exceed "
                                      f"dataset length {len(self)}")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        if dataset_idx >= len(self.datasets):
            raise IndexValueError(f"ConcatDataset: index {idx} out of range for a dataset of {len(self)} samples")
        return self.datasets[dataset_idx][sample_idx]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another (chained lazily, so it suits streams).

        >>> from torchlean.utils.data import ChainDataset, IterableDataset
        >>> class Range(IterableDataset):
        ...     def __init__(self, n): self.n = n
        ...     def __iter__(self): return iter(range(self.n))
        >>> list(ChainDataset([Range(2), Range(3)]))
        [0, 1, 0, 1, 2]
    """

    def __init__(self, datasets):
        super().__init__()
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise DTypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise DTypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order (``subset[i] == dataset[indices[i]]``).

        >>> from torchlean.utils.data import Subset
        >>> s = Subset([10, 11, 12, 13], [3, 0])
        >>> len(s), s[0], s[1]
        (2, 13, 10)
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping :class:`Subset` s at random. ``lengths`` are counts summing
    to ``len(dataset)`` or fractions summing to 1 (floors, then the remainder handed out one by one
    from the first split, with a warning for an empty split, as torch). ``generator`` (default: the
    global one) draws the permutation; the same seed gives the same split (the values differ from
    torch's, whose random stream is another).

        >>> import torchlean as tl
        >>> from torchlean.utils.data import random_split
        >>> parts = random_split(range(10), [3, 7], generator=tl.Generator().manual_seed(1))
        >>> sorted(list(parts[0]) + list(parts[1])) == list(range(10))
        True
    """
    lengths = list(lengths)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ShapeError(f"random_split: fraction at index {i} is not between 0 and 1: {frac}")
            subset_lengths.append(int(math.floor(n * frac)))
        for i in range(n - sum(subset_lengths)):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.")
    if sum(lengths) != n:
        raise ShapeError(f"random_split: sum of input lengths {lengths} does not equal the length of the "
                         f"input dataset ({n})")
    indices = randperm(sum(lengths), generator=generator).tolist()
    return [Subset(dataset, indices[offset - length:offset])
            for offset, length in zip(itertools.accumulate(lengths), lengths)]
