"""Attention and transformers against PyTorch: ``scaled_dot_product_attention``,
``multi_head_attention_forward``, ``MultiheadAttention`` and the ``Transformer*`` modules,
with the same weights (torch state_dicts loaded with strict=True), in float64: outputs,
attention weights, gradients of inputs and parameters, masks, warnings and errors.
"""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import torchlean as tl
from torchlean.errors import DomainError, ShapeError
from torchlean.nn import functional_attention as FA
from torchlean.nn import transformer as TR

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = 1e-9


def t64(a, requires_grad=True):
    return tl.tensor(np.asarray(a, dtype=np.float64), dtype=tl.float64, requires_grad=requires_grad)


def th(a, requires_grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def host(x):
    if isinstance(x, np.ndarray):
        return x
    return x.numpy() if isinstance(x, tl.Tensor) else x.detach().numpy()


def close(a, b, tol=TOL, what=""):
    np.testing.assert_allclose(host(a), host(b), rtol=tol, atol=tol, err_msg=what)


def both(f_tl, f_th, arrays, tol=TOL, seed=0):
    """Run both on the same float64 arrays; compare outputs and the gradients of every input."""
    xs_tl, xs_th = [t64(a) for a in arrays], [th(a) for a in arrays]
    y_tl, y_th = f_tl(*xs_tl), f_th(*xs_th)
    assert tuple(y_tl.shape) == tuple(y_th.shape)
    close(y_tl, y_th, tol, "output")
    g = np.random.default_rng(seed).standard_normal(tuple(y_th.shape))
    y_tl.backward(t64(g, False))
    y_th.backward(torch.tensor(g))
    for i, (a, b) in enumerate(zip(xs_tl, xs_th)):
        if b.grad is None:
            assert a.grad is None or not np.any(host(a.grad)), f"gradient of input {i}"
        else:
            close(a.grad, b.grad, tol, f"gradient of input {i}")
    return y_tl


def pair(tl_mod, th_mod, randomize=True, seed=0):
    """float64 copies with torch's weights (biases made non-zero) loaded strict=True."""
    th_mod.double()
    if randomize:
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in th_mod.parameters():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    tl_mod.to(dtype=tl.float64)
    assert list(tl_mod.state_dict()) == list(th_mod.state_dict())
    r = tl_mod.load_state_dict({k: v.detach().numpy() for k, v in th_mod.state_dict().items()}, strict=True)
    assert not r.missing_keys and not r.unexpected_keys
    return tl_mod, th_mod


def params_close(tl_mod, th_mod, tol=TOL, what=""):
    th_params = dict(th_mod.named_parameters())
    assert sorted(n for n, _ in tl_mod.named_parameters()) == sorted(th_params)
    for n, p in tl_mod.named_parameters():
        if th_params[n].grad is None:
            assert p.grad is None or not np.any(host(p.grad)), n
        else:
            close(p.grad, th_params[n].grad, tol, f"gradient of parameter {n} {what}")


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---- scaled_dot_product_attention -----------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(lead=st.sampled_from([(), (2,), (2, 3), (1, 3)]), L=st.integers(1, 5), S=st.integers(1, 6),
       E=st.integers(1, 6), Ev=st.integers(1, 4), mask=st.sampled_from(["none", "bool", "bool_b", "float",
                                                                         "causal"]),
       scale=st.sampled_from([None, 0.37]), dropout=st.sampled_from([0.0, 1e-13]), seed=st.integers(0, 99))
def test_sdpa_matches_torch(lead, L, S, E, Ev, mask, scale, dropout, seed):
    # dropout_p = 1e-13 takes the unfused (dropout) path while dropping nothing in practice.
    r = np.random.default_rng(seed)
    q, k, v = r.standard_normal(lead + (L, E)), r.standard_normal(lead + (S, E)), r.standard_normal(lead + (S, Ev))
    kw, kw_th = {}, {}
    if mask == "bool":
        m = r.random((L, S)) < 0.6
        kw, kw_th = {"attn_mask": tl.tensor(m)}, {"attn_mask": torch.tensor(m)}
    elif mask == "bool_b":
        m = r.random(lead[-1:] + (1, S)) < 0.6
        kw, kw_th = {"attn_mask": m}, {"attn_mask": torch.tensor(m)}
    elif mask == "float":
        m = r.standard_normal((L, S))
        m[r.random((L, S)) < 0.3] = -np.inf
        kw, kw_th = {"attn_mask": t64(m, False)}, {"attn_mask": th(m, False)}
    elif mask == "causal":
        kw = kw_th = {"is_causal": True}
    both(lambda q, k, v: FA.scaled_dot_product_attention(q, k, v, dropout_p=dropout, scale=scale, **kw),
         lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, dropout_p=dropout, scale=scale, **kw_th),
         [q, k, v], seed=seed)


