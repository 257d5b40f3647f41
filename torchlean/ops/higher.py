"""Differentiable VJPs: each op's gradient written with recorded ops, for higher-order gradients.

A backward with ``create_graph=True`` (``tl.autograd.grad(..., create_graph=True)``, a gradient
penalty, a Hessian-vector product, the second derivative of a physics-informed network) runs these
instead of the runtime rules: ``vjp(inputs, output, g, attrs) -> one cotangent per input`` over
tensors that stand for the tape's nodes, so the cotangents are recorded on the same tape and can be
differentiated again. Each formula is the derivative of its op's spec, with the same conventions
(relu'(0) = 0, clamp' is 1 strictly inside, sqrt'(0) = 0, ties of maximum split 1/2) and is checked
against the runtime rule's gradient and against torch's double backward in the tests. An op missing
here raises when a higher-order backward reaches it, naming it.

    >>> import torchlean as tl
    >>> x = tl.tensor([1.0, 2.0], requires_grad=True)
    >>> (g,) = tl.autograd.grad((x ** 3).sum(), x, create_graph=True)
    >>> g.sum().backward()
    >>> x.grad.tolist()
    [6.0, 12.0]
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import DIFFERENTIABLE_VJPS
from ..errors import AutogradError
from ..kernels import get_kernels
from ..spec.conv import conv_params, pool_params
from ..spec.index import put_plan
from ..tensor import Tensor, record
from . import index as _index


def vjp(*names):
    """Register the decorated function as the differentiable VJP of ``names``."""
    def deco(fn):
        for n in names:
            if n in DIFFERENTIABLE_VJPS:
                raise RuntimeError(f"differentiable VJP of {n!r} registered twice")
            DIFFERENTIABLE_VJPS[n] = fn
        return fn
    return deco


# ---- helpers --------------------------------------------------------------------------------

def _sum_to(g: Tensor, shape) -> Tensor:
    """``g`` summed over the axes broadcasting added or stretched to reach its shape from ``shape``."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    axes = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1]
    if axes:
        g = g.sum(dim=axes, keepdim=True)
    return g.reshape(shape)


def _mask(x: Tensor, cond) -> Tensor:
    """A constant tensor (no gradient) of x's dtype: 1 where ``cond`` (a bool array) holds."""
    return Tensor(get_kernels(x.device).astype(cond, x._value.dtype))


def _where(cond, a: Tensor, b: Tensor) -> Tensor:
    return record("where", (a, b), {"cond": cond})


def _zeros(x: Tensor) -> Tensor:
    return Tensor(get_kernels(x.device).zeros(tuple(x.shape), x._value.dtype))


def _const(x: Tensor, v) -> Tensor:
    return Tensor(get_kernels(x.device).full((), v, x._value.dtype))


def _expand_back(g: Tensor, x: Tensor, axis, keepdim) -> Tensor:
    """A reduction's cotangent stretched back over the reduced axes of ``x``."""
    nd = x.ndim
    axes = range(nd) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    axes = sorted(a % nd for a in axes) if nd else []
    if not keepdim:
        shape = list(g.shape)
        for a in axes:
            shape.insert(a, 1)
        g = g.reshape(shape)
    return g.expand(*x.shape)


def _unsupported(op, why):
    raise AutogradError(f"backward: create_graph=True through {op} with {why}: its differentiable gradient is "
                        f"not available yet")


# ---- elementwise ------------------------------------------------------------------------------

@vjp("add")
def _add(xs, y, g, attrs):
    a, b = xs
    return _sum_to(g, a.shape), _sum_to(g, b.shape)


@vjp("sub")
def _sub(xs, y, g, attrs):
    a, b = xs
    return _sum_to(g, a.shape), _sum_to(-g, b.shape)


@vjp("mul")
def _mul(xs, y, g, attrs):
    a, b = xs
    return _sum_to(g * b, a.shape), _sum_to(g * a, b.shape)


@vjp("div")
def _div(xs, y, g, attrs):
    a, b = xs
    return _sum_to(g / b, a.shape), _sum_to(-g * a / (b * b), b.shape)


@vjp("neg")
def _neg(xs, y, g, attrs):
    return (-g,)


@vjp("scale")
def _scale(xs, y, g, attrs):
    return (g * attrs["c"],)


@vjp("pow")
def _pow(xs, y, g, attrs):
    (x,), p = xs, attrs["exponent"]
    if p == 0:
        return (g * 0.0,)
    if p == 1:
        return (g,)
    return (g * (x ** (p - 1)) * p,)


@vjp("exp")
def _exp(xs, y, g, attrs):
    return (g * y,)


@vjp("expm1")
def _expm1(xs, y, g, attrs):
    return (g * (y + 1.0),)


