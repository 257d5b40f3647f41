"""tl.compile with torch.compile's contract: compiled calls equal eager ones (values, gradients,
optimizer trajectories, dropout masks), parameters and buffers are read at every call, and what
cannot be compiled faithfully runs eagerly with one warning (or raises under fullgraph=True)."""

import warnings

import numpy as np
import pytest

import torchlean as tl
import torchlean.nn as nn
import torchlean.nn.functional as F
from torchlean.ir.jit import CACHE_SIZE_LIMIT, CompileWarning, OptimizedModule


def _mlp(seed=0):
    tl.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 3))


def _train(model, steps, x, y, opt_cls=tl.optim.Adam):
    opt = opt_cls(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _warnings(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(m.message) for m in w if issubclass(m.category, CompileWarning)]


def test_compiled_training_follows_the_eager_trajectory():
    x, y = tl.randn(40, 6), tl.randint(0, 3, (40,))
    eager, compiled = _mlp(), _mlp()
    cm = tl.compile(compiled)
    assert isinstance(cm, OptimizedModule)
    a, b = _train(eager, 12, x, y), _train(cm, 12, x, y)
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    assert cm.compiled_keys() == 1
    for (n, p), q in zip(eager.named_parameters(), compiled.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=n)


def test_compiled_training_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((40, 6)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 3, 40)
    tm = torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 3))
    ours = _mlp()
    ours.load_state_dict({k: tl.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    topt = torch.optim.Adam(tm.parameters(), lr=1e-2)
    ref = []
    for _ in range(10):
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        topt.step()
        ref.append(loss.item())
    got = _train(tl.compile(ours), 10, tl.tensor(x), tl.tensor(y))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_the_first_call_is_eager_and_later_calls_compiled():
    lin = nn.Linear(3, 2)
    cm = tl.compile(lin)
    x = tl.randn(4, 3)
    y1 = cm(x)
    assert cm.compiled_keys() == 1
    y2 = cm(x)
    np.testing.assert_allclose(y2.detach().numpy(), y1.detach().numpy(), rtol=1e-6)
    assert y2.grad_fn is not None
    with tl.no_grad():       # another key (grad mode), compiled on its own
        cm(x), cm(x)
    assert cm.compiled_keys() == 2
    cm(tl.randn(7, 3))       # another shape: traced again
    assert cm.compiled_keys() == 3


def test_input_gradients_and_two_calls_before_one_backward():
    # A siamese step: the same compiled encoder on two inputs, then one backward.
    enc = _mlp()
    ref = _mlp()
    cm = tl.compile(enc)
    a0, b0 = np.random.default_rng(2).standard_normal((2, 5, 6)).astype(np.float32)
    for _ in range(2):       # the first round traces; the second runs compiled
        for m in (enc, ref):
            m.zero_grad()
        grads = []
        for model in (cm, ref):
            a, b = tl.tensor(a0, requires_grad=True), tl.tensor(b0, requires_grad=True)
            d = ((model(a) - model(b)) ** 2).sum()
            d.backward()
            grads.append((a.grad.numpy(), b.grad.numpy()))
        for g, r in zip(grads[0], grads[1]):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
        for p, q in zip(enc.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert cm.compiled_keys() == 1


def test_dropout_draws_the_masks_eager_execution_draws():
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 4))
    cm = tl.compile(model)
    x = tl.ones(3, 8)
    tl.manual_seed(5)
    got = [cm(x).detach().numpy() for _ in range(4)]
    tl.manual_seed(5)
    ref = [model(x).detach().numpy() for _ in range(4)]
    assert cm.compiled_keys() == 1
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-7)
    assert not np.allclose(got[1], got[2])      # fresh masks on every call


