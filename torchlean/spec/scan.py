"""Scans: the reference meaning of the selective scan and of the cumulative ops.

``selective_scan(x, a, b, h0)`` with ``x`` (..., L, S), ``a``/``b`` (S,), ``h0``
(..., S) returns every state h[t] = a * h[t-1] + b * x[t] (h[-1] = h0) along the
second-last axis; ``selective_scan_var`` takes ``a``/``b`` of x's shape
(token-dependent coefficients).

Cumulative ops along one int ``axis`` (negative allowed; a 0-d input answers to 0 and -1 and
is its own scan), output of x's shape:

* ``cumsum(x; axis)``: running sums; VJP the reverse running sum of the cotangent.
* ``cumprod(x; axis)``: running products; the VJP is exact with zeros in x (it never divides
  by a zero entry): ``dx[i] = sum_{j >= i} g[j] prod_{m <= j, m != i} x[m]``.
* ``cumargmax / cumargmin(x; axis)``: int64 index of the running maximum / minimum, the *last*
  of tied entries, and a NaN counts as extremal (torch's ``cummax`` / ``cummin`` indices); no
  gradient.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> SPEC["cumargmax"].forward(np.array([3.0, 1.0, 3.0, 2.0]), axis=0).tolist()
    [0, 0, 2, 2]
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, fmt_shapes
from ..shape import norm_axis
from .registry import defspec

# ---- selective scan -------------------------------------------------------------------------

def _scan_shape(op, x, a, b, h0, var):
    x, a, b, h0 = tuple(x), tuple(a), tuple(b), tuple(h0)
    if len(x) < 2 or x[-2] < 1:
        raise ShapeError(f"{op}: x must be (..., L, S) with L >= 1, got {x}")
    coef = x if var else (x[-1],)
    what = "x's shape" if var else "(S,)"
    if a != coef or b != coef:
        raise ShapeError(f"{op}: a and b must have {what} = {coef}, got {fmt_shapes(a, b)} for x {x}")
    want = x[:-2] + (x[-1],)
    if h0 != want:
        raise ShapeError(f"{op}: h0 has shape {h0}, expected {want} (x's leading axes and S) for x {x}")
    return x


def _coef_at(c, t):
    """Coefficient at time t: c itself for the (S,) form, c[..., t, :] for the token-dependent one."""
    return c if c.ndim == 1 else c[..., t, :]


def _scan(x, a, b, h0):
    h = np.empty(np.broadcast_shapes(x.shape, a.shape), dtype=np.result_type(x, a, b, h0))
    prev = h0
    for t in range(x.shape[-2]):
        prev = _coef_at(a, t) * prev + _coef_at(b, t) * x[..., t, :]
        h[..., t, :] = prev
    return h


def _scan_vjp(g, x, a, b, h0):
    """g[t] = dY[t] + a[t+1] g[t+1]; da = g h[t-1], db = g x, dx = g b, dh0 = a[0] g[0]."""
    h = _scan(x, a, b, h0)
    L = x.shape[-2]
    gs = np.empty_like(h)
    acc = np.zeros_like(h[..., 0, :])
    for t in range(L - 1, -1, -1):
        acc = g[..., t, :] + (_coef_at(a, t + 1) * acc if t + 1 < L else 0.0)
        gs[..., t, :] = acc
    hprev = np.concatenate([h0[..., None, :], h[..., :-1, :]], axis=-2)
    da, db = gs * hprev, gs * x
    if a.ndim == 1:  # shared coefficients collect their cotangent over batch and time
        red = tuple(range(x.ndim - 1))
        da, db = da.sum(axis=red), db.sum(axis=red)
    return gs * b, da, db, _coef_at(a, 0) * gs[..., 0, :]


defspec("selective_scan", _scan, _scan_vjp,
        lambda x, a, b, h0: _scan_shape("selective_scan", x, a, b, h0, False), 4)


defspec("selective_scan_var", _scan, _scan_vjp,
        lambda x, a, b, h0: _scan_shape("selective_scan_var", x, a, b, h0, True), 4)


# ---- cumulative ops along one axis ------------------------------------------------------------

def scan_axis(op: str, shape, axis) -> int | None:
    """The (non-negative) axis of a cumulative op; ``None`` for a 0-d shape (a scan of itself)."""
    shape = tuple(shape)
    if isinstance(axis, (tuple, list)):
        raise ShapeError(f"{op}: axis must be a single int, got {tuple(axis)!r}")
    a = norm_axis(axis, max(len(shape), 1), op)
    return a if shape else None


def _scan_shape_rule(op):
    def shape(x, *, axis):
        scan_axis(op, x, axis)
        return tuple(x)
    return shape


def _flip(a, axis):
    return np.flip(a, axis) if axis is not None else a


def _cumsum(x, *, axis):
    a = scan_axis("cumsum", x.shape, axis)
    return np.array(x, copy=True) if a is None else np.cumsum(x, axis=a, dtype=x.dtype)


def _cumsum_vjp(g, x, *, axis):
    a = scan_axis("cumsum", x.shape, axis)
    g = np.asarray(g)
    return (np.array(g, copy=True) if a is None else np.ascontiguousarray(_flip(np.cumsum(_flip(g, a), axis=a), a)),)


def _cumprod(x, *, axis):
    a = scan_axis("cumprod", x.shape, axis)
    return np.array(x, copy=True) if a is None else np.cumprod(x, axis=a, dtype=x.dtype)


def _cumprod_vjp(g, x, *, axis):
    """The defining sum, one entry left out of each product at a time: no division, so exact
    where x has zeros (O(n^2) per row: a meaning, not a kernel)."""
    a = scan_axis("cumprod", x.shape, axis)
    g = np.asarray(g)
    if a is None:
        return (np.array(g, copy=True),)
    xs, gs = np.moveaxis(x, a, -1), np.moveaxis(g, a, -1)
    dx = np.zeros(xs.shape, dtype=np.result_type(g, x))
    for i in range(xs.shape[-1]):
        left_out = xs.copy()
        left_out[..., i] = 1
        dx[..., i] = np.sum(gs[..., i:] * np.cumprod(left_out, axis=-1)[..., i:], axis=-1)
    return (np.ascontiguousarray(np.moveaxis(dx, -1, a)),)


def _cumarg(op, running, wins):
    def forward(x, *, axis):
        a = scan_axis(op, x.shape, axis)
        if a is None:
            return np.zeros((), dtype=np.int64)
        best = running.accumulate(x, axis=a)  # NaN propagates, as in torch
        pos = np.arange(x.shape[a]).reshape((-1,) + (1,) * (x.ndim - 1 - a))
        # An entry that equals the running extremum (ties: the later one) or is NaN takes over.
        hit = wins(x, best) | np.isnan(x) if x.dtype.kind == "f" else wins(x, best)
        return np.maximum.accumulate(np.where(hit, pos, 0), axis=a).astype(np.int64)

    defspec(op, forward, lambda g, x, **_: (None,), _scan_shape_rule(op), 1, ints=True)


defspec("cumsum", _cumsum, _cumsum_vjp, _scan_shape_rule("cumsum"), 1, ints=True)
defspec("cumprod", _cumprod, _cumprod_vjp, _scan_shape_rule("cumprod"), 1, ints=True)
_cumarg("cumargmax", np.maximum, lambda x, best: x == best)
_cumarg("cumargmin", np.minimum, lambda x, best: x == best)

__all__ = ["scan_axis"]
