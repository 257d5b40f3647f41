"""NumPy implementation of the kernel surface (float32 and float64).

This is the seeds' "CPU stub" and the fast CPU path at once: every kernel is a
vectorised NumPy expression (BLAS for matmul), with the same semantics as the
CUDA kernels (see :mod:`torchlean.kernels.api`).
"""

from __future__ import annotations

import math

import numpy as np

from .api import check_indices

xp = np
SAFE_LOG_EPS = 1e-6

# ---- the seeds' kernels ---------------------------------------------------------------------


def reduce_sum_axis0(x):
    return x.sum(axis=0)


def reduce_sum_axis1(x):
    return x.sum(axis=1)


def reduce_max_axis0(x):
    return x.max(axis=0)


def reduce_max_axis1(x):
    return x.max(axis=1)


def reduce_sum_axis(x, axis):
    return x.sum(axis=axis)


def concat1d(a, b):
    return np.concatenate([a, b])


def slice1d(x, start, length):
    return x[start:start + length].copy()


def broadcast_vec_to_rows(v, rows):
    return np.ascontiguousarray(np.broadcast_to(v, (rows, v.shape[0])))


def broadcast_vec_to_cols(v, cols):
    return np.ascontiguousarray(np.broadcast_to(v[:, None], (v.shape[0], cols)))


def _plan_view(in_dims, out_dims, axis_map):
    """Shape of the input with a length-1 axis at every inserted output axis."""
    return tuple(1 if a == 0 else in_dims[a - 1] for a in axis_map)


def broadcast_to(x, in_dims, out_dims, axis_map):
    v = x.reshape(_plan_view(tuple(in_dims), tuple(out_dims), tuple(axis_map)))
    return np.array(np.broadcast_to(v, tuple(out_dims)), order="C")  # a copy; 0-d stays 0-d


def reduce_from_broadcast_to(g, in_dims, out_dims, axis_map):
    in_dims, out_dims = tuple(in_dims), tuple(out_dims)
    view = _plan_view(in_dims, out_dims, tuple(axis_map))
    axes = tuple(j for j, (v, o) in enumerate(zip(view, out_dims)) if v == 1 and o != 1)
    return np.asarray(g.sum(axis=axes, keepdims=True), order="C").reshape(in_dims)


def swap_adjacent_at_depth(x, dims, depth):
    dims = tuple(dims)
    if depth < 0 or depth + 1 >= len(dims):
        return x.copy()
    return np.ascontiguousarray(np.swapaxes(x.reshape(dims), depth, depth + 1))


def transpose2d(x):
    return np.ascontiguousarray(x.T)


def bmm(a, b):
    return np.matmul(a, b)


def gather_vec(v, indices):
    idx = check_indices(indices, "gather_vec")
    ok = idx < v.shape[0]
    out = np.zeros(idx.shape[0], dtype=v.dtype)
    out[ok] = v[idx[ok]]
    return out


def gather_rows(mat, indices):
    idx = check_indices(indices, "gather_rows")
    ok = idx < mat.shape[0]
    out = np.zeros((idx.shape[0],) + mat.shape[1:], dtype=mat.dtype)
    out[ok] = mat[idx[ok]]
    return out


def scatter_add(x, values, indices):
    idx = check_indices(indices, "scatter_add")
    ok = idx < x.shape[0]
    out = x.copy()
    np.add.at(out, idx[ok], values[ok])
    return out


def scatter_add_row(mat, row, i):
    check_indices([i], "scatter_add_row")
    out = mat.copy()
    if i < mat.shape[0]:
        out[i] += row
    return out


def scatter_add_rows(mat, values, indices):
    idx = check_indices(indices, "scatter_add_rows")
    ok = idx < mat.shape[0]
    out = mat.copy()
    np.add.at(out, idx[ok], values[ok])
    return out


# ---- memory and transfer --------------------------------------------------------------------


def zeros(shape, dtype):
    return np.zeros(shape, dtype=dtype)


def full(shape, value, dtype):
    return np.full(shape, value, dtype=dtype)


def empty(shape, dtype):
    return np.empty(shape, dtype=dtype)


def copy(x):
    return np.array(x, copy=True, order="C")


def from_host(a, dtype):
    # NumPy's float64 -> float32 cast rounds to nearest even.
    return np.asarray(a, dtype=dtype, order="C")


def to_host(x):
    return np.array(x, copy=True)


def astype(x, dtype):
    return x.astype(dtype, copy=False)


def ascontiguous(x):
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


# ---- elementwise ----------------------------------------------------------------------------

