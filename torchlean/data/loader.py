"""Datasets and the batching loader.

A dataset maps an index to one sample (a Tensor, a NumPy array, a number, or a
tuple/list/dict of those). :class:`DataLoader` groups indices into batches and
collates the samples along a new first axis. Datasets that can produce a whole
batch at once define ``batch(indices)``; :class:`TensorDataset`, :class:`Subset`
of one, and the character-window dataset do, so their batches come from one NumPy
fancy-indexing call per field instead of a Python loop over samples.

Shuffling is counter-based (DESIGN.md): epoch ``e`` of a loader with seed ``s``
visits ``argsort(u)`` where ``u`` are the float64 uniforms of key ``(s, e)``, so
the order is the same on every machine and does not depend on anything else the
program drew.

    >>> import torchlean as tl
    >>> from torchlean.data import TensorDataset, DataLoader
    >>> ds = TensorDataset(tl.arange(10).reshape(5, 2).float(), tl.arange(5))
    >>> loader = DataLoader(ds, batch_size=2, shuffle=True, seed=0)
    >>> len(loader), [tuple(x.shape) for x, y in loader]
    (3, [(2, 2), (2, 2), (1, 2)])
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from ..errors import DTypeError, IndexRangeError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..spec.rng import uniform
from ..ops import from_numpy
from ..tensor import Tensor, next_rng_key

# Counter offsets keep the permutation streams of different uses apart, so a split
# and the first epoch of a loader with the same seed are not the same permutation.
_SPLIT_STREAM = 0x53504C49_00000000


def permutation(n: int, seed: int, counter: int = 0) -> np.ndarray:
    """The counter-based permutation of ``range(n)`` for key ``(seed, counter)``, int64.

    ``argsort`` of float64 uniforms (53 random bits each); a stable sort breaks the
    (vanishingly rare) ties by index, so the result is a pure function of the key.
    """
    u = uniform(int(n), int(seed), int(counter), np.float64)
    return np.argsort(u, kind="stable").astype(np.int64)


def _to_host(v):
    """NumPy view/copy of a sample field; Tensors give their host values."""
    if isinstance(v, Tensor):
        return v._value if v.device == "cpu" else v.numpy()
    return np.asarray(v)


def _wrap(a, device):
    a = np.ascontiguousarray(a)
    if a.dtype.kind in "iu":
        if a.dtype != np.int64:
            a = a.astype(np.int64)
    elif a.dtype.kind not in "fb":
        raise DTypeError(f"collate: cannot batch values of dtype {a.dtype}")
    if device in (None, "cpu"):
        return from_numpy(a)
    K = get_kernels(device)
    return Tensor(K.from_host(a, a.dtype))


def default_collate(samples, device=None):
    """Stack a list of samples along a new first axis.

    Tuples and lists collate field by field (a tuple of batches), dicts key by key.
    Tensors and NumPy arrays keep their dtype (integers become int64); Python ints
    give int64 and Python floats float32, as :func:`torchlean.tensor` does.
    Every sample must have the same structure and shapes; otherwise ShapeError.
    """
    if not samples:
        raise ShapeError("collate: empty batch")
    first = samples[0]
    if isinstance(first, (tuple, list)):
        n = len(first)
        if any(not isinstance(s, (tuple, list)) or len(s) != n for s in samples):
            raise ShapeError(f"collate: samples have different numbers of fields (first has {n})")
        return tuple(default_collate([s[i] for s in samples], device) for i in range(n))
    if isinstance(first, dict):
        keys = list(first)
        return {k: default_collate([s[k] for s in samples], device) for k in keys}
    if isinstance(first, bool) or isinstance(first, np.bool_):
        return _wrap(np.array(samples, dtype=np.bool_), device)
    if isinstance(first, Integral):
        return _wrap(np.array(samples, dtype=np.int64), device)
    if isinstance(first, Real):
        return _wrap(np.array(samples, dtype=np.float32), device)
    arrays = [_to_host(s) for s in samples]
    shape = arrays[0].shape
    for a in arrays:
        if a.shape != shape:
            raise ShapeError(f"collate: samples of shapes {shape} and {a.shape} cannot be stacked")
    return _wrap(np.stack(arrays), device)


class Dataset:
    """Base class: define ``__len__`` and ``__getitem__(i)``; optionally ``batch(indices)``.

    ``batch`` returns an already collated batch for an int64 index array; the default
    gathers the samples one by one and collates them.
    """

    def __len__(self) -> int:
        raise TorchLeanError(f"{type(self).__name__} does not define __len__")

    def __getitem__(self, i):
        raise TorchLeanError(f"{type(self).__name__} does not define __getitem__")

    def batch(self, indices, device=None):
        """The collated batch of samples ``indices`` (an int64 array)."""
        return default_collate([self[int(i)] for i in indices], device)


def _check_index(i, n, who):
    if isinstance(i, bool) or not isinstance(i, (Integral, np.integer)):
        raise IndexRangeError(f"{who}: index must be an integer, got {type(i).__name__}")
    i = int(i)
    if not -n <= i < n:
        raise IndexRangeError(f"{who}: index {i} out of range for a dataset of {n} samples")
    return i % n if n else i


def _check_indices(indices, n, who):
    idx = np.asarray(indices, dtype=np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx[(idx < -n) | (idx >= n)][0]
        raise IndexRangeError(f"{who}: index {int(bad)} out of range for a dataset of {n} samples")
    return np.where(idx < 0, idx + n, idx)


class TensorDataset(Dataset):
    """Samples are the rows of one or more tensors sharing their first axis.

    ``ds[i]`` is the tuple ``(t[i] for t in tensors)``. NumPy arrays are accepted and
    kept as they are (no copy).

        >>> import torchlean as tl
        >>> ds = TensorDataset(tl.ones(4, 3), tl.arange(4))
        >>> len(ds), [tuple(t.shape) for t in ds[1]]
        (4, [(3,), ()])
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ShapeError("TensorDataset: needs at least one tensor")
        vals = []
        for t in tensors:
            v = t._value if isinstance(t, Tensor) else np.ascontiguousarray(t)
            if v.ndim == 0:
                raise ShapeError("TensorDataset: 0-d tensors have no sample axis")
            vals.append(v)
        n = vals[0].shape[0]
        if any(v.shape[0] != n for v in vals):
            raise ShapeError("TensorDataset: tensors have different first-axis sizes "
                             + ", ".join(str(tuple(v.shape)) for v in vals))
        self.tensors = tuple(t if isinstance(t, Tensor) else Tensor(v) for t, v in zip(tensors, vals))
        self._values = vals

    def __len__(self):
        return self._values[0].shape[0]

    def __getitem__(self, i):
        i = _check_index(i, len(self), "TensorDataset")
        return tuple(Tensor(v[i]) for v in self._values)

    def batch(self, indices, device=None):
        idx = _check_indices(indices, len(self), "TensorDataset")
        out = []
        for v in self._values:
            if isinstance(v, np.ndarray):
                out.append(_wrap(v[idx], device))
            else:
                # Values already on the GPU are gathered there.
                K = get_kernels("cuda")
                g = K.gather_rows(v.reshape(v.shape[0], -1), idx).reshape((len(idx),) + v.shape[1:])
                if g.dtype.kind in "iu" and g.dtype != np.int64:
                    g = K.astype(g, np.int64)
                out.append(Tensor(g) if device in (None, "cuda") else _wrap(K.to_host(g), device))
        return tuple(out)


