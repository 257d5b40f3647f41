"""Samplers as torch's ``torch.utils.data.sampler``: iterables of dataset indices (or, for
:class:`BatchSampler`, of lists of indices) that a DataLoader draws its batches from.

Random samplers draw from a ``tl.Generator`` (or, without one, a fresh seed taken from the global
stream at each ``iter``), so the same seed gives the same order; the orders themselves differ from
torch's, whose random stream is another.

    >>> import torchlean as tl
    >>> from torchlean.utils.data import BatchSampler, RandomSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False))
    [[0, 1, 2], [3, 4, 5], [6]]
    >>> sorted(RandomSampler(range(5), generator=tl.Generator().manual_seed(0)))
    [0, 1, 2, 3, 4]
"""

from __future__ import annotations

import itertools
from typing import Generic, TypeVar

from ...errors import AbstractMethodError, DTypeError, ShapeError
from ...ops import Generator, as_tensor, multinomial, randint, randperm
from ...ops.creation import default_generator
from ...spec.rng import random_bits

T_co = TypeVar("T_co", covariant=True)

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]


def _fresh_seed(generator=None) -> int:
    """A 63-bit seed drawn from ``generator`` (default: the global stream), as torch's
    ``torch.empty((), dtype=torch.int64).random_(generator)``."""
    s, c = (generator or default_generator).next_key()
    return int(random_bits(1, s, c)[0] >> 1)


def _check_generator(who, generator):
    if generator is not None and not isinstance(generator, Generator):
        raise DTypeError(f"{who}: generator must be a torchlean.Generator, got {type(generator).__name__}")


class Sampler(Generic[T_co]):
    """Base class: subclasses define ``__iter__`` over indices (and ``__len__`` where known)."""

    def __iter__(self):
        raise AbstractMethodError(f"{type(self).__name__}: subclasses of Sampler should implement __iter__.")


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``.

        >>> from torchlean.utils.data import SequentialSampler
        >>> list(SequentialSampler("abc"))
        [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Random indices of ``data_source``: a fresh permutation per pass (``num_samples`` beyond the
    length takes further permutations), or with ``replacement=True`` ``num_samples`` uniform draws.

        >>> import torchlean as tl
        >>> from torchlean.utils.data import RandomSampler
        >>> s = RandomSampler(range(4), num_samples=6, generator=tl.Generator().manual_seed(2))
        >>> idx = list(s); len(idx), sorted(idx[:4])
        (6, [0, 1, 2, 3])
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise DTypeError(f"RandomSampler: replacement should be a boolean value, but got "
                             f"replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or self.num_samples <= 0:
            raise ShapeError(f"RandomSampler: num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")
        _check_generator("RandomSampler", generator)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = self.generator if self.generator is not None else Generator().manual_seed(_fresh_seed())
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from randint(high=n, size=(32,), generator=generator).tolist()
            yield from randint(high=n, size=(self.num_samples % 32,), generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from randperm(n, generator=generator).tolist()
            yield from randperm(n, generator=generator).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices`` in a random order (a new one per pass).

        >>> import torchlean as tl
        >>> from torchlean.utils.data import SubsetRandomSampler
        >>> sorted(SubsetRandomSampler([5, 7, 9], generator=tl.Generator().manual_seed(0)))
        [5, 7, 9]
    """

    def __init__(self, indices, generator=None):
        _check_generator("SubsetRandomSampler", generator)
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices of ``range(len(weights))`` drawn with probabilities proportional to
    ``weights`` (float64), with or without replacement (``torch.multinomial``).

        >>> import torchlean as tl
        >>> from torchlean.utils.data import WeightedRandomSampler
        >>> s = WeightedRandomSampler([0.0, 1.0, 0.0], 4, generator=tl.Generator().manual_seed(0))
        >>> list(s)
        [1, 1, 1, 1]
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ShapeError(f"WeightedRandomSampler: num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ShapeError(f"WeightedRandomSampler: replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        _check_generator("WeightedRandomSampler", generator)
        w = as_tensor(weights, dtype="float64")
        if len(w.shape) != 1:
            raise ShapeError(f"WeightedRandomSampler: weights should be a 1d sequence but given weights have "
                             f"shape {tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        yield from multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Groups the indices of ``sampler`` into lists of ``batch_size``; ``drop_last`` drops a final
    short list.

        >>> from torchlean.utils.data import BatchSampler
        >>> list(BatchSampler(range(5), 2, drop_last=True)), len(BatchSampler(range(5), 2, False))
        ([[0, 1], [2, 3]], 3)
    """

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ShapeError(f"BatchSampler: batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ShapeError(f"BatchSampler: drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        if self.drop_last:
            for batch in zip(*([it] * self.batch_size)):
                yield [*batch]
        else:
            batch = [*itertools.islice(it, self.batch_size)]
            while batch:
                yield batch
                batch = [*itertools.islice(it, self.batch_size)]

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
