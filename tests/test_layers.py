"""Model layers against torch (CPU, float64), numpy.fft and plain Python loops:
forward values and gradients through the tape's fast kernels, plus the errors
that bad shapes raise."""

import math

import numpy as np
import pytest

from torchlean.autograd import Tape, run_op
from torchlean.errors import ShapeError
from torchlean.kernels.host import attention as host_attention
from torchlean.spec import SPEC
from torchlean.testing.opinfo.attention import random_mask

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = dict(rtol=1e-10, atol=1e-11)


def tape_run(name, inputs, attrs, g, needs=None, fast=True, dtype=np.float64):
    """Forward value and input gradients of op ``name`` through the tape."""
    t = Tape(fast_kernels=fast)
    needs = needs or [True] * len(inputs)
    ids = [t.leaf(np.asarray(x, dtype), requires_grad=nd) for x, nd in zip(inputs, needs)]
    out = t.op(name, *ids, **attrs)
    grads = t.backward(out, seed=np.asarray(g, dtype))
    return t.value(out), [grads[i] if nd else None for i, nd in zip(ids, needs)]


def torch_run(fn, inputs, g, needs=None):
    needs = needs or [True] * len(inputs)
    ts = [torch.tensor(x, dtype=torch.float64, requires_grad=nd) for x, nd in zip(inputs, needs)]
    y = fn(*ts)
    y.backward(torch.tensor(g))
    return y.detach().numpy(), [t.grad.numpy() if nd else None for t, nd in zip(ts, needs)]


def assert_same(ours, theirs, **tol):
    (y, gs), (ty, tgs) = ours, theirs
    np.testing.assert_allclose(y, ty, **(tol or TOL))
    for i, (a, b) in enumerate(zip(gs, tgs)):
        if b is not None:
            np.testing.assert_allclose(a, b, err_msg=f"gradient of input {i}", **(tol or TOL))


# ---- normalization --------------------------------------------------------------------------

@pytest.mark.parametrize("shape,nd", [((6, 8), 1), ((2, 3, 4, 5), 2), ((4, 7), 2), ((5,), 1)])
def test_layer_norm_matches_torch(rng, shape, nd):
    x = rng.standard_normal(shape) * 3 + 1.5
    norm = shape[len(shape) - nd:]
    gamma, beta = rng.uniform(0.5, 1.5, norm), rng.standard_normal(norm)
    g = rng.standard_normal(shape)
    ours = tape_run("layer_norm", (x, gamma, beta), {"normalized_ndim": nd}, g)
    theirs = torch_run(lambda a, w, b: F.layer_norm(a, norm, w, b, 1e-5), (x, gamma, beta), g)
    assert_same(ours, theirs)
    ours = tape_run("layer_norm_noaffine", (x,), {"normalized_ndim": nd, "eps": 1e-3}, g)
    assert_same(ours, torch_run(lambda a: F.layer_norm(a, norm, eps=1e-3), (x,), g))


def test_layer_norm_float32_stays_float32_and_is_accurate(rng):
    # A large mean and a small spread: float64 statistics keep float32 output accurate.
    x = (1000.0 + rng.standard_normal((4, 64))).astype(np.float32)
    y, _ = run_op("layer_norm_noaffine", [x], {"normalized_ndim": 1})
    assert y.dtype == np.float32
    ref = SPEC["layer_norm_noaffine"].forward(x.astype(np.float64), normalized_ndim=1)
    np.testing.assert_allclose(y, ref, atol=2e-3)


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 5), (3, 2, 2, 2, 2)])
def test_batch_norm_train_matches_torch(rng, shape):
    x = rng.standard_normal(shape) * 2 - 1
    c = shape[1]
    gamma, beta = rng.uniform(0.5, 1.5, c), rng.standard_normal(c)
    g = rng.standard_normal(shape)
    ours = tape_run("batch_norm_train", (x, gamma, beta), {"eps": 1e-5}, g)
    theirs = torch_run(lambda a, w, b: F.batch_norm(a, None, None, w, b, training=True, eps=1e-5),
                       (x, gamma, beta), g)
    assert_same(ours, theirs)


