"""Autograd semantics, Module bookkeeping, optimizers' contracts, tl.save / tl.load."""

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import torchlean as tl
import torchlean.nn.functional as F
from torchlean.autograd import Tape
from torchlean.errors import AutogradError, DomainError, TorchLeanError


def f64(a, requires_grad=True):
    return tl.tensor(np.asarray(a, dtype=np.float64), dtype=tl.float64, requires_grad=requires_grad)


# ---- autograd semantics --------------------------------------------------------------------

def test_grad_accumulates_over_two_backward_calls():
    x = f64([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0, 9.0])


def test_backward_twice_without_retain_graph_raises():
    x = f64([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(AutogradError, match="second time"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = f64([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])


def test_backward_through_a_released_intermediate_raises():
    x = f64([1.0, 2.0])
    h = x * x
    h.sum().backward()
    with pytest.raises(AutogradError):
        (h * 2.0).sum().backward()


def test_backward_of_non_scalar_needs_gradient():
    x = f64([1.0, 2.0])
    y = x * 2.0
    with pytest.raises(AutogradError, match="scalar"):
        y.backward()
    y.backward(gradient=tl.tensor([1.0, 10.0], dtype=tl.float64))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 20.0])


def test_backward_of_tensor_without_grad_raises():
    with pytest.raises(AutogradError):
        tl.ones(2).sum().backward()


def test_no_grad_records_nothing():
    x = f64([1.0, 2.0])
    with tl.no_grad():
        y = (x * x).sum()
    assert not y.requires_grad and y.is_leaf
    with pytest.raises(AutogradError):
        y.backward()

    @tl.no_grad()
    def f(t):
        return t * 2.0

    assert not f(x).requires_grad
    assert (x * 2.0).requires_grad  # grad mode is restored


def test_detach_cuts_the_graph():
    x = f64([1.0, 2.0])
    y = (x.detach() * x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0])


def test_int_tensors_cannot_require_grad():
    with pytest.raises(tl.errors.DTypeError):
        tl.tensor([1, 2], requires_grad=True)
    with pytest.raises(tl.errors.DTypeError):
        tl.nn.Parameter(tl.tensor([1, 2]))


# ---- random DAGs: gradients vs torch, dense vs sparse tape backward ------------------------

UNARY = ["tanh", "sin", "sigmoid", "neg", "square"]
BINARY = ["add", "mul", "sub", "bcast_mul", "matvec"]


MIX = np.array([[0.5, -0.2, 0.1], [0.3, 0.4, -0.6], [-0.1, 0.2, 0.7]])


def _build(program, leaves, const):
    """Evaluate ``program`` over ``leaves``; ``const`` turns a float64 array into a constant tensor."""
    nodes = list(leaves)
    mix = const(MIX)
    for op, i, j in program:
        a, b = nodes[i % len(nodes)], nodes[j % len(nodes)]
        if op == "tanh":
            y = a.tanh()
        elif op == "sin":
            y = a.sin()
        elif op == "sigmoid":
            y = a.sigmoid()
        elif op == "neg":
            y = -a
        elif op == "square":
            y = a * a
        elif op == "add":
            y = a + b
        elif op == "mul":
            y = a * b
        elif op == "sub":
            y = a - b
        elif op == "bcast_mul":  # (3,) * (3, 1) then summed back to (3,)
            y = (a * b.reshape(3, 1)).sum(0) * 0.5
        else:  # matvec: a fixed (3, 3) mix of a, plus b
            y = mix @ a + b
        nodes.append(y)
    return nodes


