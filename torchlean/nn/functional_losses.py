"""Loss functions with PyTorch's signatures, as compositions of recorded ops.

Gradients come from the parts. Integer class targets of ``cross_entropy`` / ``nll_loss`` run the
fused ``cross_entropy`` / ``nll_loss`` ops; every other case is a formula over elementwise ops and
reductions. The legacy ``size_average`` / ``reduce`` arguments map to ``reduction`` as in PyTorch.

    >>> import torchlean as tl
    >>> round(mse_loss(tl.tensor([1.0, 2.0]), tl.tensor([0.0, 0.0])).item(), 4)
    2.5
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..autograd import record
from ..errors import DomainError, DTypeError, IndexRangeError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..ops import cat, stack, where
from ..shape import broadcast_shapes
from ..tensor import Tensor
from .functional_activations import pairwise_distance
from ..amp import autocast_namespace

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
           "margin_ranking_loss", "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
           "multilabel_soft_margin_loss", "ctc_loss", "hinge_embedding_loss", "soft_margin_loss",
           "multi_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss",
           "linear_cross_entropy"]

_REDUCTIONS = ("mean", "sum", "none")


# ---- helpers --------------------------------------------------------------------------------

def _tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TorchLeanError(f"{op}: {what} must be a Tensor, got {type(x).__name__}")
    return x


def _legacy(size_average, reduce, reduction):
    """PyTorch's mapping of the deprecated ``size_average`` / ``reduce`` pair to ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    out = "none" if not reduce else ("mean" if size_average else "sum")
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{out}' instead.",
                  UserWarning, stacklevel=3)
    return out


def _check_reduction(op, reduction, extra=()):
    if reduction not in _REDUCTIONS + tuple(extra):
        raise DomainError(f"{op}: reduction must be one of {_REDUCTIONS + tuple(extra)}, got {reduction!r}")


def _reduce(x, reduction):
    if reduction == "none":
        return x
    if reduction == "sum":
        return x.sum()
    return x.mean()


def _size_warning(op, input, target):  # noqa: A002
    if input.shape != target.shape:
        warnings.warn(f"{op}: Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
                      f"Please ensure they have the same size.", UserWarning, stacklevel=3)
        broadcast_shapes(tuple(input.shape), tuple(target.shape), op=op)


def _like(w, x, op, what="weight"):
    """``w`` as a float Tensor of ``x``'s dtype (a Tensor, array or number)."""
    if not isinstance(w, Tensor):
        w = Tensor(np.asarray(w, dtype=x.dtype))
    if w.dtype.kind != "f":
        raise DTypeError(f"{op}: {what} must be a float tensor, got dtype {w.dtype}")
    return w if w.dtype == x.dtype else w.to(dtype=x.dtype)


def _host_ints(t, op, what="target"):
    if isinstance(t, Tensor):
        if t.dtype.kind not in "iu":
            raise DTypeError(f"{op}: {what} must hold integers, got dtype {t.dtype}")
        return get_kernels(t.device).host_ints(t._value)
    a = np.asarray(t)
    if a.dtype.kind not in "iu":
        raise DTypeError(f"{op}: {what} must hold integers, got dtype {a.dtype}")
    return a


def _host_weight(w, op):
    if w is None:
        return None
    a = w.numpy() if isinstance(w, Tensor) else np.asarray(w)
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: weight must be a float tensor, got dtype {a.dtype}")
    return a.astype(np.float64)


def _weighted(loss, weight, input, op, reduction):  # noqa: A002
    """torch's optional elementwise ``weight`` (same size as input); "mean" divides by its sum."""
    if weight is None:
        return _reduce(loss, reduction)
    w = _like(weight, input, op)
    if w.shape != input.shape:
        raise ShapeError(f"{op}: Weights and input must have the same size.")
    wl = loss * w
    if reduction == "mean":
        return wl.sum() / w.sum()
    return _reduce(wl, reduction)


def _softplus(x):
    """log(1 + exp(x)), stably."""
    return record("softplus", (x,), {})


