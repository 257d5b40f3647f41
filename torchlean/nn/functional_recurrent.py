"""Recurrent layer functions: the time loops of ``nn.RNN``, ``nn.LSTM``, ``nn.GRU`` and their cells.

Each function runs one layer in one direction, time-major and in forward time order, from an input
projection ``gx`` that the caller computed for all steps at once (one matmul over ``T * N`` rows).
The time loop is one recorded op (``lstm_scan``, ``gru_scan``, ``rnn_scan``): per step one product
``h @ w_hh.T`` and one fused cell kernel, PyTorch's gate order and formulas. An LSTM with a
projection (``w_hr``) runs its steps as separate recorded ops.

``mask`` (optional) is a host bool array ``(T, N)``, True where step ``t`` of sequence ``n`` is
real. Sequences are left-aligned (real steps first, as after packing); where the mask is False the
state is held and the output is 0, so ``h_n`` / ``c_n`` are the states after each sequence's last
real step.

    >>> import torchlean as tl
    >>> from torchlean.nn.functional_recurrent import rnn_layer
    >>> out, h = rnn_layer(tl.zeros(3, 2, 4), tl.zeros(4, 4), tl.ones(2, 4))
    >>> out.shape, h.shape
    (torchlean.Size([3, 2, 4]), torchlean.Size([2, 4]))
    >>> [round(v, 4) for v in h[0].tolist()]
    [0.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

import numpy as np

from ..autograd import record
from ..errors import DomainError, ShapeError
from ..ops import stack, where
from ..tensor import Tensor
from ..amp import autocast_namespace

__all__ = ["lstm_layer", "gru_layer", "rnn_layer"]


def _check(op, gx, w_hh, h0, gates, c0=None):
    if gx.ndim != 3:
        raise ShapeError(f"{op}: gx must be (T, N, {gates}*H), got shape {list(gx.shape)}")
    T, N, G = gx.shape
    if G % gates or w_hh.ndim != 2 or w_hh.shape[0] != G:
        raise ShapeError(f"{op}: gx {list(gx.shape)} and w_hh {list(w_hh.shape)} do not agree "
                         f"(w_hh must be ({gates}*H, P) with gx's last axis {gates}*H)")
    if h0.ndim != 2 or h0.shape != (N, w_hh.shape[1]):
        raise ShapeError(f"{op}: h0 must be (N, P) = {[N, w_hh.shape[1]]}, got {list(h0.shape)}")
    if c0 is not None and (c0.ndim != 2 or c0.shape != (N, G // gates)):
        raise ShapeError(f"{op}: c0 must be (N, H) = {[N, G // gates]}, got {list(c0.shape)}")
    return T, N, G // gates


def _step_masks(op, mask, T, N, like):
    """Per step: None (every sequence real) or a (N, 1) bool tensor on ``like``'s device."""
    if mask is None:
        return [None] * T
    m = np.asarray(mask)
    if m.dtype != np.bool_ or m.shape != (T, N):
        raise ShapeError(f"{op}: mask must be a host bool array of shape {[T, N]}, got "
                         f"{m.dtype} {list(m.shape)}")
    return [None if m[t].all() else Tensor(m[t].reshape(N, 1)).to(device=like.device) for t in range(T)]


def _hold(m, new, old):
    return new if m is None else where(m, new, old)


def _emit(m, h):
    return h if m is None else where(m, h, h.new_zeros(()))


def _scan_attrs(op, mask, T, N):
    """The op's ``mask`` attribute: None when every step is real."""
    if mask is None:
        return {}
    m = np.asarray(mask)
    if m.dtype != np.bool_ or m.shape != (T, N):
        raise ShapeError(f"{op}: mask must be a host bool array of shape {[T, N]}, got {m.dtype} {list(m.shape)}")
    return {} if m.all() else {"mask": m}


def _outputs(hs, attrs):
    """Every state, zero at the held steps (the output of a packed sequence there)."""
    m = attrs.get("mask")
    if m is None:
        return hs
    return hs * Tensor(m[:, :, None].astype(hs.dtype.np)).to(device=hs.device)


