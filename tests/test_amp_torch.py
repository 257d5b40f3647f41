"""CPU autocast (float16) against torch's: which ops run in which dtype, the values, gradients reaching
float32 parameters, nesting and threads, and a training loop with GradScaler."""

import threading

import numpy as np
import pytest
import torch

import torchlean as tl

# float16 results: a few units of float16's 2^-11; bfloat16's: a few of 2^-8 (torch's bfloat16 kernels round
# their inner steps differently: a product of two bfloat16 results can differ by 2 units of each)
TOL = {"float16": dict(rtol=2e-2, atol=2e-2), "bfloat16": dict(rtol=6e-2, atol=6e-2)}
LOW = [pytest.param("float16", id="f16"),
       pytest.param("bfloat16", id="bf16", marks=pytest.mark.skipif(tl.bfloat16.np is None, reason="needs ml_dtypes"))]


def _same(a, b, low="float16"):
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], (a.dtype, b.dtype)
    np.testing.assert_allclose(a.detach().float().numpy(), b.detach().float().numpy(), **TOL[low])


def _pair(*shape, seed=0, dtype=np.float32):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return tl.tensor(a), torch.tensor(a)


# (name, f(m, F, xs) -> tensor, input shapes): each run under autocast on both sides
CASES = [
    ("linear", lambda m, F, a, w: F.linear(a, w), [(4, 8), (3, 8)]),
    ("matmul op", lambda m, F, a, b: a @ b, [(4, 8), (8, 3)]),
    ("torch.matmul", lambda m, F, a, b: m.matmul(a, b), [(2, 4, 8), (8, 3)]),
    ("mm method", lambda m, F, a, b: a.mm(b), [(4, 8), (8, 3)]),
    ("bmm", lambda m, F, a, b: m.bmm(a, b), [(2, 4, 8), (2, 8, 3)]),
    ("addmm", lambda m, F, c, a, b: m.addmm(c, a, b), [(4, 3), (4, 8), (8, 3)]),
    ("baddbmm", lambda m, F, c, a, b: m.baddbmm(c, a, b), [(2, 4, 3), (2, 4, 8), (2, 8, 3)]),
    ("conv1d", lambda m, F, x, w: F.conv1d(x, w, padding=1), [(2, 3, 9), (4, 3, 3)]),
    ("conv2d", lambda m, F, x, w: F.conv2d(x, w, stride=2), [(2, 3, 7, 7), (4, 3, 3, 3)]),
    ("conv_transpose2d", lambda m, F, x, w: F.conv_transpose2d(x, w), [(2, 3, 5, 5), (3, 4, 3, 3)]),
    ("prelu", lambda m, F, x, w: F.prelu(x, w), [(2, 3, 4), (3,)]),
    ("sdpa", lambda m, F, q, k: F.scaled_dot_product_attention(q, k, k, is_causal=True), [(1, 2, 5, 8), (1, 2, 5, 8)]),
    ("mse_loss", lambda m, F, a, b: F.mse_loss(F.linear(a, b), m.zeros(4, 3)), [(4, 8), (3, 8)]),
    ("l1_loss", lambda m, F, a, b: F.l1_loss(F.linear(a, b), m.ones(4, 3)), [(4, 8), (3, 8)]),
    ("smooth_l1_loss", lambda m, F, a, b: F.smooth_l1_loss(a @ b, m.ones(4, 3)), [(4, 8), (8, 3)]),
    ("huber_loss", lambda m, F, a, b: F.huber_loss(a @ b, m.ones(4, 3)), [(4, 8), (8, 3)]),
    ("cross_entropy", lambda m, F, a, b: F.cross_entropy(a @ b, m.tensor([0, 1, 2, 0])), [(4, 8), (8, 3)]),
    ("nll_loss", lambda m, F, a, b: F.nll_loss(F.log_softmax(a @ b, 1), m.tensor([0, 2, 1, 0])), [(4, 8), (8, 3)]),
    ("bce_with_logits", lambda m, F, a, b: F.binary_cross_entropy_with_logits(a @ b, m.ones(4, 3)), [(4, 8), (8, 3)]),
    ("kl_div", lambda m, F, a, b: F.kl_div(F.log_softmax(a @ b, 1), F.softmax(a @ b, 1), reduction="batchmean"),
     [(4, 8), (8, 3)]),
    ("cat promotes", lambda m, F, a, b: m.cat([a @ b, a[:, :3]]), [(4, 8), (8, 3)]),
    ("stack promotes", lambda m, F, a, b: m.stack([a @ b, a[:, :3]]), [(4, 8), (8, 3)]),
    ("cat of halves stays", lambda m, F, a, b: m.cat([a @ b, a @ b]), [(4, 8), (8, 3)]),
    ("unlisted ops run as given", lambda m, F, a, b: F.layer_norm(F.gelu(a @ b) + 1, (3,)).softmax(-1),
     [(4, 8), (8, 3)]),
    ("float32 ops after a half", lambda m, F, a, b: (a @ b).float() * a[:, :3], [(4, 8), (8, 3)]),
    ("float64 is left alone", lambda m, F, a, b: a.double() @ b.double(), [(4, 8), (8, 3)]),
    ("prod in float32", lambda m, F, a, b: m.prod(a @ b, 1), [(4, 8), (8, 3)]),
    ("linalg inv in float32", lambda m, F, a, b: m.linalg.inv(a @ b.T + 3 * m.eye(4)), [(4, 8), (4, 8)]),
]