# ---- class targets --------------------------------------------------------------------------

def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
             reduction="mean"):
    """Negative log-likelihood of integer class targets, given log-probabilities.

    input ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)``; target ``()``, ``(N,)`` or ``(N, d1, ...)``;
    ``"mean"`` is the weighted mean over non-ignored targets.
    """
    reduction = _legacy(size_average, reduce, reduction)
    return record("nll_loss", (_tensor(input, "nll_loss"),),
                  {"target": _host_ints(target, "nll_loss"), "weight": _host_weight(weight, "nll_loss"),
                   "ignore_index": int(ignore_index), "reduction": reduction})


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,  # noqa: A002
                         reduction="mean", ignore_index=None, label_smoothing=0.0, options=None):
    """torch 2.13's ``cross_entropy(linear(input, linear_weight), target, ...)``: ``linear_weight`` is
    ``(C, *K, in_features)`` (``*K`` the extra axes of a K-dimensional loss, whose logits come out
    ``(N, C, *K)``), ``linear_bias`` ``(C, *K)``; ``ignore_index=None`` means -100. ``options`` (torch's
    chunking of the vocabulary) is accepted and has no effect: the logits are made whole."""
    from .functional import linear
    if not isinstance(input, Tensor) or not isinstance(linear_weight, Tensor):
        raise DomainError("linear_cross_entropy: input and linear_weight must be Tensors")
    if input.ndim not in (1, 2):
        raise ShapeError(f"linear_cross_entropy: expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2 or linear_weight.shape[-1] != input.shape[-1]:
        raise ShapeError(f"linear_cross_entropy: linear_weight of shape {tuple(linear_weight.shape)} does not "
                         f"take inputs of {input.shape[-1]} features")
    classes = tuple(linear_weight.shape[:-1])
    w2 = linear_weight.reshape(-1, input.shape[-1])
    b2 = None if linear_bias is None else linear_bias.reshape(-1)
    logits = linear(input, w2, b2)
    if len(classes) > 1:
        logits = logits.reshape(tuple(input.shape[:-1]) + classes)
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index, label_smoothing=label_smoothing)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
                  reduction="mean", label_smoothing=0.0):
    """Cross entropy of logits against integer classes or class probabilities.

    Integer targets (any of nll_loss's shapes) run the fused ``cross_entropy`` op, label smoothing
    included. A float target of the input's shape holds class probabilities (class axis 1, or 0
    for a 1-D input): ``-sum_c w_c t_c log_softmax(x)_c``, smoothed as ``t (1 - eps) + eps / C``;
    ``"mean"`` divides by the number of rows (not by the weights), as in PyTorch.
    """
    reduction = _legacy(size_average, reduce, reduction)
    op = "cross_entropy"
    _tensor(input, op)
    if not (isinstance(target, Tensor) and target.dtype.kind == "f"):
        return record(op, (input,),
                      {"target": _host_ints(target, op), "weight": _host_weight(weight, op),
                       "ignore_index": int(ignore_index), "reduction": reduction,
                       "label_smoothing": float(label_smoothing)})
    _check_reduction(op, reduction)
    if target.shape != input.shape:
        raise ShapeError(f"{op}: probability target of shape {target.shape} must match input shape {input.shape}")
    if input.ndim == 0:
        raise ShapeError(f"{op}: input of shape () needs a class axis")
    if not 0.0 <= label_smoothing <= 1.0:
        raise DomainError(f"{op}: label_smoothing must lie in [0, 1], got {label_smoothing!r}")
    axis = 0 if input.ndim == 1 else 1
    C = input.shape[axis]
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / C
    logp = input.log_softmax(axis)
    if weight is not None:
        w = _like(weight, input, op)
        if w.shape != (C,):
            raise ShapeError(f"{op}: weight of shape {w.shape} must have shape ({C},) for {C} classes")
        logp = logp * w.reshape((C,) + (1,) * (input.ndim - axis - 1))
    per = -(logp * target).sum(dim=axis)
    return _reduce(per, reduction)