def lstm_layer(gx, w_hh, h0, c0, mask=None, w_hr=None):
    """One LSTM layer over time: returns ``(out (T, N, P), h_n (N, P), c_n (N, H))``.

    ``gx = x @ w_ih.T + b_ih + b_hh`` (T, N, 4H), gates i, f, g, o (PyTorch's order);
    ``c = f*c + i*g``, ``h = o*tanh(c)``, then ``h = h @ w_hr.T`` when ``w_hr`` (P, H) is given.
    """
    T, N, H = _check("lstm_layer", gx, w_hh, h0, 4, c0)
    if w_hr is not None:
        return _lstm_projected(gx, w_hh, h0, c0, mask, w_hr, T, N, H)
    if T == 0 or N == 0:
        return gx.new_zeros((T, N, H)), h0, c0
    attrs = _scan_attrs("lstm_layer", mask, T, N)
    states = record("lstm_scan", (gx, w_hh, h0, c0), attrs)
    hs = states[0]
    return _outputs(hs, attrs), hs[-1], states[1, -1]


def _lstm_projected(gx, w_hh, h0, c0, mask, w_hr, T, N, H):
    if w_hr.ndim != 2 or w_hr.shape != (w_hh.shape[1], H):
        raise ShapeError(f"lstm_layer: w_hr must be (P, H) = {[w_hh.shape[1], H]}, got {list(w_hr.shape)}")
    masks = _step_masks("lstm_layer", mask, T, N, gx)
    w_t, wr_t = w_hh.t(), w_hr.t()
    h, c, outs = h0, c0, []
    for t, g_t in enumerate(gx.unbind(0)):
        g = g_t + h @ w_t
        i, f, gg, o = g[:, :H].sigmoid(), g[:, H:2 * H].sigmoid(), g[:, 2 * H:3 * H].tanh(), g[:, 3 * H:].sigmoid()
        c_new = f * c + i * gg
        h_new = (o * c_new.tanh()) @ wr_t
        m = masks[t]
        outs.append(_emit(m, h_new))
        h, c = _hold(m, h_new, h), _hold(m, c_new, c)
    return stack(outs) if outs else gx.new_zeros((0, N, h0.shape[1])), h, c


def gru_layer(gx, w_hh, b_hh, h0, mask=None):
    """One GRU layer over time: returns ``(out (T, N, H), h_n (N, H))``.

    ``gx = x @ w_ih.T + b_ih`` (T, N, 3H), gates r, z, n (PyTorch's order and formula):
    ``n = tanh(gx_n + r * (h @ w_hn.T + b_hn))``, ``h' = (1 - z) * n + z * h``; ``b_hh`` may be None.
    """
    T, N, H = _check("gru_layer", gx, w_hh, h0, 3)
    if b_hh is not None and tuple(b_hh.shape) != (3 * H,):
        raise ShapeError(f"gru_layer: b_hh must be (3H,) = {[3 * H]}, got {list(b_hh.shape)}")
    if T == 0 or N == 0:
        return gx.new_zeros((T, N, H)), h0
    attrs = _scan_attrs("gru_layer", mask, T, N)
    hs = record("gru_scan", (gx, w_hh, gx.new_zeros((3 * H,)) if b_hh is None else b_hh, h0), attrs)
    return _outputs(hs, attrs), hs[-1]


def rnn_layer(gx, w_hh, h0, nonlinearity="tanh", mask=None):
    """One Elman RNN layer over time: ``h' = act(gx + h @ w_hh.T)`` with ``act`` tanh or relu;
    ``gx = x @ w_ih.T + b_ih + b_hh`` (T, N, H). Returns ``(out (T, N, H), h_n (N, H))``."""
    if nonlinearity not in ("tanh", "relu"):
        raise DomainError(f"rnn_layer: unknown nonlinearity {nonlinearity!r}; select from 'tanh' or 'relu'")
    T, N, H = _check("rnn_layer", gx, w_hh, h0, 1)
    if T == 0 or N == 0:
        return gx.new_zeros((T, N, H)), h0
    attrs = _scan_attrs("rnn_layer", mask, T, N)
    hs = record("rnn_scan", (gx, w_hh, h0), {"nonlinearity": nonlinearity, **attrs})
    return _outputs(hs, attrs), hs[-1]


# The LSTM layer runs in autocast's low dtype on the CPU, as torch's (torchlean.amp).
autocast_namespace(globals())

