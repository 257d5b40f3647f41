"""Shapes as tuples of ints, broadcasting plans as the seeds' axis maps, axis checks.

A broadcast plan ``(in_dims, out_dims, axis_map)`` follows the seeds'
``broadcast_to`` kernel: ``len(axis_map) == len(out_dims)``; ``axis_map[j] == 0``
means output axis ``j`` is inserted (the input coordinate along it is 0);
``axis_map[j] == k + 1`` means output axis ``j`` reads input axis ``k``. When
``in_dims[k] == 1`` and ``out_dims[j] > 1`` that input axis is stretched (its
coordinate is 0 too). Input axes appear in increasing order. NumPy-style
broadcasting is planned through the same map (:func:`broadcast_plan`).

    >>> broadcast_shapes((2, 1, 3), (4, 3))
    (2, 4, 3)
    >>> broadcast_plan((4, 1), (2, 4, 3))
    ((4, 1), (2, 4, 3), (0, 1, 2))
"""

from __future__ import annotations

from math import prod

from .errors import DimRangeError, ShapeError

Shape = tuple


class Size(tuple):
    """torch.Size: a tensor's shape, a tuple of ints (``x.shape``, ``x.size()``)."""

    __slots__ = ()

    def __new__(cls, dims=()):
        out = []
        for d in dims:
            if not hasattr(d, "__index__"):
                raise TypeError(f"Size: expected a sequence of integers, got an element of type {type(d).__name__}")
            out.append(d.__index__())
        return tuple.__new__(cls, out)

    def numel(self) -> int:
        return prod(self)

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __repr__(self):
        return f"torchlean.Size({list(self)})"

    __str__ = __repr__

    def __format__(self, spec):
        # Inside f-strings (error messages, logs) a shape reads as the tuple it is: ``(4, 3)``.
        return format(tuple(self), spec)


__all__ = [
    "Shape", "Size", "size", "broadcast_shapes", "broadcast_plan", "check_plan",
    "reduced_axes", "broadcast_axes", "norm_axis", "norm_axes", "require_ndim", "require_same", "moveaxis_perm",
]


def size(shape) -> int:
    return prod(shape)


def _broadcast2(a: tuple, b: tuple):
    n = max(len(a), len(b))
    a1 = (1,) * (n - len(a)) + a
    b1 = (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a1, b1):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def broadcast_shapes(*shapes, op: str = "broadcast") -> tuple:
    """NumPy's broadcasting of several shapes; ShapeError naming ``op`` if impossible."""
    out = tuple(shapes[0])
    for s in shapes[1:]:
        r = _broadcast2(out, tuple(s))
        if r is None:
            raise ShapeError(
                f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} do not broadcast")
        out = r
    return out


def broadcast_plan(in_dims: tuple, out_dims: tuple, op: str = "broadcast_to"):
    """The seeds' axis map for NumPy-style (right-aligned) broadcasting of ``in_dims`` to ``out_dims``."""
    in_dims, out_dims = tuple(in_dims), tuple(out_dims)
    lead = len(out_dims) - len(in_dims)
    if lead < 0:
        raise ShapeError(f"{op}: cannot broadcast {in_dims} to fewer axes {out_dims}")
    amap = []
    for j, d in enumerate(out_dims):
        k = j - lead
        if k < 0:
            amap.append(0)
            continue
        if in_dims[k] != d and in_dims[k] != 1:
            raise ShapeError(f"{op}: cannot broadcast {in_dims} to {out_dims} (axis {k}: {in_dims[k]} vs {d})")
        amap.append(k + 1)
    return in_dims, out_dims, tuple(amap)


def check_plan(in_dims, out_dims, axis_map, op: str = "broadcast_to") -> None:
    """Validate an explicit axis map (seeds' ``CanBroadcastTo``); raise ShapeError naming ``op``."""
    in_dims, out_dims, axis_map = tuple(in_dims), tuple(out_dims), tuple(axis_map)
    if len(axis_map) != len(out_dims):
        raise ShapeError(f"{op}: axis_map {axis_map} must have one entry per output axis of {out_dims}")
    last = 0
    seen = set()
    for j, a in enumerate(axis_map):
        if a == 0:
            continue
        k = a - 1
        if not (0 <= k < len(in_dims)) or a <= last:
            raise ShapeError(f"{op}: axis_map {axis_map} reads input axes out of order or range for {in_dims}")
        if in_dims[k] != out_dims[j] and in_dims[k] != 1:
            raise ShapeError(f"{op}: cannot broadcast {in_dims} to {out_dims} via {axis_map}")
        last = a
        seen.add(k)
    for k, d in enumerate(in_dims):
        if k not in seen and d != 1:
            raise ShapeError(f"{op}: input axis {k} of {in_dims} (size {d}) is not mapped by {axis_map}")


def reduced_axes(in_dims: tuple, out_dims: tuple, axis_map: tuple) -> tuple:
    """Output axes that the adjoint of broadcast_to must sum over (inserted or stretched)."""
    axes = []
    for j, a in enumerate(axis_map):
        if a == 0 or (in_dims[a - 1] == 1 and out_dims[j] != 1):
            axes.append(j)
    return tuple(axes)


def broadcast_axes(shape, out_shape) -> tuple:
    """Axes of ``out_shape`` that NumPy broadcasting of ``shape`` to it adds or stretches: what the
    adjoint of that broadcast (``sum_to_shape``) sums over.

        >>> broadcast_axes((3, 1), (2, 3, 4))
        (0, 2)
    """
    lead = len(out_shape) - len(shape)
    return tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape) if d == 1 and out_shape[lead + k] != 1)


def norm_axis(axis: int, ndim: int, op: str) -> int:
    """Python-style negative axes; ShapeError naming ``op`` when out of range."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise ShapeError(f"{op}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < max(ndim, 1):
        raise DimRangeError(f"{op}: axis {axis} out of range for a tensor with {ndim} axes")
    return axis % ndim if ndim else 0


def norm_axes(axes, ndim: int, op: str) -> tuple:
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, int):
        axes = (axes,)
    out = tuple(sorted(norm_axis(a, ndim, op) for a in axes))
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: repeated axis in {tuple(axes)}")
    return out


def require_ndim(shape, ndims, op: str, what: str = "input") -> None:
    if isinstance(ndims, int):
        ndims = (ndims,)
    if len(shape) not in ndims:
        want = " or ".join(str(n) for n in ndims)
        raise ShapeError(f"{op}: {what} must have {want} axes, got shape {tuple(shape)}")


def require_same(a, b, op: str) -> None:
    if tuple(a) != tuple(b):
        raise ShapeError(f"{op}: shapes {tuple(a)} and {tuple(b)} must be equal")


def moveaxis_perm(ndim: int, source: int, dest: int) -> tuple:
    """The axis permutation of NumPy's ``moveaxis(x, source, dest)`` (for the ``permute`` kernel).

        >>> moveaxis_perm(4, 1, -1)
        (0, 2, 3, 1)
    """
    order = [i for i in range(ndim) if i != source % ndim]
    order.insert(dest % ndim, source % ndim)
    return tuple(order)
