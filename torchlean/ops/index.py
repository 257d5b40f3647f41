"""PyTorch's indexing: ``Tensor.__getitem__`` with every index form, the out-of-place writes that
``__setitem__`` and the in-place ops build on (:func:`setitem_value`, ``index_put``), and the
gather / scatter / mask functions.

Index values are read on the host (as torch reads a bool mask's count), checked as torch checks
them (an out-of-range index raises :class:`IndexRangeError` naming the op, the index and the
size; negative indices count from the end where torch allows them), and handed to the recorded
ops ``getitem``, ``index_select``, ``gather``, ``scatter_add``, ``setitem``, ``put`` and
``where``, so every result is differentiable through their rules.

Advanced indexing follows torch: ints (and 0-d integer tensors) select first; the index tensors
(a k-axis bool mask counts as k of them, its ``nonzero``) broadcast together, and their axes
replace the indexed axes in place when those are adjacent, else go first. Repeated places in a
non-accumulating write: the last index in row-major order wins (torch leaves it unspecified).

    >>> import torchlean as tl
    >>> x = tl.arange(12.0).reshape(3, 4)
    >>> x[[0, 2], 1:3].tolist()
    [[1.0, 2.0], [9.0, 10.0]]
    >>> x[x > 9].tolist()
    [10.0, 11.0]
"""

from __future__ import annotations

import math
from numbers import Number

import numpy as np

from ..autograd import no_grad, record
from ..dtypes import as_dtype, get_default_dtype, int64, result_type
from ..errors import DTypeError, IndexRangeError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..shape import norm_axis
from ..spec.shape import normalize_index
from ..tensor import Tensor
from .table import export

__all__ = ["setitem_value"]


# ---- host views of index values -------------------------------------------------------------

def _host(t: Tensor) -> np.ndarray:
    """The values of ``t`` as a host array (no copy on the CPU)."""
    if t.device == "cpu":
        return np.asarray(t._value)
    K = get_kernels(t.device)
    return K.host_ints(t._value) if t._value.dtype.kind in "iu" else K.to_host(t._value)


def _int_array(op: str, idx, what="index") -> np.ndarray:
    """Host int64 array of an integer index (tensor, array or sequence); IndexRangeError otherwise."""
    a = _host(idx) if isinstance(idx, Tensor) else np.asarray(idx)
    if a.dtype.kind == "b" or (a.dtype.kind not in "iu" and a.size):
        raise IndexRangeError(f"{op}: {what} must be an integer tensor (long or int), got dtype "
                              f"{a.dtype if a.dtype.kind != 'b' else 'bool'}")
    return a.astype(np.int64, copy=False)


def _wrap(op: str, a: np.ndarray, n: int, dim, negative=True) -> np.ndarray:
    """``a`` with negatives counted from the end (``negative``) after checking every entry is in
    range for an axis of size ``n`` (torch's IndexError, naming the op, index and size)."""
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        bad = hi if hi >= n else (lo if lo < (-n if negative else 0) else None)
        if bad is not None:
            raise IndexRangeError(f"{op}: index {bad} is out of bounds for dimension {dim} with size {n}")
        if negative and lo < 0:
            a = np.where(a < 0, a + n, a)
    return a


def _tensor_like(a: np.ndarray, device: str, dtype=None) -> Tensor:
    """A constant tensor holding host array ``a`` on ``device``."""
    K = get_kernels(device)
    a = np.ascontiguousarray(a)
    return Tensor(K.from_host(a, a.dtype if dtype is None else dtype))


# ---- the indexing plan ----------------------------------------------------------------------

def _is_seq_index(index) -> bool:
    """torch's rule for a list index: a short list holding a tensor, sequence, slice, None or
    Ellipsis is read as a tuple of indices, any other list as one index tensor."""
    if len(index) >= 32:
        return False
    return any(isinstance(i, (Tensor, list, tuple, np.ndarray, slice)) or i is None or i is Ellipsis for i in index)


def _items(index) -> tuple:
    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and _is_seq_index(index):
        return tuple(index)
    return (index,)


def _slice(op: str, s: slice) -> slice:
    vals = []
    for v in (s.start, s.stop, s.step):
        if isinstance(v, Tensor):
            v = int(v.item())
        elif v is not None:
            v = int(v)
        vals.append(v)
    if vals[2] is not None and vals[2] <= 0:
        raise ShapeError(f"{op}: slice step must be greater than zero, got {vals[2]}")
    return slice(*vals)


class _Plan:
    """``x[index]`` as a basic index ``key`` (ints, slices, None) followed by advanced indices
    ``adv`` = [(axis of x[key], host int64 array)], already range-checked and wrapped."""

    __slots__ = ("adv", "basic_shape", "key")

    def __init__(self, key, adv, basic_shape):
        self.key, self.adv, self.basic_shape = key, adv, basic_shape


