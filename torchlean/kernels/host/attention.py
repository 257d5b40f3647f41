"""Host kernels of the attention family: flash attention over key tiles (online softmax).

Every kernel (and every helper that computes on arrays) takes the array namespace as the
keyword ``xp`` (NumPy by default); :mod:`torchlean.kernels.cuda.attention` runs them with
``xp=cupy`` for the inputs its native kernels do not take (float64, large head sizes, ...).
The thread pool of the elementwise tile work is used only with NumPy.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .base import _c


_MASK_FILL = -1000.0          # the seeds' value for a blocked attention logit


_TILE_ELEMS = 1 << 23        # logits per key tile of flash attention (32 MiB in float32)
_MIN_PARALLEL = 1 << 22      # logits per tile below which elementwise work stays on one thread
_CPUS = os.cpu_count() or 1   # read once: the call costs about 14 us on some Linux machines
# The workers of the elementwise passes (threads start on the first large tile, not here).
_POOL = ThreadPoolExecutor(max_workers=_CPUS)


# ---- attention ------------------------------------------------------------------------------


def _key_tile(rows, m):
    return int(max(64, min(m, _TILE_ELEMS // max(rows, 1))))


def _par_rows(fn, rows, cols, *, xp=np):
    """Run ``fn(lo, hi)`` over slices of ``rows`` on a thread pool.

    Only elementwise work goes through here: NumPy's ufuncs release the GIL, so
    row slices run in parallel, while the matrix products stay on the calling
    thread where BLAS has its own threads. Small tiles stay on one thread, and so
    does every array namespace other than NumPy (``fn(0, rows)``: one launch per op).
    """
    if xp is not np:
        fn(0, rows)
        return
    workers = min(_CPUS, rows)
    if workers <= 1 or rows * cols < _MIN_PARALLEL:
        fn(0, rows)
        return
    bounds = [rows * i // workers for i in range(workers + 1)]
    for f in [_POOL.submit(fn, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]:
        f.result()


def _fill(s, keep, hard, *, xp=np):
    """Blocked logits: -1000.0 (seed convention) or -inf (hard), in place."""
    if keep is not None:
        xp.copyto(s, _c(s, -np.inf if hard else _MASK_FILL), where=~keep)


def _keep_tile(mask, causal, B, n, j0, j1, *, xp=np):
    """(B*n, j1-j0) bool of the allowed keys j0..j1-1, or None: the mask's, and with ``causal``
    only keys j <= the query's row i (PyTorch's top-left aligned ``is_causal``)."""
    keep = None if mask is None else mask[:, :, j0:j1].reshape(B * n, j1 - j0)
    if not causal:
        return keep
    tri = xp.arange(j0, j1)[None, :] <= xp.arange(n)[:, None]
    tri = xp.broadcast_to(tri[None], (B, n, j1 - j0)).reshape(B * n, j1 - j0)
    return tri if keep is None else keep & tri


def flash_attention_fwd(q, k, v, mask, scale, hard=False, causal=False, *, xp=np):
    B, n, _ = q.shape
    m, R = k.shape[1], B * n
    qs = q * _c(q, scale)
    T = _key_tile(R, m)
    mx = xp.full((R, 1), -np.inf, dtype=q.dtype)     # running row max of the logits
    shift = xp.zeros((R, 1), dtype=q.dtype)          # the max actually subtracted (0 while -inf)
    ssum = xp.zeros((R, 1), dtype=q.dtype)
    alpha = xp.empty((R, 1), dtype=q.dtype)
    acc = xp.zeros((B, n, v.shape[2]), dtype=q.dtype)
    for j0 in range(0, m, T):
        j1 = min(m, j0 + T)
        s = xp.matmul(qs, k[:, j0:j1].transpose(0, 2, 1))
        s2 = s.reshape(R, j1 - j0)
        keep = _keep_tile(mask, causal, B, n, j0, j1, xp=xp)

        def softmax_tile(lo, hi, s2=s2, keep=keep):
            t = s2[lo:hi]
            _fill(t, None if keep is None else keep[lo:hi], hard, xp=xp)
            mnew = xp.maximum(mx[lo:hi], t.max(axis=1, keepdims=True))
            # Rows with no allowed key yet (hard masking) keep max -inf: shift by 0 instead.
            sh = xp.where(xp.isfinite(mnew), mnew, _c(mnew, 0)) if hard else mnew
            t -= sh
            xp.exp(t, out=t)
            xp.exp(mx[lo:hi] - sh, out=alpha[lo:hi])
            ssum[lo:hi] = ssum[lo:hi] * alpha[lo:hi] + t.sum(axis=1, keepdims=True)
            mx[lo:hi], shift[lo:hi] = mnew, sh

        _par_rows(softmax_tile, R, j1 - j0, xp=xp)
        if j0:
            acc *= alpha.reshape(B, n, 1)
        acc += xp.matmul(s, v[:, j0:j1])
    ok = ssum > 0
    out = acc / xp.where(ok, ssum, _c(ssum, 1)).reshape(B, n, 1)
    lse = xp.where(ok, shift + xp.log(xp.where(ok, ssum, _c(ssum, 1))), _c(ssum, np.inf))
    return out, lse.reshape(B, n)


def flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard, causal=False, *, xp=np):
    B, n, _ = q.shape
    m, R = k.shape[1], B * n
    sc = _c(q, scale)
    qs = q * sc
    T = _key_tile(R, m)
    delta = xp.einsum("bne,bne->bn", g, out).reshape(R, 1)
    L = lse.reshape(R, 1)
    dq = xp.zeros_like(q)
    dk = xp.empty_like(k)
    dv = xp.empty_like(v)
    for j0 in range(0, m, T):
        j1 = min(m, j0 + T)
        keep = _keep_tile(mask, causal, B, n, j0, j1, xp=xp)
        p = xp.matmul(qs, k[:, j0:j1].transpose(0, 2, 1))
        p2 = p.reshape(R, j1 - j0)

        def probs(lo, hi, p2=p2, keep=keep):
            # The probabilities, recomputed from the saved log-sum-exp.
            t = p2[lo:hi]
            _fill(t, None if keep is None else keep[lo:hi], hard, xp=xp)
            t -= L[lo:hi]
            xp.exp(t, out=t)

        _par_rows(probs, R, j1 - j0, xp=xp)
        dv[:, j0:j1] = xp.matmul(p.transpose(0, 2, 1), g)
        ds = xp.matmul(g, v[:, j0:j1].transpose(0, 2, 1))
        ds2 = ds.reshape(R, j1 - j0)

        def dlogits(lo, hi, ds2=ds2, p2=p2, keep=keep):
            t = ds2[lo:hi]
            t -= delta[lo:hi]
            t *= p2[lo:hi]
            if keep is not None and not hard:
                # A replaced logit is a constant; with hard masking p is already 0 there.
                xp.copyto(t, _c(t, 0), where=~keep[lo:hi])

        _par_rows(dlogits, R, j1 - j0, xp=xp)
        dq += xp.matmul(ds, k[:, j0:j1])
        dk[:, j0:j1] = xp.matmul(ds.transpose(0, 2, 1), qs)
    dq *= sc
    return dq, dk, dv


def flash_attention_bwd_q(q, k, v, mask, out, lse, g, scale, hard, causal=False, *, xp=np):
    return flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard, causal, xp=xp)[0]


def flash_attention_bwd_k(q, k, v, mask, out, lse, g, scale, hard, causal=False, *, xp=np):
    return flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard, causal, xp=xp)[1]


def flash_attention_bwd_v(q, k, v, mask, out, lse, g, scale, hard, causal=False, *, xp=np):
    return flash_attention_bwd(q, k, v, mask, out, lse, g, scale, hard, causal, xp=xp)[2]
