"""In-place writes: ``x.add_(y)``, ``x += y``, ``x[i] = v``, ``x.copy_(y)``, ``x.zero_()``, ``x.normal_()``.

Every in-place op is its out-of-place op followed by one write (:func:`apply_inplace`):

* the result is computed out of place (recorded when grad mode is on), cast back to ``x``'s dtype
  where torch allows it (a float result cannot go into an integer tensor: DTypeError), and written
  into ``x``'s own buffer, so every tensor sharing that buffer (``x.data``, a ``reshape`` of ``x``, a
  NumPy array from ``x.numpy()``) sees it;
* ``x`` then stands for the recorded result in autograd (its ``grad_fn`` is the op's);
* the write bumps ``x``'s version counter and marks every live recorded node that saved ``x``'s
  buffer for its backward, whose backward then raises AutogradError naming the op, as torch's
  saved-tensor check does; a leaf that requires grad cannot be written in place outside ``no_grad``;
* a tensor read by basic indexing (``x[0]``, ``x[:, 1:3]``) remembers where it came from, and an
  in-place write to it is written back there, as into a torch view.

    >>> import torchlean as tl
    >>> x = tl.zeros(2, 3)
    >>> x[0] += 1
    >>> x[:, 2] = tl.tensor([5.0, 6.0])
    >>> x.tolist()
    [[1.0, 1.0, 5.0], [0.0, 0.0, 6.0]]
"""

from __future__ import annotations

from numbers import Number

import numpy as np

from ..autograd import is_grad_enabled, mark_written, no_grad, resolve
from ..dtypes import can_cast
from ..errors import AutogradError, DeviceError, DTypeError, IndexRangeError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..tensor import Tensor
from . import creation as _creation
from . import index as _index
from .table import METHODS, export

#: The out-of-place ops with an in-place form ``<name>_`` (made when the out-of-place method exists).
ELEMENTWISE = ("add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "neg",
               "negative", "abs", "absolute", "sign", "sgn", "floor", "ceil", "round", "trunc", "fix", "frac", "exp",
               "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
               "acos", "atan", "atan2", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "asinh", "acosh",
               "atanh", "sigmoid", "relu", "erf", "erfc", "erfinv", "clamp", "clip", "clamp_min", "clamp_max",
               "lerp", "hypot", "reciprocal", "square", "nan_to_num", "xlogy", "logical_and", "logical_or",
               "logical_not", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
               "bitwise_left_shift", "bitwise_right_shift", "fmin", "fmax", "maximum", "minimum", "addcmul",
               "addcdiv", "addmm", "addmv", "baddbmm", "masked_fill", "masked_scatter", "index_add", "index_copy",
               "index_fill", "index_put", "scatter", "scatter_add", "scatter_reduce", "cumsum", "cumprod", "tril",
               "triu", "eq", "ne", "lt", "le", "gt", "ge", "copysign", "logit", "mvlgamma", "digamma", "lgamma")
#: In-place forms that change the tensor's shape: the tensor takes the result's shape.
RESHAPING = ("t", "transpose", "swapaxes", "swapdims", "unsqueeze", "squeeze", "resize_as")
#: Augmented assignment operators and the in-place op each runs.
AUGMENTED = {"__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_",
             "__ifloordiv__": "floor_divide_", "__imod__": "remainder_", "__ipow__": "pow_",
             "__iand__": "bitwise_and_", "__ior__": "bitwise_or_", "__ixor__": "bitwise_xor_",
             "__ilshift__": "bitwise_left_shift_", "__irshift__": "bitwise_right_shift_"}


def _check_writable(x: Tensor, op: str) -> None:
    if is_grad_enabled() and x.requires_grad and x._tape is None:
        raise AutogradError(f"{op}: a leaf tensor that requires grad (shape {tuple(x.shape)}) is being used in an "
                            f"in-place operation; wrap the write in torchlean.no_grad() or write to a clone")


