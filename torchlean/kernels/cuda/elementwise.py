"""CUDA kernels of the elementwise family: same-dtype arithmetic in one launch, fused activations and
their backward, comparisons and float casts (``src/elementwise.cu``).

Float arithmetic runs in these kernels only, never in CuPy's ufuncs: CuPy compiles its kernels with
``-ftz=true``, which flushes float32 subnormals to zero (:mod:`.build`). Float operands of mixed
dtypes are cast first (IEEE conversion), and layouts the kernels do not index are broadcast and
made contiguous. Integer and bool operands take CuPy's ufuncs, which flushing does not affect."""

from __future__ import annotations

import math

import cupy
import numpy as np

from ...spec.elementwise import float_as_ints
from ..host.base import _c
from . import build
from .base import _EW_PER_BLOCK, _ND, _THREADS, _aligned, _dev, cast
from .build import blocks, ftype, launch


# Opcodes, from the X-macro lists of src/elementwise.cu (the one place an op is numbered).
UNARY = build.xmacro("elementwise", "UNARY_OPS")
BWD = build.xmacro("elementwise", "BWD_OPS")
BINARY = build.xmacro("elementwise", "BINARY_OPS")
COMPARE = build.xmacro("elementwise", "COMPARE_OPS")
N_BMODE = 4  # binary layouts: same shape, b a scalar, a a scalar, b a row repeated over the last axis

build.declare("elementwise",
              [f"unary_kernel<{t}, {op}>" for t in build.FLOATS for op in UNARY.values()]
              + [f"bwd_kernel<{t}, {op}>" for t in build.FLOATS for op in BWD.values()]
              + [f"minmax_bwd_kernel<{t}>" for t in build.FLOATS]
              + [f"binary_kernel<{t}, {op}, {m}>" for t in build.FLOATS for op in BINARY.values()
                 for m in range(N_BMODE)]
              + [f"compare_kernel<{t}, {op}, {m}>" for t in build.FLOATS for op in COMPARE.values()
                 for m in range(N_BMODE)]
              + [f"cast_kernel<{s}, {d}>" for s in build.FLOATS for d in build.FLOATS if s != d]
              + [f"to_bool_kernel<{t}>" for t in build.FLOATS])

_BIN_FN: dict = {}
_BIN_L: dict = {}   # (dtype, op, mode) -> Launcher of binary_kernel
_OP_ADD, _OP_SUB, _OP_MUL, _OP_DIV = (BINARY[k] for k in ("add", "sub", "mul", "div"))
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _bin_fn(dtype, op, mode):
    key = (dtype, op, mode)
    f = _BIN_FN.get(key)
    if f is None:
        f = _BIN_FN[key] = build.function("elementwise", f"binary_kernel<{build._FLOAT_NAME[dtype]}, {op}, {mode}>")
    return f


def _bin_launcher(dtype, op, mode):
    L = _BIN_L[(dtype, op, mode)] = build.Launcher(_bin_fn(dtype, op, mode), "PPPqq")
    return L


def _bin_plan(a, b):
    """(mode, out shape, cols) of a one-launch binary op on float arrays of one dtype, else None.

    Modes: 0 same shape, 1 b holds one element, 2 a holds one element, 3 b repeated over a's leading
    axes (b's shape, less leading ones, is a's trailing shape: a bias row, a position table)."""
    sa, sb = a.shape, b.shape
    if sa == sb:
        return (0, sa, 1) if a._c_contiguous and b._c_contiguous else None
    if b.size == 1 and len(sb) <= len(sa):
        return (1, sa, 1) if a._c_contiguous else None
    if a.size == 1 and len(sa) <= len(sb):
        return (2, sb, 1) if b._c_contiguous else None
    if len(sb) == 1 and sa and sa[-1] == sb[0] and a._c_contiguous and b._c_contiguous:
        return (3, sa, sb[0])
    if 0 < len(sb) <= len(sa) and a._c_contiguous and b._c_contiguous and b.size:
        k = 0                      # b's shape without its leading ones: a trailing block of a's
        while k < len(sb) - 1 and sb[k] == 1:
            k += 1
        tail = sb[k:]
        if sa[len(sa) - len(tail):] == tail:
            return (3, sa, b.size)
    return None


