"""The dtype table: torch's dtype names, their NumPy storage, and torch's type promotion.

One :class:`DType` per element type. A dtype whose storage NumPy lacks (``bfloat16`` without the
``ml_dtypes`` package) is still a dtype: it can be named, compared, promoted and asked for
``finfo``; creating a tensor of it raises :class:`~torchlean.errors.DTypeError` saying so. The
mixed-precision kernels add themselves per dtype; nothing here changes for them.

    >>> import torchlean as tl
    >>> tl.float32, tl.long, tl.float32.is_floating_point
    (torchlean.float32, torchlean.int64, True)
    >>> tl.promote_types(tl.int32, tl.float16)
    torchlean.float16
"""

from __future__ import annotations

import numpy as np

from .errors import DTypeError

__all__ = ["DType", "as_dtype", "bfloat16", "bool_", "dtype_of", "finfo", "float16", "float32", "float64", "iinfo",
           "int16", "int32", "int64", "int8", "np_dtype", "promote_types", "result_type", "uint8",
           "get_default_dtype", "set_default_dtype", "can_cast", "is_float_np", "BF16_NP", "UNIT_ROUNDOFF"]


def _bf16_numpy():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


class DType:
    """An element type: ``name``, ``itemsize`` and torch's predicates. ``np`` is its NumPy storage
    dtype (None where NumPy has none); ``np.dtype(d)`` and ``array.astype(d)`` accept a DType."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_signed", "kind", "rank")
    is_complex = False

    def __init__(self, name, storage, itemsize, kind, rank):
        self.name = name
        self.np = storage
        self.itemsize = itemsize
        self.kind = kind                       # NumPy's kind letter: b, u, i, f
        self.is_floating_point = kind == "f"
        self.is_signed = kind in "if"
        self.rank = rank                       # order within the kind, for promotion

    @property
    def dtype(self):
        """The NumPy dtype (what ``np.dtype(d)`` reads)."""
        if self.np is None:
            raise DTypeError(f"{self.name}: no host storage for this dtype (install ml_dtypes for bfloat16 on the "
                             f"CPU); mixed-precision kernels are not available yet")
        return self.np

    def to_real(self):
        return self

    def __repr__(self):
        return f"torchlean.{self.name}"

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, DType):
            return other is self
        if other is None or self.np is None:
            return False
        try:
            return np.dtype(other) == self.np
        except TypeError:
            return False

    def __hash__(self):
        return hash(self.np) if self.np is not None else hash(self.name)

    def __reduce__(self):
        return (as_dtype, (self.name,))


bool_ = DType("bool", np.dtype(np.bool_), 1, "b", 0)
uint8 = DType("uint8", np.dtype(np.uint8), 1, "u", 1)
int8 = DType("int8", np.dtype(np.int8), 1, "i", 1)
int16 = DType("int16", np.dtype(np.int16), 2, "i", 2)
int32 = DType("int32", np.dtype(np.int32), 4, "i", 3)
int64 = DType("int64", np.dtype(np.int64), 8, "i", 4)
float16 = DType("float16", np.dtype(np.float16), 2, "f", 1)
bfloat16 = DType("bfloat16", _bf16_numpy(), 2, "f", 1)
float32 = DType("float32", np.dtype(np.float32), 4, "f", 3)
float64 = DType("float64", np.dtype(np.float64), 8, "f", 4)

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)

#: torch's names (and aliases) for each dtype.
NAMES = {d.name: d for d in ALL}
NAMES.update({"long": int64, "int": int32, "short": int16, "float": float32, "double": float64, "half": float16,
              "bool_": bool_})

_BY_NP = {d.np: d for d in ALL if d.np is not None}
# Other host dtypes a NumPy array may arrive with map to the nearest torch dtype on creation.
_NP_ALIASES = {np.dtype(np.uint16): int32, np.dtype(np.uint32): int64, np.dtype(np.uint64): int64}


class _Default:
    dtype = float32


#: NumPy's dtype of bfloat16 storage (``ml_dtypes.bfloat16``), or None without ml_dtypes.
BF16_NP = bfloat16.np


#: The unit roundoff u of the half-precision dtypes (half the distance from 1 to the next number):
#: float16 keeps 11 significant bits, bfloat16 8. One rounding to the dtype errs by at most u relative.
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def is_float_np(dt) -> bool:
    """True for a NumPy dtype of floating point values: NumPy's floats and bfloat16 (whose NumPy kind
    letter is "V", a user-defined type)."""
    return dt.kind == "f" or (BF16_NP is not None and dt == BF16_NP)


def get_default_dtype() -> DType:
    """The dtype of tensors made from Python floats (float32 unless :func:`set_default_dtype`)."""
    return _Default.dtype


def set_default_dtype(d) -> None:
    d = as_dtype(d)
    if d not in (float32, float64, float16, bfloat16):
        raise DTypeError(f"set_default_dtype: only floating-point dtypes can be the default, got {d}")
    _Default.dtype = d


def dtype_of(np_dt) -> DType:
    """The DType of a NumPy dtype (an array's ``.dtype``)."""
    d = _BY_NP.get(np_dt)
    if d is None:
        d = _BY_NP.get(np.dtype(np_dt))
        if d is None:
            raise DTypeError(f"dtype {np_dt} has no torchlean counterpart")
    return d


def as_dtype(d) -> DType | None:
    """A DType from a DType, a torch-style name (``"float"``, ``"long"``), a NumPy dtype or type,
    or a Python type (``float`` -> the default dtype, ``int`` -> int64, ``bool``)."""
    if d is None or isinstance(d, DType):
        return d
    if isinstance(d, str):
        out = NAMES.get(d.removeprefix("torch.").removeprefix("torchlean."))
        if out is None:
            raise DTypeError(f"unknown dtype {d!r}")
        return out
    if d is float:
        return _Default.dtype
    if d is int:
        return int64
    if d is bool:
        return bool_
    try:
        nd = np.dtype(d)
    except TypeError:
        raise DTypeError(f"not a dtype: {d!r}") from None
    out = _BY_NP.get(nd) or _NP_ALIASES.get(nd)
    if out is None:
        raise DTypeError(f"dtype {nd} has no torchlean counterpart (complex and string dtypes are not supported)")
    return out


def np_dtype(d) -> np.dtype | None:
    """The NumPy storage dtype of ``d`` (anything :func:`as_dtype` accepts); None stays None."""
    return None if d is None else as_dtype(d).dtype


def promote_types(a, b) -> DType:
    """torch.promote_types: the smallest dtype both ``a`` and ``b`` convert to without losing range
    (bool < unsigned/signed integers < floats; uint8 with int8 gives int16; float16 with bfloat16
    gives float32)."""
    a, b = as_dtype(a), as_dtype(b)
    if a is b:
        return a
    if a.kind == "b":
        return b
    if b.kind == "b":
        return a
    if a.kind == "f" or b.kind == "f":
        if a.kind != "f":
            return b
        if b.kind != "f":
            return a
        if a.rank == b.rank:  # float16 with bfloat16
            return float32
        return a if a.rank > b.rank else b
    if a.kind == b.kind:
        return a if a.rank > b.rank else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    return s if s.rank > 1 else int16          # uint8 with int8 -> int16


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}