add, sub, mul, div = np.add, np.subtract, np.multiply, np.divide
maximum, minimum, neg, abs, sqrt = np.maximum, np.minimum, np.negative, np.abs, np.sqrt
exp, log, sin, cos, tanh, sign = np.exp, np.log, np.sin, np.cos, np.tanh, np.sign
where = np.where


def _c(x, c):
    """A Python scalar as x's dtype so NumPy never promotes float32 to float64."""
    return x.dtype.type(c)


def scale(x, c):
    return x * _c(x, c)


def add_scalar(x, c):
    return x + _c(x, c)


def pow_scalar(x, p):
    if p == 2:
        return x * x
    return np.power(x, _c(x, p))


def inv(x):
    return np.reciprocal(x)


def relu(x):
    return np.maximum(x, _c(x, 0))


def sigmoid(x):
    # Stable for large |x|: exp only of -|x|.
    e = np.exp(-np.abs(x))
    r = np.reciprocal(e + _c(x, 1))
    return np.where(x >= 0, r, e * r)


def softplus(x):
    return np.maximum(x, _c(x, 0)) + np.log1p(np.exp(-np.abs(x)))


def silu(x):
    return x * sigmoid(x)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)


_SCIPY_ERF: list = []  # SciPy's erf, imported on first use (it costs ~0.4 s at import time)


def _scipy_erf():
    if not _SCIPY_ERF:
        try:
            from scipy.special import erf
        except ImportError:  # pragma: no cover - depends on the environment
            erf = None
        _SCIPY_ERF.append(erf)
    return _SCIPY_ERF[0]


_erf_ufunc = np.frompyfunc(math.erf, 1, 1)

# Chebyshev-fitted erfc (Numerical Recipes' erfcc): relative error < 1.2e-7 everywhere, tails
# included, so Phi(x) = erfc(-x / sqrt 2) / 2 keeps float32's relative accuracy even where
# GELU is tiny (x << 0), at a few passes over the array.
_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
         1.48851587, -0.82215223, 0.17087277)


def _erfc32(x):
    # In-place Horner steps: each pass reuses one buffer instead of allocating a temporary.
    z = np.abs(x)
    t = np.array(z * np.float32(0.5), ndmin=0)  # an array even for 0-d x: the steps below are in place
    t += np.float32(1)
    np.reciprocal(t, out=t)
    p = np.array(t * np.float32(_ERFC[-1]), ndmin=0)
    for c in _ERFC[-2:0:-1]:
        p += np.float32(c)
        p *= t
    p += np.float32(_ERFC[0])
    z *= z
    p -= z
    np.exp(p, out=p)
    p *= t
    return np.where(x >= 0, p, np.float32(2) - p)


def _phi(x):
    """The standard normal CDF, elementwise, in x's dtype."""
    if x.dtype == np.float32:
        return np.float32(0.5) * _erfc32(x * np.float32(-_INV_SQRT_2))
    erf = _scipy_erf()
    e = erf(x * _INV_SQRT_2) if erf is not None else np.asarray(_erf_ufunc(x * _INV_SQRT_2), dtype=x.dtype)
    return (0.5 * (1.0 + e)).astype(x.dtype, copy=False)


def gelu(x, approximate="none"):
    if approximate == "tanh":
        c = _c(x, _SQRT_2_OVER_PI)
        return _c(x, 0.5) * x * (_c(x, 1) + np.tanh(c * (x + _c(x, 0.044715) * x * x * x)))
    return x * _phi(x)


def safe_log(x):
    return np.log(softplus(x) + _c(x, SAFE_LOG_EPS))


def clamp(x, lo, hi):
    return np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi).astype(x.dtype, copy=False)


_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


def compare(a, b, op):
    return _CMP[op](a, b)


# ---- fused backward of elementwise ops ------------------------------------------------------


def relu_bwd(x, g):
    return np.where(x > 0, g, _c(g, 0))


def abs_bwd(x, g):
    return g * np.sign(x)


def sqrt_bwd(y, g):
    pos = y > 0
    return np.where(pos, _c(g, 0.5) * g / np.where(pos, y, _c(y, 1)), _c(g, 0))


def sigmoid_bwd(y, g):
    return g * y * (_c(y, 1) - y)


def tanh_bwd(y, g):
    return g * (_c(y, 1) - y * y)


def softplus_bwd(x, g):
    return g * sigmoid(x)


def silu_bwd(x, g):
    s = sigmoid(x)
    return g * s * (_c(x, 1) + x * (_c(x, 1) - s))


def gelu_bwd(x, g, approximate="none"):
    if approximate == "tanh":
        c = _c(x, _SQRT_2_OVER_PI)
        k = _c(x, 0.044715)
        t = np.tanh(c * (x + k * x * x * x))
        d = _c(x, 0.5) * (_c(x, 1) + t) + _c(x, 0.5) * x * (_c(x, 1) - t * t) * c * (_c(x, 1) + _c(x, 3) * k * x * x)
    else:
        cdf = _phi(x)
        d = cdf + x * np.exp(_c(x, -0.5) * x * x) * _c(x, 1.0 / math.sqrt(2 * math.pi))
    return g * d


