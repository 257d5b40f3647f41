"""The layer front end (``tl.nn.functional`` layer functions and ``tl.nn`` layer modules)
against PyTorch on the CPU in float64: outputs and gradients of inputs and parameters.
"""

import math

import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional as F
from torchlean.errors import DomainError, ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = 1e-9


def t64(a, requires_grad=True):
    return tl.tensor(np.asarray(a, dtype=np.float64), dtype=tl.float64, requires_grad=requires_grad)


def th(a, requires_grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def host(x):
    if isinstance(x, tl.Tensor):
        return x.numpy()
    return x.detach().numpy()


def close(a, b, tol=TOL, what=""):
    np.testing.assert_allclose(host(a), host(b), rtol=tol, atol=tol, err_msg=what)


def both(f_tl, f_th, arrays, tol=TOL, seed=0):
    """Run both functions on the same float64 arrays (None passes through as None); compare
    the outputs and, for a random cotangent, the gradients of every array input."""
    xs_tl = [None if a is None else t64(a) for a in arrays]
    xs_th = [None if a is None else th(a) for a in arrays]
    y_tl, y_th = f_tl(*xs_tl), f_th(*xs_th)
    assert y_tl.shape == tuple(y_th.shape)
    close(y_tl, y_th, tol, "output")
    g = np.random.default_rng(seed).standard_normal(tuple(y_th.shape))
    y_tl.backward(t64(g, False))
    y_th.backward(torch.tensor(g))
    for i, (a, b) in enumerate(zip(xs_tl, xs_th)):
        if a is not None:
            close(a.grad, b.grad, tol, f"gradient of input {i}")
    return y_tl


def module_pair(tl_mod, th_mod):
    """Load the torch module's state_dict (as NumPy arrays) into the torchlean module."""
    th_mod.double()
    tl_mod.to(dtype=tl.float64)
    tl_mod.load_state_dict({k: v.detach().numpy() for k, v in th_mod.state_dict().items()})
    return tl_mod, th_mod


def modules_both(tl_mod, th_mod, arrays, tol=TOL, seed=0, out=lambda y: y):
    """Forward both modules on the arrays; compare outputs, input and parameter gradients."""
    y = both(lambda *xs: out(tl_mod(*xs)), lambda *xs: out(th_mod(*xs)), arrays, tol, seed)
    params_close(tl_mod, th_mod, tol=tol)
    return y


def params_close(tl_mod, th_mod, what="", tol=TOL):
    """Same parameter names, and equal gradients for each."""
    th_params = dict(th_mod.named_parameters())
    assert sorted(n for n, _ in tl_mod.named_parameters()) == sorted(th_params)
    for n, p in tl_mod.named_parameters():
        close(p.grad, th_params[n].grad, tol, f"gradient of parameter {n} {what}")


rng = np.random.default_rng(1234)


def rand(*shape):
    return rng.standard_normal(shape)


# ---- convolution (functional) ---------------------------------------------------------------

CONV_CASES = [
    # (d, N, C_in, C_out, spatial, kernel, stride, padding, dilation, groups, bias)
    (1, 2, 3, 4, (9,), (3,), 1, 0, 1, 1, True),
    (1, 2, 4, 6, (11,), (3,), 2, 1, 2, 2, False),
    (1, 1, 2, 2, (5,), (1,), 1, 0, 1, 2, True),
    (2, 2, 3, 4, (7, 6), (3, 2), 1, 1, 1, 1, True),
    (2, 1, 4, 4, (8, 9), (3, 3), (2, 1), (1, 0), (1, 2), 4, True),
    (2, 2, 6, 3, (6, 6), (2, 3), 2, (0, 1), 1, 3, False),
    (3, 2, 2, 3, (5, 4, 6), (2, 3, 2), 1, 1, 1, 1, True),
    (3, 1, 4, 2, (6, 5, 5), (3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 2, 1), 2, True),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}d-s{c[6]}-p{c[7]}-d{c[8]}-g{c[9]}")
def test_conv_matches_torch(case):
    d, N, ci, co, sp, k, s, p, dil, g, has_bias = case
    x, w = rand(N, ci, *sp), rand(co, ci // g, *k)
    b = rand(co) if has_bias else None
    ours = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[d]
    theirs = {1: TF.conv1d, 2: TF.conv2d, 3: TF.conv3d}[d]
    kw = dict(stride=s, padding=p, dilation=dil, groups=g)
    both(lambda x, w, b: ours(x, w, b, **kw), lambda x, w, b: theirs(x, w, b, **kw), [x, w, b])
    both(lambda x, w, b: F.conv_nd(x, w, b, **kw), lambda x, w, b: theirs(x, w, b, **kw), [x, w, b])


def test_conv_unbatched_input_matches_torch():
    x, w, b = rand(3, 8, 7), rand(5, 3, 3, 3), rand(5)
    both(lambda x, w, b: F.conv2d(x, w, b, padding=1), lambda x, w, b: TF.conv2d(x, w, b, padding=1), [x, w, b])


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("k,dil", [(3, 1), (4, 1), (2, 3), ((3, 4), (1, 1)), ((2, 5), (2, 1))])
def test_conv_string_padding_matches_torch(k, dil):
    x, b = rand(2, 2, 9, 8), rand(3)
    kk = (k, k) if isinstance(k, int) else k
    w = rand(3, 2, *kk)
    for pad in ("same", "valid"):
        both(lambda x, w, b: F.conv2d(x, w, b, padding=pad, dilation=dil),
             lambda x, w, b: TF.conv2d(x, w, b, padding=pad, dilation=dil), [x, w, b])
    with pytest.raises(DomainError, match="strided"):
        F.conv2d(t64(x), t64(w), padding="same", stride=2)


def test_conv_nd_four_spatial_axes_matches_a_sum_of_torch_conv3d():
    # conv over 4 spatial axes = sum over the last kernel offset j of conv3d on the slices o + j.
    x, w, b = rand(2, 3, 5, 4, 4, 5), rand(2, 3, 2, 2, 3, 2), rand(2)

    def theirs(x, w, b):
        K = w.shape[-1]
        outs = []
        for o in range(x.shape[-1] - K + 1):
            outs.append(sum(TF.conv3d(x[..., o + j], w[..., j]) for j in range(K)) + b.reshape(1, -1, 1, 1, 1))
        return torch.stack(outs, dim=-1)

    both(F.conv_nd, theirs, [x, w, b])


def test_conv_rank_mismatch_raises():
    with pytest.raises(ShapeError, match="conv2d: weight"):
        F.conv2d(t64(rand(1, 2, 5, 5)), t64(rand(3, 2, 3)))
    with pytest.raises(ShapeError, match="conv"):
        F.conv1d(t64(rand(1, 2, 5)), t64(rand(3, 4, 3)))


CONVT_CASES = [
    # (d, N, C_in, C_out, spatial, kernel, stride, padding, output_padding, groups, dilation, bias)
    (1, 2, 3, 4, (5,), (3,), 2, 1, 1, 1, 1, True),
    (1, 1, 4, 6, (6,), (2,), 3, 0, 2, 2, 1, False),
    (2, 2, 3, 2, (4, 5), (3, 2), (2, 1), (1, 0), (1, 0), 1, 1, True),
    (2, 1, 4, 4, (3, 3), (2, 2), 2, 0, 0, 4, (2, 1), True),
    (3, 1, 2, 3, (3, 4, 3), (2, 3, 2), (2, 1, 2), (0, 1, 1), (1, 0, 0), 1, 1, True),
]


@pytest.mark.parametrize("case", CONVT_CASES, ids=lambda c: f"{c[0]}d-s{c[6]}-p{c[7]}-op{c[8]}-g{c[9]}")
def test_conv_transpose_matches_torch(case):
    d, N, ci, co, sp, k, s, p, op, g, dil, has_bias = case
    x, w = rand(N, ci, *sp), rand(ci, co // g, *k)
    b = rand(co) if has_bias else None
    ours = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[d]
    theirs = {1: TF.conv_transpose1d, 2: TF.conv_transpose2d, 3: TF.conv_transpose3d}[d]
    kw = dict(stride=s, padding=p, output_padding=op, groups=g, dilation=dil)
    both(lambda x, w, b: ours(x, w, b, **kw), lambda x, w, b: theirs(x, w, b, **kw), [x, w, b])


# ---- pooling (functional) -------------------------------------------------------------------

POOL_CASES = [
    (1, (2, 3, 10), 3, None, 1, 1),
    (1, (3, 9), 2, 1, 0, 2),
    (2, (2, 2, 7, 8), 2, None, 0, 1),
    (2, (1, 3, 9, 9), (3, 2), (2, 1), (1, 1), (1, 2)),
    (3, (1, 2, 6, 5, 7), 2, 1, (1, 0, 1), 1),
    (3, (2, 5, 6, 6), (3, 2, 2), (2, 2, 1), 0, 1),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_max_pool_matches_torch(case):
    d, shape, k, s, p, dil = case
    x = rand(*shape)
    ours = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[d]
    theirs = {1: TF.max_pool1d, 2: TF.max_pool2d, 3: TF.max_pool3d}[d]
    both(lambda x: ours(x, k, s, p, dil), lambda x: theirs(x, k, s, p, dil), [x])


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool_matches_torch(case, count_include_pad):
    d, shape, k, s, p, _ = case
    x = rand(*shape)
    ours = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[d]
    theirs = {1: TF.avg_pool1d, 2: TF.avg_pool2d, 3: TF.avg_pool3d}[d]
    kw = dict(stride=s, padding=p, count_include_pad=count_include_pad)
    both(lambda x: ours(x, k, **kw), lambda x: theirs(x, k, **kw), [x])


def test_avg_pool_divisor_override_matches_torch():
    x = rand(2, 3, 6, 7)
    both(lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5),
         lambda x: TF.avg_pool2d(x, 3, 2, 1, divisor_override=5), [x])


@pytest.mark.parametrize("beta", [1.0, 3.5, -2.0])
def test_smooth_max_pool_matches_torch_logsumexp(beta):
    x = rand(2, 3, 6, 8)

    def theirs(x):
        return torch.log(TF.avg_pool2d(torch.exp(beta * x), (2, 3), (2, 2)) * 6.0) / beta

    both(lambda x: F.smooth_max_pool(x, (2, 3), beta, stride=(2, 2)), theirs, [x])
    both(lambda x: F.smooth_max_pool(x, 2, beta), lambda x: torch.log(TF.avg_pool2d(torch.exp(beta * x), 2)
                                                                       * 4.0) / beta, [x])


def test_smooth_max_pool_tends_to_max_pool():
    x = t64(rand(1, 2, 8, 8), False)
    close(F.smooth_max_pool(x, (2, 2), 1e4), F.max_pool2d(x, 2), 1e-3)


# ---- normalization (functional) -------------------------------------------------------------

@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm_matches_torch(affine):
    x = rand(3, 4, 5, 6)
    w = rand(5, 6) if affine in ("both", "weight") else None
    b = rand(5, 6) if affine in ("both", "bias") else None
    both(lambda x, w, b: F.layer_norm(x, (5, 6), w, b, eps=1e-4),
         lambda x, w, b: TF.layer_norm(x, (5, 6), w, b, eps=1e-4), [x, w, b])
    both(lambda x: F.layer_norm(x, 6), lambda x: TF.layer_norm(x, (6,)), [x])


def test_layer_norm_shape_mismatch_raises():
    with pytest.raises(ShapeError, match="normalized_shape"):
        F.layer_norm(t64(rand(3, 4)), (5,))


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 5)])
def test_batch_norm_training_updates_running_stats_like_torch(shape):
    gamma, beta = rand(3), rand(3)
    rm_tl, rv_tl = t64(np.zeros(3), False), t64(np.ones(3), False)
    rm_th, rv_th = th(np.zeros(3), False), th(np.ones(3), False)
    for step in range(3):
        x = rand(*shape) * (step + 1) + step
        both(lambda x, g, b: F.batch_norm(x, rm_tl, rv_tl, g, b, training=True, momentum=0.3, eps=1e-3),
             lambda x, g, b: TF.batch_norm(x, rm_th, rv_th, g, b, training=True, momentum=0.3, eps=1e-3),
             [x, gamma, beta], seed=step)
        close(rm_tl, rm_th, what="running_mean")
        close(rv_tl, rv_th, what="running_var")
    x = rand(*shape)
    both(lambda x, g, b: F.batch_norm(x, rm_tl, rv_tl, g, b, training=False, eps=1e-3),
         lambda x, g, b: TF.batch_norm(x, rm_th, rv_th, g, b, training=False, eps=1e-3), [x, gamma, beta])
    both(lambda x: F.batch_norm(x, rm_tl, rv_tl), lambda x: TF.batch_norm(x, rm_th, rv_th), [x])
    both(lambda x: F.batch_norm(x, None, None, training=True), lambda x: TF.batch_norm(x, None, None, training=True),
         [x])