@vjp("log")
def _log(xs, y, g, attrs):
    return (g / xs[0],)


@vjp("log1p")
def _log1p(xs, y, g, attrs):
    return (g / (xs[0] + 1.0),)


@vjp("inv")
def _inv(xs, y, g, attrs):
    return (-g * y * y,)


@vjp("sqrt")
def _sqrt(xs, y, g, attrs):
    pos = y._value > 0          # sqrt'(x <= 0) = 0 (DESIGN.md)
    safe = _where(pos, y, _const(y, 1.0))
    return (_where(pos, g * 0.5 / safe, _zeros(g)),)


@vjp("sin")
def _sin(xs, y, g, attrs):
    return (g * xs[0].cos(),)


@vjp("cos")
def _cos(xs, y, g, attrs):
    return (-g * xs[0].sin(),)


@vjp("tan")
def _tan(xs, y, g, attrs):
    return (g * (y * y + 1.0),)


@vjp("tanh")
def _tanh(xs, y, g, attrs):
    return (g * (1.0 - y * y),)


@vjp("sinh")
def _sinh(xs, y, g, attrs):
    return (g * xs[0].cosh(),)


@vjp("cosh")
def _cosh(xs, y, g, attrs):
    return (g * xs[0].sinh(),)


@vjp("atan")
def _atan(xs, y, g, attrs):
    return (g / (xs[0] * xs[0] + 1.0),)


@vjp("asinh")
def _asinh(xs, y, g, attrs):
    return (g / (xs[0] * xs[0] + 1.0).sqrt(),)


@vjp("sigmoid")
def _sigmoid(xs, y, g, attrs):
    return (g * y * (1.0 - y),)


@vjp("relu")
def _relu(xs, y, g, attrs):
    return (g * _mask(g, xs[0]._value > 0),)


@vjp("abs")
def _abs(xs, y, g, attrs):
    x = xs[0]._value
    return (g * _mask(g, x > 0) - g * _mask(g, x < 0),)


@vjp("leaky_relu")
def _leaky_relu(xs, y, g, attrs):
    x, s = xs[0]._value, attrs.get("negative_slope", 0.01)
    return (g * _mask(g, x > 0) + g * _mask(g, x < 0) * s,)


@vjp("clamp")
def _clamp(xs, y, g, attrs):
    x, lo, hi = xs[0]._value, attrs.get("lo"), attrs.get("hi")
    inside = get_kernels(xs[0].device).full(tuple(x.shape), True, np.bool_)
    if lo is not None:
        inside = inside & (x > lo)
    if hi is not None:
        inside = inside & (x < hi)
    return (g * _mask(g, inside),)


def _split_ties(g, a, b, win):
    """Cotangents of an elementwise max/min: all to the winner, 1/2 each on ties (DESIGN.md)."""
    tie = a._value == b._value
    wa = _mask(g, win) + _mask(g, tie) * 0.5
    wb = _mask(g, ~win & ~tie) + _mask(g, tie) * 0.5
    return _sum_to(g * wa, a.shape), _sum_to(g * wb, b.shape)


@vjp("maximum")
def _maximum(xs, y, g, attrs):
    a, b = xs
    return _split_ties(g, a, b, a._value > b._value)


@vjp("minimum")
def _minimum(xs, y, g, attrs):
    a, b = xs
    return _split_ties(g, a, b, a._value < b._value)


@vjp("softplus")
def _softplus(xs, y, g, attrs):
    return (g * xs[0].sigmoid(),)


@vjp("silu")
def _silu(xs, y, g, attrs):
    s = xs[0].sigmoid()
    return (g * s * (xs[0] * (1.0 - s) + 1.0),)


@vjp("erf")
def _erf(xs, y, g, attrs):
    x = xs[0]
    return (g * (-(x * x)).exp() * (2.0 / math.sqrt(math.pi)),)


@vjp("gelu")
def _gelu(xs, y, g, attrs):
    x = xs[0]
    if attrs.get("approximate", "none") == "tanh":
        k = math.sqrt(2.0 / math.pi)
        t = ((x + x * x * x * 0.044715) * k).tanh()
        return (g * ((t + 1.0) * 0.5 + x * (1.0 - t * t) * (x * x * (3 * 0.044715) + 1.0) * (0.5 * k)),)
    cdf = ((x * (1.0 / math.sqrt(2.0))).erf() + 1.0) * 0.5
    pdf = (x * x * -0.5).exp() * (1.0 / math.sqrt(2.0 * math.pi))
    return (g * (cdf + x * pdf),)


@vjp("where")
def _where_vjp(xs, y, g, attrs):
    a, b = xs
    cond, z = attrs["cond"], _zeros(g)
    return _sum_to(_where(cond, g, z), a.shape), _sum_to(_where(cond, z, g), b.shape)


