"""CUDA kernels of the elementwise family: same-dtype arithmetic in one launch, fused activations and
their backward (``src/elementwise.cu``); general broadcasting and mixed dtypes take CuPy's ufuncs."""

from __future__ import annotations

import math

import cupy
import numpy as np

from ...spec.elementwise import float_as_ints
from ..host.base import _c
from . import build
from .base import _EW_PER_BLOCK, _ND, _THREADS, _aligned, _dev
from .build import blocks, ftype, launch


# Opcodes, from the X-macro lists of src/elementwise.cu (the one place an op is numbered).
UNARY = build.xmacro("elementwise", "UNARY_OPS")
BWD = build.xmacro("elementwise", "BWD_OPS")
BINARY = build.xmacro("elementwise", "BINARY_OPS")
N_BMODE = 4  # binary layouts: same shape, b a scalar, a a scalar, b a row repeated over the last axis

build.declare("elementwise",
              [f"unary_kernel<{t}, {op}>" for t in build.FLOATS for op in UNARY.values()]
              + [f"bwd_kernel<{t}, {op}>" for t in build.FLOATS for op in BWD.values()]
              + [f"minmax_bwd_kernel<{t}>" for t in build.FLOATS]
              + [f"binary_kernel<{t}, {op}, {m}>" for t in build.FLOATS for op in BINARY.values()
                 for m in range(N_BMODE)])

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

    Modes: 0 same shape, 1 b holds one element, 2 a holds one element, 3 b a row over a's last axis."""
    sa, sb = a.shape, b.shape
    if sa == sb:
        return (0, sa, 1) if a._c_contiguous and b._c_contiguous else None
    if b.size == 1 and len(sb) <= len(sa):
        return (1, sa, 1) if a._c_contiguous else None
    if a.size == 1 and len(sa) <= len(sb):
        return (2, sb, 1) if b._c_contiguous else None
    if len(sb) == 1 and sa and sa[-1] == sb[0] and a._c_contiguous and b._c_contiguous:
        return (3, sa, sb[0])
    return None


def _binary(a, b, op, ufunc):
    """NumPy-broadcast a (op) b: same-dtype float arrays in the common layouts take one raw launch,
    everything else (mixed dtypes, scalars, general broadcasting) CuPy's ufunc."""
    if type(a) is _ND and type(b) is _ND:
        dt = a.dtype
        if (dt is b.dtype or dt == b.dtype) and (dt is _F32 or dt == _F64 or dt == _F32):
            sa = a.shape
            if sa == b.shape and a._c_contiguous and b._c_contiguous:
                mode, shape, cols = 0, sa, 1
            else:
                plan = _bin_plan(a, b)
                if plan is None:
                    return ufunc(a, b)
                mode, shape, cols = plan
            out = _ND(shape, dt)
            n = out.size
            if n:
                L = _BIN_L.get((dt, op, mode)) or _bin_launcher(dt, op, mode)
                L((n + _EW_PER_BLOCK - 1) // _EW_PER_BLOCK, _THREADS, a.data.ptr, b.data.ptr, out.data.ptr, n, cols)
            return out
    return ufunc(a, b)


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


maximum, minimum, neg, abs, sqrt = cupy.maximum, cupy.minimum, cupy.negative, cupy.abs, cupy.sqrt


exp, log, sin, cos, tanh = cupy.exp, cupy.log, cupy.sin, cupy.cos, cupy.tanh


def where(cond, a, b):
    # Python scalars stay scalars: NumPy-2 promotion treats them as weak, 0-d arrays not.
    def arr(v):
        return _dev(v) if isinstance(v, (np.ndarray, np.generic)) else v
    return cupy.where(arr(cond), arr(a), arr(b))


def scale(x, c):
    return x * _c(x, c)


def add_scalar(x, c):
    return x + _c(x, c)


def inv(x):
    return cupy.reciprocal(x)


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
    return _CMP[op](a, b)


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