@pytest.mark.parametrize("low", LOW)
@pytest.mark.parametrize("name,f,shapes", CASES, ids=[c[0] for c in CASES])
def test_autocast_cpu_op_dtypes_and_values_match_torch(name, f, shapes, low):
    pairs = [_pair(*s, seed=k) for k, s in enumerate(shapes)]
    outs = []
    for side, m in ((0, tl), (1, torch)):
        with m.autocast("cpu", dtype=getattr(m, low)):
            outs.append(f(m, m.nn.functional, *[p[side] for p in pairs]))
    _same(outs[0], outs[1], low)


@pytest.mark.parametrize("low", LOW)
def test_modules_under_autocast_match_torch_and_gradients_reach_float32_parameters(low):
    res = []
    for m in (tl, torch):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Conv2d(2, 4, 3), m.nn.ReLU(), m.nn.Flatten(), m.nn.Linear(4 * 5 * 5, 3))
        with m.no_grad():
            for k, p in enumerate(net.parameters()):
                p.copy_(m.tensor(np.random.default_rng(k).standard_normal(tuple(p.shape)).astype(np.float32) * 0.2))
        x = m.tensor(np.random.default_rng(9).standard_normal((3, 2, 7, 7)).astype(np.float32))
        with m.autocast("cpu", dtype=getattr(m, low)):
            out = net(x)
            loss = m.nn.functional.cross_entropy(out, m.tensor([0, 1, 2]))
        loss.backward()
        res.append((out, loss, [p.grad for p in net.parameters()], [p.dtype for p in net.parameters()]))
    (oa, la, ga, da), (ob, lb, gb, db) = res
    _same(oa, ob, low)
    _same(la, lb, low)
    assert [str(d).split(".")[-1] for d in da] == [str(d).split(".")[-1] for d in db] == ["float32"] * 4
    for a, b in zip(ga, gb):
        _same(a, b, low)


def test_autocast_nests_disables_and_decorates_like_torch():
    a, b = _pair(4, 8), _pair(8, 3, seed=1)
    got = []
    for side, m in ((0, tl), (1, torch)):
        x, y = a[side], b[side]
        dts = []
        with m.autocast("cpu", dtype=m.float16):
            dts.append((x @ y).dtype)
            with m.autocast("cpu", enabled=False):
                dts.append((x @ y).dtype)
                dts.append(m.is_autocast_enabled("cpu"))
            dts.append((x @ y).dtype)
            dts.append(m.get_autocast_dtype("cpu"))

        @m.autocast("cpu", dtype=m.float16)
        def f(u, v):
            return u @ v
        dts += [f(x, y).dtype, (x @ y).dtype, m.is_autocast_enabled("cpu")]
        got.append([str(d).split(".")[-1] for d in dts])
    assert got[0] == got[1] == ["float16", "float32", "False", "float16", "float16", "float16", "float32", "False"]


