"""Test records of the attention family."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand


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
        Sample(qkv(2, 5, 5, 3), {"hard": True, "causal": True}, "causal"),
        Sample(qkv(2, 6, 4, 3), {"hard": True, "causal": True}, "causal, more queries than keys"),
        Sample(qkv(1, 3, 5, 4), {"mask": random_mask(rng, 1, 3, 5), "hard": True, "causal": True},
               "causal and a mask"),
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
            BadInput((q, q, q), {"scale": float("nan")}, DomainError, "scale", "nan scale"),
            BadInput((q, q, q), {"causal": True}, DomainError, "hard", "causal without hard masking")]


def torch_attention(torch, q, k, v, *, scale=None, mask=None, hard=False, causal=False):
    """Attention in torch: SDPA where it means the same; explicit otherwise."""
    F = torch.nn.functional
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=causal)
    if causal:
        mask = (np.asarray(mask) != 0) & np.tril(np.ones(mask.shape[-2:], dtype=bool))
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