def test_sdpa_fully_masked_rows_give_zeros_as_torch():
    q, k, v = rand(2, 3, 4), rand(2, 5, 4, seed=1), rand(2, 5, 3, seed=2)
    bm = np.ones((3, 5), dtype=bool)
    bm[1] = False
    fm = np.zeros((3, 5))
    fm[2] = -np.inf
    for dropout in (0.0, 1e-13):
        for ours, theirs in ((bm, torch.tensor(bm)), (t64(fm, False), th(fm, False))):
            y = both(lambda q, k, v: FA.scaled_dot_product_attention(q, k, v, ours, dropout_p=dropout),
                     lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, theirs, dropout_p=dropout),
                     [q, k, v])
            assert np.isfinite(host(y)).all()
    assert not host(FA.scaled_dot_product_attention(t64(q), t64(k), t64(v), bm))[:, 1].any()


@pytest.mark.parametrize("hk", [1, 2, 4])
def test_sdpa_enable_gqa_matches_torch(hk):
    q, k, v = rand(2, 4, 3, 6), rand(2, hk, 5, 6, seed=1), rand(2, hk, 5, 2, seed=2)
    for causal in (False, True):
        both(lambda q, k, v: FA.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True),
             lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True),
             [q, k, v])


def test_sdpa_dropout_statistics():
    tl.manual_seed(0)
    S, p = 400, 0.25
    q = tl.zeros(2, 64, 1, dtype=tl.float64)
    k, v = tl.zeros(2, S, 1, dtype=tl.float64), tl.ones(2, S, 1, dtype=tl.float64)
    # uniform weights 1/S; each kept one scaled by 1/(1-p): the row sum is 1 in expectation
    y = host(FA.scaled_dot_product_attention(q, k, v, dropout_p=p))
    assert y.shape == (2, 64, 1)
    assert abs(y.mean() - 1.0) < 0.02
    sd = math.sqrt(p / (1 - p) / S)
    assert 0.6 * sd < y.std() < 1.4 * sd
    kept = y * S * (1 - p)
    np.testing.assert_allclose(kept, np.round(kept), atol=1e-9)
    assert not host(FA.scaled_dot_product_attention(q, k, v, dropout_p=1.0)).any()
    assert not TF.scaled_dot_product_attention(torch.zeros(1, 2, 1), torch.zeros(1, 3, 1), torch.ones(1, 3, 1),
                                               dropout_p=1.0).any()


def test_sdpa_errors():
    q = tl.zeros(1, 4, 3, 8)
    with pytest.raises(ShapeError, match="multiple"):
        FA.scaled_dot_product_attention(q, tl.zeros(1, 3, 5, 8), tl.zeros(1, 3, 5, 8), enable_gqa=True)
    with pytest.raises(DomainError, match="is_causal"):
        FA.scaled_dot_product_attention(q, q, q, attn_mask=np.ones((3, 3), bool), is_causal=True)
    with pytest.raises(DomainError, match="dropout_p"):
        FA.scaled_dot_product_attention(q, q, q, dropout_p=1.5)
    with pytest.raises(ShapeError, match="attn_mask"):
        FA.scaled_dot_product_attention(q, q, q, attn_mask=tl.zeros(2, 3), dropout_p=0.1)


# ---- MultiheadAttention ---------------------------------------------------------------------

