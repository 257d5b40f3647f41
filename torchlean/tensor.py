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

import mmap
import os
import weakref
from multiprocessing import shared_memory
from numbers import Number

import numpy as np

from . import autograd
from .autograd import (Variable, device_of, enable_grad, inference_mode, is_grad_enabled, no_grad, record,  # noqa: F401
                       set_grad_enabled)
from .device import CPU as _CPU, cuda_device as _cuda_device, normalize as _normalize_device
from .errors import AutogradError, DeviceError, DTypeError, IndexRangeError, ShapeError, TorchLeanError
from .kernels import get_kernels
from .shape import Size

__all__ = ["Size", "Tensor", "as_dtype", "bool_", "enable_grad", "float32", "float64", "from_dlpack",
           "inference_mode", "int32", "int64", "is_grad_enabled", "is_tensor", "log_softmax", "no_grad",
           "set_grad_enabled", "softmax"]

from .dtypes import is_float_np as _is_float_np
from .dtypes import (DType, as_dtype, bool_, dtype_of, float32, float64, get_default_dtype, int32, int64,  # noqa: F401
                     result_type)


def device_name(device) -> str:
    """``"cpu"`` or ``"cuda"`` from a device string (``"cuda:0"``) or a device object (its ``.type``)."""
    return _normalize_device(device, "to")


#: torch's legacy tensor type names (``x.type()``).
_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
               "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor",
               "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor"}


#: Where an op's recorded name differs from torch's grad_fn name.
_TORCH_OP_NAMES = {"scale": "mul", "reduce_sum": "sum", "reduce_mean": "mean", "reduce_max": "max",
                   "reduce_min": "min", "inv": "reciprocal", "cast": "_toCopy", "to_device": "_toCopy",
                   "getitem": "index", "linear": "addmm", "linear_nobias": "mm", "concat": "cat",
                   "broadcast_to": "expand", "matmul": "mm", "log_softmax": "logSoftmax", "softmax": "softmax"}


class GradFn:
    """The recorded op behind a non-leaf tensor; ``name()`` as torch spells it (``MulBackward0``)."""

    __slots__ = ("op",)

    def __init__(self, op):
        self.op = op

    def name(self) -> str:
        op = _TORCH_OP_NAMES.get(self.op, self.op)
        return "".join(p[:1].upper() + p[1:] for p in op.split("_")) + "Backward0"

    def __repr__(self):
        return f"<{self.name()}>"


class _HookHandle:
    __slots__ = ("hooks", "fn")

    def __init__(self, hooks, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self):
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)


def _format_values(a: np.ndarray) -> str:
    """The values as torch prints them: 4 decimals, integral floats as ``1.``, scientific notation
    for wide ranges, one width per tensor, summarised beyond 1000 elements."""
    summarize = a.size > 1000
    if a.dtype.kind == "b":
        fmt = lambda v: "True" if v else "False"  # noqa: E731
    elif a.dtype.kind in "iu":
        fmt = str
    else:
        finite = np.abs(a[np.isfinite(a)]).astype(np.float64) if a.size else np.zeros(0)
        nz = finite[finite != 0]
        if finite.size and np.all(finite == np.round(finite)) and (nz.size == 0 or nz.max() < 1e8):
            fmt = lambda v: f"{v:.0f}." if np.isfinite(v) else str(float(v)).replace("inf", "inf")  # noqa: E731
        elif nz.size and (nz.max() / nz.min() > 1000 or nz.max() >= 1e8 or nz.min() < 1e-4):
            fmt = lambda v: f"{v:.4e}"  # noqa: E731
        else:
            fmt = lambda v: f"{v:.4f}"  # noqa: E731
    sample = a if not summarize else np.concatenate([a.reshape(-1)[:3], a.reshape(-1)[-3:]])
    if a.dtype.kind == "f":  # torch's width ignores inf/nan: tensor([0., -inf]), not [  0., -inf]
        sample = sample[np.isfinite(sample)]
    width = max((len(fmt(v)) for v in sample.reshape(-1)), default=0)
    return np.array2string(a, separator=", ", formatter={"all": lambda v: fmt(v).rjust(width)},
                           threshold=1000, edgeitems=3, max_line_width=80, prefix="tensor(")


