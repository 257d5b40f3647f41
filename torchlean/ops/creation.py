"""Tensor creation and random numbers: torch's factories, ``*_like`` and ``new_*`` forms, and its
random functions over the counter-based generator.

Deterministic creators follow torch's signatures and dtype rules: ``tensor`` infers bool, int64 or
the default float dtype from Python data (NumPy data keeps its dtype), ``full`` takes its dtype from
the fill value, ``arange`` is int64 unless an argument is a float. Sizes are varargs ints, a tuple
or list, or a ``Size``; a negative size raises :class:`ShapeError` naming the op.

Random numbers come from ``(seed, counter, element index)`` (:mod:`torchlean.spec.rng`): every
draw takes one counter of a :class:`Generator` (the default one is the global stream of
``manual_seed``), so the same seed gives the same numbers on the CPU and on CUDA. The streams are
not torch's: only their distributions match. Results of random functions never carry gradients.

    >>> import torchlean as tl
    >>> tl.full((2,), 3).dtype, tl.arange(1, 2.5, 0.5).tolist()
    (torchlean.int64, [1.0, 1.5, 2.0])
    >>> g = tl.Generator().manual_seed(0)
    >>> tl.rand(3, generator=g).tolist() == tl.rand(3, generator=tl.Generator().manual_seed(0)).tolist()
    True

The out-of-place cores of the in-place random methods (``x.uniform_(a, b)`` ...) are
:func:`uniform_like`, :func:`normal_like`, :func:`exponential_like`, :func:`random_like`,
:func:`bernoulli_like`, :func:`cauchy_like`, :func:`log_normal_like` and :func:`geometric_like`:
each returns a new tensor of ``x``'s shape, dtype and device.
"""

from __future__ import annotations

import math
import numbers
import os
import secrets

import numpy as np

from ..device import normalize as _normalize_device
from ..dtypes import (_BY_NP, DType, as_dtype, bool_, finfo, float32, float64, get_default_dtype, iinfo, int64,
                      promote_types)
from ..errors import DomainError, DTypeError, ResourceError, ShapeError
from ..options import get_options
from ..kernels import get_kernels
from ..spec.rng import random_bits
from ..tensor import _RNG, Tensor, next_rng_key, no_grad
from .table import export

#: torch's keyword arguments that have no effect here (one memory layout, no pinned host memory).
_INERT = frozenset({"layout", "pin_memory", "memory_format", "out"})


# ---- arguments ------------------------------------------------------------------------------

def _inert(op, kw):
    bad = [k for k in kw if k not in _INERT or (k == "out" and kw[k] is not None)]
    if bad:
        raise DTypeError(f"{op}: unexpected keyword argument {bad[0]!r}")


def _device(device, default=None) -> str:
    # None: ``default`` (a tensor's own device) or else the default device (tl.set_default_device)
    return _normalize_device(default if device is None else device, "device")


def _int(op, v, what):
    """An int argument: Python or NumPy ints and 0-d integer tensors (torch's SymInt), never bool or float."""
    if type(v) is int:
        return v
    if isinstance(v, Tensor):
        if v.numel() != 1 or v.dtype.kind not in "iu":
            raise DTypeError(f"{op}: {what} must be an int, got a tensor of dtype {v.dtype.name} and shape {v.shape}")
        return int(v.item())
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise DTypeError(f"{op}: {what} must be an int, got {type(v).__name__} {v!r}")
    return int(v)


#: Requests below this many bytes skip the look-up of available memory (one file read): they cannot
#: exhaust a machine, and the allocation's own MemoryError is still turned into a ResourceError.
_SMALL_ALLOC = 1 << 24


def _available_bytes(device: str) -> int:
    """Bytes an allocation may take now: the CUDA device's free memory plus the blocks its pool
    caches, or the host's ``MemAvailable`` (physical pages times available pages where no
    /proc/meminfo exists)."""
    if device.startswith("cuda"):
        import cupy  # the device exists: get_kernels(device) already succeeded for this tensor

        from .. import cuda as _cuda
        free = int(cupy.cuda.Device().mem_info[0])
        st = _cuda.memory_stats()
        return free + max(0, st["pool_reserved_bytes"] - st["pool_used_bytes"])
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def check_alloc(op, shape, dtype, device="cpu") -> int:
    """Refuse, before allocating, a tensor of ``shape`` and ``dtype`` on ``device`` larger than
    ``max_alloc_bytes`` (set_options) or the memory available: a :class:`ResourceError` naming the
    op, the shape and the bytes, instead of NumPy's MemoryError or the OOM killer later. Returns the
    bytes. Cheap for small requests (Python ints only)."""
    n = 1
    for d in shape:
        n *= d
    nbytes = n * (dtype.dtype.itemsize if isinstance(dtype, DType) else np.dtype(dtype).itemsize)
    limit = get_options().max_alloc_bytes
    if limit is not None:
        if nbytes > limit:
            raise ResourceError(f"{op}: a tensor of shape {tuple(shape)} needs {nbytes} bytes, more than "
                                f"max_alloc_bytes={limit}")
    elif nbytes >= _SMALL_ALLOC:
        avail = _available_bytes(str(device))
        if nbytes > avail:
            raise ResourceError(f"{op}: a tensor of shape {tuple(shape)} needs {nbytes} bytes, more than the "
                                f"{avail} bytes available on {device}")
    return nbytes


def _is_size(v) -> bool:
    return isinstance(v, (tuple, list)) or (isinstance(v, Tensor) and v.ndim == 1)


def _check_shape(op, shape) -> tuple:
    for d in shape:
        if d < 0:
            raise ShapeError(f"{op}: negative dimension {d} in size {shape}")
    return shape


def _size(op, args, kw) -> tuple:
    """A size from varargs ints, one tuple/list/Size, or ``size=``."""
    if "size" in kw:
        if args:
            raise DTypeError(f"{op}: size given both positionally and as size=")
        args = (kw.pop("size"),)
    if not args:
        raise DTypeError(f"{op}: missing the size argument")
    if len(args) == 1 and _is_size(args[0]):
        args = args[0].tolist() if isinstance(args[0], Tensor) else tuple(args[0])
    return _check_shape(op, tuple(_int(op, d, "size") for d in args))