PROGRAM = st.lists(st.tuples(st.sampled_from(UNARY + BINARY), st.integers(0, 50), st.integers(0, 50)),
                   min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(program=PROGRAM, seed=st.integers(0, 2 ** 31 - 1), n_leaves=st.integers(1, 3))
def test_random_dag_gradients_match_torch(program, seed, n_leaves):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    vals = [rng.standard_normal(3) for _ in range(n_leaves)]
    ours = [f64(v) for v in vals]
    theirs = [torch.tensor(v, requires_grad=True) for v in vals]
    n1 = _build(program, ours, lambda a: tl.tensor(a, dtype=tl.float64))
    n2 = _build(program, theirs, torch.tensor)
    # The output mixes several nodes, so shared subgraphs accumulate from many paths.
    picks = sorted(set(rng.integers(0, len(n1), size=3).tolist()) | {len(n1) - 1})
    w = rng.standard_normal((len(picks), 3))
    out = sum(((n1[k] * tl.tensor(w[i], dtype=tl.float64)).sum() for i, k in enumerate(picks)), start=0.0)
    out_t = sum(((n2[k] * torch.tensor(w[i])).sum() for i, k in enumerate(picks)), start=0.0)
    np.testing.assert_allclose(float(out), float(out_t.detach()) if hasattr(out_t, 'detach') else out_t,
                               rtol=1e-10)
    if not isinstance(out, tl.Tensor) or not out.requires_grad:
        return
    out.backward()
    out_t.backward()
    for a, b in zip(ours, theirs):
        if b.grad is None:
            assert a.grad is None or np.allclose(a.grad.numpy(), 0)
        else:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


TAPE_OPS = ["tanh", "sin", "exp", "add", "mul", "sub", "scale"]


@settings(max_examples=40, deadline=None)
@given(program=st.lists(st.tuples(st.sampled_from(TAPE_OPS), st.integers(0, 50), st.integers(0, 50)),
                        min_size=1, max_size=15),
       seed=st.integers(0, 2 ** 31 - 1), n_leaves=st.integers(1, 4), frozen=st.integers(0, 3))
def test_tape_dense_and_sparse_backward_agree(program, seed, n_leaves, frozen):
    rng = np.random.default_rng(seed)
    t = Tape()
    leaves = [t.leaf(rng.standard_normal(4) * 0.5, requires_grad=(k != frozen)) for k in range(n_leaves)]
    ids = list(leaves)
    for op, i, j in program:
        a, b = ids[i % len(ids)], ids[j % len(ids)]
        if op in ("add", "mul", "sub"):
            ids.append(t.op(op, a, b))
        elif op == "scale":
            ids.append(t.op("scale", a, c=-1.5))
        else:
            ids.append(t.op(op, a))
    out = t.op("sum", ids[-1])
    seed_g = np.asarray(rng.standard_normal(), dtype=np.float64)
    dense = t.backward(out, seed=seed_g)
    assert len(dense) == len(t)
    retain = sorted(set(leaves) | set(ids[: len(ids) // 2]))
    sparse = t.backward_sparse(out, seed=seed_g, retain=retain)
    assert set(sparse) == set(retain)
    for i in retain:
        np.testing.assert_allclose(sparse[i], dense[i], rtol=1e-12, atol=1e-15)
        assert sparse[i].shape == t.value(i).shape
    if not t.node(out).requires_grad:
        return
    # A leaf with requires_grad=False receives nothing: its dense gradient is zeros.
    for k, leaf in enumerate(leaves):
        if k == frozen:
            assert np.all(dense[leaf] == 0)


def test_recorded_node_backward_is_callable_and_released():
    """``node.backward(g)`` is the op's VJP for registry ops (fast and reference mode); release()
    clears it, and a second backward through the released tape raises."""
    for fast in (True, False):
        t = Tape(fast_kernels=fast)
        a = t.leaf(np.array([1.0, -2.0, 3.0]))
        b = t.leaf(np.array([0.5, 4.0, -1.0]), requires_grad=False)
        y = t.op("mul", a, b)
        da, db = t.node(y).backward(np.ones(3))
        np.testing.assert_array_equal(da, [0.5, 4.0, -1.0])
        assert db is None
        t.release()
        assert t.node(y).backward is None and t.node(y).cleanup is None
        with pytest.raises(tl.errors.AutogradError, match="released"):
            t.backward(y)


def test_recorded_tape_layout_with_leaves_constants_and_a_second_tape():
    """The eager recorder gives leaves one node per tape, constants a value node each, parents in
    input order, and merges the tape of a second computation when the two meet; gradients agree."""
    x = tl.tensor([1.0, -2.0, 3.0], requires_grad=True)
    w = tl.tensor([0.5, 4.0, -1.0], requires_grad=True)
    c = tl.tensor([2.0, 2.0, 2.0])                       # a constant
    z = (x * c + x).relu()                               # x * c: leaf, constant; + x: same leaf again
    tape = z._tape
    names = [n.name for n in tape.nodes]
    assert names == [None, None, "mul", "add", "relu"]
    assert [n.requires_grad for n in tape.nodes[:2]] == [True, False]
    assert tape.nodes[2].parents == (0, 1) and tape.nodes[3].parents == (2, 0)
    other = w * w                                        # a second tape
    assert other._tape is not tape
    out = (z * other).sum()                              # the tapes meet: one absorbs the other
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), [3 * 0.25, 0.0, 3 * 1.0])
    np.testing.assert_allclose(w.grad.numpy(), [2 * 0.5 * 3.0, 0.0, 2 * -1.0 * 9.0])
    assert c.grad is None


def test_tape_backward_matches_finite_differences():
    t = Tape()
    x = t.leaf(np.array([0.3, -0.7, 1.1]))
    y = t.op("mul", t.op("tanh", x), t.op("exp", x))
    z = t.op("sum", t.op("add", y, x))
    g = t.backward(z)[x]

    def f(v):
        return float(np.sum(np.tanh(v) * np.exp(v) + v))

    v0 = t.value(x)
    fd = [(f(v0 + e) - f(v0 - e)) / 2e-6 for e in np.eye(3) * 1e-6]
    np.testing.assert_allclose(g, fd, rtol=1e-7)


# ---- modules -------------------------------------------------------------------------------

class Block(tl.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = tl.nn.Linear(3, 4)
        self.norm_scale = tl.nn.Parameter(tl.ones(4))
        self.register_buffer("count", tl.zeros(1))
        self.register_buffer("scratch", tl.zeros(2), persistent=False)
        self.drop = tl.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x).relu() * self.norm_scale)


class Net(tl.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = tl.nn.ModuleList([Block(), Block()])
        self.heads = tl.nn.ModuleDict({"out": tl.nn.Linear(4, 2)})
        self.shared = self.heads["out"]  # the same module twice: its parameters appear once

    def forward(self, x):
        x = self.blocks[0](x)
        return self.heads["out"](x)


def test_named_parameters_buffers_and_state_dict_follow_pytorch():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    # PyTorch's order: a module's own parameters, then its children's, depth first.
    assert names == ["blocks.0.norm_scale", "blocks.0.fc.weight", "blocks.0.fc.bias",
                     "blocks.1.norm_scale", "blocks.1.fc.weight", "blocks.1.fc.bias",
                     "heads.out.weight", "heads.out.bias"]
    assert [n for n, _ in net.named_buffers()] == ["blocks.0.count", "blocks.0.scratch",
                                                  "blocks.1.count", "blocks.1.scratch"]
    sd = net.state_dict()
    # PyTorch lists shared modules under every name in the state dict, and skips non-persistent buffers.
    assert list(sd) == ["blocks.0.norm_scale", "blocks.0.count", "blocks.0.fc.weight", "blocks.0.fc.bias",
                        "blocks.1.norm_scale", "blocks.1.count", "blocks.1.fc.weight", "blocks.1.fc.bias",
                        "heads.out.weight", "heads.out.bias", "shared.weight", "shared.bias"]
    assert all(isinstance(v, tl.Tensor) and not v.requires_grad for v in sd.values())
    assert len(list(net.parameters())) == 8
    assert [type(m).__name__ for m in net.children()] == ["ModuleList", "ModuleDict", "Linear"]
    assert len(list(net.modules())) == 10  # Net, ModuleList, 2 x (Block, Linear, Dropout), ModuleDict, Linear


def test_train_eval_and_dropout():
    net = Net()
    assert net.training and net.blocks[1].drop.training
    net.eval()
    assert not net.training and not net.blocks[1].drop.training
    x = tl.randn(5, 3)
    np.testing.assert_array_equal(net(x).numpy(), net(x).numpy())  # eval: dropout is the identity
    net.train()
    d = tl.nn.Dropout(0.25)
    y = d(tl.ones(2000)).numpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    assert 0.65 < kept.mean() < 0.85
    tl.manual_seed(3)
    a = F.dropout(tl.ones(50), 0.5).numpy()
    tl.manual_seed(3)
    b = F.dropout(tl.ones(50), 0.5).numpy()
    np.testing.assert_array_equal(a, b)  # same seed, same mask
    assert np.all(F.dropout(tl.ones(4), 1.0).numpy() == 0)
    with pytest.raises(DomainError):
        F.dropout(tl.ones(4), 1.5)


def test_dropout_gradient_uses_the_same_mask():
    x = f64(np.ones(40))
    y = F.dropout(x, 0.3)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())


def test_linear_default_init_bounds_and_determinism():
    tl.manual_seed(0)
    a = tl.nn.Linear(64, 32)
    tl.manual_seed(0)
    b = tl.nn.Linear(64, 32)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    bound = 1 / math.sqrt(64)
    for p in (a.weight, a.bias):
        v = p.numpy()
        assert np.all(np.abs(v) <= bound) and np.abs(v).max() > 0.8 * bound
    assert a.weight.shape == (32, 64) and a.bias.shape == (32,)
    assert tl.nn.Linear(3, 2, bias=False).bias is None
    e = tl.nn.Embedding(1000, 8)
    assert abs(float(e.weight.numpy().std()) - 1.0) < 0.05


def test_init_functions_work_in_place():
    p = tl.nn.Parameter(tl.zeros(50, 40))
    before = p._value
    tl.nn.init.xavier_uniform_(p)
    assert p._value is before
    bound = math.sqrt(6 / 90)
    assert np.abs(p.numpy()).max() <= bound
    tl.nn.init.kaiming_uniform_(p, a=math.sqrt(5))
    assert np.abs(p.numpy()).max() <= 1 / math.sqrt(40)
    tl.nn.init.normal_(p, 2.0, 0.1)
    assert abs(p.numpy().mean() - 2.0) < 0.01
    tl.nn.init.zeros_(p)
    assert np.all(p.numpy() == 0)
    tl.nn.init.ones_(p)
    assert np.all(p.numpy() == 1)
    tl.nn.init.uniform_(p, -3, -2)
    assert p.numpy().min() >= -3 and p.numpy().max() < -2


def test_sequential_indexing_and_iteration():
    s = tl.nn.Sequential(tl.nn.Linear(2, 3), tl.nn.Tanh(), tl.nn.Linear(3, 1))
    assert len(s) == 3
    assert isinstance(s[-1], tl.nn.Linear) and s[-1] is s[2]
    assert [type(m).__name__ for m in s] == ["Linear", "Tanh", "Linear"]
    head = s[:2]
    assert isinstance(head, tl.nn.Sequential) and len(head) == 2
    assert head(tl.ones(4, 2)).shape == (4, 3)
    with pytest.raises(IndexError):
        s[3]
    s.append(tl.nn.Sigmoid())
    assert [n for n, _ in s.named_children()][-1] == "3"
    assert "(1): Tanh()" in repr(s)


def test_flatten_identity_and_activation_modules():
    x = tl.randn(2, 3, 4)
    assert tl.nn.Flatten()(x).shape == (2, 12)
    assert tl.nn.Flatten(0, 1)(x).shape == (6, 4)
    assert tl.nn.Identity(7, k=1)(x) is x
    for m in (tl.nn.ReLU(), tl.nn.GELU(), tl.nn.Tanh(), tl.nn.Sigmoid(), tl.nn.SiLU(), tl.nn.Softplus()):
        assert m(x).shape == x.shape


def test_module_to_dtype_keeps_parameter_identity_and_zero_grad():
    net = tl.nn.Sequential(tl.nn.Linear(3, 2))
    w = net[0].weight
    net(tl.ones(1, 3)).sum().backward()
    net.to(dtype=tl.float64)
    assert net[0].weight is w and w.dtype == tl.float64 and w.grad.dtype == tl.float64
    net.zero_grad(set_to_none=False)
    assert np.all(w.grad.numpy() == 0)
    net.zero_grad()
    assert w.grad is None
    net.double().float()
    assert w.dtype == tl.float32


def test_apply_and_setattr_registration():
    net = Net()
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    # As in PyTorch, apply visits children(), so the shared Linear is visited under both names.
    assert seen[-1] == "Net" and seen.count("Linear") == 4 and seen.count("Block") == 2
    net.blocks[0].fc.bias = None
    assert "blocks.0.fc.bias" not in dict(net.named_parameters())
    with pytest.raises(TorchLeanError):
        net.blocks[0].fc.weight = tl.ones(4, 3)  # a plain Tensor is not a Parameter

    class Early(tl.nn.Module):
        def __init__(self):
            self.w = tl.nn.Parameter(tl.ones(1))

    with pytest.raises(TorchLeanError, match="super"):
        Early()


# ---- load_state_dict -----------------------------------------------------------------------

def test_load_state_dict_round_trip_and_in_place():
    a, b = Net(), Net()
    w = b.blocks[0].fc.weight
    b.load_state_dict(a.state_dict())
    assert b.blocks[0].fc.weight is w  # copied in place
    for (n1, p1), (n2, p2) in zip(a.state_dict().items(), b.state_dict().items()):
        assert n1 == n2
        np.testing.assert_array_equal(p1.numpy(), p2.numpy())
    b.load_state_dict({k: v.numpy().astype(np.float64) for k, v in a.state_dict().items()})
    assert b.blocks[0].fc.weight.dtype == tl.float32


def test_load_state_dict_strict_errors_list_everything_and_change_nothing():
    net = Net()
    sd = {k: v.numpy() for k, v in net.state_dict().items()}
    before = {k: v.copy() for k, v in sd.items()}
    bad = {k: v + 1 for k, v in sd.items()}
    del bad["heads.out.bias"]
    bad["extra.weight"] = np.zeros(2)
    bad["blocks.1.fc.weight"] = np.zeros((5, 3))
    with pytest.raises(TorchLeanError) as e:
        net.load_state_dict(bad)
    msg = str(e.value)
    assert "heads.out.bias" in msg and "extra.weight" in msg and "blocks.1.fc.weight" in msg
    assert "(5, 3)" in msg and "(4, 3)" in msg
    for k, v in net.state_dict().items():  # validation comes first: nothing was written
        np.testing.assert_array_equal(v.numpy(), before[k])
    # Non-strict: missing/unexpected keys are reported, a shape mismatch still raises.
    del bad["blocks.1.fc.weight"]
    missing, unexpected = net.load_state_dict(bad, strict=False)
    assert set(missing) == {"heads.out.bias", "blocks.1.fc.weight"} and unexpected == ["extra.weight"]
    np.testing.assert_array_equal(net.heads["out"].weight.numpy(), before["heads.out.weight"] + 1)
    bad["blocks.0.fc.bias"] = np.zeros(7)
    with pytest.raises(TorchLeanError, match="blocks.0.fc.bias"):
        net.load_state_dict(bad, strict=False)


# ---- optimizers: contracts -----------------------------------------------------------------

def test_optimizer_param_groups_zero_grad_and_skip_params_without_grad():
    a, b = tl.nn.Parameter(tl.ones(2)), tl.nn.Parameter(tl.ones(3))
    opt = tl.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.5
    assert opt.param_groups[1]["momentum"] == 0.9
    (a * 2.0).sum().backward()
    opt.step()
    np.testing.assert_allclose(a.numpy(), [0.8, 0.8])
    np.testing.assert_array_equal(b.numpy(), [1, 1, 1])  # no grad: untouched
    opt.zero_grad()
    assert a.grad is None
    with pytest.raises(TorchLeanError):
        tl.optim.SGD([a, a], lr=0.1)
    with pytest.raises(DomainError):
        tl.optim.Adam([a], lr=-1.0)
    with pytest.raises(DomainError):
        tl.optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(TorchLeanError):
        tl.optim.SGD([], lr=0.1)


def test_optimizer_does_not_write_into_gradients():
    a = tl.nn.Parameter(tl.tensor([1.0, 2.0]))
    b = tl.nn.Parameter(tl.tensor([1.0, 2.0]))
    (a + b).sum().backward()  # both grads may share one buffer
    g = b.grad.numpy().copy()
    tl.optim.Adam([a], weight_decay=0.5, maximize=True).step()
    np.testing.assert_array_equal(b.grad.numpy(), g)


def test_optimizer_load_state_dict_validates():
    a = tl.nn.Parameter(tl.ones(2))
    opt = tl.optim.Adam([a])
    (a * a).sum().backward()
    opt.step()
    sd = opt.state_dict()
    with pytest.raises(TorchLeanError, match="groups"):
        tl.optim.Adam([{"params": [a]}, {"params": [tl.nn.Parameter(tl.ones(1))]}]).load_state_dict(sd)
    with pytest.raises(TorchLeanError, match="parameters"):
        tl.optim.Adam([a, tl.nn.Parameter(tl.ones(1))]).load_state_dict(sd)


def test_scheduler_state_dict_round_trip():
    p = tl.nn.Parameter(tl.zeros(1))
    opt = tl.optim.SGD([p], lr=1.0)
    s = tl.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    for _ in range(3):
        s.step()
    sd = s.state_dict()
    opt2 = tl.optim.SGD([p], lr=1.0)
    s2 = tl.optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=5)
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    s.step()
    s2.step()
    assert s.get_last_lr() == s2.get_last_lr()