@vjp("cast")
def _cast(xs, y, g, attrs):
    return (g.to(dtype=xs[0].dtype),)


@vjp("to_device")
def _to_device(xs, y, g, attrs):
    return (g.to(xs[0].device),)


@vjp("detach")
def _detach(xs, y, g, attrs):
    return (None,)


# ---- reductions and scans ---------------------------------------------------------------------

@vjp("sum")
def _sum(xs, y, g, attrs):
    x = xs[0]
    return (g.reshape([1] * x.ndim).expand(*x.shape) if x.ndim else g.reshape(()),)


@vjp("reduce_sum")
def _reduce_sum(xs, y, g, attrs):
    return (_expand_back(g, xs[0], attrs.get("axis"), attrs.get("keepdim", False)),)


@vjp("reduce_mean")
def _reduce_mean(xs, y, g, attrs):
    x = xs[0]
    n = max(x.numel(), 1) // max(y.numel(), 1)
    return (_expand_back(g, x, attrs.get("axis"), attrs.get("keepdim", False)) * (1.0 / max(n, 1)),)


@vjp("cumsum")
def _cumsum(xs, y, g, attrs):
    a = attrs["axis"]
    return (g.flip(a).cumsum(a).flip(a),)


# ---- shape ---------------------------------------------------------------------------------------

@vjp("reshape", "flatten", "unsqueeze", "squeeze")
def _reshape(xs, y, g, attrs):
    return (g.reshape(xs[0].shape),)


@vjp("transpose")
def _transpose(xs, y, g, attrs):
    return (g.transpose(attrs["dim0"], attrs["dim1"]),)


@vjp("permute")
def _permute(xs, y, g, attrs):
    dims = [d % max(xs[0].ndim, 1) for d in attrs["dims"]]
    return (g.permute(*np.argsort(dims).tolist()),)


@vjp("broadcast_to")
def _broadcast_to(xs, y, g, attrs):
    return (_sum_to(g, xs[0].shape),)


@vjp("flip")
def _flip(xs, y, g, attrs):
    return (g.flip(attrs["dims"]),)


@vjp("concat")
def _concat(xs, y, g, attrs):
    axis = attrs.get("axis", 0) % y.ndim
    out, off = [], 0
    for x in xs:
        n = x.shape[axis] if x.ndim else 0
        out.append(g.narrow(axis, off, n) if x.ndim == y.ndim else None)
        off += n
    return tuple(out)


@vjp("stack")
def _stack(xs, y, g, attrs):
    axis = attrs.get("axis", 0) % y.ndim
    return tuple(g.select(axis, k) for k in range(len(xs)))


def _place(x: Tensor, index, g: Tensor) -> Tensor:
    """Zeros of x's shape with ``g`` at ``index``: the adjoint of reading ``x[index]``."""
    return _index.setitem_value(_zeros(x), index, g)


@vjp("getitem")
def _getitem(xs, y, g, attrs):
    return (_place(xs[0], attrs["index"], g),)


@vjp("select")
def _select(xs, y, g, attrs):
    a = attrs["axis"] % xs[0].ndim
    return (_place(xs[0], (slice(None),) * a + (attrs["index"],), g),)


@vjp("slice")
def _slice(xs, y, g, attrs):
    a = attrs["axis"] % xs[0].ndim
    s = slice(attrs.get("start"), attrs.get("stop"), attrs.get("step", 1))
    return (_place(xs[0], (slice(None),) * a + (s,), g),)


def _host(x: Tensor, v) -> np.ndarray:
    K = get_kernels(x.device)
    return np.asarray(K.to_host(v) if hasattr(v, "__cuda_array_interface__") else v)


@vjp("index_select")
def _index_select(xs, y, g, attrs):
    # The adjoint through the kernel-level scatter (the seeds' rule: an out-of-bounds index adds nothing).
    x, axis = xs[0], attrs["axis"] % max(xs[0].ndim, 1)
    idx = _host(x, attrs["indices"]).reshape(-1).astype(np.int64)
    shape = [1] * g.ndim
    shape[axis] = idx.size
    full = np.broadcast_to(idx.reshape(shape), tuple(g.shape))
    return (record("scatter_add", (_zeros(x), g), {"axis": axis, "index": np.ascontiguousarray(full)}),)


@vjp("gather")
def _gather(xs, y, g, attrs):
    return (record("scatter_add", (_zeros(xs[0]), g), {"axis": attrs["axis"], "index": attrs["index"]}),)


@vjp("scatter_add")
def _scatter_add(xs, y, g, attrs):
    src = xs[1]
    taken = record("gather", (g,), {"axis": attrs["axis"], "index": attrs["index"]})
    if tuple(taken.shape) == tuple(src.shape):
        return g, taken
    # src may be larger than index: only its leading index-shaped block is read.
    return g, _place(src, tuple(slice(0, n) for n in taken.shape), taken)


