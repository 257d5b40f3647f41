"""Lookup tables: ``F.embedding`` and ``F.embedding_bag`` with torch's full signatures.

Both are compositions of the ``embedding`` row gather (its VJP scatters rows back), masks and
reductions, so gradients and devices come from those parts. ``max_norm`` renormalizes the looked-up
rows of ``weight`` in place without gradient, as torch does; ``scale_grad_by_freq`` divides each
row's gradient by how often its index occurs in the batch. Sparse gradients are not supported.

    >>> import torchlean as tl
    >>> w = tl.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> embedding_bag(tl.tensor([0, 2, 1]), w, tl.tensor([0, 2]), mode="sum").tolist()
    [[6.0, 8.0], [3.0, 4.0]]
"""

from __future__ import annotations

import numpy as np

from ..autograd import no_grad, record
from ..errors import DomainError, DTypeError, IndexRangeError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..ops import where
from ..tensor import Tensor

__all__ = ["embedding", "embedding_bag"]


def _indices(t, op, what="input"):
    """Integer indices (Tensor, array or list) as a host int64 array."""
    if isinstance(t, Tensor):
        if t.dtype.kind not in "iu":
            raise DTypeError(f"{op}: {what} must be an integer (Long or Int) tensor, got dtype {t.dtype}")
        return np.asarray(get_kernels(t.device).host_ints(t._value), dtype=np.int64)
    a = np.asarray(t)
    if a.dtype.kind not in "iu":
        raise DTypeError(f"{op}: {what} must hold integers, got dtype {a.dtype}")
    return a.astype(np.int64)


def _check_weight(weight, op):
    if not isinstance(weight, Tensor):
        raise TorchLeanError(f"{op}: weight must be a Tensor, got {type(weight).__name__}")
    if weight.ndim != 2:
        raise ShapeError(f"{op}: weight must be 2-D (num_embeddings, embedding_dim), got shape {weight.shape}")


def _check_range(idx, num, op):
    if idx.size and (idx.min() < 0 or idx.max() >= num):
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        raise IndexRangeError(f"{op}: index {bad} is out of range for a weight of {num} rows")


def _padding(padding_idx, num, op):
    if padding_idx is None:
        return None
    p = int(padding_idx)
    if not -num <= p < num:
        raise DomainError(f"{op}: padding_idx {p} must be within num_embeddings ({num})")
    return p + num if p < 0 else p


def _no_sparse(sparse, op):
    if sparse:
        raise DomainError(f"{op}: sparse=True (sparse gradients) is not supported; use sparse=False, which gives "
                          "the same values with a dense gradient")


def _renorm_(weight, idx, max_norm, norm_type):
    """torch's embedding_renorm_: rows of ``weight`` at ``idx`` whose ``norm_type``-norm exceeds
    ``max_norm`` are scaled in place by ``max_norm / (norm + 1e-7)``, without gradient."""
    rows = np.unique(idx)
    if rows.size == 0:
        return
    with no_grad():
        sel = Tensor(rows)
        r = weight[sel]
        norm = r.norm(p=float(norm_type), dim=1, keepdim=True)
        scale = where(norm > float(max_norm), float(max_norm) / (norm + 1e-7), 1.0)
        weight[sel] = r * scale.to(dtype=weight.dtype)