def test_batch_norm_errors():
    with pytest.raises(ShapeError, match="more than 1 value per channel"):
        F.batch_norm(t64(rand(1, 3)), None, None, training=True)
    with pytest.raises(DomainError, match="running_mean"):
        F.batch_norm(t64(rand(4, 3)), None, None, training=False)


# ---- attention (functional) -----------------------------------------------------------------

def test_sdpa_no_mask_and_scale_match_torch():
    q, k, v = rand(2, 3, 5, 4), rand(2, 3, 7, 4), rand(2, 3, 7, 6)
    both(F.scaled_dot_product_attention, TF.scaled_dot_product_attention, [q, k, v])
    both(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3),
         lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, scale=0.3), [q, k, v])


def test_sdpa_broadcasts_leading_axes_and_accepts_2d():
    q, k, v = rand(2, 3, 5, 4), rand(1, 3, 6, 4), rand(3, 6, 2)
    both(F.scaled_dot_product_attention, TF.scaled_dot_product_attention, [q, k, v])
    q, k, v = rand(5, 4), rand(6, 4), rand(6, 3)
    both(F.scaled_dot_product_attention, TF.scaled_dot_product_attention, [q, k, v])


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (2, 3, 5, 7)])
def test_sdpa_bool_mask_matches_torch(mask_shape):
    q, k, v = rand(2, 3, 5, 4), rand(2, 3, 7, 4), rand(2, 3, 7, 6)
    m = rng.random(mask_shape) < 0.6
    m[..., 0] = True  # every query keeps a key: torch's fused kernels differ on empty rows
    both(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=tl.tensor(m)),
         lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(m)), [q, k, v])


