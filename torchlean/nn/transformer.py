"""Attention and transformer modules of ``tl.nn``: ``MultiheadAttention``,
``TransformerEncoderLayer``, ``TransformerEncoder``, ``TransformerDecoderLayer``,
``TransformerDecoder`` and ``Transformer``.

Constructor arguments, defaults (sequence-first inputs unless ``batch_first=True``),
parameter names, shapes and default initializations are PyTorch's, so a PyTorch
``state_dict`` loads with ``strict=True``; stacks hold deep copies of the given layer.

    >>> import torchlean as tl
    >>> layer = TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    >>> enc = TransformerEncoder(layer, num_layers=2)
    >>> enc(tl.zeros(3, 5, 8)).shape
    torchlean.Size([3, 5, 8])
"""

from __future__ import annotations

import copy
import warnings

import numpy as np

from ..errors import DomainError, ShapeError, TorchLeanError
from ..ops import full, triu, where
from ..tensor import Tensor, is_grad_enabled
from . import functional as F
from . import init
from .activations import GELU, ReLU
from .functional_attention import (
    _check_mha_inputs,
    _float_tensor,
    _mask_kind,
    _mha,
    _same_transpose,
    _same_unsqueeze,
)
from .module import Module, ModuleList
from .modules import Dropout, Linear, NonDynamicallyQuantizableLinear, _empty_param
from .norms import LayerNorm

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]


class MultiheadAttention(Module):
    """PyTorch's ``nn.MultiheadAttention``: ``out_proj(concat_h softmax(q_h k_h^T / sqrt(d) + mask) v_h)``.

    Parameters: ``in_proj_weight`` ``(3E, E)`` (or ``q_proj_weight`` ``(E, E)``,
    ``k_proj_weight`` ``(E, kdim)``, ``v_proj_weight`` ``(E, vdim)`` when kdim/vdim differ from
    ``embed_dim``), ``in_proj_bias`` ``(3E,)``, ``bias_k``/``bias_v`` ``(1, 1, E)`` with
    ``add_bias_kv``, and ``out_proj`` (a Linear). Inputs are ``(L, N, E)`` (``(N, L, E)`` with
    ``batch_first=True``, ``(L, E)`` unbatched).

    Masks use this module's convention (not SDPA's): a boolean ``attn_mask`` ``(L, S)`` or
    ``(N * num_heads, L, S)`` and a boolean ``key_padding_mask`` ``(N, S)`` mark with True
    what may NOT be attended; float masks are added to the logits. ``is_causal`` is a hint
    that ``attn_mask`` is the causal mask (an ``attn_mask`` is required). ``forward``
    returns ``(output, weights)``: with ``need_weights=True`` (the default) the attention
    weights, averaged over heads unless ``average_attn_weights=False``; otherwise None, and
    the attention runs fused when every mask is boolean. Attention dropout acts in
    training mode only.

        >>> import torchlean as tl
        >>> mha = MultiheadAttention(8, 2)
        >>> x = tl.zeros(5, 2, 8)
        >>> out, w = mha(x, x, x)
        >>> out.shape, w.shape
        (torchlean.Size([5, 2, 8]), torchlean.Size([2, 5, 5]))
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        cls = "MultiheadAttention"
        if embed_dim <= 0 or num_heads <= 0:
            raise ShapeError(f"{cls}: embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                             f"and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ShapeError(f"{cls}: embed_dim {embed_dim} must be a multiple of num_heads {num_heads}")
        self.embed_dim = int(embed_dim)
        self.kdim = int(kdim) if kdim is not None else self.embed_dim
        self.vdim = int(vdim) if vdim is not None else self.embed_dim
        self._qkv_same_embed_dim = self.kdim == self.embed_dim and self.vdim == self.embed_dim
        self.num_heads = int(num_heads)
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = self.embed_dim // self.num_heads
        E = self.embed_dim
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = _empty_param((E, E), device, dtype)
            self.k_proj_weight = _empty_param((E, self.kdim), device, dtype)
            self.v_proj_weight = _empty_param((E, self.vdim), device, dtype)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = _empty_param((3 * E, E), device, dtype)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = _empty_param((3 * E,), device, dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(E, E, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = _empty_param((1, 1, E), device, dtype)
            self.bias_v = _empty_param((1, 1, E), device, dtype)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's: projection weights xavier_uniform, biases 0, bias_k/bias_v xavier_normal."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """Attention of ``query`` over ``key``/``value``; returns ``(output, weights or None)``."""
        op = "MultiheadAttention"
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TorchLeanError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
        batched = _check_mha_inputs(op, query, key, value)
        for name, t, d in (("query", query, self.embed_dim), ("key", key, self.kdim), ("value", value, self.vdim)):
            if t.shape[-1] != d:
                raise ShapeError(f"{op}: {name} of shape {t.shape} must have last axis {d}")
        if not batched:
            query, key, value = _same_unsqueeze(query, key, value, 0)
        elif not self.batch_first:
            query, key, value = _same_transpose(query, key, value)
        N = query.shape[0]
        if key.shape[0] != N or value.shape[:2] != key.shape[:2]:
            raise ShapeError(f"{op}: batch and length of query {query.shape}, key {key.shape}, value "
                             f"{value.shape} do not fit")
        out, w = _mha(query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                      self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight,
                      self.out_proj.bias, self.training, key_padding_mask, need_weights, attn_mask,
                      not self._qkv_same_embed_dim, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight,
                      None, None, average_attn_weights, is_causal, batched, op)
        if not batched:
            return out[0], (None if w is None else w[0])
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, w


# ---- transformer ----------------------------------------------------------------------------

def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _get_activation_fn(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise DomainError(f"activation should be relu/gelu, not {activation}")


def _relu_or_gelu(activation):
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    if activation is F.gelu or isinstance(activation, GELU):
        return 2
    return 0


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    return triu(full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _seq_len(src, batch_first):
    return src.shape[0] if src.ndim == 2 else src.shape[1 if batch_first else 0]


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """PyTorch's rule: ``is_causal`` if given, else whether ``mask`` is the float causal mask."""
    if is_causal is True:
        return True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.shape[-2]
        if tuple(mask.shape) != (sz, sz) or _mask_kind(mask, "transformer", "mask") != "f":
            return False
        m = mask.numpy() if isinstance(mask, Tensor) else np.asarray(mask)
        return bool((m == np.triu(np.full((sz, sz), -np.inf), 1)).all())
    return False