@vjp("embedding")
def _embedding(xs, y, g, attrs):
    w = xs[0]
    flat = _host(w, attrs["indices"]).reshape(-1).astype(np.int64)
    return (record("scatter_add_rows", (_zeros(w), g.reshape((-1,) + tuple(w.shape[1:]))), {"indices": flat}),)


@vjp("gather_rows")
def _gather_rows(xs, y, g, attrs):
    m = xs[0]
    return (record("scatter_add_rows", (_zeros(m), g), {"indices": attrs["indices"]}),)


@vjp("scatter_add_rows")
def _scatter_add_rows(xs, y, g, attrs):
    return g, record("gather_rows", (g,), {"indices": attrs["indices"]})


# ---- products -----------------------------------------------------------------------------------

@vjp("matmul", "bmm")
def _matmul(xs, y, g, attrs):
    a, b = xs
    if a.ndim == 1 and b.ndim == 1:
        return g * b, g * a
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = g2.unsqueeze(-2)
    if b.ndim == 1:
        g2 = g2.unsqueeze(-1)
    da = _sum_to(g2 @ b2.transpose(-1, -2), a2.shape).reshape(a.shape)
    db = _sum_to(a2.transpose(-1, -2) @ g2, b2.shape).reshape(b.shape)
    return da, db


def _linear_parts(w, x, g):
    x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 1 else x.reshape(1, -1)
    g2 = g.reshape(-1, w.shape[0]) if g.ndim != 1 else g.reshape(1, -1)
    return g @ w, g2.transpose(0, 1) @ x2, g2


@vjp("linear")
def _linear(xs, y, g, attrs):
    w, b, x = xs
    dx, dw, g2 = _linear_parts(w, x, g)
    return dw, g2.sum(0), dx


@vjp("linear_nobias")
def _linear_nobias(xs, y, g, attrs):
    w, x = xs
    dx, dw, _ = _linear_parts(w, x, g)
    return dw, dx


# ---- softmax and losses -----------------------------------------------------------------------------

@vjp("softmax")
def _softmax(xs, y, g, attrs):
    a = attrs.get("axis", -1)
    return (y * (g - (g * y).sum(dim=a, keepdim=True)),)


@vjp("log_softmax")
def _log_softmax(xs, y, g, attrs):
    a = attrs.get("axis", -1)
    return (g - y.exp() * g.sum(dim=a, keepdim=True),)


@vjp("mse_loss")
def _mse(xs, y, g, attrs):
    a, b = xs
    d = (a - b) * g * (2.0 / max(a.numel(), 1))
    return _sum_to(d, a.shape), _sum_to(-d, b.shape)


def _class_grad(op, logits, attrs, g, probs):
    """d loss / d logits for class-index targets, torch's weighted and smoothed form:
    ``a_i p_i - W * q_i`` per kept row, with ``q`` the (smoothed) target distribution, ``W`` the class
    weights and ``a_i = sum_c W_c q_ic`` (NLL: ``-W * onehot``), reduced as asked (a weighted mean
    divides by the kept rows' target weights)."""
    if logits.ndim > 2:  # (N, C, d...): the class axis last, the rest as rows, and back
        c = logits.shape[1]
        rows = logits.movedim(1, -1).reshape(-1, c)
        t = dict(attrs, target=_host(logits, attrs["target"]).reshape(-1))
        g2 = g.reshape(-1) if attrs.get("reduction", "mean") == "none" else g
        p2 = None if probs is None else probs.movedim(1, -1).reshape(-1, c)
        d = _class_grad(op, rows, t, g2, p2)
        moved = tuple(logits.movedim(1, -1).shape)
        return d.reshape(moved).movedim(-1, 1)
    K = get_kernels(logits.device)
    host = lambda v: np.asarray(K.to_host(v) if hasattr(v, "__cuda_array_interface__") else v)  # noqa: E731
    target = host(attrs["target"]).reshape(-1).astype(np.int64)
    n, c = (1, logits.shape[0]) if logits.ndim == 1 else logits.shape
    w = np.ones(c) if attrs.get("weight") is None else host(attrs["weight"]).astype(np.float64).reshape(c)
    eps = float(attrs.get("label_smoothing", 0.0) or 0.0)
    keep = target != attrs.get("ignore_index", -100)
    q = np.zeros((n, c))
    q[np.arange(n)[keep], target[keep]] = 1.0
    if eps:
        q = (1.0 - eps) * q + (eps / c) * keep[:, None]
    B = w[None, :] * q
    shape = logits.shape
    d = -Tensor(K.from_host(B.reshape(shape), logits._value.dtype))
    if probs is not None:
        coef = B.sum(axis=1).reshape((n, 1) if logits.ndim == 2 else ())
        d = d + probs * Tensor(K.from_host(np.asarray(coef), logits._value.dtype))
    reduction = attrs.get("reduction", "mean")
    if reduction == "none":
        return d * (g.reshape(-1, 1) if logits.ndim == 2 else g)
    if reduction == "mean":
        d = d * (1.0 / float(w[target[keep]].sum())) if keep.any() else d * 0.0
    return d * g