def test_sdpa_fully_blocked_row_outputs_zero():
    q, k, v = (t64(rand(1, 3, 4)) for _ in range(3))
    m = np.ones((3, 3), dtype=bool)
    m[1] = False
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    np.testing.assert_array_equal(y.numpy()[0, 1], 0.0)


def test_sdpa_float_mask_matches_torch_including_its_gradient():
    q, k, v = rand(2, 3, 5, 4), rand(2, 3, 7, 4), rand(2, 3, 7, 6)
    m = rand(3, 5, 7)
    both(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.7),
         lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.7), [q, k, v, m])
    minf = np.where(rng.random((5, 7)) < 0.3, -np.inf, 0.0)
    minf[:, 0] = 0.0
    both(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=minf),
         lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(minf)), [q, k, v])


@pytest.mark.parametrize("L,S", [(6, 6), (4, 7), (7, 4)])
def test_sdpa_is_causal_matches_torch(L, S):
    q, k, v = rand(2, L, 4), rand(2, S, 4), rand(2, S, 3)
    both(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v])


def test_sdpa_errors():
    q = t64(rand(2, 3, 4))
    with pytest.raises(DomainError, match="dropout_p"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=1.5)
    with pytest.raises(DomainError, match="not both"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=np.ones((3, 3), bool), is_causal=True)
    with pytest.raises(ShapeError, match="embedding dims"):
        F.scaled_dot_product_attention(q, t64(rand(2, 3, 5)), q)
    with pytest.raises(ShapeError, match="does not broadcast"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=np.ones((4, 3), bool))


