"""``tl.nn.utils.rnn``: packed and padded batches of variable-length sequences (PyTorch's module).

A :class:`PackedSequence` stores the real steps of a batch time step by time step, longest sequence
first: ``data`` is ``(sum(lengths), *)``, ``batch_sizes[t]`` counts the sequences longer than ``t``.
Packing and padding are single row gathers (``index_select``) of the data, so gradients flow through
them to the original tensors.

    >>> import torchlean as tl
    >>> from torchlean.nn.utils.rnn import pack_sequence, pad_packed_sequence
    >>> p = pack_sequence([tl.tensor([1.0, 2.0, 3.0]), tl.tensor([4.0])])
    >>> p.data.tolist(), p.batch_sizes.tolist()
    ([1.0, 4.0, 2.0, 3.0], [2, 1, 1])
    >>> padded, lengths = pad_packed_sequence(p, batch_first=True)
    >>> padded.tolist(), lengths.tolist()
    ([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]], [3, 1])
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ...errors import DomainError, ShapeError, TorchLeanError
from ...ops import cat, full
from ...tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]


def _ints(v, op, what):
    """A host int64 vector from a list, a NumPy array or a tensor."""
    if isinstance(v, Tensor):
        v = v.numpy()
    a = np.asarray(v)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise ShapeError(f"{op}: {what} must be a 1-D sequence of integers, got shape {list(a.shape)} "
                         f"of dtype {a.dtype}")
    return a.astype(np.int64)


def _index_tensor(a, device="cpu"):
    return Tensor(np.ascontiguousarray(a, dtype=np.int64)).to(device=device)


def invert_permutation(permutation):
    """The inverse of an index permutation (``None`` stays ``None``), on the permutation's device."""
    if permutation is None:
        return None
    p = _ints(permutation, "invert_permutation", "permutation")
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size, dtype=np.int64)
    return _index_tensor(inv, permutation.device if isinstance(permutation, Tensor) else "cpu")


_PackedSequenceBase = namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


