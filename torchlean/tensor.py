"""The PyTorch-style :class:`Tensor` and the functions that create tensors.

A Tensor is a :class:`~torchlean.autograd.Variable` with PyTorch's methods; every op a method
runs goes through :func:`torchlean.autograd.record`, which owns the tape bookkeeping.

    >>> import torchlean as tl
    >>> x = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad.tolist()
    [2.0, 4.0, 6.0]
"""

from __future__ import annotations

import math
from numbers import Number

import numpy as np

from . import autograd
from .autograd import Variable, device_of, enable_grad, is_grad_enabled, no_grad, record
from .errors import AutogradError, DeviceError, DTypeError, ShapeError, TorchLeanError
from .kernels import get_kernels

__all__ = ["Tensor", "abs", "arange", "as_dtype", "bmm", "bool_", "cat", "clamp", "concat", "cos",
           "enable_grad", "erf", "exp", "flatten", "float32", "float64", "from_dlpack", "from_numpy", "full",
           "int32", "int64", "is_grad_enabled", "is_tensor", "get_rng_state", "linspace", "log",
           "log_softmax", "manual_seed", "matmul", "maximum", "mean", "minimum", "no_grad", "ones",
           "ones_like", "permute", "pow", "rand", "randint", "randn", "randperm", "relu", "reshape",
           "set_rng_state", "sigmoid", "sin", "softmax", "sqrt", "squeeze", "stack", "sum", "tanh", "tensor",
           "transpose", "unsqueeze", "where", "zeros", "zeros_like"]

from .dtypes import (DType, as_dtype, bool_, dtype_of, float32, float64, get_default_dtype, int32, int64,  # noqa: F401
                     result_type)


# ---- Tensor ---------------------------------------------------------------------------------