def _shape_of(op, size) -> tuple:
    """One size argument (``full``, ``new_full``, ``randint``): a tuple/list/Size or an int."""
    return _size(op, (size,), {})


def _leaf(op, value, requires_grad) -> Tensor:
    if requires_grad and value.dtype.kind != "f":
        raise DTypeError(f"{op}: only floating-point tensors can require gradients, got dtype {as_dtype(value.dtype)}")
    return Tensor(value, requires_grad=bool(requires_grad))


def _float_dtype(op, dtype, default=None) -> DType:
    dt = as_dtype(dtype) or default or get_default_dtype()
    if dt.kind != "f":
        raise DTypeError(f"{op}: expects a floating-point dtype, got {dt.name}")
    return dt


def _scalar(v):
    """A Python number from a number, a NumPy scalar or a one-element tensor."""
    if isinstance(v, Tensor):
        return v.item()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _upload(a: np.ndarray, dt: DType, device: str):
    return get_kernels(device).from_host(np.asarray(a), dt.dtype)


# ---- tensor, as_tensor, from_numpy ----------------------------------------------------------

def _scalar_dtype(x):
    if isinstance(x, bool):
        return bool_
    if isinstance(x, numbers.Integral):
        return int64
    if isinstance(x, numbers.Real):
        return get_default_dtype()
    return None


def _infer(op, x, depth=0):
    """(shape, dtype or None for no elements, holds tensors) of nested data, torch's inference:
    bool < int64 < the default float for Python scalars, NumPy and tensor leaves keep their dtype,
    and the leaves' dtypes promote (``promote_types``)."""
    if isinstance(x, Tensor):
        return x.shape, x.dtype, True
    if isinstance(x, np.ndarray):
        return x.shape, as_dtype(x.dtype), False
    if isinstance(x, np.generic):
        return (), as_dtype(x.dtype), False
    d = _scalar_dtype(x)
    if d is not None:
        return (), d, False
    if isinstance(x, (str, bytes, complex)) or x is None or not hasattr(x, "__len__"):
        raise DTypeError(f"{op}: could not infer dtype of {type(x).__name__}")
    items = x if isinstance(x, (list, tuple)) else list(x)
    if not items:
        return (0,), None, False
    types = set(map(type, items))
    if types <= {float, int, bool}:
        return (len(items),), get_default_dtype() if float in types else int64 if int in types else bool_, False
    subs = [_infer(op, i, depth + 1) for i in items]
    shape, dt, special = subs[0]
    for s, d, sp in subs[1:]:
        if s != shape:
            got = s[0] if s and shape else s
            want = shape[0] if s and shape else shape
            raise ShapeError(f"{op}: expected sequence of length {want} at dim {depth + 1} (got {got})")
        if d is not None:
            dt = d if dt is None else promote_types(dt, d)
        special = special or sp
    return (len(items),) + shape, dt, special


def _materialize(x):
    if isinstance(x, Tensor):
        return x.numpy()
    if isinstance(x, (list, tuple)) or (hasattr(x, "__len__") and not isinstance(x, np.ndarray)):
        return [_materialize(i) for i in x]
    return x


def _host_array(op, data, dtype):
    shape, dt, special = _infer(op, data)
    target = as_dtype(dtype) or dt or get_default_dtype()
    try:
        a = np.array(_materialize(data) if special else data, dtype=target.dtype)
    except OverflowError:
        raise DomainError(f"{op}: a value of the data does not fit in {target.name}") from None
    return a.reshape(shape), target


@export("tensor", method=False)
def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (nested lists/tuples of numbers or 0-d tensors,
    NumPy arrays and scalars, tensors); Python bools give bool, ints int64, floats the default
    dtype; NumPy data keeps its dtype."""
    dt = as_dtype(dtype)
    if isinstance(data, Tensor):
        dev = _device(device, data.device)
        K = get_kernels(data.device)
        v = K.copy(data._value) if dt is None or dt == data.dtype else K.astype(data._value, dt.dtype)
        v = get_kernels(dev).to_device(v, dev) if dev != data.device else v
        return _leaf("tensor", v, requires_grad)
    a, dt = _host_array("tensor", data, dt)
    return _leaf("tensor", _upload(a, dt, _device(device)), requires_grad)


def _shares(a: np.ndarray) -> bool:
    return a.flags.c_contiguous and a.dtype in _BY_NP


@export("from_numpy", method=False)
def from_numpy(ndarray) -> Tensor:
    """A CPU tensor sharing ``ndarray``'s memory: writes to either show in both. Only a row-major
    contiguous array of a torch dtype can be shared; any other (a strided view, uint16/32/64) is
    copied, because tensors here are always contiguous."""
    if not isinstance(ndarray, np.ndarray):
        raise DTypeError(f"from_numpy: expected np.ndarray, got {type(ndarray).__name__}")
    dt = as_dtype(ndarray.dtype)
    a = ndarray if type(ndarray) is np.ndarray else ndarray.view(np.ndarray)
    if not _shares(a):
        a = np.array(a, dtype=dt.dtype, order="C", copy=True)
    return Tensor(a)


@export("as_tensor", method=False)
def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor without a copy when possible: a tensor of the asked dtype and device is
    returned itself (other tensors are converted, keeping their graph); a contiguous NumPy array
    of a torch dtype is shared on the CPU."""
    dt = as_dtype(dtype)
    if isinstance(data, Tensor):
        return data.to(device=_device(device, data.device), dtype=dt)
    dev = _device(device)
    if isinstance(data, np.ndarray) and dev == "cpu" and (dt is None or dt == as_dtype(data.dtype)) \
            and _shares(data):
        return from_numpy(data)
    return tensor(data, dtype=dt, device=dev)


@export("asarray", method=False)
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False) -> Tensor:
    """torch.asarray: shares memory with ``obj`` (a tensor or a NumPy array) when ``copy`` is not
    True and dtype and device allow it; ``copy=False`` raises where a copy would be needed."""
    dt = as_dtype(dtype)
    if copy:
        out = tensor(obj, dtype=dt, device=device)
    else:
        out = as_tensor(obj, dtype=dt, device=device)
        shared = out is obj or (isinstance(obj, np.ndarray) and out.device == "cpu"
                                and np.shares_memory(out._value, obj))
        if copy is False and not shared:
            raise DTypeError(f"asarray: copy=False but {type(obj).__name__} cannot be used without a copy "
                             f"(dtype {dt}, device {device})")
    return out.detach().requires_grad_(True) if requires_grad else out