# ---- regression -----------------------------------------------------------------------------

def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    """(input - target)^2, broadcast (with PyTorch's warning when the sizes differ) and reduced."""
    op = "mse_loss"
    _tensor(input, op), _tensor(target, op, "target")
    _size_warning(op, input, target)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if reduction == "mean" and weight is None and input.shape == target.shape:
        return record("mse_loss", (input, target), {})              # the fused op: one pass
    d = input - target
    return _weighted(d * d, weight, input, op, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    """|input - target| (abs'(0) = 0), broadcast with PyTorch's warning, reduced."""
    op = "l1_loss"
    _tensor(input, op), _tensor(target, op, "target")
    _size_warning(op, input, target)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    return _weighted((input - target).abs(), weight, input, op, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):  # noqa: A002
    """0.5 z^2 / beta where z = |input - target| < beta, else z - 0.5 beta (l1_loss when beta = 0)."""
    op = "smooth_l1_loss"
    _tensor(input, op), _tensor(target, op, "target")
    _size_warning(op, input, target)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if beta < 0:
        raise DomainError(f"{op}: beta must be non-negative, got {beta!r}")
    z = (input - target).abs()
    if beta == 0:
        return _reduce(z, reduction)
    return _reduce(where(z < beta, z * z * (0.5 / beta), z - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    """0.5 z^2 where z = |input - target| < delta, else delta (z - 0.5 delta)."""
    op = "huber_loss"
    _tensor(input, op), _tensor(target, op, "target")
    _size_warning(op, input, target)
    _check_reduction(op, reduction)
    if delta <= 0:
        raise DomainError(f"{op}: delta must be positive, got {delta!r}")
    z = (input - target).abs()
    loss = where(z < delta, z * z * 0.5, (z - 0.5 * delta) * delta)
    if weight is None:
        return _reduce(loss, reduction)
    w = _like(weight, input, op)
    if w.shape != input.shape:
        raise ShapeError(f"{op}: Weights and input must have the same size.")
    return _reduce(loss * w, reduction)


# ---- binary / multi-label -------------------------------------------------------------------

def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                         reduction="mean"):
    """-w (t log x + (1 - t) log(1 - x)) on probabilities x in [0, 1]; each log is clamped at -100
    as in PyTorch, so x = 0 or 1 gives a finite loss. Where a log is clamped its gradient is torch's
    boundary slope, (x - t) / 1e-12, never 0 x inf = NaN (see :func:`_clamped_log`)."""
    op = "binary_cross_entropy"
    _tensor(input, op), _tensor(target, op, "target")
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if target.shape != input.shape:
        raise ShapeError(f"{op}: Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    if input.numel() and bool(((input < 0) | (input > 1)).any()):
        raise DomainError(f"{op}: all elements of input should be between 0 and 1")
    loss = -(target * _clamped_log(input) + (1 - target) * _clamped_log(input, complement=True))
    if weight is not None:
        loss = loss * _like(weight, input, op)
    return _reduce(loss, reduction)


_LOG_FLOOR = math.exp(-100.0)


def _clamped_log(x, complement=False):
    """``max(log(u), -100)`` with ``u = x`` (or ``u = 1 - x`` with ``complement``), differentiable so that
    BCE's gradient is torch's at the boundaries, never 0 x inf = NaN: where the log is clamped it is
    ``-100 + 1e12 u`` (torch's slope ``(x - t) / 1e-12``), and at ``u = 1`` (the other boundary, where
    torch's formula gives that slope alone) it is 0 with slope 0."""
    u = 1 - x if complement else x
    floor = x >= 1 if complement else x <= _LOG_FLOOR   # log1p(-x) >= -100 for every float x < 1
    top = x == 0 if complement else x == 1
    normal = ~(floor | top)
    safe = where(normal, x, x.detach() * 0 + 0.5)
    val = (-safe).log1p() if complement else safe.log()
    return where(normal, val, where(floor, u * 1e12 - 100.0, u * 0))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                                     reduction="mean", pos_weight=None):
    """BCE on logits in the stable form ``(1 - t) x + (1 + (p - 1) t) softplus(-x)`` (p: pos_weight,
    broadcast against the last axis), times ``weight``."""
    op = "binary_cross_entropy_with_logits"
    _tensor(input, op), _tensor(target, op, "target")
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if target.shape != input.shape:
        raise ShapeError(f"{op}: Target size ({target.shape}) must be the same as input size ({input.shape})")
    sp = _softplus(-input)
    if pos_weight is not None:
        pw = _like(pos_weight, input, op, "pos_weight")
        sp = sp * ((pw - 1) * target + 1)
    loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * _like(weight, input, op)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                                reduction="mean"):
    """Mean over the last (class) axis of -(t log sigmoid(x) + (1 - t) log sigmoid(-x)), then reduced."""
    op = "multilabel_soft_margin_loss"
    _tensor(input, op), _tensor(target, op, "target")
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    loss = target * _softplus(-input) + (1 - target) * _softplus(input)
    if weight is not None:
        loss = loss * _like(weight, input, op)
    C = input.shape[-1] if input.ndim else 1
    loss = loss.sum(dim=input.ndim - 1) / C if input.ndim else loss
    return _reduce(loss, reduction)


# ---- distributions --------------------------------------------------------------------------

def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):  # noqa: A002
    """Pointwise KL term with log-probability ``input``: ``t (log t - input)`` (0 where t = 0), or
    ``exp(t) (t - input)`` with ``log_target``. ``"batchmean"`` divides the sum by ``input.size(0)``;
    ``"mean"`` warns, as in PyTorch, that it divides by every element."""
    op = "kl_div"
    _tensor(input, op), _tensor(target, op, "target")
    if size_average is not None or reduce is not None:
        reduction = _legacy(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    _check_reduction(op, reduction, ("batchmean",))
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = target.xlogy(target) - target * input
    if reduction == "batchmean":
        s = loss.sum()
        return s / input.shape[0] if input.ndim else s
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,  # noqa: A002
                     reduce=None, reduction="mean"):
    """Poisson negative log-likelihood: ``exp(x) - t x`` (``log_input``) or ``x - t log(x + eps)``;
    ``full`` adds Stirling's ``t log t - t + 0.5 log(2 pi t)`` where t > 1."""
    op = "poisson_nll_loss"
    _tensor(input, op), _tensor(target, op, "target")
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        ts = where(big, target, target.detach() * 0 + 2)     # keeps log finite where masked out
        stirling = ts * ts.log() - ts + 0.5 * (ts * (2 * math.pi)).log()
        loss = loss + where(big, stirling, stirling * 0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):  # noqa: A002
    """0.5 (log v + (input - target)^2 / v) (+ 0.5 log 2 pi when ``full``), v = var clamped at ``eps``.

    As in PyTorch the clamp is applied without autograd (var's gradient is the unclamped one's
    path); ``var`` may have input's shape, lack its last axis, or differ in one axis of size 1.
    """
    op = "gaussian_nll_loss"
    _tensor(input, op), _tensor(target, op, "target")
    if isinstance(var, numbers.Real) and not isinstance(var, Tensor):
        if var < 0:
            raise DomainError(f"{op}: var has negative entry/entries")
        var = input.detach() * 0 + float(var)
    else:
        _tensor(var, op, "var")
        if var.numel() and bool((var < 0).any()):
            raise DomainError(f"{op}: var has negative entry/entries")
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif input.ndim == var.ndim and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1:
            pass
        else:
            raise ShapeError(f"{op}: var is of incorrect size")
    _check_reduction(op, reduction)
    v = var + (var.detach().clamp(min=eps) - var.detach())
    d = input - target
    loss = 0.5 * (v.log() + d * d / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ---- embeddings and ranking -----------------------------------------------------------------

def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target = 1, max(0, cos - margin) where target = -1 (0 otherwise);
    cos = <x1, x2> / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12)) over the last axis, as in PyTorch."""
    op = "cosine_embedding_loss"
    for t, w in ((input1, "input1"), (input2, "input2"), (target, "target")):
        _tensor(t, op, w)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if target.ndim > 1 or input1.ndim != target.ndim + 1 or input2.ndim != input1.ndim:
        raise ShapeError(f"{op}: expects 1-D inputs with a 0-D target or 2-D inputs with a 1-D target, "
                         f"got {input1.shape}, {input2.shape} and target {target.shape}")
    dim = target.ndim
    eps = 1e-12
    prod = (input1 * input2).sum(dim=dim)
    m1 = (input1 * input1).sum(dim=dim) + eps
    m2 = (input2 * input2).sum(dim=dim) + eps
    cos = prod / (m1 * m2).sqrt()
    zero = cos * 0
    pos = where(target == 1, 1 - cos, zero)
    neg = where(target == -1, (cos - margin).clamp(min=0), zero)
    return _reduce(pos + neg, reduction)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target (input1 - input2) + margin), broadcast."""
    op = "margin_ranking_loss"
    for t, w in ((input1, "input1"), (input2, "input2"), (target, "target")):
        _tensor(t, op, w)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise ShapeError(f"{op}: All input tensors should have same dimension but got sizes: "
                         f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape}")
    broadcast_shapes(tuple(input1.shape), tuple(input2.shape), tuple(target.shape), op=op)
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction)