def test_buffers_are_read_at_every_call():
    tl.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    cm = tl.compile(model)
    x = tl.randn(16, 4)
    _, msgs = _warnings(lambda: [cm(x) for _ in range(2)])
    assert len(msgs) == 1 and "running_mean" in msgs[0]      # training mode updates buffers: eager, one warning
    model.eval()
    e1 = cm(x), cm(x)                                        # eval: compiled
    model.train()
    for _ in range(3):
        cm(tl.randn(16, 4) * 3.0 + 1.0)                       # the running statistics move
    model.eval()
    np.testing.assert_allclose(cm(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(e1[1].detach().numpy(), cm(x).detach().numpy())
    assert cm.compiled_keys() == 1


def test_integer_inputs_run_eagerly_with_one_warning():
    emb = nn.Embedding(10, 3)
    cm = tl.compile(emb)
    outs, msgs = _warnings(lambda: [cm(tl.tensor([1, 2])), cm(tl.tensor([3, 4])), cm(tl.tensor([5, 6]))])
    assert len(msgs) == 1 and "integer" in msgs[0]
    np.testing.assert_allclose(outs[1].detach().numpy(), emb.weight.detach().numpy()[[3, 4]])
    with pytest.raises(tl.TorchLeanError, match="fullgraph"):
        tl.compile(emb, fullgraph=True)(tl.tensor([1]))


def test_random_numbers_outside_dropout_are_not_frozen():
    def noisy(x):
        return x + tl.randn_like(x)
    f = tl.compile(noisy)
    x = tl.zeros(5)
    (a, b), msgs = _warnings(lambda: (f(x), f(x)))
    assert len(msgs) == 1 and "random" in msgs[0]
    assert not np.allclose(a.numpy(), b.numpy())


def test_function_and_decorator_forms():
    @tl.compile
    def f(x, k=2.0):
        return (x * k).sin()

    @tl.compile(mode="max-autotune-no-cudagraphs", dynamic=True)
    def g(x):
        return {"double": x * 2, "pair": (x, x.exp())}

    x = tl.linspace(0, 1, 5)
    for _ in range(2):
        np.testing.assert_allclose(f(x).numpy(), np.sin(2 * x.numpy()), rtol=1e-6)
        np.testing.assert_allclose(f(x, k=3.0).numpy(), np.sin(3 * x.numpy()), rtol=1e-6)
        out = g(x)
        np.testing.assert_allclose(out["pair"][1].numpy(), np.exp(x.numpy()), rtol=1e-6)
    assert f.__name__ == "f"


def test_the_wrapper_is_the_module():
    model = _mlp()
    cm = tl.compile(model)
    assert list(cm.state_dict()) == ["_orig_mod." + k for k in model.state_dict()]
    model.vocab = ["a", "b"]
    assert cm._orig_mod is model and cm.vocab is model.vocab         # attributes come from the original
    assert [id(p) for p in cm.parameters()] == [id(p) for p in model.parameters()]
    assert tl.compile(model, disable=True) is model


def test_the_recompile_limit_falls_back_to_eager():
    lin = nn.Linear(2, 2)
    cm = tl.compile(lin)
    outs, msgs = _warnings(lambda: [cm(tl.ones(n, 2)) for n in range(1, CACHE_SIZE_LIMIT + 3)])
    assert len(msgs) == 1 and "recompile limit" in msgs[0]
    np.testing.assert_allclose(outs[-1].detach().numpy(), lin(tl.ones(CACHE_SIZE_LIMIT + 2, 2)).detach().numpy())


def test_bad_arguments_are_refused():
    with pytest.raises(tl.TorchLeanError, match="mode"):
        tl.compile(nn.Linear(2, 2), mode="fastest")
    with pytest.raises(tl.TorchLeanError, match="backend"):
        tl.compile(nn.Linear(2, 2), backend=lambda gm, inputs: gm)
    with pytest.raises(tl.TorchLeanError, match="Module or a function"):
        tl.compile(3)


def test_the_program_s_own_errors_propagate():
    cm = tl.compile(nn.Linear(3, 2))
    with pytest.raises(tl.errors.ShapeError):
        cm(tl.ones(4, 5))


def test_a_second_backward_through_a_compiled_call_is_refused_clearly():
    cm = tl.compile(nn.Linear(3, 1))
    x = tl.ones(2, 3)
    cm(x)
    y = cm(x).sum()
    y.backward(retain_graph=True)
    with pytest.raises(tl.TorchLeanError, match="retain_graph"):
        y.backward()


@pytest.mark.cuda
def test_reduce_overhead_replays_cuda_graphs():
    pytest.importorskip("cupy")
    if not tl.cuda.is_available():
        pytest.skip("no GPU")
    x, y = tl.randn(40, 6).cuda(), tl.randint(0, 3, (40,)).cuda()
    eager, compiled = _mlp().cuda(), _mlp().cuda()
    cm = tl.compile(compiled, mode="reduce-overhead")
    a, b = _train(eager, 8, x, y), _train(cm, 8, x, y)
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    entry = next(iter(cm._compiled.cache.values()))
    assert entry.slots[0].program._graph_mode is not None


@pytest.mark.parametrize("name", ["encoder", "cnn", "lstm", "self_attention"])
def test_common_layers_compile_and_match_eager(name):
    tl.manual_seed(3)
    model, args = {
        "encoder": lambda: (nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                                                             batch_first=True), 2),
                            (tl.randn(2, 7, 32),)),
        "cnn": lambda: (nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                      nn.Linear(64, 3)), (tl.randn(2, 1, 8, 8),)),
        "lstm": lambda: (nn.LSTM(5, 8, num_layers=2, batch_first=True), (tl.randn(3, 6, 5),)),
        "self_attention": lambda: (nn.MultiheadAttention(16, 2, batch_first=True), (tl.randn(2, 5, 16),) * 3),
    }[name]()
    cm = tl.compile(model, fullgraph=True)
    for _ in range(2):
        out = cm(*args)
    ref = model(*args)
    out, ref = (out[0], ref[0]) if isinstance(out, tuple) else (out, ref)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    got = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    ref.sum().backward()
    for g, p in zip(got, model.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert cm.compiled_keys() == 1
