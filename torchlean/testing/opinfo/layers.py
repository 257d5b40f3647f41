"""Test records of the model layers: normalization, attention, real FFT, spectral
convolution and selective scan."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand

# ---- normalization --------------------------------------------------------------------------

_LN = [((4, 5), 1, 1e-5), ((2, 3, 4), 2, 1e-5), ((3,), 1, 1e-5), ((2, 1, 3), 1, 1e-3),
       ((3, 1), 1, 1e-5), ((2, 3), 2, 1e-5)]


def _ln_samples(rng):
    out = []
    for shape, nd, eps in _LN:
        norm = shape[len(shape) - nd:]
        out.append(Sample((rand(rng, *shape), rand(rng, *norm, lo=0.5, hi=1.5), rand(rng, *norm)),
                          {"normalized_ndim": nd, "eps": eps}, f"{shape} nd={nd}"))
    return out


def _ln_bad(rng):
    x, g = np.ones((2, 3)), np.ones(3)
    return [BadInput((x, g, g), {"normalized_ndim": 3}, ShapeError, "normalized_ndim 3", "nd too large"),
            BadInput((x, g, g), {"normalized_ndim": 0}, ShapeError, "normalized_ndim", "nd zero"),
            BadInput((x, np.ones(2), g), {"normalized_ndim": 1}, ShapeError, "(2,)", "gamma shape"),
            BadInput((x, g, np.ones((2, 3))), {"normalized_ndim": 1}, ShapeError, "beta", "beta shape"),
            BadInput((x, g, g), {"normalized_ndim": 1, "eps": -1.0}, DomainError, "eps", "negative eps")]


def _torch_ln(torch, x, gamma=None, beta=None, *, normalized_ndim, eps=1e-5):
    return torch.nn.functional.layer_norm(x, tuple(x.shape[x.ndim - normalized_ndim:]), gamma, beta, eps)


defop(OpInfo("layer_norm", _ln_samples, _ln_bad, torch_ref=_torch_ln))
defop(OpInfo("layer_norm_noaffine",
             lambda rng: [Sample(s.inputs[:1], s.attrs, s.desc) for s in _ln_samples(rng)],
             lambda rng: [BadInput((np.ones((2, 3)),), {"normalized_ndim": 3}, ShapeError, "normalized_ndim 3"),
                          BadInput((np.ones((2, 0)),), {"normalized_ndim": 1}, ShapeError, "empty")],
             torch_ref=_torch_ln))


_BN = [(4, 3), (2, 3, 5), (2, 2, 3, 4), (1, 2, 3), (3, 1, 2, 1, 2)]


def _bn_params(rng, c):
    return rand(rng, c, lo=0.5, hi=1.5), rand(rng, c)


def _bn_train_samples(rng):
    return [Sample((rand(rng, *s),) + _bn_params(rng, s[1]), {"eps": 1e-5}, str(s)) for s in _BN] + \
        [Sample((rand(rng, 3, 2, 4),) + _bn_params(rng, 2), {"eps": 0.1}, "eps 0.1")]


def _bn_bad(name, n_stats):
    def bad(rng):
        st = (np.ones(3),) * n_stats
        return [BadInput((np.ones((2, 3, 4)), np.ones(4), np.ones(3)) + st, {}, ShapeError, "gamma", "gamma"),
                BadInput((np.ones(3), np.ones(3), np.ones(3)) + st, {}, ShapeError, "(3,)", "1-D x"),
                BadInput((np.ones((2, 3)), np.ones(3), np.ones(3)) + st, {"eps": float("nan")}, DomainError,
                         "eps", "nan eps")]
    return bad


defop(OpInfo("batch_norm_train", _bn_train_samples, _bn_bad("batch_norm_train", 0),
             torch_ref=lambda torch, x, g, b, *, eps=1e-5: torch.nn.functional.batch_norm(
                 x, None, None, g, b, training=True, eps=eps)))


def _bn_eval_samples(rng):
    return [Sample((rand(rng, *s),) + _bn_params(rng, s[1]) + (rand(rng, s[1]), rand(rng, s[1], lo=0.5, hi=2.0)),
                   {"eps": 1e-5}, str(s)) for s in _BN]


defop(OpInfo("batch_norm_eval", _bn_eval_samples,
             lambda rng: _bn_bad("batch_norm_eval", 2)(rng) + [
                 BadInput((np.ones((2, 3)), np.ones(3), np.ones(3), np.ones(2), np.ones(3)), {}, ShapeError,
                          "mean", "mean shape")],
             diff=(0, 1, 2),
             torch_ref=lambda torch, x, g, b, mu, var, *, eps=1e-5: torch.nn.functional.batch_norm(
                 x, mu, var, g, b, training=False, eps=eps)))


def _bn_chw_samples(rng):
    return [Sample((rand(rng, *s),) + _bn_params(rng, s[0]), {"eps": 1e-5}, str(s))
            for s in [(3, 4, 5), (1, 2, 2), (2, 1, 3), (4, 3, 1)]]


defop(OpInfo("batch_norm_chw", _bn_chw_samples,
             lambda rng: [BadInput((np.ones((2, 3, 4, 5)), np.ones(3), np.ones(3)), {}, ShapeError, "(C, H, W)"),
                          BadInput((np.ones((3, 4, 5)), np.ones(4), np.ones(3)), {}, ShapeError, "gamma")],
             torch_ref=lambda torch, x, g, b, *, eps=1e-5: torch.nn.functional.batch_norm(
                 x[None], None, None, g, b, training=True, eps=eps)[0]))


# ---- attention ------------------------------------------------------------------------------

def random_mask(rng, *shape, p=0.6, full_rows=True):
    """0/1 bool mask; with ``full_rows`` every row keeps at least one entry."""
    m = rng.uniform(size=shape) < p
    if full_rows:
        m[..., 0] |= ~m.any(axis=-1)
    return m


def _fa_samples(rng):
    def qkv(b, n, m, d, e=None):
        return rand(rng, b, n, d), rand(rng, b, m, d), rand(rng, b, m, e or d)

    blocked = random_mask(rng, 2, 4, 5)
    blocked[0, 1] = False
    blocked[1, 3] = False
    return [
        Sample(qkv(2, 4, 4, 3), {}, "self, no mask"),
        Sample(qkv(1, 3, 5, 4, 2), {"scale": 0.7}, "cross, dv != d, scale"),
        Sample(qkv(2, 4, 4, 3), {"mask": random_mask(rng, 2, 4, 4)}, "seed mask"),
        Sample(qkv(2, 4, 4, 3), {"mask": random_mask(rng, 2, 4, 4).astype(np.float64), "hard": True},
               "hard mask (float 0/1)"),
        Sample(qkv(2, 4, 5, 3), {"mask": blocked, "hard": True}, "hard, fully blocked rows"),
        Sample(qkv(2, 4, 5, 3), {"mask": blocked}, "seed mask, fully blocked rows"),
        Sample(qkv(1, 1, 1, 1), {}, "n = m = d = 1"),
        Sample((rand(rng, 2, 3, 4, 3), rand(rng, 2, 3, 5, 3), rand(rng, 2, 3, 5, 2)),
               {"mask": random_mask(rng, 2, 3, 4, 5), "hard": True}, "two batch axes (batch, heads), hard mask"),
    ]


def _fa_bad(rng):
    q = np.ones((2, 3, 4))
    return [BadInput((q, q, q), {"mask": np.ones((2, 3, 4), bool)}, ShapeError, "(2, 3, 4)", "mask shape"),
            BadInput((q, np.ones((2, 3, 5)), q), {}, ShapeError, "head dims", "d mismatch"),
            BadInput((q, np.ones((1, 3, 4)), np.ones((1, 3, 4))), {}, ShapeError, "batch", "batch mismatch"),
            BadInput((q, q, np.ones((2, 2, 4))), {}, ShapeError, "key lengths", "m mismatch"),
            BadInput((np.ones((3, 4)),) * 3, {}, ShapeError, "(3, 4)", "2-D"),
            BadInput((np.ones((2, 2, 3, 4)), np.ones((2, 3, 3, 4)), np.ones((2, 3, 3, 4))), {}, ShapeError,
                     "batch", "batch axes differ"),
            BadInput((q, q, q), {"mask": np.ones((3, 3), bool)}, ShapeError, "(2, 3, 3)", "mask of too few axes"),
            BadInput((q, q, q), {"scale": float("nan")}, DomainError, "scale", "nan scale")]


def torch_attention(torch, q, k, v, *, scale=None, mask=None, hard=False):
    """Attention in torch: SDPA where it means the same; explicit otherwise."""
    F = torch.nn.functional
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, scale=scale)
    keep = torch.as_tensor(np.asarray(mask) != 0)
    sc = q.shape[-1] ** -0.5 if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * sc
    if not hard:
        return torch.softmax(torch.where(keep, s, torch.full_like(s, -1000.0)), dim=-1) @ v
    e = torch.exp(s - s.detach().amax(dim=-1, keepdim=True)) * keep
    tot = e.sum(dim=-1, keepdim=True)
    return (e / torch.where(tot > 0, tot, torch.ones_like(tot))) @ v


defop(OpInfo("flash_attention", _fa_samples, _fa_bad, torch_ref=torch_attention, tol_scale=2.0))


def _mha_samples(rng):
    def ws(d, width, d_out=None):
        return tuple(rand(rng, d, width) for _ in range(3)) + (rand(rng, width, d_out or d),)

    causal = np.tril(np.ones((4, 4), bool))
    return [
        Sample((rand(rng, 4, 6),) + ws(6, 6), {"num_heads": 2}, "(n, d), 2 heads"),
        Sample((rand(rng, 2, 3, 4),) + ws(4, 6), {"num_heads": 3}, "batched, H*hd != d_model"),
        Sample((rand(rng, 2, 4, 4),) + ws(4, 4), {"num_heads": 2, "mask": causal}, "causal mask"),
        Sample((rand(rng, 2, 4, 4),) + ws(4, 4), {"num_heads": 2, "mask": causal, "use_flash": False},
               "causal mask, unfused"),
        Sample((rand(rng, 3, 5),) + ws(5, 4), {"num_heads": 1, "use_flash": False}, "one head, unfused"),
        Sample((rand(rng, 1, 2),) + ws(2, 2), {"num_heads": 2}, "n = 1, head_dim 1"),
    ]


def _mha_bad(rng):
    x, w = np.ones((3, 4)), np.ones((4, 6))
    return [BadInput((x, w, w, w, np.ones((6, 4))), {"num_heads": 4}, ShapeError, "num_heads 4", "6 % 4"),
            BadInput((x, w, np.ones((4, 4)), w, np.ones((6, 4))), {"num_heads": 2}, ShapeError, "(4, 4)",
                     "wk width"),
            BadInput((x, w, w, w, np.ones((4, 4))), {"num_heads": 2}, ShapeError, "wo", "wo shape"),
            BadInput((x, w, w, w, np.ones((6, 4))), {"num_heads": 2, "mask": np.ones((3, 4), bool)}, ShapeError,
                     "mask", "mask shape"),
            BadInput((np.ones(4), w, w, w, np.ones((6, 4))), {"num_heads": 2}, ShapeError, "(4,)", "1-D x"),
            BadInput((x, w, w, w, np.ones((6, 4))), {"num_heads": 0}, ShapeError, "num_heads", "0 heads")]


def torch_mha(torch, x, wq, wk, wv, wo, *, num_heads, mask=None, use_flash=True):
    """The seeds' multi-head attention written out in torch with the same weights."""
    X = x if x.ndim == 3 else x[None]
    b, n, _ = X.shape
    hd = wq.shape[1] // num_heads

    def heads(t):
        return t.reshape(b, n, num_heads, hd).transpose(1, 2)

    q, k, v = heads(X @ wq), heads(X @ wk), heads(X @ wv)
    s = (q @ k.transpose(-1, -2)) / hd ** 0.5
    if mask is not None:
        s = torch.where(torch.as_tensor(np.asarray(mask) != 0), s, torch.full_like(s, -1000.0))
    o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, n, num_heads * hd)
    y = o @ wo
    return y if x.ndim == 3 else y[0]