@vjp("cross_entropy")
def _cross_entropy(xs, y, g, attrs):
    logits = xs[0]
    return (_class_grad("cross_entropy", logits, attrs, g, logits.softmax(1 if logits.ndim > 1 else 0)),)


@vjp("nll_loss")
def _nll(xs, y, g, attrs):
    return (_class_grad("nll_loss", xs[0], attrs, g, None),)


# ---- more elementwise ------------------------------------------------------------------------------

@vjp("asin")
def _asin(xs, y, g, attrs):
    return (g / (1.0 - xs[0] * xs[0]).sqrt(),)


@vjp("acos")
def _acos(xs, y, g, attrs):
    return (-g / (1.0 - xs[0] * xs[0]).sqrt(),)


@vjp("atanh")
def _atanh(xs, y, g, attrs):
    return (g / (1.0 - xs[0] * xs[0]),)


@vjp("acosh")
def _acosh(xs, y, g, attrs):
    return (g / (xs[0] * xs[0] - 1.0).sqrt(),)


@vjp("erfc")
def _erfc(xs, y, g, attrs):
    x = xs[0]
    return (g * (-(x * x)).exp() * (-2.0 / math.sqrt(math.pi)),)


@vjp("erfinv")
def _erfinv(xs, y, g, attrs):
    return (g * (y * y).exp() * (math.sqrt(math.pi) / 2.0),)


@vjp("floor", "ceil", "round", "trunc", "sign")
def _piecewise_constant(xs, y, g, attrs):
    return (None,)


@vjp("atan2")
def _atan2(xs, y, g, attrs):
    a, b = xs
    r = a * a + b * b
    return _sum_to(g * b / r, a.shape), _sum_to(-g * a / r, b.shape)


@vjp("fmod", "remainder")
def _fmod(xs, y, g, attrs):
    # a - q b with q = (a - y) / b constant between its jumps.
    a, b = xs
    q = Tensor((a._value - y._value) / b._value)
    return _sum_to(g, a.shape), _sum_to(-g * q, b.shape)


@vjp("pow_tensor")
def _pow_tensor(xs, y, g, attrs):
    a, b = xs
    pos = a._value > 0
    loga = _where(pos, _where(pos, a, _const(a, 1.0)).log(), _zeros(a))
    return _sum_to(g * b * a ** (b - 1.0), a.shape), _sum_to(g * y * loga, b.shape)


@vjp("safe_log")
def _safe_log(xs, y, g, attrs):
    x = xs[0]
    return (g * x.sigmoid() / (y.exp()),)


@vjp("reduce_max", "reduce_min")
def _reduce_extremum(xs, y, g, attrs):
    # The whole cotangent to the first extremal entry, as the runtime rule sends it.
    if xs[0].ndim == 0:
        return (g,)
    x, axis, keepdim = xs[0], attrs["axis"] % max(xs[0].ndim, 1), attrs.get("keepdim", False)
    K = get_kernels(x.device)
    v = K.to_host(x._value)
    pick = np.argmax(v, axis=axis) if np.all(K.to_host(y._value) == np.max(v, axis=axis, keepdims=keepdim)) \
        else np.argmin(v, axis=axis)
    onehot = np.zeros(v.shape, dtype=bool)
    np.put_along_axis(onehot, np.expand_dims(pick, axis), True, axis)
    return (_expand_back(g, x, axis, keepdim) * _mask(g, K.from_host(onehot, np.bool_)),)


@vjp("l1_loss")
def _l1(xs, y, g, attrs):
    a, b = xs
    d = a - b
    sgn = _mask(g, d._value > 0) - _mask(g, d._value < 0)
    reduction = attrs.get("reduction", "mean")
    full = g if reduction == "none" else g.expand(*d.shape) if g.ndim == 0 else g
    if reduction == "mean":
        full = full * (1.0 / max(d.numel(), 1))
    return _sum_to(full * sgn, a.shape), _sum_to(-full * sgn, b.shape)


@vjp("setitem")
def _setitem(xs, y, g, attrs):
    x, v = xs
    index = attrs["index"]
    return _index.setitem_value(g, index, 0.0), _sum_to(g[index], v.shape)


