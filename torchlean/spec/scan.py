"""The selective scan: its reference meaning.

``selective_scan(x, a, b, h0)`` with ``x`` (..., L, S), ``a``/``b`` (S,), ``h0``
(..., S) returns every state h[t] = a * h[t-1] + b * x[t] (h[-1] = h0) along the
second-last axis; ``selective_scan_var`` takes ``a``/``b`` of x's shape
(token-dependent coefficients).
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, fmt_shapes
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