@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_attention_op_matches_torch_formula(masked):
    n, dm, H, hd = 5, 6, 2, 4
    x, wq, wk, wv, wo = rand(2, n, dm), rand(dm, H * hd), rand(dm, H * hd), rand(dm, H * hd), rand(H * hd, dm)
    mask = np.tril(np.ones((n, n))) if masked else None

    def theirs(x, wq, wk, wv, wo):
        def heads(t):
            return t.reshape(2, n, H, hd).transpose(1, 2)
        q, k, v = heads(x @ wq), heads(x @ wk), heads(x @ wv)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        if mask is not None:
            s = s.masked_fill(torch.tensor(mask) == 0, -1000.0)
        o = torch.softmax(s, -1) @ v
        return o.transpose(1, 2).reshape(2, n, H * hd) @ wo

    for use_flash in (True, False):
        both(lambda *a: F.multi_head_attention(*a, num_heads=H, mask=mask, use_flash=use_flash), theirs,
             [x, wq, wk, wv, wo])


# ---- spectral conv, selective scan, real FFT (functional) -----------------------------------

def torch_spectral(x, w_re, w_im):
    grid, modes = x.shape[-2], w_re.shape[0]
    X = torch.fft.rfft(x, dim=-2)
    Y = torch.zeros(X.shape[:-1] + (w_re.shape[-1],), dtype=X.dtype)
    Y[..., :modes, :] = torch.einsum("...ki,kio->...ko", X[..., :modes, :], torch.complex(w_re, w_im))
    return torch.fft.irfft(Y, n=grid, dim=-2)


