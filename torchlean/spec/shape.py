"""Shape ops: the reference meaning of reshaping, axis moves, broadcasting,
joining, slicing and basic indexing.

Conventions (DESIGN.md, docs/OPS.md):

* ``reshape``, ``flatten``, ``squeeze`` and ``unsqueeze`` are no-copy views on the
  fast path; the other ops produce fresh row-major contiguous values.
* ``reshape`` takes a fully specified shape (no ``-1``).
* ``swap_adjacent(x; depth)`` is the seeds' ``swap_adjacent_at_depth``: it swaps
  axes ``depth`` and ``depth + 1`` and is the identity when ``depth`` is out of range.
* ``squeeze`` of an axis whose length is not 1 is a no-op (as in PyTorch).
* ``broadcast_to`` follows the seeds' axis map (:func:`torchlean.shape.broadcast_plan`);
  its VJP sums over the inserted and stretched axes.
* ``slice`` and ``getitem`` follow Python's slice semantics (negative start/stop
  count from the end, out-of-range bounds clip) with ``step >= 1``; an int index
  out of range is an :class:`IndexRangeError`. ``getitem`` is basic indexing
  only: ints, slices, ``None`` and ``Ellipsis``.
* ``flip(x; dims)`` reverses ``x`` along each axis of ``dims`` (distinct, negative allowed);
  it is its own adjoint.
* ``detach`` is the identity with a zero cotangent.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> SPEC["getitem"].forward(x, index=(Ellipsis, slice(None, None, 2), None)).shape
    (2, 2, 1)
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..errors import DomainError, DTypeError, IndexRangeError, ShapeError
from ..shape import broadcast_plan, norm_axis
from .elementwise import sum_to_shape
from .registry import defspec


# ---- helpers shared with the runtime rules --------------------------------------------------

def _int(op: str, name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise DomainError(f"{op}: {name} must be an int, got {v!r}")
    return int(v)


def axis_of(op: str, axis, ndim: int) -> int:
    """A non-negative axis of an input that must have at least one axis."""
    if ndim == 0:
        raise ShapeError(f"{op}: needs an input with at least one axis, got a 0-d input")
    return norm_axis(axis, ndim, op)


def shape_arg(op: str, shape) -> tuple:
    """A fully specified target shape: a tuple (or list) of non-negative ints."""
    if type(shape) is tuple:
        for d in shape:
            if type(d) is not int or d < 0:
                break
        else:
            return shape  # the common case, checked without building anything
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or any(
            isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in shape):
        raise ShapeError(f"{op}: shape must be a tuple of ints, got {shape!r}")
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"{op}: shape {shape} has a negative entry (shapes must be fully specified)")
    return shape


def flatten_range(op: str, ndim: int, start_dim, end_dim) -> tuple:
    """Normalized ``(start, end)`` of flatten; a 0-d input flattens like a 1-d one."""
    n = max(ndim, 1)
    s = norm_axis(start_dim, n, op)
    e = norm_axis(end_dim, n, op)
    if s > e:
        raise ShapeError(f"{op}: start_dim {start_dim} comes after end_dim {end_dim} "
                         f"for a tensor with {ndim} axes")
    return s, e


def flatten_shape(shape, start_dim=0, end_dim=-1, op="flatten") -> tuple:
    shape = tuple(shape) or (1,)
    s, e = flatten_range(op, len(shape), start_dim, end_dim)
    return shape[:s] + (int(np.prod(shape[s:e + 1])),) + shape[e + 1:]


def permutation(op: str, dims, ndim: int) -> tuple:
    """``dims`` normalized to a permutation of ``range(ndim)``; ShapeError otherwise."""
    if not isinstance(dims, (tuple, list)):
        raise ShapeError(f"{op}: dims must be a tuple of ints, got {dims!r}")
    if len(dims) != ndim:
        raise ShapeError(f"{op}: dims {tuple(dims)} must list each of the {ndim} axes once")
    p = tuple(norm_axis(d, ndim, op) for d in dims) if ndim else ()
    if sorted(p) != list(range(ndim)):
        raise ShapeError(f"{op}: dims {tuple(dims)} is not a permutation of {ndim} axes")
    return p


def inverse_permutation(p) -> tuple:
    inv = [0] * len(p)
    for i, a in enumerate(p):
        inv[a] = i
    return tuple(inv)


def transpose_perm(op: str, ndim: int, dim0, dim1) -> tuple:
    """The permutation swapping dim0 and dim1; a 0-d input accepts 0 / -1 and stays as is."""
    n = max(ndim, 1)
    a, b = norm_axis(dim0, n, op), norm_axis(dim1, n, op)
    p = list(range(ndim))
    if ndim:
        p[a], p[b] = p[b], p[a]
    return tuple(p)


def swap_depth(op: str, depth, ndim: int) -> int | None:
    """The depth of swap_adjacent when it swaps something, else None (identity)."""
    d = _int(op, "depth", depth)
    return d if 0 <= d and d + 1 < ndim else None


def unsqueeze_shape(op: str, shape, dim) -> tuple:
    shape = tuple(shape)
    d = norm_axis(dim, len(shape) + 1, op)
    return shape[:d] + (1,) + shape[d:]


def squeeze_shape(op: str, shape, dim=None) -> tuple:
    shape = tuple(shape)
    if dim is None:
        return tuple(s for s in shape if s != 1)
    d = norm_axis(dim, max(len(shape), 1), op)
    if not shape or shape[d] != 1:
        return shape
    return shape[:d] + shape[d + 1:]


def slice_key(op: str, n: int, start, stop, step) -> slice:
    """Python's slice over length ``n`` with ``step >= 1``, as a normalized slice."""
    for name, v in (("start", start), ("stop", stop)):
        if v is not None:
            _int(op, name, v)
    step = 1 if step is None else _int(op, "step", step)
    if step < 1:
        raise DomainError(f"{op}: step must be >= 1, got {step}")
    return slice(*slice(start, stop, step).indices(n))