def test_autocast_is_per_thread():
    seen = {}
    x = tl.ones(2, 3)

    def other():
        seen["other"] = (x @ x.T).dtype

    with tl.autocast("cpu", dtype=tl.float16):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        seen["main"] = (x @ x.T).dtype
    assert seen == {"other": tl.float32, "main": tl.float16}


def _train(m, seed, steps, act, make_opt, low, scaler_kw=None):
    """An MLP 10-32-4 with fixed weights trained ``steps`` steps under CPU autocast in ``low`` (with a
    GradScaler when ``scaler_kw``): ``(losses, weights, scaler state)``."""
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((steps, 16, 10)).astype(np.float32)
    ys = rng.integers(0, 4, (steps, 16))
    w0 = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((32, 10), (32,), (4, 32), (4,))]
    net = m.nn.Sequential(m.nn.Linear(10, 32), getattr(m.nn, act)(), m.nn.Linear(32, 4))
    with m.no_grad():
        for p, w in zip(net.parameters(), w0):
            p.copy_(m.tensor(w))
    opt = make_opt(m, net.parameters())
    scaler = m.amp.GradScaler("cpu", **scaler_kw) if scaler_kw else None
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        with m.autocast("cpu", dtype=getattr(m, low)):
            loss = m.nn.functional.cross_entropy(net(m.tensor(x)), m.tensor(y))
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy().copy() for p in net.parameters()], scaler.state_dict() if scaler else None


def test_training_under_autocast_with_grad_scaler_tracks_torch():
    """An MLP trained 6 steps under float16 autocast with a GradScaler: losses and weights follow torch's
    within float16 error, and the scaler's state is the same."""
    def sgd(m, ps):
        return m.optim.SGD(ps, lr=0.1, momentum=0.9)
    (la, pa, sa), (lb, pb, sb) = (_train(m, 3, 6, "Tanh", sgd, "float16", dict(init_scale=2.0 ** 14, growth_interval=2))
                                  for m in (tl, torch))
    np.testing.assert_allclose(la, lb, rtol=1e-2, atol=1e-3)
    for a, b in zip(pa, pb):
        np.testing.assert_allclose(a, b, rtol=1e-2, atol=2e-3)
    assert sa == sb


# ---- bfloat16 tensors on the CPU (storage through ml_dtypes; float32 arithmetic, one rounding per op) ------

needs_bf16 = pytest.mark.skipif(tl.bfloat16.np is None, reason="needs ml_dtypes")

BF16_OPS = [
    ("add", lambda m, a, b: a + b), ("mul", lambda m, a, b: a * b), ("div", lambda m, a, b: a / (b.abs() + 1)),
    ("exp", lambda m, a, b: a.exp()), ("tanh", lambda m, a, b: a.tanh()), ("gelu", lambda m, a, b: m.nn.functional.gelu(a)),
    ("sum", lambda m, a, b: a.sum(1)), ("mean", lambda m, a, b: a.mean()), ("softmax", lambda m, a, b: a.softmax(-1)),
    ("matmul", lambda m, a, b: a @ b.T), ("layer_norm", lambda m, a, b: m.nn.functional.layer_norm(a, (6,))),
    ("index", lambda m, a, b: a[1:, ::2].reshape(-1)), ("cat", lambda m, a, b: m.cat([a, b], 0)),
    ("where", lambda m, a, b: m.where(a > b, a, b)), ("max", lambda m, a, b: a.max(0).values),
]