@pytest.mark.parametrize("shape,modes,out", [((2, 8, 3), 3, 4), ((2, 8, 3), 5, 2), ((9, 2), 5, 3),
                                             ((1, 7, 1), 1, 1)])
def test_spectral_conv1d_matches_torch_fft_formulation(shape, modes, out):
    x, w_re, w_im = rand(*shape), rand(modes, shape[-1], out), rand(modes, shape[-1], out)
    both(F.spectral_conv1d, torch_spectral, [x, w_re, w_im])


@pytest.mark.parametrize("n", [1, 6, 7])
def test_rfft_irfft_match_torch(n):
    x = rand(3, n)
    both(F.rfft, lambda x: torch.view_as_real(torch.fft.rfft(x)), [x])
    p = rand(3, n // 2 + 1, 2)
    both(lambda p: F.irfft(p, n), lambda p: torch.fft.irfft(torch.view_as_complex(p), n=n), [p])
    if n > 1 and n % 2 == 0:
        both(F.irfft, lambda p: torch.fft.irfft(torch.view_as_complex(p)), [p])


def torch_scan(x, A, B, h0):
    L = x.shape[-2]
    hs, h = [], h0
    for t in range(L):
        a = A if A.ndim == 1 else A[..., t, :]
        b = B if B.ndim == 1 else B[..., t, :]
        h = a * h + b * x[..., t, :]
        hs.append(h)
    return torch.stack(hs, dim=-2)


@pytest.mark.parametrize("form", ["shared", "var", "mixed"])
def test_selective_scan_matches_torch_loop(form):
    x = rand(2, 6, 4)
    A = rng.uniform(0.2, 0.95, (4,) if form != "var" else x.shape)
    B = rand(*x.shape) if form != "shared" else rand(4)
    h0 = rand(2, 4)
    both(F.selective_scan, torch_scan, [x, A, B, h0])
    both(lambda x, A, B: F.selective_scan(x, A, B), lambda x, A, B: torch_scan(x, A, B, torch.zeros(2, 4,
                                                                                   dtype=torch.float64)),
         [x, A, B])


# ---- modules --------------------------------------------------------------------------------

@pytest.mark.parametrize("d,kw", [(1, dict(stride=2, padding=1)), (2, dict(padding=(1, 0), dilation=(1, 2), groups=2)),
                                  (2, dict(padding="same", bias=False)), (3, dict(stride=(1, 2, 1)))])
def test_conv_modules_load_torch_weights_and_match(d, kw):
    ours = {1: tl.nn.Conv1d, 2: tl.nn.Conv2d, 3: tl.nn.Conv3d}[d]
    theirs = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[d]
    tl_m, th_m = module_pair(ours(4, 6, 3, **kw), theirs(4, 6, 3, **kw))
    x = rand(2, 4, *([7] * d))
    modules_both(tl_m, th_m, [x])


@pytest.mark.parametrize("d,kw", [(1, dict(stride=2, padding=1, output_padding=1)),
                                  (2, dict(stride=(2, 1), groups=2, dilation=(1, 2))),
                                  (3, dict(stride=2, bias=False))])
def test_conv_transpose_modules_load_torch_weights_and_match(d, kw):
    ours = {1: tl.nn.ConvTranspose1d, 2: tl.nn.ConvTranspose2d, 3: tl.nn.ConvTranspose3d}[d]
    theirs = {1: torch.nn.ConvTranspose1d, 2: torch.nn.ConvTranspose2d, 3: torch.nn.ConvTranspose3d}[d]
    tl_m, th_m = module_pair(ours(4, 6, 3, **kw), theirs(4, 6, 3, **kw))
    x = rand(2, 4, *([4] * d))
    modules_both(tl_m, th_m, [x])


def test_conv_transpose_output_size_matches_torch():
    tl_m, th_m = module_pair(tl.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1),
                             torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1))
    x = rand(1, 2, 4, 5)
    for size in [(7, 9), (8, 10), (1, 3, 8, 9)]:
        both(lambda x: tl_m(x, output_size=size), lambda x: th_m(x, output_size=size), [x])
    with pytest.raises(ShapeError, match="not reachable"):
        tl_m(t64(x), output_size=(9, 9))