def _plan(op: str, shape: tuple, index) -> _Plan:
    shape = tuple(shape)
    nd = len(shape)
    parsed = []  # (kind, value): kind in basic | mask | idx | bool
    for it in _items(index):
        if it is None or it is Ellipsis:
            parsed.append(("basic", it))
        elif isinstance(it, (bool, np.bool_)):
            parsed.append(("bool", bool(it)))
        elif isinstance(it, (int, np.integer)):
            parsed.append(("int", int(it)))
        elif isinstance(it, slice):
            parsed.append(("basic", _slice(op, it)))
        else:
            a = _host(it) if isinstance(it, Tensor) else np.asarray(it)
            if a.dtype == np.uint8 and isinstance(it, Tensor):
                a = a.astype(bool)
            if a.dtype.kind == "b":
                parsed.append(("bool", bool(a)) if a.ndim == 0 else ("mask", a))
            elif a.dtype.kind in "iu" or (a.size == 0 and a.dtype.kind == "f" and not isinstance(it, Tensor)):
                a = a.astype(np.int64)
                parsed.append(("int", int(a)) if a.ndim == 0 else ("idx", a))
            else:
                raise IndexRangeError(f"{op}: tensors used as indices must be long, int, byte or bool tensors, "
                                      f"got dtype {a.dtype}")
    used = sum(1 if k in ("int", "idx") or (k == "basic" and isinstance(v, slice)) else
               (v.ndim if k == "mask" else 0) for k, v in parsed)
    if used > nd:
        raise IndexRangeError(f"{op}: too many indices for tensor of dimension {nd} (shape {shape})")
    if sum(1 for k, v in parsed if k == "basic" and v is Ellipsis) > 1:
        raise IndexRangeError(f"{op}: an index can only have a single ellipsis ('...')")
    key, adv = [], []
    ain = aout = 0
    for k, v in parsed:
        if k == "basic" and v is Ellipsis:
            key.extend([slice(None)] * (nd - used))
            ain += nd - used
            aout += nd - used
        elif k == "basic" and v is None:
            key.append(None)
            aout += 1
        elif k == "basic":
            key.append(v)
            ain += 1
            aout += 1
        elif k == "int":
            n = shape[ain]
            if not -n <= v < n:
                raise IndexRangeError(f"{op}: index {v} is out of bounds for dimension {ain} with size {n}")
            key.append(v % n)
            ain += 1
        elif k == "bool":
            key.append(None)
            adv.append((aout, np.zeros(int(v), dtype=np.int64)))
            aout += 1
        elif k == "mask":
            m = v.ndim
            if v.shape != shape[ain:ain + m]:
                for j in range(m):
                    if ain + j >= nd or v.shape[j] != shape[ain + j]:
                        raise IndexRangeError(
                            f"{op}: the shape of the mask {list(v.shape)} at index {j} does not match the shape "
                            f"of the indexed tensor {list(shape)} at index {ain + j}")
            for j, nz in enumerate(np.nonzero(v)):
                key.append(slice(None))
                adv.append((aout + j, nz.astype(np.int64)))
            ain += m
            aout += m
        else:
            key.append(slice(None))
            adv.append((aout, _wrap(op, v, shape[ain], ain)))
            ain += 1
            aout += 1
    key.extend([slice(None)] * (nd - ain))
    key = tuple(key)
    return _Plan(key, adv, normalize_index(op, shape, key)[1])


def _trivial(key) -> bool:
    return all(type(k) is slice and k == slice(None) for k in key)


def _adv_layout(op: str, plan: _Plan):
    """(permutation or None, first advanced axis, broadcast index shape, flat offsets into the merged
    advanced axes) of the advanced part of ``plan``, applied to an array of ``plan.basic_shape``."""
    shape = plan.basic_shape
    axes = [a for a, _ in plan.adv]
    arrays = [i for _, i in plan.adv]
    try:
        b = np.broadcast_shapes(*[i.shape for i in arrays])
    except ValueError:
        raise IndexRangeError(f"{op}: shape mismatch: indexing tensors could not be broadcast together with shapes "
                              + ", ".join(str(list(i.shape)) for i in arrays)) from None
    perm = None
    if axes != list(range(axes[0], axes[0] + len(axes))):
        perm = tuple(axes) + tuple(a for a in range(len(shape)) if a not in axes)
        a0 = 0
    else:
        a0 = axes[0]
    sizes = [shape[a] for a in axes]
    flat = np.zeros(b, dtype=np.int64)
    stride = 1
    for i, n in zip(reversed(arrays), reversed(sizes)):
        flat = flat + i * stride
        stride *= n
    return perm, a0, b, flat.reshape(-1), sizes


def _apply_plan(op: str, x: Tensor, plan: _Plan) -> Tensor:
    y = x if _trivial(plan.key) else record("getitem", (x,), {"index": plan.key})
    if not plan.adv:
        return y
    perm, a0, b, flat, sizes = _adv_layout(op, plan)
    shape = plan.basic_shape
    if perm is not None:
        y = record("permute", (y,), {"dims": perm})
        shape = tuple(shape[p] for p in perm)
    m = len(sizes)
    lead, rest = shape[:a0], shape[a0 + m:]
    if m != 1:
        y = _reshape(y, lead + (math.prod(sizes),) + rest)
    y = record("index_select", (y,), {"axis": a0, "indices": flat})
    return _reshape(y, lead + tuple(b) + rest)


def _positions(op: str, shape, plan: _Plan) -> np.ndarray:
    """Row-major offsets into an array of ``shape`` of every element ``x[index]`` reads, in the
    shape of ``x[index]``."""
    pos = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    pos = np.reshape(pos[tuple(k for k in plan.key) + (Ellipsis,)], plan.basic_shape)
    if not plan.adv:
        return pos
    perm, a0, b, flat, sizes = _adv_layout(op, plan)
    if perm is not None:
        pos = pos.transpose(perm)
    m = len(sizes)
    lead, rest = pos.shape[:a0], pos.shape[a0 + m:]
    pos = pos.reshape(lead + (math.prod(sizes),) + rest)
    return np.take(pos, flat, axis=a0).reshape(lead + tuple(b) + rest)