@needs_bf16
@pytest.mark.parametrize("name,f", BF16_OPS, ids=[c[0] for c in BF16_OPS])
def test_bfloat16_ops_and_gradients_match_torch(name, f):
    a, b = _pair(5, 6, seed=1), _pair(5, 6, seed=2)
    outs, grads = [], []
    for side, m in ((0, tl), (1, torch)):
        x = a[side].to(m.bfloat16).requires_grad_(True)
        y = b[side].to(m.bfloat16)
        out = f(m, x, y)
        (out.float() ** 2).sum().backward()
        outs.append(out)
        grads.append(x.grad)
    _same(outs[0], outs[1], "bfloat16")
    _same(grads[0], grads[1], "bfloat16")


@needs_bf16
def test_bfloat16_tensors_cast_print_and_save_like_torch(tmp_path):
    a, b = _pair(2, 3)
    x, y = a[0].bfloat16(), b[0].bfloat16()
    assert x.dtype == tl.bfloat16 and x.is_floating_point() and x.element_size() == 2
    assert x.float().tolist() == y.float().tolist()             # the same rounding to bfloat16 as torch
    assert repr(x).endswith("dtype=torchlean.bfloat16)") and repr(y).endswith("dtype=torch.bfloat16)")
    path = str(tmp_path / "w.pt")
    tl.save({"w": x}, path)
    back = tl.load(path)["w"]
    assert back.dtype == tl.bfloat16 and back.float().tolist() == x.float().tolist()


@needs_bf16
def test_training_under_bfloat16_autocast_tracks_torch():
    def adamw(m, ps):
        return m.optim.AdamW(ps, lr=1e-2)
    (la, pa, _), (lb, pb, _) = (_train(m, 5, 5, "GELU", adamw, "bfloat16") for m in (tl, torch))
    np.testing.assert_allclose(la, lb, rtol=3e-2, atol=1e-2)
    for a, b in zip(pa, pb):
        np.testing.assert_allclose(a, b, rtol=3e-2, atol=5e-3)


@needs_bf16
def test_bfloat16_off_the_cpu_is_refused_naming_the_op():
    x = tl.ones(2).bfloat16()
    with pytest.raises(tl.errors.DTypeError, match="to_device: bfloat16 tensors are supported on the CPU only"):
        x.to("cuda")


@pytest.mark.parametrize("low", LOW)
def test_every_op_in_half_precision_is_within_the_unit_roundoff_of_its_meaning(low):
    """The registry's contract in float16 / bfloat16 (torchlean check --dtype): every op's forward and VJP
    on rounded inputs, against the float64 spec on the same inputs, element by element within u |y64| plus
    the float32 kernel's allowance; and the bound is not loose: typical errors use about half of it."""
    from torchlean.testing.checks import run_checks
    res = run_checks("cpu", dtype=low)
    bad = [f"{r.op} {r.check} {r.detail}" for r in res if not r.passed]
    assert not bad, bad[:10]
    assert len({r.op for r in res}) > 100
    units = sorted(r.rel_err for r in res if "skipped" not in r.check)
    assert 0.2 < units[len(units) // 2] < 0.8          # median error in units of u |y64|


@needs_bf16
def test_half_precision_files_move_between_torch_and_torchlean(tmp_path):
    """safetensors F16/BF16 written by torch load here, ours load in torch; torch's .pt files with half
    tensors load here, bit for bit."""
    from safetensors.torch import load_file, save_file
    t = {"a": torch.randn(3, 4).bfloat16(), "b": torch.randn(5).half()}
    save_file(t, str(tmp_path / "t.safetensors"))
    torch.save(t, str(tmp_path / "t.pt"))
    for f in ("t.safetensors", "t.pt"):
        got = tl.load(str(tmp_path / f))
        assert (got["a"].dtype, got["b"].dtype) == (tl.bfloat16, tl.float16)
        for k in t:
            np.testing.assert_array_equal(got[k].float().numpy(), t[k].float().numpy())
    ours = {"a": tl.tensor(np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)).bfloat16(),
            "b": tl.tensor(np.linspace(-1, 1, 5, dtype=np.float32)).half()}
    tl.save(ours, str(tmp_path / "o.safetensors"))
    back = load_file(str(tmp_path / "o.safetensors"))
    assert (back["a"].dtype, back["b"].dtype) == (torch.bfloat16, torch.float16)
    for k in ours:
        np.testing.assert_array_equal(back[k].float().numpy(), ours[k].float().numpy())