# ---- tl.save / tl.load ---------------------------------------------------------------------

def test_save_load_state_dict_round_trip(tmp_path):
    net = Net()
    path = tmp_path / "net.safetensors"
    tl.save(net.state_dict(), path)
    loaded = tl.load(path)
    assert list(loaded) == list(net.state_dict())
    for k, v in net.state_dict().items():
        assert isinstance(loaded[k], tl.Tensor) and loaded[k].device == "cpu"
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy())
    other = Net()
    other.load_state_dict(loaded)
    np.testing.assert_array_equal(other.heads["out"].weight.numpy(), net.heads["out"].weight.numpy())
    assert [p for p in os.listdir(tmp_path)] == ["net.safetensors"]  # no temporary left behind


def test_saved_flat_file_is_plain_safetensors(tmp_path):
    stn = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "w.safetensors"
    tl.save({"a": tl.ones(2, 3), "i": tl.tensor([1, 2, 3]), "d": np.zeros(4)}, path)
    raw = stn.load_file(str(path))
    assert raw["a"].dtype == np.float32 and raw["i"].dtype == np.int64 and raw["d"].dtype == np.float64
    loaded = tl.load(path)
    assert list(loaded) == ["a", "i", "d"] and loaded["i"].tolist() == [1, 2, 3]