def _float_pair(a, b):
    """``(a, b, dtype)`` as same-dtype float32/float64 device arrays in a layout of :func:`_bin_plan`,
    or None when either is not a float array (integer and bool arithmetic, and Python scalars, stay
    with CuPy's ufuncs)."""
    if not isinstance(a, (_ND, np.ndarray)) or not isinstance(b, (_ND, np.ndarray)):
        return None
    if a.dtype.kind != "f" or b.dtype.kind != "f" or a.dtype.itemsize < 4 or b.dtype.itemsize < 4:
        return None
    dt = _F64 if _F64 in (a.dtype, b.dtype) else _F32
    a, b = cast(_dev(a), dt), cast(_dev(b), dt)
    if _bin_plan(a, b) is None:
        shape = cupy.broadcast_shapes(a.shape, b.shape)
        a = cupy.ascontiguousarray(cupy.broadcast_to(a, shape))
        b = cupy.ascontiguousarray(cupy.broadcast_to(b, shape))
    return a, b, dt


def _binary(a, b, op, ufunc):
    """NumPy-broadcast a (op) b: float operands in one raw launch (cast to the wider float and
    broadcast first where needed, :func:`_float_pair`); anything else CuPy's ufunc."""
    if not (type(a) is _ND and type(b) is _ND and (a.dtype is b.dtype or a.dtype == b.dtype)
            and (a.dtype is _F32 or a.dtype == _F64 or a.dtype == _F32)):
        pair = _float_pair(a, b)
        if pair is None:
            return ufunc(a, b)
        a, b, _ = pair
    dt = a.dtype
    sa = a.shape
    if sa == b.shape and a._c_contiguous and b._c_contiguous:
        mode, shape, cols = 0, sa, 1
    else:
        plan = _bin_plan(a, b)
        if plan is None:
            pair = _float_pair(a, b)
            a, b, _ = pair
            plan = _bin_plan(a, b)
        mode, shape, cols = plan
    out = _ND(shape, dt)
    n = out.size
    if n:
        L = _BIN_L.get((dt, op, mode)) or _bin_launcher(dt, op, mode)
        L((n + _EW_PER_BLOCK - 1) // _EW_PER_BLOCK, _THREADS, a.data.ptr, b.data.ptr, out.data.ptr, n, cols)
    return out


def add(a, b):
    return _binary(a, b, _OP_ADD, cupy.add)


def atan2(a, b):
    return _binary(a, b, BINARY["atan2"], cupy.arctan2)


def fmod(a, b):
    return _binary(a, b, BINARY["fmod"], cupy.fmod)


def remainder(a, b):
    return _binary(a, b, BINARY["remainder"], cupy.remainder)


def floor_divide(a, b):
    return _binary(a, b, BINARY["floor_divide"], cupy.floor_divide)


def power(a, b):
    return _binary(a, b, BINARY["power"], cupy.power)


def _shift(a, b, left):
    # torch's shifts, as the host's: a count < 0 or >= the bit width fills with 0 (-1 for a negative a
    # shifted right), where the hardware's shift is undefined.
    bits = a.dtype.itemsize * 8
    ok = (b >= 0) & (b < bits)
    s = cupy.where(ok, b, 0).astype(a.dtype)
    if left:
        return cupy.where(ok, cupy.left_shift(a, s), cupy.zeros((), a.dtype))
    fill = cupy.where(a < 0, -1, 0).astype(a.dtype) if a.dtype.kind == "i" else cupy.zeros((), a.dtype)
    return cupy.where(ok, cupy.right_shift(a, s), fill)


_BITWISE = {"and": cupy.bitwise_and, "or": cupy.bitwise_or, "xor": cupy.bitwise_xor,
            "left_shift": lambda a, b: _shift(a, b, True), "right_shift": lambda a, b: _shift(a, b, False)}


def _ints(x):
    x = _dev(x)
    return float_as_ints(x, cupy) if x.dtype.kind == "f" else x


def bitwise(a, b, op):
    return _BITWISE[op](_ints(a), _ints(b))


def bitwise_not(x):
    return cupy.invert(_ints(x))


def sub(a, b):
    return _binary(a, b, _OP_SUB, cupy.subtract)


def mul(a, b):
    return _binary(a, b, _OP_MUL, cupy.multiply)


def div(a, b):
    return _binary(a, b, _OP_DIV, cupy.divide)


def maximum(a, b):
    return _binary(a, b, BINARY["maximum"], cupy.maximum)


def minimum(a, b):
    return _binary(a, b, BINARY["minimum"], cupy.minimum)


def _float_or(name, ufunc, p=False):
    """The unary kernel ``name`` on float32/float64 arrays (a scalar parameter when ``p``), CuPy's
    ``ufunc`` on integers and bools."""
    code = UNARY[name]
    if p:
        def kernel(x, c):
            if x.dtype.kind == "f" and x.dtype.itemsize >= 4:
                return _unary(x, code, name, c, 1.0)   # p1 unused: nonzero, so that p0 is always converted
            return ufunc(x, _c(x, c))
    else:
        def kernel(x):
            if x.dtype.kind == "f" and x.dtype.itemsize >= 4:
                return _unary(x, code, name)
            return ufunc(x)
    return kernel


neg, abs, sqrt = _float_or("neg", cupy.negative), _float_or("abs", cupy.abs), _float_or("sqrt", cupy.sqrt)
exp, log, sin, cos, tanh = (_float_or(n, getattr(cupy, n)) for n in ("exp", "log", "sin", "cos", "tanh"))


def where(cond, a, b):
    # Python scalars stay scalars: NumPy-2 promotion treats them as weak, 0-d arrays not.
    def arr(v):
        return _dev(v) if isinstance(v, (np.ndarray, np.generic)) else v
    a, b = arr(a), arr(b)
    if type(a) is _ND and type(b) is _ND and a.dtype != b.dtype and a.dtype.kind == b.dtype.kind == "f":
        dt = np.result_type(a.dtype, b.dtype)   # promote here: CuPy's select would convert with flushing
        a, b = cast(a, dt), cast(b, dt)
    return cupy.where(arr(cond), a, b)


scale = _float_or("scale", cupy.multiply, p=True)
add_scalar = _float_or("adds", cupy.add, p=True)
inv = _float_or("recip", cupy.reciprocal)


_EW_FN: dict = {}


_EW_L: dict = {}    # (kind, dtype, op) -> Launcher


def _ew_fn(kind, dtype, op, name):
    """The compiled ``unary_kernel`` / ``bwd_kernel`` of (dtype, op), cached by key (no name building)."""
    key = (kind, dtype, op)
    f = _EW_FN.get(key)
    if f is None:
        f = _EW_FN[key] = build.function("elementwise", f"{kind}<{ftype(dtype, name)}, {op}>")
    return f


def _ew_launcher(kind, dtype, op, name):
    f = _ew_fn(kind, dtype, op, name)
    t = "f" if dtype == _F32 else "d"
    fmt = "PPq" + 2 * t if kind == "unary_kernel" else "PPPq" + 2 * t + "i"
    L = _EW_L[(kind, dtype, op)] = build.Launcher(f, fmt)
    return L


def _params(dt, p0, p1):
    """Scalar parameters as the kernel's type would hold them (float32 overflow gives inf, as a cast)."""
    T = dt.type
    return float(T(p0)), float(T(p1))


def _unary(x, op, name, p0=0.0, p1=0.0):
    if type(x) is not _ND:
        x = _dev(x)
    if not x._c_contiguous:
        x = cupy.ascontiguousarray(x)
    dt = x.dtype
    L = _EW_L.get(("unary_kernel", dt, op)) or _ew_launcher("unary_kernel", dt, op, name)
    y = _ND(x.shape, dt)
    n = x.size
    if n:
        if p0 or p1:
            p0, p1 = _params(dt, p0, p1)
        L((n + _EW_PER_BLOCK - 1) // _EW_PER_BLOCK, _THREADS, x.data.ptr, y.data.ptr, n, p0, p1)
    return y


def pow_scalar(x, p):
    if p == 2:
        return x * x
    if x.dtype.kind != "f":  # integer powers stay integers (the front end gives only p >= 0 here)
        return cupy.power(x, x.dtype.type(p))
    return _unary(x, UNARY["pow"], "pow_scalar", p)


def sign(x):
    if x.dtype.kind == "b":
        return x.copy()
    if x.dtype.kind != "f":
        return cupy.sign(x)
    return _unary(x, UNARY["sign"], "sign")


def gelu(x, approximate="none"):
    return _unary(x, UNARY["gelu_tanh"] if approximate == "tanh" else UNARY["gelu_erf"], "gelu")


def clamp(x, lo, hi):
    if x.dtype.kind != "f":  # integer bounds on an integer tensor (the front end promotes any other)
        if lo is not None:
            x = cupy.maximum(x, x.dtype.type(lo))
        return x if hi is None else cupy.minimum(x, x.dtype.type(hi))
    return _unary(x, UNARY["clamp"], "clamp", -math.inf if lo is None else lo, math.inf if hi is None else hi)


_CMP = {"lt": cupy.less, "le": cupy.less_equal, "gt": cupy.greater, "ge": cupy.greater_equal,
        "eq": cupy.equal, "ne": cupy.not_equal}


def compare(a, b, op):
    """``a <op> b`` as bool; float operands in :func:`compare_kernel` (IEEE: a subnormal is not 0)."""
    pair = _float_pair(a, b)
    if pair is None:
        return _CMP[op](a, b)
    a, b, dt = pair
    mode, shape, cols = _bin_plan(a, b)
    out = _ND(shape, np.bool_)
    if out.size:
        launch("elementwise", f"compare_kernel<{build._FLOAT_NAME[dt]}, {COMPARE[op]}, {mode}>",
               blocks(out.size, _THREADS), _THREADS, (a, b, out, np.int64(out.size), np.int64(cols)))
    return out


# ---- fused backward of elementwise ops ------------------------------------------------------


def _bwd(a, g, op, name, p0=0.0, p1=0.0, flags=0):
    if (type(a) is _ND and type(g) is _ND and a.dtype == g.dtype and a.shape == g.shape and a._c_contiguous
            and g._c_contiguous):
        shape, dtype = a.shape, a.dtype
    else:
        shape, dtype, (a, g) = _aligned(a, g)
    L = _EW_L.get(("bwd_kernel", dtype, op)) or _ew_launcher("bwd_kernel", dtype, op, name)
    out = _ND(shape, dtype)
    n = out.size
    if n:
        if p0 or p1:
            p0, p1 = _params(dtype, p0, p1)
        L((n + _EW_PER_BLOCK - 1) // _EW_PER_BLOCK, _THREADS, a.data.ptr, g.data.ptr, out.data.ptr, n, p0, p1,
          flags)
    return out


def gelu_bwd(x, g, approximate="none"):
    return _bwd(x, g, BWD["gelu_tanh"] if approximate == "tanh" else BWD["gelu_erf"], "gelu_bwd")


def clamp_bwd(x, g, lo, hi):
    flags = (lo is not None) | ((hi is not None) << 1)
    return _bwd(x, g, BWD["clamp"], "clamp_bwd", 0.0 if lo is None else lo, 0.0 if hi is None else hi, flags)


def minmax_bwd(a, b, g, is_max):
    shape, dtype, (a, b, g) = _aligned(a, b, g)
    t = ftype(dtype, "minmax_bwd")
    ga = cupy.empty(shape, dtype=dtype)
    gb = cupy.empty(shape, dtype=dtype)
    launch("elementwise", f"minmax_bwd_kernel<{t}>", blocks(ga.size, _EW_PER_BLOCK), _THREADS,
           (a, b, g, ga, gb, np.int64(ga.size), np.int32(bool(is_max))))
    return ga, gb


def pow_bwd(x, g, p):
    if p == 0:
        shape, dtype, _ = _aligned(x, g)
        return cupy.zeros(shape, dtype=dtype)
    return _bwd(x, g, BWD["pow"], "pow_bwd", p, 0.0, 1 if p == 2 else 0)


def _plain_unary(name, code):
    def kernel(x):
        return _unary(x, code, name)
    kernel.__name__ = kernel.__qualname__ = name
    return kernel


def _plain_bwd(name, code):
    def kernel(a, g):
        return _bwd(a, g, code, name)
    kernel.__name__ = kernel.__qualname__ = name
    return kernel


# One kernel function per listed op that takes no parameters (relu(x), relu_bwd(x, g), ...);
# the ops with parameters (clamp, pow, the two GELUs) have their functions above.
for _name, _code in UNARY.items():
    if _name not in globals() and _name not in ("gelu_erf", "gelu_tanh", "pow"):
        globals()[_name] = _plain_unary(_name, _code)
for _name, _code in BWD.items():
    if f"{_name}_bwd" not in globals() and _name not in ("gelu_erf", "gelu_tanh"):
        globals()[f"{_name}_bwd"] = _plain_bwd(f"{_name}_bwd", _code)