def _mha(E=8, H=2, seed=0, **kw):
    torch.manual_seed(seed)
    return pair(TR.MultiheadAttention(E, H, **kw), torch.nn.MultiheadAttention(E, H, **kw), seed=seed)


def _masks(kind, N, H, L, S, r, batched=True):
    """(ours, theirs) keyword masks; boolean masks leave key 0 free in every row."""
    ours = {}
    if "kpm" in kind:
        shape = (N, S) if batched else (S,)
        m = r.random(shape) < 0.4
        m[..., 0] = False
        ours["key_padding_mask"] = m if "kpm_b" in kind else np.where(m, -np.inf, r.standard_normal(shape))
    if "am" in kind:
        shape = (L, S) if "2" in kind else ((N * H, L, S) if batched else (H, L, S))
        m = r.random(shape) < 0.4
        m[..., 0] = False
        ours["attn_mask"] = m if "am_b" in kind else r.standard_normal(shape)
    return ours, {n: torch.tensor(a) for n, a in ours.items()}


MHA_CASES = [
    dict(),
    dict(bias=False),
    dict(add_bias_kv=True),
    dict(add_zero_attn=True),
    dict(add_bias_kv=True, add_zero_attn=True, bias=False),
    dict(kdim=5, vdim=3),
    dict(kdim=5, vdim=8, add_bias_kv=True),
]
MASKS = ["none", "kpm_b", "kpm_f", "am_b2", "am_f2", "am_b3", "am_f3", "am_b2+kpm_b", "am_f3+kpm_f"]


WEIGHTS = [(False, True), (True, True), (True, False)]


@pytest.mark.parametrize("c", range(len(MHA_CASES)))
@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_matches_torch(c, batch_first):
    # every configuration meets three of the masks and, across the cases, every mask meets every output
    cfg = MHA_CASES[c]
    N, H, L, S, E = 2, 2, 4, 5, 8
    r = np.random.default_rng(7 + c)
    for j in range(3):
        i = (3 * c + j + 4 * batch_first) % len(MASKS)
        mask = MASKS[i]
        need_weights, average = WEIGHTS[(c + j + batch_first) % 3]
        tl_m, th_m = _mha(E, H, seed=i, batch_first=batch_first, **cfg)
        q = r.standard_normal((N, L, E) if batch_first else (L, N, E))
        kshape = (N, S) if batch_first else (S, N)
        k = r.standard_normal(kshape + (tl_m.kdim,))
        v = r.standard_normal(kshape + (tl_m.vdim,))
        ours, theirs = _masks(mask, N, H, L, S, r)
        for out in ((0, 1) if need_weights else (0,)):
            tl_m.zero_grad()
            th_m.zero_grad()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                both(lambda q, k, v: tl_m(q, k, v, need_weights=need_weights, average_attn_weights=average,
                                          **ours)[out],
                     lambda q, k, v: th_m(q, k, v, need_weights=need_weights, average_attn_weights=average,
                                          **theirs)[out], [q, k, v], seed=i)
            params_close(tl_m, th_m, what=f"{cfg} {mask} output {out}")


@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_self_attention_returns_weights_and_unbatched(batch_first):
    tl_m, th_m = _mha(8, 4, batch_first=batch_first, add_bias_kv=True)
    x = rand(3, 2, 8)
    y, w = tl_m(t64(x), t64(x), t64(x))
    y_th, w_th = th_m(th(x), th(x), th(x))
    close(y, y_th)
    close(w, w_th)
    assert w.shape == ((3, 2, 3) if batch_first else (2, 3, 4))  # bias_k adds a key
    r = np.random.default_rng(3)
    for mask in ("none", "kpm_b", "am_b3", "am_f2+kpm_f"):
        ours, theirs = _masks(mask, 1, 4, 5, 6, r, batched=False)
        q, kv = rand(5, 8), rand(6, 8, seed=1)
        for need_weights, average in ((False, True), (True, False)):
            for out in ((0, 1) if need_weights else (0,)):
                both(lambda q, kv: tl_m(q, kv, kv, need_weights=need_weights, average_attn_weights=average,
                                        **ours)[out],
                     lambda q, kv: th_m(q, kv, kv, need_weights=need_weights, average_attn_weights=average,
                                        **theirs)[out], [q, kv])