class Tensor(Variable):
    """An n-d array with autograd, on ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy)."""

    __slots__ = ()
    __array_priority__ = 1000  # so ndarray + Tensor defers to Tensor.__radd__

    def __init__(self, value, requires_grad=False):
        self._value = value
        self._tape = None
        self._id = -1
        self._grad = None
        if requires_grad and value.dtype.kind != "f":
            raise DTypeError(f"only float tensors can require gradients, got dtype {value.dtype}")
        self.requires_grad = bool(requires_grad)

    # -- basic properties ------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return tuple(self._value.shape)

    @property
    def dtype(self) -> DType:
        return dtype_of(self._value.dtype)

    @property
    def device(self) -> str:
        return device_of(self._value)

    @property
    def ndim(self) -> int:
        return self._value.ndim

    def dim(self) -> int:
        return self._value.ndim

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return int(self._value.size)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def is_leaf(self) -> bool:
        return self._tape is None

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None and not isinstance(value, Tensor):
            raise TorchLeanError("grad must be a Tensor or None")
        if value is not None and value.shape != self.shape:
            raise ShapeError(f"grad: shape {value.shape} does not match tensor shape {self.shape}")
        self._grad = value

    @property
    def data(self) -> "Tensor":
        return Tensor(self._value)

    @data.setter
    def data(self, other):
        self._value = other._value if isinstance(other, Tensor) else other

    @property
    def T(self):
        if self.ndim != 2:
            raise ShapeError(f"T: expects a 2-D tensor, got shape {self.shape}")
        return self.transpose(0, 1)

    # -- conversion ------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A host copy of the values (NumPy)."""
        if self.device == "cpu":
            return np.array(self._value, copy=True)
        return get_kernels("cuda").to_host(self._value)

    def item(self):
        if self.numel() != 1:
            raise ShapeError(f"item: tensor of shape {self.shape} has {self.numel()} elements, not 1")
        return self.numpy().reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __dlpack__(self, **kw):
        return get_kernels(self.device).dlpack(self._value, **kw)

    def __dlpack_device__(self):
        return self._value.__dlpack_device__()

    def to(self, device=None, dtype=None) -> "Tensor":
        """Copy to ``device`` and/or cast to ``dtype``; differentiable (a recorded op)."""
        if isinstance(device, (np.dtype, type)) and dtype is None:
            device, dtype = None, device
        out = self
        if dtype is not None:
            dtype = as_dtype(dtype)
            if dtype != self.dtype:
                out = record("cast", (out,), {"dtype": dtype.name})
        if device is not None and device != out.device:
            if device not in ("cpu", "cuda"):
                raise DeviceError(f"to: unknown device {device!r}; expected 'cpu' or 'cuda'")
            out = record("to_device", (out,), {"device": device})
        return out

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    def float(self):
        return self.to(dtype=float32)

    def double(self):
        return self.to(dtype=float64)

    def long(self):
        return self.to(dtype=int64)

    def detach(self) -> "Tensor":
        return Tensor(self._value)

    def clone(self) -> "Tensor":
        return record("scale", (self,), {"c": 1.0}) if self.dtype.kind == "f" else Tensor(self._value.copy())

    def requires_grad_(self, flag=True) -> "Tensor":
        if not self.is_leaf:
            raise AutogradError("requires_grad_: only leaf tensors can change requires_grad")
        if flag and self.dtype.kind != "f":
            raise DTypeError(f"requires_grad_: only float tensors can require gradients, got {self.dtype}")
        self.requires_grad = bool(flag)
        return self

    def zero_(self):
        get_kernels(self.device).fill(self._value, 0)
        return self

    def __repr__(self):
        extra = "" if self.device == "cpu" else ", device='cuda'"
        if self._tape is not None:
            extra += ", grad_fn=<recorded>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        body = np.array2string(self.numpy(), separator=", ", precision=4)
        return f"tensor({body}{extra}, dtype={self.dtype.name})"

    # -- autograd --------------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=False):
        """Accumulate d(self)/d(leaf) into every reachable leaf's ``.grad`` (PyTorch semantics)."""
        autograd.backward(self, gradient, retain_graph)

    # -- operators -------------------------------------------------------------------------------
    def __add__(self, o):
        return _binary("add", self, o)

    def __radd__(self, o):
        return _binary("add", o, self)

    def __sub__(self, o):
        return _binary("sub", self, o)

    def __rsub__(self, o):
        return _binary("sub", o, self)

    def __mul__(self, o):
        if type(o) is Tensor:
            return _binary("mul", self, o)
        if isinstance(o, Number) and not isinstance(o, bool) and self.dtype.kind == "f":
            return record("scale", (self,), {"c": float(o)})
        return _binary("mul", self, o)

    def __rmul__(self, o):
        return self.__mul__(o)

    def __truediv__(self, o):
        return _binary("div", self, o)

    def __rtruediv__(self, o):
        return _binary("div", o, self)

    def __matmul__(self, o):
        return matmul(self, o)

    def __rmatmul__(self, o):
        return matmul(o, self)

    def __neg__(self):
        return record("neg", (self,), {})

    def __pow__(self, p):
        if isinstance(p, Tensor):
            raise TorchLeanError("pow: only a scalar exponent is supported (x ** number)")
        return record("pow", (self,), {"exponent": float(p) if not float(p).is_integer() else int(p)})

    def __rpow__(self, base):
        if not isinstance(base, Number) or base <= 0:
            raise TorchLeanError(f"pow: base {base!r} ** tensor needs a positive scalar base")
        return (self * math.log(base)).exp()

    def _cmp(self, o, op):
        return record("compare", (self, _as_tensor(o, self)), {"op": op})

    def __lt__(self, o):
        return self._cmp(o, "lt")

    def __le__(self, o):
        return self._cmp(o, "le")

    def __gt__(self, o):
        return self._cmp(o, "gt")

    def __ge__(self, o):
        return self._cmp(o, "ge")

    def __eq__(self, o):
        return self._cmp(o, "eq")

    def __ne__(self, o):
        return self._cmp(o, "ne")

    __hash__ = object.__hash__

    def __getitem__(self, index):
        if isinstance(index, Tensor):
            return _advanced_index(self, index)
        if isinstance(index, (list, np.ndarray)):
            return _advanced_index(self, Tensor(np.asarray(index)))
        if not isinstance(index, tuple):
            index = (index,)
        for i in index:
            if isinstance(i, (Tensor, list, np.ndarray)):
                raise TorchLeanError("getitem: advanced indexing is supported only as a single int index tensor")
        index = tuple(int(i) if isinstance(i, (int, np.integer)) and not isinstance(i, bool) else i for i in index)
        return record("getitem", (self,), {"index": index})

    # -- reductions ------------------------------------------------------------------------------
    def sum(self, dim=None, keepdim=False):
        if dim is None and not keepdim:
            return record("sum", (self,), {})
        return record("reduce_sum", (self,), {"axis": _dims(dim, self.ndim), "keepdim": keepdim})

    def mean(self, dim=None, keepdim=False):
        if dim is None and self.ndim == 0:  # reduce_mean needs an axis; the mean of one entry is itself
            return record("sum", (self,), {})
        return record("reduce_mean", (self,), {"axis": _dims(dim, self.ndim), "keepdim": keepdim})

    def max(self, dim=None, keepdim=False):
        if dim is None:
            return record("reduce_max", (self.reshape(-1),), {"axis": 0})
        return record("reduce_max", (self,), {"axis": dim, "keepdim": keepdim})

    def min(self, dim=None, keepdim=False):
        if dim is None:
            return record("reduce_min", (self.reshape(-1),), {"axis": 0})
        return record("reduce_min", (self,), {"axis": dim, "keepdim": keepdim})

    def argmax(self, dim=None, keepdim=False):
        return record("argmax", (self,), {"axis": dim, "keepdim": keepdim})

    def argmin(self, dim=None, keepdim=False):
        return record("argmin", (self,), {"axis": dim, "keepdim": keepdim})

    # -- shape -----------------------------------------------------------------------------------
    def reshape(self, *shape):
        shape = _resolve_shape(_shape_args(shape), self.numel(), "reshape")
        if shape == self.shape:
            return self
        return record("reshape", (self,), {"shape": shape})

    view = reshape

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:
            return self.reshape(1)
        return record("flatten", (self,), {"start_dim": start_dim, "end_dim": end_dim})

    def transpose(self, dim0, dim1):
        return record("transpose", (self,), {"dim0": dim0, "dim1": dim1})

    def permute(self, *dims):
        return record("permute", (self,), {"dims": tuple(_shape_args(dims))})

    def unsqueeze(self, dim):
        return record("unsqueeze", (self,), {"dim": dim})

    def squeeze(self, dim=None):
        return record("squeeze", (self,), {"dim": dim})

    def expand(self, *sizes):
        sizes = _shape_args(sizes)
        lead = len(sizes) - self.ndim
        if lead < 0:
            raise ShapeError(f"expand: {len(sizes)} sizes for a tensor with {self.ndim} axes")
        shape = tuple(self.shape[j - lead] if (s == -1 and j >= lead) else s for j, s in enumerate(sizes))
        return self.broadcast_to(shape)

    def broadcast_to(self, shape):
        shape = tuple(_shape_args((shape,)))
        if shape == self.shape:
            return self
        return record("broadcast_to", (self,), {"shape": shape})

    def expand_as(self, other):
        return self.broadcast_to(other.shape)

    def contiguous(self):
        return self

    # -- elementwise -----------------------------------------------------------------------------
    def relu(self):
        return record("relu", (self,), {})

    def sigmoid(self):
        return record("sigmoid", (self,), {})

    def tanh(self):
        return record("tanh", (self,), {})

    def exp(self):
        return record("exp", (self,), {})

    def log(self):
        return record("log", (self,), {})

    def sqrt(self):
        return record("sqrt", (self,), {})

    def abs(self):
        return record("abs", (self,), {})

    def erf(self):
        return record("erf", (self,), {})

    def sin(self):
        return record("sin", (self,), {})

    def cos(self):
        return record("cos", (self,), {})

    def neg(self):
        return -self

    def reciprocal(self):
        return record("inv", (self,), {})

    def pow(self, p):
        return self ** p

    def clamp(self, min=None, max=None):  # noqa: A002 - PyTorch's names
        return record("clamp", (self,), {"lo": None if min is None else float(min),
                                        "hi": None if max is None else float(max)})

    clip = clamp

    def softmax(self, dim=-1):
        return record("softmax", (self,), {"axis": dim})

    def log_softmax(self, dim=-1):
        return record("log_softmax", (self,), {"axis": dim})

    def matmul(self, o):
        return matmul(self, o)