def test_batch_norm_train_uses_biased_batch_statistics(rng):
    x = rng.standard_normal((6, 2, 3))
    y, _ = run_op("batch_norm_train", [x, np.ones(2), np.zeros(2)], {"eps": 0.0})
    np.testing.assert_allclose(y.mean(axis=(0, 2)), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=(0, 2)), 1.0, rtol=1e-12)


def test_batch_norm_eval_matches_torch(rng):
    x = rng.standard_normal((4, 3, 5))
    gamma, beta, mean, var = rng.uniform(0.5, 1.5, 3), rng.standard_normal(3), rng.standard_normal(3), \
        rng.uniform(0.5, 2, 3)
    g = rng.standard_normal(x.shape)
    needs = [True, True, True, False, False]
    ours = tape_run("batch_norm_eval", (x, gamma, beta, mean, var), {"eps": 1e-5}, g, needs)
    theirs = torch_run(lambda a, w, b, m, v: F.batch_norm(a, m, v, w, b, training=False, eps=1e-5),
                       (x, gamma, beta, mean, var), g, needs)
    assert_same(ours, theirs)


def test_batch_norm_chw_is_a_batch_of_one(rng):
    x = rng.standard_normal((3, 4, 5))
    gamma, beta = rng.uniform(0.5, 1.5, 3), rng.standard_normal(3)
    g = rng.standard_normal(x.shape)
    ours = tape_run("batch_norm_chw", (x, gamma, beta), {}, g)
    theirs = torch_run(lambda a, w, b: F.batch_norm(a[None], None, None, w, b, training=True)[0],
                       (x, gamma, beta), g)
    assert_same(ours, theirs)
    # each channel normalised over its own H*W
    y = ours[0]
    np.testing.assert_allclose(((y - beta[:, None, None]) / gamma[:, None, None]).mean(axis=(1, 2)), 0, atol=1e-12)


# ---- attention ------------------------------------------------------------------------------

def _qkv(rng, b, n, m, d, e=None):
    return rng.standard_normal((b, n, d)), rng.standard_normal((b, m, d)), rng.standard_normal((b, m, e or d))


@pytest.mark.parametrize("b,n,m,d,e,scale", [(2, 5, 5, 4, 4, None), (3, 4, 7, 8, 3, 0.3), (1, 1, 1, 2, 2, None)])
def test_attention_without_mask_matches_torch_sdpa(rng, b, n, m, d, e, scale):
    q, k, v = _qkv(rng, b, n, m, d, e)
    g = rng.standard_normal((b, n, e))
    ours = tape_run("flash_attention", (q, k, v), {"scale": scale}, g)
    theirs = torch_run(lambda a, bb, c: F.scaled_dot_product_attention(a, bb, c, scale=scale), (q, k, v), g)
    assert_same(ours, theirs)


def test_attention_seed_mask_replaces_blocked_logits_by_minus_1000(rng):
    q, k, v = _qkv(rng, 2, 6, 6, 4)
    mask = random_mask(rng, 2, 6, 6)
    g = rng.standard_normal(q.shape)
    ours = tape_run("flash_attention", (q, k, v), {"mask": mask}, g)

    def ref(a, bb, c):
        s = a @ bb.transpose(-1, -2) / 2.0
        return torch.softmax(torch.where(torch.as_tensor(mask), s, torch.full_like(s, -1000.0)), -1) @ c
    assert_same(ours, torch_run(ref, (q, k, v), g))
    # Blocked logits are replaced, not shifted: -1000 is far below every logit here, so the
    # result equals torch's boolean-mask attention.
    bool_ref = torch_run(lambda a, bb, c: F.scaled_dot_product_attention(a, bb, c, attn_mask=torch.as_tensor(mask)),
                         (q, k, v), g)
    assert_same(ours, bool_ref, rtol=1e-9, atol=1e-9)