def _pairwise_distance(x1, x2, p, eps):
    return (x1 - x2 + eps).norm(p=p, dim=-1)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)), d(x, y) = ||x - y + eps||_p over the last axis; ``swap``
    uses min(d(a, n), d(p, n)) as the negative distance."""
    op = "triplet_margin_loss"
    for t, w in ((anchor, "anchor"), (positive, "positive"), (negative, "negative")):
        _tensor(t, op, w)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if margin <= 0:
        raise DomainError(f"{op}: margin must be greater than 0, got {margin}")
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise ShapeError(f"{op}: The anchor, positive, and negative tensors are expected to have the same "
                         f"number of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, "
                         f"and negative {negative.ndim}D inputs")
    d_pos = _pairwise_distance(anchor, positive, p, eps)
    d_neg = _pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(_pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


# ---- CTC ------------------------------------------------------------------------------------

def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist temporal classification loss (the alpha recursion over time in log space).

    ``log_probs`` ``(T, N, C)`` or ``(T, C)``; ``targets`` ``(N, S)`` padded or 1-D concatenated;
    lengths as tensors, lists or ints. ``"mean"`` divides each loss by its target length (at least 1)
    and averages over the batch; ``zero_infinity`` turns infinite losses (and their gradients) to 0.
    """
    op = "ctc_loss"
    _tensor(log_probs, op, "log_probs")
    _check_reduction(op, reduction)
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise ShapeError(f"{op}: log_probs must be (T, N, C) or (T, C), got {log_probs.shape}")
    T, N, C = lp.shape
    tg = _host_ints(targets, op, "targets").astype(np.int64)
    il = np.atleast_1d(_host_ints(input_lengths, op, "input_lengths") if not isinstance(input_lengths, int)
                       else np.asarray([input_lengths])).astype(np.int64).reshape(-1)
    tl_ = np.atleast_1d(_host_ints(target_lengths, op, "target_lengths") if not isinstance(target_lengths, int)
                        else np.asarray([target_lengths])).astype(np.int64).reshape(-1)
    if unbatched and tg.ndim == 1 and tl_.size == 1:
        tg = tg.reshape(1, -1)
    if il.shape != (N,) or tl_.shape != (N,):
        raise ShapeError(f"{op}: input_lengths and target_lengths must have {N} entries")
    if (il > T).any() or (il < 0).any():
        raise DomainError(f"{op}: input_lengths must lie in [0, {T}]")
    if not 0 <= blank < C:
        raise DomainError(f"{op}: blank must be in label range [0, {C})")
    if (tl_ < 0).any() or (tg.ndim == 2 and (tl_ > tg.shape[1]).any()):
        raise DomainError(f"{op}: target_lengths must lie in [0, {tg.shape[-1]}], got {tl_.tolist()}")
    if tg.ndim == 2:
        labels = [tg[b, :tl_[b]] for b in range(N)]
    else:
        offs = np.concatenate([[0], np.cumsum(tl_)])
        if offs[-1] > tg.size:
            raise ShapeError(f"{op}: targets hold {tg.size} labels, target_lengths sum to {offs[-1]}")
        labels = [tg[offs[b]:offs[b + 1]] for b in range(N)]
    for lab in labels:
        if lab.size and ((lab < 0) | (lab >= C) | (lab == blank)).any():
            raise DomainError(f"{op}: target labels must lie in [0, {C}) and differ from blank={blank}")
    Smax = max(2 * int(tl_.max(initial=0)) + 1, 1)
    # Extended label sequences (blank, l1, blank, l2, ..., blank), padded with blank.
    ext = np.full((N, Smax), blank, dtype=np.int64)
    valid = np.zeros((N, Smax), dtype=bool)
    skip = np.zeros((N, Smax), dtype=bool)
    for b, lab in enumerate(labels):
        L = lab.size
        ext[b, 1:2 * L:2] = lab
        valid[b, :2 * L + 1] = True
        if L > 1:
            s = np.arange(3, 2 * L, 2)
            skip[b, s] = lab[1:] != lab[:-1]
    K = get_kernels(log_probs.device)
    dt = log_probs.dtype
    # A large finite "log 0": logsumexp over unreachable states then stays finite and passes zero
    # gradient (an exact -inf would give 0 * inf = nan in the backward pass).
    NEG = -1e30

    def const(a, dtype=None):
        return Tensor(K.from_host(np.asarray(a, dtype=dtype or dt), dtype or dt))

    idx = const(np.broadcast_to(ext[None], (T, N, Smax)), np.dtype(np.int64))
    em = lp.gather(2, idx)                              # (T, N, Smax): lp[t, b, ext[b, s]]
    mask_invalid = const(np.where(valid, 0.0, NEG))
    mask_skip = const(np.where(skip, 0.0, NEG))
    init = np.full((N, Smax), NEG)
    init[:, 0] = 0.0
    if Smax > 1:
        init[:, 1] = np.where(tl_ > 0, 0.0, NEG)
    alpha = em[0] + const(init) + mask_invalid
    pad1, pad2 = const(np.full((N, 1), NEG)), const(np.full((N, 2), NEG))
    alphas = [alpha]
    for t in range(1, T):
        terms = [alpha]
        if Smax > 1:
            terms.append(_cat_cols(pad1, alpha.narrow(1, 0, Smax - 1)))
        if Smax > 2:
            terms.append(_cat_cols(pad2, alpha.narrow(1, 0, Smax - 2)) + mask_skip)
        alpha = _stack(terms).logsumexp(0) + em[t] + mask_invalid
        alphas.append(alpha)
    flat = _stack(alphas).permute(1, 0, 2).reshape(N, T * Smax)    # row b: alpha[t, b, s] at t * Smax + s
    tsel = np.clip(il - 1, 0, T - 1)
    last = np.stack([2 * tl_, np.maximum(2 * tl_ - 1, 0)], axis=1)
    ends = flat.gather(1, const(tsel[:, None] * Smax + last, np.dtype(np.int64)))
    endmask = np.zeros((N, 2))
    endmask[:, 1] = np.where(tl_ > 0, 0.0, NEG)
    nll = -(ends + const(endmask)).logsumexp(1)
    # A zero-length input: probability 1 for an empty target, 0 otherwise.
    empty = il == 0
    if empty.any():
        nll = where(const(empty, np.dtype(bool)), const(np.where(tl_ == 0, 0.0, 2e30)) + nll.detach() * 0, nll)
    impossible = nll.detach() > 1e29
    if zero_infinity:
        nll = where(impossible, nll.detach() * 0, nll)
    else:
        nll = where(impossible, nll.detach() * 0 + math.inf, nll)
    if unbatched:
        nll = nll.reshape(())
        return nll / float(max(int(tl_[0]), 1)) if reduction == "mean" else nll
    if reduction == "none":
        return nll
    if reduction == "sum":
        return nll.sum()
    return (nll / const(np.maximum(tl_, 1))).mean()