# ---- filled tensors -------------------------------------------------------------------------

def _filled(op, shape, value, dt, device, requires_grad):
    device = _device(device)
    check_alloc(op, shape, dt, device)
    try:
        v = get_kernels(device).full(shape, value, dt.dtype)
    except MemoryError as e:   # under the limit but still more than the allocator could give
        raise ResourceError(f"{op}: could not allocate a tensor of shape {tuple(shape)} ({dt.name}) on {device}: "
                            f"{e}") from None
    return _leaf(op, v, requires_grad)


@export("zeros", method=False)
def zeros(*size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """Zeros of ``size`` (varargs ints, a tuple/list/Size, or ``size=``), default float dtype."""
    shape = _size("zeros", size, kw)
    _inert("zeros", kw)
    return _filled("zeros", shape, 0, as_dtype(dtype) or get_default_dtype(), device, requires_grad)


@export("ones", method=False)
def ones(*size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    shape = _size("ones", size, kw)
    _inert("ones", kw)
    return _filled("ones", shape, 1, as_dtype(dtype) or get_default_dtype(), device, requires_grad)


@export("empty", method=False)
def empty(*size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """An uninitialised tensor in torch; here its entries are zeros (reproducible runs)."""
    shape = _size("empty", size, kw)
    _inert("empty", kw)
    return _filled("empty", shape, 0, as_dtype(dtype) or get_default_dtype(), device, requires_grad)


def _fill_dtype(value) -> DType:
    """torch.full's dtype from the fill value: bool, int64 for ints, the default float for floats
    (a 0-d tensor or NumPy scalar counts by its kind, as torch reads it as a Python number)."""
    d = _scalar_dtype(_scalar(value))
    if d is None:
        raise DTypeError(f"full: fill_value must be a number, got {type(value).__name__}")
    return d


@export("full", method=False)
def full(size, fill_value, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """``size`` filled with ``fill_value``; without ``dtype`` the value decides it (``full((2,), 3)``
    is int64, ``full((2,), True)`` bool, ``full((2,), 2.5)`` the default float)."""
    _inert("full", kw)
    shape = _shape_of("full", size)
    dt = as_dtype(dtype) or _fill_dtype(fill_value)
    return _filled("full", shape, _scalar(fill_value), dt, device, requires_grad)


def _like(op, x, dtype, device):
    if not isinstance(x, Tensor):
        raise DTypeError(f"{op}: expects a tensor, got {type(x).__name__}")
    return x.shape, as_dtype(dtype) or x.dtype, _device(device, x.device)


@export("zeros_like", method=False)
def zeros_like(input, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    _inert("zeros_like", kw)
    shape, dt, dev = _like("zeros_like", input, dtype, device)
    return _filled("zeros_like", shape, 0, dt, dev, requires_grad)


@export("ones_like", method=False)
def ones_like(input, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    _inert("ones_like", kw)
    shape, dt, dev = _like("ones_like", input, dtype, device)
    return _filled("ones_like", shape, 1, dt, dev, requires_grad)


@export("empty_like", method=False)
def empty_like(input, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """Like torch.empty_like; the entries are zeros here."""
    _inert("empty_like", kw)
    shape, dt, dev = _like("empty_like", input, dtype, device)
    return _filled("empty_like", shape, 0, dt, dev, requires_grad)


@export("full_like", method=False)
def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """``input``'s shape filled with ``fill_value`` in ``input``'s dtype (a float value is truncated
    for an integer tensor, as in torch)."""
    _inert("full_like", kw)
    shape, dt, dev = _like("full_like", input, dtype, device)
    return _filled("full_like", shape, _scalar(fill_value), dt, dev, requires_grad)


# ---- new_* methods: inherit dtype and device ------------------------------------------------

@export("new_zeros", function=False)
def new_zeros(self, *size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    shape = _size("new_zeros", size, kw)
    _inert("new_zeros", kw)
    return _filled("new_zeros", shape, 0, as_dtype(dtype) or self.dtype, _device(device, self.device), requires_grad)


@export("new_ones", function=False)
def new_ones(self, *size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    shape = _size("new_ones", size, kw)
    _inert("new_ones", kw)
    return _filled("new_ones", shape, 1, as_dtype(dtype) or self.dtype, _device(device, self.device), requires_grad)


@export("new_empty", function=False)
def new_empty(self, *size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """Like Tensor.new_empty; the entries are zeros here."""
    shape = _size("new_empty", size, kw)
    _inert("new_empty", kw)
    return _filled("new_empty", shape, 0, as_dtype(dtype) or self.dtype, _device(device, self.device), requires_grad)


@export("new_full", function=False)
def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    _inert("new_full", kw)
    return _filled("new_full", _shape_of("new_full", size), _number("new_full", fill_value, "fill_value"), as_dtype(dtype) or self.dtype,
                   _device(device, self.device), requires_grad)


@export("new_tensor", function=False)
def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """A copy of ``data`` in ``self``'s dtype and device unless given (``int_t.new_tensor([1.5])``
    truncates, as in torch)."""
    _inert("new_tensor", kw)
    return tensor(data, dtype=as_dtype(dtype) or self.dtype, device=_device(device, self.device),
                  requires_grad=requires_grad)


@export("empty_strided", method=False)
def empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """torch.empty_strided: tensors here are contiguous, so ``stride`` only has to match the size's
    rank; the entries are zeros."""
    _inert("empty_strided", kw)
    shape = _shape_of("empty_strided", size)
    if len(tuple(stride)) != len(shape):
        raise ShapeError(f"empty_strided: size {shape} and stride {tuple(stride)} differ in length")
    return _filled("empty_strided", shape, 0, as_dtype(dtype) or get_default_dtype(), device, requires_grad)


@export("scalar_tensor", method=False)
def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """A 0-d tensor holding the number ``s``, in the default float dtype unless ``dtype`` is given."""
    _inert("scalar_tensor", kw)
    s = _number("scalar_tensor", s, "s")
    return _filled("scalar_tensor", (), s, as_dtype(dtype) or get_default_dtype(), device, requires_grad)


def _tri_indices(op, fn, row, col, offset, dtype, device):
    row, col, offset = _int(op, row, "row"), _int(op, col, "col"), _int(op, offset, "offset")
    if row < 0 or col < 0:
        raise ShapeError(f"{op}: row and col must be non-negative, got row={row}, col={col}")
    dt = as_dtype(dtype) or int64
    if dt not in (int64, as_dtype("int32")):
        raise DTypeError(f"{op}: dtype must be int32 or int64, got {dt.name}")
    check_alloc(op, (2, row * col), np.int64)   # an upper bound of the host indices
    idx = np.stack(fn(row, offset, col)).astype(dt.dtype).reshape(2, -1)
    return _leaf(op, _upload(idx, dt, _device(device)), False)


@export("tril_indices", method=False)
def tril_indices(row, col, offset=0, *, dtype=None, device=None, **kw) -> Tensor:
    """The (2, N) row and column indices of the lower triangle of a row x col matrix, row-major."""
    _inert("tril_indices", kw)
    return _tri_indices("tril_indices", np.tril_indices, row, col, offset, dtype, device)


@export("triu_indices", method=False)
def triu_indices(row, col, offset=0, *, dtype=None, device=None, **kw) -> Tensor:
    """The (2, N) row and column indices of the upper triangle of a row x col matrix, row-major."""
    _inert("triu_indices", kw)
    return _tri_indices("triu_indices", np.triu_indices, row, col, offset, dtype, device)


# ---- ranges and eye ----------------------------------------------------------------------------

@export("eye", method=False)
def eye(n, m=None, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """The (n, m) matrix with ones on the diagonal (m defaults to n)."""
    _inert("eye", kw)
    n = _int("eye", n, "n")
    m = n if m is None else _int("eye", m, "m")
    _check_shape("eye", (n, m))
    dt = as_dtype(dtype) or get_default_dtype()
    check_alloc("eye", (n, m), dt, _device(device))
    return _leaf("eye", _upload(np.eye(n, m, dtype=dt.dtype), dt, _device(device)), requires_grad)


def _number(op, v, what):
    v = _scalar(v)
    if isinstance(v, bool):
        return int(v)
    if not isinstance(v, numbers.Real):
        raise DTypeError(f"{op}: {what} must be a number, got {type(v).__name__}")
    return v


@export("arange", method=False)
def arange(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """``start, start + step, ...`` below ``end`` (above it for a negative step): int64 when every
    argument is an int, else the default float dtype; ceil((end - start) / step) entries. For an
    integer dtype the arguments are truncated to ints first, as torch does."""
    _inert("arange", kw)
    if end is None:
        start, end = 0, start
    start, end, step = (_number("arange", v, w) for v, w in ((start, "start"), (end, "end"), (step, "step")))
    floats = any(isinstance(v, float) for v in (start, end, step))
    dt = as_dtype(dtype) or (get_default_dtype() if floats else int64)
    if not all(math.isfinite(v) for v in (start, end, step)):
        raise DomainError(f"arange: unsupported range: {start} -> {end} (step {step})")
    if dt.kind in "iub":
        start, end, step = int(start), int(end), int(step)
    if step == 0:
        raise DomainError(f"arange: step must be nonzero (start={start}, end={end})")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise DomainError(f"arange: upper bound and lower bound inconsistent with step sign "
                          f"(start={start}, end={end}, step={step})")
    n = -((start - end) // step) if dt.kind in "iub" else math.ceil((end - start) / step)
    check_alloc("arange", (n,), np.float64, _device(device))   # the float64/int64 host buffer
    a = start + step * np.arange(n, dtype=np.int64 if dt.kind in "iub" else np.float64)
    return _leaf("arange", _upload(a.astype(dt.dtype), dt, _device(device)), requires_grad)


def _linspace_values(op, start, end, steps, dt):
    start, end = _number(op, start, "start"), _number(op, end, "end")
    steps = _int(op, steps, "steps")
    if steps < 0:
        raise ShapeError(f"{op}: number of steps must be non-negative, got {steps}")
    check_alloc(op, (steps,), np.float64)   # the host buffer, before any device copy
    if dt.kind in "iub":  # torch truncates the ends to the integer dtype first
        start, end = int(start), int(end)
    # torch's symmetric formula (from start below steps // 2, from end above), in float32
    # arithmetic for float32 results and float64 otherwise.
    ft = np.float32 if dt == float32 else np.float64
    s, e = ft(start), ft(end)
    i = np.arange(steps, dtype=ft)
    if steps <= 1:
        return np.full(steps, s, dtype=ft)
    step = (e - s) / ft(steps - 1)
    return np.where(i < steps // 2, s + step * i, e - step * (ft(steps - 1) - i)).astype(ft)


@export("linspace", method=False)
def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (default float dtype)."""
    _inert("linspace", kw)
    dt = as_dtype(dtype) or get_default_dtype()
    a = _linspace_values("linspace", start, end, steps, dt)
    return _leaf("linspace", _upload(a.astype(dt.dtype), dt, _device(device)), requires_grad)


@export("logspace", method=False)
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """``base ** linspace(start, end, steps)``."""
    _inert("logspace", kw)
    dt = as_dtype(dtype) or get_default_dtype()
    e = _linspace_values("logspace", start, end, steps, float64)
    a = np.power(float(_number("logspace", base, "base")), e)
    return _leaf("logspace", _upload(a.astype(dt.dtype), dt, _device(device)), requires_grad)


# ---- the generator ----------------------------------------------------------------------------

_DEFAULT_SEED = 67280421310721   # torch's initial seed of a new Generator


def _seed_value(seed) -> int:
    """torch's seed range: [-2**63, 2**64); negative seeds wrap to their uint64 value."""
    s = int(seed)
    if not -2 ** 63 <= s < 2 ** 64:
        raise DomainError(f"manual_seed: seed {s} is outside [-2**63, 2**64)")
    return s % 2 ** 64


def _state_tensor(seed, counter) -> Tensor:
    return Tensor(np.array([seed, counter], dtype=np.uint64).view(np.uint8).copy())


def _read_state(state) -> tuple:
    if isinstance(state, Tensor):
        a = state.numpy()
        if a.dtype != np.uint8 or a.shape != (16,):
            raise DTypeError(f"set_state: expects the uint8 tensor of shape (16,) that get_state returns, "
                             f"got dtype {state.dtype.name} and shape {state.shape}")
        seed, counter = (int(v) for v in a.view(np.uint64))
        return seed, counter
    try:
        seed, counter = state
        return int(seed), int(counter)
    except (TypeError, ValueError):
        raise DTypeError(f"set_state: expects a state from get_state, got {type(state).__name__}") from None


class Generator:
    """A random stream of its own: a seed and a counter of draws. ``manual_seed`` restarts it;
    the device is recorded only (the streams are the same on every device).

        >>> import torchlean as tl
        >>> g = tl.Generator().manual_seed(3)
        >>> g.initial_seed()
        3
    """

    def __init__(self, device="cpu"):
        self.device = _device(device)
        self._seed = _DEFAULT_SEED
        self._counter = 0

    def next_key(self) -> tuple:
        """``(seed, counter)`` for one draw; advances the counter (what the rng kernels take)."""
        c = self._counter
        self._counter = c + 1
        return self._seed, c

    def manual_seed(self, seed) -> Generator:
        self._seed = _seed_value(seed)
        self._counter = 0
        return self

    def seed(self) -> int:
        """Reseed from the operating system's entropy; returns the new seed."""
        s = secrets.randbits(64)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        """The state as a uint8 tensor (seed and counter, 16 bytes)."""
        return _state_tensor(self._seed, self._counter)

    def set_state(self, state) -> Generator:
        self._seed, self._counter = _read_state(state)
        return self

    def __repr__(self):
        return f"<torchlean.Generator device={self.device!r} seed={self._seed} counter={self._counter}>"


class _DefaultGenerator(Generator):
    """The global stream (``manual_seed``, ``get_rng_state``): its state is the core's ``_RNG``."""

    def __init__(self):
        self.device = "cpu"

    _seed = property(lambda self: _RNG.seed, lambda self, v: setattr(_RNG, "seed", v))
    _counter = property(lambda self: _RNG.counter, lambda self, v: setattr(_RNG, "counter", v))

    def next_key(self) -> tuple:
        return next_rng_key()


default_generator = _DefaultGenerator()
export("Generator", method=False)(Generator)
export("default_generator", method=False)(default_generator)


@export("manual_seed", method=False)
def manual_seed(seed) -> Generator:
    """Seed the global stream (its counter restarts); returns the default generator."""
    return default_generator.manual_seed(seed)


@export("seed", method=False)
def seed() -> int:
    """Seed the global stream from the operating system's entropy; returns the seed."""
    return default_generator.seed()


@export("initial_seed", method=False)
def initial_seed() -> int:
    return default_generator.initial_seed()


@export("get_rng_state", method=False)
def get_rng_state() -> Tensor:
    """The global stream's state as a uint8 tensor (see :func:`set_rng_state`)."""
    return default_generator.get_state()


@export("set_rng_state", method=False)
def set_rng_state(new_state) -> None:
    """Restore a state from :func:`get_rng_state` (also accepts the core's ``(seed, counter)``)."""
    default_generator.set_state(new_state)


def _key(op, generator):
    if generator is None:
        return next_rng_key()
    if not isinstance(generator, Generator):
        raise DTypeError(f"{op}: generator must be a torchlean.Generator, got {type(generator).__name__}")
    return generator.next_key()


# ---- draws on a device: one counter each --------------------------------------------------------

def _uniform_value(op, shape, dt, device, generator):
    """U[0, 1) in ``dt``: float32/float64 straight from the stream; narrower floats from float32
    uniforms kept below 1 so rounding never reaches 1."""
    check_alloc(op, shape, dt, device)
    s, c = _key(op, generator)
    K = get_kernels(device)
    if dt == float32 or dt == float64:
        return K.rand_uniform(shape, s, c, dt.dtype)
    below_one = 1.0 - finfo(dt).eps / 2
    return K.astype(K.clamp(K.rand_uniform(shape, s, c, np.float32), None, below_one), dt.dtype)


def _normal_value(op, shape, dt, device, generator):
    check_alloc(op, shape, dt, device)
    s, c = _key(op, generator)
    return get_kernels(device).randn(shape, s, c, dt.dtype)


def _open_uniform64(op, shape, device, generator):
    """float64 uniforms in (0, 1]: what logs and inverse CDFs take."""
    check_alloc(op, shape, np.float64, device)
    s, c = _key(op, generator)
    K = get_kernels(device)
    return K.sub(K.full(shape, 1.0, np.float64), K.rand_uniform(shape, s, c, np.float64))


def _randint_value(op, shape, low, high, dt, device, generator):
    """Integers uniform on [low, high) as ``dt``: floor(u * n) from float64 uniforms when the range
    n fits in 53 bits (bias below n / 2**53), else the stream's 64 bits modulo n."""
    check_alloc(op, shape, np.float64, device)   # the float64 uniforms come first
    s, c = _key(op, generator)
    K = get_kernels(device)
    n = high - low
    if n <= 2 ** 53:
        k = K.astype(K.scale(K.rand_uniform(shape, s, c, np.float64), float(n)), np.int64)
        v = K.add_scalar(k, low) if low else k
    else:
        bits = random_bits(math.prod(shape), s, c) % np.uint64(n)
        v = K.from_host((bits + np.uint64(low % 2 ** 64)).view(np.int64).reshape(shape), np.int64)
    return v if dt == int64 else K.astype(v, dt.dtype)


def _check_int_range(op, low, high, dt):
    """[low, high) must fit an integer dtype (torch only warns for floats beyond 2**mantissa)."""
    if dt.kind == "f":
        return
    lo, hi = (0, 1) if dt.kind == "b" else (iinfo(dt).min, iinfo(dt).max)
    if low < lo:
        raise DomainError(f"{op}: from = {low} is out of bounds for {dt.name}")
    if high - 1 > hi:
        raise DomainError(f"{op}: to - 1 = {high - 1} is out of bounds for {dt.name}")


# ---- random creation functions ------------------------------------------------------------------

@export("rand", method=False)
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """Uniform samples on [0, 1) of ``size``, default float dtype."""
    shape = _size("rand", size, kw)
    _inert("rand", kw)
    dt = _float_dtype("rand", dtype)
    return _leaf("rand", _uniform_value("rand", shape, dt, _device(device), generator), requires_grad)


@export("randn", method=False)
def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """Standard normal samples of ``size`` (Box-Muller over the counter-based stream)."""
    shape = _size("randn", size, kw)
    _inert("randn", kw)
    dt = _float_dtype("randn", dtype)
    return _leaf("randn", _normal_value("randn", shape, dt, _device(device), generator), requires_grad)


@export("rand_like", method=False)
def rand_like(input, *, generator=None, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    _inert("rand_like", kw)
    shape, dt, dev = _like("rand_like", input, dtype, device)
    dt = _float_dtype("rand_like", dt)
    return _leaf("rand_like", _uniform_value("rand_like", shape, dt, dev, generator), requires_grad)


@export("randn_like", method=False)
def randn_like(input, *, generator=None, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    _inert("randn_like", kw)
    shape, dt, dev = _like("randn_like", input, dtype, device)
    dt = _float_dtype("randn_like", dt)
    return _leaf("randn_like", _normal_value("randn_like", shape, dt, dev, generator), requires_grad)


def _low_high(op, args, low, high):
    args = list(args)
    if len(args) > 2:
        raise DTypeError(f"{op}: too many positional arguments")
    if len(args) == 2:
        low, high = args
    elif len(args) == 1:
        if high is None:
            high = args[0]
        else:
            low = args[0]
    if high is None:
        raise DTypeError(f"{op}: missing the high argument")
    low = 0 if low is None else _int(op, low, "low")
    high = _int(op, high, "high")
    if low >= high:
        raise DomainError(f"{op}: expects 'low' to be less than 'high', but got low={low} >= high={high}")
    return low, high


@export("randint", method=False)
def randint(*args, size=None, low=None, high=None, generator=None, dtype=None, device=None, requires_grad=False,
            **kw) -> Tensor:
    """Integers uniform on [low, high): ``randint(high, size)`` or ``randint(low, high, size)``;
    int64 unless ``dtype`` says otherwise."""
    _inert("randint", kw)
    args = list(args)
    if size is None:
        if not args or not _is_size(args[-1]):
            raise DTypeError("randint: missing the size argument (a tuple of ints)")
        size = args.pop()
    shape = _shape_of("randint", size)
    low, high = _low_high("randint", args, low, high)
    dt = as_dtype(dtype) or int64
    _check_int_range("randint", low, high, dt)
    return _leaf("randint", _randint_value("randint", shape, low, high, dt, _device(device), generator),
                 requires_grad)


@export("randint_like", method=False)
def randint_like(input, *args, low=None, high=None, generator=None, dtype=None, device=None,
                 requires_grad=False, **kw) -> Tensor:
    """Integers uniform on [low, high) in ``input``'s shape and dtype (a float tensor gets float values)."""
    _inert("randint_like", kw)
    shape, dt, dev = _like("randint_like", input, dtype, device)
    low, high = _low_high("randint_like", args, low, high)
    _check_int_range("randint_like", low, high, dt)
    return _leaf("randint_like", _randint_value("randint_like", shape, low, high, dt, dev, generator), requires_grad)


@export("randperm", method=False)
def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """A random permutation of 0 .. n-1 (the order of n float64 uniforms, sorted on the host)."""
    _inert("randperm", kw)
    n = _int("randperm", n, "n")
    _check_shape("randperm", (n,))
    dt = as_dtype(dtype) or int64
    check_alloc("randperm", (n,), np.float64)   # the host uniforms that are sorted
    s, c = _key("randperm", generator)
    u = get_kernels("cpu").rand_uniform((n,), s, c, np.float64)
    return _leaf("randperm", _upload(np.argsort(u, kind="stable").astype(dt.dtype), dt, _device(device)),
                 requires_grad)


# ---- distributions over tensors -------------------------------------------------------------------

def _host_check(op, x: Tensor, ok, message):
    a = x.numpy()
    with np.errstate(invalid="ignore"):
        if not bool(np.all(ok(a))):
            raise DomainError(f"{op}: {message}")


def _float_tensor(op, x, what="input"):
    if not isinstance(x, Tensor):
        raise DTypeError(f"{op}: {what} must be a tensor, got {type(x).__name__}")
    if x.dtype.kind != "f":
        raise DTypeError(f"{op}: expects a floating-point {what}, got dtype {x.dtype.name}")
    return x


@export("normal", method=False)
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False,
           **kw) -> Tensor:
    """Normal samples, in torch's overloads: ``normal(mean_tensor, std_tensor)`` (broadcast),
    ``normal(mean_tensor, std=1.0)``, ``normal(mean, std_tensor)``, ``normal(mean, std, size)``."""
    _inert("normal", kw)
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise DTypeError("normal: with a float mean and std, size is required")
        mean, std = float(_number("normal", mean, "mean")), float(_number("normal", std, "std"))
        if not std >= 0.0:
            raise DomainError(f"normal: expects std >= 0.0, but found std {std}")
        dt = _float_dtype("normal", dtype)
        dev = _device(device)
        K = get_kernels(dev)
        z = _normal_value("normal", _shape_of("normal", size), dt, dev, generator)
        z = K.scale(z, std) if std != 1.0 else z
        return _leaf("normal", K.add_scalar(z, mean) if mean else z, requires_grad)
    if size is not None:
        raise DTypeError("normal: size is only accepted with a float mean and std")
    if st:
        _float_tensor("normal", std, "std")
        _host_check("normal", std, lambda a: a >= 0, "expects all elements of std >= 0.0")
    else:
        std = float(_number("normal", std, "std"))
        if not std >= 0.0:
            raise DomainError(f"normal: expects std >= 0.0, but found std {std}")
    if mt:
        _float_tensor("normal", mean, "mean")
    ref = mean if mt else std
    shape = np.broadcast_shapes(mean.shape if mt else (), std.shape if st else ())
    dt = (promote_types(mean.dtype, std.dtype) if mt and st else ref.dtype)
    with no_grad():
        z = Tensor(_normal_value("normal", shape, dt, ref.device, generator))
        out = (mean.detach() if mt else mean) + (std.detach() if st else std) * z
    return _leaf("normal", out.to(dtype=dt)._value, False)


@export("bernoulli", method=False)
def bernoulli(input, p=None, *, generator=None, **kw) -> Tensor:
    """1 with probability ``input`` (or the float ``p``), else 0, in ``input``'s dtype: a uniform
    draw compared with the probability."""
    _inert("bernoulli", kw)
    if not isinstance(input, Tensor):
        raise DTypeError(f"bernoulli: input must be a tensor, got {type(input).__name__}")
    if p is None:
        _float_tensor("bernoulli", input)
        _host_check("bernoulli", input, lambda a: (a >= 0) & (a <= 1),
                    f"expects every probability of input in [0, 1] (shape {input.shape})")
        return bernoulli_like(input, input, generator=generator)
    return bernoulli_like(input, p, generator=generator)


@export("multinomial", method=False)
def multinomial(input, num_samples, replacement=False, *, generator=None, **kw) -> Tensor:
    """``num_samples`` category indices per row of the non-negative weights ``input`` (1-D or 2-D,
    not necessarily normalized), int64. With replacement: inverse CDF of one uniform per sample;
    without: the categories ordered by exponential clocks E / w (the law of drawing one by one
    without replacement), so zero weights are never drawn. Computed on the host."""
    _inert("multinomial", kw)
    _float_tensor("multinomial", input)
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {input.shape}")
    k = _int("multinomial", num_samples, "num_samples")
    if k <= 0:
        raise DomainError(f"multinomial: cannot sample n_sample <= 0 samples (num_samples={k})")
    w = input.numpy().astype(np.float64).reshape(-1, input.shape[-1])
    n = w.shape[1]
    if not replacement and k > n:
        raise DomainError(f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                          f"({k} > {n})")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise DomainError(f"multinomial: probability tensor contains either inf, nan or element < 0 "
                          f"(shape {input.shape})")
    total = w.sum(axis=1)
    if np.any(total <= 0):
        raise DomainError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
    if not replacement and np.any((w > 0).sum(axis=1) < k):
        raise DomainError(f"multinomial: invalid multinomial distribution (with replacement=False, not enough "
                          f"non-zero categories to sample {k})")
    s, c = _key("multinomial", generator)
    rows = w.shape[0]
    if replacement:
        u = get_kernels("cpu").rand_uniform((rows, k), s, c, np.float64) * total[:, None]
        cdf = np.cumsum(w, axis=1)
        last = n - 1 - np.argmax(w[:, ::-1] > 0, axis=1)
        out = np.stack([np.searchsorted(cdf[r], u[r], side="right") for r in range(rows)])
        out = np.minimum(out, last[:, None])
    else:
        u = 1.0 - get_kernels("cpu").rand_uniform((rows, n), s, c, np.float64)
        with np.errstate(divide="ignore"):
            keys = -np.log(u) / w
        out = np.argsort(keys, axis=1, kind="stable")[:, :k]
    out = out.astype(np.int64).reshape(input.shape[:-1] + (k,))
    return Tensor(_upload(out, int64, input.device))


def _poisson_inverse_cdf(lam: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The smallest k with CDF(k; lam) >= u, per element (lam > 0, float64). The walk starts at the
    mode floor(lam), whose CDF is summed once per distinct rate from the mode down until the terms
    vanish, so each element moves only about sqrt(lam) steps."""
    rates, which = np.unique(lam, return_inverse=True)
    mode = np.floor(rates)
    lgamma = np.frompyfunc(math.lgamma, 1, 1)
    p_mode = np.exp(mode * np.log(rates) - rates - lgamma(mode + 1).astype(np.float64))
    cdf_mode, term, j = p_mode.copy(), p_mode.copy(), mode.copy()
    idx = np.flatnonzero(j > 0)
    while idx.size:
        term[idx] *= j[idx] / rates[idx]
        j[idx] -= 1
        cdf_mode[idx] += term[idx]
        idx = idx[(j[idx] > 0) & (term[idx] > 1e-18 * cdf_mode[idx])]
    k, cdf, p, r = mode[which], cdf_mode[which], p_mode[which], rates[which]
    down = np.flatnonzero((k > 0) & (cdf - p >= u))
    while down.size:
        cdf[down] -= p[down]
        p[down] *= k[down] / r[down]
        k[down] -= 1
        down = down[(k[down] > 0) & (cdf[down] - p[down] >= u[down])]
    up = np.flatnonzero(cdf < u)
    while up.size:
        k[up] += 1
        p[up] *= r[up] / k[up]
        cdf[up] += p[up]
        up = up[(cdf[up] < u[up]) & (p[up] > 1e-300)]
    return k


@export("poisson", method=False)
def poisson(input, generator=None) -> Tensor:
    """Poisson samples with rates ``input`` (float), in its dtype: one uniform per element through
    the inverse CDF (exact, no rejection loop). Computed on the host."""
    _float_tensor("poisson", input)
    _host_check("poisson", input, lambda a: a >= 0, "invalid Poisson rate, expected rate to be non-negative")
    lam = input.numpy().astype(np.float64).reshape(-1)
    s, c = _key("poisson", generator)
    u = get_kernels("cpu").rand_uniform(lam.shape, s, c, np.float64)
    out = np.zeros(lam.shape, dtype=np.float64)
    pos = np.flatnonzero(lam > 0)
    if pos.size:
        out[pos] = _poisson_inverse_cdf(lam[pos], u[pos])
    return Tensor(_upload(out.reshape(input.shape).astype(input.dtype.dtype), input.dtype, input.device))


# ---- out-of-place cores of the in-place random methods ----------------------------------------------

def uniform_like(x: Tensor, a=0.0, b=1.0, *, generator=None) -> Tensor:
    """``x.uniform_(a, b)``'s values: U[a, b) in x's shape, dtype (float) and device."""
    dt = _float_dtype("uniform_", x.dtype)
    a, b = float(_number("uniform_", a, "from")), float(_number("uniform_", b, "to"))
    if not a <= b:
        raise DomainError(f"uniform_: expects to return a [from, to) range, but found from={a} > to={b}")
    if not (math.isfinite(a) and math.isfinite(b)):
        raise DomainError(f"uniform_: from={a} and to={b} must be finite")
    u = _uniform_value("uniform_", x.shape, dt, x.device, generator)
    if a == 0.0 and b == 1.0:
        return Tensor(u)
    K = get_kernels(x.device)
    return Tensor(K.add_scalar(K.scale(u, b - a), a))


def normal_like(x: Tensor, mean=0.0, std=1.0, *, generator=None) -> Tensor:
    """``x.normal_(mean, std)``'s values."""
    dt = _float_dtype("normal_", x.dtype)
    mean, std = float(_number("normal_", mean, "mean")), float(_number("normal_", std, "std"))
    if not std >= 0.0:
        raise DomainError(f"normal_: expects std >= 0.0, but found std {std}")
    K = get_kernels(x.device)
    return Tensor(K.add_scalar(K.scale(_normal_value("normal_", x.shape, dt, x.device, generator), std), mean))


def exponential_like(x: Tensor, lambd=1.0, *, generator=None) -> Tensor:
    """``x.exponential_(lambd)``'s values: -log(u) / lambd with u in (0, 1]."""
    dt = _float_dtype("exponential_", x.dtype)
    lambd = float(_number("exponential_", lambd, "lambd"))
    if not lambd > 0.0:
        raise DomainError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    K = get_kernels(x.device)
    u = _open_uniform64("exponential_", x.shape, x.device, generator)
    return Tensor(K.astype(K.scale(K.log(u), -1.0 / lambd), dt.dtype))


def cauchy_like(x: Tensor, median=0.0, sigma=1.0, *, generator=None) -> Tensor:
    """``x.cauchy_(median, sigma)``'s values: median + sigma * tan(pi * (u - 1/2))."""
    dt = _float_dtype("cauchy_", x.dtype)
    median, sigma = float(_number("cauchy_", median, "median")), float(_number("cauchy_", sigma, "sigma"))
    if not sigma > 0.0:
        raise DomainError(f"cauchy_: expects sigma > 0.0, but found sigma={sigma}")
    K = get_kernels(x.device)
    t = K.scale(K.add_scalar(_open_uniform64("cauchy_", x.shape, x.device, generator), -0.5), math.pi)
    return Tensor(K.astype(K.add_scalar(K.scale(K.div(K.sin(t), K.cos(t)), sigma), median), dt.dtype))


def log_normal_like(x: Tensor, mean=1.0, std=2.0, *, generator=None) -> Tensor:
    """``x.log_normal_(mean, std)``'s values: exp(mean + std * z)."""
    dt = _float_dtype("log_normal_", x.dtype)
    mean, std = float(_number("log_normal_", mean, "mean")), float(_number("log_normal_", std, "std"))
    if not std > 0.0:
        raise DomainError(f"log_normal_: expects std > 0.0, but found std={std}")
    K = get_kernels(x.device)
    z = _normal_value("log_normal_", x.shape, float64, x.device, generator)
    return Tensor(K.astype(K.exp(K.add_scalar(K.scale(z, std), mean)), dt.dtype))


def geometric_like(x: Tensor, p, *, generator=None) -> Tensor:
    """``x.geometric_(p)``'s values: trials up to the first success, 1 + floor(log(u) / log(1 - p)),
    in x's dtype (integer dtypes too)."""
    p = float(_number("geometric_", p, "p"))
    if not 0.0 < p < 1.0:
        raise DomainError(f"geometric_: expects p to be in (0, 1), but got p={p}")
    K = get_kernels(x.device)
    u = _open_uniform64("geometric_", x.shape, x.device, generator)
    k = K.astype(K.scale(K.log(u), 1.0 / math.log1p(-p)), np.int64)
    return Tensor(K.astype(K.add_scalar(k, 1), x.dtype.dtype))


def random_like(x: Tensor, from_=0, to=None, *, generator=None) -> Tensor:
    """``x.random_(from, to)``'s values: integers uniform on [from, to) in x's dtype; ``random_()``
    covers [0, 2**mantissa] for floats and [0, max] for integers, ``random_(to)`` [0, to)."""
    dt = x.dtype
    from_ = _int("random_", from_, "from")
    if to is None:
        top = 1 if dt.kind == "b" else iinfo(dt).max if dt.kind in "iu" else 2 ** (np.finfo(dt.dtype).nmant + 1)
        to = top + 1
    else:
        to = _int("random_", to, "to")
    if from_ >= to:
        raise DomainError(f"random_: expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    _check_int_range("random_", from_, to, dt)
    return Tensor(_randint_value("random_", x.shape, from_, to, dt, x.device, generator))


def bernoulli_like(x: Tensor, p=0.5, *, generator=None) -> Tensor:
    """``x.bernoulli_(p)``'s values: 1 where a uniform draw is below ``p`` (a float or a tensor
    broadcast to x's shape), in x's dtype (integer dtypes too)."""
    K = get_kernels(x.device)
    if isinstance(p, Tensor):
        _float_tensor("bernoulli_", p, "p")
        _host_check("bernoulli_", p, lambda a: (a >= 0) & (a <= 1), f"expects p in [0, 1] (shape {p.shape})")
        wide = p.dtype == float64
        pv = p._value if p.shape == x.shape else p.detach().broadcast_to(x.shape)._value
        pv = pv if p.device == x.device else K.to_device(pv, x.device)
    else:
        pf = float(_number("bernoulli_", p, "p"))
        if not 0.0 <= pf <= 1.0:
            raise DomainError(f"bernoulli_: expects p to be in [0, 1], but got p={pf}")
        wide = True
        pv = K.full(x.shape, pf, np.float64)
    u = _uniform_value("bernoulli_", x.shape, float64 if wide else float32, x.device, generator)
    return Tensor(K.astype(K.compare(u, pv, "lt"), x.dtype.dtype))
