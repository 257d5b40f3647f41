"""Loss modules with PyTorch's constructors; ``forward`` calls :mod:`.functional_losses`.

Class weights (``weight``, ``pos_weight``) are buffers, as in PyTorch, so a torch state_dict of a
weighted loss loads; the legacy ``size_average`` / ``reduce`` arguments set ``reduction``.

    >>> import torchlean as tl
    >>> round(MSELoss()(tl.tensor([1.0, 2.0]), tl.tensor([0.0, 0.0])).item(), 4)
    2.5
"""

from __future__ import annotations

import itertools
import warnings
from collections import namedtuple

import numpy as np

from ..errors import DomainError, IndexRangeError, ShapeError
from ..ops import cat
from ..tensor import Tensor
from . import functional_losses as FL
from .activations import PairwiseDistance
from .module import Module, ModuleList, Sequential
from .modules import Linear

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
           "BCEWithLogitsLoss", "KLDivLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "TripletMarginLoss",
           "PoissonNLLLoss", "GaussianNLLLoss", "MultiLabelSoftMarginLoss", "CTCLoss", "HingeEmbeddingLoss",
           "SoftMarginLoss", "MultiMarginLoss", "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss",
           "NLLLoss2d", "AdaptiveLogSoftmaxWithLoss", "LinearCrossEntropyLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = FL._legacy(size_average, reduce, reduction)

    def extra_repr(self) -> str:
        return ""


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """F.cross_entropy as a module (class indices or class probabilities as targets)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):  # noqa: A002
        return FL.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                                reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """F.nll_loss as a module."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):  # noqa: A002
        return FL.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                           reduction=self.reduction)


class MSELoss(_Loss):
    """F.mse_loss as a module."""

    def forward(self, input, target):  # noqa: A002
        return FL.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """F.l1_loss as a module."""

    def forward(self, input, target):  # noqa: A002
        return FL.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """F.smooth_l1_loss as a module."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):  # noqa: A002
        return FL.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """F.huber_loss as a module."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):  # noqa: A002
        return FL.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """F.binary_cross_entropy as a module."""

    def forward(self, input, target):  # noqa: A002
        return FL.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits as a module (``weight`` and ``pos_weight`` buffers)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):  # noqa: A002
        return FL.binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                   reduction=self.reduction)


class KLDivLoss(_Loss):
    """F.kl_div as a module."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):  # noqa: A002
        return FL.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineEmbeddingLoss(_Loss):
    """F.cosine_embedding_loss as a module."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return FL.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """F.margin_ranking_loss as a module."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return FL.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """F.triplet_margin_loss as a module."""

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise FL.DomainError(f"TripletMarginLoss: margin must be greater than 0, got {margin}")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return FL.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                      swap=self.swap, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """F.poisson_nll_loss as a module."""

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return FL.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """F.gaussian_nll_loss as a module (``forward(input, target, var)``)."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):  # noqa: A002
        return FL.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """F.multilabel_soft_margin_loss as a module."""

    def forward(self, input, target):  # noqa: A002
        return FL.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class CTCLoss(_Loss):
    """F.ctc_loss as a module."""

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return FL.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                           self.zero_infinity)