def slice_len(s: slice) -> int:
    return len(range(s.start, s.stop, s.step))


def normalize_index(op: str, shape, index):
    """Basic indexing plan of ``x[index]`` for ``x`` of ``shape``.

    Returns ``(key, out_shape, view_shape)``: ``key`` holds one normalized int or
    slice per input axis (``x[key]`` has ``view_shape``); ``out_shape`` adds the
    length-1 axes that ``None`` inserts.
    """
    shape = tuple(shape)
    if not isinstance(index, tuple):
        index = (index,)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexRangeError(f"{op}: an index may hold at most one Ellipsis, got {index!r}")
    for it in index:
        if not (it is None or it is Ellipsis or isinstance(it, slice)
                or (isinstance(it, (int, np.integer)) and not isinstance(it, bool))):
            raise DomainError(f"{op}: unsupported index element {it!r} "
                              f"(basic indexing only: int, slice, None, Ellipsis)")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > len(shape):
        raise IndexRangeError(f"{op}: too many indices ({used}) for a tensor of shape {shape}")
    items = []
    for it in index:
        if it is Ellipsis:
            items.extend([slice(None)] * (len(shape) - used))
        else:
            items.append(it)
    if not any(i is Ellipsis for i in index):
        items.extend([slice(None)] * (len(shape) - used))
    key, out_shape, view_shape = [], [], []
    axis = 0
    for it in items:
        if it is None:
            out_shape.append(1)
            continue
        n = shape[axis]
        if isinstance(it, slice):
            s = slice_key(op, n, it.start, it.stop, it.step)
            key.append(s)
            out_shape.append(slice_len(s))
            view_shape.append(slice_len(s))
        else:
            i = operator.index(it)
            if not -n <= i < n:
                raise IndexRangeError(f"{op}: index {i} out of range for axis {axis} of size {n} "
                                      f"(shape {shape})")
            key.append(i % n)
        axis += 1
    return tuple(key), tuple(out_shape), tuple(view_shape)


def along(axis: int, k) -> tuple:
    """The index tuple selecting ``k`` (int or slice) along ``axis``, everything elsewhere."""
    return (slice(None),) * axis + (k, Ellipsis)


def check_same_dtype(op: str, xs) -> None:
    dts = {np.dtype(x.dtype) for x in xs}
    if len(dts) > 1:
        raise DTypeError(f"{op}: inputs must share one dtype, got {', '.join(sorted(map(str, dts)))}")


# ---- reshape / flatten / squeeze / unsqueeze (views on the fast path) -----------------------

def _reshape_shape(x, *, shape):
    shape = shape_arg("reshape", shape)
    if math.prod(shape) != math.prod(x):
        raise ShapeError(f"reshape: cannot view shape {tuple(x)} ({math.prod(x)} entries) "
                         f"as {shape} ({math.prod(shape)} entries)")
    return shape


defspec("reshape",
        lambda x, *, shape: np.reshape(x, shape_arg("reshape", shape)),
        lambda g, x, *, shape: (np.reshape(g, x.shape),),
        _reshape_shape, 1)

defspec("flatten",
        lambda x, *, start_dim=0, end_dim=-1: np.reshape(x, flatten_shape(x.shape, start_dim, end_dim)),
        lambda g, x, *, start_dim=0, end_dim=-1: (np.reshape(g, x.shape),),
        lambda x, *, start_dim=0, end_dim=-1: flatten_shape(x, start_dim, end_dim),
        1)