def test_mha_is_causal_and_mask_warning_match_torch():
    tl_m, th_m = _mha(8, 2, batch_first=True)
    x = rand(2, 5, 8)
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)
    for need_weights in (False, True):
        both(lambda x: tl_m(x, x, x, attn_mask=causal, is_causal=True, need_weights=need_weights)[0],
             lambda x: th_m(x, x, x, attn_mask=torch.tensor(causal), is_causal=True,
                            need_weights=need_weights)[0], [x])
    with pytest.raises(DomainError, match="is_causal"):
        tl_m(t64(x), t64(x), t64(x), is_causal=True)
    kpm = np.zeros((2, 5), dtype=bool)
    kpm[0, 3:] = True
    fm = rand(5, 5)
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):
        y = tl_m(t64(x), t64(x), t64(x), key_padding_mask=kpm, attn_mask=fm, need_weights=False)[0]
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):
        y_th = th_m(th(x), th(x), th(x), key_padding_mask=torch.tensor(kpm), attn_mask=torch.tensor(fm),
                    need_weights=False)[0]
    close(y, y_th)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_mha_fully_masked_rows_match_torch():
    tl_m, th_m = _mha(8, 2, batch_first=True)
    x = rand(1, 3, 8)
    kpm = np.ones((1, 3), dtype=bool)
    y = tl_m(t64(x), t64(x), t64(x), key_padding_mask=kpm, need_weights=False)[0]
    close(y, th_m(th(x), th(x), th(x), key_padding_mask=torch.tensor(kpm), need_weights=False)[0])
    close(y, np.broadcast_to(host(tl_m.out_proj.bias), (1, 3, 8)))
    # torch's weights path is a plain softmax: NaN on a row with nothing to attend to
    y, w = tl_m(t64(x), t64(x), t64(x), key_padding_mask=kpm)
    assert np.isnan(host(w)).all() and np.isnan(host(y)).all()


def test_mha_eval_fast_path_and_multi_head_attention_forward_match_torch():
    tl_m, th_m = _mha(8, 2, batch_first=True)
    tl_m.eval()
    th_m.eval()
    x = rand(2, 5, 8)
    kpm = np.zeros((2, 5), dtype=bool)
    kpm[1, 2:] = True
    with torch.no_grad():
        y_th, w_th = th_m(th(x), th(x), th(x), key_padding_mask=torch.tensor(kpm))
    y, w = tl_m(t64(x), t64(x), t64(x), key_padding_mask=kpm)
    close(y, y_th)
    close(w, w_th)
    xs = rand(5, 2, 8, seed=4)
    args = lambda m: (8, 2, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0, m.out_proj.weight,
                      m.out_proj.bias)
    both(lambda x: FA.multi_head_attention_forward(x, x, x, *args(tl_m), training=False,
                                                   key_padding_mask=kpm)[1],
         lambda x: TF.multi_head_attention_forward(x, x, x, *args(th_m), training=False,
                                                   key_padding_mask=torch.tensor(kpm))[1], [xs])
    both(lambda x: FA.multi_head_attention_forward(x, x, x, *args(tl_m), need_weights=False)[0],
         lambda x: TF.multi_head_attention_forward(x, x, x, *args(th_m), need_weights=False)[0], [xs])


def test_mha_attention_dropout_in_training_only():
    tl.manual_seed(0)
    m = TR.MultiheadAttention(4, 1, dropout=0.5, batch_first=True)
    x = tl.randn(1, 200, 4)
    _, w = m(x, x, x)
    a = host(w)
    assert 0.4 < (a == 0).mean() < 0.6
    np.testing.assert_allclose(a.sum(-1).mean(), 1.0, atol=0.05)
    y1, y2 = m(x, x, x, need_weights=False)[0], m(x, x, x, need_weights=False)[0]
    assert not np.allclose(host(y1), host(y2))
    m.eval()
    _, w = m(x, x, x)
    np.testing.assert_allclose(host(w).sum(-1), 1.0, rtol=1e-5)
    assert (host(w) > 0).all()