class Subset(Dataset):
    """The samples ``indices`` of ``dataset``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = _check_indices(indices, len(dataset), "Subset")

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        return self.dataset[int(self.indices[_check_index(i, len(self), "Subset")])]

    def batch(self, indices, device=None):
        idx = _check_indices(indices, len(self), "Subset")
        return self.dataset.batch(self.indices[idx], device) if hasattr(self.dataset, "batch") \
            else default_collate([self.dataset[int(j)] for j in self.indices[idx]], device)


def random_split(dataset, lengths, seed=0):
    """Split ``dataset`` into non-overlapping :class:`Subset` s of the given lengths.

    ``lengths`` are sample counts summing to ``len(dataset)``, or fractions summing
    to 1 (floors, with the remainder handed out one by one from the first subset,
    as PyTorch does). The permutation is counter-based and keyed by ``seed`` only.

        >>> import torchlean as tl
        >>> a, b = random_split(TensorDataset(tl.arange(10)), [0.8, 0.2], seed=0)
        >>> len(a), len(b)
        (8, 2)
    """
    n = len(dataset)
    lengths = list(lengths)
    if not lengths:
        raise ShapeError("random_split: needs at least one length")
    if all(isinstance(x, Integral) for x in lengths):
        counts = [int(x) for x in lengths]
    else:
        fr = [float(x) for x in lengths]
        if any(f < 0 for f in fr) or not math.isclose(sum(fr), 1.0, abs_tol=1e-9):
            raise ShapeError(f"random_split: fractions {lengths} must be non-negative and sum to 1")
        counts = [int(math.floor(n * f)) for f in fr]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
    if any(c < 0 for c in counts) or sum(counts) != n:
        raise ShapeError(f"random_split: lengths {lengths} do not sum to the dataset size {n}")
    perm = permutation(n, seed, _SPLIT_STREAM)
    out, start = [], 0
    for c in counts:
        out.append(Subset(dataset, perm[start:start + c]))
        start += c
    return out


class DataLoader:
    """Iterate over a dataset in batches.

    Parameters follow PyTorch's: ``batch_size``, ``shuffle``, ``drop_last``
    (drop a final short batch), ``collate_fn`` (a list of samples -> batch; given
    one, the dataset's ``batch`` fast path is not used). ``seed`` keys the shuffle:
    epoch ``e`` (counted by iterations started, or set with :meth:`set_epoch`)
    visits ``permutation(len(dataset), seed, e)``; with ``seed=None`` each epoch
    draws a key from the global generator (``tl.manual_seed``). ``device`` places
    the batches (default: the CPU).

    Batches are stacked along a new first axis; integer fields are int64.

        >>> import torchlean as tl
        >>> loader = DataLoader(TensorDataset(tl.arange(5)), batch_size=2, drop_last=True)
        >>> [b[0].tolist() for b in loader]
        [[0, 1], [2, 3]]
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None,
                 collate_fn=None, device=None):
        if isinstance(batch_size, bool) or not isinstance(batch_size, Integral) or batch_size < 1:
            raise ShapeError(f"DataLoader: batch_size must be a positive integer, got {batch_size!r}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.seed = seed
        self.collate_fn = collate_fn
        self.device = device
        self.epoch = 0

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration use the order of ``epoch``."""
        self.epoch = int(epoch)

    def order(self, epoch=None) -> np.ndarray:
        """The sample order of ``epoch`` (default: the next one), int64.

        With ``seed=None`` every call draws a fresh key from the global generator.
        """
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n, dtype=np.int64)
        e = self.epoch if epoch is None else int(epoch)
        if self.seed is None:
            s, c = next_rng_key()
            return permutation(n, s, c)
        return permutation(n, self.seed, e)

    def __iter__(self):
        # The order is fixed (and the epoch advanced) when iteration starts, not at the first batch.
        idx = self.order()
        self.epoch += 1
        return self._batches(idx)

    def _batches(self, idx):
        fast = self.collate_fn is None and hasattr(self.dataset, "batch")
        bs = self.batch_size
        stop = len(idx) // bs * bs if self.drop_last else len(idx)
        for start in range(0, stop, bs):
            chunk = idx[start:start + bs]
            if fast:
                yield self.dataset.batch(chunk, self.device)
            else:
                samples = [self.dataset[int(i)] for i in chunk]
                yield self.collate_fn(samples) if self.collate_fn else default_collate(samples, self.device)