@pytest.mark.parametrize("cls", ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"])
def test_conv_default_init_follows_torch_bounds(cls):
    tl.manual_seed(0)
    m = getattr(tl.nn, cls)(6, 8, 3, groups=2)
    ref = getattr(torch.nn, cls)(6, 8, 3, groups=2)
    assert m.weight.shape == tuple(ref.weight.shape) and m.bias.shape == tuple(ref.bias.shape)
    fan_in = m.weight.shape[1] * math.prod(m.weight.shape[2:])
    bound = 1.0 / math.sqrt(fan_in)  # kaiming_uniform(a=sqrt(5)) and the bias rule give the same bound
    w, b = m.weight.numpy(), m.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.8 * bound and abs(w.mean()) < 0.2 * bound
    assert np.abs(ref.weight.detach().numpy()).max() <= bound


def test_pool_modules_match_torch():
    x = rand(2, 3, 9, 8)
    for ours, theirs in [(tl.nn.MaxPool2d(3, 2, 1), torch.nn.MaxPool2d(3, 2, 1)),
                         (tl.nn.MaxPool2d(2, dilation=2), torch.nn.MaxPool2d(2, dilation=2)),
                         (tl.nn.AvgPool2d(3, 2, 1), torch.nn.AvgPool2d(3, 2, 1)),
                         (tl.nn.AvgPool2d(3, 2, 1, count_include_pad=False),
                          torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False))]:
        both(ours, theirs, [x])
    both(tl.nn.MaxPool1d(2), torch.nn.MaxPool1d(2), [rand(2, 3, 9)])
    both(tl.nn.AvgPool1d(3, 1, 1), torch.nn.AvgPool1d(3, 1, 1), [rand(2, 3, 9)])
    both(tl.nn.MaxPool3d(2, 1), torch.nn.MaxPool3d(2, 1), [rand(1, 2, 4, 5, 3)])
    both(tl.nn.AvgPool3d(2), torch.nn.AvgPool3d(2), [rand(1, 2, 4, 5, 4)])


@pytest.mark.parametrize("kw", [dict(), dict(elementwise_affine=False), dict(bias=False)])
def test_layer_norm_module_matches_torch(kw):
    tl_m, th_m = module_pair(tl.nn.LayerNorm((4, 5), eps=1e-3, **kw), torch.nn.LayerNorm((4, 5), eps=1e-3, **kw))
    with torch.no_grad():
        for p in th_m.parameters():
            p.copy_(torch.tensor(rand(*p.shape)))
    tl_m.load_state_dict({k: v.numpy() for k, v in th_m.state_dict().items()})
    modules_both(tl_m, th_m, [rand(3, 4, 5)])


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (8, 3)), ("BatchNorm1d", (4, 3, 5)),
                                       ("BatchNorm2d", (2, 3, 4, 5))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_module_train_and_eval_match_torch(cls, shape, momentum):
    tl_m, th_m = module_pair(getattr(tl.nn, cls)(3, momentum=momentum), getattr(torch.nn, cls)(3, momentum=momentum))
    with torch.no_grad():
        th_m.weight.copy_(torch.tensor(rand(3)))
        th_m.bias.copy_(torch.tensor(rand(3)))
    tl_m.load_state_dict({k: v.numpy() for k, v in th_m.state_dict().items()})
    for step in range(3):
        for p in list(tl_m.parameters()):
            p.grad = None
        th_m.zero_grad()
        modules_both(tl_m, th_m, [rand(*shape) * (1 + step) - step], seed=step)
    for k, v in th_m.state_dict().items():
        close(tl_m.state_dict()[k], v, what=k)
    assert int(tl_m.num_batches_tracked.item()) == 3
    tl_m.eval()
    th_m.eval()
    th_m.zero_grad()
    for p in tl_m.parameters():
        p.grad = None
    modules_both(tl_m, th_m, [rand(*shape)])
    close(tl_m.running_mean, th_m.running_mean, what="eval leaves running stats alone")