def _freq_scale(out, idx, dtype):
    """``out`` unchanged in value, its gradient divided per entry by the frequency of its index."""
    _, inv, counts = np.unique(idx.reshape(-1), return_inverse=True, return_counts=True)
    s = (1.0 / counts[inv]).reshape(idx.shape + (1,)).astype(dtype)
    frozen = out.detach()
    return frozen + (out - frozen) * Tensor(get_kernels(out.device).from_host(s, s.dtype))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,  # noqa: A002 - torch's names
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` (num, dim) picked by the integer ``input`` (any shape): shape ``input.shape + (dim,)``.

    Rows at ``padding_idx`` get no gradient; ``max_norm`` renormalizes the looked-up rows of ``weight``
    in place first (torch's side effect); ``scale_grad_by_freq`` scales gradients by 1/frequency.

        >>> import torchlean as tl
        >>> embedding(tl.tensor([[0, 1]]), tl.eye(3)).tolist()
        [[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]
    """
    op = "embedding"
    _check_weight(weight, op)
    _no_sparse(sparse, op)
    idx = _indices(input, op)
    num = weight.shape[0]
    _check_range(idx, num, op)
    pad = _padding(padding_idx, num, op)
    if max_norm is not None:
        _renorm_(weight, idx, max_norm, norm_type)
    out = record("embedding", (weight,), {"indices": idx})
    if pad is not None and (idx == pad).any():
        frozen = record("embedding", (weight.detach(),), {"indices": idx})
        keep = Tensor(get_kernels(weight.device).from_host(idx[..., None] != pad, np.dtype(bool)))
        out = where(keep, out, frozen)
    if scale_grad_by_freq and weight.requires_grad:
        out = _freq_scale(out, idx, weight.dtype)
    return out


def _bags(idx, offsets, include_last_offset, op):
    """Bag boundaries ``(starts, ends)`` of flat ``idx`` (1-D input with offsets, or 2-D input)."""
    if idx.ndim == 2:
        if offsets is not None:
            raise DomainError(f"{op}: offsets has to be None if input is 2-D, got input shape {idx.shape}")
        b, n = idx.shape
        starts = np.arange(b, dtype=np.int64) * n
        return starts, starts + n
    if idx.ndim != 1:
        raise ShapeError(f"{op}: input has to be 1-D or 2-D, got shape {idx.shape}")
    if offsets is None:
        raise DomainError(f"{op}: offsets has to be a 1-D tensor when input is 1-D")
    off = _indices(offsets, op, "offsets")
    if off.ndim != 1:
        raise ShapeError(f"{op}: offsets has to be a 1-D tensor, got shape {off.shape}")
    if off.size and off[0] != 0:
        raise DomainError(f"{op}: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                          f"from position 0. However, got {int(off[0])}")
    if off.size and (off[-1] > idx.size or np.any(np.diff(off) < 0)):
        raise DomainError(f"{op}: offsets must be non-decreasing and at most the input length {idx.size}, "
                          f"got {off.tolist()}")
    if include_last_offset:
        if off.size == 0:
            raise DomainError(f"{op}: include_last_offset needs at least one offset")
        return off[:-1], off[1:]
    return off, np.append(off[1:], idx.size)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,  # noqa: A002
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows, without building the per-index rows outside.

    ``input`` is 2-D (B fixed-size bags) or 1-D with ``offsets`` (bag starts; with
    ``include_last_offset`` the last offset closes the last bag). Entries equal to ``padding_idx`` are
    left out of their bag; an empty bag gives zeros. ``per_sample_weights`` (input's shape) weight
    the rows in ``mode='sum'``. Returns a ``(B, embedding_dim)`` tensor.
    """
    op = "embedding_bag"
    _check_weight(weight, op)
    _no_sparse(sparse, op)
    if mode not in ("sum", "mean", "max"):
        raise DomainError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    idx = _indices(input, op)
    num, dim = weight.shape
    _check_range(idx, num, op)
    pad = _padding(padding_idx, num, op)
    if per_sample_weights is not None:
        if mode != "sum":
            raise DomainError(f"{op}: embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                              f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                              "GitHub.")
        if not isinstance(per_sample_weights, Tensor) or tuple(per_sample_weights.shape) != idx.shape:
            got = getattr(per_sample_weights, "shape", None)
            raise ShapeError(f"{op}: per_sample_weights must have the shape of input {idx.shape}, got {got}")
    starts, ends = _bags(idx, offsets, include_last_offset, op)
    flat = idx.reshape(-1)
    if max_norm is not None:
        _renorm_(weight, flat, max_norm, norm_type)
    nbags = starts.size
    lens = ends - starts
    width = max(int(lens.max()) if nbags else 0, 1)
    slot = np.arange(width, dtype=np.int64)
    pos = starts[:, None] + slot[None, :]
    valid = slot[None, :] < lens[:, None]
    pos = np.where(valid, pos, 0)
    if flat.size == 0:
        flat, pos = np.zeros(1, dtype=np.int64), np.zeros_like(pos)
    rows_idx = flat[pos]
    if pad is not None:
        valid = valid & (rows_idx != pad)
    K = get_kernels(weight.device)
    rows = embedding(Tensor(rows_idx), weight, scale_grad_by_freq=False)
    if scale_grad_by_freq and weight.requires_grad:
        _, inv, counts = np.unique(idx.reshape(-1), return_inverse=True, return_counts=True)
        freq = np.ones(max(idx.size, 1), dtype=np.int64)
        freq[:idx.size] = counts[inv]
        s = (1.0 / freq[pos]).astype(weight.dtype)[..., None]
        frozen = rows.detach()
        rows = frozen + (rows - frozen) * Tensor(K.from_host(s, s.dtype))
    mask = Tensor(K.from_host(valid[..., None], np.dtype(bool)))
    count = valid.sum(axis=1)
    if mode == "max":
        low = Tensor(K.full((), -np.inf, weight.dtype))
        best = where(mask, rows, low).max(dim=1).values
        nonempty = Tensor(K.from_host((count > 0)[:, None], np.dtype(bool)))
        return where(nonempty, best, Tensor(K.zeros((), weight.dtype)))
    w = mask.to(dtype=weight.dtype)
    if per_sample_weights is not None:
        psw = per_sample_weights.reshape(-1)
        if psw.numel() == 0:
            psw = Tensor(K.zeros((1,), per_sample_weights.dtype))
        w = w * psw[pos].unsqueeze(-1)
    out = (rows * w).sum(dim=1)
    if mode == "mean":
        div = np.maximum(count, 1).astype(weight.dtype)[:, None]
        out = out / Tensor(K.from_host(div, div.dtype))
    return out