def test_attention_hard_mask_matches_torch_and_zeroes_fully_blocked_rows(rng):
    q, k, v = _qkv(rng, 2, 5, 6, 3)
    mask = random_mask(rng, 2, 5, 6)
    mask[1, 2] = False   # query 2 of batch 1 may attend to nothing
    g = rng.standard_normal(q.shape)
    y, (dq, dk, dv) = tape_run("flash_attention", (q, k, v), {"mask": mask, "hard": True}, g)
    assert np.all(y[1, 2] == 0.0) and np.all(dq[1, 2] == 0.0)
    # A fully blocked row contributes nothing to dk, dv: compare with the cotangent of that row zeroed.
    g0 = g.copy()
    g0[1, 2] = 0.0
    _, (_, dk0, dv0) = tape_run("flash_attention", (q, k, v), {"mask": mask, "hard": True}, g0)
    np.testing.assert_allclose(dk, dk0, **TOL)
    np.testing.assert_allclose(dv, dv0, **TOL)
    # Every other row is torch's boolean-mask SDPA.
    keep = torch.as_tensor(mask)
    ty, tg = torch_run(lambda a, bb, c: F.scaled_dot_product_attention(a, bb, c, attn_mask=keep), (q, k, v), g0)
    rows = np.ones((2, 5), bool)
    rows[1, 2] = False
    np.testing.assert_allclose(y[rows], ty[rows], **TOL)
    np.testing.assert_allclose(dq[rows], tg[0][rows], **TOL)
    np.testing.assert_allclose(dk, tg[1], **TOL)
    np.testing.assert_allclose(dv, tg[2], **TOL)


@pytest.mark.parametrize("threads", [False, True])
@pytest.mark.parametrize("hard", [False, True])
def test_flash_kernels_blocked_over_many_key_tiles(rng, monkeypatch, hard, threads):
    # Force 64-key tiles so that the online softmax crosses tile boundaries, and
    # optionally the batch-parallel path.
    monkeypatch.setattr(host_attention, "_TILE_ELEMS", 1)
    if threads:
        monkeypatch.setattr(host_attention, "_MIN_PARALLEL", 0)
    b, n, m, d = 2, 9, 200, 5
    q, k, v = (x.astype(np.float64) for x in _qkv(rng, b, n, m, d))
    mask = random_mask(rng, b, n, m, p=0.3)
    mask[0, 3] = False
    mask[1, 4, :150] = False      # the first allowed key of this row lies in the last tile
    mask[1, 4, 170] = True
    out, lse = host_attention.flash_attention_fwd(q * 3, k, v, mask, 0.5, hard)
    ref = SPEC["flash_attention"].forward(q * 3, k, v, scale=0.5, mask=mask, hard=hard)
    np.testing.assert_allclose(out, ref, **TOL)
    g = rng.standard_normal(out.shape)
    grads = host_attention.flash_attention_bwd(q * 3, k, v, mask, out, lse, g, 0.5, hard)
    want = SPEC["flash_attention"].vjp(g, q * 3, k, v, scale=0.5, mask=mask, hard=hard)
    for got, w in zip(grads, want):
        np.testing.assert_allclose(got, w, **TOL)
    for i, kern in enumerate((host_attention.flash_attention_bwd_q, host_attention.flash_attention_bwd_k,
                              host_attention.flash_attention_bwd_v)):
        np.testing.assert_allclose(kern(q * 3, k, v, mask, out, lse, g, 0.5, hard), grads[i])


def test_attention_float32_large_logits_stay_finite(rng):
    q, k, v = (x.astype(np.float32) * 30 for x in _qkv(rng, 2, 16, 16, 8))
    y, bwd = run_op("flash_attention", [q, k, v], {})
    assert y.dtype == np.float32 and np.isfinite(y).all()
    dq, dk, dv = bwd(np.ones_like(y), (True, True, True))
    assert all(t.dtype == np.float32 and np.isfinite(t).all() for t in (dq, dk, dv))