def test_mha_init_and_state_dict_follow_torch():
    tl.manual_seed(0)
    m = TR.MultiheadAttention(12, 3, add_bias_kv=True)
    t = torch.nn.MultiheadAttention(12, 3, add_bias_kv=True)
    assert list(m.state_dict()) == list(t.state_dict())
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == {k: tuple(v.shape)
                                                                      for k, v in t.state_dict().items()}
    bound = math.sqrt(6.0 / (12 + 36))
    w = host(m.in_proj_weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert not host(m.in_proj_bias).any() and not host(m.out_proj.bias).any()
    assert np.abs(host(m.out_proj.weight)).max() <= 1 / math.sqrt(12)
    assert host(m.bias_k).std() > 0.1
    m2 = TR.MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False)
    t2 = torch.nn.MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False)
    assert {k: tuple(v.shape) for k, v in m2.state_dict().items()} == {k: tuple(v.shape)
                                                                       for k, v in t2.state_dict().items()}
    assert m2.in_proj_weight is None and m2.batch_first is False


def test_mha_errors():
    with pytest.raises(ShapeError, match="multiple of num_heads"):
        TR.MultiheadAttention(10, 3)
    m = TR.MultiheadAttention(8, 2)
    x = tl.zeros(5, 2, 8)
    with pytest.raises(ShapeError, match="attn_mask"):
        m(x, x, x, attn_mask=np.ones((4, 5), dtype=bool))
    with pytest.raises(ShapeError, match="key_padding_mask"):
        m(x, x, x, key_padding_mask=np.ones((2, 4), dtype=bool))
    with pytest.raises(ShapeError, match="last axis"):
        m(x, tl.zeros(5, 2, 4), x)


# ---- transformer layers and stacks ----------------------------------------------------------

def _act(name):
    return {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"),
            "callable": (tl.nn.functional.silu, TF.silu), "module": (tl.nn.GELU(), torch.nn.GELU())}[name]


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("act", ["relu", "gelu", "callable", "module"])
def test_encoder_layer_matches_torch(norm_first, act):
    a_tl, a_th = _act(act)
    kw = dict(dim_feedforward=12, dropout=0.0, norm_first=norm_first, batch_first=act == "gelu",
              bias=act != "module")
    tl_m, th_m = pair(TR.TransformerEncoderLayer(8, 2, activation=a_tl, **kw),
                      torch.nn.TransformerEncoderLayer(8, 2, activation=a_th, **kw))
    r = np.random.default_rng(1)
    x = rand(3, 4, 8)
    kpm = r.random((3 if kw["batch_first"] else 4, 4 if kw["batch_first"] else 3)) < 0.3
    kpm[:, 0] = False
    both(lambda x: tl_m(x, src_key_padding_mask=kpm), lambda x: th_m(x, src_key_padding_mask=torch.tensor(kpm)),
         [x])
    params_close(tl_m, th_m)
    am = TR.Transformer.generate_square_subsequent_mask(4 if kw["batch_first"] else 3, dtype=tl.float64)
    am_th = torch.nn.Transformer.generate_square_subsequent_mask(4 if kw["batch_first"] else 3,
                                                                 dtype=torch.float64)
    both(lambda x: tl_m(x, src_mask=am, is_causal=True), lambda x: th_m(x, src_mask=am_th, is_causal=True), [x])
    both(lambda x: tl_m(x[0]), lambda x: th_m(x[0]), [x])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_torch(norm_first, batch_first):
    kw = dict(dim_feedforward=12, dropout=0.0, norm_first=norm_first, batch_first=batch_first,
              activation="gelu" if norm_first else "relu")
    tl_m, th_m = pair(TR.TransformerDecoderLayer(8, 2, **kw), torch.nn.TransformerDecoderLayer(8, 2, **kw))
    tgt, mem = (rand(2, 4, 8), rand(2, 6, 8, seed=1)) if batch_first else (rand(4, 2, 8), rand(6, 2, 8, seed=1))
    mkpm = np.zeros((2, 6), dtype=bool)
    mkpm[1, 4:] = True
    tm = TR.Transformer.generate_square_subsequent_mask(4, dtype=tl.float64)
    tm_th = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    both(lambda t, m: tl_m(t, m, tgt_mask=tm, memory_key_padding_mask=mkpm, tgt_is_causal=True),
         lambda t, m: th_m(t, m, tgt_mask=tm_th, memory_key_padding_mask=torch.tensor(mkpm), tgt_is_causal=True),
         [tgt, mem])
    params_close(tl_m, th_m)