def test_save_load_checkpoint_with_optimizer_state(tmp_path):
    w = tl.nn.Parameter(tl.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=tl.float64))
    opt = tl.optim.Adam([w], lr=0.1, amsgrad=True)
    for _ in range(3):
        opt.zero_grad()
        (w * w * w).sum().backward()
        opt.step()
    path = tmp_path / "ck.safetensors"
    tl.save({"model": {"w": w}, "optim": opt.state_dict(), "epoch": 3, "note": "x"}, path)
    ck = tl.load(path)
    assert ck["epoch"] == 3 and ck["note"] == "x"
    assert ck["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert ck["optim"]["state"][0]["step"] == 3
    w2 = tl.nn.Parameter(tl.tensor(ck["model"]["w"].numpy(), dtype=tl.float64))
    opt2 = tl.optim.Adam([w2], lr=0.5)
    opt2.load_state_dict(ck["optim"])
    assert opt2.param_groups[0]["lr"] == 0.1
    for o, p in ((opt, w), (opt2, w2)):
        o.zero_grad()
        (p * p * p).sum().backward()
        o.step()
    np.testing.assert_allclose(w2.numpy(), w.numpy(), rtol=1e-14)


def test_save_rejects_unsupported_values_and_overwrites_atomically(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TorchLeanError, match="object"):
        tl.save({"a": object()}, path)
    assert not os.listdir(tmp_path)
    tl.save({"a": tl.ones(1)}, path)
    tl.save({"a": tl.zeros(2)}, path)
    assert tl.load(path)["a"].tolist() == [0.0, 0.0]
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(TorchLeanError, match="safetensors"):
        tl.load(bad)


# ---- the same front end on CUDA ------------------------------------------------------------

CUDA_OPTIMIZERS = [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.2)),
    ("Adam", dict(lr=0.05, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2)),
    ("RMSprop", dict(lr=0.01, momentum=0.8, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01)),
    ("Adadelta", dict(lr=0.5, weight_decay=0.1)),
]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", CUDA_OPTIMIZERS, ids=[f"{n}-{kw}" for n, kw in CUDA_OPTIMIZERS])
def test_cuda_optimizer_trajectory_matches_cpu(name, kw, dtype):
    rng = np.random.default_rng(5)
    w0, x = rng.standard_normal((6, 4)), rng.standard_normal((9, 6))
    finals = {}
    for dev in ("cpu", "cuda"):
        w = tl.nn.Parameter(tl.tensor(w0, dtype=dtype, device=dev))
        xs = tl.tensor(x, dtype=dtype, device=dev)
        opt = getattr(tl.optim, name)([w], **kw)
        for _ in range(20):
            opt.zero_grad()
            ((xs @ w).tanh().sum() + (w * w * w * w).sum() * 0.01).backward()
            opt.step()
        assert w.device == dev and all(getattr(v, "dtype", w.dtype) == w.dtype for v in opt.state[w].values())
        finals[dev] = w.numpy()
    rtol = 1e-10 if dtype == "float64" else 2e-4
    np.testing.assert_allclose(finals["cuda"], finals["cpu"], rtol=rtol, atol=rtol)