def _canonical_pair(kpm, mask, kpm_name, mask_name, like, stacklevel=3):
    """PyTorch's mask canonicalization where boolean and float masks meet: warn on mixed types and
    turn the boolean one into a float mask (-inf where True); same-typed masks stay as given."""
    if kpm is None or mask is None:
        return kpm, mask
    kk, mk = _mask_kind(kpm, kpm_name, kpm_name), _mask_kind(mask, mask_name, mask_name)
    if kk == mk:
        return kpm, mask
    warnings.warn(f"Support for mismatched {kpm_name} and {mask_name} is deprecated. Use same type for both "
                  "instead.", UserWarning, stacklevel=stacklevel)

    def as_float(m):
        if _mask_kind(m, "", "") == "f":
            return m
        host = m.numpy() if isinstance(m, Tensor) else np.asarray(m)
        return _float_tensor(np.where(host, -np.inf, 0.0), like)

    return as_float(kpm), as_float(mask)


class TransformerEncoderLayer(Module):
    """PyTorch's ``nn.TransformerEncoderLayer``: self-attention then a feed-forward block, each with
    dropout, a residual connection and LayerNorm (post-norm; ``norm_first=True`` normalizes first).

    Submodules ``self_attn``, ``linear1``, ``dropout``, ``linear2``, ``norm1``, ``norm2``,
    ``dropout1``, ``dropout2``; ``activation`` is ``"relu"``, ``"gelu"`` or a callable.

        >>> import torchlean as tl
        >>> layer = TransformerEncoderLayer(8, 2, dim_feedforward=16)
        >>> layer(tl.zeros(5, 3, 8)).shape
        torchlean.Size([5, 3, 8])
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        self.activation_relu_or_gelu = _relu_or_gelu(activation)
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """``src`` ``(S, N, E)`` (``(N, S, E)`` with batch_first, ``(S, E)`` unbatched)."""
        src_key_padding_mask, src_mask = _canonical_pair(src_key_padding_mask, src_mask, "src_key_padding_mask",
                                                         "src_mask", src)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal=is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal=is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """PyTorch's ``nn.TransformerDecoderLayer``: self-attention, attention over ``memory``, then a
    feed-forward block, each with dropout, residual and LayerNorm (``norm_first`` as the encoder's).

    Submodules ``self_attn``, ``multihead_attn``, ``linear1``, ``dropout``, ``linear2``,
    ``norm1``-``norm3``, ``dropout1``-``dropout3``.

        >>> import torchlean as tl
        >>> layer = TransformerDecoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        >>> layer(tl.zeros(3, 4, 8), tl.zeros(3, 6, 8)).shape
        torchlean.Size([3, 4, 8])
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                            **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first,
                                                 bias=bias, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        """``tgt`` ``(T, N, E)``, ``memory`` ``(S, N, E)`` (batch first with batch_first)."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _left_aligned(pad):
    """Whether every row of a (N, S) padding mask is valid positions followed by padded ones."""
    return bool((np.diff(pad.astype(np.int8), axis=-1) >= 0).all())


class TransformerEncoder(Module):
    """PyTorch's ``nn.TransformerEncoder``: ``num_layers`` deep copies of ``encoder_layer`` (in
    ``layers``), then the optional final ``norm``.

    ``enable_nested_tensor`` is PyTorch's switch for its padded fast path: where PyTorch
    takes it (eval mode, no gradient needed, batched input, a left-aligned
    ``src_key_padding_mask`` and no ``mask``; the layer batch-first, post-norm, with biases,
    relu/gelu, an even head count), the outputs at padded positions are zeros before the final
    norm. The same is done here, so both return the same values; PyTorch's warning when the
    fast path is unusable is given too.

        >>> import torchlean as tl
        >>> layer = TransformerEncoderLayer(8, 2, dim_feedforward=16)
        >>> TransformerEncoder(layer, 2, enable_nested_tensor=False)(tl.zeros(5, 3, 8)).shape
        torchlean.Size([5, 3, 8])
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        enc_layer = "encoder_layer"
        why = ""
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            why = f"{enc_layer} was not TransformerEncoderLayer"
        elif encoder_layer.norm_first:
            why = f"{enc_layer}.norm_first was True"
        elif not encoder_layer.self_attn.batch_first:
            why = (f"{enc_layer}.self_attn.batch_first was not True"
                   "(use batch_first for better inference performance)")
        elif not encoder_layer.self_attn._qkv_same_embed_dim:
            why = f"{enc_layer}.self_attn._qkv_same_embed_dim was not True"
        elif encoder_layer.self_attn.in_proj_bias is None:
            why = f"{enc_layer}.self_attn was passed bias=False"
        elif not encoder_layer.activation_relu_or_gelu:
            why = f"{enc_layer}.activation_relu_or_gelu was not True"
        elif encoder_layer.norm1.eps != encoder_layer.norm2.eps:
            why = f"{enc_layer}.norm1.eps was not equal to {enc_layer}.norm2.eps"
        elif encoder_layer.self_attn.num_heads % 2 == 1:
            why = f"{enc_layer}.self_attn.num_heads is odd"
        if enable_nested_tensor and why:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why}",
                          UserWarning, stacklevel=2)
            self.use_nested_tensor = False

    def _zero_padded(self, src, mask, kpm):
        """The padding mask (N, S) when PyTorch's nested fast path would apply, else None."""
        first = self.layers[0]
        if (not getattr(self, "use_nested_tensor", False) or first.training or src.ndim != 3 or kpm is None
                or mask is not None):
            return None
        if is_grad_enabled():
            sa = first.self_attn
            args = (src, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
                    first.norm1.weight, first.norm1.bias, first.norm2.weight, first.norm2.bias,
                    first.linear1.weight, first.linear1.bias, first.linear2.weight, first.linear2.bias)
            if any(isinstance(t, Tensor) and t.requires_grad for t in args):
                return None
        host = kpm.numpy() if isinstance(kpm, Tensor) else np.asarray(kpm)
        pad = host if host.dtype == bool else host != 0
        if self.mask_check and not _left_aligned(pad):
            return None
        return pad

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """``src`` ``(S, N, E)`` (``(N, S, E)`` with batch_first); ``mask`` ``(S, S)`` or ``(N*nhead, S, S)``;
        ``is_causal=None`` detects the causal float mask."""
        src_key_padding_mask, mask = _canonical_pair(src_key_padding_mask, mask, "src_key_padding_mask", "mask",
                                                     src)
        pad = self._zero_padded(src, mask, src_key_padding_mask)
        first = self.layers[0]
        is_causal = _detect_is_causal_mask(mask, is_causal, _seq_len(src, first.self_attn.batch_first))
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        if pad is not None:
            output = where(Tensor(np.ascontiguousarray(pad[..., None])).to(device=output.device), 0.0, output)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerDecoder(Module):
    """PyTorch's ``nn.TransformerDecoder``: ``num_layers`` deep copies of ``decoder_layer`` (in
    ``layers``), then the optional final ``norm``; ``tgt_is_causal=None`` detects the causal
    float ``tgt_mask``.

        >>> import torchlean as tl
        >>> layer = TransformerDecoderLayer(8, 2, dim_feedforward=16)
        >>> TransformerDecoder(layer, 2)(tl.zeros(4, 3, 8), tl.zeros(6, 3, 8)).shape
        torchlean.Size([4, 3, 8])
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        seq_len = _seq_len(tgt, self.layers[0].self_attn.batch_first)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                         memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """PyTorch's ``nn.Transformer``: an encoder and a decoder stack, each with a final LayerNorm;
    every parameter with more than one axis is re-initialized ``xavier_uniform_``.

        >>> import torchlean as tl
        >>> model = Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
        ...                           dim_feedforward=16, batch_first=True)
        >>> mask = Transformer.generate_square_subsequent_mask(4)
        >>> model(tl.zeros(2, 6, 8), tl.zeros(2, 4, 8), tgt_mask=mask).shape
        torchlean.Size([2, 4, 8])
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        """Encode ``src``, decode ``tgt`` against it; the masks go to the matching stack."""
        batched = src.ndim == 3
        b = 0 if self.batch_first else 1
        if batched and src.shape[b] != tgt.shape[b]:
            raise ShapeError(f"Transformer: the batch number of src {src.shape} and tgt {tgt.shape} must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(f"Transformer: the feature number of src {src.shape} and tgt {tgt.shape} must be "
                             f"equal to d_model {self.d_model}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The float causal mask ``(sz, sz)``: -inf above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
