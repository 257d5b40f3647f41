"""Runtime rules of the scan family (meaning: :mod:`torchlean.spec.scan`)."""

from __future__ import annotations

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
