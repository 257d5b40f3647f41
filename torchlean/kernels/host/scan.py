"""Host kernels of the scan family: the diagonal selective scan and its backward."""

from __future__ import annotations

import numpy as np


# ---- selective scan -------------------------------------------------------------------------
# A loop over time, vectorised over leading batch axes and the state axis, written over the
# array namespace ``xp`` (the CUDA kernels are native; benchmarks run this loop on CuPy to show
# what the native scan saves).


def _scan_fwd(a, b, x, h0, var, xp=np):
    h = xp.empty_like(x)
    bx = b * x
    prev = h0
    for t in range(x.shape[-2]):
        prev = (a[..., t, :] if var else a) * prev + bx[..., t, :]
        h[..., t, :] = prev
    return h


def _scan_bwd(a, b, x, h0, h, g, var, xp=np):
    L = x.shape[-2]
    gs = xp.empty_like(x)
    acc = g[..., L - 1, :].copy()
    gs[..., L - 1, :] = acc
    for t in range(L - 2, -1, -1):
        acc = g[..., t, :] + (a[..., t + 1, :] if var else a) * acc
        gs[..., t, :] = acc
    hprev = xp.empty_like(h)
    hprev[..., 0, :] = h0
    hprev[..., 1:, :] = h[..., :-1, :]
    dx = gs * b
    dh0 = (a[..., 0, :] if var else a) * gs[..., 0, :]
    if var:
        return gs * hprev, gs * x, dx, dh0
    S = x.shape[-1]
    g2, hp2, x2 = gs.reshape(-1, S), hprev.reshape(-1, S), x.reshape(-1, S)
    return xp.einsum("rs,rs->s", g2, hp2), xp.einsum("rs,rs->s", g2, x2), dx, dh0


def selective_scan_diag_fwd(a, b, x, h0, *, xp=np):
    return _scan_fwd(a, b, x, h0, False, xp)


def selective_scan_diag_bwd(a, b, x, h0, h, g, *, xp=np):
    return _scan_bwd(a, b, x, h0, h, g, False, xp)


def selective_scan_diag_var_fwd(a, b, x, h0, *, xp=np):
    return _scan_fwd(a, b, x, h0, True, xp)


def selective_scan_diag_var_bwd(a, b, x, h0, h, g, *, xp=np):
    return _scan_bwd(a, b, x, h0, h, g, True, xp)
