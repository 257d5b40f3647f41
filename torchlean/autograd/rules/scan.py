"""Runtime rules of the scan family (meaning: :mod:`torchlean.spec.scan`).

cumsum's backward is the reverse running sum of the cotangent (flip, cumsum, flip back);
cumprod's is its own kernel, exact where the input has zeros.
"""

from __future__ import annotations

import numpy as np

from ...spec.scan import scan_axis
from .registry import defrule, pick

# ---- selective scan -------------------------------------------------------------------------

def _scan_rule(name, fwd_kernel, bwd_kernel):
    def fwd(K, x, a, b, h0):
        h = getattr(K, fwd_kernel)(a, b, x, h0)
        return h, (a, b, x, h0, h)

    def bwd(K, s, g, needs):
        da, db, dx, dh0 = getattr(K, bwd_kernel)(*s, g)
        return pick(needs, dx, da, db, dh0)

    defrule(name, fwd, bwd)


_scan_rule("selective_scan", "selective_scan_diag_fwd", "selective_scan_diag_bwd")


_scan_rule("selective_scan_var", "selective_scan_diag_var_fwd", "selective_scan_diag_var_bwd")


# ---- recurrences ------------------------------------------------------------------------------
# The forward kernels keep every step's activations; the backward runs the time loop back once.

def _lstm_fwd(K, gx, w_hh, h0, c0, *, mask=None):
    states, acts = K.lstm_scan_fwd(gx, w_hh, h0, c0, mask)
    return states, (w_hh, h0, c0, mask, states, acts)


defrule("lstm_scan", _lstm_fwd, lambda K, s, g, needs: pick(needs, *K.lstm_scan_bwd(*s, g)))


def _gru_fwd(K, gx, w_hh, b_hh, h0, *, mask=None):
    hs, acts = K.gru_scan_fwd(gx, w_hh, b_hh, h0, mask)
    return hs, (w_hh, h0, mask, hs, acts)


defrule("gru_scan", _gru_fwd, lambda K, s, g, needs: pick(needs, *K.gru_scan_bwd(*s, g)))


def _rnn_fwd(K, gx, w_hh, h0, *, nonlinearity, mask=None):
    relu = nonlinearity == "relu"
    hs = K.rnn_scan_fwd(gx, w_hh, h0, mask, relu)
    return hs, (w_hh, h0, mask, hs, relu)


def _rnn_bwd(K, s, g, needs):
    w_hh, h0, mask, hs, relu = s
    return pick(needs, *K.rnn_scan_bwd(w_hh, h0, mask, hs, g, relu))


defrule("rnn_scan", _rnn_fwd, _rnn_bwd)


# ---- cumulative ops along one axis ------------------------------------------------------------

def _flip_key(axis):
    return (slice(None),) * axis + (slice(None, None, -1),)


def _cumsum_fwd(K, x, *, axis):
    a = scan_axis("cumsum", x.shape, axis)
    return (K.copy(x) if a is None else K.cumsum(x, a)), a


def _cumsum_bwd(K, a, g, n):
    if a is None:
        return (g,)
    key = _flip_key(a)
    return (K.basic_index(K.cumsum(K.basic_index(g, key), a), key),)


defrule("cumsum", _cumsum_fwd, _cumsum_bwd)


def _cumprod_fwd(K, x, *, axis):
    a = scan_axis("cumprod", x.shape, axis)
    if a is None:
        return K.copy(x), None
    y = K.cumprod(x, a)
    return y, (x, y, a)


defrule("cumprod", _cumprod_fwd, lambda K, s, g, n: ((g,) if s is None else (K.cumprod_bwd(*s[:2], g, s[2]),)))


# cumargmax / cumargmin give int64 indices: never recorded, so their backward is never asked for.
def _cumarg_rule(op):
    def fwd(K, x, *, axis):
        a = scan_axis(op, x.shape, axis)
        return (K.zeros((), np.int64) if a is None else getattr(K, op)(x, a)), None

    defrule(op, fwd, lambda K, s, g, n: (None,))


_cumarg_rule("cumargmax")
_cumarg_rule("cumargmin")
