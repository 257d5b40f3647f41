"""Attention functionals of ``tl.nn.functional``: ``scaled_dot_product_attention`` and
``multi_head_attention_forward``, with PyTorch's signatures, masks and defaults.

Without dropout, boolean and causal masks run the fused ``flash_attention`` op with
exact masking; float masks and attention dropout take the unfused composition
(matmul, mask, softmax, dropout, matmul), whose gradients come from its parts.

    >>> import torchlean as tl
    >>> q = tl.ones(2, 4, 3, 8)
    >>> scaled_dot_product_attention(q, q, q, is_causal=True).shape
    torchlean.Size([2, 4, 3, 8])
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..autograd import record
from ..errors import DomainError, DTypeError, ShapeError, TorchLeanError
from ..ops import cat, where, zeros
from ..tensor import Tensor, next_rng_key
from . import functional_layers as FL
from ..amp import autocast_namespace

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")


def _check_p(op, p):
    if not isinstance(p, numbers.Real) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise DomainError(f"{op}: dropout_p must lie in [0, 1], got {p!r}")
    return float(p)


def _dropout(x, p):
    """Attention dropout: zero each weight with probability ``p``, scale the rest by 1/(1-p)."""
    if p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    seed, counter = next_rng_key()
    return record("dropout", (x,), {"p": p, "seed": int(seed), "counter": int(counter)})


def _mask_kind(m, op, name):
    """'b' for a boolean mask, 'f' for a float one; anything else is refused."""
    kind = m.dtype.kind if isinstance(m, (Tensor, np.ndarray)) else np.asarray(m).dtype.kind
    if kind not in "bf":
        raise DTypeError(f"{op}: {name} must be bool or float, got dtype {getattr(m, 'dtype', type(m))}")
    return kind


def _float_tensor(m, like):
    """A float mask as a Tensor of ``like``'s dtype and device."""
    if isinstance(m, Tensor):
        return m if (m.dtype == like.dtype and m.device == like.device) else m.to(dtype=like.dtype,
                                                                                  device=like.device)
    return Tensor(np.asarray(m, dtype=like.dtype)).to(device=like.device)


def _safe_softmax(logits):
    """Softmax over the last axis; a row whose logits are all -inf gives zeros (PyTorch's SDPA)."""
    full = (logits == _NEG_INF).all(dim=-1, keepdim=True)
    if not bool(full.any()):
        return logits.softmax(-1)
    return where(full, 0.0, where(full, 0.0, logits).softmax(-1))


