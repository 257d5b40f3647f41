"""PyTorch's shape surface: views and reshapes, axis moves, repeats, flips and rolls, splitting
and joining, broadcasting, triangles and diagonals, and the metadata of a tensor's layout.

Every op here is a formula over recorded ops (``reshape``, ``permute``, ``broadcast_to``,
``concat``, ``stack``, ``slice``, ``select``, ``index_select``, ``where``, ``flip``), so it
inherits their gradients, checks and IR lowering.

Layout: values are row-major contiguous arrays. ``reshape``, ``view``, ``flatten``,
``unflatten``, ``squeeze`` and ``unsqueeze`` share the input's buffer; every other op torch
calls a view (``transpose``, ``permute``, ``expand``, ``narrow``, ``diagonal``, ``unfold``,
``split``, ...) returns a fresh contiguous value here, with the same values and gradients.
Hence ``is_contiguous()`` is always True, ``stride()`` is the row-major stride of the shape and
``storage_offset()`` is 0.

    >>> import torchlean as tl
    >>> x = tl.arange(6).reshape(2, 3)
    >>> tl.broadcast_shapes(x.shape, (4, 1, 1))
    torchlean.Size([4, 2, 3])
    >>> x.T.flip(0).tolist()
    [[2, 5], [1, 4], [0, 3]]
"""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from ..autograd import record
from ..dtypes import DType, as_dtype, result_type
from ..errors import DomainError, DTypeError, IndexRangeError, ShapeError
from ..shape import Size, norm_axis
from ..shape import broadcast_shapes as _broadcast_shapes
from ..tensor import Tensor, _as_tensor
from .creation import tensor as _tensor
from .table import export

# torch.Size, the class of ``x.shape`` and ``x.size()`` (defined with the shapes, below the tensor).
export("Size", method=False)(Size)


# ---- argument helpers -----------------------------------------------------------------------