def test_stacks_with_final_norm_match_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = pair(TR.TransformerEncoder(TR.TransformerEncoderLayer(8, 2, 12, dropout=0.0), 2, tl.nn.LayerNorm(8)),
                   torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0), 2,
                                               torch.nn.LayerNorm(8)))
    dec = pair(TR.TransformerDecoder(TR.TransformerDecoderLayer(8, 2, 12, dropout=0.0), 2, tl.nn.LayerNorm(8)),
               torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(8, 2, 12, dropout=0.0), 2,
                                           torch.nn.LayerNorm(8)), seed=1)
    src, tgt = rand(5, 2, 8), rand(4, 2, 8, seed=1)
    kpm = np.zeros((2, 5), dtype=bool)
    kpm[0, 3:] = True
    sm = TR.Transformer.generate_square_subsequent_mask(5, dtype=tl.float64)
    sm_th = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    both(lambda s: enc[0](s, mask=sm), lambda s: enc[1](s, mask=sm_th), [src])  # causal detected
    both(lambda s: enc[0](s, src_key_padding_mask=kpm), lambda s: enc[1](s, src_key_padding_mask=torch.tensor(kpm)),
         [src])
    params_close(*enc)
    tm = np.triu(np.ones((4, 4), dtype=bool), 1)
    both(lambda t, m: dec[0](t, m, tgt_mask=tm, memory_key_padding_mask=kpm),
         lambda t, m: dec[1](t, m, tgt_mask=torch.tensor(tm), memory_key_padding_mask=torch.tensor(kpm)),
         [tgt, src])
    params_close(*dec)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_encoder_padded_positions_match_torch_fast_path():
    layer = torch.nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, batch_first=True)
    th_m = torch.nn.TransformerEncoder(layer, 2, torch.nn.LayerNorm(8))
    tl_m = TR.TransformerEncoder(TR.TransformerEncoderLayer(8, 2, 12, dropout=0.0, batch_first=True), 2,
                                 tl.nn.LayerNorm(8))
    pair(tl_m, th_m)
    tl_m.eval()
    th_m.eval()
    x = rand(2, 5, 8)
    kpm = np.zeros((2, 5), dtype=bool)
    kpm[0, 3:] = True
    with torch.no_grad():
        y_th = th_m(th(x, False), src_key_padding_mask=torch.tensor(kpm))
    with tl.no_grad():
        y = tl_m(t64(x, False), src_key_padding_mask=kpm)
    close(y, y_th, 1e-6)
    y_th_grad_path = th_m(th(x), src_key_padding_mask=torch.tensor(kpm))
    y_grad_path = tl_m(t64(x), src_key_padding_mask=kpm)
    close(y_grad_path, y_th_grad_path)
    assert not np.allclose(host(y), host(y_grad_path))  # the padded positions differ between the paths
    np.testing.assert_allclose(host(y)[~kpm], host(y_grad_path)[~kpm], atol=1e-9)


def test_encoder_nested_tensor_warning_and_clones():
    layer = TR.TransformerEncoderLayer(8, 2, 12)
    with pytest.warns(UserWarning, match="enable_nested_tensor is True, but self.use_nested_tensor is False"):
        enc = TR.TransformerEncoder(layer, 3)
    assert enc.use_nested_tensor is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TR.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        TR.TransformerEncoder(TR.TransformerEncoderLayer(8, 2, 12, batch_first=True), 1)
    ws = [host(m.linear1.weight) for m in enc.layers]
    assert all(np.array_equal(ws[0], w) for w in ws) and np.array_equal(ws[0], host(layer.linear1.weight))
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    with tl.no_grad():
        enc.layers[0].linear1.weight.fill_(0.0)
    assert np.abs(host(enc.layers[1].linear1.weight)).max() > 0