class HingeEmbeddingLoss(_Loss):
    """F.hinge_embedding_loss as a module."""

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):  # noqa: A002
        return FL.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """F.soft_margin_loss as a module."""

    def forward(self, input, target):  # noqa: A002
        return FL.soft_margin_loss(input, target, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """F.multi_margin_loss as a module (``weight`` is a buffer).

        >>> import torchlean as tl
        >>> loss = MultiMarginLoss()
        >>> round(loss(tl.tensor([[0.1, 0.2, 0.4, 0.8]]), tl.tensor([3])).item(), 4)
        0.325
    """

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise DomainError(f"MultiMarginLoss: only p == 1 and p == 2 supported, got p={p!r}")
        if weight is not None and weight.ndim != 1:
            raise ShapeError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.ndim}D instead")
        self.p, self.margin = p, margin

    def forward(self, input, target):  # noqa: A002
        return FL.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                    reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """F.multilabel_margin_loss as a module (targets padded with -1).

        >>> import torchlean as tl
        >>> loss = MultiLabelMarginLoss()
        >>> round(loss(tl.tensor([[0.1, 0.2, 0.4, 0.8]]), tl.tensor([[3, 0, -1, 1]])).item(), 4)
        0.85
    """

    def forward(self, input, target):  # noqa: A002
        return FL.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """F.triplet_margin_with_distance_loss as a module; the default distance is a
    :class:`PairwiseDistance` submodule, as in PyTorch."""

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise DomainError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                              f"instead")
        self.distance_function = distance_function if distance_function is not None else PairwiseDistance()
        self.margin, self.swap = margin, swap

    def forward(self, anchor, positive, negative):
        return FL.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                    distance_function=self.distance_function,
                                                    margin=self.margin, swap=self.swap, reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated alias of :class:`NLLLoss` (warns with a FutureWarning when built)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement and "
                      "see https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for more details.",
                      FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax (Grave et al., 2016): a head over the ``cutoffs[0]`` most frequent classes plus
    one entry per tail cluster; cluster ``i`` projects to ``in_features // div_value**(i+1)`` features
    and then to its classes. ``forward(input, target)`` returns ``(output, loss)``: each target's
    log-probability and their negative mean; ``log_prob`` gives all classes, ``predict`` the argmax.
    Parameters ``head.weight`` (``head.bias``), ``tail.i.0.weight``, ``tail.i.1.weight`` as in PyTorch.

        >>> import torchlean as tl
        >>> _ = tl.manual_seed(0)
        >>> asm = AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[3, 6])
        >>> out, loss = asm(tl.randn(4, 8), tl.tensor([0, 4, 7, 9]))
        >>> out.shape, asm.log_prob(tl.randn(2, 8)).exp().sum(1).allclose(tl.ones(2))
        (torchlean.Size([4]), True)
    """

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise DomainError("AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise DomainError("AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of unique, positive "
                              "integers sorted in an increasing order, where each value is between 1 and "
                              f"n_classes-1, got {cutoffs} for n_classes={n_classes}")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                                        Linear(hsz, osz, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        op = "AdaptiveLogSoftmaxWithLoss"
        tg = np.asarray(FL._host_ints(target_, op)).astype(np.int64)
        if tg.ndim == 1:
            if input_.ndim != 2:
                raise ShapeError(f"{op}: 1D target tensor expects 2D input tensors, but found inputs with size "
                                 f"{tuple(input_.shape)}")
            if input_.shape[0] != tg.shape[0]:
                raise ShapeError(f"{op}: Input and target should have the same size in the batch dimension, "
                                 f"got input {tuple(input_.shape)} and target {tuple(tg.shape)}")
        elif tg.ndim == 0:
            if input_.ndim != 1:
                raise ShapeError(f"{op}: 0D target tensor expects 1D input tensors, but found inputs with size "
                                 f"{tuple(input_.shape)}")
        else:
            raise ShapeError(f"{op}: 0D or 1D target tensor expected, multi-target not supported, got target "
                             f"{tuple(tg.shape)}")
        batched = tg.ndim > 0
        x = input_ if batched else input_.unsqueeze(0)
        tg = tg.reshape(-1)
        B = tg.shape[0]
        if B and ((tg < 0) | (tg >= self.n_classes)).any():
            raise IndexRangeError(f"{op}: Target values should be in [0, {self.n_classes - 1}], but values in range "
                                  f"[{tg.min()}, {tg.max()}] were found.")
        bounds = [0] + self.cutoffs
        cluster = np.searchsorted(np.asarray(self.cutoffs), tg, side="right")     # 0: shortlist, i: tail i-1
        gather_inds = np.where(cluster == 0, tg, self.shortlist_size + cluster - 1)
        pieces, order = [], []
        head_rows = np.flatnonzero(cluster == 0)
        if head_rows.size:
            pieces.append(FL._const(np.zeros(head_rows.size), x))
            order.append(head_rows)
        for i in range(1, len(bounds) - 1):
            rows = np.flatnonzero(cluster == i)
            if rows.size == 0:
                continue
            sub = x.index_select(0, FL._const(rows, x, np.int64))
            local = self.tail[i - 1](sub).log_softmax(1)
            rel = FL._const((tg[rows] - bounds[i])[:, None], x, np.int64)
            pieces.append(local.gather(1, rel).reshape(rows.size))
            order.append(rows)
        head_lp = self.head(x).log_softmax(1)
        output = head_lp.gather(1, FL._const(gather_inds[:, None], x, np.int64)).reshape(B)
        if pieces:
            perm = np.concatenate(order)
            inverse = np.empty_like(perm)
            inverse[perm] = np.arange(perm.size)
            output = output + cat(pieces, dim=0).index_select(0, FL._const(inverse, x, np.int64))
        loss = (-output).mean()
        if not batched:
            output = output.reshape(())
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input, head_output):  # noqa: A002
        head_lp = head_output.log_softmax(1)
        parts = [head_lp[:, :self.shortlist_size]]
        for i, _ in enumerate(itertools.pairwise(self.cutoffs)):
            cluster_lp = self.tail[i](input).log_softmax(1)
            parts.append(cluster_lp + head_lp[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, dim=1)

    def log_prob(self, input):  # noqa: A002
        """Log-probabilities of all ``n_classes`` classes for a ``(N, in_features)`` input."""
        if not isinstance(input, Tensor) or input.ndim != 2:
            raise ShapeError(f"AdaptiveLogSoftmaxWithLoss.log_prob: expects a (N, {self.in_features}) input, got "
                             f"{tuple(getattr(input, 'shape', ()))}")
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):  # noqa: A002
        """The most probable class of each row of a ``(N, in_features)`` input (``log_prob(input).argmax(1)``,
        computing tail clusters only for rows whose head argmax is a cluster)."""
        if not isinstance(input, Tensor) or input.ndim != 2:
            raise ShapeError(f"AdaptiveLogSoftmaxWithLoss.predict: expects a (N, {self.in_features}) input, got "
                             f"{tuple(getattr(input, 'shape', ()))}")
        head_output = self.head(input)
        output = head_output.argmax(dim=1)
        out_host = output.cpu().numpy()
        rows = np.flatnonzero(out_host >= self.shortlist_size)
        if rows.size == 0:
            return output
        if rows.size == out_host.size:
            return self._get_full_log_prob(input, head_output).argmax(dim=1)
        idx = FL._const(rows, input, np.int64)
        sub = self._get_full_log_prob(input.index_select(0, idx), head_output.index_select(0, idx)).argmax(dim=1)
        out_host = out_host.copy()
        out_host[rows] = sub.cpu().numpy()
        return FL._const(out_host, input, np.int64)


class LinearCrossEntropyLoss(Module):
    """torch 2.13's fused projection and cross entropy: ``linear`` (``Linear(in_features, num_classes *
    prod(out_features), bias)``) maps the input to logits ``(N, num_classes, *out_features)``, then
    :func:`~.functional_losses.linear_cross_entropy`. ``options`` (torch's chunked evaluation) is kept
    and has no effect here."""

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None, dtype=None,
                 reduction="mean", weight=None, ignore_index=None, label_smoothing=0.0, options=None):
        super().__init__()
        self.in_features, self.num_classes = int(in_features), int(num_classes)
        self.out_features = tuple(int(v) for v in out_features)
        self.reduction, self.ignore_index, self.label_smoothing, self.options = (reduction, ignore_index,
                                                                                 label_smoothing, options)
        self.linear = Linear(self.in_features, self.num_classes * int(np.prod(self.out_features, dtype=np.int64)),
                             bias=bias, device=device, dtype=dtype)
        self.register_buffer("weight", weight)

    def forward(self, input, target):  # noqa: A002
        shape = (self.num_classes,) + self.out_features
        b = self.linear.bias
        return FL.linear_cross_entropy(input, self.linear.weight.reshape(shape + (self.in_features,)), target,
                                       linear_bias=None if b is None else b.reshape(shape), weight=self.weight,
                                       reduction=self.reduction, ignore_index=self.ignore_index,
                                       label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self):
        return (f"in_features={self.in_features}, num_classes={self.num_classes}, out_features={self.out_features}, "
                f"bias={self.linear.bias is not None}, reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")
