"""``Embedding`` and ``EmbeddingBag``: lookup tables with torch's constructors, parameters and init.

The weight starts N(0, 1) with the ``padding_idx`` row zeroed. ``sparse=True`` (sparse
gradients) is not supported and raises DomainError; every other option behaves as in torch.

    >>> import torchlean as tl
    >>> emb = Embedding(10, 3, padding_idx=0)
    >>> emb(tl.tensor([[0, 4], [9, 0]])).shape
    torchlean.Size([2, 2, 3])
    >>> float(emb.weight[0].abs().sum())
    0.0
"""

from __future__ import annotations

from ..errors import DomainError, ShapeError
from ..tensor import Tensor, as_dtype, float32, no_grad
from . import functional_sparse as FS
from . import init
from .module import Module
from .parameter import Parameter, zeros_value

__all__ = ["Embedding", "EmbeddingBag"]


def _table(num, dim, device, dtype):
    return Parameter(Tensor(zeros_value((num, dim), as_dtype(dtype) or float32, device)))


def _padding_idx(padding_idx, num, cls):
    if padding_idx is None:
        return None
    if not -num <= padding_idx < num:
        raise DomainError(f"{cls}: padding_idx {padding_idx} must be within num_embeddings ({num})")
    return padding_idx + num if padding_idx < 0 else padding_idx


def _given_weight(w, num, dim, cls, requires_grad):
    if not isinstance(w, Tensor):
        raise DomainError(f"{cls}: _weight must be a Tensor, got {type(w).__name__}")
    if tuple(w.shape) != (num, dim):
        raise ShapeError(f"{cls}: Shape of weight {tuple(w.shape)} does not match num_embeddings and "
                         f"embedding_dim ({num}, {dim})")
    return Parameter(w, requires_grad=requires_grad)


def _check_sparse(sparse, cls):
    if sparse:
        raise DomainError(f"{cls}: sparse=True (sparse gradients) is not supported; use sparse=False, which gives "
                          "the same values with a dense gradient")


class Embedding(Module):
    """A lookup table ``weight`` (num_embeddings, embedding_dim): ``forward(input)`` picks its rows.

    ``padding_idx``: that row starts at zero and gets no gradient. ``max_norm``: looked-up rows
    whose ``norm_type``-norm exceeds it are rescaled in place (no gradient) before the lookup.
    ``scale_grad_by_freq``: row gradients are divided by the index's frequency in the batch.

        >>> import torchlean as tl
        >>> emb = Embedding.from_pretrained(tl.tensor([[3.0, 4.0], [0.6, 0.8]]), max_norm=1.0)
        >>> [round(v, 4) for v in emb(tl.tensor([0])).reshape(-1).tolist()]
        [0.6, 0.8]
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False, _weight=None,
                 _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        _check_sparse(sparse, "Embedding")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _padding_idx(padding_idx, num_embeddings, "Embedding")
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if _weight is None:
            self.weight = _table(num_embeddings, embedding_dim, device, dtype)
            self.weight.requires_grad_(not _freeze)
            self.reset_parameters()
        else:
            self.weight = _given_weight(_weight, num_embeddings, embedding_dim, "Embedding", not _freeze)
        self.sparse = sparse

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input):  # noqa: A002
        return FS.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                            self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False):
        """An Embedding whose weight is ``embeddings`` (2-D; shared, not copied, as in torch),
        trainable unless ``freeze``."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            raise ShapeError("Embedding.from_pretrained: Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, _weight=embeddings, _freeze=freeze)


class EmbeddingBag(Module):
    """Sums, means or maxima over bags of embedding rows (``mode``), without the per-index rows.

    ``forward(input, offsets=None, per_sample_weights=None)``: a 2-D ``input`` is one bag per row;
    a 1-D one is split at ``offsets``. Returns ``(bags, embedding_dim)``.

        >>> import torchlean as tl
        >>> bag = EmbeddingBag(10, 3, mode="sum")
        >>> bag(tl.tensor([1, 2, 4, 5, 4]), tl.tensor([0, 2])).shape
        torchlean.Size([2, 3])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False, _weight=None,
                 include_last_offset: bool = False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        _check_sparse(sparse, "EmbeddingBag")
        if mode not in ("sum", "mean", "max"):
            raise DomainError(f"EmbeddingBag: mode has to be one of sum, mean or max, got {mode!r}")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _padding_idx(padding_idx, num_embeddings, "EmbeddingBag")
        if _weight is None:
            self.weight = _table(num_embeddings, embedding_dim, device, dtype)
            self.reset_parameters()
        else:
            self.weight = _given_weight(_weight, num_embeddings, embedding_dim, "EmbeddingBag", True)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    _fill_padding_idx_with_zero = Embedding._fill_padding_idx_with_zero

    def forward(self, input, offsets=None, per_sample_weights=None):  # noqa: A002
        return FS.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                                self.mode, self.sparse, per_sample_weights, self.include_last_offset,
                                self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, max_norm=None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                        include_last_offset: bool = False, padding_idx=None):
        """An EmbeddingBag whose weight is ``embeddings`` (2-D, shared), trainable unless ``freeze``."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            raise ShapeError("EmbeddingBag.from_pretrained: Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        m = cls(rows, cols, max_norm=max_norm, norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq,
                mode=mode, sparse=sparse, _weight=embeddings, include_last_offset=include_last_offset,
                padding_idx=padding_idx)
        m.weight.requires_grad = not freeze
        return m