@vjp("dropout")
def _dropout(xs, y, g, attrs):
    x = xs[0]
    ones = Tensor(get_kernels(x.device).full(tuple(x.shape), 1.0, x._value.dtype))
    keep = Tensor(record("dropout", (ones,), dict(attrs))._value)   # the same mask, scaled by 1/(1-p)
    return (g * keep,)


def _layer_norm_dx(x, gamma, g, nd, eps):
    axes = tuple(range(x.ndim - nd, x.ndim))
    mu = x.mean(dim=axes, keepdim=True)
    xc = x - mu
    rstd = 1.0 / ((xc * xc).mean(dim=axes, keepdim=True) + eps).sqrt()
    xhat = xc * rstd
    gg = g * gamma if gamma is not None else g
    dx = rstd * (gg - gg.mean(dim=axes, keepdim=True) - xhat * (gg * xhat).mean(dim=axes, keepdim=True))
    return dx, xhat


@vjp("layer_norm")
def _layer_norm(xs, y, g, attrs):
    x, gamma, beta = xs
    nd, eps = attrs["normalized_ndim"], attrs.get("eps", 1e-5)
    dx, xhat = _layer_norm_dx(x, gamma, g, nd, eps)
    lead = tuple(range(x.ndim - nd))
    dgamma = (g * xhat).sum(dim=lead) if lead else g * xhat
    dbeta = g.sum(dim=lead) if lead else g
    return dx, dgamma, dbeta


@vjp("layer_norm_noaffine")
def _layer_norm_noaffine(xs, y, g, attrs):
    dx, _ = _layer_norm_dx(xs[0], None, g, attrs["normalized_ndim"], attrs.get("eps", 1e-5))
    return (dx,)


# ---- convolution, average pooling, batch norm --------------------------------------------------------

def _conv_setup(x, w, attrs, transpose):
    from_spec = conv_params("conv_transpose" if transpose else "conv", tuple(x.shape), tuple(w.shape),
                            stride=attrs.get("stride", 1), padding=attrs.get("padding", 0),
                            dilation=attrs.get("dilation", 1), groups=attrs.get("groups", 1),
                            output_padding=attrs.get("output_padding"), transpose=transpose)
    return from_spec


def _batched(t: Tensor, batched: bool) -> Tensor:
    return t if batched else t.unsqueeze(0)


def _corr_weight(inp: Tensor, g: Tensor, P, k, transpose: bool) -> Tensor:
    """The weight cotangent of a (transposed) convolution as a convolution over the batch axis:
    inputs' channels become the batch, the cotangent is the kernel (stride and dilation trade places),
    cropped to the kernel size; one per group."""
    G = P.groups
    outs = []
    ci, co = inp.shape[1] // G, g.shape[1] // G
    for j in range(G):
        a = inp.narrow(1, j * ci, ci).transpose(0, 1)           # (ci, N, *S_in)
        b = g.narrow(1, j * co, co).transpose(0, 1)             # (co, N, *S_out)
        if transpose:   # the roles of input and output swap
            r = record("conv_nobias", (b, a), {"stride": P.dilation, "padding": P.padding,
                                               "dilation": P.stride, "groups": 1})   # (co, ci, *K)
        else:
            r = record("conv_nobias", (a, b), {"stride": P.dilation, "padding": P.padding,
                                               "dilation": P.stride, "groups": 1})   # (ci, co, *K)
        for ax, kk in enumerate(k):
            if r.shape[2 + ax] != kk:
                r = r.narrow(2 + ax, 0, kk)
        outs.append(r.transpose(0, 1))
    return outs[0] if G == 1 else record("concat", tuple(outs), {"axis": 0})


def _conv_vjp(xs, y, g, attrs, bias):
    x, w = xs[0], xs[1]
    P = _conv_setup(x, w, attrs, False)
    k = tuple(w.shape[2:])
    xb, gb = _batched(x, P.batched), _batched(g, P.batched)
    op_ = tuple(S - ((So - 1) * s - 2 * p + d * (kk - 1) + 1)
                for S, So, s, p, d, kk in zip(P.spatial, P.out_spatial, P.stride, P.padding, P.dilation, k))
    dx = record("conv_transpose_nobias", (gb, w), {"stride": P.stride, "padding": P.padding, "dilation": P.dilation,
                                                   "groups": P.groups, "output_padding": op_})
    dx = dx if P.batched else dx.squeeze(0)
    dw = _corr_weight(xb, gb, P, k, False)
    if not bias:
        return dx, dw
    axes = [0] + list(range(2, gb.ndim))
    return dx, dw, gb.sum(dim=axes)


@vjp("conv")
def _conv(xs, y, g, attrs):
    return _conv_vjp(xs, y, g, attrs, True)