defop(OpInfo("multi_head_attention", _mha_samples, _mha_bad, torch_ref=torch_mha, tol_scale=2.0))


# ---- real FFT and spectral convolution ------------------------------------------------------

def _torch_irfft(torch, p, *, n):
    return torch.fft.irfft(torch.complex(p[..., 0], p[..., 1]), n=n)


defop(OpInfo("rfft",
             lambda rng: [Sample((rand(rng, *s),), {}, str(s)) for s in [(8,), (3, 7), (2, 3, 1), (2, 6), (2,)]],
             lambda rng: [BadInput((np.ones(()),), {}, ShapeError, "()", "0-d"),
                          BadInput((np.ones((3, 0)),), {}, ShapeError, "(3, 0)", "empty axis")],
             torch_ref=lambda torch, x: torch.view_as_real(torch.fft.rfft(x)), tol_scale=2.0))
defop(OpInfo("irfft",
             lambda rng: [Sample((rand(rng, *s, 2),), {"n": n}, f"{s} n={n}")
                          for s, n in [((5,), 8), ((3, 4), 7), ((1,), 1), ((2, 4), 6), ((2,), 2), ((2, 2), 3)]],
             lambda rng: [BadInput((np.ones((5, 2)),), {"n": 10}, ShapeError, "n = 10", "n vs bins"),
                          BadInput((np.ones((5, 3)),), {"n": 8}, ShapeError, "(5, 3)", "not packed"),
                          BadInput((np.ones((1, 2)),), {"n": 0}, ShapeError, "n", "n = 0")],
             torch_ref=_torch_irfft))