# ---- helpers --------------------------------------------------------------------------------

def _as_value(o, like: Tensor, dtype=None):
    """A scalar, array or Tensor as an array on ``like``'s device, in ``dtype`` (default: scalars take
    like's dtype when that keeps their category, arrays keep theirs)."""
    if isinstance(o, Tensor):
        if o.device != like.device:
            raise DeviceError(f"operands on different devices ({like.device} and {o.device})")
        return o._value if dtype is None or o.dtype == dtype else get_kernels(like.device).astype(o._value, dtype.np)
    K = get_kernels(like.device)
    if o is None:
        raise DTypeError(f"expected a number or a tensor, got None")
    if isinstance(o, Number):
        if dtype is None:
            dtype = result_type(like, o)
        return K.from_host(np.asarray(o, dtype=dtype.np), dtype.np)
    a = np.asarray(o)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise DTypeError(f"expected a number or a tensor, got {type(o).__name__}")
    dt = dtype.np if dtype is not None else (like._value.dtype if a.dtype.kind == "f" and like.dtype.kind == "f"
                                             else as_dtype(a.dtype).np)
    return K.from_host(a, dt)


def _as_tensor(o, like: Tensor, dtype=None) -> Tensor:
    if isinstance(o, Tensor) and (dtype is None or o.dtype == dtype):
        return o
    return Tensor(_as_value(o, like, dtype)) if not isinstance(o, Tensor) else o.to(dtype=dtype)