@vjp("conv_nobias")
def _conv_nobias(xs, y, g, attrs):
    return _conv_vjp(xs, y, g, attrs, False)


def _convt_vjp(xs, y, g, attrs, bias):
    x, w = xs[0], xs[1]
    P = _conv_setup(x, w, attrs, True)
    k = tuple(w.shape[2:])
    xb, gb = _batched(x, P.batched), _batched(g, P.batched)
    dx = record("conv_nobias", (gb, w), {"stride": P.stride, "padding": P.padding, "dilation": P.dilation,
                                         "groups": P.groups})
    for ax, S in enumerate(P.spatial):      # output_padding: rows the forward never read
        if dx.shape[2 + ax] != S:
            dx = dx.narrow(2 + ax, 0, S)
    dx = dx if P.batched else dx.squeeze(0)
    dw = _corr_weight(xb, gb, P, k, True)
    if not bias:
        return dx, dw
    axes = [0] + list(range(2, gb.ndim))
    return dx, dw, gb.sum(dim=axes)


@vjp("conv_transpose")
def _conv_transpose(xs, y, g, attrs):
    return _convt_vjp(xs, y, g, attrs, True)


@vjp("conv_transpose_nobias")
def _conv_transpose_nobias(xs, y, g, attrs):
    return _convt_vjp(xs, y, g, attrs, False)


@vjp("avg_pool")
def _avg_pool(xs, y, g, attrs):
    # The adjoint of a window mean that counts padding: a transposed convolution with a constant kernel,
    # every leading axis folded into the channels (one group each).
    x = xs[0]
    P = pool_params("avg_pool", tuple(x.shape), kernel_size=attrs["kernel_size"], stride=attrs.get("stride"),
                    padding=attrs.get("padding", 0))
    m = int(np.prod(P.lead)) if P.lead else 1
    gb = g.reshape((1, m) + tuple(P.out_spatial))
    w = Tensor(get_kernels(x.device).full((m, 1) + tuple(P.kernel), 1.0 / float(np.prod(P.kernel)),
                                          x._value.dtype))
    op_ = tuple(S - ((So - 1) * si - 2 * pi + (kk - 1) + 1)
                for S, So, si, pi, kk in zip(P.spatial, P.out_spatial, P.stride, P.padding, P.kernel))
    dx = record("conv_transpose_nobias", (gb, w), {"stride": P.stride, "padding": P.padding, "dilation": 1,
                                                   "groups": m, "output_padding": op_})
    return (dx.reshape(x.shape),)


@vjp("max_pool")
def _max_pool(xs, y, g, attrs):
    # Each output's cotangent goes to its window's winner (first row-major, as the kernel picks it):
    # a scatter-add of g at constant positions, linear in g (its own gradient a gather), constant in x
    # (max pooling is piecewise linear: no second derivative in x).
    x = xs[0]
    P = pool_params("max_pool", tuple(x.shape), kernel_size=attrs["kernel_size"], stride=attrs.get("stride"),
                    padding=attrs.get("padding", 0), dilation=attrs.get("dilation", 1))
    K = get_kernels(x.device)
    _, idx = K.max_pool_forward(x._value, P.kernel, P.stride, P.padding, P.dilation)
    idx = np.asarray(K.to_host(idx)).astype(np.int64)
    d = len(P.kernel)
    offs = np.unravel_index(idx, P.kernel)                           # each winner's offset per axis
    flat = np.zeros(idx.shape, dtype=np.int64)
    for a in range(d):
        o = np.arange(P.out_spatial[a]).reshape((1,) * (idx.ndim - d + a) + (-1,) + (1,) * (d - 1 - a))
        pos = o * P.stride[a] - P.padding[a] + offs[a] * P.dilation[a]
        flat = flat * P.spatial[a] + pos
    m = int(np.prod(P.lead)) if P.lead else 1
    flat = flat.reshape(m, -1) + (np.arange(m) * int(np.prod(P.spatial)))[:, None]
    zero = Tensor(K.zeros((int(np.prod(x.shape)),), x._value.dtype))
    gx = record("scatter_add", (zero, g.reshape(-1)), {"axis": 0, "index": flat.reshape(-1)})
    return (gx.reshape(x.shape),)


def _bn_dx(x, gamma, g, axes, eps, shape):
    mu = x.mean(dim=axes, keepdim=True)
    xc = x - mu
    rstd = 1.0 / ((xc * xc).mean(dim=axes, keepdim=True) + eps).sqrt()
    xhat = xc * rstd
    gg = g * gamma.reshape(shape)
    dx = rstd * (gg - gg.mean(dim=axes, keepdim=True) - xhat * (gg * xhat).mean(dim=axes, keepdim=True))
    return dx, (g * xhat).sum(dim=axes), g.sum(dim=axes)