def _torch_mha(x, wq, wk, wv, wo, heads, mask=None):
    X = x if x.dim() == 3 else x[None]
    b, n, _ = X.shape
    hd = wq.shape[1] // heads
    q, k, v = ((X @ w).reshape(b, n, heads, hd).transpose(1, 2) for w in (wq, wk, wv))
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)
    if mask is not None:
        s = torch.where(torch.as_tensor(mask), s, torch.full_like(s, -1000.0))
    o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, n, heads * hd) @ wo
    return o if x.dim() == 3 else o[0]


@pytest.mark.parametrize("use_flash", [True, False])
@pytest.mark.parametrize("batched,masked", [(False, False), (True, False), (True, True), (False, True)])
def test_multi_head_attention_matches_explicit_torch(rng, use_flash, batched, masked):
    n, d_model, heads, hd = 5, 6, 3, 4
    x = rng.standard_normal((2, n, d_model) if batched else (n, d_model))
    ws = [rng.standard_normal((d_model, heads * hd)) / 2 for _ in range(3)] + \
        [rng.standard_normal((heads * hd, d_model)) / 2]
    mask = np.tril(np.ones((n, n), bool)) if masked else None
    g = rng.standard_normal(x.shape)
    attrs = {"num_heads": heads, "mask": mask, "use_flash": use_flash}
    ours = tape_run("multi_head_attention", (x, *ws), attrs, g)
    theirs = torch_run(lambda *t: _torch_mha(*t, heads, mask), (x, *ws), g)
    assert_same(ours, theirs)