def _combine(higher, lower):
    """torch's combine_categories: a higher-category result wins unless it is bool or ``lower`` is a float
    (then the two promote)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.kind == "f":
        return higher
    if higher.kind == "b" or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> DType:
    """torch.result_type over tensors and Python scalars: dimensioned tensors decide within their
    category; 0-d tensors and then Python numbers only raise the category (an int tensor times 2.5
    is float32; a float32 tensor plus a float64 0-d tensor stays float32)."""
    dim = zero = wrapped = None
    for o in operands:
        if isinstance(o, bool):
            d, slot = bool_, "w"
        elif isinstance(o, (int, np.integer)) and not hasattr(o, "shape"):
            d, slot = int64, "w"
        elif isinstance(o, float):
            d, slot = _Default.dtype, "w"
        elif isinstance(o, np.generic):
            d, slot = dtype_of(o.dtype), "z"
        else:
            d = o.dtype if isinstance(o.dtype, DType) else dtype_of(o.dtype)
            slot = "z" if len(o.shape) == 0 else "d"
        if slot == "d":
            dim = d if dim is None else promote_types(dim, d)
        elif slot == "z":
            zero = d if zero is None else promote_types(zero, d)
        else:
            # Python numbers promote by category only: a float scalar is the default float.
            wrapped = d if wrapped is None or _CATEGORY[d.kind] > _CATEGORY[wrapped.kind] else wrapped
    out = _combine(dim, _combine(zero, wrapped))
    if out is None:
        raise DTypeError("result_type: needs at least one operand")
    return out


def can_cast(from_, to) -> bool:
    """torch.can_cast: casting between categories only goes up (bool -> int -> float)."""
    a, b = as_dtype(from_), as_dtype(to)
    return _CATEGORY[a.kind] <= _CATEGORY[b.kind] and not (a.kind != "b" and b.kind == "b")


class finfo:
    """Machine limits of a floating-point dtype (torch.finfo): bits, eps, max, min, tiny, resolution."""

    def __init__(self, dtype=None):
        d = as_dtype(dtype) if dtype is not None else _Default.dtype
        if d.kind != "f":
            raise DTypeError(f"finfo: {d} is not a floating-point dtype (use iinfo)")
        if d is bfloat16:
            self.bits, self.eps, self.max, self.tiny, self.resolution = 16, 2.0 ** -7, 3.3895313892515355e38, \
                2.0 ** -126, 0.01
        else:
            f = np.finfo(d.np)
            self.bits, self.eps, self.max, self.tiny, self.resolution = f.bits, float(f.eps), float(f.max), \
                float(f.tiny), 10.0 ** -f.precision
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = d.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:e}, max={self.max:e}, eps={self.eps:e}, "
                f"smallest_normal={self.tiny:e}, tiny={self.tiny:e}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer (or bool) dtype (torch.iinfo): bits, min, max."""

    def __init__(self, dtype):
        d = as_dtype(dtype)
        if d.kind == "f":
            raise DTypeError(f"iinfo: {d} is a floating-point dtype (use finfo)")
        i = np.iinfo(d.np) if d.kind != "b" else None
        self.bits = 8 if i is None else i.bits
        self.min = 0 if i is None else int(i.min)
        self.max = 1 if i is None else int(i.max)
        self.dtype = d.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