@pytest.mark.parametrize("kw", [dict(affine=False), dict(track_running_stats=False)])
def test_batch_norm_module_options_match_torch(kw):
    tl_m, th_m = module_pair(tl.nn.BatchNorm2d(3, **kw), torch.nn.BatchNorm2d(3, **kw))
    assert list(tl_m.state_dict()) == list(th_m.state_dict())
    x = rand(2, 3, 4, 4)
    both(tl_m, th_m, [x])
    tl_m.eval()
    th_m.eval()
    both(tl_m, th_m, [x])


def test_batch_norm_module_rejects_wrong_rank():
    with pytest.raises(ShapeError, match="BatchNorm2d"):
        tl.nn.BatchNorm2d(3)(t64(rand(2, 3, 4)))


def _mha_pair(E=8, H=2, bias=True, batch_first=True):
    torch.manual_seed(0)
    th_m = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=batch_first)
    if bias:  # PyTorch starts the biases at 0; make them count
        with torch.no_grad():
            th_m.in_proj_bias.copy_(torch.randn(3 * E))
            th_m.out_proj.bias.copy_(torch.randn(E))
    return module_pair(tl.nn.MultiheadAttention(E, H, bias=bias, batch_first=batch_first), th_m)


def test_multihead_attention_parameter_names_match_torch():
    tl_m, th_m = _mha_pair()
    assert list(tl_m.state_dict()) == list(th_m.state_dict())
    for n, p in tl_m.named_parameters():
        assert p.shape == tuple(dict(th_m.named_parameters())[n].shape)


def test_multihead_attention_default_init_follows_torch():
    tl.manual_seed(0)
    m = tl.nn.MultiheadAttention(12, 3)
    bound = math.sqrt(6.0 / (12 + 36))
    w = m.in_proj_weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert not m.in_proj_bias.numpy().any() and not m.out_proj.bias.numpy().any()
    assert np.abs(m.out_proj.weight.numpy()).max() <= 1 / math.sqrt(12)


@pytest.mark.parametrize("bias", [True, False])
def test_multihead_attention_self_attention_matches_torch(bias):
    tl_m, th_m = _mha_pair(bias=bias)
    x = rand(2, 5, 8)
    both(lambda x: tl_m(x, x, x)[0], lambda x: th_m(x, x, x, need_weights=False)[0], [x])
    params_close(tl_m, th_m)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
def test_multihead_attention_cross_attention_and_masks_match_torch():
    q, k, v = rand(2, 4, 8), rand(2, 6, 8), rand(2, 6, 8)
    kpm = np.zeros((2, 6), dtype=bool)
    kpm[0, 4:] = True
    kpm[1, 0] = True
    am = rng.random((4, 6)) < 0.3
    am[:, 1:4] = False  # keep allowed keys in every row
    cases = [
        (dict(key_padding_mask=kpm), dict(key_padding_mask=torch.tensor(kpm))),
        (dict(attn_mask=am), dict(attn_mask=torch.tensor(am))),
        (dict(attn_mask=am, key_padding_mask=kpm),
         dict(attn_mask=torch.tensor(am), key_padding_mask=torch.tensor(kpm))),
    ]
    fm = rand(4, 6)
    cases.append((dict(attn_mask=fm), dict(attn_mask=torch.tensor(fm))))
    cases.append((dict(attn_mask=fm, key_padding_mask=kpm), dict(attn_mask=torch.tensor(fm),
                                                                  key_padding_mask=torch.tensor(kpm))))
    am3 = rng.random((2 * 2, 4, 6)) < 0.3
    am3[..., 2] = False
    cases.append((dict(attn_mask=am3), dict(attn_mask=torch.tensor(am3))))
    for ours_kw, theirs_kw in cases:
        tl_m, th_m = _mha_pair()
        y = both(lambda q, k, v: tl_m(q, k, v, **ours_kw)[0],
                 lambda q, k, v: th_m(q, k, v, need_weights=False, **theirs_kw)[0], [q, k, v])
        assert y.shape == (2, 4, 8)
        params_close(tl_m, th_m, f"with {sorted(ours_kw)}")