def format_tensor(t) -> str:
    """torch's repr: ``tensor([1., 2.], requires_grad=True)``, the dtype when not the default one for
    its kind, the device when not the CPU, ``grad_fn=<...>`` for a recorded result."""
    v = t._host()
    body = _format_values(v)
    extra = []
    if t.device == "cuda":
        extra.append(f"device='{t.device}'")
    d = t.dtype
    if v.size == 0 and v.ndim > 1:
        extra.append(f"size={tuple(v.shape)}")
    if d not in (get_default_dtype(), int64, bool_):
        extra.append(f"dtype=torchlean.{d.name}")
    if t._tape is not None:
        extra.append(f"grad_fn={t.grad_fn!r}")
    elif t.requires_grad:
        extra.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extra) + ")"


def _legacy_value(args):
    """torch.Tensor's legacy constructor: ``Tensor(2, 3)`` (zeros here, uninitialised in torch),
    ``Tensor([1, 2])`` (data in the default float dtype), ``Tensor(t)`` (t's values), ``Tensor()``."""
    if not args:
        return np.zeros((0,), dtype=get_default_dtype().np)
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0]._value
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        if any(a < 0 for a in args):
            raise ShapeError(f"Tensor: negative dimension in size {tuple(int(a) for a in args)}")
        return np.zeros(tuple(int(a) for a in args), dtype=get_default_dtype().np)
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        a = np.asarray(args[0])
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise DTypeError("Tensor: data must be numbers (nested lists of equal lengths)")
        return a.astype(get_default_dtype().np)
    raise DTypeError(f"Tensor: expected sizes (ints), a list of numbers or a tensor, got "
                     f"{', '.join(type(a).__name__ for a in args)}")


# ---- shared memory (Tensor.share_memory_, torchlean.multiprocessing) ----------------------------

class SharedSegment(mmap.mmap):
    """A named POSIX shared-memory segment mapped into this process; ``name`` finds it from another."""


def _unlink_segment(name: str, pid: int) -> None:
    if os.getpid() == pid:       # the creating process unlinks (forked children inherit this finalizer)
        try:
            shared_memory.SharedMemory(name=name).unlink()
        except FileNotFoundError:
            pass


def map_segment(name: str | None, nbytes: int) -> SharedSegment:
    """Create (``name=None``) or attach the shared-memory segment ``name`` of ``nbytes`` bytes, mapped.

    The creator unlinks the name when its mapping is collected or at exit; mappings stay valid."""
    shm = shared_memory.SharedMemory(name=name, create=name is None, size=max(nbytes, 1) if name is None else 0)
    try:
        seg = SharedSegment(shm._fd, shm.size)
    finally:
        shm.close()
    seg.name = shm.name
    if name is None:
        weakref.finalize(seg, _unlink_segment, shm.name, os.getpid())
    return seg


def segment_of(a) -> SharedSegment | None:
    """The shared segment holding array ``a``'s values, or None."""
    while a is not None and not isinstance(a, SharedSegment):
        a = a.obj if isinstance(a, memoryview) else getattr(a, "base", None)
    return a


def _share_array(a: np.ndarray) -> np.ndarray:
    seg = map_segment(None, a.nbytes)
    out = np.frombuffer(seg, dtype=a.dtype, count=a.size).reshape(a.shape)
    out[...] = a
    return out


# ---- Tensor ---------------------------------------------------------------------------------