def _reshape(y: Tensor, shape) -> Tensor:
    shape = tuple(shape)
    return y if y.shape == shape else record("reshape", (y,), {"shape": shape})


def _plain(k) -> bool:
    t = type(k)
    if t is slice:
        return all(v is None or type(v) is int for v in (k.start, k.stop, k.step)) and (k.step is None or k.step > 0)
    return t is int or k is None or k is Ellipsis


def _basic_key(index):
    """``index`` as a tuple when it is basic (ints, slices of ints with positive steps, None,
    Ellipsis), else None."""
    if type(index) is tuple:
        return index if all(_plain(k) for k in index) else None
    return (index,) if _plain(index) else None


@export("__getitem__", function=False)
def getitem(x: Tensor, index) -> Tensor:
    """``x[index]`` with torch's index forms: ints, slices (positive steps), None, Ellipsis, bool
    masks (tensors, arrays or lists, any number of axes), integer index tensors, lists or arrays
    (broadcast together), and combinations. Differentiable (the cotangent is scatter-added back)."""
    key = _basic_key(index)
    if key is not None:
        try:
            return record("getitem", (x,), {"index": key})
        except IndexRangeError:
            pass  # the plan below raises it with torch's message
    return _apply_plan("getitem", x, _plan("getitem", x.shape, index))


# ---- writes ---------------------------------------------------------------------------------