def test_multihead_attention_is_causal_matches_torch():
    tl_m, th_m = _mha_pair()
    x = rand(2, 5, 8)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    both(lambda x: tl_m(x, x, x, attn_mask=causal.numpy(), is_causal=True, need_weights=False)[0],
         lambda x: th_m(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)[0], [x])


@pytest.mark.parametrize("average", [True, False])
def test_multihead_attention_need_weights_matches_torch(average):
    tl_m, th_m = _mha_pair()
    q, k = rand(2, 4, 8), rand(2, 6, 8)
    kpm = np.zeros((2, 6), dtype=bool)
    kpm[1, 3:] = True
    for i in range(2):
        both(lambda q, k: tl_m(q, k, k, key_padding_mask=kpm, need_weights=True, average_attn_weights=average)[i],
             lambda q, k: th_m(q, k, k, key_padding_mask=torch.tensor(kpm), need_weights=True,
                               average_attn_weights=average)[i], [q, k])


def test_multihead_attention_sequence_first_and_unbatched_match_torch():
    tl_m, th_m = _mha_pair(batch_first=False)
    x = rand(5, 2, 8)
    modules_both(tl_m, th_m, [x, x, x], out=lambda r: r[0])
    x1 = rand(5, 8)
    both(lambda x: tl_m(x, x, x)[0], lambda x: th_m(x, x, x, need_weights=False)[0], [x1])


def test_multihead_attention_errors():
    with pytest.raises(ShapeError, match="multiple of num_heads"):
        tl.nn.MultiheadAttention(10, 3)
    m = tl.nn.MultiheadAttention(8, 2, batch_first=True)
    x = tl.zeros(2, 5, 8)
    with pytest.raises(ShapeError, match="attn_mask"):
        m(x, x, x, attn_mask=np.ones((4, 5), dtype=bool))
    with pytest.raises(ShapeError, match="key_padding_mask"):
        m(x, x, x, key_padding_mask=np.ones((2, 4), dtype=bool))


def test_spectral_conv1d_module_init_and_torch_formulation():
    tl.manual_seed(3)
    m = tl.nn.SpectralConv1d(3, 4, modes=5)
    assert [n for n, _ in m.named_parameters()] == ["w_re", "w_im"]
    for p in m.parameters():
        a = p.numpy()
        assert a.shape == (5, 3, 4) and a.min() >= 0.0 and a.max() < 1.0 / 12 and a.max() > 0.5 / 12
    m.to(dtype=tl.float64)
    w_re, w_im = th(m.w_re.numpy()), th(m.w_im.numpy())
    x = rand(2, 10, 3)
    both(m, lambda x: torch_spectral(x, w_re, w_im), [x])
    close(m.w_re.grad, w_re.grad)
    close(m.w_im.grad, w_im.grad)


def test_selective_scan_module_matches_torch_loop():
    tl.manual_seed(5)
    m = tl.nn.SelectiveScan(4).to(dtype=tl.float64)
    A = m.A.numpy()
    assert np.all((A > 0.5 - 1e-6) & (A < 0.99 + 1e-6))
    np.testing.assert_allclose(m.B.numpy(), 1.0 - A, atol=1e-6)
    a_logit, b = th(m.A_logit.numpy()), th(m.B.numpy())
    x, h0 = rand(3, 7, 4), rand(3, 4)
    both(lambda x, h0: m(x, h0), lambda x, h0: torch_scan(x, torch.sigmoid(a_logit), b, h0), [x, h0])
    close(m.A_logit.grad, a_logit.grad)
    close(m.B.grad, b.grad)