class Tensor(Variable):
    """An n-d array with autograd, on ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy)."""

    __slots__ = ()
    __array_priority__ = 1000  # so ndarray + Tensor defers to Tensor.__radd__

    def __init__(self, *args, requires_grad=False):
        value = args[0] if len(args) == 1 else None
        if value is None or not hasattr(value, "shape") or isinstance(value, Tensor):
            value = _legacy_value(args)
        self._value = value
        self._tape = None
        self._id = -1
        self._grad = None
        if requires_grad and value.dtype.kind != "f":
            raise DTypeError(f"only float tensors can require gradients, got dtype {value.dtype}")
        self.requires_grad = bool(requires_grad)

    # -- basic properties ------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return tuple.__new__(Size, self._value.shape)

    @property
    def dtype(self) -> DType:
        return dtype_of(self._value.dtype)

    @property
    def device(self):
        """torch's device object (a :class:`torchlean.device`, also equal to ``"cpu"``/``"cuda"``)."""
        return _CPU if device_of(self._value) == "cpu" else _cuda_device()

    @property
    def is_cuda(self) -> bool:
        return device_of(self._value) == "cuda"

    @property
    def is_cpu(self) -> bool:
        return device_of(self._value) == "cpu"

    # Kinds of tensor torchlean does not have (no sparse, quantized, meta, nested or MKL-DNN tensors, no
    # MPS or XPU devices): torch's predicates for them are False for every tensor here.
    is_sparse = is_sparse_csr = is_quantized = is_meta = is_mps = is_xpu = is_mkldnn = is_nested = property(
        lambda self: False)

    @property
    def ndim(self) -> int:
        return self._value.ndim


    def size(self, dim=None):
        if dim is None:
            return tuple.__new__(Size, self._value.shape)
        nd = self._value.ndim
        if not -max(nd, 1) <= dim < max(nd, 1) or nd == 0:
            raise IndexRangeError(f"size: dimension {dim} out of range for a tensor with {nd} dimensions")
        return int(self._value.shape[dim])


    def is_floating_point(self) -> bool:
        return _is_float_np(self._value.dtype)

    def is_complex(self) -> bool:
        return False


    def __len__(self):
        if not self._value.ndim:
            raise TypeError("len() of a 0-d tensor")
        return int(self._value.shape[0])

    def __iter__(self):
        if not self._value.ndim:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(int(self._value.shape[0])))

    def __contains__(self, item):
        return bool((self == item).any()) if isinstance(item, (Tensor, Number)) else False

    # -- autograd state --------------------------------------------------------------------------
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
        """The values as a tensor outside autograd (sharing memory; writes to it are not tracked)."""
        t = Tensor(self._value)
        t._untracked = True
        return t

    @data.setter
    def data(self, other):
        self._value = other._value if isinstance(other, Tensor) else other

    @property
    def _version(self) -> int:
        return getattr(self, "_vc", 0)

    @property
    def grad_fn(self):
        """The recorded op that made this tensor (None for a leaf), with torch's ``name()``."""
        if self._tape is None:
            return None
        tape, i = autograd.resolve(self)
        return GradFn(tape.nodes[i].name or "op")

    def requires_grad_(self, requires_grad=True) -> "Tensor":
        if not self.is_leaf:
            if not requires_grad:
                raise AutogradError("requires_grad_: you can only change requires_grad flags of leaf variables "
                                    "(use detach())")
            return self
        if requires_grad and not _is_float_np(self._value.dtype):
            raise DTypeError(f"requires_grad_: only floating-point tensors can require gradients, got "
                             f"{self.dtype.name}")
        self.requires_grad = bool(requires_grad)
        return self


    def detach_(self) -> "Tensor":
        self._tape, self._id, self.requires_grad = None, -1, False
        return self

    def retain_grad(self) -> None:
        """Keep this non-leaf's gradient in ``.grad`` at the next backward (a no-op on a leaf)."""
        if self._tape is None:
            return
        if not self.requires_grad:
            raise AutogradError("retain_grad: can't retain_grad on a tensor that has requires_grad=False")
        tape, i = autograd.resolve(self)
        tape.retained[i] = weakref.ref(self)

    @property
    def retains_grad(self) -> bool:
        if self._tape is None:
            return False
        tape, i = autograd.resolve(self)
        return i in tape.retained

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a tensor it returns replaces the
        gradient. Returns a handle whose ``remove()`` unregisters it."""
        if not self.requires_grad:
            raise AutogradError("register_hook: cannot register a hook on a tensor that doesn't require gradient")

        def on_array(g):
            r = hook(Tensor(g))
            return None if r is None else r._value

        if self._tape is None:
            try:
                hooks = self._hooks
            except AttributeError:
                hooks = self._hooks = []
        else:
            tape, i = autograd.resolve(self)
            hooks = tape.hooks.setdefault(i, [])
        hooks.append(on_array)
        return _HookHandle(hooks, on_array)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` after a backward has accumulated this leaf's ``.grad`` (once per
        backward); returns a handle whose ``remove()`` unregisters it."""
        if self._tape is not None:
            raise AutogradError("register_post_accumulate_grad_hook: post accumulate grad hooks cannot be "
                                "registered on non-leaf tensors")
        if not self.requires_grad:
            raise AutogradError("register_post_accumulate_grad_hook: cannot register a hook on a tensor that "
                                "doesn't require gradient")
        hooks = getattr(self, "_post_hooks", None)
        if hooks is None:
            hooks = self._post_hooks = []
        hooks.append(hook)
        return _HookHandle(hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into every reachable leaf's ``.grad`` (PyTorch semantics)."""
        autograd.backward(self, gradient, retain_graph, create_graph, inputs)

    # -- conversion ------------------------------------------------------------------------------
    def numpy(self, force=False) -> np.ndarray:
        """The values as a NumPy array: the tensor's own buffer on the CPU (shared memory, as torch's),
        a host copy of a CUDA tensor."""
        if device_of(self._value) == "cpu":
            return self._value
        return get_kernels("cuda").to_host(self._value)

    def _host(self) -> np.ndarray:
        v = self._value
        return v if device_of(v) == "cpu" else get_kernels("cuda").to_host(v)

    def item(self):
        if self.numel() != 1:
            raise ShapeError(f"item: a tensor with {self.numel()} elements cannot be converted to a Python number")
        return self._host().reshape(()).item()

    def tolist(self):
        return self._host().tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._value.dtype.kind not in "iub" or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise ShapeError(f"Boolean value of a tensor with {self.numel()} values is ambiguous")
        return bool(self.item())

    def __format__(self, spec):
        if self._value.ndim == 0 or (spec and self.numel() == 1):
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __array__(self, dtype=None, copy=None):
        a = self._host()
        return a if dtype is None else a.astype(dtype)

    def __dlpack__(self, **kw):
        return get_kernels(self.device).dlpack(self._value, **kw)

    def __dlpack_device__(self):
        return self._value.__dlpack_device__()

    def to(self, *args, **kwargs) -> "Tensor":
        """torch's overloads: ``to(dtype)``, ``to(device, dtype=None)``, ``to(other)``; differentiable."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        copy = kwargs.pop("copy", False)
        if kwargs:
            raise TorchLeanError(f"to: unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, (DType, np.dtype)) or (isinstance(a, type) and a in (float, int, bool)) or \
                    (isinstance(a, type) and issubclass(a, np.generic)):
                dtype = a
            elif a is not None:
                device = a
        out = self
        if dtype is not None:
            dtype = as_dtype(dtype)
            if dtype != self.dtype:
                out = record("cast", (out,), {"dtype": dtype.name})
        if device is not None:
            device = device_name(device)
            if device != out.device:
                out = record("to_device", (out,), {"device": device})
        if copy and out is self:
            out = self.clone()
        return out

    def type(self, dtype=None, non_blocking=False):
        """With no dtype, torch's type string (``'torch.FloatTensor'``); else a cast."""
        if dtype is None:
            name = _TYPE_NAMES.get(self.dtype.name, "Tensor")
            return f"torch.cuda.{name}" if self.device == "cuda" else f"torch.{name}"
        if isinstance(dtype, LegacyTensorType):
            dtype = dtype.dtype
        elif isinstance(dtype, str) and dtype.endswith("Tensor"):
            inv = {v: k for k, v in _TYPE_NAMES.items()}
            dtype = inv.get(dtype.rsplit(".", 1)[-1])
            if dtype is None:
                raise DTypeError("type: unknown tensor type string")
        return self.to(dtype=dtype)

    def type_as(self, other) -> "Tensor":
        return self.to(dtype=other.dtype)

    def share_memory_(self) -> "Tensor":
        """Move the values into shared memory (a named POSIX segment) so that processes this tensor is
        sent to (:mod:`torchlean.multiprocessing`: fork or spawn, queues, ``spawn`` arguments) write to
        the same values; a no-op when already shared. CPU tensors only: CUDA memory is not shared across
        processes here. Views taken before the call keep the old values.

            >>> import torchlean as tl
            >>> t = tl.ones(3).share_memory_()
            >>> t.is_shared(), t.tolist()
            (True, [1.0, 1.0, 1.0])
        """
        if self.device != "cpu":
            raise DeviceError("share_memory_: sharing CUDA tensors across processes is not supported; "
                              "move the tensor to the CPU first")
        if segment_of(self._value) is None:
            self._value = _share_array(np.ascontiguousarray(self._value))
        return self

    def is_shared(self) -> bool:
        """True when the values are in shared memory (:meth:`share_memory_`)."""
        return self.device == "cpu" and segment_of(self._value) is not None

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda" if device is None else device)

    def float(self):
        return self.to(dtype=float32)

    def double(self):
        return self.to(dtype=float64)

    def half(self):
        return self.to(dtype="float16")

    def bfloat16(self):
        return self.to(dtype="bfloat16")

    def long(self):
        return self.to(dtype=int64)

    def int(self):
        return self.to(dtype=int32)

    def short(self):
        return self.to(dtype="int16")

    def char(self):
        return self.to(dtype="int8")

    def byte(self):
        return self.to(dtype="uint8")

    def bool(self):
        return self.to(dtype=bool_)


    def __repr__(self):
        return format_tensor(self)

    __str__ = __repr__

    # -- operators -------------------------------------------------------------------------------


    __hash__ = object.__hash__


    # -- reductions ------------------------------------------------------------------------------


    # -- shape -----------------------------------------------------------------------------------


    # -- elementwise -----------------------------------------------------------------------------


    def softmax(self, dim=-1, dtype=None):
        x = self if dtype is None else self.to(dtype=dtype)
        return record("softmax", (_float_only("softmax", x),), {"axis": dim})

    def log_softmax(self, dim=-1, dtype=None):
        x = self if dtype is None else self.to(dtype=dtype)
        return record("log_softmax", (_float_only("log_softmax", x),), {"axis": dim})


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
        raise DTypeError("expected a number or a tensor, got None")
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
            (_is_float_np(a._value.dtype) or name not in _FLOAT_RESULT):
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
    a = np.asarray(o)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise DTypeError(f"{op}: unsupported operand of type {type(o).__name__}")
    return Tensor(np.ascontiguousarray(a))


def _float_input(op: str, x: Tensor) -> Tensor:
    """``x`` for an op whose result is a float: integer and bool tensors become the default float
    dtype first (torch: ``int_tensor.sqrt()`` is float32), never a truncated integer."""
    return x if _is_float_np(x._value.dtype) else x.to(dtype=get_default_dtype())


def _float_only(op: str, x: Tensor) -> Tensor:
    """``x`` for an op torch refuses on integers (``mean``, ``softmax``, ``gelu``): DTypeError names it."""
    if not _is_float_np(x._value.dtype):
        raise DTypeError(f"{op}: expects a floating-point tensor, got dtype {x.dtype.name}")
    return x


# ---- creation -------------------------------------------------------------------------------

def _place(a: np.ndarray, device: str, requires_grad: bool) -> Tensor:
    if device not in ("cpu", "cuda"):
        raise DeviceError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")
    v = a if device == "cpu" else get_kernels("cuda").from_host(a, a.dtype)
    return Tensor(v, requires_grad=requires_grad)


def from_dlpack(obj) -> Tensor:
    """Zero-copy import of a DLPack-capable array (NumPy, CuPy, PyTorch, ...)."""
    dev = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else 1
    return Tensor(get_kernels("cpu" if dev == 1 else "cuda").from_dlpack(obj))  # 1: kDLCPU


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


# ---- function forms -------------------------------------------------------------------------


def softmax(x, dim=-1, dtype=None):
    return x.softmax(dim, dtype)


def log_softmax(x, dim=-1, dtype=None):
    return x.log_softmax(dim, dtype)


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


class LegacyTensorType(type):
    """torch's legacy tensor types (``torch.FloatTensor``, ``torch.LongTensor``, ...): calling one builds
    a CPU tensor of its dtype as ``Tensor(...)`` does; ``isinstance(x, torch.FloatTensor)`` checks the
    dtype and the device; ``x.type(torch.LongTensor)`` casts."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.device == "cpu" and obj.dtype.name == cls.dtype

    def __call__(cls, *args):
        t = Tensor(*args) if args and isinstance(args[0], Tensor) else None
        if t is None:
            if len(args) == 1 and isinstance(args[0], (list, tuple)):
                a = np.asarray(args[0])
                if a.dtype == object or a.dtype.kind not in "biuf":
                    raise DTypeError(f"{cls.__name__}: data must be numbers")
                return Tensor(a.astype(as_dtype(cls.dtype).np))
            t = Tensor(*args)
        return t.to(dtype=cls.dtype)

    def __repr__(cls):
        return f"<class 'torchlean.{cls.__name__}'>"


_LEGACY = {name: LegacyTensorType(name, (), {"dtype": dt}) for dt, name in _TYPE_NAMES.items() if dt != "bfloat16"}
FloatTensor, DoubleTensor, HalfTensor = _LEGACY["FloatTensor"], _LEGACY["DoubleTensor"], _LEGACY["HalfTensor"]
LongTensor, IntTensor, ShortTensor = _LEGACY["LongTensor"], _LEGACY["IntTensor"], _LEGACY["ShortTensor"]
CharTensor, ByteTensor, BoolTensor = _LEGACY["CharTensor"], _LEGACY["ByteTensor"], _LEGACY["BoolTensor"]
__all__ += ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
            "ByteTensor", "BoolTensor"]


autograd.set_result_class(Tensor)