def _value_tensor(op: str, x: Tensor, value, shape) -> Tensor:
    """``value`` (a number, tensor, array or list) as a tensor of ``x``'s dtype and device broadcast to
    ``shape``; leading length-1 axes beyond ``shape``'s are dropped (torch's copy rule)."""
    shape = tuple(shape)
    K = get_kernels(x.device)
    if isinstance(value, (Number, np.number, np.bool_)) and not isinstance(value, Tensor):
        return Tensor(K.full(shape, value.item() if isinstance(value, np.generic) else value, x.dtype))
    if not isinstance(value, Tensor):
        a = np.asarray(value)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise DTypeError(f"{op}: value must be a number or a tensor, got {type(value).__name__}")
        value = _tensor_like(a.astype(x.dtype.np), x.device)
    if value.device != x.device:
        if value.ndim != 0:
            raise TorchLeanError(f"{op}: value on {value.device} and tensor on {x.device}")
        value = value.to(x.device)
    if value.dtype != x.dtype:
        value = value.to(dtype=x.dtype)
    vs = value.shape
    while len(vs) > len(shape) and vs[0] == 1:
        vs = vs[1:]
    try:
        ok = len(vs) <= len(shape) and np.broadcast_shapes(vs, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(f"{op}: shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast to "
                         f"indexing result of shape {list(shape)}")
    value = _reshape(value, vs)
    return value if vs == shape else record("broadcast_to", (value,), {"shape": shape})


def _is_scalar_value(value) -> bool:
    return isinstance(value, (Number, np.number, np.bool_)) or (isinstance(value, Tensor) and value.numel() == 1)


def _scalar_tensor(op, x, value) -> Tensor:
    if isinstance(value, Tensor):
        v = value if value.dtype == x.dtype else value.to(dtype=x.dtype)
        if v.device != x.device:
            v = v.to(x.device)
        return _reshape(v, ())
    if isinstance(value, np.generic):
        value = value.item()
    return Tensor(get_kernels(x.device).full((), value, x.dtype))


def _row_value(x: Tensor, k: int, value):
    """``value`` as a tensor that broadcasts to ``x.shape[k:]`` (the same for every row a mask over
    the first ``k`` axes selects), or None when it depends on the row."""
    if isinstance(value, (Number, np.number, np.bool_)):
        return _scalar_tensor("setitem", x, value)
    if not isinstance(value, Tensor) or value.device != x.device:
        return None
    if value.ndim == 0:
        return _scalar_tensor("setitem", x, value)
    vs = value.shape
    while vs and vs[0] == 1:
        vs = vs[1:]
    rows = x.shape[k:]
    if len(vs) > len(rows) or any(a != 1 and a != b for a, b in zip(vs[::-1], rows[::-1])) or value.dtype != x.dtype:
        return None
    return _reshape(value, vs)


def _leading_rows(x: Tensor, index):
    """``(k, row offsets, index shape)`` when ``index`` writes whole rows of ``x``'s first ``k`` axes
    merged: a bool mask over the leading axes, or integer indices of the first axis; else None."""
    if not isinstance(index, (Tensor, np.ndarray, list)) or (isinstance(index, list) and _is_seq_index(index)):
        return None
    a = _host(index) if isinstance(index, Tensor) else np.asarray(index)
    if a.dtype.kind == "b":
        if a.ndim == 0 or a.shape != x.shape[:a.ndim]:
            return None
        ridx = np.flatnonzero(a)
        return a.ndim, ridx, (ridx.size,)
    if a.dtype.kind not in "iu" or a.ndim == 0 or x.ndim == 0:
        return None
    a = _wrap("setitem", a.astype(np.int64, copy=False), x.shape[0], 0)
    return 1, a.reshape(-1), a.shape


def _row_write(x: Tensor, k: int, ridx: np.ndarray, v: Tensor) -> Tensor:
    """``x`` with row ``ridx[j]`` of its first ``k`` axes merged set to ``v``'s row ``j`` (the last one
    wins on repeats): the rows gathered into place, then one select."""
    lead, rest = x.shape[:k], x.shape[k:]
    r, nb = math.prod(lead), ridx.size
    src = np.arange(nb, dtype=np.int64)
    if nb > 1 and np.bincount(ridx, minlength=r).max() > 1:
        _, first_of_reversed = np.unique(ridx[::-1], return_index=True)
        src = nb - 1 - first_of_reversed
    inv = np.full(r, nb, dtype=np.int64)   # nb: out of bounds, gathers a zero row, masked below
    inv[ridx[src]] = src
    new = record("index_select", (_reshape(v, (nb,) + rest),), {"axis": 0, "indices": inv})
    cond = (inv < nb).reshape(lead + (1,) * len(rest))
    return record("where", (_reshape(new, x.shape), x), {"cond": cond})


def setitem_value(x: Tensor, index, value) -> Tensor:
    """A new tensor: ``x`` with ``x[index] = value`` applied (any index of :func:`getitem`). ``value``
    is a number or a tensor broadcastable to ``x[index]``, cast to ``x``'s dtype as torch casts it.
    Differentiable in ``x`` (zero cotangent where overwritten) and in ``value`` (the cotangent read
    at the written places). Repeated places: the last write in row-major order of the index wins."""
    key = _basic_key(index)
    if key is None and isinstance(index, Tensor) and index.dtype.kind == "b" and index.ndim \
            and index.shape == x.shape[:index.ndim]:
        v = _row_value(x, index.ndim, value)
        if v is not None:
            # A mask over leading axes with a value for every selected row: one select, and the
            # mask never leaves its device.
            cond = index._value.reshape(index.shape + (1,) * (x.ndim - index.ndim))
            return record("where", (v, x), {"cond": cond})
    if key is None and isinstance(value, Tensor) and value.dtype != x.dtype:
        raise DTypeError(f"setitem: index put requires the source and destination dtypes match, got "
                         f"{x.dtype.name} for the destination and {value.dtype.name} for the source")
    rows = _leading_rows(x, index) if key is None else None
    if rows is not None:
        k, ridx, bshape = rows
        return _row_write(x, k, ridx, _value_tensor("setitem", x, value, bshape + x.shape[k:]))
    plan = _plan("setitem", x.shape, index if key is None else key)
    if not plan.adv:
        k, _, view = normalize_index("setitem", x.shape, plan.key)
        v = _value_tensor("setitem", x, value, plan.basic_shape)
        return record("setitem", (x, _reshape(v, view)), {"index": plan.key})
    pos = _positions("setitem", x.shape, plan)
    if _is_scalar_value(value) and (not isinstance(value, Tensor) or not value.requires_grad):
        hit = np.zeros(x.numel(), dtype=bool)
        hit[pos.reshape(-1)] = True
        return record("where", (_scalar_tensor("setitem", x, value), x), {"cond": hit.reshape(x.shape)})
    v = _value_tensor("setitem", x, value, pos.shape)
    return record("put", (x, v), {"index": pos})


@export()
def index_put(x: Tensor, indices, values, accumulate=False) -> Tensor:
    """torch.index_put: ``x`` with ``x[indices] = values`` (``+=`` with ``accumulate``, repeats
    adding up); ``indices`` a tuple of index tensors; ``values`` of ``x``'s dtype, broadcast."""
    if not isinstance(indices, (tuple, list)):
        raise TorchLeanError(f"index_put: indices must be a tuple of tensors, got {type(indices).__name__}")
    if not isinstance(values, Tensor):
        raise TorchLeanError(f"index_put: values must be a tensor, got {type(values).__name__}")
    if values.dtype != x.dtype:
        raise DTypeError(f"index_put: index put requires the source and destination dtypes match, got "
                         f"{x.dtype.name} for the destination and {values.dtype.name} for the source")
    plan = _plan("index_put", x.shape, tuple(indices))
    pos = _positions("index_put", x.shape, plan)
    v = _value_tensor("index_put", x, values, pos.shape)
    return record("put", (x, v), {"index": pos, "accumulate": bool(accumulate)})


@export()
def put(x: Tensor, index, source, accumulate=False) -> Tensor:
    """torch.put: ``x`` viewed as 1-D with ``source``'s entries written (added) at ``index``."""
    n = x.numel()
    idx = _wrap("put", _int_array("put", index), n, 0)
    if source.numel() != idx.size:
        raise ShapeError(f"put: source has {source.numel()} elements and index {idx.size}: they must match")
    src = _reshape(source if source.dtype == x.dtype else source.to(dtype=x.dtype), idx.shape)
    return record("put", (x, src), {"index": idx, "accumulate": bool(accumulate)})


# ---- gather / scatter along a dim -----------------------------------------------------------

def _dim(op: str, dim, ndim: int) -> int:
    return norm_axis(dim, max(ndim, 1), op)


@export()
def index_select(x: Tensor, dim, index) -> Tensor:
    """torch.index_select: entries ``index`` (1-D or 0-d, in ``[0, size)``) along ``dim``."""
    d = _dim("index_select", dim, x.ndim)
    idx = _int_array("index_select", index)
    if idx.ndim > 1:
        raise IndexRangeError(f"index_select: index must be 1-D or 0-d, got shape {list(idx.shape)}")
    if x.ndim == 0:
        idx = _wrap("index_select", idx.reshape(-1), 1, d, negative=False)
        return _reshape(record("index_select", (_reshape(x, (1,)),), {"axis": 0, "indices": idx}), ())
    idx = _wrap("index_select", idx.reshape(-1), x.shape[d], d, negative=False)
    return record("index_select", (x,), {"axis": d, "indices": idx})


def _check_index_shape(op, x, d, idx, other=None, what="src"):
    if idx.ndim != max(x.ndim, 1) and not (x.ndim == 0 and idx.ndim == 0):
        raise ShapeError(f"{op}: index tensor must have the same number of dimensions as input tensor, "
                         f"got index shape {list(idx.shape)} and input shape {list(x.shape)}")
    for j, n in enumerate(idx.shape):
        if j != d and x.ndim and n > x.shape[j]:
            raise ShapeError(f"{op}: size of index {list(idx.shape)} exceeds input size {list(x.shape)} "
                             f"in dimension {j}")
        if other is not None and other.ndim and n > other.shape[j]:
            raise ShapeError(f"{op}: size of index {list(idx.shape)} exceeds {what} size {list(other.shape)} "
                             f"in dimension {j}")


def _along(op, x, d, index, other=None, what="src", negative=False):
    """Checked host index of gather / scatter: int64, in range along ``d``."""
    idx = _int_array(op, index)
    _check_index_shape(op, x, d, idx, other, what)
    return _wrap(op, idx, x.shape[d] if x.ndim else 1, d, negative=negative)


@export()
def gather(x: Tensor, dim, index, *, sparse_grad=False) -> Tensor:
    """torch.gather: ``out[p] = x[p with p[dim] = index[p]]``, out of ``index``'s shape."""
    d = _dim("gather", dim, x.ndim)
    idx = _along("gather", x, d, index)
    if x.ndim == 0:
        return _reshape(record("gather", (_reshape(x, (1,)),), {"axis": 0, "index": idx.reshape(-1)}), idx.shape)
    return record("gather", (x,), {"axis": d, "index": idx})


def _scatter_positions(x, d, idx) -> np.ndarray:
    """Row-major offsets into ``x`` of every entry of a checked scatter index along ``d``."""
    if x.ndim == 0:
        return np.zeros(idx.shape, dtype=np.int64)
    coords = list(np.indices(idx.shape, dtype=np.int64))
    coords[d] = idx
    return np.ravel_multi_index(tuple(coords), x.shape).astype(np.int64) if idx.size else np.zeros(idx.shape, np.int64)


def _region(src: Tensor, shape) -> Tensor:
    """The leading ``shape`` block of ``src`` (the part a scatter index covers)."""
    shape = tuple(shape)
    if src.shape == shape:
        return src
    return record("getitem", (src,), {"index": tuple(slice(0, n) for n in shape)})


def _same_dtype(op, x, src):
    if src.dtype != x.dtype:
        raise DTypeError(f"{op}(): expected self.dtype to be equal to src.dtype, got {x.dtype.name} and "
                         f"{src.dtype.name}")


@export()
def scatter(x: Tensor, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
    """torch.scatter: ``x`` with ``out[p with p[dim] = index[p]] = src[p]`` (or ``value``);
    ``reduce='add'`` / ``'multiply'`` combines instead. Repeated places without reduce: the last
    in row-major order of ``index`` wins."""
    if src is None and value is None:
        raise TorchLeanError("scatter: expects src (a tensor) or value (a number)")
    if not isinstance(src, Tensor):
        value, src = (value if src is None else src), None
    d = _dim("scatter", dim, x.ndim)
    idx = _along("scatter", x, d, index, src)
    if src is not None:
        _same_dtype("scatter", x, src)
        vals = _reshape(_region(src, idx.shape) if src.ndim else src, idx.shape)
    else:
        vals = _value_tensor("scatter", x, value, idx.shape)
    pos = _scatter_positions(x, d, idx)
    if reduce is None:
        return record("put", (x, vals), {"index": pos})
    if reduce == "add":
        return record("put", (x, vals), {"index": pos, "accumulate": True})
    if reduce == "multiply":
        return _scatter_reduce_flat("scatter", x, vals, pos, "prod", True)
    raise TorchLeanError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")


@export()
def scatter_add(x: Tensor, dim, index, src) -> Tensor:
    """torch.scatter_add: ``out[p with p[dim] = index[p]] += src[p]``; repeats add up."""
    d = _dim("scatter_add", dim, x.ndim)
    idx = _along("scatter_add", x, d, index, src)
    _same_dtype("scatter_add", x, src)
    if x.ndim == 0:
        return _reshape(record("scatter_add", (_reshape(x, (1,)), _reshape(src, (1,))),
                               {"axis": 0, "index": idx.reshape(-1)}), ())
    return record("scatter_add", (x, src), {"axis": d, "index": idx})


def _expanded_index(op, x, d, index, source, what="source"):
    """The scatter index of index_add / index_copy: ``index[j]`` at every place of slice ``j`` of
    ``source`` along ``d`` (checked: 1-D, one entry per slice, in range)."""
    idx = _int_array(op, index)
    if idx.ndim > 1:
        raise IndexRangeError(f"{op}: index must be 1-D or 0-d, got shape {list(idx.shape)}")
    idx = idx.reshape(-1)
    nd = max(x.ndim, 1)
    sshape = source.shape if source.ndim else (1,)
    xshape = x.shape if x.ndim else (1,)
    if len(sshape) != nd or any(sshape[j] != xshape[j] for j in range(nd) if j != d) or sshape[d] != idx.size:
        raise ShapeError(f"{op}: {what} of shape {list(source.shape)} does not fit input {list(x.shape)} along "
                         f"dim {d} with {idx.size} indices")
    idx = _wrap(op, idx, xshape[d], d, negative=False)
    shape = [1] * nd
    shape[d] = idx.size
    return np.broadcast_to(idx.reshape(shape), sshape)


@export()
def index_add(x: Tensor, dim, index, source, *, alpha=1) -> Tensor:
    """torch.index_add: ``out.select(dim, index[j]) += alpha * source.select(dim, j)``."""
    d = _dim("index_add", dim, x.ndim)
    _same_dtype("index_add", x, source)
    idx = _expanded_index("index_add", x, d, index, source)
    if alpha != 1:
        source = source * alpha
    if x.ndim == 0:
        return _reshape(record("scatter_add", (_reshape(x, (1,)), _reshape(source, (1,))),
                               {"axis": 0, "index": idx.reshape(-1)}), ())
    return record("scatter_add", (x, source), {"axis": d, "index": np.ascontiguousarray(idx)})


@export()
def index_copy(x: Tensor, dim, index, source) -> Tensor:
    """torch.index_copy: ``out.select(dim, index[j]) = source.select(dim, j)`` (repeats: last wins)."""
    d = _dim("index_copy", dim, x.ndim)
    _same_dtype("index_copy", x, source)
    idx = _expanded_index("index_copy", x, d, index, source)
    pos = _scatter_positions(x, d, np.ascontiguousarray(idx))
    return record("put", (x, _reshape(source, pos.shape)), {"index": pos})


@export()
def index_fill(x: Tensor, dim, index, value) -> Tensor:
    """torch.index_fill: every entry of the slices ``index`` along ``dim`` set to ``value`` (a number or
    a 0-d tensor)."""
    d = _dim("index_fill", dim, x.ndim)
    idx = _int_array("index_fill", index)
    if idx.ndim > 1:
        raise IndexRangeError(f"index_fill: index must be 1-D or 0-d, got shape {list(idx.shape)}")
    n = x.shape[d] if x.ndim else 1
    idx = _wrap("index_fill", idx.reshape(-1), n, d)
    hit = np.zeros(n, dtype=bool)
    hit[idx] = True
    cond = hit.reshape((n,) + (1,) * (x.ndim - d - 1)) if x.ndim else hit.reshape(())
    return record("where", (_fill_value("index_fill", x, value), x), {"cond": cond})


def _fill_value(op, x, value) -> Tensor:
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(f"{op} only supports a 0-dimensional value tensor, but got tensor with "
                         f"{value.ndim} dimension(s)")
    return _scalar_tensor(op, x, value)


# ---- masks ----------------------------------------------------------------------------------

def _mask_value(op, mask):
    """``mask``'s bool values (a device array for a tensor, else a host array); DTypeError otherwise."""
    if isinstance(mask, Tensor):
        if mask.dtype.kind != "b":
            raise DTypeError(f"{op} only supports boolean masks, but got mask with dtype {mask.dtype.name}")
        return mask._value
    m = np.asarray(mask)
    if m.dtype.kind != "b":
        raise DTypeError(f"{op} only supports boolean masks, but got mask with dtype {m.dtype}")
    return m


def _bshape(op, *shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"{op}: shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast") from None


@export()
def masked_fill(x: Tensor, mask, value) -> Tensor:
    """torch.masked_fill: ``value`` (a number or 0-d tensor, cast to ``x``'s dtype) where ``mask``;
    ``x`` and ``mask`` broadcast together."""
    m = _mask_value("masked_fill", mask)
    shape = _bshape("masked_fill", x.shape, tuple(m.shape))
    if shape != x.shape:
        x = record("broadcast_to", (x,), {"shape": shape})
    return record("where", (_fill_value("masked_fill", x, value), x), {"cond": m})


def _host_mask(op, mask, shape) -> np.ndarray:
    m = _mask_value(op, mask)
    m = m if isinstance(m, np.ndarray) else get_kernels("cuda").to_host(m)
    return np.broadcast_to(m, shape)


@export()
def masked_select(x: Tensor, mask) -> Tensor:
    """torch.masked_select: the 1-D tensor of ``x``'s entries where ``mask`` (broadcast together)."""
    shape = _bshape("masked_select", x.shape, tuple(np.shape(_mask_value("masked_select", mask))))
    m = _host_mask("masked_select", mask, shape)
    if shape != x.shape:
        x = record("broadcast_to", (x,), {"shape": shape})
    flat = _reshape(x, (x.numel(),))
    return record("index_select", (flat,), {"axis": 0, "indices": np.flatnonzero(m)})


@export()
def masked_scatter(x: Tensor, mask, source) -> Tensor:
    """torch.masked_scatter: the entries of ``x`` where ``mask`` replaced, in row-major order, by the
    leading entries of ``source``."""
    shape = _bshape("masked_scatter", x.shape, tuple(np.shape(_mask_value("masked_scatter", mask))))
    m = _host_mask("masked_scatter", mask, shape)
    if shape != x.shape:
        x = record("broadcast_to", (x,), {"shape": shape})
    _same_dtype("masked_scatter", x, source)
    pos = np.flatnonzero(m)
    if source.numel() < pos.size:
        raise ShapeError(f"masked_scatter: expected source to have at least as many elements as ones in mask "
                         f"({pos.size}), got {source.numel()}")
    src = _reshape(source, (source.numel(),))
    if pos.size != src.numel():
        src = record("getitem", (src,), {"index": (slice(0, pos.size),)})
    return record("put", (x, src), {"index": pos})


# ---- flat and along-dim takes ---------------------------------------------------------------

@export()
def take(x: Tensor, index) -> Tensor:
    """torch.take: ``x`` read as 1-D at ``index`` (negatives from the end), in ``index``'s shape."""
    idx = _int_array("take", index)
    n = x.numel()
    if idx.size and (int(idx.max()) >= n or int(idx.min()) < -n):
        bad = int(idx.max()) if int(idx.max()) >= n else int(idx.min())
        raise IndexRangeError(f"take: out of range: tried to access index {bad} on a tensor of {n} elements")
    idx = np.where(idx < 0, idx + n, idx)
    y = record("index_select", (_reshape(x, (n,)),), {"axis": 0, "indices": idx.reshape(-1)})
    return _reshape(y, idx.shape)


@export()
def take_along_dim(x: Tensor, indices, dim=None) -> Tensor:
    """torch.take_along_dim: ``gather`` after broadcasting ``x`` and ``indices`` on every axis but
    ``dim``; ``dim=None`` takes from the flattened ``x``."""
    idx = _int_array("take_along_dim", indices)
    if dim is None:
        return take(_reshape(x, (x.numel(),)), idx.reshape(-1))
    if idx.ndim != x.ndim:
        raise ShapeError(f"take_along_dim: input and indices should have the same number of dimensions, got "
                         f"{x.ndim} and {idx.ndim}")
    d = _dim("take_along_dim", dim, x.ndim)
    xs, ishape = list(x.shape), list(idx.shape)
    xs[d] = ishape[d] = 1
    b = list(_bshape("take_along_dim", tuple(xs), tuple(ishape)))
    xt = tuple(b[:d] + [x.shape[d]] + b[d + 1:])
    it = tuple(b[:d] + [idx.shape[d]] + b[d + 1:])
    if xt != x.shape:
        x = record("broadcast_to", (x,), {"shape": xt})
    idx = _wrap("take_along_dim", np.ascontiguousarray(np.broadcast_to(idx, it)), x.shape[d], d)
    return record("gather", (x,), {"axis": d, "index": idx})


# ---- nonzero / where ------------------------------------------------------------------------

def _host_values(t) -> np.ndarray:
    return _host(t) if isinstance(t, Tensor) else np.asarray(t)


@export()
def nonzero(x: Tensor, *, as_tuple=False):
    """torch.nonzero: the int64 ``(n, ndim)`` coordinates of the non-zero entries in row-major order;
    ``as_tuple=True``: one 1-D tensor per axis (a 0-d input counts as 1-D)."""
    if not isinstance(x, Tensor):
        raise DTypeError(f"nonzero: expected a Tensor, got {type(x).__name__}")
    a = _host_values(x)
    dev = x.device
    if as_tuple:
        coords = np.nonzero(a.reshape(-1) if a.ndim == 0 else a)
        return tuple(_tensor_like(c.astype(np.int64), dev) for c in coords)
    return _tensor_like(np.argwhere(a).astype(np.int64), dev)


@export()
def argwhere(x: Tensor) -> Tensor:
    """torch.argwhere: ``nonzero(x)``."""
    return nonzero(x)


def _operand(o, ref: Tensor, dt) -> Tensor:
    if isinstance(o, Tensor):
        return o if o.dtype == dt else o.to(dtype=dt)
    return Tensor(get_kernels(ref.device).full((), o.item() if isinstance(o, np.generic) else o, dt))


@export("where", method=False)
def where(condition, input=None, other=None) -> Tensor:
    """torch.where: ``input`` where ``condition`` else ``other`` (tensors or numbers, broadcast together,
    torch's promotion); ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TorchLeanError("where: expects both input and other, or neither")
    if isinstance(condition, Tensor):
        if condition.dtype.kind != "b":
            raise DTypeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                             f"{condition.dtype.name}")
        cond, ref = condition._value, condition
    else:
        cond = np.asarray(condition)
        if cond.dtype.kind != "b":
            raise DTypeError(f"where expected condition to be a boolean tensor, but got dtype {cond.dtype}")
        ref = None
    tens = [o for o in (input, other) if isinstance(o, Tensor)]
    ref = tens[0] if tens else (ref if ref is not None else Tensor(cond))
    for o in (input, other):
        if not isinstance(o, (Tensor, Number, np.number, np.bool_)):
            raise DTypeError(f"where: expected a tensor or a number, got {type(o).__name__}")
    if tens:
        dt = result_type(*[o if not isinstance(o, np.generic) else o.item() for o in (input, other)])
    else:
        dt = _scalar_pair_dtype(input, other)
    a, b = _operand(input, ref, dt), _operand(other, ref, dt)
    return record("where", (a, b), {"cond": cond})


def _scalar_pair_dtype(a, b):
    """The dtype of ``where(c, a, b)`` for two Python numbers: torch's default dtypes."""
    vals = [v.item() if isinstance(v, np.generic) else v for v in (a, b)]
    if any(isinstance(v, float) for v in vals):
        return get_default_dtype()
    if all(isinstance(v, bool) for v in vals):
        return as_dtype("bool")
    return int64


@export("where", function=False)
def where_method(x: Tensor, condition, other) -> Tensor:
    """Tensor.where(condition, other): ``torch.where(condition, x, other)``."""
    return where(condition, x, other)


# ---- scatter_reduce -------------------------------------------------------------------------

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


@export()
def scatter_reduce(x: Tensor, dim, index, src, reduce, *, include_self=True) -> Tensor:
    """torch.scatter_reduce: every ``src[p]`` combined into ``out[p with p[dim] = index[p]]`` by
    ``reduce`` (sum, prod, mean, amax, amin), with ``x``'s own value when ``include_self``.
    Gradients as torch's: amax / amin split the cotangent evenly among the tied entries."""
    d = _dim("scatter_reduce", dim, x.ndim)
    idx = _along("scatter_reduce", x, d, index, src)
    _same_dtype("scatter_reduce", x, src)
    vals = _reshape(_region(src, idx.shape) if src.ndim else src, idx.shape)
    return _scatter_reduce_flat("scatter_reduce", x, vals, _scatter_positions(x, d, idx), reduce, include_self)


def _pad_value(op, dt, reduce):
    if reduce == "prod":
        return 1
    if dt.kind == "f":
        return -math.inf if reduce == "amax" else math.inf
    if dt.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dt.np)
    return int(info.min if reduce == "amax" else info.max)


def _scatter_reduce_flat(op, x: Tensor, vals: Tensor, pos: np.ndarray, reduce, include_self) -> Tensor:
    """``scatter_reduce`` onto row-major offsets ``pos`` of ``x`` (``vals`` of ``pos``'s shape)."""
    if reduce not in _REDUCES:
        raise TorchLeanError(f"{op}: reduce must be one of {', '.join(_REDUCES)}, got {reduce!r}")
    n = x.numel()
    flat = pos.reshape(-1)
    k = flat.size
    if k == 0:
        return x
    v = _reshape(vals, (k,))
    K = get_kernels(x.device)
    zero = Tensor(K.full((), 0, x.dtype))
    if reduce in ("sum", "mean"):
        base = x
        if not include_self:
            hit = np.zeros(n, dtype=bool)
            hit[flat] = True
            base = record("where", (zero, x), {"cond": hit.reshape(x.shape)})
        out = record("put", (base, _reshape(v, pos.shape)), {"index": pos, "accumulate": True})
        if reduce == "sum":
            return out
        cnt = np.bincount(flat, minlength=n) + (1 if include_self else 0)
        cnt = np.maximum(cnt, 1).reshape(x.shape)
        if x.dtype.kind == "f":
            return record("div", (out, _tensor_like(cnt.astype(x.dtype.np), x.device)), {})
        return _tensor_like(np.floor_divide(_host(out), cnt).astype(x.dtype.np), x.device)
    targets, inv, counts = np.unique(flat, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    u, m = targets.size, int(counts.max())
    order = np.argsort(inv, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    table = np.full((u, m), k, dtype=np.int64)   # k: out of bounds, gathers 0, masked below
    table[inv[order], np.arange(k) - starts[inv[order]]] = order
    g = _reshape(record("index_select", (v,), {"axis": 0, "indices": table.reshape(-1)}), (u, m))
    pad = Tensor(K.full((), _pad_value(op, x.dtype, reduce), x.dtype))
    if (counts != m).any():
        g = record("where", (g, pad), {"cond": table < k})
    if include_self:
        own = record("index_select", (_reshape(x, (n,)),), {"axis": 0, "indices": targets})
        g = record("concat", (_reshape(own, (u, 1)), g), {"axis": 1})
    if reduce == "prod":
        r = _tree_prod(g, pad)
    else:
        with no_grad():
            r = record("reduce_max" if reduce == "amax" else "reduce_min", (g,), {"axis": 1})
        if g.requires_grad:
            rb = _reshape(r, (u, 1))
            ties = record("compare", (g, rb), {"op": "eq"})
            tf = ties.to(dtype=x.dtype)
            w = record("div", (tf, _reshape(record("reduce_sum", (tf,), {"axis": 1, "keepdim": True}), (u, 1))), {})
            diff = record("sub", (record("where", (g, rb), {"cond": ties._value}), rb), {})
            r = record("add", (r, record("reduce_sum", (record("mul", (diff, w), {}),), {"axis": 1})), {})
    return record("put", (x, r), {"index": targets})


def _tree_prod(g: Tensor, one: Tensor) -> Tensor:
    """The product of each row of ``g`` (u, m) by halving: log2(m) recorded multiplications."""
    while g.shape[1] > 1:
        m = g.shape[1]
        if m % 2:
            g = record("concat", (g, record("broadcast_to", (_reshape(one, (1, 1)),), {"shape": (g.shape[0], 1)})),
                       {"axis": 1})
            m += 1
        h = m // 2
        g = record("mul", (record("getitem", (g,), {"index": (slice(None), slice(0, h))}),
                           record("getitem", (g,), {"index": (slice(None), slice(h, m))})), {})
    return _reshape(g, (g.shape[0],))