@pytest.mark.cuda
def test_cuda_module_to_device_forward_backward_and_state_dict(tmp_path):
    tl.manual_seed(11)
    cpu = tl.nn.Sequential(tl.nn.Linear(5, 8), tl.nn.GELU(), tl.nn.Linear(8, 3)).double()
    gpu = tl.nn.Sequential(tl.nn.Linear(5, 8), tl.nn.GELU(), tl.nn.Linear(8, 3)).double()
    gpu.load_state_dict(cpu.state_dict())
    w = gpu[0].weight
    gpu.to("cuda")
    assert gpu[0].weight is w and w.device == "cuda"
    x = np.random.default_rng(0).standard_normal((4, 5))
    t = tl.tensor([0, 2, 1, 1])
    F.cross_entropy(cpu(tl.tensor(x)), t).backward()
    F.cross_entropy(gpu(tl.tensor(x, device="cuda")), t).backward()
    for (n, a), (_, b) in zip(cpu.named_parameters(), gpu.named_parameters()):
        assert b.grad.device == "cuda"
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)
    path = tmp_path / "gpu.safetensors"
    tl.save(gpu.state_dict(), path)
    back = tl.load(path, map_location="cpu")
    assert all(v.device == "cpu" for v in back.values())
    assert all(v.device == "cuda" for v in tl.load(path).values())  # torch's rule: back where they were saved
    cpu.load_state_dict(back)
    np.testing.assert_array_equal(cpu[2].bias.numpy(), gpu[2].bias.numpy())
    gpu.load_state_dict({k: v.numpy() for k, v in cpu.state_dict().items()})
    assert gpu[0].weight.device == "cuda"