def _cat_cols(a, b):
    return cat([a, b], dim=1)


def _stack(xs):
    return stack(xs, dim=0)


# ---- margin losses --------------------------------------------------------------------------

def _const(a, ref, dtype=None):
    """A constant (no gradient) on ``ref``'s device, of ``ref``'s dtype unless ``dtype`` is given."""
    dtype = np.dtype(dtype or ref.dtype)
    return Tensor(get_kernels(ref.device).from_host(np.asarray(a, dtype=dtype), dtype))


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,  # noqa: A002
                         reduction="mean"):
    """``x`` where target = 1, ``max(0, margin - x)`` where target = -1; other target values add both
    terms, as in PyTorch. Input and target broadcast together."""
    op = "hinge_embedding_loss"
    _tensor(input, op), _tensor(target, op, "target")
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    broadcast_shapes(tuple(input.shape), tuple(target.shape), op=op)
    clamped = where(target != 1, (margin - input).clamp(min=0), 0.0)
    return _reduce(clamped + where(target != -1, input, 0.0), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """log(1 + exp(-target * input)) elementwise (computed as a stable softplus), broadcast and reduced."""
    op = "soft_margin_loss"
    _tensor(input, op), _tensor(target, op, "target")
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    broadcast_shapes(tuple(input.shape), tuple(target.shape), op=op)
    return _reduce(_softplus(-(input * target)), reduction)


def _frames(op, input):  # noqa: A002
    """(nframe, dim) of a multi-class margin loss input: ``()``, ``(C,)`` or ``(N, C)`` with C > 0."""
    if input.ndim > 2 or (input.ndim >= 1 and input.shape[-1] == 0):
        raise ShapeError(f"{op}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                         f"{list(input.shape)}")
    if input.ndim <= 1:
        return 1, max(input.numel(), 1)
    return input.shape[0], input.shape[1]


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,  # noqa: A002
                      reduction="mean"):
    """Multi-class hinge: ``sum_{i != y} w_y max(0, margin - x_y + x_i)^p / C`` per sample.

    input ``()``, ``(C,)`` or ``(N, C)``; target of ``N`` class indices (``()`` or ``(1,)`` for one
    sample; ``"none"`` returns target's shape); ``p`` is 1 or 2; ``weight`` ``(C,)`` per class, not
    differentiated. ``"mean"`` averages over samples.
    """
    op = "multi_margin_loss"
    _tensor(input, op)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if p not in (1, 2):
        raise DomainError(f"{op}: only p == 1 and p == 2 supported, got p={p!r}")
    if weight is not None and (not isinstance(weight, Tensor) or weight.ndim != 1):
        raise ShapeError(f"{op}: weight must be one-dimensional")
    if input.dtype.kind != "f":
        raise DTypeError(f"{op}: input must be a float tensor, got dtype {input.dtype}")
    nframe, dim = _frames(op, input)
    tg = np.asarray(_host_ints(target, op)).astype(np.int64)
    if tg.ndim > 1 or tg.size != nframe:
        raise ShapeError(f"{op}: target tensor should be 1-D with size equal to the number of input samples "
                         f"(batch size). Expected target size [{nframe}], but got {list(tg.shape)}. "
                         f"Input has shape {list(input.shape)}.")
    if tg.size and ((tg < 0) | (tg >= dim)).any():
        raise IndexRangeError(f"{op}: target out of range: values must lie in [0, {dim}), got "
                              f"[{tg.min()}, {tg.max()}]")
    x = input.reshape(nframe, dim)
    flat = tg.reshape(nframe)
    xy = x.gather(1, _const(flat[:, None], input, np.int64))
    z = (margin - xy + x).clamp(min=0)
    if p == 2:
        z = z * z
    mask = np.ones((nframe, dim))
    mask[np.arange(nframe), flat] = 0.0
    if weight is not None:
        if weight.dtype != input.dtype:
            raise DTypeError(f"{op}: weight dtype {weight.dtype} must equal input dtype {input.dtype}")
        if weight.shape != (dim,):
            raise ShapeError(f"{op}: inconsistent weight size, expected {dim} but got {list(weight.shape)}")
        wy = weight.detach().index_select(0, _const(flat, input, np.int64)).unsqueeze(1)
        loss = (z * _const(mask, input) * wy).sum(dim=1) / dim
    else:
        loss = (z * _const(mask, input)).sum(dim=1) / dim
    return _reduce(loss.reshape(tg.shape), reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """Multi-label hinge: ``sum_{j in T} sum_{i not in T} max(0, 1 - (x_j - x_i)) / C`` per sample.

    ``target`` has input's shape and holds class indices; a sample's targets T are those before its
    first -1 (a repeated index counts once per occurrence, as in PyTorch). input ``()``, ``(C,)`` or
    ``(N, C)``; ``"none"`` gives ``(N,)`` or ``()``.
    """
    op = "multilabel_margin_loss"
    _tensor(input, op)
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    if input.dtype.kind != "f":
        raise DTypeError(f"{op}: input must be a float tensor, got dtype {input.dtype}")
    nframe, dim = _frames(op, input)
    tg = np.asarray(_host_ints(target, op)).astype(np.int64)
    ok = (tg.ndim <= 1 and tg.size == dim) if input.ndim <= 1 else tuple(tg.shape) == tuple(input.shape)
    if not ok:
        raise ShapeError(f"{op}: inconsistent target size: {list(tg.shape)} for input of size: "
                         f"{list(input.shape)}")
    if tg.size and ((tg < -1) | (tg >= dim)).any():
        raise IndexRangeError(f"{op}: argument #2 'target' is out of range: values must lie in [-1, {dim}), "
                              f"got [{tg.min()}, {tg.max()}]")
    tg = tg.reshape(nframe, dim)
    count = np.zeros((nframe, dim))
    is_target = np.zeros((nframe, dim))
    for n in range(nframe):
        row = tg[n]
        stop = np.flatnonzero(row < 0)
        row = row[:stop[0]] if stop.size else row
        np.add.at(count[n], row, 1.0)
        is_target[n, row] = 1.0
    pair_w = count[:, :, None] * (1.0 - is_target[:, None, :])     # [n, j, i]: target j against non-target i
    x = input.reshape(nframe, dim)
    hinge = (1.0 - x.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)
    loss = (hinge * _const(pair_w, input)).sum(dim=2).sum(dim=1) / dim
    return _reduce(loss if input.ndim == 2 else loss.reshape(()), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) for any callable distance ``d`` (default
    ``pairwise_distance``); ``swap`` uses min(d(a, n), d(p, n)) as the negative distance."""
    op = "triplet_margin_with_distance_loss"
    for t, w in ((anchor, "anchor"), (positive, "positive"), (negative, "negative")):
        _tensor(t, op, w)
    _check_reduction(op, reduction)
    if margin <= 0:
        raise DomainError(f"{op}: margin must be greater than 0, got {margin}")
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise ShapeError(f"{op}: The anchor, positive, and negative tensors are expected to have the same "
                         f"number of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, "
                         f"and negative {negative.ndim}D inputs")
    if distance_function is None:
        distance_function = pairwise_distance
    d_pos = distance_function(anchor, positive)
    d_neg = distance_function(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(distance_function(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


# The ops of autocast's lists cast their inputs while an autocast region is on (torchlean.amp).
autocast_namespace(globals())