#: Binary ops whose result is a float even for integer operands (torch's true division).
_FLOAT_RESULT = frozenset({"div"})


def _binary(name, a, b) -> Tensor:
    """``name`` on two operands (tensors or Python numbers) after torch's type promotion."""
    if type(a) is Tensor and type(b) is Tensor and a._value.dtype == b._value.dtype and \
            (a._value.dtype.kind == "f" or name not in _FLOAT_RESULT):
        return record(name, (a, b), {})
    ref = a if isinstance(a, Tensor) else b
    if not isinstance(ref, Tensor):
        raise DTypeError(f"{name}: expects at least one tensor operand")
    dt = result_type(a if isinstance(a, (Tensor, Number)) else _host_operand(a, name),
                     b if isinstance(b, (Tensor, Number)) else _host_operand(b, name))
    if name in _FLOAT_RESULT and dt.kind != "f":
        dt = get_default_dtype()
    return record(name, (_as_tensor(a, ref, dt), _as_tensor(b, ref, dt)), {})


def _host_operand(o, op):
    if o is None or isinstance(o, (str, bytes)):
        raise DTypeError(f"{op}: unsupported operand {o!r}: expected a tensor or a number")
    try:
        return tensor(o)
    except TorchLeanError:
        raise DTypeError(f"{op}: unsupported operand of type {type(o).__name__}") from None


def _float_input(op: str, x: Tensor) -> Tensor:
    """``x`` for an op whose result is a float: integer and bool tensors become the default float
    dtype first (torch: ``int_tensor.sqrt()`` is float32), never a truncated integer."""
    return x if x._value.dtype.kind == "f" else x.to(dtype=get_default_dtype())


def _float_only(op: str, x: Tensor) -> Tensor:
    """``x`` for an op torch refuses on integers (``mean``, ``softmax``, ``gelu``): DTypeError names it."""
    if x._value.dtype.kind != "f":
        raise DTypeError(f"{op}: expects a floating-point tensor, got dtype {x.dtype.name}")
    return x


