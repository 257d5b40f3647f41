"""Test records of the scan family."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand

# ---- selective scan -------------------------------------------------------------------------

_SCAN = [(5, 3), (2, 4, 3), (2, 2, 3, 2), (1, 4), (3, 1)]


def _scan_samples(var):
    def samples(rng):
        out = []
        for s in _SCAN:
            coef = s if var else s[-1:]
            out.append(Sample((rand(rng, *s), rand(rng, *coef, lo=-0.95, hi=0.95), rand(rng, *coef),
                               rand(rng, *(s[:-2] + s[-1:]))), {}, str(s)))
        return out
    return samples


def _scan_bad(var):
    def bad(rng):
        x = np.ones((2, 4, 3))
        c = x if var else np.ones(3)
        return [BadInput((x, np.ones(2) if not var else np.ones((2, 4, 2)), c, np.ones((2, 3))), {}, ShapeError,
                         "a and b", "a shape"),
                BadInput((x, c, c, np.ones(3)), {}, ShapeError, "h0", "h0 shape"),
                BadInput((np.ones(3), np.ones(3), np.ones(3), np.ones(3)), {}, ShapeError, "(3,)", "1-D x")]
    return bad


defop(OpInfo("selective_scan", _scan_samples(False), _scan_bad(False)))


defop(OpInfo("selective_scan_var", _scan_samples(True), _scan_bad(True)))


# ---- recurrences ------------------------------------------------------------------------------

_RNN = [(5, 3, 4), (1, 1, 1), (3, 2, 3)]
_LENGTHS = np.array([4, 5, 2])  # a (T=5, N=3) mask of unsorted lengths: held steps at the end


def _rnn_mask(T, N):
    return np.arange(T)[:, None] < _LENGTHS[None, :N]


def _rnn_samples(gates, extra):
    def samples(rng):
        out = []
        for T, N, H in _RNN:
            args = (rand(rng, T, N, gates * H, lo=-2, hi=2), rand(rng, gates * H, H)) + extra(rng, N, H)
            out.append(Sample(args, {}, f"T={T} N={N} H={H}"))
        T, N, H = _RNN[0]
        args = (rand(rng, T, N, gates * H, lo=-2, hi=2), rand(rng, gates * H, H)) + extra(rng, N, H)
        out.append(Sample(args, {"mask": _rnn_mask(T, N)}, "held steps (lengths 4, 5, 2)"))
        return out
    return samples


def _rnn_bad(gates, extra):
    def bad(rng):
        T, N, H = 3, 2, 2
        gx, w = np.ones((T, N, gates * H)), np.ones((gates * H, H))
        good = extra(rng, N, H)
        return [BadInput((gx, np.ones((gates * H, H + 1))) + good, {}, ShapeError, "w_hh", "w_hh shape"),
                BadInput((gx, w) + tuple(np.ones((N + 1, H)) if e.shape == (N, H) else e for e in good), {},
                         ShapeError, "h0", "h0 batch"),
                BadInput((gx, w) + good, {"mask": np.ones((T, N + 1), dtype=bool)}, ShapeError, "mask",
                         "mask shape"),
                BadInput((np.ones((0, N, gates * H)), w) + good, {}, ShapeError, "T, N >= 1", "empty sequence")]
    return bad


def _cells(torch, cell, gx, h0, mask, step):
    """Every state of ``step`` run over time, held where ``mask`` is False."""
    hs, h = [], h0
    for t in range(gx.shape[0]):
        new = step(cell, gx[t], h)
        h = new if mask is None else tuple(torch.where(torch.as_tensor(mask[t])[:, None], a, b)
                                           for a, b in zip(new, h))
        hs.append(h)
    return hs


def _lstm_ref(torch, gx, w_hh, h0, c0, *, mask=None):
    eye = torch.eye(gx.shape[-1], dtype=gx.dtype)  # torch's own cell, input weight I: its input is gx
    hs = _cells(torch, None, gx, (h0, c0), mask, lambda _, x, hc: torch.lstm_cell(x, hc, eye, w_hh, None, None))
    return torch.stack([torch.stack([h for h, _ in hs]), torch.stack([c for _, c in hs])])


def _gru_ref(torch, gx, w_hh, b_hh, h0, *, mask=None):
    eye = torch.eye(gx.shape[-1], dtype=gx.dtype)
    return torch.stack([h for (h,) in _cells(torch, None, gx, (h0,), mask,
                                             lambda _, x, h: (torch.gru_cell(x, h[0], eye, w_hh, None, b_hh),))])


def _rnn_ref(torch, gx, w_hh, h0, *, nonlinearity, mask=None):
    eye = torch.eye(gx.shape[-1], dtype=gx.dtype)
    cell = getattr(torch, f"rnn_{nonlinearity}_cell")
    return torch.stack([h for (h,) in _cells(torch, None, gx, (h0,), mask,
                                             lambda _, x, h: (cell(x, h[0], eye, w_hh, None, None),))])


def _lstm_extra(rng, N, H):
    return rand(rng, N, H), rand(rng, N, H)


def _gru_extra(rng, N, H):
    return rand(rng, 3 * H), rand(rng, N, H)


def _rnn_extra(rng, N, H):
    return (rand(rng, N, H),)


defop(OpInfo("lstm_scan", _rnn_samples(4, _lstm_extra), _rnn_bad(4, _lstm_extra), torch_ref=_lstm_ref))
defop(OpInfo("gru_scan", _rnn_samples(3, _gru_extra), _rnn_bad(3, _gru_extra), torch_ref=_gru_ref))


def _with_act(samples, nonlinearity):
    def drawn(rng):
        return [Sample(s.inputs, {**s.attrs, "nonlinearity": nonlinearity}, f"{nonlinearity} {s.desc}")
                for s in samples(rng)]
    return drawn


def _rnn_all_samples(rng):
    # relu: inputs kept off the kink at 0 so central differences see one branch
    out = _with_act(_rnn_samples(1, _rnn_extra), "tanh")(rng)
    for s in _with_act(_rnn_samples(1, _rnn_extra), "relu")(rng):
        gx = s.inputs[0]
        out.append(Sample((np.where(np.abs(gx) < 0.3, 0.3 * np.sign(gx) + gx, gx) * 3,) + s.inputs[1:],
                          s.attrs, s.desc))
    return out


def _rnn_all_bad(rng):
    bad = [BadInput(b.inputs, {**b.attrs, "nonlinearity": "tanh"}, b.error, b.match, b.desc)
           for b in _rnn_bad(1, _rnn_extra)(rng)]
    bad.append(BadInput((np.ones((2, 1, 2)), np.ones((2, 2)), np.ones((1, 2))), {"nonlinearity": "sigmoid"},
                        DomainError, "nonlinearity", "unknown nonlinearity"))
    return bad


defop(OpInfo("rnn_scan", _rnn_all_samples, _rnn_all_bad, torch_ref=_rnn_ref))


# ---- cumulative ops ---------------------------------------------------------------------------

_CUM = [((7,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 5), -1), ((2, 3, 5), 1), ((4, 1, 3), -2), ((), 0), ((), -1),
        ((0, 3), 1), ((2, 0), 1)]


def _cum_samples(rng):
    return [Sample((rand(rng, *s),), {"axis": a}, f"{s} axis={a}") for s, a in _CUM]


def _cumprod_samples(rng):
    out = _cum_samples(rng)
    for zeros in ([2], [1, 4], [0], [5]):  # one zero, two zeros, at either end: the exact path of the VJP
        x = rand(rng, 2, 6, lo=0.5, hi=1.5) * np.where(rng.random((2, 6)) < 0.5, -1.0, 1.0)
        x[:, zeros] = 0.0
        out.append(Sample((x,), {"axis": 1}, f"zeros at {zeros}"))
    x = rand(rng, 5, 3)
    x[2, 1] = 0.0
    out.append(Sample((x,), {"axis": 0}, "a zero down axis 0"))
    return out


def _cum_bad(rng):
    x = np.ones((2, 3))
    return [BadInput((x,), {"axis": 2}, ShapeError, "axis 2", "axis out of range"),
            BadInput((x,), {"axis": (0, 1)}, ShapeError, "single int", "tuple axis"),
            BadInput((x,), {"axis": 1.0}, ShapeError, "int", "float axis")]


defop(OpInfo("cumsum", _cum_samples, _cum_bad,
             torch_ref=lambda torch, x, *, axis: torch.cumsum(x, axis)))
defop(OpInfo("cumprod", _cumprod_samples, _cum_bad,
             torch_ref=lambda torch, x, *, axis: torch.cumprod(x, axis)))


def _cumarg_samples(rng):
    # Small integers as floats: ties everywhere (the last tied entry wins), exact in float32.
    out = [Sample((rng.integers(-2, 3, size=s).astype(np.float64),), {"axis": a}, f"{s} axis={a}") for s, a in _CUM]
    x = rng.integers(-2, 3, size=(3, 6)).astype(np.float64)
    x[0, 2] = x[1, 0] = x[1, 4] = np.nan
    out.append(Sample((x,), {"axis": 1}, "NaNs"))
    return out


def _cumarg_ref(name):
    return lambda torch, x, *, axis: getattr(torch, name)(x, axis).indices


defop(OpInfo("cumargmax", _cumarg_samples, _cum_bad, diff=(), fd=False, torch_ref=_cumarg_ref("cummax")))
defop(OpInfo("cumargmin", _cumarg_samples, _cum_bad, diff=(), fd=False, torch_ref=_cumarg_ref("cummin")))