@vjp("batch_norm_train")
def _batch_norm_train(xs, y, g, attrs):
    x, gamma, beta = xs
    axes = tuple(a for a in range(x.ndim) if a != 1)
    shape = [1] * x.ndim
    shape[1] = x.shape[1]
    return _bn_dx(x, gamma, g, axes, attrs.get("eps", 1e-5), shape)


@vjp("batch_norm_chw")
def _batch_norm_chw(xs, y, g, attrs):
    x, gamma, beta = xs
    axes = tuple(range(1, x.ndim)) if x.ndim == 3 else tuple(a for a in range(x.ndim) if a != 1)
    ch = 0 if x.ndim == 3 else 1
    shape = [1] * x.ndim
    shape[ch] = x.shape[ch]
    return _bn_dx(x, gamma, g, axes, attrs.get("eps", 1e-5), shape)


@vjp("batch_norm_eval")
def _batch_norm_eval(xs, y, g, attrs):
    x, gamma, beta, mean, var = xs
    axes = tuple(a for a in range(x.ndim) if a != 1)
    shape = [1] * x.ndim
    shape[1] = x.shape[1]
    inv = 1.0 / (var + attrs.get("eps", 1e-5)).sqrt()
    xc = x - mean.reshape(shape)
    gi = g * (gamma * inv).reshape(shape)
    dvar = (g * gamma.reshape(shape) * xc).sum(dim=axes) * (inv * inv * inv) * -0.5
    return gi, (g * xc * inv.reshape(shape)).sum(dim=axes), g.sum(dim=axes), -gi.sum(dim=axes), dvar


# ---- attention and the rest --------------------------------------------------------------------------

def _keep(like: Tensor, mask):
    """The 0/1 mask as a bool array on like's device, broadcast to like's shape."""
    K = get_kernels(like.device)
    m = mask if hasattr(mask, "__cuda_array_interface__") else K.from_host(np.asarray(mask), np.asarray(mask).dtype)
    return K.bool_mask(m, tuple(like.shape)) if hasattr(K, "bool_mask") else (m != 0)


@vjp("hard_masked_softmax")
def _hard_masked_softmax(xs, y, g, attrs):
    # Blocked weights are exactly 0, so softmax's formula holds with them left out.
    return (y * (g - (g * y).sum(dim=-1, keepdim=True)),)


@vjp("flash_attention")
def _flash_attention(xs, y, g, attrs):
    """dq, dk, dv of softmax(q k^T scale, masked) v, recomputing the weights from q and k (as the
    kernel's backward does), so all three are differentiable again."""
    q, k, v = xs
    scale = 1.0 / math.sqrt(q.shape[-1]) if attrs.get("scale") is None else float(attrs["scale"])
    s = (q @ k.transpose(-2, -1)) * scale
    mask, hard = attrs.get("mask"), attrs.get("hard", False)
    if attrs.get("causal"):
        tri = np.tril(np.ones(s.shape[-2:], dtype=bool))
        mask = np.broadcast_to(tri, s.shape) if mask is None else (np.asarray(mask) != 0) & tri
    keep = None if mask is None else _keep(s, mask)
    if keep is None:
        p = s.softmax(-1)
    elif hard:
        p = record("hard_masked_softmax", (s,), {"mask": mask})
    else:
        p = _where(keep, s, _const(s, -1000.0)).softmax(-1)
    dv = p.transpose(-2, -1) @ g
    dp = g @ v.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True))
    if keep is not None:   # a replaced logit is a constant: nothing flows back through it
        ds = _where(keep, ds, _zeros(ds))
    return (ds @ k) * scale, (ds.transpose(-2, -1) @ q) * scale, dv


@vjp("swap_adjacent")
def _swap_adjacent(xs, y, g, attrs):
    return (record("swap_adjacent", (g,), {"depth": attrs["depth"]}),)


@vjp("floor_divide")
def _floor_divide(xs, y, g, attrs):
    return None, None


@vjp("put")
def _put(xs, y, g, attrs):
    # The runtime rule's adjoint: v reads g at its places (0 out of bounds), x keeps g where nothing was written.
    x, v = xs
    flat = put_plan(tuple(x.shape), tuple(v.shape), attrs["index"], attrs.get("accumulate", False))
    n = x.numel()
    ok = flat < n
    taken = record("gather_rows", (g.reshape(-1, 1),), {"indices": np.where(ok, flat, n).astype(np.int64)})
    taken = taken.reshape(v.shape)
    if attrs.get("accumulate", False):
        return g, taken
    written = np.zeros(n, dtype=bool)
    written[flat[ok]] = True
    keep = get_kernels(x.device).from_host(~written.reshape(tuple(x.shape)), np.bool_)
    return _where(keep, g, _zeros(g)), taken