def _index(op, v) -> int:
    """An int from an int, a NumPy integer or a one-element integer tensor."""
    if isinstance(v, Tensor):
        if v.dtype.kind not in "iu" or v.numel() != 1:
            raise DTypeError(f"{op}: expected an integer, got a tensor of dtype {v.dtype.name} and shape {v.shape}")
        return int(v.item())
    if isinstance(v, bool):
        raise DTypeError(f"{op}: expected an integer, got {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise DTypeError(f"{op}: expected an integer, got {v!r}") from None


def _ints(op, args) -> tuple:
    """Sizes given as varargs (``x.view(2, 3)``) or as one sequence (``x.view((2, 3))``)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    elif len(args) == 1 and isinstance(args[0], Tensor) and args[0].ndim == 1:
        args = args[0].tolist()
    return tuple(_index(op, a) for a in args)


def _seq(op, v) -> tuple:
    """An int or a sequence of ints as a tuple."""
    if isinstance(v, (tuple, list)):
        return tuple(_index(op, a) for a in v)
    if isinstance(v, Tensor) and v.ndim == 1:
        return tuple(_index(op, a) for a in v.tolist())
    return (_index(op, v),)


def _axis(op, dim, ndim) -> int:
    """A non-negative axis; a 0-d tensor accepts 0 and -1 (as torch does)."""
    return norm_axis(_index(op, dim), ndim, op)


def _need_axes(op, x, n):
    if x.ndim < n:
        raise ShapeError(f"{op}: expects a tensor with at least {n} dimension{'s' * (n > 1)}, got shape {tuple(x.shape)}")


def _infer(op, shape, n) -> tuple:
    """``shape`` with its one ``-1`` (if any) inferred for ``n`` elements; ShapeError otherwise."""
    shape = tuple(shape)
    free = [i for i, s in enumerate(shape) if s == -1]
    if len(free) > 1:
        raise ShapeError(f"{op}: only one dimension can be inferred, got shape {list(shape)}")
    if any(s < -1 for s in shape):
        raise ShapeError(f"{op}: invalid shape dimension in {list(shape)}")
    if free:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 and n == 0:
            raise ShapeError(f"{op}: cannot reshape a tensor of 0 elements into shape {list(shape)}: "
                             f"the unspecified dimension -1 is ambiguous")
        if known == 0 or n % known:
            raise ShapeError(f"{op}: shape {list(shape)} is invalid for input of size {n}")
        shape = tuple(n // known if s == -1 else s for s in shape)
    if math.prod(shape) != n:
        raise ShapeError(f"{op}: shape {list(shape)} is invalid for input of size {n}")
    return shape


def _view(x, shape):
    """A recorded view of ``x`` with a fully specified ``shape`` (shares the buffer)."""
    return record("reshape", (x,), {"shape": tuple(shape)})


def _alias(x):
    """A new tensor viewing ``x`` unchanged (torch returns a view where it moves nothing)."""
    return _view(x, x.shape)


def _copy(x):
    """A recorded contiguous copy of ``x``, any dtype, gradient the identity."""
    return record("getitem", (x,), {"index": ()})


def _permute(x, perm):
    perm = tuple(perm)
    if perm == tuple(range(x.ndim)):
        return _copy(x)
    return record("permute", (x,), {"dims": perm})


def _slice(x, d, start, stop):
    return record("slice", (x,), {"axis": d, "start": start, "stop": stop})


def _broadcast(x, shape):
    shape = tuple(shape)
    if shape == tuple(x.shape):
        return _alias(x)
    return record("broadcast_to", (x,), {"shape": shape})


# ---- views: reshape and friends -------------------------------------------------------------

@export("reshape")
def reshape(input, *shape_args, shape=None):
    """``x.reshape(*shape)`` / ``torch.reshape(x, shape)``; one ``-1`` is inferred. Always shares
    the buffer here (values are contiguous)."""
    s = _ints("reshape", shape_args if shape is None else (shape,))
    return _view(input, _infer("reshape", s, input.numel()))


def _is_dtype(v) -> bool:
    return isinstance(v, (DType, np.dtype, str)) or (isinstance(v, type) and issubclass(v, (np.generic, float, bool))
                                                     and v is not int)


@export("view", function=False)
def view(self, *shape_args, size=None, dtype=None):
    """``x.view(*shape)`` (a reshape sharing the buffer) or ``x.view(dtype)``: the same bytes read
    as ``dtype`` (the last axis scales by the ratio of item sizes); a dtype view is not recorded."""
    if dtype is None and len(shape_args) == 1 and _is_dtype(shape_args[0]):
        dtype = shape_args[0]
    if dtype is not None:
        return _view_dtype(self, as_dtype(dtype))
    s = _ints("view", shape_args if size is None else (size,))
    return _view(self, _infer("view", s, self.numel()))


def _view_dtype(x, dt):
    old = x.dtype.itemsize
    if dt.itemsize != old:
        if x.ndim == 0:
            raise ShapeError(f"view: a 0-d tensor of {x.dtype.name} cannot be viewed as {dt.name} "
                             f"(element sizes {old} and {dt.itemsize} differ)")
        if (x.shape[-1] * old) % dt.itemsize:
            raise ShapeError(f"view: the last dimension of shape {tuple(x.shape)} ({x.dtype.name}) does not "
                             f"divide into elements of {dt.name}")
    return Tensor(x._value.view(dt.dtype))


@export("view_as", function=False)
def view_as(self, other):
    return view(self, tuple(other.shape))


@export("reshape_as", function=False)
def reshape_as(self, other):
    return reshape(self, tuple(other.shape))


@export("flatten")
def flatten(input, start_dim=0, end_dim=-1):
    """Merge axes ``start_dim..end_dim`` into one (a 0-d tensor becomes shape ``(1,)``)."""
    return record("flatten", (input,), {"start_dim": _index("flatten", start_dim), "end_dim": _index("flatten", end_dim)})


@export("ravel")
def ravel(input):
    return _view(input, (input.numel(),))


@export("unflatten")
def unflatten(input, dim, sizes):
    """Split axis ``dim`` into ``sizes`` (one ``-1`` is inferred)."""
    d = _axis("unflatten", dim, input.ndim)
    sizes = _seq("unflatten", sizes)
    if not sizes:
        raise ShapeError("unflatten: sizes must be non-empty")
    n = input.shape[d] if input.ndim else 1
    try:
        sizes = _infer("unflatten", sizes, n)
    except ShapeError:
        raise ShapeError(f"unflatten: sizes {list(sizes)} don't multiply up to the size of dim {dim} ({n}) "
                         f"of shape {tuple(input.shape)}") from None
    return _view(input, tuple(input.shape[:d]) + sizes + tuple(input.shape[d + 1:]))


@export("squeeze")
def squeeze(input, dim=None):
    """Drop length-1 axes: all of them, the one ``dim`` or each of a tuple ``dim`` (an axis whose
    length is not 1 stays)."""
    if dim is None or not isinstance(dim, (tuple, list)):
        return record("squeeze", (input,), {"dim": None if dim is None else _index("squeeze", dim)})
    shape = tuple(input.shape)
    axes = {_axis("squeeze", d, len(shape)) for d in dim}
    return _view(input, tuple(s for i, s in enumerate(shape) if not (i in axes and s == 1)))


@export("unsqueeze")
def unsqueeze(input, dim):
    return record("unsqueeze", (input,), {"dim": _index("unsqueeze", dim)})


# ---- broadcasting ---------------------------------------------------------------------------

def _expand_shape(op, x, sizes) -> tuple:
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise ShapeError(f"{op}: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                         f"number of dimensions of the tensor ({x.ndim}, shape {tuple(x.shape)})")
    out = []
    for j, s in enumerate(sizes):
        if s == -1:
            if j < lead:
                raise ShapeError(f"{op}: the expanded size -1 isn't allowed in a leading, non-existing "
                                 f"dimension {j} (sizes {list(sizes)})")
            s = x.shape[j - lead]
        elif s < 0:
            raise ShapeError(f"{op}: invalid size {s} in {list(sizes)}")
        out.append(s)
    return tuple(out)


@export("expand", function=False)
def expand(self, *sizes, size=None):
    """Broadcast to ``sizes``; ``-1`` keeps an existing axis. The result is a copy here."""
    sizes = _ints("expand", sizes if size is None else (size,))
    return _broadcast(self, _expand_shape("expand", self, sizes))


@export("expand_as", function=False)
def expand_as(self, other):
    return expand(self, tuple(other.shape))


@export("broadcast_to")
def broadcast_to(input, size):
    return _broadcast(input, _expand_shape("broadcast_to", input, _ints("broadcast_to", (size,))))


@export("broadcast_shapes", method=False)
def broadcast_shapes(*shapes):
    """The broadcast of several shapes (ints or sequences), as a :class:`Size`."""
    shapes = [(_index("broadcast_shapes", s),) if not isinstance(s, (tuple, list)) else _seq("broadcast_shapes", s)
              for s in shapes]
    for s in shapes:
        if any(d < 0 for d in s):
            raise ShapeError(f"broadcast_shapes: negative size in {s}")
    return Size(_broadcast_shapes(*shapes, op="broadcast_shapes") if shapes else ())


@export("broadcast_tensors", method=False)
def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    shape = _broadcast_shapes(*[tuple(t.shape) for t in tensors], op="broadcast_tensors") if tensors else ()
    return tuple(_broadcast(t, shape) for t in tensors)


# ---- repeats --------------------------------------------------------------------------------

def _repeat(op, x, reps):
    if len(reps) < x.ndim:
        raise ShapeError(f"{op}: number of repeat dims ({len(reps)}) can not be smaller than the number of "
                         f"dimensions of the tensor (shape {tuple(x.shape)})")
    if any(r < 0 for r in reps):
        raise DomainError(f"{op}: repeats must be non-negative, got {list(reps)}")
    shape = (1,) * (len(reps) - x.ndim) + tuple(x.shape)
    inner, big, out = [], [], []
    for r, s in zip(reps, shape):
        if r != 1:
            inner.append(1)
            big.append(r)
        inner.append(s)
        big.append(s)
        out.append(r * s)
    if len(big) == len(shape):  # every repeat is 1
        return _view(_copy(x), shape)
    y = record("broadcast_to", (_view(x, inner),), {"shape": tuple(big)})
    return _view(y, out)


@export("repeat", function=False)
def repeat(self, *repeats):
    """Tile ``self`` ``repeats[i]`` times along axis ``i`` (leading new axes when there are more
    repeats than axes): a broadcast of a view with interleaved length-1 axes, then a reshape."""
    return _repeat("repeat", self, _ints("repeat", repeats))


@export("tile")
def tile(input, dims):
    """``repeat`` with ``dims`` padded by leading 1s up to the tensor's number of axes."""
    dims = _ints("tile", (dims,))
    return _repeat("tile", input, (1,) * (input.ndim - len(dims)) + dims)


@export("repeat_interleave")
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (or each slice along ``dim``) ``repeats`` times. ``repeats`` is an int
    or a tensor (one count, or one per slice); without ``dim`` the input is flattened first.
    ``torch.repeat_interleave(counts)`` gives ``arange(len(counts))`` repeated ``counts`` times."""
    op = "repeat_interleave"
    if repeats is None:
        counts = _counts(op, input)
        return _tensor(np.repeat(np.arange(counts.size, dtype=np.int64), counts), device=input.device)
    x = input
    if dim is None:
        x, d = flatten(x), 0
    else:
        d = _axis(op, dim, x.ndim)
        if x.ndim == 0:
            x = _view(x, (1,))
    n = x.shape[d]
    if isinstance(repeats, Tensor) and repeats.numel() == 1 and repeats.ndim <= 1:
        repeats = _index(op, repeats)
    if isinstance(repeats, Tensor):
        counts = _counts(op, repeats)
        if counts.size != n:
            raise ShapeError(f"{op}: repeats must have the same size as input along dim {d}: "
                             f"{counts.size} repeats for size {n} (shape {tuple(x.shape)})")
        total = int(counts.sum())
    else:
        r = _index(op, repeats)
        if r < 0:
            raise DomainError(f"{op}: repeats can not be negative, got {r}")
        total = n * r
    if output_size is not None and _index(op, output_size) != total:
        raise ShapeError(f"{op}: invalid output_size, expected {total} but got {output_size}")
    shape = tuple(x.shape)
    if isinstance(repeats, Tensor):
        idx = np.repeat(np.arange(n, dtype=np.int64), counts)
        return record("index_select", (x,), {"axis": d, "indices": idx})
    y = record("broadcast_to", (_view(x, shape[:d + 1] + (1,) + shape[d + 1:]),),
               {"shape": shape[:d + 1] + (r,) + shape[d + 1:]})
    return _view(y, shape[:d] + (total,) + shape[d + 1:])


def _counts(op, t):
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{op}: repeats must be an integer tensor, got dtype {t.dtype.name}")
    if t.ndim > 1:
        raise ShapeError(f"{op}: repeats must be 0-d or 1-d, got shape {tuple(t.shape)}")
    c = t.numpy().reshape(-1).astype(np.int64)
    if c.size and c.min() < 0:
        raise DomainError(f"{op}: repeats can not be negative, got {c.min()}")
    return c


# ---- axis moves -----------------------------------------------------------------------------

@export("permute")
def permute(input, *dims_args, dims=None):
    """``x.permute(*dims)`` / ``torch.permute(x, dims)``: output axis i is input axis dims[i]."""
    return record("permute", (input,), {"dims": _ints("permute", dims_args if dims is None else (dims,))})


@export("transpose")
def transpose(input, dim0, dim1):
    return record("transpose", (input,), {"dim0": _index("transpose", dim0), "dim1": _index("transpose", dim1)})


@export("swapaxes")
def swapaxes(input, axis0, axis1):
    return transpose(input, axis0, axis1)


@export("swapdims")
def swapdims(input, dim0, dim1):
    return transpose(input, dim0, dim1)


@export("t")
def t(input):
    """Transpose of a 2-d tensor; 0-d and 1-d tensors come back as they are."""
    if input.ndim > 2:
        raise ShapeError(f"t: expects a tensor with <= 2 dimensions, got shape {tuple(input.shape)}")
    return _alias(input) if input.ndim < 2 else transpose(input, 0, 1)


def _T(self):
    """All axes reversed (torch's ``x.T``; 0-d and 1-d tensors unchanged)."""
    if self.ndim < 2:
        return _alias(self)
    return record("permute", (self,), {"dims": tuple(range(self.ndim - 1, -1, -1))})


def _mT(self):
    """The last two axes swapped (batches of matrices)."""
    if self.ndim < 2:
        raise ShapeError(f"mT: only supported on matrices or batches of matrices, got shape {tuple(self.shape)}")
    return transpose(self, -2, -1)


def _H(self):
    """Conjugate transpose of a matrix (the transpose: values are real); a 0-d tensor unchanged."""
    if self.ndim not in (0, 2):
        raise ShapeError(f"H: only supported on matrices (2-D tensors), got shape {tuple(self.shape)}; "
                         f"for batches of matrices use mH")
    return _alias(self) if self.ndim == 0 else transpose(self, 0, 1)


export("T", function=False)(property(_T))
export("mT", function=False)(property(_mT))
export("mH", function=False)(property(_mT, doc="The last two axes swapped (conjugation is the identity on real values)."))
export("H", function=False)(property(_H))


@export("adjoint")
def adjoint(input):
    """Conjugate transpose of the last two axes (the transpose: values are real)."""
    if input.ndim < 2:
        raise ShapeError(f"adjoint: only supported on matrices or batches of matrices, got shape {tuple(input.shape)}")
    return transpose(input, -2, -1)


@export("movedim", "moveaxis")
def movedim(input, source, destination):
    """Move axes ``source`` to positions ``destination``; the other axes keep their order."""
    op = "movedim"
    n = input.ndim
    src = [_axis(op, s, n) for s in _seq(op, source)]
    dst = [_axis(op, d, n) for d in _seq(op, destination)]
    if len(src) != len(dst):
        raise ShapeError(f"{op}: invalid source or destination dims: source {list(_seq(op, source))} and "
                         f"destination {list(_seq(op, destination))} must have the same number of entries")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError(f"{op}: repeated dim in source {list(src)} or destination {list(dst)}")
    if n == 0:
        return _alias(input)
    perm = [-1] * n
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(n) if i not in src)
    perm = [p if p >= 0 else next(rest) for p in perm]
    return _permute(input, perm)


@export("contiguous", function=False)
def contiguous(self, memory_format=None):
    """``self``: every value is row-major contiguous already."""
    return self


# ---- flips, rolls, rotations ----------------------------------------------------------------

@export("flip")
def flip(input, *dims_args, dims=None):
    """Reverse the order along each axis of ``dims`` (``x.flip(0, 1)`` or ``torch.flip(x, (0, 1))``)."""
    args = dims_args if dims is None else (dims,)
    return record("flip", (input,), {"dims": _ints("flip", args)})


@export("fliplr")
def fliplr(input):
    _need_axes("fliplr", input, 2)
    return flip(input, (1,))


@export("flipud")
def flipud(input):
    _need_axes("flipud", input, 1)
    return flip(input, (0,))


@export("roll")
def roll(input, shifts, dims=None):
    """Shift elements cyclically along ``dims`` (of the flattened tensor when ``dims`` is None):
    along each axis the concatenation of its two slices."""
    op = "roll"
    shifts = _seq(op, shifts)
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"{op}: without dims, shifts must be one int, got {list(shifts)}")
        return _view(roll(_view(input, (input.numel(),)), shifts, 0), input.shape)
    dims = _seq(op, dims)
    if len(shifts) != len(dims):
        raise ShapeError(f"{op}: shifts and dimensions must align: {len(shifts)} shifts, {len(dims)} dims")
    y = input
    for s, d in zip(shifts, dims):
        d = _axis(op, d, input.ndim)
        n = y.shape[d] if y.ndim else 1
        if n == 0 or s % n == 0:
            continue
        s %= n
        y = record("concat", (_slice(y, d, n - s, n), _slice(y, d, 0, n - s)), {"axis": d})
    return _copy(input) if y is input else y