class PackedSequence(_PackedSequenceBase):
    """A packed batch of sequences: ``(data, batch_sizes, sorted_indices, unsorted_indices)``.

    Build one with :func:`pack_padded_sequence` or :func:`pack_sequence`. ``batch_sizes`` is a CPU
    int64 tensor; ``sorted_indices[j]`` is the original batch position of the ``j``-th longest
    sequence (None when the batch was already sorted) and ``unsorted_indices`` its inverse.
    Recurrent modules accept it as input and return one.

        >>> import torchlean as tl
        >>> from torchlean.nn.utils.rnn import PackedSequence
        >>> p = PackedSequence(tl.ones(3), tl.tensor([2, 1]))
        >>> p.batch_sizes.tolist(), p.unsorted_indices
        ([2, 1], None)
    """

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            raise TorchLeanError("PackedSequence: batch_sizes is required (build one with pack_padded_sequence "
                                 "or pack_sequence)")
        if not isinstance(batch_sizes, Tensor):
            batch_sizes = _index_tensor(_ints(batch_sizes, "PackedSequence", "batch_sizes"))
        if batch_sizes.device != "cpu":
            raise TorchLeanError("PackedSequence: batch_sizes should always be on the CPU; pass them "
                                 "as a CPU tensor or a list")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """``data`` converted as by ``Tensor.to``; the indices follow its device, ``batch_sizes`` stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def move(t):
            return None if t is None else t.to(device=data.device)
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cuda(self, *args, **kwargs):
        return self.to(device="cuda")

    def cpu(self, *args, **kwargs):
        return self.to(device="cpu")

    def double(self):
        return self.to(dtype="float64")

    def float(self):
        return self.to(dtype="float32")

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def _check_lengths(op, lengths, T, B):
    if lengths.size != B:
        raise ShapeError(f"{op}: {lengths.size} lengths for a batch of {B} sequences")
    if lengths.size and lengths.min() <= 0:
        raise DomainError(f"{op}: Length of all samples has to be greater than 0, but found an element in "
                          f"'lengths' that is <= 0 (lengths {lengths.tolist()})")
    if lengths.size and lengths.max() > T:
        raise ShapeError(f"{op}: a length {int(lengths.max())} exceeds the {T} time steps of the input")


def _batch_sizes(sorted_lengths):
    T = int(sorted_lengths[0]) if sorted_lengths.size else 0
    return (sorted_lengths[None, :] > np.arange(T)[:, None]).sum(1).astype(np.int64)


def _packed_rows(batch_sizes):
    """For each packed row: its time step t and its position j in the sorted batch."""
    t = np.repeat(np.arange(batch_sizes.size), batch_sizes)
    starts = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]]).astype(np.int64)
    return t, np.arange(t.size) - starts[t], starts


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of sequences of ``lengths``.

    With ``enforce_sorted=True`` the lengths must be non-increasing; otherwise the batch is sorted
    by decreasing length (stable, as PyTorch's CPU sort) and the permutation is recorded.
    """
    op = "pack_padded_sequence"
    if not isinstance(input, Tensor):
        raise TorchLeanError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    if input.ndim < 2:
        raise ShapeError(f"{op}: input must have a time and a batch axis, got shape {list(input.shape)}")
    L = _ints(lengths, op, "lengths")
    T, B = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    _check_lengths(op, L, T, B)
    if enforce_sorted:
        if np.any(np.diff(L) > 0):
            raise DomainError(f"{op}: `lengths` array must be sorted in decreasing order when `enforce_sorted` "
                              "is True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                              "pack_sequence to sidestep this requirement if you do not need ONNX exportability.")
        order, sorted_indices = np.arange(B), None
    else:
        order = np.argsort(-L, kind="stable")
        sorted_indices = _index_tensor(order, input.device)
    bs = _batch_sizes(L[order])
    t, j, _ = _packed_rows(bs)
    n = order[j]
    rows = n * T + t if batch_first else t * B + n
    data = input.reshape((T * B,) + tuple(input.shape[2:])).index_select(0, rows)
    return PackedSequence(data, _index_tensor(bs), sorted_indices, None)


def _padded_rows(bs, T_out, columns, left=None):
    """Row of packed data (or ``-1`` for padding) for each (t, column) of a (T_out, len(columns)) grid;
    ``columns`` are positions in the sorted batch."""
    starts = np.concatenate([[0], np.cumsum(bs)[:-1]]).astype(np.int64)
    t = np.arange(T_out)[:, None]
    T = bs.size
    tc = np.minimum(t, max(T - 1, 0))
    valid = (t < T) & (columns[None, :] < bs[tc])
    return np.where(valid, starts[tc] + columns[None, :], -1), valid


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Inverse of :func:`pack_padded_sequence`: ``(padded, lengths)``, in the original batch order.

    ``padded`` is ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) with ``T = total_length`` or the
    longest length, filled with ``padding_value``; ``lengths`` is a CPU int64 tensor.
    """
    op = "pad_packed_sequence"
    data, batch_sizes, _, unsorted = sequence
    bs = _ints(batch_sizes, op, "batch_sizes")
    T = bs.size
    if total_length is not None:
        if total_length < T:
            raise DomainError(f"{op}: Expected total_length to be at least the length of the longest sequence "
                              f"in input, but got total_length={total_length} and max sequence length being {T}")
        T = int(total_length)
    B = int(bs[0]) if bs.size else 0
    cols = np.arange(B) if unsorted is None else _ints(unsorted, op, "unsorted_indices")
    rows, _ = _padded_rows(bs, T, cols)
    rest = tuple(data.shape[1:])
    ext = cat([data, full((1,) + rest, padding_value, dtype=data.dtype, device=data.device)])
    rows = np.where(rows < 0, data.shape[0], rows)
    if batch_first:
        rows = rows.T
    padded = ext.index_select(0, rows.reshape(-1)).reshape(rows.shape + rest)
    sorted_lengths = (bs[None, :] > np.arange(B)[:, None]).sum(1)
    return padded, _index_tensor(sorted_lengths[cols])


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences ``(L_i, *)`` into ``(max L, B, *)`` (``(B, max L, *)`` with ``batch_first``),
    padded with ``padding_value`` on the right (or the left, ``padding_side="left"``)."""
    op = "pad_sequence"
    if padding_side not in ("left", "right"):
        raise DomainError(f"{op}: Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    seqs = list(sequences)
    if not seqs:
        raise TorchLeanError(f"{op}: received an empty list of sequences")
    for s in seqs:
        if not isinstance(s, Tensor) or s.ndim < 1:
            raise ShapeError(f"{op}: every sequence must be a tensor of at least 1 dimension")
        if s.shape[1:] != seqs[0].shape[1:]:
            raise ShapeError(f"{op}: sequences have different trailing shapes {list(seqs[0].shape[1:])} and "
                             f"{list(s.shape[1:])}")
    L = np.array([s.shape[0] for s in seqs], dtype=np.int64)
    T, B = int(L.max()), len(seqs)
    starts = np.concatenate([[0], np.cumsum(L)[:-1]]).astype(np.int64)
    t = np.arange(T)[:, None]
    pos = t - (T - L[None, :]) if padding_side == "left" else np.broadcast_to(t, (T, B))
    rows = np.where((pos >= 0) & (pos < L[None, :]), starts[None, :] + pos, int(L.sum()))
    if batch_first:
        rows = rows.T
    rest = tuple(seqs[0].shape[1:])
    ext = cat(seqs + [full((1,) + rest, padding_value, dtype=seqs[0].dtype, device=seqs[0].device)])
    return ext.index_select(0, rows.reshape(-1)).reshape(rows.shape + rest)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences of a padded batch: ``padded[:lengths[i], i]`` (``padded[i, :lengths[i]]``)."""
    L = _ints(lengths, "unpad_sequence", "lengths")
    if batch_first:
        return [padded_sequences[i, :int(n)] for i, n in enumerate(L)]
    return [padded_sequences[:int(n), i] for i, n in enumerate(L)]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences ``(L_i, *)`` (pad then pack)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences of a :class:`PackedSequence`, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def _packed_to_time_major(data, batch_sizes):
    """``(x (T, B, *), mask (T, B) host bool)`` of packed ``data``, in the sorted batch order, padding 0."""
    bs = _ints(batch_sizes, "PackedSequence", "batch_sizes")
    B = int(bs[0]) if bs.size else 0
    rows, valid = _padded_rows(bs, bs.size, np.arange(B))
    rest = tuple(data.shape[1:])
    ext = cat([data, data.new_zeros((1,) + rest)])
    x = ext.index_select(0, np.where(valid, rows, data.shape[0]).reshape(-1)).reshape(rows.shape + rest)
    return x, valid


def _time_major_to_packed(x, batch_sizes):
    """Inverse of :func:`_packed_to_time_major`: the real rows of ``x`` (T, B, *) in packed order."""
    bs = _ints(batch_sizes, "PackedSequence", "batch_sizes")
    t, j, _ = _packed_rows(bs)
    B = x.shape[1]
    return x.reshape((x.shape[0] * B,) + tuple(x.shape[2:])).index_select(0, t * B + j)