@pytest.mark.cuda
def test_cuda_init_and_dropout_match_cpu():
    a, b = tl.nn.Parameter(tl.zeros(7, 9)), tl.nn.Parameter(tl.zeros(7, 9, device="cuda"))
    for fn in (lambda p: tl.nn.init.kaiming_uniform_(p, a=math.sqrt(5)), tl.nn.init.normal_,
               tl.nn.init.xavier_uniform_):
        tl.manual_seed(4)
        fn(a)
        tl.manual_seed(4)
        fn(b)
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-6)
    tl.manual_seed(9)
    m1 = F.dropout(tl.ones(300), 0.4).numpy()
    tl.manual_seed(9)
    m2 = F.dropout(tl.ones(300, device="cuda"), 0.4).numpy()
    np.testing.assert_array_equal(m1 != 0, m2 != 0)


@pytest.mark.cuda
def test_cuda_clip_grad_norm_matches_cpu():
    g = np.random.default_rng(1).standard_normal((5, 5))
    norms = {}
    for dev in ("cpu", "cuda"):
        p = tl.nn.Parameter(tl.zeros(5, 5, dtype=tl.float64, device=dev))
        p.grad = tl.tensor(g, dtype=tl.float64, device=dev)
        norms[dev] = (float(tl.nn.utils.clip_grad_norm_([p], 1.0)), p.grad.numpy())
    np.testing.assert_allclose(norms["cuda"][0], norms["cpu"][0], rtol=1e-12)
    np.testing.assert_allclose(norms["cuda"][1], norms["cpu"][1], rtol=1e-12)


@pytest.mark.cuda
def test_buffer_base_names_the_allocation_of_a_view():
    from types import SimpleNamespace
    from torchlean.kernels.cuda.memory import buffer_base
    arr = SimpleNamespace(data=SimpleNamespace(ptr=4096 + 64, mem=SimpleNamespace(ptr=4096)))
    assert buffer_base(arr) == 4096
    assert buffer_base(np.zeros(3)) is None      # host arrays have no device allocation