def _promote(a, b, op):
    """Both tensors in their promoted dtype (torch's result_type)."""
    dt = result_type(a, b)
    return a.to(dtype=dt), b.to(dtype=dt)


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _resolve_shape(shape, n, op):
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or n % known:
            raise ShapeError(f"{op}: cannot infer -1 in {shape} for {n} elements")
        shape = tuple(n // known if s == -1 else s for s in shape)
    if any(s < 0 for s in shape) or math.prod(shape) != n:
        raise ShapeError(f"{op}: cannot reshape {n} elements into {shape}")
    return shape


def _dims(dim, ndim):
    if dim is None:
        return tuple(range(ndim))
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim


def _advanced_index(x: Tensor, idx: Tensor) -> Tensor:
    if idx.dtype.kind == "b":
        raise TorchLeanError("getitem: boolean mask indexing is not supported; use tl.where")
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"getitem: index tensor must be integer, got {idx.dtype}")
    host = idx.numpy()
    if host.ndim == 1:
        return record("index_select", (x,), {"axis": 0, "indices": host})
    flat = record("index_select", (x,), {"axis": 0, "indices": host.reshape(-1)})
    return flat.reshape(host.shape + x.shape[1:])


# ---- creation -------------------------------------------------------------------------------

def _place(a: np.ndarray, device: str, requires_grad: bool) -> Tensor:
    if device not in ("cpu", "cuda"):
        raise DeviceError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")
    v = a if device == "cpu" else get_kernels("cuda").from_host(a, a.dtype)
    return Tensor(v, requires_grad=requires_grad)