defspec("unsqueeze",
        lambda x, *, dim: np.reshape(x, unsqueeze_shape("unsqueeze", x.shape, dim)),
        lambda g, x, *, dim: (np.reshape(g, x.shape),),
        lambda x, *, dim: unsqueeze_shape("unsqueeze", x, dim),
        1)

defspec("squeeze",
        lambda x, *, dim=None: np.reshape(x, squeeze_shape("squeeze", x.shape, dim)),
        lambda g, x, *, dim=None: (np.reshape(g, x.shape),),
        lambda x, *, dim=None: squeeze_shape("squeeze", x, dim),
        1)


# ---- axis moves -----------------------------------------------------------------------------

def _transpose(x, *, dim0, dim1):
    return np.transpose(x, transpose_perm("transpose", x.ndim, dim0, dim1)).copy()


def _transpose_vjp(g, x, *, dim0, dim1):
    # A swap is its own inverse.
    return (np.transpose(g, transpose_perm("transpose", x.ndim, dim0, dim1)).copy(),)


defspec("transpose", _transpose, _transpose_vjp,
        lambda x, *, dim0, dim1: tuple(x[p] for p in transpose_perm("transpose", len(x), dim0, dim1)),
        1)

defspec("permute",
        lambda x, *, dims: np.transpose(x, permutation("permute", dims, x.ndim)).copy(),
        lambda g, x, *, dims: (np.transpose(g, inverse_permutation(permutation("permute", dims, x.ndim))).copy(),),
        lambda x, *, dims: tuple(x[p] for p in permutation("permute", dims, len(x))),
        1)


def _swap(x, *, depth):
    d = swap_depth("swap_adjacent", depth, x.ndim)
    return x.copy() if d is None else np.swapaxes(x, d, d + 1).copy()


def _swap_shape(x, *, depth):
    x = tuple(x)
    d = swap_depth("swap_adjacent", depth, len(x))
    return x if d is None else x[:d] + (x[d + 1], x[d]) + x[d + 2:]


defspec("swap_adjacent", _swap, lambda g, x, *, depth: (_swap(g, depth=depth),), _swap_shape, 1)


# ---- broadcast_to ---------------------------------------------------------------------------

def _broadcast_shape(x, *, shape):
    return broadcast_plan(tuple(x), shape_arg("broadcast_to", shape), "broadcast_to")[1]


defspec("broadcast_to",
        lambda x, *, shape: np.broadcast_to(x, shape_arg("broadcast_to", shape)).copy(),
        lambda g, x, *, shape: (sum_to_shape(g, x.shape),),
        _broadcast_shape, 1)


# ---- concat / stack (variadic) --------------------------------------------------------------

def _concat_shape(*xs, axis=0):
    if not xs:
        raise ShapeError("concat: needs at least one input")
    nd = len(xs[0])
    a = axis_of("concat", axis, nd)
    for s in xs[1:]:
        if len(s) != nd or any(p != q for k, (p, q) in enumerate(zip(s, xs[0])) if k != a):
            raise ShapeError(f"concat: shapes {' and '.join(str(tuple(t)) for t in xs)} differ "
                             f"outside axis {axis}")
    return tuple(xs[0][:a]) + (sum(s[a] for s in xs),) + tuple(xs[0][a + 1:])


def _concat(*xs, axis=0):
    check_same_dtype("concat", xs)
    return np.concatenate(xs, axis=axis_of("concat", axis, xs[0].ndim))


def _concat_vjp(g, *xs, axis=0):
    a = axis_of("concat", axis, xs[0].ndim)
    offs = np.cumsum([0] + [x.shape[a] for x in xs])
    return tuple(g[along(a, slice(offs[i], offs[i + 1]))].copy() for i in range(len(xs)))


defspec("concat", _concat, _concat_vjp, _concat_shape, -1)


def _stack_shape(*xs, axis=0):
    if not xs:
        raise ShapeError("stack: needs at least one input")
    for s in xs[1:]:
        if tuple(s) != tuple(xs[0]):
            raise ShapeError(f"stack: shapes {' and '.join(str(tuple(t)) for t in xs)} must be equal")
    a = norm_axis(axis, len(xs[0]) + 1, "stack")
    return tuple(xs[0][:a]) + (len(xs),) + tuple(xs[0][a:])


def _stack(*xs, axis=0):
    check_same_dtype("stack", xs)
    return np.stack(xs, axis=norm_axis(axis, xs[0].ndim + 1, "stack"))