def _write(x: Tensor, value, op: str, writer: Tensor | None = None) -> None:
    """Write array ``value`` (x's shape and dtype) into x's buffer, after the autograd bookkeeping."""
    if getattr(x, "_untracked", False):
        x._vc = getattr(x, "_vc", 0) + 1
    else:
        mark_written(x, op, writer)
    if value is not x._value:
        get_kernels(x.device).assign(x._value, value)


def _write_back(x: Tensor, op: str) -> None:
    """After a write to a tensor read by basic indexing, write it into the tensor it was read from."""
    base = getattr(x, "_base", None)
    if base is not None:
        src, index = base
        setitem(src, index, x)


def apply_inplace(x: Tensor, out: Tensor, op: str) -> Tensor:
    """Make ``x`` hold ``out`` (the out-of-place result of ``op`` on ``x``): see the module docs."""
    if tuple(out.shape) != tuple(x.shape):
        raise ShapeError(f"{op}: the result's shape {tuple(out.shape)} does not match the tensor's shape "
                         f"{tuple(x.shape)} (an in-place op cannot broadcast its target)")
    if out.dtype != x.dtype:
        if not can_cast(out.dtype, x.dtype):
            raise DTypeError(f"{op}: result type {out.dtype.name} can't be cast to the tensor's dtype "
                             f"{x.dtype.name}")
        out = out.to(dtype=x.dtype)
    if out.device != x.device:
        raise DeviceError(f"{op}: result on {out.device}, tensor on {x.device}")
    _check_writable(x, op)
    recorded = out._tape is not None and is_grad_enabled()
    _write(x, out._value, op, out if recorded else None)
    if recorded:
        tape, i = resolve(out)
        x._tape, x._id, x.requires_grad = tape, i, True
    _write_back(x, op)
    return x


def _rebind(x: Tensor, out: Tensor, op: str) -> Tensor:
    """An in-place op that changes ``x``'s shape (``unsqueeze_``, ``t_``): ``x`` becomes ``out``."""
    _check_writable(x, op)
    x._value = out._value
    x._vc = getattr(x, "_vc", 0) + 1
    if out._tape is not None:
        x._tape, x._id, x.requires_grad = out._tape, out._id, True
    return x


def _inplace_method(name, base):
    def method(self, *args, **kwargs):
        return apply_inplace(self, getattr(self, base)(*args, **kwargs), name)
    method.__name__ = name
    method.__doc__ = f"In-place :meth:`Tensor.{base}` (see :mod:`torchlean.ops.inplace`)."
    return method


def _rebind_method(name, base):
    def method(self, *args, **kwargs):
        return _rebind(self, getattr(self, base)(*args, **kwargs), name)
    method.__name__ = name
    return method


def _augmented(name, inplace):
    def method(self, other):
        return getattr(self, inplace)(other)
    method.__name__ = name
    return method


# ---- writes of given values -----------------------------------------------------------------

@export(method=True, function=False)
def copy_(self, src, non_blocking=False):
    """Copy ``src`` (a tensor of any device and dtype broadcastable to ``self``, an array or a number)
    into ``self``; gradients flow to ``src``."""
    if not isinstance(src, Tensor):
        if isinstance(src, Number):
            return fill_(self, src)
        src = Tensor(np.asarray(src))
    out = src
    if out.device != self.device:
        out = out.to(self.device)
    if out.dtype != self.dtype:
        out = out.to(dtype=self.dtype)
    if tuple(out.shape) != tuple(self.shape):
        try:
            out = out.expand(*self.shape)
        except TorchLeanError:
            raise ShapeError(f"copy_: source of shape {tuple(src.shape)} does not broadcast to {tuple(self.shape)}") \
                from None
    if out is src and out.requires_grad and is_grad_enabled():
        out = out.clone()
    _check_writable(self, "copy_")
    recorded = out._tape is not None and is_grad_enabled()
    _write(self, out._value, "copy_", out if recorded else None)
    if recorded:
        self._tape, self._id, self.requires_grad = out._tape, out._id, True
    elif is_grad_enabled() and self._tape is not None:
        self._tape, self._id, self.requires_grad = None, -1, False   # overwritten by a constant
    _write_back(self, "copy_")
    return self