def tensor(data, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    """A new tensor (a copy). Python floats give float32; NumPy arrays keep their dtype."""
    dtype = as_dtype(dtype)
    if isinstance(data, Tensor):
        a = data.numpy()
    else:
        a = np.asarray(data)
        if dtype is None and not isinstance(data, np.ndarray):
            if a.dtype.kind == "f":
                a = a.astype(np.float32)
            elif a.dtype.kind in "iu":
                a = a.astype(np.int64)
    if a.dtype == object:
        raise DTypeError("tensor: data must be numeric")
    a = np.array(a, dtype=dtype or a.dtype, copy=True, order="C")
    return _place(a, device, requires_grad)


def from_numpy(a: np.ndarray) -> Tensor:
    """Share memory with a NumPy array (no copy when it is contiguous)."""
    return Tensor(np.ascontiguousarray(a))


def from_dlpack(obj) -> Tensor:
    """Zero-copy import of a DLPack-capable array (NumPy, CuPy, PyTorch, ...)."""
    dev = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else 1
    return Tensor(get_kernels("cpu" if dev == 1 else "cuda").from_dlpack(obj))  # 1: kDLCPU


def _creation(fill):
    def make(*shape, dtype=None, device="cpu", requires_grad=False):
        shape = _shape_args(shape)
        dt = as_dtype(dtype) or float32
        K = get_kernels(device) if device in ("cpu", "cuda") else None
        if K is None:
            raise DeviceError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")
        return Tensor(K.full(shape, fill, dt), requires_grad=requires_grad)
    return make


zeros = _creation(0)
ones = _creation(1)


def full(shape, value, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    shape = _shape_args((shape,)) if not isinstance(shape, int) else (shape,)
    dt = as_dtype(dtype) or (float32 if isinstance(value, float) else np.dtype(type(value)) if isinstance(value, bool)
                             else int64 if isinstance(value, int) else float32)
    return Tensor(get_kernels(device).full(shape, value, dt), requires_grad=requires_grad)


def zeros_like(t: Tensor, dtype=None, requires_grad=False) -> Tensor:
    return zeros(*t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype=None, requires_grad=False) -> Tensor:
    return ones(*t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device="cpu") -> Tensor:
    if end is None:
        start, end = 0, start
    a = np.arange(start, end, step)
    dt = as_dtype(dtype) or (int64 if a.dtype.kind in "iu" else float32)
    return _place(a.astype(dt), device, False)


def linspace(start, end, steps, dtype=None, device="cpu") -> Tensor:
    return _place(np.linspace(start, end, steps).astype(as_dtype(dtype) or float32), device, False)


# ---- random numbers: counter-based, the same on every device --------------------------------

class _RNG:
    seed = 0
    counter = 0

    @classmethod
    def next(cls):
        c = cls.counter
        cls.counter += 1
        return cls.seed, c


def manual_seed(seed: int) -> None:
    """Seed the counter-based generator (resets its counter)."""
    _RNG.seed = int(seed)
    _RNG.counter = 0


def get_rng_state() -> tuple:
    """The generator's state, ``(seed, counter)``: the next draw uses this counter."""
    return (_RNG.seed, _RNG.counter)


def set_rng_state(state) -> None:
    """Restore a state from :func:`get_rng_state` (checkpoints resume bit for bit)."""
    seed, counter = state
    _RNG.seed, _RNG.counter = int(seed), int(counter)


def next_rng_key():
    """(seed, counter) for one random draw; advances the counter."""
    return _RNG.next()


def rand(*shape, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    s, c = _RNG.next()
    dt = as_dtype(dtype) or float32
    return Tensor(get_kernels(device).rand_uniform(_shape_args(shape), s, c, dt), requires_grad=requires_grad)


def randn(*shape, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    s, c = _RNG.next()
    dt = as_dtype(dtype) or float32
    return Tensor(get_kernels(device).randn(_shape_args(shape), s, c, dt), requires_grad=requires_grad)


def randint(low, high=None, size=(), device="cpu") -> Tensor:
    if high is None:
        low, high = 0, low
    s, c = _RNG.next()
    u = get_kernels("cpu").rand_uniform(tuple(size), s, c, np.float64)
    return _place((low + np.floor(u * (high - low))).astype(np.int64), device, False)


def randperm(n, device="cpu") -> Tensor:
    s, c = _RNG.next()
    u = get_kernels("cpu").rand_uniform((n,), s, c, np.float64)
    return _place(np.argsort(u, kind="stable").astype(np.int64), device, False)


# ---- function forms -------------------------------------------------------------------------

def cat(tensors, dim=0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("concat: needs at least one tensor")
    return record("concat", tuple(tensors), {"axis": dim})


concat = cat


def stack(tensors, dim=0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("stack: needs at least one tensor")
    return record("stack", tuple(tensors), {"axis": dim})


def matmul(a, b) -> Tensor:
    if not isinstance(a, Tensor):
        a = _as_tensor(a, b)
    if not isinstance(b, Tensor):
        b = _as_tensor(b, a)
    return record("matmul", (a, b), {})


def bmm(a, b) -> Tensor:
    return record("bmm", (a, b), {})


def where(cond, a, b) -> Tensor:
    ref = a if isinstance(a, Tensor) else b
    if not isinstance(ref, Tensor):
        raise TorchLeanError("where: at least one of a, b must be a Tensor")
    a, b = _as_tensor(a, ref), _as_tensor(b, ref)
    if a.dtype != b.dtype:
        a, b = _promote(a, b, "where")
    c = cond._value if isinstance(cond, Tensor) else np.asarray(cond)
    if c.dtype != np.bool_:
        c = c != 0
    return record("where", (a, b), {"cond": c})


def maximum(a, b) -> Tensor:
    return _binary("maximum", a, b)


def minimum(a, b) -> Tensor:
    return _binary("minimum", a, b)


def _unary_fn(name):
    def f(x):
        return getattr(x, name)()
    f.__name__ = name
    f.__doc__ = f"Function form of :meth:`Tensor.{name}`."
    return f


exp, log, sqrt, abs, sin, cos, erf = (_unary_fn(n) for n in ("exp", "log", "sqrt", "abs", "sin", "cos", "erf"))  # noqa: A001
relu, sigmoid, tanh = (_unary_fn(n) for n in ("relu", "sigmoid", "tanh"))


def sum(x, dim=None, keepdim=False):  # noqa: A001
    return x.sum(dim, keepdim)


def mean(x, dim=None, keepdim=False):
    return x.mean(dim, keepdim)


def clamp(x, min=None, max=None):  # noqa: A002
    return x.clamp(min, max)


def softmax(x, dim=-1):
    return x.softmax(dim)


def log_softmax(x, dim=-1):
    return x.log_softmax(dim)


def flatten(x, start_dim=0, end_dim=-1):
    return x.flatten(start_dim, end_dim)


def reshape(x, *shape):
    return x.reshape(*shape)


def transpose(x, d0, d1):
    return x.transpose(d0, d1)


def permute(x, *dims):
    return x.permute(*dims)


def unsqueeze(x, dim):
    return x.unsqueeze(dim)


def squeeze(x, dim=None):
    return x.squeeze(dim)


def pow(x, p):  # noqa: A001
    return x ** p


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


autograd.set_result_class(Tensor)
