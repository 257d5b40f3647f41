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

Recurrences (the time loops of torch's RNN, LSTM and GRU, one layer and one direction, time-major;
``gx`` is the input projection of every step, computed outside as one matrix product):

* ``lstm_scan(gx, w_hh, h0, c0; mask=None)``: ``gx`` (T, N, 4H) with both biases in it, ``w_hh``
  (4H, H); gates i, f, g, o = sig, sig, tanh, sig of ``gx[t] + h @ w_hh.T``; ``c = f c + i g``,
  ``h = o tanh(c)``. Returns the states stacked, (2, T, N, H): h then c.
* ``gru_scan(gx, w_hh, b_hh, h0; mask=None)``: ``gx`` (T, N, 3H) = ``x w_ih^T + b_ih``; with
  ``a = h @ w_hh.T + b_hh``: r, z = sig(gx + a) on their thirds, ``n = tanh(gx_n + r a_n)``,
  ``h = (1 - z) n + z h``. Returns every h, (T, N, H).
* ``rnn_scan(gx, w_hh, h0; nonlinearity, mask=None)``: ``h = act(gx[t] + h @ w_hh.T)``, act tanh
  or relu (relu'(0) = 0). Returns every h, (T, N, H).

``mask`` (T, N) bool marks the real steps of each sequence (packed sequences of different
lengths): where it is False the state is held, so the last row holds each sequence's final state.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> SPEC["cumargmax"].forward(np.array([3.0, 1.0, 3.0, 2.0]), axis=0).tolist()
    [0, 0, 2, 2]
"""

from __future__ import annotations

import numpy as np

from ..errors import DomainError, ShapeError, fmt_shapes
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


# ---- recurrences (RNN, LSTM, GRU) -------------------------------------------------------------

def _sig(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _rnn_shape(op, gates, gx, w_hh, h0, mask, *, c0=None, b_hh=None):
    gx, w_hh, h0 = tuple(gx), tuple(w_hh), tuple(h0)
    if len(gx) != 3 or gx[0] < 1 or gx[1] < 1:
        raise ShapeError(f"{op}: gx must be (T, N, {gates}H) with T, N >= 1, got {gx}")
    if len(h0) != 2 or h0[0] != gx[1] or h0[1] < 1 or gx[2] != gates * h0[1]:
        raise ShapeError(f"{op}: h0 {h0} must be (N, H) with gx {gx} = (T, N, {gates}H)")
    H = h0[1]
    if w_hh != (gates * H, H):
        raise ShapeError(f"{op}: w_hh has shape {w_hh}, expected ({gates * H}, {H})")
    if c0 is not None and tuple(c0) != h0:
        raise ShapeError(f"{op}: c0 has shape {tuple(c0)}, expected h0's {h0}")
    if b_hh is not None and tuple(b_hh) != (gates * H,):
        raise ShapeError(f"{op}: b_hh has shape {tuple(b_hh)}, expected ({gates * H},)")
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype != np.bool_ or m.shape != gx[:2]:
            raise ShapeError(f"{op}: mask must be a bool array of shape (T, N) = {gx[:2]}, got "
                             f"{m.dtype} {m.shape}")
    return gx[:2] + (H,)


def _hold(mask, t, new, old):
    return new if mask is None else np.where(np.asarray(mask)[t][:, None], new, old)


def _lstm_steps(gx, w_hh, h0, c0, mask):
    """Every step's activated gates (i, f, g, o) and states h, c."""
    H = h0.shape[-1]
    hs, cs, acts = [], [], []
    h, c = h0, c0
    for t in range(gx.shape[0]):
        z = gx[t] + h @ w_hh.T
        i, f, g, o = _sig(z[:, :H]), _sig(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), _sig(z[:, 3 * H:])
        c = _hold(mask, t, f * c + i * g, c)
        h = _hold(mask, t, o * np.tanh(c), h)
        acts.append((i, f, g, o))
        hs.append(h)
        cs.append(c)
    return acts, np.stack(hs), np.stack(cs)


def _lstm(gx, w_hh, h0, c0, *, mask=None):
    _, hs, cs = _lstm_steps(gx, w_hh, h0, c0, mask)
    return np.stack([hs, cs])


def _lstm_vjp(g, gx, w_hh, h0, c0, *, mask=None):
    """Back through time: a held step passes dh, dc on unchanged; a real one goes through the cell."""
    acts, hs, cs = _lstm_steps(gx, w_hh, h0, c0, mask)
    dgx = np.zeros(gx.shape, dtype=np.result_type(g, gx))
    dh, dc = np.zeros_like(h0, dtype=dgx.dtype), np.zeros_like(c0, dtype=dgx.dtype)
    for t in range(gx.shape[0] - 1, -1, -1):
        dh, dc = dh + g[0, t], dc + g[1, t]
        if mask is not None and not np.asarray(mask)[t].any():
            continue
        keep = np.ones(h0.shape[0], dtype=bool) if mask is None else np.asarray(mask)[t]
        k = keep[:, None]
        i, f, gg, o = acts[t]
        c_prev = cs[t - 1] if t else c0
        tc = np.tanh(cs[t])
        dct = dc + dh * o * (1 - tc * tc)
        dz = np.concatenate([dct * gg * i * (1 - i), dct * c_prev * f * (1 - f), dct * i * (1 - gg * gg),
                             dh * tc * o * (1 - o)], axis=1) * k
        dgx[t] = dz
        dh = np.where(k, dz @ w_hh, dh)
        dc = np.where(k, dct * f, dc)
    hprev = np.concatenate([h0[None], hs[:-1]])
    dw = np.einsum("tng,tnh->gh", dgx, hprev)
    return dgx, dw, dh, dc


def _gru_steps(gx, w_hh, b_hh, h0, mask):
    H = h0.shape[-1]
    hs, acts = [], []
    h = h0
    for t in range(gx.shape[0]):
        a = h @ w_hh.T + b_hh
        r = _sig(gx[t, :, :H] + a[:, :H])
        z = _sig(gx[t, :, H:2 * H] + a[:, H:2 * H])
        n = np.tanh(gx[t, :, 2 * H:] + r * a[:, 2 * H:])
        h = _hold(mask, t, (1 - z) * n + z * h, h)
        acts.append((r, z, n, a[:, 2 * H:]))
        hs.append(h)
    return acts, np.stack(hs)


def _gru(gx, w_hh, b_hh, h0, *, mask=None):
    return _gru_steps(gx, w_hh, b_hh, h0, mask)[1]


def _gru_vjp(g, gx, w_hh, b_hh, h0, *, mask=None):
    acts, hs = _gru_steps(gx, w_hh, b_hh, h0, mask)
    dt = np.result_type(g, gx)
    dgx = np.zeros(gx.shape, dtype=dt)
    da = np.zeros(gx.shape, dtype=dt)  # cotangent of a = h w_hh^T + b_hh, per step
    dh = np.zeros(h0.shape, dtype=dt)
    for t in range(gx.shape[0] - 1, -1, -1):
        dh = dh + g[t]
        k = (np.ones(h0.shape[0], dtype=bool) if mask is None else np.asarray(mask)[t])[:, None]
        r, z, n, an = acts[t]
        h_prev = hs[t - 1] if t else h0
        dn = dh * (1 - z) * (1 - n * n)
        dr = dn * an * r * (1 - r)
        dz = dh * (h_prev - n) * z * (1 - z)
        dgx[t] = np.concatenate([dr, dz, dn], axis=1) * k
        da[t] = np.concatenate([dr, dz, dn * r], axis=1) * k
        dh = np.where(k, dh * z + da[t] @ w_hh, dh)
    hprev = np.concatenate([h0[None], hs[:-1]])
    return dgx, np.einsum("tng,tnh->gh", da, hprev), da.sum(axis=(0, 1)), dh


def _act(nonlinearity):
    if nonlinearity == "tanh":
        return np.tanh, lambda h: 1 - h * h
    if nonlinearity == "relu":
        return (lambda v: np.maximum(v, 0)), (lambda h: (h > 0).astype(h.dtype))
    raise DomainError(f"rnn_scan: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")


def _rnn(gx, w_hh, h0, *, nonlinearity, mask=None):
    act = _act(nonlinearity)[0]
    hs, h = [], h0
    for t in range(gx.shape[0]):
        h = _hold(mask, t, act(gx[t] + h @ w_hh.T), h)
        hs.append(h)
    return np.stack(hs)


def _rnn_vjp(g, gx, w_hh, h0, *, nonlinearity, mask=None):
    dact = _act(nonlinearity)[1]
    hs = _rnn(gx, w_hh, h0, nonlinearity=nonlinearity, mask=mask)
    dgx = np.zeros(gx.shape, dtype=np.result_type(g, gx))
    dh = np.zeros(h0.shape, dtype=dgx.dtype)
    for t in range(gx.shape[0] - 1, -1, -1):
        dh = dh + g[t]
        k = (np.ones(h0.shape[0], dtype=bool) if mask is None else np.asarray(mask)[t])[:, None]
        dgx[t] = dh * dact(hs[t]) * k
        dh = np.where(k, dgx[t] @ w_hh, dh)
    hprev = np.concatenate([h0[None], hs[:-1]])
    return dgx, np.einsum("tng,tnh->gh", dgx, hprev), dh


def _rnn_scan_shape(gx, w_hh, h0, *, nonlinearity, mask=None):
    _act(nonlinearity)
    return _rnn_shape("rnn_scan", 1, gx, w_hh, h0, mask)


_RECURRENCE = "speed: the time loop as one op, one matrix product and one fused cell kernel per step"

defspec("lstm_scan", _lstm, _lstm_vjp,
        lambda gx, w_hh, h0, c0, *, mask=None: (2,) + _rnn_shape("lstm_scan", 4, gx, w_hh, h0, mask, c0=c0), 4,
        why=_RECURRENCE)
defspec("gru_scan", _gru, _gru_vjp,
        lambda gx, w_hh, b_hh, h0, *, mask=None: _rnn_shape("gru_scan", 3, gx, w_hh, h0, mask, b_hh=b_hh), 4,
        why=_RECURRENCE)
defspec("rnn_scan", _rnn, _rnn_vjp, _rnn_scan_shape, 3, why=_RECURRENCE)


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