def _spectral_samples(rng):
    cases = [((8, 3), (3, 3, 3)), ((2, 7, 2), (4, 2, 2)), ((2, 6, 3), (4, 3, 2)), ((5, 1), (1, 1, 1)),
             ((1, 4, 2), (2, 2, 2))]
    return [Sample((rand(rng, *xs), rand(rng, *ws), rand(rng, *ws)), {}, f"x{xs} w{ws}") for xs, ws in cases]


def _spectral_bad(rng):
    w = np.ones((6, 2, 2))
    return [BadInput((np.ones((8, 2)), w, w), {}, ShapeError, "modes 6", "modes > grid//2+1"),
            BadInput((np.ones((8, 2)), np.ones((3, 2, 2)), np.ones((2, 2, 2))), {}, ShapeError, "w_im", "w_im"),
            BadInput((np.ones((8, 3)), np.ones((3, 2, 2)), np.ones((3, 2, 2))), {}, ShapeError, "channels", "width"),
            BadInput((np.ones(8), np.ones((3, 1, 1)), np.ones((3, 1, 1))), {}, ShapeError, "(8,)", "1-D x")]


def torch_spectral_conv1d(torch, x, w_re, w_im):
    """The FNO formulation: rfft over the grid, einsum over the kept modes, irfft."""
    grid, modes = x.shape[-2], w_re.shape[0]
    X = torch.fft.rfft(x, dim=-2)[..., :modes, :]
    Y = torch.einsum("...ki,kio->...ko", X, torch.complex(w_re, w_im))
    return torch.fft.irfft(Y, n=grid, dim=-2)


defop(OpInfo("spectral_conv1d", _spectral_samples, _spectral_bad, torch_ref=torch_spectral_conv1d,
             tol_scale=2.0))


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