def _stack_vjp(g, *xs, axis=0):
    a = norm_axis(axis, xs[0].ndim + 1, "stack")
    return tuple(g[along(a, i)].copy() for i in range(len(xs)))


defspec("stack", _stack, _stack_vjp, _stack_shape, -1)


# ---- slice / getitem / select ---------------------------------------------------------------

def slice_plan(op, shape, axis, start, stop, step):
    a = axis_of(op, axis, len(shape))
    return a, slice_key(op, shape[a], start, stop, step)


def _slice_shape(x, *, axis, start=None, stop=None, step=1):
    a, s = slice_plan("slice", x, axis, start, stop, step)
    return tuple(x[:a]) + (slice_len(s),) + tuple(x[a + 1:])


def _slice(x, *, axis, start=None, stop=None, step=1):
    a, s = slice_plan("slice", x.shape, axis, start, stop, step)
    return x[along(a, s)].copy()


def _slice_vjp(g, x, *, axis, start=None, stop=None, step=1):
    a, s = slice_plan("slice", x.shape, axis, start, stop, step)
    dx = np.zeros(x.shape, dtype=np.result_type(g, x))
    dx[along(a, s)] = g
    return (dx,)


defspec("slice", _slice, _slice_vjp, _slice_shape, 1)


def _getitem(x, *, index):
    key, out_shape, _ = normalize_index("getitem", x.shape, index)
    return np.reshape(x[key + (Ellipsis,)], out_shape).copy()


def _getitem_vjp(g, x, *, index):
    key, _, view_shape = normalize_index("getitem", x.shape, index)
    dx = np.zeros(x.shape, dtype=np.result_type(g, x))
    dx[key + (Ellipsis,)] = np.reshape(g, view_shape)
    return (dx,)


defspec("getitem", _getitem, _getitem_vjp,
        lambda x, *, index: normalize_index("getitem", x, index)[1], 1)


def select_plan(op, shape, axis, index):
    a = axis_of(op, axis, len(shape))
    i = _int(op, "index", index)
    n = shape[a]
    if not -n <= i < n:
        raise IndexRangeError(f"{op}: index {i} out of range for axis {axis} of size {n} (shape {tuple(shape)})")
    return a, i % n


def _select(x, *, axis, index):
    a, i = select_plan("select", x.shape, axis, index)
    return x[along(a, i)].copy()


def _select_vjp(g, x, *, axis, index):
    a, i = select_plan("select", x.shape, axis, index)
    dx = np.zeros(x.shape, dtype=np.result_type(g, x))
    dx[along(a, i)] = g
    return (dx,)


def _select_shape(x, *, axis, index):
    a, _ = select_plan("select", x, axis, index)
    return tuple(x[:a]) + tuple(x[a + 1:])


defspec("select", _select, _select_vjp, _select_shape, 1)


# ---- flip ----------------------------------------------------------------------------------

def flip_axes(op: str, dims, ndim: int) -> tuple:
    """``dims`` (an int or a sequence of distinct ints) as sorted non-negative axes; a 0-d input
    accepts 0 / -1, which flip nothing."""
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        dims = (dims,)
    if not isinstance(dims, (tuple, list)):
        raise ShapeError(f"{op}: dims must be a tuple of ints, got {dims!r}")
    axes = [norm_axis(_int(op, "dim", d), max(ndim, 1), op) for d in dims]
    for a in set(axes):
        if axes.count(a) > 1:
            raise ShapeError(f"{op}: dim {a} appears more than once in dims {tuple(dims)}")
    return tuple(sorted(axes)) if ndim else ()


def _flip(x, *, dims):
    return np.array(np.flip(x, flip_axes("flip", dims, x.ndim)), copy=True, order="C")


def _flip_shape(x, *, dims):
    flip_axes("flip", dims, len(x))
    return tuple(x)


defspec("flip", _flip, lambda g, x, *, dims: (_flip(g, dims=dims),), _flip_shape, 1,
        why="its own adjoint in one copy; as a gather per axis, each axis would cost a gather forward "
            "and a scatter-add backward")


# ---- detach ---------------------------------------------------------------------------------

defspec("detach",
        lambda x: np.array(x, copy=True),
        lambda g, x: (np.zeros(x.shape, dtype=np.result_type(g, x)),),
        lambda x: tuple(x),
        1)

__all__ = ["axis_of", "shape_arg", "flatten_shape", "permutation", "inverse_permutation",
           "transpose_perm", "swap_depth", "unsqueeze_shape", "squeeze_shape", "slice_key",
           "slice_len", "normalize_index", "along", "check_same_dtype", "slice_plan", "select_plan", "flip_axes"]