def safe_log_bwd(x, g):
    return g * sigmoid(x) / (softplus(x) + _c(x, SAFE_LOG_EPS))


def clamp_bwd(x, g, lo, hi):
    inside = np.ones(x.shape, dtype=bool)
    if lo is not None:
        inside &= x > lo
    if hi is not None:
        inside &= x < hi
    return np.where(inside, g, _c(g, 0))


def minmax_bwd(a, b, g, is_max):
    win = (a > b) if is_max else (a < b)
    wa = np.where(win, _c(g, 1), np.where(a == b, _c(g, 0.5), _c(g, 0)))
    return g * wa, g * (_c(g, 1) - wa)


def pow_bwd(x, g, p):
    if p == 0:
        return np.zeros_like(g)
    if p == 2:
        return _c(g, 2) * g * x
    return g * _c(x, p) * np.power(x, _c(x, p - 1))


# ---- reductions -----------------------------------------------------------------------------


def sum(x, axes=None, keepdim=False):  # noqa: A001 - the surface's name
    return np.asarray(x.sum(axis=axes, keepdims=keepdim))


def mean(x, axes=None, keepdim=False):
    return np.asarray(x.mean(axis=axes, keepdims=keepdim))


def amax(x, axis, keepdim=False):
    return np.asarray(x.max(axis=axis, keepdims=keepdim))


def max_bwd(x, y_keep, g_keep, axis):
    # The first maximal entry along `axis` gets the cotangent (argmax picks the first).
    idx = np.expand_dims(np.argmax(x, axis=axis), axis)
    out = np.zeros_like(x)
    np.put_along_axis(out, idx, g_keep, axis=axis)
    return out


def sum_to_shape(g, shape):
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape) if d == 1 and g.shape[lead + k] != 1)
    return g.sum(axis=axes).reshape(shape)


# ---- linear algebra -------------------------------------------------------------------------


def matmul(a, b):
    return np.matmul(a, b)


def linear(x, w, b=None):
    y = x @ w.T
    if b is not None:
        y += b
    return y


def linear_bwd(x, w, g, need_x=True, need_w=True, need_b=True):
    dx = g @ w if need_x else None
    g2 = g.reshape(-1, g.shape[-1])
    dw = g2.T @ x.reshape(-1, x.shape[-1]) if need_w else None
    db = g2.sum(axis=0) if need_b else None
    return dx, dw, db


# ---- softmax family and losses --------------------------------------------------------------


def softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


def softmax_bwd(y, g):
    return y * (g - (g * y).sum(axis=-1, keepdims=True))


def log_softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def log_softmax_bwd(y, g):
    return g - np.exp(y) * g.sum(axis=-1, keepdims=True)


def masked_softmax(x, mask):
    keep = mask != 0
    m = np.where(keep, x, -np.inf).max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, _c(x, 0))
    e = np.where(keep, np.exp(x - m), _c(x, 0))
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s > 0, s, _c(x, 1))


def mse_loss(yhat, target):
    d = yhat - target
    return np.asarray(np.vdot(d, d) / d.size, dtype=yhat.dtype) if d.size else np.asarray(np.nan, dtype=yhat.dtype)


def mse_loss_bwd(yhat, target, g):
    d = (yhat - target) * (_c(yhat, 2.0 / max(yhat.size, 1)) * g)
    return d, -d


def _nll_weights(target, weight, ignore_index, dtype):
    n = target.shape[0]
    w = np.ones(n, dtype=dtype) if weight is None else weight[np.where(target == ignore_index, 0, target)].astype(dtype)
    return np.where(target == ignore_index, _c(w, 0), w)