def _repeat_kv_heads(op, query, key, value):
    if query.ndim < 3 or key.ndim < 3 or value.ndim < 3:
        raise ShapeError(f"{op}: enable_gqa needs a head axis (-3) on query {query.shape}, key {key.shape} "
                         f"and value {value.shape}")
    hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
    if hq % hk or hq % hv:
        raise ShapeError(f"{op}: with enable_gqa the number of query heads {hq} must be a multiple of the "
                         f"key heads {hk} and value heads {hv}")
    if hk != hq:
        key = key.repeat_interleave(hq // hk, dim=-3)
    if hv != hq:
        value = value.repeat_interleave(hq // hv, dim=-3)
    return key, value


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """PyTorch's ``scaled_dot_product_attention``: ``softmax(q k^T * scale + mask) v``.

    ``query`` ``(..., L, E)``, ``key`` ``(..., S, E)``, ``value`` ``(..., S, Ev)``; leading
    axes broadcast. ``scale`` defaults to ``1/sqrt(E)``. A boolean ``attn_mask``
    (broadcasting to ``(..., L, S)``) marks with True the keys a query may attend to; a
    float one is added to the logits; ``is_causal=True`` is ``tril(ones(L, S))`` (top-left
    aligned) and excludes ``attn_mask``. A query row with no allowed key outputs zeros.
    ``dropout_p > 0`` drops attention weights (scaling the rest by ``1/(1-p)``) whatever
    the module mode, as in PyTorch. ``enable_gqa=True`` repeats the key/value heads
    (axis -3) to the query's head count.

    Without dropout, masks that are boolean or causal run the fused ``flash_attention``
    op (``is_causal`` is passed through, not expanded here); float masks and dropout
    run the unfused composition.

        >>> import torchlean as tl
        >>> q, k = tl.ones(1, 8, 3, 4), tl.ones(1, 2, 5, 4)
        >>> scaled_dot_product_attention(q, k, k, enable_gqa=True).shape
        torchlean.Size([1, 8, 3, 4])
    """
    op = "scaled_dot_product_attention"
    p = _check_p(op, dropout_p)
    for name, t in (("query", query), ("key", key), ("value", value)):
        FL._tensor(t, op, name)
    if enable_gqa:
        key, value = _repeat_kv_heads(op, query, key, value)
    if is_causal and attn_mask is not None:
        raise DomainError(f"{op}: pass either attn_mask or is_causal=True, not both")
    kind = None if attn_mask is None else _mask_kind(attn_mask, op, "attn_mask")
    if p == 0.0 and kind != "f":
        return FL._sdpa(query, key, value, attn_mask=attn_mask, is_causal=bool(is_causal), scale=scale)[0]
    _, L, S, E, _ = FL._attention_shapes(op, query, key, value)
    if scale is not None and (not isinstance(scale, numbers.Real) or isinstance(scale, bool)
                              or not math.isfinite(scale)):
        raise DomainError(f"{op}: scale must be a finite number or None, got {scale!r}")
    sc = 1.0 / math.sqrt(E) if scale is None else float(scale)
    logits = (query @ key.transpose(-2, -1)) * sc
    allowed = np.tril(np.ones((L, S), dtype=bool)) if is_causal else (
        FL._host_mask(attn_mask) if kind == "b" else None)
    if allowed is not None:
        w = record("hard_masked_softmax", (logits,), {"mask": FL._bcast_mask(op, allowed, logits.shape)})
    else:
        if kind == "f":
            try:
                logits = logits + _float_tensor(attn_mask, logits)
            except TorchLeanError:
                raise ShapeError(f"{op}: attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to "
                                 f"the attention shape {logits.shape} (..., L, S)") from None
        w = _safe_softmax(logits)
    return _dropout(w, p) @ value


# ---- multi-head attention -------------------------------------------------------------------

def _merge_masks(op, attn_mask, key_padding_mask, N, H, L, S, batched, like):
    """torch's mask preparation, as (blocked, additive): a host bool array (True = may NOT
    attend) or a float Tensor/array added to the logits, broadcasting to (N, H, L, S)."""
    am_kind = None if attn_mask is None else _mask_kind(attn_mask, op, "attn_mask")
    kp_kind = None if key_padding_mask is None else _mask_kind(key_padding_mask, op, "key_padding_mask")
    if am_kind is not None and kp_kind is not None and am_kind != kp_kind:
        warnings.warn("Support for mismatched key_padding_mask and attn_mask is deprecated. Use same type "
                      "for both instead.", UserWarning, stacklevel=4)
    blocked, additive = None, None
    if attn_mask is not None:
        shape = tuple(attn_mask.shape)
        if shape == (L, S):
            shape4 = (1, 1, L, S)
        elif shape == (N * H, L, S):
            shape4 = (N, H, L, S)
        else:
            want = f"({L}, {S}) or ({N * H}, {L}, {S})" if batched else f"({L}, {S}) or ({H}, {L}, {S})"
            raise ShapeError(f"{op}: attn_mask has shape {shape}, expected {want}")
        if am_kind == "b":
            blocked = FL._host_mask(attn_mask).reshape(shape4)
        else:
            additive = _float_tensor(attn_mask, like).reshape(shape4)
    if key_padding_mask is not None:
        shape = tuple(key_padding_mask.shape)
        if shape != ((N, S) if batched else (S,)):
            want = f"({N}, {S})" if batched else f"({S},)"
            raise ShapeError(f"{op}: key_padding_mask has shape {shape}, expected {want}")
        if kp_kind == "b":
            kp = FL._host_mask(key_padding_mask).reshape(N, 1, 1, S)
            blocked = kp if blocked is None else (blocked | kp)
        else:
            kp = _float_tensor(key_padding_mask, like).reshape(N, 1, 1, S)
            additive = kp if additive is None else additive + kp
    return blocked, additive


def _pad_cols(m, n, like):
    """Append ``n`` all-allowed key columns to a mask (for bias_k/bias_v and add_zero_attn)."""
    if m is None or n == 0:
        return m
    if isinstance(m, np.ndarray) and m.dtype == bool:
        return np.concatenate([m, np.zeros(m.shape[:-1] + (n,), dtype=bool)], axis=-1)
    m = _float_tensor(m, like)
    return cat([m, zeros(*m.shape[:-1], n, dtype=m.dtype, device=m.device)], dim=-1)


def _linear(x, w, b):
    """``x @ w.T + b`` (F.linear's ops; that module star-imports this one)."""
    return record("linear_nobias", (w, x), {}) if b is None else record("linear", (w, b, x), {})


def _project(query, key, value, E, H, in_proj_weight, in_proj_bias, separate, q_w, k_w, v_w):
    """q, k, v of shapes (N, H, L or S, head_dim) from batch-first inputs."""
    N, L, _ = query.shape
    S = key.shape[1]
    hd = E // H
    b = in_proj_bias
    bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
    if separate:
        q, k, v = _linear(query, q_w, bq), _linear(key, k_w, bk), _linear(value, v_w, bv)
    elif query is key and key is value:
        qkv = _linear(query, in_proj_weight, b).reshape(N, L, 3, H, hd).permute(2, 0, 3, 1, 4)
        return qkv[0], qkv[1], qkv[2]
    else:
        w = in_proj_weight
        q = _linear(query, w[:E], bq)
        if key is value:
            kv = _linear(key, w[E:], None if b is None else b[E:]).reshape(N, S, 2, H, hd).permute(2, 0, 3, 1, 4)
            return q.reshape(N, L, H, hd).transpose(1, 2), kv[0], kv[1]
        k, v = _linear(key, w[E:2 * E], bk), _linear(value, w[2 * E:], bv)
    return tuple(t.reshape(N, t.shape[1], H, hd).transpose(1, 2) for t in (q, k, v))


def _mha(query, key, value, E, H, in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
         out_proj_weight, out_proj_bias, training, key_padding_mask, need_weights, attn_mask, separate,
         q_proj_weight, k_proj_weight, v_proj_weight, static_k, static_v, average_attn_weights, is_causal,
         batched, op="multi_head_attention_forward"):
    """Multi-head attention on batch-first ``(N, L, E)`` inputs; returns (output (N, L, E), weights)."""
    N, L, _ = query.shape
    S = key.shape[1]
    hd = E // H
    if is_causal and attn_mask is None:
        raise DomainError(f"{op}: need attn_mask if specifying the is_causal hint; "
                          "Transformer.generate_square_subsequent_mask creates one")
    blocked, additive = _merge_masks(op, attn_mask, key_padding_mask, N, H, L, S, batched, query)
    causal = bool(is_causal) and key_padding_mask is None and not need_weights
    if causal:
        blocked = additive = None
    q, k, v = _project(query, key, value, E, H, in_proj_weight, in_proj_bias, separate,
                       q_proj_weight, k_proj_weight, v_proj_weight)
    extra = 0
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise DomainError(f"{op}: bias cannot be added to static key/value")
        k = cat([k, bias_k.reshape(1, H, 1, hd).expand(N, H, 1, hd)], dim=2)
        v = cat([v, bias_v.reshape(1, H, 1, hd).expand(N, H, 1, hd)], dim=2)
        extra += 1
    elif (bias_k is None) != (bias_v is None):
        raise DomainError(f"{op}: bias_k and bias_v must both be given or both be None")
    for name, st in (("static_k", static_k), ("static_v", static_v)):
        if st is not None:
            if st.ndim != 3 or st.shape[0] != N * H or st.shape[2] != hd:
                raise ShapeError(f"{op}: {name} must have shape ({N * H}, S, {hd}), got {st.shape}")
            st = st.reshape(N, H, st.shape[1], hd)
            k, v = (st, v) if name == "static_k" else (k, st)
    if add_zero_attn:
        k = cat([k, zeros(N, H, 1, hd, dtype=k.dtype, device=k.device)], dim=2)
        v = cat([v, zeros(N, H, 1, hd, dtype=v.dtype, device=v.device)], dim=2)
        extra += 1
    blocked, additive = _pad_cols(blocked, extra, q), _pad_cols(additive, extra, q)
    p = float(dropout_p) if training else 0.0
    if need_weights:
        logits = (q * math.sqrt(1.0 / hd)) @ k.transpose(-2, -1)
        if additive is not None:
            logits = logits + _float_tensor(additive, logits)
        if blocked is not None:
            logits = where(Tensor(np.ascontiguousarray(blocked)).to(device=logits.device), _NEG_INF, logits)
        w = _dropout(logits.softmax(-1), p)
        o = w @ v
        if average_attn_weights:
            w = w.mean(dim=1)
    else:
        if additive is not None:
            if blocked is not None:
                additive = _float_tensor(additive, q) + _float_tensor(np.where(blocked, _NEG_INF, 0.0), q)
            mask = additive
        else:
            mask = None if blocked is None else ~blocked
        o, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal), None
    out = _linear(o.transpose(1, 2).reshape(N, L, E), out_proj_weight, out_proj_bias)
    return out, w


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight,
                                 out_proj_bias, training=True, key_padding_mask=None, need_weights=True,
                                 attn_mask=None, use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None,
                                 average_attn_weights=True, is_causal=False):
    """PyTorch's ``multi_head_attention_forward`` on sequence-first inputs.

    ``query`` ``(L, N, E)``, ``key`` ``(S, N, Ek)``, ``value`` ``(S, N, Ev)`` (or unbatched
    ``(L, E)``...). Masks follow ``nn.MultiheadAttention``: a boolean ``attn_mask``
    ``(L, S)`` or ``(N * num_heads, L, S)`` and a boolean ``key_padding_mask`` ``(N, S)``
    mark with True what may NOT be attended; float masks are added to the logits.
    Returns ``(output (L, N, E), weights)``, weights ``(N, L, S)`` averaged over heads,
    ``(N, num_heads, L, S)`` otherwise, or None when ``need_weights`` is False.
    """
    op = "multi_head_attention_forward"
    for name, t in (("query", query), ("key", key), ("value", value)):
        FL._tensor(t, op, name)
    batched = _check_mha_inputs(op, query, key, value)
    E, H = int(embed_dim_to_check), int(num_heads)
    if query.shape[-1] != E:
        raise ShapeError(f"{op}: query has embedding dim {query.shape[-1]}, expected {E}")
    if H <= 0 or E % H:
        raise ShapeError(f"{op}: embed_dim {E} is not divisible by num_heads {H}")
    if use_separate_proj_weight:
        if key.shape[:-1] != value.shape[:-1]:
            raise ShapeError(f"{op}: key shape {key.shape} does not match value shape {value.shape}")
    elif key.shape != value.shape:
        raise ShapeError(f"{op}: key shape {key.shape} does not match value shape {value.shape}")
    if not batched:
        query, key, value = _same_unsqueeze(query, key, value, 0)
    else:
        query, key, value = _same_transpose(query, key, value)
    out, w = _mha(query, key, value, E, H, in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                  dropout_p, out_proj_weight, out_proj_bias, training, key_padding_mask, need_weights,
                  attn_mask, use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight,
                  static_k, static_v, average_attn_weights, is_causal, batched, op)
    if not batched:
        return out[0], (None if w is None else w[0])
    return out.transpose(0, 1), w


def _check_mha_inputs(op, query, key, value):
    """True for batched (3-d) inputs, False for unbatched (2-d); anything else is refused."""
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(f"{op}: query, key and value must all be 3-d (batched) or 2-d (unbatched), got "
                         f"{query.shape}, {key.shape}, {value.shape}")
    return query.ndim == 3


def _same_transpose(query, key, value):
    """Swap axes 0 and 1 of q, k, v, keeping which of them are the same tensor."""
    q = query.transpose(0, 1)
    k = q if key is query else key.transpose(0, 1)
    v = k if value is key else q if value is query else value.transpose(0, 1)
    return q, k, v


def _same_unsqueeze(query, key, value, dim):
    q = query.unsqueeze(dim)
    k = q if key is query else key.unsqueeze(dim)
    v = k if value is key else q if value is query else value.unsqueeze(dim)
    return q, k, v


# The ops of autocast's lists cast their inputs while an autocast region is on (torchlean.amp).
autocast_namespace(globals())