@export(method=True, function=False)
def fill_(self, value):
    """Every element set to ``value`` (a number or a one-element tensor)."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError(f"fill_: value must be a 0-d tensor, got shape {tuple(value.shape)}")
        if value.requires_grad and is_grad_enabled():
            return copy_(self, value.reshape(()).expand(*self.shape))
        value = value.item()
    if not isinstance(value, Number):
        raise DTypeError(f"fill_: value must be a number or a 0-d tensor, got {type(value).__name__}")
    _check_writable(self, "fill_")
    _write(self, self._value, "fill_")
    get_kernels(self.device).fill(self._value, value)
    if is_grad_enabled() and self._tape is not None:
        self._tape, self._id, self.requires_grad = None, -1, False
    _write_back(self, "fill_")
    return self


@export(method=True, function=False)
def zero_(self):
    return fill_(self, 0)


@export(method=True, function=False)
def fill_diagonal_(self, fill_value, wrap=False):
    """torch's ``fill_diagonal_``: the main diagonal (every index equal) set to ``fill_value``; a 2-D
    tall matrix with ``wrap=True`` restarts the diagonal every ``cols + 1`` rows."""
    if self.dim() < 2:
        raise ShapeError("fill_diagonal_: dimensions must be larger than 1")
    shape = tuple(self.shape)
    if self.dim() > 2 and len(set(shape)) != 1:
        raise ShapeError("fill_diagonal_: all dimensions of input must be of equal length")
    if self.dim() == 2:
        rows, cols = shape
        numel = rows * cols if wrap else min(rows, cols) * cols
        pos = np.arange(0, numel, cols + 1)
        index = (pos // cols, pos % cols) if cols else (pos, pos)
    else:
        k = np.arange(shape[0])
        index = (k,) * self.dim()
    setitem(self, index, fill_value)
    return self


# ---- random fills: the default counter-based stream (or a Generator's) ----------------------------

def _fill_random(self, values: Tensor, op):
    """Overwrite ``self`` with freshly drawn ``values`` (a constant: no gradient flows through a draw)."""
    _check_writable(self, op)
    _write(self, values._value, op)
    if is_grad_enabled() and self._tape is not None:
        self._tape, self._id, self.requires_grad = None, -1, False
    _write_back(self, op)
    return self


def _random_method(name, draw):
    def method(self, *args, generator=None, **kwargs):
        return _fill_random(self, draw(self, *args, generator=generator, **kwargs), name)
    method.__name__ = name
    method.__doc__ = f"Fill in place with :func:`torchlean.ops.creation.{draw.__name__}`'s values."
    return method


for _name, _draw in (("uniform_", _creation.uniform_like), ("normal_", _creation.normal_like),
                     ("exponential_", _creation.exponential_like), ("cauchy_", _creation.cauchy_like),
                     ("log_normal_", _creation.log_normal_like), ("geometric_", _creation.geometric_like),
                     ("random_", _creation.random_like), ("bernoulli_", _creation.bernoulli_like)):
    export(_name, method=True, function=False)(_random_method(_name, _draw))


# ---- x[index] = value -------------------------------------------------------------------------

def _host_index(index, device):
    """``index`` in the form NumPy/CuPy indexing takes (tensors as arrays on ``device``)."""
    if isinstance(index, tuple):
        return tuple(_host_index(i, device) for i in index)
    if isinstance(index, Tensor):
        if index._value.dtype.kind == "f":
            raise IndexRangeError("setitem: tensors used as indices must be long, int, byte or bool tensors")
        if index.device == device:
            return index._value
        if index.device == "cpu":  # as torch: CPU indices serve a tensor on any device
            return index.to(device=device)._value if index.numel() != 1 else index.item()
        if index.numel() != 1:
            raise DeviceError(f"setitem: index tensor on {index.device}, tensor on {device}")
        return index.item()
    if isinstance(index, list):
        a = np.asarray(index)
        if a.dtype.kind == "f":
            raise IndexRangeError("setitem: index lists must hold integers or bools")
        return a
    return index


def setitem(x: Tensor, index, value) -> None:
    """``x[index] = value`` with torch's semantics (every index form of ``__getitem__``; ``value`` a number
    or a tensor broadcast to the indexed shape, converted to ``x``'s dtype); recorded by autograd when
    ``x`` or ``value`` takes part in a graph."""
    _check_writable(x, "setitem")
    grad = is_grad_enabled() and (x.requires_grad or (isinstance(value, Tensor) and value.requires_grad))
    if grad:
        out = _index.setitem_value(x, index, value)
        apply_inplace(x, out.to(dtype=x.dtype) if out.dtype != x.dtype else out, "setitem")
        return
    if not _direct(index):
        # Mixed advanced indices follow torch's axis placement (not NumPy's): the planner of getitem.
        with no_grad():
            out = _index.setitem_value(x, index, value)
        if getattr(x, "_untracked", False):
            x._vc = getattr(x, "_vc", 0) + 1
        else:
            mark_written(x, "setitem")
        get_kernels(x.device).assign(x._value, out._value if out.dtype == x.dtype else out.to(dtype=x.dtype)._value)
        _write_back(x, "setitem")
        return
    if isinstance(value, Tensor):
        if value.device != x.device:
            if value.numel() != 1:
                raise DeviceError(f"setitem: value on {value.device}, tensor on {x.device}")
            value = value.item()
        else:
            value = value._value if value._value.dtype == x._value.dtype else \
                get_kernels(x.device).astype(value._value, x._value.dtype)
    elif not isinstance(value, Number):
        value = get_kernels(x.device).from_host(np.asarray(value, dtype=x._value.dtype), x._value.dtype)
    idx = _host_index(index, x.device)
    if getattr(x, "_untracked", False):
        x._vc = getattr(x, "_vc", 0) + 1
    else:
        mark_written(x, "setitem")
    try:
        x._value[idx] = value
    except IndexError as e:
        raise IndexRangeError(f"setitem: index out of range for a tensor of shape {tuple(x.shape)}: {e}") from None
    except ValueError as e:
        raise ShapeError(f"setitem: value does not fit the indexed shape of a tensor of shape "
                         f"{tuple(x.shape)}: {e}") from None
    _write_back(x, "setitem")


@export("__setitem__", method=True, function=False)
def _setitem_method(self, index, value):
    setitem(self, index, value)


def _direct(index) -> bool:
    """Whether NumPy's indexing of the buffer means what torch's does: a basic index, or one index
    tensor, list or bool mask on its own."""
    if _is_basic(index):
        return True
    if isinstance(index, (Tensor, list, np.ndarray)):
        return not (isinstance(index, list) and any(isinstance(i, (list, tuple, slice, Tensor)) or i is None
                                                     or i is Ellipsis for i in index))
    return False


def _is_basic(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, slice) or
               (isinstance(i, (int, np.integer)) and not isinstance(i, bool)) for i in items)


def _tracking_getitem(getitem):
    """``__getitem__`` whose basic-index results remember their source, for in-place write-back."""
    def __getitem__(self, index):
        out = getitem(self, index)
        if _is_basic(index) and isinstance(out, Tensor) and out is not self:
            out._base = (self, index)
        return out
    __getitem__.__doc__ = getitem.__doc__
    return __getitem__


def install_inplace() -> None:
    """Make ``<name>_`` for every out-of-place method present, the augmented operators, and the
    write-back of basic-index results (run once every family has registered its methods)."""
    for base in ELEMENTWISE:
        name = base + "_"
        if name not in METHODS and (base in METHODS or hasattr(Tensor, base)):
            METHODS[name] = _inplace_method(name, base)
    for base in RESHAPING:
        name = base + "_"
        if name not in METHODS and (base in METHODS or hasattr(Tensor, base)):
            METHODS[name] = _rebind_method(name, base)
    for name, inplace in AUGMENTED.items():
        METHODS.setdefault(name, _augmented(name, inplace))
    METHODS["__getitem__"] = _tracking_getitem(METHODS["__getitem__"])

