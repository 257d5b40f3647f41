"""PyTorch's reductions, scans, sorting and counting: ``sum``, ``mean``, ``prod``, ``max`` /
``min`` (with their ``(values, indices)`` named tuples), ``amax``, ``var`` / ``std``,
``logsumexp``, ``cumsum`` / ``cumprod`` / ``cummax``, ``all`` / ``any``, ``sort`` / ``topk`` /
``kthvalue`` / ``median`` / ``mode``, ``unique``, ``bincount``, ``histc``, ``searchsorted``, ...

Values are formulas over recorded ops, so gradients come from their parts. Ops that select
entries are an index op without gradient (``argmax``, ``argsort``, ``cumargmax``) followed by the
differentiable ``gather`` along the dim: the cotangent reaches the selected entry. ``max(dim)`` /
``min(dim)`` take their values from ``reduce_max`` / ``reduce_min``, whose cotangent goes to the
first extremal entry, the index ``argmax`` / ``argmin`` report (torch's CPU convention).
``amax`` / ``amin`` and the full ``max()`` / ``min()`` split the gradient evenly among tied
entries, as torch does. Sorting is always stable (``stable=False`` gives the stable order too).

Dtypes follow torch: ``sum`` / ``prod`` / ``cumsum`` / ``cumprod`` of integers and bools are
int64 (or ``dtype=``); ``mean``, ``var``, ``std``, ``nanmean`` and ``histc`` refuse integers
(:class:`DTypeError` naming the op); indices are int64. ``unique``, ``bincount``, ``histc``,
``searchsorted`` and ``bucketize`` have no gradient (integer results, or torch gives none).

    >>> import torchlean as tl
    >>> x = tl.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    >>> _, pred = x.max(1)
    >>> pred.tolist()
    [1, 0]
    >>> x.sort(dim=1, descending=True).values.tolist()
    [[5.0, 2.0, 1.0], [7.0, 7.0, 0.0]]
    >>> tl.cumsum(tl.tensor([1, 2, 3]), 0).tolist()
    [1, 3, 6]
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple
from types import SimpleNamespace

import numpy as np

from ..autograd import is_grad_enabled, no_grad, record
from ..dtypes import as_dtype, bool_, get_default_dtype, int64, result_type
from ..errors import (
    DomainError,
    DTypeError,
    IndexRangeError,
    ShapeError,
    TorchLeanError,
)
from ..kernels import get_kernels
from ..shape import norm_axes, norm_axis
from ..tensor import Tensor, _binary
from .table import export

__all__ = ["return_types"]


# ---- named tuples of results (torch.return_types) ---------------------------------------------

def _result_type(name, fields=("values", "indices")):
    cls = namedtuple(name, fields)
    cls.__module__ = "torchlean.return_types"
    return cls


#: ``torch.return_types``: tuples with named fields (``out.values``, ``out.indices``), unpacked
#: like tuples (``_, pred = x.max(1)``).
return_types = SimpleNamespace(**{n: _result_type(n) for n in (
    "max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax", "cummin")})
return_types.aminmax = _result_type("aminmax", ("min", "max"))


# ---- helpers --------------------------------------------------------------------------------

def _tensor(op, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise DTypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


def _axes(op, x: Tensor, dim) -> tuple:
    """Sorted non-negative axes named by ``dim`` (int, tuple or list; None or () for all)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(x.ndim))
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise ShapeError(f"{op}: dim must be an int or a tuple of ints, got {dim!r}")
    return norm_axes(tuple(int(d) for d in dims), builtins.max(x.ndim, 1), op) if x.ndim else ()


def _axis(op, x: Tensor, dim) -> int:
    """One non-negative axis (a 0-d tensor answers to 0 and -1, as in torch)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise ShapeError(f"{op}: dim must be an int, got {dim!r}")
    return norm_axis(int(dim), builtins.max(x.ndim, 1), op)


def _int_result(x: Tensor, dtype) -> Tensor:
    """``x`` cast for a sum-like op: to ``dtype`` if given, integers and bools to int64 (torch)."""
    if dtype is not None:
        return x.to(dtype=as_dtype(dtype))
    return x if x.dtype.kind == "f" else x.to(dtype=int64)


def _float_only(op, x: Tensor, dtype=None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype=as_dtype(dtype))
    if x.dtype.kind != "f":
        raise DTypeError(f"{op}(): could not infer output dtype. Input dtype must be a floating point dtype, "
                         f"got {x.dtype.name}")
    return x


def _host(t: Tensor) -> np.ndarray:
    """Host copy of an integer tensor's values (on CUDA kept per buffer: ``host_ints``)."""
    if t.device == "cpu":
        return np.asarray(t._value)
    return get_kernels(t.device).host_ints(t._value)


