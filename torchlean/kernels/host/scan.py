"""Host kernels of the scan family: the diagonal selective scan and its backward."""

from __future__ import annotations

import numpy as np


# ---- selective scan -------------------------------------------------------------------------
# A loop over time, vectorised over leading batch axes and the state axis.


def _scan_fwd(a, b, x, h0, var):
    h = np.empty_like(x)
    bx = b * x
    prev = h0
    for t in range(x.shape[-2]):
        prev = (a[..., t, :] if var else a) * prev + bx[..., t, :]
        h[..., t, :] = prev
    return h


def _scan_bwd(a, b, x, h0, h, g, var):
    L = x.shape[-2]
    gs = np.empty_like(x)
    acc = g[..., L - 1, :].copy()
    gs[..., L - 1, :] = acc
    for t in range(L - 2, -1, -1):
        acc = g[..., t, :] + (a[..., t + 1, :] if var else a) * acc
        gs[..., t, :] = acc
    hprev = np.empty_like(h)
    hprev[..., 0, :] = h0
    hprev[..., 1:, :] = h[..., :-1, :]
    dx = gs * b
    dh0 = (a[..., 0, :] if var else a) * gs[..., 0, :]
    if var:
        return gs * hprev, gs * x, dx, dh0
    S = x.shape[-1]
    g2, hp2, x2 = gs.reshape(-1, S), hprev.reshape(-1, S), x.reshape(-1, S)
    return np.einsum("rs,rs->s", g2, hp2), np.einsum("rs,rs->s", g2, x2), dx, dh0


def selective_scan_diag_fwd(a, b, x, h0):
    return _scan_fwd(a, b, x, h0, False)


def selective_scan_diag_bwd(a, b, x, h0, h, g):
    return _scan_bwd(a, b, x, h0, h, g, False)


def selective_scan_diag_var_fwd(a, b, x, h0):
    return _scan_fwd(a, b, x, h0, True)


def selective_scan_diag_var_bwd(a, b, x, h0, h, g):
    return _scan_bwd(a, b, x, h0, h, g, True)