@export("rot90")
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first axis towards the
    second (torch's convention)."""
    op = "rot90"
    dims = _seq(op, dims)
    if len(dims) != 2:
        raise ShapeError(f"{op}: expected two dims, got {list(dims)}")
    _need_axes(op, input, 2)
    a, b = (_axis(op, d, input.ndim) for d in dims)
    if a == b:
        raise ShapeError(f"{op}: dims must be different, got {list(dims)}")
    k = _index(op, k) % 4
    if k == 1:
        return transpose(flip(input, (b,)), a, b)
    if k == 2:
        return flip(input, (a, b))
    if k == 3:
        return transpose(flip(input, (a,)), a, b)
    return _copy(input)


# ---- slicing and splitting ------------------------------------------------------------------

@export("narrow")
def narrow(input, dim, start, length):
    """Elements ``start .. start + length - 1`` along ``dim`` (``start`` may be negative)."""
    op = "narrow"
    if input.ndim == 0:
        raise ShapeError(f"{op}: cannot be applied to a 0-d tensor")
    d = _axis(op, dim, input.ndim)
    n = input.shape[d]
    start, length = _index(op, start), _index(op, length)
    if not -n <= start <= n:
        raise IndexRangeError(f"{op}: start {start} out of range [-{n}, {n}] for dim {dim} of shape {tuple(input.shape)}")
    start %= n if n else 1
    if length < 0:
        raise ShapeError(f"{op}: length must be non-negative, got {length}")
    if start + length > n:
        raise ShapeError(f"{op}: start ({start}) + length ({length}) exceeds dimension size ({n}) "
                         f"of shape {tuple(input.shape)}")
    return _slice(input, d, start, start + length)


@export("unfold", function=False)
def unfold(self, dimension, size, step):
    """Every window of ``size`` elements along ``dimension``, ``step`` apart, as a new last axis:
    shape ``(..., (n - size) // step + 1, ..., size)``. One gather of the window indices."""
    op = "unfold"
    size, step = _index(op, size), _index(op, step)
    if step <= 0:
        raise DomainError(f"{op}: step must be positive, got {step}")
    if size < 0:
        raise DomainError(f"{op}: size must be non-negative, got {size}")
    if self.ndim == 0:
        _axis(op, dimension, 0)
        if size != 1:
            raise ShapeError(f"{op}: the window size of a 0-d tensor must be 1, got {size}")
        return _view(_copy(self), (size,))
    d = _axis(op, dimension, self.ndim)
    shape = tuple(self.shape)
    n = shape[d]
    if size > n:
        raise ShapeError(f"{op}: maximum size for tensor at dimension {d} is {n} but size is {size}")
    count = (n - size) // step + 1
    idx = (np.arange(count, dtype=np.int64)[:, None] * step + np.arange(size, dtype=np.int64)[None, :]).reshape(-1)
    y = _view(record("index_select", (self,), {"axis": d, "indices": idx}), shape[:d] + (count, size) + shape[d + 1:])
    return y if d + 1 == self.ndim else movedim(y, d + 1, -1)


def _split_at(x, d, bounds):
    return tuple(_slice(x, d, a, b) for a, b in itertools.pairwise(bounds))


def _split_axis(op, x, dim):
    if x.ndim == 0:
        raise ShapeError(f"{op}: expects at least a 1-dimensional tensor, got a 0-d tensor")
    return _axis(op, dim, x.ndim)


@export("split")
def split(tensor, split_size_or_sections, dim=0):
    """Pieces of ``split_size`` along ``dim`` (the last may be shorter), or of the listed sizes."""
    op = "split"
    d = _split_axis(op, tensor, dim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (tuple, list)):
        sizes = _seq(op, split_size_or_sections)
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ShapeError(f"{op}: split sizes {list(sizes)} must be non-negative and sum exactly to {n} "
                             f"(the size of dim {dim} of shape {tuple(tensor.shape)})")
        return _split_at(tensor, d, [int(b) for b in np.cumsum((0,) + sizes)])
    s = _index(op, split_size_or_sections)
    if s < 0 or (s == 0 and n):
        raise DomainError(f"{op}: split_size must be positive (0 only for an empty dim), got {s} for size {n}")
    if n == 0:
        return (_slice(tensor, d, 0, 0),)
    return _split_at(tensor, d, list(range(0, n, s)) + [n])


@export("chunk")
def chunk(input, chunks, dim=0):
    """At most ``chunks`` pieces of ``ceil(n / chunks)`` elements along ``dim`` (torch's rule)."""
    op = "chunk"
    chunks = _index(op, chunks)
    if chunks <= 0:
        raise DomainError(f"{op}: chunks must be greater than 0, got {chunks}")
    d = _split_axis(op, input, dim)
    n = input.shape[d]
    if n == 0:
        return tuple(_slice(input, d, 0, 0) for _ in range(chunks))
    return split(input, -(-n // chunks), d)


@export("tensor_split")
def tensor_split(input, indices_or_sections, dim=0):
    """``sections`` near-equal pieces (the first ``n % sections`` one longer), or the pieces between
    the given indices (Python slice bounds: negative counts from the end, beyond clips)."""
    op = "tensor_split"
    d = _split_axis(op, input, dim)
    n = input.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dtype.kind not in "iu" or ios.ndim > 1:
            raise DTypeError(f"{op}: indices_or_sections must be an int or a 0-d / 1-d integer tensor, got dtype "
                             f"{ios.dtype.name} shape {tuple(ios.shape)}")
        ios = ios.item() if ios.ndim == 0 else ios.tolist()
    if isinstance(ios, (tuple, list)):
        return _split_at(input, d, [0] + list(_seq(op, ios)) + [n])
    s = _index(op, ios)
    if s <= 0:
        raise DomainError(f"{op}: number of sections must be larger than 0, got {s}")
    q, r = divmod(n, s)
    sizes = [q + 1] * r + [q] * (s - r)
    return _split_at(input, d, [int(b) for b in np.cumsum([0] + sizes)])


@export("select")
def select(input, dim, index):
    """``input`` at ``index`` along ``dim``, that axis removed (``x[:, i]`` for dim 1)."""
    d = _axis("select", dim, input.ndim)
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexRangeError(f"select: index {index} out of range for dimension {dim} with size {n}")
    return record("select", (input,), {"axis": d, "index": index % n})


@export("unbind")
def unbind(input, dim=0):
    """The slices along ``dim``, that axis removed, as a tuple."""
    d = _split_axis("unbind", input, dim)
    return tuple(record("select", (input,), {"axis": d, "index": i}) for i in range(input.shape[d]))


# ---- joining --------------------------------------------------------------------------------

def _tensors(op, tensors) -> list:
    if isinstance(tensors, Tensor):
        raise DTypeError(f"{op}: expects a sequence of tensors, got a single Tensor")
    ts = list(tensors)
    if not ts:
        raise ShapeError(f"{op}: expects a non-empty sequence of tensors")
    for t in ts:
        if not isinstance(t, Tensor):
            raise DTypeError(f"{op}: expects a sequence of tensors, got an element of type {type(t).__name__}")
    return ts


def _promoted(ts):
    dt = result_type(*ts)
    return [t if t.dtype == dt else t.to(dtype=dt) for t in ts]


@export("cat", "concat", "concatenate", method=False)
def cat(tensors, dim=0, *, axis=None):
    """Join along an existing axis; dtypes promote as in torch. Torch's legacy rule: 1-d empty
    tensors (shape ``(0,)``) are skipped, whatever the others' shapes."""
    ts = _promoted(_tensors("cat", tensors))
    d = _index("cat", dim if axis is None else axis)
    kept = [t for t in ts if tuple(t.shape) != (0,)] or ts
    return record("concat", tuple(kept), {"axis": d})


@export("stack", method=False)
def stack(tensors, dim=0, *, axis=None):
    """Join same-shape tensors along a new axis ``dim``; dtypes promote as in torch."""
    ts = _promoted(_tensors("stack", tensors))
    return record("stack", tuple(ts), {"axis": _index("stack", dim if axis is None else axis)})


def _atleast(n, tensors):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    out = []
    for x in tensors:
        if not isinstance(x, Tensor):
            raise DTypeError(f"atleast_{n}d: expects tensors, got {type(x).__name__}")
        s = tuple(x.shape)
        if len(s) >= n:
            out.append(x)
        elif n == 3 and len(s) == 2:
            out.append(_view(x, s + (1,)))
        elif n == 3 and len(s) == 1:
            out.append(_view(x, (1,) + s + (1,)))
        else:
            out.append(_view(x, (1,) * (n - len(s)) + s))
    return out[0] if single else tuple(out)


@export("atleast_1d", method=False)
def atleast_1d(*tensors):
    return _atleast(1, tensors)


@export("atleast_2d", method=False)
def atleast_2d(*tensors):
    return _atleast(2, tensors)


@export("atleast_3d", method=False)
def atleast_3d(*tensors):
    return _atleast(3, tensors)


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


@export("hstack", method=False)
def hstack(tensors):
    ts = _as_tuple(atleast_1d(_tensors("hstack", tensors)))
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


@export("vstack", "row_stack", method=False)
def vstack(tensors):
    return cat(_as_tuple(atleast_2d(_tensors("vstack", tensors))), 0)


@export("dstack", method=False)
def dstack(tensors):
    return cat(_as_tuple(atleast_3d(_tensors("dstack", tensors))), 2)


@export("column_stack", method=False)
def column_stack(tensors):
    """1-d (and 0-d) tensors become columns, then all are joined along axis 1."""
    ts = [_view(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in _tensors("column_stack", tensors)]
    return cat(ts, 1)


# ---- triangles and diagonals ----------------------------------------------------------------

def _triangle(op, x, k, lower):
    _need_axes(op, x, 2)
    k = _index(op, k)
    r, c = x.shape[-2:]
    off = np.arange(c)[None, :] - np.arange(r)[:, None]
    keep = off <= k if lower else off >= k
    return record("where", (x, _as_tensor(0, x, x.dtype)), {"cond": keep})


@export("tril")
def tril(input, diagonal=0):
    """Zero every element above the ``diagonal``-th diagonal of the last two axes."""
    return _triangle("tril", input, diagonal, True)


@export("triu")
def triu(input, diagonal=0):
    """Zero every element below the ``diagonal``-th diagonal of the last two axes."""
    return _triangle("triu", input, diagonal, False)


def _diag_indices(r, c, offset):
    """Row-major offsets of the ``offset``-th diagonal of an ``r x c`` matrix."""
    i = np.arange(max(0, min(r, c - offset) if offset >= 0 else min(r + offset, c)), dtype=np.int64)
    return (i + max(-offset, 0)) * c + i + max(offset, 0)


@export("diagonal")
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The ``offset``-th diagonal of the matrices in axes ``dim1``, ``dim2``, as a new last axis
    (the other axes keep their order). A gather of a flattened view; a copy here."""
    return _diagonal(input, offset, dim1, dim2)


def _diagonal(input, offset, dim1, dim2):
    op = "diagonal"
    _need_axes(op, input, 2)
    n = input.ndim
    a, b = _axis(op, dim1, n), _axis(op, dim2, n)
    if a == b:
        raise ShapeError(f"{op}: diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = _index(op, offset)
    rest = [i for i in range(n) if i not in (a, b)]
    shape = tuple(input.shape)
    r, c = shape[a], shape[b]
    y = input if (a, b) == (n - 2, n - 1) else record("permute", (input,), {"dims": tuple(rest + [a, b])})
    lead = tuple(shape[i] for i in rest)
    flat = _view(y, lead + (r * c,))
    return record("index_select", (flat,), {"axis": len(lead), "indices": _diag_indices(r, c, offset)})


@export("diag")
def diag(input, diagonal=0):
    """A 1-d tensor -> the square matrix with it on the ``diagonal``-th diagonal; a 2-d tensor ->
    its ``diagonal``-th diagonal."""
    k = _index("diag", diagonal)
    if input.ndim == 2:
        return _diagonal(input, k, 0, 1)
    if input.ndim != 1:
        raise ShapeError(f"diag: supports 1-d or 2-d tensors, got shape {tuple(input.shape)}")
    n = input.shape[0]
    m = n + abs(k)
    # Off-diagonal cells read index n, out of bounds: index_select yields 0 there (DESIGN.md).
    idx = np.full((m, m), n, dtype=np.int64)
    i = np.arange(n)
    idx[i + max(-k, 0), i + max(k, 0)] = i
    return _view(record("index_select", (input,), {"axis": 0, "indices": idx.reshape(-1)}), (m, m))


@export("diagflat")
def diagflat(input, offset=0):
    return diag(_view(input, (input.numel(),)), offset)


# ---- copies and metadata --------------------------------------------------------------------

@export("clone")
def clone(input, *, memory_format=None):
    """A recorded copy (gradient the identity); ``memory_format`` is accepted and changes nothing:
    values are row-major contiguous."""
    return _copy(input)


@export("detach")
def detach(input):
    """A tensor sharing ``input``'s values, outside any graph."""
    return Tensor(input._value)


@export("numel")
def numel(input) -> int:
    return math.prod(input.shape)


@export("nelement", function=False)
def nelement(self) -> int:
    return math.prod(self.shape)


@export("dim", "ndimension", function=False)
def dim(self) -> int:
    return len(self.shape)


@export("element_size", function=False)
def element_size(self) -> int:
    return self.dtype.itemsize


export("itemsize", function=False)(property(element_size, doc="Bytes per element."))
export("nbytes", function=False)(property(lambda self: self.dtype.itemsize * math.prod(self.shape),
                                          doc="Bytes of all elements."))


@export("is_contiguous", function=False)
def is_contiguous(self, memory_format=None) -> bool:
    """True: every value is stored row-major contiguous."""
    return True


@export("stride", function=False)
def stride(self, dim=None):
    """Row-major strides of the shape in elements (a length-0 axis counts as 1, as in torch), or
    the stride of axis ``dim``."""
    shape = tuple(self.shape)
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= max(n, 1)
    out = tuple(reversed(out))
    return out if dim is None else out[_axis("stride", dim, len(shape))]


@export("storage_offset", function=False)
def storage_offset(self) -> int:
    return 0


@export("data_ptr", function=False)
def data_ptr(self) -> int:
    """The address of the first element: the NumPy buffer on the CPU, the device pointer on CUDA."""
    v = self._value
    return int(v.ctypes.data) if self.device == "cpu" else int(v.data.ptr)


@export("meshgrid", method=False)
def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors (a list or varargs): ``indexing="ij"`` (matrix order, torch's
    default) or ``"xy"`` (the first two axes swapped, Cartesian order); each grid is a broadcast of its
    input, so gradients flow back summed."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise DomainError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for k, t in enumerate(tensors):
        if not isinstance(t, Tensor) or t.ndim > 1:
            raise ShapeError(f"meshgrid: expects 0-d or 1-d tensors, argument {k} has shape "
                             f"{tuple(getattr(t, 'shape', ()))}")
    ts = [t.reshape(-1) for t in tensors]
    if indexing == "xy" and len(ts) >= 2:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    grids = []
    for k, t in enumerate(ts):
        view = [1] * len(ts)
        view[k] = shape[k]
        grids.append(t.reshape(view).expand(*shape))
    if indexing == "xy" and len(ts) >= 2:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)