@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_attention_matches_torch_module(rng, masked):
    # PyTorch's bias-free nn.MultiheadAttention holds the same weights transposed.
    n, d_model, heads = 6, 8, 2
    x = rng.standard_normal((3, n, d_model))
    wq, wk, wv, wo = (rng.standard_normal((d_model, d_model)) / 3 for _ in range(4))
    mha = torch.nn.MultiheadAttention(d_model, heads, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.tensor(np.concatenate([wq.T, wk.T, wv.T])))
        mha.out_proj.weight.copy_(torch.tensor(wo.T))
    causal = np.tril(np.ones((n, n), bool))
    tx = torch.tensor(x, requires_grad=True)
    ty, _ = mha(tx, tx, tx, need_weights=False, attn_mask=torch.tensor(~causal) if masked else None)
    g = rng.standard_normal(x.shape)
    ty.backward(torch.tensor(g))
    y, (dx, dwq, dwk, dwv, dwo) = tape_run("multi_head_attention", (x, wq, wk, wv, wo),
                                           {"num_heads": heads, "mask": causal if masked else None}, g)
    # exp(-1000) underflows to 0, so the seed fill and torch's -inf agree to rounding
    tol = dict(rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(y, ty.detach().numpy(), **tol)
    np.testing.assert_allclose(dx, tx.grad.numpy(), **tol)
    gin = mha.in_proj_weight.grad.numpy()
    for got, want in zip((dwq, dwk, dwv), (gin[:d_model], gin[d_model:2 * d_model], gin[2 * d_model:])):
        np.testing.assert_allclose(got, want.T, **tol)
    np.testing.assert_allclose(dwo, mha.out_proj.weight.grad.numpy().T, **tol)


# ---- real FFT and spectral convolution ------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 7, 8, 16])
def test_rfft_irfft_match_numpy_fft(rng, n):
    x = rng.standard_normal((3, n))
    p, _ = run_op("rfft", [x], {})
    z = np.fft.rfft(x)
    np.testing.assert_allclose(p[..., 0], z.real, atol=1e-12)
    np.testing.assert_allclose(p[..., 1], z.imag, atol=1e-12)
    y, _ = run_op("irfft", [p], {"n": n})
    np.testing.assert_allclose(y, x, atol=1e-12)
    spec = SPEC["rfft"].forward(x)
    np.testing.assert_allclose(spec, p, atol=1e-11)


def test_irfft_ignores_imaginary_parts_at_dc_and_nyquist(rng):
    p = rng.standard_normal((2, 5, 2))
    q = p.copy()
    q[:, 0, 1] += 7.0
    q[:, 4, 1] -= 3.0
    for fast in (True, False):
        a, _ = run_op("irfft", [p], {"n": 8}, fast=fast)
        b, _ = run_op("irfft", [q], {"n": 8}, fast=fast)
        np.testing.assert_allclose(a, b, atol=1e-12)
        np.testing.assert_allclose(a, np.fft.irfft(p[..., 0] + 1j * p[..., 1], 8), atol=1e-12)
    # odd n: the last bin is interior, its imaginary part counts
    a, _ = run_op("irfft", [p], {"n": 9})
    b, _ = run_op("irfft", [q], {"n": 9})
    np.testing.assert_allclose(b, np.fft.irfft(q[..., 0] + 1j * q[..., 1], 9), atol=1e-12)
    assert np.abs(a - b).max() > 0.5


@pytest.mark.parametrize("n", [6, 7])
def test_fft_gradients_match_torch(rng, n):
    x = rng.standard_normal((2, n))
    g = rng.standard_normal((2, n // 2 + 1, 2))
    ours = tape_run("rfft", (x,), {}, g)
    assert_same(ours, torch_run(lambda t: torch.view_as_real(torch.fft.rfft(t)), (x,), g))
    p = rng.standard_normal((2, n // 2 + 1, 2))
    gy = rng.standard_normal((2, n))
    ours = tape_run("irfft", (p,), {"n": n}, gy)
    theirs = torch_run(lambda t: torch.fft.irfft(torch.complex(t[..., 0], t[..., 1]), n=n), (p,), gy)
    assert_same(ours, theirs)


@pytest.mark.parametrize("xs,modes,wo", [((16, 3), 5, 3), ((2, 9, 4), 5, 2), ((3, 8, 2), 5, 2), ((4, 1), 1, 1)])
def test_spectral_conv1d_matches_torch_formulation(rng, xs, modes, wo):
    x = rng.standard_normal(xs)
    wi = xs[-1]
    w_re, w_im = rng.standard_normal((modes, wi, wo)), rng.standard_normal((modes, wi, wo))
    g = rng.standard_normal(xs[:-1] + (wo,))

    def ref(t, a, b):
        grid = t.shape[-2]
        X = torch.fft.rfft(t, dim=-2)[..., :modes, :]
        return torch.fft.irfft(torch.einsum("...ki,kio->...ko", X, torch.complex(a, b)), n=grid, dim=-2)
    assert_same(tape_run("spectral_conv1d", (x, w_re, w_im), {}, g), torch_run(ref, (x, w_re, w_im), g))
    assert_same(tape_run("spectral_conv1d", (x, w_re, w_im), {}, g, fast=False), torch_run(ref, (x, w_re, w_im), g))


def test_spectral_conv1d_float32(rng):
    x = rng.standard_normal((2, 32, 4)).astype(np.float32)
    w = [rng.standard_normal((8, 4, 4)).astype(np.float32) for _ in range(2)]
    y, bwd = run_op("spectral_conv1d", [x, *w], {})
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, SPEC["spectral_conv1d"].forward(*(a.astype(np.float64) for a in (x, *w))),
                               atol=1e-4)
    assert all(t.dtype == np.float32 for t in bwd(np.ones_like(y), (True, True, True)))


# ---- selective scan -------------------------------------------------------------------------

def _loop_scan(x, a, b, h0, var):
    """h[t] = a h[t-1] + b x[t], element by element."""
    x2 = x.reshape(-1, *x.shape[-2:])
    h0_2 = h0.reshape(-1, x.shape[-1])
    a2 = a.reshape(x2.shape) if var else a
    b2 = b.reshape(x2.shape) if var else b
    out = np.zeros_like(x2)
    for r in range(x2.shape[0]):
        for j in range(x2.shape[2]):
            h = h0_2[r, j]
            for t in range(x2.shape[1]):
                at = a2[r, t, j] if var else a2[j]
                bt = b2[r, t, j] if var else b2[j]
                h = at * h + bt * x2[r, t, j]
                out[r, t, j] = h
    return out.reshape(x.shape)


@pytest.mark.parametrize("var", [False, True])
@pytest.mark.parametrize("shape", [(6, 3), (2, 5, 4), (2, 3, 4, 2), (1, 2)])
def test_selective_scan_matches_python_loop(rng, var, shape):
    x = rng.standard_normal(shape)
    coef = shape if var else shape[-1:]
    a, b = rng.uniform(-0.9, 0.9, coef), rng.standard_normal(coef)
    h0 = rng.standard_normal(shape[:-2] + shape[-1:])
    name = "selective_scan_var" if var else "selective_scan"
    g = rng.standard_normal(shape)
    y, grads = tape_run(name, (x, a, b, h0), {}, g)
    np.testing.assert_allclose(y, _loop_scan(x, a, b, h0, var), **TOL)
    # gradients of <g, h> by central differences of the loop itself
    for i, arr in enumerate((x, a, b, h0)):
        d = rng.standard_normal(arr.shape)
        args_p = [x, a, b, h0]
        args_m = [x, a, b, h0]
        args_p[i] = arr + 1e-6 * d
        args_m[i] = arr - 1e-6 * d
        num = np.sum(g * (_loop_scan(*args_p, var) - _loop_scan(*args_m, var))) / 2e-6
        np.testing.assert_allclose(np.sum(grads[i] * d), num, rtol=1e-6, atol=1e-8)


def test_selective_scan_zero_coefficients_and_seed_backward_formula(rng):
    # a = 0: h[t] = b x[t], so dh0 = 0 and dx = g b exactly.
    x = rng.standard_normal((4, 3))
    b = rng.standard_normal(3)
    g = rng.standard_normal((4, 3))
    y, (dx, da, db, dh0) = tape_run("selective_scan", (x, np.zeros(3), b, np.ones(3)), {}, g)
    np.testing.assert_allclose(y, b * x, **TOL)
    np.testing.assert_allclose(dx, g * b, **TOL)
    np.testing.assert_allclose(dh0, 0.0, **TOL)
    np.testing.assert_allclose(db, (g * x).sum(0), **TOL)
    hprev = np.vstack([np.ones((1, 3)), b * x[:-1]])
    np.testing.assert_allclose(da, (g * hprev).sum(0), **TOL)


# ---- bad inputs -----------------------------------------------------------------------------

def _raises(name, inputs, attrs, match):
    with pytest.raises(ShapeError, match=match) as e:
        run_op(name, [np.asarray(x, np.float32) for x in inputs], attrs)
    assert name in str(e.value)


def test_bad_shapes_raise_shape_errors_naming_the_op():
    w = np.ones((6, 2, 2))
    _raises("spectral_conv1d", (np.ones((8, 2)), w, w), {}, r"modes 6 must lie in \[1, grid//2 \+ 1\] = \[1, 5\]")
    q = np.ones((2, 3, 4))
    _raises("flash_attention", (q, q, q), {"mask": np.ones((2, 3, 2), bool)}, r"mask has shape \(2, 3, 2\)")
    _raises("flash_attention", (q, np.ones((2, 3, 5)), q), {}, "head dims")
    x, wq = np.ones((3, 4)), np.ones((4, 6))
    _raises("multi_head_attention", (x, wq, wq, wq, np.ones((6, 4))), {"num_heads": 4}, "num_heads 4")
    _raises("multi_head_attention", (x, wq, np.ones((4, 8)), wq, np.ones((6, 4))), {"num_heads": 2}, "wk")
    _raises("multi_head_attention", (x, wq, wq, wq, np.ones((6, 4))), {"num_heads": 2, "mask": np.ones((4, 4))},
            r"mask has shape \(4, 4\), expected \(3, 3\)")
    _raises("layer_norm", (np.ones((2, 3)), np.ones(3), np.ones(3)), {"normalized_ndim": 3},
            r"normalized_ndim 3 is larger than the number of axes of the input \(2, 3\)")
    _raises("irfft", (np.ones((4, 2)),), {"n": 8}, "needs 5 frequency bins")
    _raises("selective_scan", (np.ones((4, 3)), np.ones(3), np.ones(3), np.ones(2)), {}, "h0")