def nll_loss(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    n = logp.shape[0]
    w = _nll_weights(target, weight, ignore_index, logp.dtype)
    safe_t = np.where(target == ignore_index, 0, target)
    picked = -logp[np.arange(n), safe_t] * w
    if reduction == "none":
        return picked
    if reduction == "sum":
        return np.asarray(picked.sum(), dtype=logp.dtype)
    return np.asarray(picked.sum() / w.sum(), dtype=logp.dtype)


def nll_loss_bwd(logp, target, weight, ignore_index, reduction, g):
    n = logp.shape[0]
    w = _nll_weights(target, weight, ignore_index, logp.dtype)
    safe_t = np.where(target == ignore_index, 0, target)
    if reduction == "none":
        coef = -w * g
    elif reduction == "sum":
        coef = -w * g
    else:
        coef = -w * (g / w.sum())
    out = np.zeros_like(logp)
    np.add.at(out, (np.arange(n), safe_t), coef.astype(logp.dtype, copy=False))
    return out


# ---- counter-based random numbers -----------------------------------------------------------
# splitmix64 of (seed, counter, index): the CUDA kernels compute the same integers, so the
# uniforms agree bit for bit across devices.

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def random_bits(n, seed, counter, offset=0):
    """64 random bits per element index ``offset .. offset + n - 1``."""
    with np.errstate(over="ignore"):
        key = _mix(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * _GOLD + np.uint64(counter & 0xFFFFFFFFFFFFFFFF))
        i = np.arange(offset, offset + n, dtype=np.uint64)
        return _mix(key ^ (i * _GOLD + _GOLD))


def _uniform(n, seed, counter, dtype, offset=0):
    bits = random_bits(n, seed, counter, offset)
    if np.dtype(dtype) == np.float64:
        return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 2 ** 53)
    return ((bits >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 2 ** 24)).astype(dtype)


def rand_uniform(shape, seed, counter, dtype):
    n = math.prod(shape)
    return _uniform(n, seed, counter, dtype).reshape(shape)


def randn(shape, seed, counter, dtype):
    # Box-Muller on the float64 uniforms of indices 2i and 2i+1, then rounded to dtype.
    n = math.prod(shape)
    u = _uniform(2 * n, seed, counter, np.float64)
    u1 = 1.0 - u[0::2]  # in (0, 1]: log never sees 0
    z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u[1::2])
    return z.astype(dtype).reshape(shape)


def bernoulli_mask(shape, p_keep, seed, counter, dtype):
    return (rand_uniform(shape, seed, counter, np.float32) < np.float32(p_keep)).astype(dtype)


# ---- optimizer steps (PyTorch's update rules, in place) -------------------------------------


def sgd_step(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, first):
    d = g + _c(p, weight_decay) * p if weight_decay else g
    if momentum:
        if first:
            buf[...] = d
        else:
            buf *= _c(buf, momentum)
            buf += _c(buf, 1 - dampening) * d
        d = d + _c(p, momentum) * buf if nesterov else buf
    p -= _c(p, lr) * d


def adam_step(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled, vmax=None):
    if weight_decay:
        if decoupled:
            p *= _c(p, 1 - lr * weight_decay)
        else:
            g = g + _c(p, weight_decay) * p
    m *= _c(m, beta1)
    m += _c(m, 1 - beta1) * g
    v *= _c(v, beta2)
    v += _c(v, 1 - beta2) * g * g
    bc1 = 1 - beta1 ** step
    bc2 = 1 - beta2 ** step
    vv = v
    if vmax is not None:
        np.maximum(vmax, v, out=vmax)
        vv = vmax
    denom = np.sqrt(vv) / _c(p, math.sqrt(bc2)) + _c(p, eps)
    p -= _c(p, lr / bc1) * m / denom


def adagrad_step(p, g, sum_sq, step, lr, lr_decay, weight_decay, eps):
    if weight_decay:
        g = g + _c(p, weight_decay) * p
    clr = lr / (1 + (step - 1) * lr_decay)
    sum_sq += g * g
    p -= _c(p, clr) * g / (np.sqrt(sum_sq) + _c(p, eps))


def rmsprop_step(p, g, sq_avg, buf, grad_avg, lr, alpha, eps, weight_decay, momentum):
    if weight_decay:
        g = g + _c(p, weight_decay) * p
    sq_avg *= _c(p, alpha)
    sq_avg += _c(p, 1 - alpha) * g * g
    if grad_avg is not None:
        grad_avg *= _c(p, alpha)
        grad_avg += _c(p, 1 - alpha) * g
        avg = np.sqrt(sq_avg - grad_avg * grad_avg) + _c(p, eps)
    else:
        avg = np.sqrt(sq_avg) + _c(p, eps)
    if momentum > 0:
        buf *= _c(p, momentum)
        buf += g / avg
        p -= _c(p, lr) * buf
    else:
        p -= _c(p, lr) * g / avg


def adadelta_step(p, g, sq_avg, acc_delta, lr, rho, eps, weight_decay):
    if weight_decay:
        g = g + _c(p, weight_decay) * p
    sq_avg *= _c(p, rho)
    sq_avg += _c(p, 1 - rho) * g * g
    delta = np.sqrt(acc_delta + _c(p, eps)) / np.sqrt(sq_avg + _c(p, eps)) * g
    acc_delta *= _c(p, rho)
    acc_delta += _c(p, 1 - rho) * delta * delta
    p -= _c(p, lr) * delta