def test_transformer_matches_torch():
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=12, dropout=0.0,
              batch_first=True)
    tl_m, th_m = pair(TR.Transformer(**kw), torch.nn.Transformer(**kw))
    src, tgt = rand(2, 5, 8), rand(2, 4, 8, seed=1)
    tm = TR.Transformer.generate_square_subsequent_mask(4, dtype=tl.float64)
    tm_th = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    skpm = np.zeros((2, 5), dtype=bool)
    skpm[1, 4] = True
    both(lambda s, t: tl_m(s, t, tgt_mask=tm, src_key_padding_mask=skpm, memory_key_padding_mask=skpm),
         lambda s, t: th_m(s, t, tgt_mask=tm_th, src_key_padding_mask=torch.tensor(skpm),
                           memory_key_padding_mask=torch.tensor(skpm)), [src, tgt])
    params_close(tl_m, th_m)
    with pytest.raises(ShapeError, match="batch number"):
        tl_m(t64(src), t64(rand(3, 4, 8)))


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_transformer_init_and_mask_follow_torch():
    tl.manual_seed(0)
    m = TR.Transformer(8, 2, 1, 1, 16)
    t = torch.nn.Transformer(8, 2, 1, 1, 16)
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == {k: tuple(v.shape)
                                                                      for k, v in t.state_dict().items()}
    assert list(m.state_dict()) == list(t.state_dict())
    for name, p in m.named_parameters():
        a = host(p)
        if p.ndim > 1:
            bound = math.sqrt(6.0 / (a.shape[0] + a.shape[1]))
            assert np.abs(a).max() <= bound and np.abs(a).max() > 0.7 * bound, name
        elif name.endswith("norm1.weight") or name.endswith("norm.weight"):
            assert (a == 1).all()
    mk = TR.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(host(mk), torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    assert mk.dtype == tl.float32
    with pytest.raises(DomainError, match="relu/gelu"):
        TR.TransformerEncoderLayer(8, 2, activation="tanh")


@pytest.mark.cuda
def test_attention_cuda_matches_cpu():
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("no CUDA device")
    r = np.random.default_rng(0)
    q, k, v = r.standard_normal((2, 4, 6, 8)), r.standard_normal((2, 2, 7, 8)), r.standard_normal((2, 2, 7, 8))
    fm = r.standard_normal((6, 7))
    for kw in (dict(is_causal=True, enable_gqa=True), dict(attn_mask=fm, enable_gqa=True)):
        outs = []
        for dev in ("cpu", "cuda"):
            ts = [tl.tensor(a, dtype=tl.float32, device=dev, requires_grad=True) for a in (q, k, v)]
            kk = dict(kw)
            if "attn_mask" in kk:
                kk["attn_mask"] = tl.tensor(fm, dtype=tl.float32, device=dev)
            y = FA.scaled_dot_product_attention(*ts, **kk)
            y.sum().backward()
            outs.append([host(y.cpu())] + [host(t.grad.cpu()) for t in ts])
        for a, b in zip(*outs):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    tl.manual_seed(0)
    m = TR.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True)
    src = tl.tensor(r.standard_normal((2, 5, 8)), dtype=tl.float32)
    tgt = tl.tensor(r.standard_normal((2, 4, 8)), dtype=tl.float32)
    mask = TR.Transformer.generate_square_subsequent_mask(4)
    y_cpu = host(m(src, tgt, tgt_mask=mask))
    m.to(device="cuda")
    y_gpu = m(src.to(device="cuda"), tgt.to(device="cuda"), tgt_mask=mask.to(device="cuda"))
    np.testing.assert_allclose(host(y_gpu.cpu()), y_cpu, rtol=1e-4, atol=1e-5)