@needs_bf16
def test_reference_step_measures_a_mixed_precision_step_against_float64():
    tl.manual_seed(0)
    net = tl.nn.Sequential(tl.nn.Conv2d(2, 4, 3), tl.nn.ReLU(), tl.nn.Flatten(), tl.nn.Linear(4 * 5 * 5, 3))
    before = [p.detach().clone() for p in net.parameters()]
    x, y = tl.randn(8, 2, 7, 7), tl.randint(0, 3, (8,))

    def loss_fn(m, a, b):
        return tl.nn.functional.cross_entropy(m(a), b)

    r16 = tl.amp.reference_step(net, loss_fn, x, y, dtype=tl.float16)
    rbf = tl.amp.reference_step(net, loss_fn, x, y)                  # the CPU default: bfloat16
    assert (r16["dtype"], rbf["dtype"]) == ("float16", "bfloat16")
    assert sorted(rbf["grads"]) == ["0.bias", "0.weight", "3.bias", "3.weight"]
    for r in (r16, rbf):
        assert r["loss_rel_err"] < 8 * r["unit_roundoff"] and r["worst"][1] < 32 * r["unit_roundoff"]
    assert rbf["worst"][1] > r16["worst"][1]                         # bfloat16 keeps 3 fewer bits
    assert all(p.grad is None for p in net.parameters())               # the model is left as it was
    assert all(tl.equal(a, b) for a, b in zip(before, net.parameters()))


@needs_bf16
@pytest.mark.parametrize("name,kw", [("SGD", {"momentum": 0.9}), ("Adam", {}), ("AdamW", {"weight_decay": 0.1}),
                                     ("RMSprop", {}), ("Adagrad", {}), ("Adadelta", {"lr": 1.0})])
def test_optimizers_on_bfloat16_parameters_track_torch(name, kw):
    """Optimizer steps on bfloat16 parameters and states, rounded after each operation as torch's foreach
    steps round: 10 steps stay within a few bfloat16 units (2^-8 relative) of torch's, and move the
    parameters by far more than that."""
    res = []
    start = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    for m in (tl, torch):
        p = m.tensor(start).to(m.bfloat16).requires_grad_(True)
        opt = getattr(m.optim, name)([p], **{"lr": 0.01, **kw})
        for _ in range(10):
            opt.zero_grad()
            (p.float() ** 3).sum().backward()
            opt.step()
        assert str(p.dtype).endswith("bfloat16")
        res.append(p.detach().float().numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=2 ** -4, atol=2 ** -8)
    assert np.abs(res[1] - start).max() > 10 * np.abs(res[1] - res[0]).max()     # the steps did move them


@needs_bf16
def test_lstm_layers_run_in_bfloat16_under_cpu_autocast_and_grus_do_not_like_torch():
    res = []
    for m in (tl, torch):
        m.manual_seed(0)
        lstm, gru = m.nn.LSTM(4, 5, batch_first=True), m.nn.GRU(4, 5, batch_first=True)
        with m.no_grad():
            for k, p in enumerate([*lstm.parameters(), *gru.parameters()]):
                p.copy_(m.tensor(np.random.default_rng(k).standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
        x = m.tensor(np.random.default_rng(9).standard_normal((2, 3, 4)).astype(np.float32))
        with m.autocast("cpu", dtype=m.bfloat16):
            y, (h, c) = lstm(x)
            z, _ = gru(x)
        res.append((y, h, c, z))
    for a, b in zip(*res):
        _same(a, b, "bfloat16")
    assert str(res[0][0].dtype).endswith("bfloat16") and str(res[0][3].dtype).endswith("float32")