def _const(a, like: Tensor, dtype=None) -> Tensor:
    """Host array ``a`` as a constant tensor on ``like``'s device (``dtype``: its own by default)."""
    a = np.asarray(a)
    v = get_kernels(like.device).from_host(np.ascontiguousarray(a), a.dtype if dtype is None else np.dtype(dtype))
    return Tensor(v if v.shape == a.shape else v.reshape(a.shape))


def _gather(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """``x`` gathered along ``axis`` at int64 ``index`` (differentiable in x)."""
    if x.ndim == 0:
        return record("gather", (x.reshape(1),), {"axis": 0, "index": _host(index).reshape(1)}).reshape(())
    return record("gather", (x,), {"axis": axis, "index": _host(index)})


def _squeeze_axes(t: Tensor, axes, keepdim) -> Tensor:
    if keepdim or not axes:
        return t
    return t.reshape(tuple(d for i, d in enumerate(t.shape) if i not in axes))


def _needs_grad(x: Tensor) -> bool:
    return x.requires_grad and is_grad_enabled()


def _isnan(x: Tensor) -> Tensor:
    return x != x  # noqa: PLR0124 - NaN is the one value unequal to itself


def _notnan(x: Tensor) -> Tensor:
    return x == x  # noqa: PLR0124


def _where(cond: Tensor, a: Tensor, b) -> Tensor:
    """``a`` where ``cond`` else the number ``b`` (recorded: the gradient flows to ``a``)."""
    return record("where", (a, _const(np.asarray(b, dtype=a.dtype.np), a)), {"cond": cond._value})


# ---- sum, mean, prod and their NaN-ignoring forms ------------------------------------------------

@export()
def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` (int or tuple; all when None); integers and bools sum to int64."""
    if dtype is None and type(input) is Tensor and input._value.dtype.kind == "f" and input._value.ndim:
        if dim is None and not keepdim:  # the common cases first: no axis checks to repeat
            return record("sum", (input,), {})
        if type(dim) is int:
            return record("reduce_sum", (input,), {"axis": dim, "keepdim": bool(keepdim)})
    x = _int_result(_tensor("sum", input), dtype)
    axes = _axes("sum", x, dim)
    if not axes:
        return record("sum", (x,), {})
    if len(axes) == x.ndim and not keepdim:
        return record("sum", (x,), {})
    return record("reduce_sum", (x,), {"axis": axes, "keepdim": bool(keepdim)})


@export()
def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over ``dim``; integer input raises DTypeError (torch); over nothing: NaN."""
    if dtype is None and type(input) is Tensor and input._value.dtype.kind == "f" and input._value.ndim and \
            type(dim) is int:  # the common case first
        return record("reduce_mean", (input,), {"axis": dim, "keepdim": bool(keepdim)})
    x = _float_only("mean", _tensor("mean", input), dtype)
    axes = _axes("mean", x, dim)
    if not axes:
        return record("sum", (x,), {})
    return record("reduce_mean", (x,), {"axis": axes, "keepdim": bool(keepdim)})


@export()
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum treating NaN as zero."""
    x = _tensor("nansum", input)
    if x.dtype.kind == "f":
        x = _where(_notnan(x), x, 0)
    return sum(x, dim, keepdim, dtype=dtype)


@export()
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean of the non-NaN entries (NaN where there are none)."""
    x = _float_only("nanmean", _tensor("nanmean", input), dtype)
    keep = _notnan(x)
    total = sum(_where(keep, x, 0), dim, keepdim)
    count = sum(keep, dim, keepdim).to(dtype=x.dtype)
    return total / count


@export()
def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product over one ``dim`` (all when None): the last entry of ``cumprod``, so the gradient is
    exact where the input has zeros; integers and bools multiply in int64."""
    x = _int_result(_tensor("prod", input), dtype)
    if dim is None:
        flat = x.reshape(-1)
        if flat.shape[0] == 0:
            return sum(flat) * 0 + 1
        return record("cumprod", (flat,), {"axis": 0})[-1]
    if isinstance(dim, (tuple, list)):
        raise ShapeError(f"prod: dim must be a single int, got {tuple(dim)!r}")
    a = _axis("prod", x, dim)
    if x.ndim == 0:
        return x * 1
    if x.shape[a] == 0:
        return sum(x, a, keepdim) * 0 + 1
    key = (slice(None),) * a + (slice(-1, None) if keepdim else -1,)
    return record("cumprod", (x,), {"axis": a})[key]


# ---- max / min, amax / amin, argmax / argmin --------------------------------------------------

def _extreme(x: Tensor, axes: tuple, is_max: bool) -> Tensor:
    """The max (min) over ``axes``, kept as length 1, with no gradient."""
    op = "reduce_max" if is_max else "reduce_min"
    with no_grad():
        m = x
        for a in reversed(axes):
            m = record(op, (m,), {"axis": a, "keepdim": True})
    return m


def _amax(op, x: Tensor, dim, keepdim, is_max) -> Tensor:
    """Max (min) over ``dim`` whose gradient is split evenly among the tied entries (torch's
    amax): the value is the exact extremum plus a sum of exact zeros that carries the gradient."""
    axes = _axes(op, x, dim)
    for a in axes:
        if x.shape[a] == 0:
            raise ShapeError(f"{op}(): Expected reduction dim {a} to have non-zero size (input shape {x.shape})")
    if x.ndim == 0:
        return x * 1 if x.dtype.kind == "f" else x
    m = _extreme(x, axes, is_max)
    if _needs_grad(x):
        with no_grad():
            tie = x == m
            w = tie.to(dtype=x.dtype) / sum(tie, axes, True).to(dtype=x.dtype)
        # z - z.detach() is exactly 0 with gradient 1; infinite entries are left out (inf - inf).
        z = _where(x.abs() != math.inf, x, 0)
        m = m + sum((z - z.detach()) * w, axes, True)
    return _squeeze_axes(m, axes, keepdim)


@export()
def amax(input, dim=(), keepdim=False):
    """Max over ``dim`` (int or tuple; all by default); ties share the gradient evenly."""
    return _amax("amax", _tensor("amax", input), dim, keepdim, True)


@export()
def amin(input, dim=(), keepdim=False):
    """Min over ``dim``; ties share the gradient evenly."""
    return _amax("amin", _tensor("amin", input), dim, keepdim, False)


@export()
def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)`` over ``dim`` (all when None) as ``return_types.aminmax``."""
    x = _tensor("aminmax", input)
    d = () if dim is None else dim
    return return_types.aminmax(_amax("aminmax", x, d, keepdim, False), _amax("aminmax", x, d, keepdim, True))


def _max_min(op, input, dim, keepdim, is_max, other=None):
    x = _tensor(op, input)
    if isinstance(dim, Tensor) or other is not None:
        y = dim if isinstance(dim, Tensor) else other
        return _binary("maximum" if is_max else "minimum", x, y)
    if dim is None:
        if x.numel() == 0:
            raise ShapeError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0 "
                             f"(input shape {x.shape}). Specify the reduction dim with the 'dim' argument.")
        return _amax(op, x, None, False, is_max)
    a = _axis(op, x, dim)
    if x.ndim and x.shape[a] == 0:
        raise ShapeError(f"{op}(): Expected reduction dim {a} to have non-zero size (input shape {x.shape})")
    values = record("reduce_max" if is_max else "reduce_min", (x,), {"axis": a, "keepdim": bool(keepdim)})
    indices = record("argmax" if is_max else "argmin", (x,), {"axis": a, "keepdim": bool(keepdim)})
    return getattr(return_types, op)(values, indices)


@export()
def max(input, dim=None, keepdim=False, *, other=None):
    """``max(x)``: 0-d max (ties share the gradient); ``max(x, dim)``: ``(values, indices)``, the
    first maximal entry; ``max(x, other)``: elementwise maximum."""
    return _max_min("max", input, dim, keepdim, True, other)


@export()
def min(input, dim=None, keepdim=False, *, other=None):
    """``min(x)``, ``min(x, dim) -> (values, indices)`` or ``min(x, other)``, as :func:`max`."""
    return _max_min("min", input, dim, keepdim, False, other)


@export()
def argmax(input, dim=None, keepdim=False):
    """int64 index of the first maximal entry along ``dim`` (of the flattened input when None)."""
    x = _tensor("argmax", input)
    return record("argmax", (x,), {"axis": None if dim is None else _axis("argmax", x, dim), "keepdim": bool(keepdim)})


@export()
def argmin(input, dim=None, keepdim=False):
    """int64 index of the first minimal entry along ``dim`` (of the flattened input when None)."""
    x = _tensor("argmin", input)
    return record("argmin", (x,), {"axis": None if dim is None else _axis("argmin", x, dim), "keepdim": bool(keepdim)})


# ---- variance, standard deviation, logsumexp --------------------------------------------------

def _correction(op, unbiased, correction) -> float:
    if unbiased is not None and correction is not None:
        raise TorchLeanError(f"{op}: pass only one of unbiased and correction")
    if correction is not None:
        return float(correction)
    return 1.0 if unbiased is None or unbiased else 0.0


def _var(op, input, dim, unbiased, keepdim, correction, with_mean=False):
    x = _float_only(op, _tensor(op, input))
    if isinstance(dim, bool):  # var(x, False): the legacy positional unbiased
        dim, unbiased = None, dim
    axes = _axes(op, x, dim)
    c = _correction(op, unbiased, correction)
    n = 1
    for a in axes:
        n *= x.shape[a]
    mu = record("reduce_mean", (x,), {"axis": axes, "keepdim": True}) if axes else x * 1
    d = x - mu
    ss = record("reduce_sum", (d * d,), {"axis": axes, "keepdim": True}) if axes else d * d
    # n - correction <= 0 gives inf (or NaN for 0 / 0), as torch does.
    v = ss * (1.0 / (n - c)) if n - c > 0 else ss * math.inf
    v = _squeeze_axes(v, axes, keepdim)
    return (v, _squeeze_axes(mu, axes, keepdim)) if with_mean else v


def _var_args(args, kwargs):
    """(dim, unbiased, keepdim, correction) from torch's overloads: ``var(dim, unbiased, keepdim)``,
    ``var(dim, keepdim=, correction=)``, ``var(unbiased)``."""
    dim = kwargs.pop("dim", None)
    unbiased = kwargs.pop("unbiased", None)
    keepdim = kwargs.pop("keepdim", False)
    correction = kwargs.pop("correction", None)
    if kwargs:
        raise TorchLeanError(f"unexpected keyword arguments {sorted(kwargs)}")
    args = list(args)
    if args:
        dim = args.pop(0)
    if args:
        unbiased = args.pop(0)
    if args:
        keepdim = args.pop(0)
    if args:
        raise TorchLeanError("too many positional arguments")
    return dim, unbiased, keepdim, correction


@export()
def var(input, *args, **kwargs):
    """Variance over ``dim`` with ``correction`` (default 1, Bessel's; ``unbiased=False`` is 0)."""
    dim, unbiased, keepdim, correction = _var_args(args, kwargs)
    return _var("var", input, dim, unbiased, keepdim, correction)


@export()
def std(input, *args, **kwargs):
    """Standard deviation: ``sqrt(var)`` (the gradient at a zero variance is 0, by sqrt's convention)."""
    dim, unbiased, keepdim, correction = _var_args(args, kwargs)
    return _var("std", input, dim, unbiased, keepdim, correction).sqrt()


@export(method=False)
def var_mean(input, *args, **kwargs):
    """``(var, mean)`` over the same ``dim``."""
    dim, unbiased, keepdim, correction = _var_args(args, kwargs)
    return _var("var_mean", input, dim, unbiased, keepdim, correction, with_mean=True)


@export(method=False)
def std_mean(input, *args, **kwargs):
    """``(std, mean)`` over the same ``dim``."""
    dim, unbiased, keepdim, correction = _var_args(args, kwargs)
    v, mu = _var("std_mean", input, dim, unbiased, keepdim, correction, with_mean=True)
    return v.sqrt(), mu


@export()
def logsumexp(input, dim=None, keepdim=False):
    """``log(sum(exp(x)))`` over ``dim``, shifted by the (detached) maximum; integers give floats.
    Over nothing: -inf."""
    x = _tensor("logsumexp", input)
    if x.dtype.kind != "f":
        x = x.to(dtype=get_default_dtype())
    axes = _axes("logsumexp", x, dim)
    if not axes:
        return x * 1
    if builtins.any(x.shape[a] == 0 for a in axes):
        m = None
    else:
        m = _extreme(x, axes, True)
        with no_grad():
            m = _where(m.abs() != math.inf, m, 0)  # all -inf (or an inf): no shift, as torch
    s = record("reduce_sum", ((x - m if m is not None else x).exp(),), {"axis": axes, "keepdim": True})
    out = s.log() if m is None else s.log() + m
    return _squeeze_axes(out, axes, keepdim)


# ---- scans ------------------------------------------------------------------------------------

@export()
def cumsum(input, dim, *, dtype=None):
    """Running sums along ``dim``; integers and bools in int64 (or ``dtype``)."""
    x = _int_result(_tensor("cumsum", input), dtype)
    return record("cumsum", (x,), {"axis": _axis("cumsum", x, dim)})


@export()
def cumprod(input, dim, *, dtype=None):
    """Running products along ``dim``; the gradient is exact where the input has zeros."""
    x = _int_result(_tensor("cumprod", input), dtype)
    return record("cumprod", (x,), {"axis": _axis("cumprod", x, dim)})


def _cum_extreme(op, input, dim, is_max):
    x = _tensor(op, input)
    a = _axis(op, x, dim)
    idx = record("cumargmax" if is_max else "cumargmin", (x,), {"axis": a})
    return getattr(return_types, op)(_gather(x, a, idx), idx)


@export()
def cummax(input, dim):
    """``(values, indices)`` of the running maximum along ``dim`` (the last of tied entries; NaN
    propagates); the gradient reaches the indexed entries."""
    return _cum_extreme("cummax", input, dim, True)


@export()
def cummin(input, dim):
    """``(values, indices)`` of the running minimum along ``dim``, as :func:`cummax`."""
    return _cum_extreme("cummin", input, dim, False)


# ---- all, any, count_nonzero ------------------------------------------------------------------

def _nonzero(x: Tensor) -> Tensor:
    return x if x.dtype == bool_ else x != 0


@export()
def all(input, dim=None, keepdim=False):
    """True where every entry along ``dim`` is nonzero (NaN counts as nonzero); True over nothing."""
    x = _tensor("all", input)
    return sum(x == (False if x.dtype == bool_ else 0), dim, keepdim) == 0


@export()
def any(input, dim=None, keepdim=False):
    """True where some entry along ``dim`` is nonzero; False over nothing."""
    x = _tensor("any", input)
    return sum(_nonzero(x), dim, keepdim) > 0


@export()
def count_nonzero(input, dim=None):
    """int64 count of nonzero entries over ``dim`` (int or tuple; all when None)."""
    x = _tensor("count_nonzero", input)
    return sum(_nonzero(x), dim)


# ---- sorting and selection --------------------------------------------------------------------

def _argsort(x: Tensor, a: int, descending: bool) -> Tensor:
    return record("argsort", (x,), {"axis": a, "descending": bool(descending)})


@export()
def argsort(input, dim=-1, descending=False, *, stable=False):
    """int64 indices that sort ``dim``; always stable (tied entries keep their order)."""
    x = _tensor("argsort", input)
    return _argsort(x, _axis("argsort", x, dim), descending)


@export()
def sort(input, dim=-1, descending=False, *, stable=False):
    """``(values, indices)`` sorted along ``dim``, stably; NaN sorts as the largest value."""
    x = _tensor("sort", input)
    a = _axis("sort", x, dim)
    idx = _argsort(x, a, descending)
    return return_types.sort(_gather(x, a, idx), idx)


@export()
def msort(input):
    """``sort(input, dim=0).values``."""
    return sort(input, 0).values


def _first_k(t: Tensor, a: int, k: int) -> Tensor:
    return t[(slice(None),) * a + (slice(0, k),)] if t.ndim else t


@export()
def topk(input, k, dim=-1, largest=True, sorted=True):
    """``(values, indices)`` of the ``k`` largest (smallest) entries along ``dim``, sorted; among
    tied entries the earlier index comes first."""
    x = _tensor("topk", input)
    a = _axis("topk", x, dim)
    n = x.shape[a] if x.ndim else 1
    k = int(k)
    if not 0 <= k <= n:
        raise IndexRangeError(f"topk: selected index k={k} out of range for dimension {dim} of size {n}")
    idx = _first_k(_argsort(x, a, largest), a, k)
    return return_types.topk(_gather(x, a, idx), idx)


def _select_rank(op, x: Tensor, a: int, pos: np.ndarray, keepdim: bool, result):
    """Entries of sorted rank ``pos`` (host ints of the reduced shape, kept as length 1) along
    ``a``: ``(values, indices)`` with the gradient to the selected entries."""
    if x.ndim == 0:
        idx = Tensor(get_kernels(x.device).zeros((), np.int64))
        return result(x * 1 if x.dtype.kind == "f" else x, idx)
    order = _argsort(x, a, False)
    idx = record("gather", (order,), {"axis": a, "index": pos.astype(np.int64)})
    values = _gather(x, a, idx)
    if not keepdim:
        values, idx = values.squeeze(a), idx.squeeze(a)
    return result(values, idx)


def _keep_shape(x: Tensor, a: int) -> tuple:
    return x.shape[:a] + (1,) + x.shape[a + 1:]


def _nan_counts(x: Tensor, a: int) -> np.ndarray:
    """Host int64 count of NaNs along ``a`` (kept as length 1)."""
    if x.dtype.kind != "f":
        return np.zeros(_keep_shape(x, a), np.int64)
    with no_grad():
        return _host(sum(_isnan(x), a, True))


@export()
def kthvalue(input, k, dim=-1, keepdim=False):
    """``(values, indices)`` of the k-th smallest entry (1-based) along ``dim`` (stable order
    among ties; NaN is the largest)."""
    x = _tensor("kthvalue", input)
    a = _axis("kthvalue", x, dim)
    n = x.shape[a] if x.ndim else 1
    k = int(k)
    if not 1 <= k <= n:
        raise IndexRangeError(f"kthvalue(): selected number k={k} out of range for dimension {dim} of size {n}")
    pos = np.full(_keep_shape(x, a) if x.ndim else (), k - 1, dtype=np.int64)
    return _select_rank("kthvalue", x, a, pos, keepdim, return_types.kthvalue)


def _median(op, input, dim, keepdim, ignore_nan):
    x = _tensor(op, input)
    if dim is None:
        flat = x.reshape(-1)
        if flat.shape[0] == 0:
            if x.dtype.kind != "f":
                raise ShapeError(f"{op}(): input is empty (shape {x.shape})")
            return Tensor(get_kernels(x.device).full((), math.nan, x.dtype.np))
        return _median(op, flat, 0, False, ignore_nan).values
    a = _axis(op, x, dim)
    n = x.shape[a] if x.ndim else 1
    if n == 0:
        raise ShapeError(f"{op}(): Expected reduction dim {a} to have non-zero size (input shape {x.shape})")
    nans = _nan_counts(x, a) if x.ndim else np.zeros((), np.int64)
    if ignore_nan:
        # The lower median of the non-NaN entries; all NaN: the first NaN.
        pos = np.maximum((n - nans - 1) // 2, 0)
    else:
        # Any NaN makes the median NaN: the first NaN, which a stable sort puts at rank n - nans.
        pos = np.where(nans > 0, n - nans, (n - 1) // 2)
    return _select_rank(op, x, a, np.asarray(pos, dtype=np.int64), keepdim, getattr(return_types, op))


@export()
def median(input, dim=None, keepdim=False):
    """Lower median: ``median(x)`` a 0-d tensor, ``median(x, dim)`` ``(values, indices)``; NaN if
    the entries include a NaN."""
    return _median("median", input, dim, keepdim, False)


@export()
def nanmedian(input, dim=None, keepdim=False):
    """Lower median of the non-NaN entries, as :func:`median`."""
    return _median("nanmedian", input, dim, keepdim, True)


@export()
def mode(input, dim=-1, keepdim=False):
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest among equally
    frequent ones) and the index of its last occurrence, as torch on the CPU."""
    x = _tensor("mode", input)
    a = _axis("mode", x, dim)
    if x.ndim == 0:
        return return_types.mode(x * 1 if x.dtype.kind == "f" else x, Tensor(get_kernels(x.device).zeros((), np.int64)))
    n = x.shape[a]
    if n == 0:
        raise ShapeError(f"mode(): Expected reduction dim {a} to have non-zero size (input shape {x.shape})")
    rows = np.moveaxis(x.numpy(), a, -1).reshape(-1, n)
    pick = np.empty(rows.shape[0], dtype=np.int64)
    for r, row in enumerate(rows):
        _, inverse, counts = np.unique(row, return_inverse=True, return_counts=True)
        best = int(np.argmax(counts))  # the first maximal count: the smallest value
        pick[r] = int(np.nonzero(inverse.reshape(-1) == best)[0][-1])
    pos = np.moveaxis(pick.reshape(x.shape[:a] + x.shape[a + 1:] + (1,)), -1, a)
    idx = _const(pos, x)
    values = _gather(x, a, idx)
    if not keepdim:
        values, idx = values.squeeze(a), idx.squeeze(a)
    return return_types.mode(values, idx)


# ---- counting: integer results and data-dependent shapes (no gradient) -----------------------------

@export()
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """Distinct entries (``dim=None``, sorted; each NaN is distinct, as in torch) or distinct
    slices along ``dim``, with the inverse indices and counts when asked."""
    x = _tensor("unique", input)
    a = None if dim is None else _axis("unique", x, dim)
    if a is not None and x.ndim == 0:
        raise ShapeError(f"unique: dim {dim} needs a tensor with at least one axis")
    vals, inverse, counts = get_kernels(x.device).unique(x._value, a)
    out = [Tensor(vals)]
    if return_inverse:
        out.append(Tensor(inverse))
    if return_counts:
        out.append(Tensor(counts))
    return out[0] if len(out) == 1 else tuple(out)


@export()
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse runs of equal consecutive entries (of the flattened input when ``dim`` is None)."""
    x = _tensor("unique_consecutive", input)
    h = x.numpy()
    if dim is None:
        flat = h.reshape(-1)
        new = np.ones(flat.shape, bool)
        new[1:] = flat[1:] != flat[:-1]
        vals, inverse = flat[new], (np.cumsum(new) - 1).reshape(h.shape)
    else:
        a = _axis("unique_consecutive", x, dim)
        m = np.moveaxis(h, a, 0).reshape(h.shape[a], -1)
        new = np.ones(m.shape[0], bool)
        new[1:] = (m[1:] != m[:-1]).any(axis=1)
        vals, inverse = np.compress(new, h, axis=a), np.cumsum(new) - 1
    counts = np.diff(np.append(np.nonzero(new)[0], new.size))
    out = [_const(vals, x)]
    if return_inverse:
        out.append(_const(inverse.astype(np.int64), x))
    if return_counts:
        out.append(_const(counts.astype(np.int64), x))
    return out[0] if len(out) == 1 else tuple(out)


@export()
def bincount(input, weights=None, minlength=0):
    """Count of each value of a non-negative 1-D integer tensor (sums of ``weights`` when given),
    of length ``max(input) + 1`` or ``minlength``."""
    x = _tensor("bincount", input)
    if x.dtype.kind not in "iub" or x.ndim != 1:
        raise DTypeError(f"bincount: only supports 1-d non-negative integral inputs, got dtype {x.dtype.name} "
                         f"and shape {x.shape}")
    if int(minlength) < 0:
        raise DomainError(f"bincount: minlength should be >= 0, got {minlength}")
    h = _host(x) if x.dtype.kind != "b" else x.numpy().astype(np.int64)
    if h.size and int(h.min()) < 0:
        raise DomainError(f"bincount: only supports non-negative inputs, got the value {int(h.min())}")
    K = get_kernels(x.device)
    w = None
    if weights is not None:
        weights = _tensor("bincount", weights)
        if weights.shape != x.shape:
            raise ShapeError(f"bincount: weights of shape {weights.shape} must have the input's shape {x.shape}")
        if weights.dtype.kind != "f":
            weights = weights.to(dtype=np.float64)
        w = weights._value
    xv = x._value if x.dtype == int64 else K.astype(x._value, np.int64)
    return Tensor(K.bincount(xv, w, int(minlength)))


@export()
def histc(input, bins=100, min=0, max=0):
    """Histogram of ``bins`` equal bins over ``[min, max]`` (the data's range when both are 0),
    as floats of the input's dtype; entries outside are not counted."""
    x = _tensor("histc", input)
    if x.dtype.kind != "f":
        raise DTypeError(f"histc: not implemented for dtype {x.dtype.name} (expects a floating-point tensor)")
    bins = int(bins)
    if bins <= 0:
        raise DomainError(f"histc: bins must be > 0, got {bins}")
    lo, hi = float(min), float(max)
    if lo == hi and x.numel():
        with no_grad():
            lo, hi = float(amin(x).item()), float(amax(x).item())
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise DomainError(f"histc: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise DomainError(f"histc: max must be larger than min, got min={lo}, max={hi}")
    return Tensor(get_kernels(x.device).histc(x._value, bins, lo, hi))


@export(method=False)
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Insertion indices of ``input`` into the sorted last axis of ``sorted_sequence`` (1-D: one
    sequence for all; else one per leading index); ``right`` / ``side='right'``: after equal
    entries. ``input`` may be a number (a 0-d result)."""
    seq = _tensor("searchsorted", sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise DomainError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise DomainError("searchsorted: side='left' and right=True contradict each other")
        right = side == "right"
    vals = input if isinstance(input, Tensor) else _const(np.asarray(input, dtype=result_type(seq, input).np), seq)
    if seq.ndim == 0:
        raise ShapeError("searchsorted: sorted_sequence must have at least one axis, got a 0-d tensor")
    if seq.ndim > 1 and (vals.ndim != seq.ndim or vals.shape[:-1] != seq.shape[:-1]):
        raise ShapeError(f"searchsorted: boundaries {seq.shape} and input {vals.shape} must have the same leading "
                         f"axes (or 1-D boundaries)")
    if sorter is not None:
        sorter = _tensor("searchsorted", sorter)
        if sorter.shape != seq.shape:
            raise ShapeError(f"searchsorted: sorter of shape {sorter.shape} must have sorted_sequence's shape "
                             f"{seq.shape}")
        seq = record("gather", (seq,), {"axis": seq.ndim - 1, "index": _host(sorter)})
    dt = result_type(seq, vals)
    K = get_kernels(seq.device)
    sv = seq._value if seq.dtype == dt else K.astype(seq._value, dt.np)
    vv = vals._value if vals.dtype == dt else K.astype(vals._value, dt.np)
    out = K.searchsorted(K.ascontiguous(sv), vv if vals.ndim else vv.reshape(1), bool(right))
    if not vals.ndim:
        out = out.reshape(())
    if out_int32:
        out = K.astype(out, np.int32)
    return Tensor(out)


@export(method=False)
def bucketize(input, boundaries, *, out_int32=False, right=False):
    """Bucket of each entry among the 1-D sorted ``boundaries``: ``searchsorted(boundaries, input,
    right=right)``."""
    b = _tensor("bucketize", boundaries)
    if b.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got shape {b.shape}")
    return searchsorted(b, input, out_int32=out_int32, right=right)


@export()
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """n-th forward difference along ``dim`` (``x[i+1] - x[i]``; bool: ``!=``), with optional
    ``prepend`` / ``append`` concatenated first."""
    x = _tensor("diff", input)
    if x.ndim == 0:
        raise ShapeError("diff: expects input to be at least one-dimensional")
    a = _axis("diff", x, dim)

    def part(p):
        return p if isinstance(p, Tensor) else _const(np.broadcast_to(np.asarray(p, x.dtype.np), _keep_shape(x, a)), x)
    parts = ([part(prepend)] if prepend is not None else []) + [x] + ([part(append)] if append is not None else [])
    if len(parts) > 1:
        x = record("concat", tuple(parts), {"axis": a})
    for _ in range(int(n)):
        if x.shape[a] == 0:
            break
        hi = x[(slice(None),) * a + (slice(1, None),)]
        lo = x[(slice(None),) * a + (slice(None, -1),)]
        x = (hi != lo) if x.dtype == bool_ else hi - lo
    return x


# ---- torch.norm ----------------------------------------------------------------------------------

@export()
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):  # noqa: A002
    """torch.norm: the vector ``p``-norm over ``dim`` (all entries when None); ``"fro"`` is the 2-norm
    of the entries. The gradient at 0 is 0 (sqrt's convention); inf norms split ties evenly. The
    nuclear norm is ``torchlean.linalg.matrix_norm(x, "nuc")``."""
    x = input if dtype is None else input.to(dtype=dtype)
    if x.dtype.kind != "f":
        raise DTypeError(f"norm: expects a floating-point tensor, got {x.dtype.name}")
    if p == "nuc":
        raise DomainError("norm: p='nuc' is torchlean.linalg.matrix_norm(x, 'nuc')")
    if p is None or p == "fro":
        p = 2
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise DomainError(f"norm: p must be a number, 'fro' or 'nuc', got {p!r}")
    a = x.abs()
    if p == math.inf:
        return amax(a, () if dim is None else dim, keepdim)
    if p == -math.inf:
        return amin(a, () if dim is None else dim, keepdim)
    if p == 0:
        return sum((x != 0).to(dtype=x.dtype), dim, keepdim)
    if p == 1:
        return sum(a, dim, keepdim)
    if p == 2:
        return sum(x * x, dim, keepdim).sqrt()
    return sum(a ** p, dim, keepdim) ** (1.0 / p)
