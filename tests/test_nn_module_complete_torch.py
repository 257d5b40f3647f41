"""torch as the oracle for the rest of the Module API: default initialization statistics of every
layer with parameters, state_dict metadata/versions and hooks, load_state_dict(assign=...), the
containers' full API, printed reprs, Embedding/EmbeddingBag (F.embedding, F.embedding_bag) and
gradient clipping."""

import inspect
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import torchlean as tl
from torchlean import TorchLeanError
from torchlean.errors import DomainError, IndexRangeError, ShapeError
from torchlean.nn import functional_sparse as FS
from torchlean.nn import sparse as SP

torch = pytest.importorskip("torch")


def _tl_nn(name):
    return getattr(tl.nn, name, None) or getattr(SP, name, None)


# ---- 1. default initialization statistics ----------------------------------------------------

#: name -> (args, kwargs), or a function of the nn namespace giving them; sized so that every parameter
#: has enough entries for its statistics.
INIT_REGISTRY = {
    "Linear": ((256, 384), {}),
    "Bilinear": ((48, 40, 256), {}),
    "Conv1d": ((64, 96, 5), {}),
    "Conv2d": ((32, 256, 3), {}),
    "Conv3d": ((8, 256, 3), {}),
    "ConvTranspose1d": ((64, 256, 5), {}),
    "ConvTranspose2d": ((32, 256, 3), {}),
    "ConvTranspose3d": ((8, 256, 3), {}),
    "Embedding": ((500, 64), {"padding_idx": 3}),
    "EmbeddingBag": ((500, 64), {"padding_idx": 7}),
    "LayerNorm": ((256,), {}),
    "BatchNorm1d": ((256,), {}),
    "BatchNorm2d": ((256,), {}), "SyncBatchNorm": ((256,), {}), "LinearCrossEntropyLoss": ((64, 256), {}),
    "BatchNorm3d": ((256,), {}),
    "GroupNorm": ((8, 256), {}),
    "InstanceNorm1d": ((256,), {"affine": True}),
    "InstanceNorm2d": ((256,), {"affine": True}),
    "InstanceNorm3d": ((256,), {"affine": True}),
    "RMSNorm": ((256,), {}),
    "PReLU": ((), {"num_parameters": 256}),
    "MultiheadAttention": ((256, 4), {}),
    "RNNBase": (("GRU", 64, 128), {"num_layers": 2, "bidirectional": True}),
    "RNNCellBase": ((128, 256), {"bias": True, "num_chunks": 4}),
    "RNN": ((128, 256), {}),
    "LSTM": ((128, 256), {"proj_size": 64}),
    "GRU": ((128, 256), {}),
    "RNNCell": ((128, 256), {}),
    "LSTMCell": ((128, 256), {}),
    "GRUCell": ((128, 256), {}),
    "TransformerEncoderLayer": ((128, 4, 256), {}),
    "TransformerDecoderLayer": ((128, 4, 256), {}),
    "TransformerEncoder": (lambda nn: ((nn.TransformerEncoderLayer(64, 2, 128), 2), {"enable_nested_tensor": False})),
    "TransformerDecoder": (lambda nn: ((nn.TransformerDecoderLayer(64, 2, 128), 2), {})),
    "Transformer": ((), {"d_model": 64, "nhead": 2, "num_encoder_layers": 1, "num_decoder_layers": 1,
                         "dim_feedforward": 128}),
    "AdaptiveLogSoftmaxWithLoss": ((256, 1000, [100, 500]), {"div_value": 2.0}),
}
#: torchlean's own layers with parameters and no torch counterpart.
NO_TORCH_TWIN = {"SpectralConv1d", "SelectiveScan"}


def _module_classes():
    names = set(tl.nn.__all__) | set(SP.__all__)
    out = {}
    for n in sorted(names):
        c = _tl_nn(n)
        if inspect.isclass(c) and issubclass(c, tl.nn.Module):
            out[n] = c
    return out


def _has_parameters(cls):
    """Whether some small instance of ``cls`` has parameters (or, not constructible, it has reset_parameters)."""
    built = False
    for args in ((), (8,), (8, 8), (8, 8, 8)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = cls(*args)
        except Exception:  # noqa: BLE001 - probing constructors
            continue
        built = True
        if any(True for _ in m.parameters()):
            return True
    return not built and hasattr(cls, "reset_parameters")


def test_init_registry_covers_every_module_with_parameters():
    # Lazy modules have no parameter values before their first call (tests/test_nn_extra_torch.py
    # checks what they initialize to then).
    missing = [n for n, c in _module_classes().items()
               if n not in INIT_REGISTRY and n not in NO_TORCH_TWIN and not n.startswith("Lazy") and _has_parameters(c)]
    assert not missing, f"modules with parameters missing from INIT_REGISTRY: {missing}"


def _ks(a, b):
    """The two-sample Kolmogorov-Smirnov statistic."""
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, grid, "right") / a.size
                                - np.searchsorted(b, grid, "right") / b.size)))


def _compare_init(name, tl_mod, th_mod):
    ours = {k: v.detach().numpy().astype(np.float64) for k, v in tl_mod.named_parameters()}
    theirs = {k: v.detach().numpy().astype(np.float64) for k, v in th_mod.named_parameters()}
    assert list(ours) == list(theirs), f"{name}: parameter names {list(ours)} vs torch {list(theirs)}"
    for k in theirs:
        a, b = ours[k].reshape(-1), theirs[k].reshape(-1)
        assert ours[k].shape == theirs[k].shape, f"{name}.{k}: shape {ours[k].shape} vs {theirs[k].shape}"
        if np.all(b == b[0]):
            np.testing.assert_array_equal(a, b, err_msg=f"{name}.{k}: constant init differs")
            continue
        n = min(a.size, b.size)
        crit = 2.2 * math.sqrt(2.0 / n)  # alpha ~ 1e-4
        assert _ks(a, b) < crit, f"{name}.{k}: distribution differs (KS {_ks(a, b):.4f} >= {crit:.4f})"
        sd = b.std()
        assert abs(a.mean() - b.mean()) < 6 * sd / math.sqrt(n), f"{name}.{k}: mean {a.mean()} vs {b.mean()}"
        assert abs(a.std() / sd - 1) < 6 / math.sqrt(n) + 0.01, f"{name}.{k}: std {a.std()} vs {sd}"
        lo, hi = b.min(), b.max()
        span = hi - lo
        assert a.min() >= lo - 0.05 * span and a.max() <= hi + 0.05 * span, \
            f"{name}.{k}: range [{a.min()}, {a.max()}] vs torch [{lo}, {hi}]"
        zeros_ours, zeros_theirs = np.flatnonzero(a == 0), np.flatnonzero(b == 0)
        if zeros_theirs.size > 1:  # structured zeros (a padding row)
            np.testing.assert_array_equal(zeros_ours, zeros_theirs, err_msg=f"{name}.{k}: zero entries differ")


@pytest.mark.parametrize("name", sorted(INIT_REGISTRY))
def test_default_init_statistics_match_torch(name):
    cls = _tl_nn(name)
    if cls is None:
        pytest.skip(f"torchlean.nn.{name} does not exist yet")
    spec = INIT_REGISTRY[name]
    tl.manual_seed(0)
    args, kwargs = spec(tl.nn) if callable(spec) else spec
    ours = cls(*args, **kwargs)
    torch.manual_seed(0)
    args, kwargs = spec(torch.nn) if callable(spec) else spec
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    _compare_init(name, ours, theirs)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}


# ---- 2. state_dict: metadata, versions, hooks, assign -----------------------------------------

def _nested(lib):
    return lib.nn.Sequential(OrderedDict([
        ("inp", lib.nn.Linear(3, 4)), ("act", lib.nn.ReLU()),
        ("block", lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.Tanh())),
        ("heads", lib.nn.ModuleDict({"a": lib.nn.Linear(4, 2), "b": lib.nn.Linear(4, 1)}))]))


def _sd_numpy(sd):
    return {k: v.detach().numpy() for k, v in sd.items()}


def test_state_dict_metadata_keys_and_versions_match_torch():
    ours, theirs = _nested(tl).state_dict(), _nested(torch).state_dict()
    assert list(ours) == list(theirs)
    assert isinstance(ours, OrderedDict)
    assert dict(ours._metadata) == dict(theirs._metadata)
    assert list(ours._metadata) == list(theirs._metadata)
    p1, p2 = _nested(tl).state_dict(prefix="net."), _nested(torch).state_dict(prefix="net.")
    assert list(p1) == list(p2) and dict(p1._metadata) == dict(p2._metadata)
    dest_ours, dest_theirs = {}, {}
    assert _nested(tl).state_dict(destination=dest_ours) is dest_ours
    _nested(torch).state_dict(destination=dest_theirs)
    assert list(dest_ours) == list(dest_theirs) and not hasattr(dest_ours, "_metadata")


def test_state_dict_keep_vars_and_positional_arguments():
    net = tl.nn.Linear(2, 3)
    kv = net.state_dict(keep_vars=True)
    assert kv["weight"] is net.weight and kv["weight"].requires_grad
    plain = net.state_dict()
    assert not plain["weight"].requires_grad and plain["weight"] is not net.weight
    with pytest.warns(FutureWarning):
        d = net.state_dict(None, "x.")
    with pytest.warns(FutureWarning):
        torch.nn.Linear(2, 3).state_dict(None, "x.")
    assert list(d) == ["x.weight", "x.bias"]


def _versioned(lib):
    """A layer whose version 2 renamed ``scale`` to ``gain``: older checkpoints are converted."""

    class Versioned(lib.nn.Module):
        _version = 2

        def __init__(self):
            super().__init__()
            self.gain = lib.nn.Parameter(lib.ones(3))

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                  unexpected_keys, error_msgs):
            version = local_metadata.get("version", None)
            if (version is None or version < 2) and prefix + "scale" in state_dict:
                state_dict[prefix + "gain"] = state_dict.pop(prefix + "scale")
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                          unexpected_keys, error_msgs)

    return lib.nn.Sequential(lib.nn.Linear(2, 2), Versioned())


def test_load_from_state_dict_converts_old_versions_like_torch():
    for lib in (tl, torch):
        net = _versioned(lib)
        sd = net.state_dict()
        assert sd._metadata["1"] == {"version": 2} and sd._metadata["0"] == {"version": 1}
        old = OrderedDict((k.replace("gain", "scale"), v * 2) for k, v in sd.items())
        old._metadata = OrderedDict((k, dict(v)) for k, v in sd._metadata.items())
        old._metadata["1"]["version"] = 1
        net.load_state_dict(old)
        np.testing.assert_array_equal(net[1].gain.detach().numpy(), [2.0, 2.0, 2.0])
        old._metadata["1"]["version"] = 2  # a current checkpoint with the old name: an error in both
        with pytest.raises((RuntimeError, TorchLeanError), match="Missing key"):
            net.load_state_dict(old)


def test_batchnorm_old_checkpoint_without_num_batches_tracked():
    if tl.nn.BatchNorm1d._version < 2:
        pytest.skip("BatchNorm's _version 2 and _load_from_state_dict are not wired in yet")
    for lib in (tl, torch):
        bn = lib.nn.BatchNorm1d(3)
        sd = bn.state_dict()
        assert sd._metadata[""] == {"version": 2}
        old = OrderedDict((k, v) for k, v in sd.items() if k != "num_batches_tracked")
        old._metadata = OrderedDict([("", {"version": 1})])
        res = bn.load_state_dict(old)
        assert res.missing_keys == [] and int(bn.num_batches_tracked.item()) == 0
        old._metadata[""]["version"] = 2
        with pytest.raises((RuntimeError, TorchLeanError), match="num_batches_tracked"):
            bn.load_state_dict(old)


def _hook_log(lib):
    net = _nested(lib)
    log = []
    net.block.register_state_dict_pre_hook(lambda m, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))

    def post(m, sd, prefix, meta):
        log.append(("post", prefix, dict(meta), sorted(k for k in sd if k.startswith(prefix))))
        sd[prefix + "extra"] = lib.zeros(1)

    net.block.register_state_dict_post_hook(post)
    sd = net.state_dict(prefix="p.")
    return log, list(sd)


def test_state_dict_hooks_match_torch():
    assert _hook_log(tl) == _hook_log(torch)
    for lib in (tl, torch):
        net = lib.nn.Linear(2, 2)
        net.register_state_dict_post_hook(lambda m, sd, p, meta: {})
        with pytest.raises((RuntimeError, TorchLeanError), match="must return None"):
            net.state_dict()
        net = lib.nn.Linear(2, 2)
        net._register_state_dict_hook(lambda m, sd, p, meta: OrderedDict(w=sd["weight"]))
        assert list(net.state_dict()) == ["w"]


def _load_hooks(lib):
    net = _nested(lib)
    src = _sd_numpy(_nested(lib).state_dict())
    sd = {("old_" + k if k.startswith("block") else k): lib.tensor(v) for k, v in src.items()}
    log = []

    def pre(m, state_dict, prefix, meta, strict, missing, unexpected, errors):
        log.append(("pre", prefix, strict, sorted(state_dict)))
        for k in [k for k in state_dict if k.startswith("old_" + prefix)]:
            state_dict[k[4:]] = state_dict.pop(k)

    def post(m, keys):
        log.append(("post", list(keys.missing_keys), list(keys.unexpected_keys)))

    net.register_load_state_dict_pre_hook(pre)
    net.block.register_load_state_dict_post_hook(post)
    res = net.load_state_dict(sd)
    got = _sd_numpy(net.state_dict())
    return log, (list(res.missing_keys), list(res.unexpected_keys)), {k: got[k] for k in sorted(got)}, src


def test_load_state_dict_hooks_match_torch():
    a, b = _load_hooks(tl), _load_hooks(torch)
    assert a[0] == b[0] and a[1] == b[1] == ([], [])
    for k, v in a[3].items():
        np.testing.assert_array_equal(a[2][k], v)
    for lib in (tl, torch):  # a post hook that clears the missing keys makes a strict load succeed
        net = lib.nn.Linear(2, 2)
        net.register_load_state_dict_post_hook(lambda m, keys: keys.missing_keys.clear())
        res = net.load_state_dict({"weight": lib.zeros(2, 2)})
        assert list(res.missing_keys) == [] and float(net.weight.detach().abs().sum()) == 0.0


def test_load_state_dict_errors_and_nothing_written():
    for lib in (tl, torch):
        net = lib.nn.Linear(3, 2)
        sd = {"weight": lib.ones(2, 4), "extra": lib.ones(1)}
        with pytest.raises((RuntimeError, TorchLeanError)) as e:
            net.load_state_dict(sd)
        msg = str(e.value)
        assert 'Missing key(s) in state_dict: "bias"' in msg and 'Unexpected key(s) in state_dict: "extra"' in msg
        assert "size mismatch for weight" in msg and msg.startswith("Error(s) in loading state_dict for Linear")
        res = net.load_state_dict({"weight": lib.ones(2, 3), "extra": lib.ones(1)}, strict=False)
        assert (list(res.missing_keys), list(res.unexpected_keys)) == (["bias"], ["extra"])
    net = tl.nn.Linear(3, 2)
    before = net.weight.numpy().copy()
    with pytest.raises(TorchLeanError):
        net.load_state_dict({"weight": np.ones((2, 3)), "bias": np.ones(5)})
    np.testing.assert_array_equal(net.weight.numpy(), before)


def test_load_state_dict_assign_and_scalar_compat_match_torch():
    out = []
    for lib in (tl, torch):
        net = lib.nn.Linear(2, 2)
        old_w = net.weight
        w64 = lib.tensor(np.arange(4.0).reshape(2, 2), dtype=lib.float64)
        net.load_state_dict({"weight": w64, "bias": lib.zeros(2)}, assign=True)
        out.append((net.weight is not old_w, str(net.weight.dtype).split(".")[-1], net.weight.requires_grad,
                    isinstance(net.weight, lib.nn.Parameter), net.weight.detach().numpy().tolist()))
        net.weight.requires_grad_(False)
        net.load_state_dict({"weight": lib.ones(2, 2), "bias": lib.zeros(2)}, assign=True)
        out.append(net.weight.requires_grad)
        bn = lib.nn.BatchNorm1d(2)
        sd = {k: (v.reshape(1) if k == "num_batches_tracked" else v) for k, v in bn.state_dict().items()}
        sd["num_batches_tracked"] = sd["num_batches_tracked"] + 5
        bn.load_state_dict(sd)
        out.append(int(bn.num_batches_tracked.item()))
    assert out[:3] == out[3:]
    assert out[0][:4] == (True, "float64", True, True)


# ---- 3. containers and printing ------------------------------------------------------------

def _printed(lib, with_pool_dropout=False):
    nn = lib.nn
    extra = [nn.MaxPool2d(2), nn.Dropout(0.25), nn.MaxPool2d(3, stride=2, padding=1), nn.Dropout()] \
        if with_pool_dropout else []
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Sequential(nn.Conv2d(8, 8, (3, 5), stride=2, bias=False), nn.GELU()),
        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(),
        nn.ModuleList([nn.Linear(8, 8) for _ in range(3)] + [nn.Tanh(), nn.Linear(8, 4), nn.Linear(8, 4)]),
        nn.ModuleDict({"norm": nn.LayerNorm(8), "emb": nn.Embedding(10, 8, padding_idx=0), "sm": nn.Softmax(dim=-1)}),
        nn.Identity(), nn.Linear(8, 2, bias=False), nn.GELU(approximate="tanh"), nn.LeakyReLU(0.2),
        nn.ModuleList(), nn.Softmax(), nn.LayerNorm((2, 3), elementwise_affine=False),
        nn.Conv1d(2, 4, 3, dilation=2, groups=2), nn.ConvTranspose2d(2, 4, 3, stride=2, output_padding=1),
        nn.BatchNorm1d(4, affine=False), nn.Embedding(4, 3), *extra)


def test_print_model_matches_torch():
    assert repr(_printed(tl)) == repr(_printed(torch))


def test_print_pool_and_dropout_match_torch():
    assert repr(_printed(tl, True)) == repr(_printed(torch, True))


def _custom(lib):
    class Block(lib.nn.Module):
        def __init__(self, lines):
            super().__init__()
            self.lines = lines
            self.fc = lib.nn.Linear(2, 2)

        def extra_repr(self):
            return "\n".join(f"line{i}={i}" for i in range(self.lines))

    class Leaf(lib.nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    return lib.nn.Sequential(Block(1), Block(2), Block(0), Leaf(), lib.nn.Identity(54, unused="x"))


def test_repr_with_extra_lines_and_children_matches_torch():
    assert repr(_custom(tl)) == repr(_custom(torch))


def _names(m):
    return [(k, type(v).__name__) for k, v in m.named_children()]


def test_module_list_api_matches_torch():
    res = []
    for lib in (tl, torch):
        nn = lib.nn
        mods = [nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.GELU(), nn.SiLU()]
        ml = nn.ModuleList(mods)
        log = [type(ml[-1]).__name__, type(ml[1:4]).__name__, _names(ml[::2])]
        del ml[1]
        log.append(_names(ml))
        del ml[1:3]
        log.append(_names(ml))
        ml += [nn.Identity()]
        ml.insert(1, nn.ELU())
        ml.append(nn.Softplus()).extend([nn.Mish()])
        log.append(_names(ml))
        log.append(type(ml.pop(-2)).__name__)
        log.append(type(ml.pop(0)).__name__)
        both = ml + nn.ModuleList([nn.Hardtanh()])
        log.append((type(both).__name__, _names(both), _names(ml)))
        ml[-1] = nn.ReLU6()
        log.append(_names(ml))
        with pytest.raises(IndexError):
            ml[len(ml)]
        with pytest.raises(TypeError):
            ml.extend(5)
        log.append([d for d in dir(ml) if d.isdigit()])
        res.append(log)
    assert res[0] == res[1]


def test_module_dict_api_matches_torch():
    res = []
    for lib in (tl, torch):
        nn = lib.nn
        md = nn.ModuleDict({"b": nn.ReLU(), "a": nn.Tanh()})
        md.update([("c", nn.GELU()), ("a", nn.Sigmoid())])
        md.update(OrderedDict([("d", nn.SiLU())]))
        md.update(nn.ModuleDict({"e": nn.ELU()}))
        log = [list(md.keys()), [type(v).__name__ for v in md.values()], [k for k, _ in md.items()], "c" in md,
               "z" in md, len(md), list(md)]
        log.append(type(md.pop("c")).__name__)
        del md["b"]
        log.append(list(md))
        with pytest.raises(TypeError):
            md.update(5)
        with pytest.raises(ValueError):
            md.update([("x", nn.ReLU(), 1)])
        with pytest.raises(TypeError):
            md.update([5])
        md.clear()
        log.append(len(md))
        res.append(log)
    assert res[0] == res[1]


def test_sequential_api_matches_torch():
    res = []
    for lib in (tl, torch):
        nn = lib.nn
        s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 3))
        log = [type(s[1:]).__name__, _names(s[1:]), _names(s * 2), _names(2 * s), len(s * 3)]
        assert (s * 2)[3] is s[0]
        s2 = s + nn.Sequential(nn.Tanh())
        log.append(_names(s2))
        s.insert(-1, nn.GELU())
        s.insert(4, nn.SiLU())
        log.append(_names(s))
        log.append(type(s.pop(1)).__name__)
        del s[::2]
        log.append(_names(s))
        s[0] = nn.ELU()
        s.append(nn.Identity()).extend([nn.Mish()])
        s += nn.Sequential(nn.Softsign())
        s *= 2
        log.append(_names(s))
        for bad, err in ((lambda: s + [nn.ReLU()], ValueError), (lambda: s * 0, ValueError),
                         (lambda: s * 1.5, TypeError), (lambda: s[100], IndexError),
                         (lambda: s.insert(100, nn.ReLU()), IndexError)):
            with pytest.raises(err):
                bad()
        od = nn.Sequential(OrderedDict([("first", nn.ReLU()), ("second", nn.Tanh())]))
        log.append((_names(od[1:]), type(od[-1]).__name__))
        del od[0]
        log.append(_names(od))
        res.append(log)
    assert res[0] == res[1]


def _traversal(lib):
    nn = lib.nn
    shared = nn.Linear(2, 2)
    net = nn.Sequential(shared, nn.Sequential(shared, nn.BatchNorm1d(2)), nn.Dropout())
    log = [[n for n, _ in net.named_modules()],
           [n for n, _ in net.named_modules(remove_duplicate=False)],
           [n for n, _ in net.named_modules(prefix="root")],
           [n for n, _ in net.named_parameters(remove_duplicate=False)]]
    order = []
    net.apply(lambda m: order.append(type(m).__name__))
    log.append(order)
    net.eval()
    log.append([m.training for m in net.modules()])
    net.train()
    net[1].train(False)
    log.append([m.training for m in net.modules()])
    net.requires_grad_(False)
    log.append([p.requires_grad for p in net.parameters()])
    net.requires_grad_()
    x = lib.ones(3, 2)
    net.train()
    net[0](x).sum().backward()
    net.zero_grad(set_to_none=False)
    log.append([None if p.grad is None else float(p.grad.abs().sum()) for p in net.parameters()])
    net.zero_grad()
    log.append([p.grad is None for p in net.parameters()])
    return log


def test_traversal_modes_and_grads_match_torch():
    assert _traversal(tl) == _traversal(torch)


# ---- 4. Embedding, EmbeddingBag, F.embedding, F.embedding_bag ----------------------------------

def _pair_tensors(w_np, requires_grad=True):
    return tl.tensor(w_np, requires_grad=requires_grad), torch.tensor(w_np, requires_grad=requires_grad)


@settings(max_examples=25, deadline=None)
@given(num=st.integers(2, 12), dim=st.integers(1, 5), shape=st.sampled_from([(5,), (3, 4), (2, 2, 3), (0,)]),
       padding=st.sampled_from([None, 0, -1, 1]), max_norm=st.sampled_from([None, 0.7, 2.0]),
       norm_type=st.sampled_from([2.0, 1.0, 3.0]), freq=st.booleans(), seed=st.integers(0, 2**16))
def test_functional_embedding_matches_torch(num, dim, shape, padding, max_norm, norm_type, freq, seed):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((num, dim)) * 1.5).astype(np.float32)
    idx = rng.integers(0, num, shape)
    if padding is not None and idx.size:
        idx.reshape(-1)[0] = padding % num
    g = rng.standard_normal(shape + (dim,)).astype(np.float32)
    wl, wt = _pair_tensors(w)
    kw = dict(padding_idx=padding, max_norm=max_norm, norm_type=norm_type, scale_grad_by_freq=freq)
    ol = FS.embedding(tl.tensor(idx), wl, **kw)
    ot = torch.nn.functional.embedding(torch.tensor(idx), wt, **kw)
    np.testing.assert_allclose(ol.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wl.detach().numpy(), wt.detach().numpy(), rtol=1e-5, atol=1e-6)  # renormed rows
    if idx.size:
        (ol * tl.tensor(g)).sum().backward()
        (ot * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(wl.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_embedding_module_matches_torch_state_dict_and_grads(rng):
    kw = dict(padding_idx=2, max_norm=1.0, scale_grad_by_freq=True)
    ours, theirs = SP.Embedding(9, 4, **kw), torch.nn.Embedding(9, 4, **kw)
    ours.load_state_dict({k: v.detach().numpy() * 3 for k, v in theirs.state_dict().items()}, strict=True)
    with torch.no_grad():
        theirs.weight.mul_(3)
    idx = rng.integers(0, 9, (4, 6))
    idx[0, 0] = 2
    for _ in range(2):
        ol, ot = ours(tl.tensor(idx)), theirs(torch.tensor(idx))
        (ol ** 2).sum().backward()
        (ot ** 2).sum().backward()
    np.testing.assert_allclose(ol.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]


def test_embedding_from_pretrained_and_errors():
    w = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    for lib, mod in ((tl, SP), (torch, torch.nn)):
        e = mod.Embedding.from_pretrained(lib.tensor(w))
        assert not e.weight.requires_grad
        e2 = mod.Embedding.from_pretrained(lib.tensor(w), freeze=False, padding_idx=1)
        assert e2.weight.requires_grad and e2.padding_idx == 1
        assert e2.weight.detach().numpy()[1].tolist() == [3.0, 4.0, 5.0]  # a given weight keeps its padding row
        f = mod.Embedding(4, 3, _weight=lib.tensor(w), _freeze=True)
        assert not f.weight.requires_grad
    shared = tl.tensor(w.copy())
    e = SP.Embedding.from_pretrained(shared, max_norm=1.0)
    e(tl.tensor([3]))
    assert np.linalg.norm(shared.numpy()[3]) == pytest.approx(1.0, rel=1e-5)  # torch's in-place renorm, shared
    with pytest.raises(DomainError, match="sparse"):
        SP.Embedding(4, 3, sparse=True)
    with pytest.raises(DomainError, match="sparse"):
        FS.embedding(tl.tensor([0]), tl.ones(4, 3), sparse=True)
    with pytest.raises(DomainError, match="padding_idx"):
        SP.Embedding(4, 3, padding_idx=4)
    with pytest.raises(IndexRangeError, match="out of range"):
        FS.embedding(tl.tensor([4]), tl.ones(4, 3))
    with pytest.raises(IndexError):
        torch.nn.functional.embedding(torch.tensor([4]), torch.ones(4, 3))
    with pytest.raises(ShapeError):
        SP.Embedding(4, 3, _weight=tl.ones(3, 3))
    with pytest.raises(TorchLeanError, match="Long|integer"):
        FS.embedding(tl.tensor([0.0]), tl.ones(4, 3))


def _bag_case(rng, mode, flat_n, bags, padding, psw, last):
    num, dim = 7, 3
    w = rng.standard_normal((num, dim)).astype(np.float32)
    idx = rng.integers(0, num, flat_n)
    cuts = np.sort(rng.integers(0, flat_n + 1, bags - 1)) if bags > 1 else np.zeros(0, dtype=np.int64)
    off = np.concatenate([[0], cuts]).astype(np.int64)
    if last:
        off = np.append(off, flat_n)
    weights = rng.standard_normal(flat_n).astype(np.float32) if psw else None
    res = []
    for lib, fn in ((tl, FS.embedding_bag), (torch, torch.nn.functional.embedding_bag)):
        wt = lib.tensor(w, requires_grad=True)
        pw = None if weights is None else lib.tensor(weights, requires_grad=True)
        out = fn(lib.tensor(idx), wt, lib.tensor(off), mode=mode, per_sample_weights=pw, include_last_offset=last,
                 padding_idx=padding)
        g = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(np.float32)
        (out * lib.tensor(g)).sum().backward()
        res.append((out.detach().numpy(), wt.grad.numpy(), None if pw is None else pw.grad.numpy()))
    return res


@settings(max_examples=30, deadline=None)
@given(mode=st.sampled_from(["sum", "mean", "max"]), flat_n=st.integers(1, 12), bags=st.integers(1, 5),
       padding=st.sampled_from([None, 0, 3]), psw=st.booleans(), last=st.booleans(), seed=st.integers(0, 2**16))
def test_functional_embedding_bag_matches_torch(mode, flat_n, bags, padding, psw, last, seed):
    psw = psw and mode == "sum"
    (o1, g1, p1), (o2, g2, p2) = _bag_case(np.random.default_rng(seed), mode, flat_n, bags, padding, psw, last)
    np.testing.assert_allclose(o1, o2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g1, g2, rtol=1e-5, atol=1e-6)
    if psw:
        np.testing.assert_allclose(p1, p2, rtol=1e-5, atol=1e-6)


def test_embedding_bag_module_2d_input_max_norm_and_state_dict(rng):
    for mode in ("sum", "mean", "max"):
        theirs = torch.nn.EmbeddingBag(10, 4, mode=mode, max_norm=1.0, padding_idx=1)
        ours = SP.EmbeddingBag(10, 4, mode=mode, max_norm=1.0, padding_idx=1)
        ours.load_state_dict({k: v.detach().numpy() * 2 for k, v in theirs.state_dict().items()}, strict=True)
        with torch.no_grad():
            theirs.weight.mul_(2)
        idx = rng.integers(0, 10, (3, 5))
        ol, ot = ours(tl.tensor(idx)), theirs(torch.tensor(idx))
        ol.sum().backward()
        ot.sum().backward()
        np.testing.assert_allclose(ol.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        assert repr(ours) == repr(theirs)
    pre = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    bt = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(pre), mode="sum")
    bl = SP.EmbeddingBag.from_pretrained(tl.tensor(pre), mode="sum")
    assert not bl.weight.requires_grad and not bt.weight.requires_grad
    np.testing.assert_array_equal(bl(tl.tensor([[0, 2]])).numpy(), bt(torch.tensor([[0, 2]])).numpy())


def test_embedding_bag_scale_grad_by_freq_is_per_index_frequency():
    """Each index's gradient is divided by its frequency in ``input`` (torch's documented meaning; torch's CPU
    kernel scales by another index's count, so F.embedding is the oracle here)."""
    w = np.random.default_rng(3).standard_normal((6, 2)).astype(np.float32)
    flat, off = np.array([0, 0, 1, 2, 2, 2, 3]), np.array([0, 3])
    wl = tl.tensor(w, requires_grad=True)
    FS.embedding_bag(tl.tensor(flat), wl, tl.tensor(off), mode="sum", scale_grad_by_freq=True).sum().backward()
    wt = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(flat), wt, scale_grad_by_freq=True).sum().backward()
    np.testing.assert_allclose(wl.grad.numpy(), wt.grad.numpy(), rtol=1e-6)


def test_embedding_bag_errors_match_torch():
    w = tl.ones(5, 2)
    cases = [
        (dict(input=[0, 1], offsets=[1]), DomainError, "offsets\\[0\\]"),
        (dict(input=[[0, 1]], offsets=[0]), DomainError, "offsets has to be None"),
        (dict(input=[0, 1], offsets=None), DomainError, "offsets"),
        (dict(input=[0, 1], offsets=[0], mode="prod"), DomainError, "mode"),
        (dict(input=[0, 1], offsets=[0], mode="mean", per_sample_weights=tl.ones(2)), DomainError, "sum"),
        (dict(input=[0, 5], offsets=[0]), IndexRangeError, "out of range"),
    ]
    for kw, err, msg in cases:
        kw = dict(kw)
        inp, off = tl.tensor(kw.pop("input")), kw.pop("offsets")
        with pytest.raises(err, match=msg):
            FS.embedding_bag(inp, w, None if off is None else tl.tensor(off), **kw)
        tkw = {k: (torch.ones(2) if k == "per_sample_weights" else v) for k, v in kw.items()}
        tinp = torch.tensor(inp.numpy())
        with pytest.raises((ValueError, RuntimeError, IndexError, NotImplementedError)):
            torch.nn.functional.embedding_bag(tinp, torch.ones(5, 2), None if off is None else torch.tensor(off),
                                              **tkw)
    with pytest.raises(DomainError, match="sparse"):
        SP.EmbeddingBag(5, 2, sparse=True)


# ---- 5. gradient clipping ------------------------------------------------------------------

def _clip_pair(rng, nan=False):
    grads = [rng.standard_normal(s).astype(np.float32) * 3 for s in [(3, 4), (5,), (2, 2, 2)]]
    if nan:
        grads[1][2] = np.nan
    ours, theirs = [], []
    for g in grads:
        p = tl.nn.Parameter(tl.zeros(*g.shape))
        p.grad = tl.tensor(g)
        q = torch.zeros(g.shape, requires_grad=True)
        q.grad = torch.tensor(g)
        ours.append(p)
        theirs.append(q)
    no_grad_p = tl.nn.Parameter(tl.zeros(2))
    return ours + [no_grad_p], theirs + [torch.zeros(2, requires_grad=True)]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, float("inf"), 0.0])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(rng, norm_type, max_norm):
    ours, theirs = _clip_pair(rng)
    a = tl.nn.utils.clip_grad_norm_(ours, max_norm, norm_type, foreach=True)
    b = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type, foreach=True)
    assert a.shape == () and a.dtype == tl.float32
    assert float(a) == pytest.approx(float(b), rel=1e-5)
    for p, q in zip(ours[:-1], theirs[:-1]):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert ours[-1].grad is None
    total = tl.nn.utils.get_total_norm([p.grad for p in ours[:-1]], norm_type)
    assert float(total) == pytest.approx(float(torch.nn.utils.get_total_norm([q.grad for q in theirs[:-1]],
                                                                            norm_type)), rel=1e-5)


def test_clip_grad_nonfinite_and_value_match_torch(rng):
    ours, theirs = _clip_pair(rng, nan=True)
    with pytest.raises(DomainError, match="non-finite"):
        tl.nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True)
    a, b = tl.nn.utils.clip_grad_norm_(ours, 1.0), torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert math.isnan(float(a)) and math.isnan(float(b))
    for p, q in zip(ours[:-1], theirs[:-1]):  # a nan total makes every gradient nan, as torch
        np.testing.assert_array_equal(np.isnan(p.grad.numpy()), np.isnan(q.grad.numpy()))
        assert np.isnan(p.grad.numpy()).all()
    ours, theirs = _clip_pair(rng)
    tl.nn.utils.clip_grads_with_norm_(ours, 1.0, tl.tensor(10.0))
    torch.nn.utils.clip_grads_with_norm_(theirs, 1.0, torch.tensor(10.0))
    ours2, theirs2 = _clip_pair(rng)
    tl.nn.utils.clip_grad_value_(ours2, 0.5)
    torch.nn.utils.clip_grad_value_(theirs2, 0.5)
    for p, q in zip(ours[:-1] + ours2[:-1], theirs[:-1] + theirs2[:-1]):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6)
    with pytest.warns(UserWarning, match="empty generator"):
        assert float(tl.nn.utils.clip_grad_norm_((p for p in []), 1.0)) == 0.0


# ---- CUDA ----------------------------------------------------------------------------------

@pytest.mark.cuda
def test_embedding_bag_and_clipping_on_cuda_match_cpu():
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((9, 4)).astype(np.float32) * 2
    idx, off = rng.integers(0, 9, 11), np.array([0, 3, 3, 8])
    psw = rng.standard_normal(11).astype(np.float32)
    res = {}
    for dev in ("cpu", "cuda"):
        wt = tl.tensor(w, device=dev, requires_grad=True)
        pw = tl.tensor(psw, device=dev, requires_grad=True)
        a = FS.embedding_bag(tl.tensor(idx, device=dev), wt, tl.tensor(off, device=dev), mode="sum",
                             per_sample_weights=pw, padding_idx=2)
        b = FS.embedding_bag(tl.tensor(idx, device=dev), wt, tl.tensor(off, device=dev), mode="max")
        c = FS.embedding(tl.tensor(idx.reshape(11, 1), device=dev), wt, max_norm=1.5, scale_grad_by_freq=True)
        ((a ** 2).sum() + b.sum() + (c * 1.5).sum()).backward()
        norm = tl.nn.utils.clip_grad_norm_([wt, pw], 0.1)
        res[dev] = [t.detach().cpu().numpy() for t in (a, b, c, wt, wt.grad, pw.grad, norm)]
    for x, y in zip(res["cpu"], res["cuda"]):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


# ---- 6. parametrizations -------------------------------------------------------------------

def _param_classes(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class Scale(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.s = lib.nn.Parameter(lib.tensor([2.0]))

        def forward(self, X):
            return X * self.s

        def right_inverse(self, Y):
            return Y / self.s

    return Symmetric, Scale


def _parametrize_run(lib, P, w, x):
    Symmetric, Scale = _param_classes(lib)
    m = lib.nn.Linear(3, 3)
    m.load_state_dict({"weight": lib.tensor(w), "bias": lib.zeros(3)})
    P.register_parametrization(m, "weight", Symmetric())
    P.register_parametrization(m, "weight", Scale())
    log = [type(m).__name__, P.type_before_parametrizations(m).__name__, P.is_parametrized(m),
           P.is_parametrized(m, "weight"), P.is_parametrized(m, "bias"), list(m.state_dict()),
           [n for n, _ in m.named_parameters()], repr(m)]
    y = m(lib.tensor(x))
    (y ** 2).sum().backward()
    grads = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
    with P.cached():
        a, b = m.weight, m.weight
        log.append(a is b)
    log.append(m.weight is m.weight)
    m.weight = lib.tensor(np.eye(3) * 4.0, dtype=lib.float32)
    after_set = m.parametrizations.weight.original.detach().numpy().copy()
    P.remove_parametrizations(m, "weight", leave_parametrized=True)
    log += [type(m).__name__, list(m.state_dict()), hasattr(m, "parametrizations"), P.is_parametrized(m)]
    return log, y.detach().numpy(), grads, after_set, m.weight.detach().numpy()


def test_parametrize_matches_torch(rng):
    from torchlean.nn.utils import parametrize as P

    w, x = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    ours = _parametrize_run(tl, P, w, x)
    theirs = _parametrize_run(torch, torch.nn.utils.parametrize, w, x)
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1:], theirs[1:]):
        if isinstance(a, dict):
            assert list(a) == list(b)
            for k in a:
                np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    m = tl.nn.Linear(2, 2)
    with pytest.raises(DomainError, match="does not have a parameter"):
        P.register_parametrization(m, "nothing", _param_classes(tl)[0]())
    with pytest.raises(DomainError, match="does not have a parametrization"):
        P.remove_parametrizations(m, "weight")

    class Flatten(tl.nn.Module):
        def forward(self, X):
            return X.reshape(-1)

    with pytest.raises(ShapeError, match="shape"):
        P.register_parametrization(m, "weight", Flatten())
    P.register_parametrization(m, "weight", Flatten(), unsafe=True)
    assert tuple(m.weight.shape) == (4,)
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    assert tuple(m.weight.shape) == (2, 2) and type(m) is tl.nn.Linear


def test_weight_norm_matches_torch(rng):
    from torchlean.nn.utils import parametrizations as PZ

    for dim in (0, 1, None):
        theirs = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(3, 4, 2), dim=dim)
        ours = PZ.weight_norm(tl.nn.Conv1d(3, 4, 2), dim=dim)
        sd = {k: v.detach().numpy() * 1.5 for k, v in theirs.state_dict().items()}
        assert list(ours.state_dict()) == list(sd)
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {k: v.shape for k, v in sd.items()}
        ours.load_state_dict(sd, strict=True)
        theirs.load_state_dict({k: torch.tensor(v) for k, v in sd.items()})
        x = rng.standard_normal((2, 3, 5)).astype(np.float32)
        yo, yt = ours(tl.tensor(x)), theirs(torch.tensor(x))
        (yo ** 2).sum().backward()
        (yt ** 2).sum().backward()
        np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        for (n1, p1), (n2, p2) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert n1 == n2
            np.testing.assert_allclose(p1.grad.numpy(), p2.grad.numpy(), rtol=1e-4, atol=1e-5)
    fresh_t = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 2))
    fresh_o = PZ.weight_norm(tl.nn.Linear(3, 2))
    fresh_o.load_state_dict({k: v.detach().numpy() for k, v in fresh_t.state_dict().items()})
    np.testing.assert_allclose(fresh_o.weight.detach().numpy(), fresh_t.weight.detach().numpy(), rtol=1e-6)
    with pytest.warns(FutureWarning):
        legacy = torch.nn.utils.weight_norm(torch.nn.Linear(3, 2))
    ours = PZ.weight_norm(tl.nn.Linear(3, 2))
    ours.load_state_dict({k: v.detach().numpy() for k, v in legacy.state_dict().items()}, strict=True)
    np.testing.assert_allclose(ours.weight.detach().numpy(), legacy.weight.detach().numpy(), rtol=1e-6)


def test_spectral_norm_matches_torch(rng):
    from torchlean.nn.utils import parametrizations as PZ

    for make, xs in ((lambda lib: lib.nn.Linear(5, 4), (3, 5)),
                     (lambda lib: lib.nn.ConvTranspose1d(3, 4, 2), (2, 3, 6))):
        theirs = torch.nn.utils.parametrizations.spectral_norm(make(torch))
        ours = PZ.spectral_norm(make(tl))
        sd = theirs.state_dict()
        assert list(ours.state_dict()) == list(sd)
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {k: tuple(v.shape) for k, v in sd.items()}
        u0 = ours.parametrizations.weight[0]._u.numpy()
        assert np.linalg.norm(u0) == pytest.approx(1.0, rel=1e-5)
        ours.load_state_dict({k: v.detach().numpy() for k, v in sd.items()}, strict=True)
        x = rng.standard_normal(xs).astype(np.float32)
        for train in (True, True, False):
            ours.train(train)
            theirs.train(train)
            yo, yt = ours(tl.tensor(x)), theirs(torch.tensor(x))
            (yo ** 2).sum().backward()
            (yt ** 2).sum().backward()
            np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
        for k, v in theirs.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)
        for (n1, p1), (n2, p2) in zip(ours.named_parameters(), theirs.named_parameters()):
            np.testing.assert_allclose(p1.grad.numpy(), p2.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=n1)
        # the parametrized weight's largest singular value is ~1
        w = ours.weight.detach().numpy()
        assert np.linalg.svd(w.reshape(w.shape[0], -1) if w.ndim == 2 else
                             np.moveaxis(w, 1, 0).reshape(w.shape[1], -1), compute_uv=False)[0] == \
            pytest.approx(1.0, rel=0.05)


def test_legacy_weight_norm_matches_torch(rng):
    with pytest.warns(FutureWarning):
        theirs = torch.nn.utils.weight_norm(torch.nn.Linear(4, 3), dim=1)
    with pytest.warns(FutureWarning):
        ours = tl.nn.utils.weight_norm(tl.nn.Linear(4, 3), dim=1)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight_g", "weight_v"]
    ours.load_state_dict({k: v.detach().numpy() * 2 for k, v in theirs.state_dict().items()})
    with torch.no_grad():
        for p in theirs.parameters():
            p.mul_(2)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    yo, yt = ours(tl.tensor(x)), theirs(torch.tensor(x))
    yo.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    for (n1, p1), (n2, p2) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n1 == n2
        np.testing.assert_allclose(p1.grad.numpy(), p2.grad.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(DomainError, match="two weight_norm"), pytest.warns(FutureWarning):
        tl.nn.utils.weight_norm(ours, dim=1)
    tl.nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()] == ["bias", "weight"]
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-5)
    with pytest.raises(DomainError, match="not found"):
        tl.nn.utils.remove_weight_norm(ours)


def _extra_state_run(lib):
    class Counter(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(2, 2)
            self.count = 0

        def get_extra_state(self):
            return {"count": self.count}

        def set_extra_state(self, state):
            self.count = state["count"]

    a, b = Counter(), Counter()
    a.count = 7
    sd = a.state_dict()
    keys = list(sd)
    b.load_state_dict(sd)
    del sd["_extra_state"]
    with pytest.raises((RuntimeError, TorchLeanError), match="_extra_state"):
        b.load_state_dict(sd)
    plain = lib.nn.Linear(2, 2)
    res = plain.load_state_dict({**plain.state_dict(), "_extra_state": 1}, strict=False)
    return keys, b.count, list(res.unexpected_keys)


def test_extra_state_matches_torch():
    assert _extra_state_run(tl) == _extra_state_run(torch) == (["_extra_state", "fc.weight", "fc.bias"], 7,
                                                                ["_extra_state"])


@pytest.mark.parametrize("kind", ["linear", "conv", "conv_transpose"])
def test_legacy_spectral_norm_matches_torch(kind, rng):
    """The hook-based nn.utils.spectral_norm: names (weight_orig, weight_u, weight_v), power iteration in
    training only (v then u), the weight's gradient through sigma, eval, and remove_spectral_norm."""
    def make(m):
        return {"linear": lambda: m.nn.Linear(5, 4), "conv": lambda: m.nn.Conv2d(2, 3, 3),
                "conv_transpose": lambda: m.nn.ConvTranspose2d(2, 3, 3)}[kind]()
    torch.manual_seed(0)
    theirs = torch.nn.utils.spectral_norm(make(torch))
    ours = tl.nn.utils.spectral_norm(make(tl))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    ours.load_state_dict({k: tl.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = rng.standard_normal((2, 5) if kind == "linear" else (2, 2, 6, 6)).astype(np.float32)
    for _ in range(3):
        yt, yo = theirs(torch.tensor(x)), ours(tl.tensor(x))
        np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
        yt.square().sum().backward()
        yo.square().sum().backward()
        np.testing.assert_allclose(ours.weight_orig.grad.numpy(), theirs.weight_orig.grad.numpy(), rtol=1e-4,
                                   atol=1e-5)
        theirs.zero_grad()
        ours.zero_grad()
    np.testing.assert_allclose(ours.weight_u.numpy(), theirs.weight_u.numpy(), rtol=1e-4, atol=1e-6)
    theirs.eval()
    ours.eval()
    np.testing.assert_allclose(ours(tl.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    torch.nn.utils.remove_spectral_norm(theirs)
    tl.nn.utils.remove_spectral_norm(ours)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(DomainError, match="spectral_norm of 'weight' not found"):
        tl.nn.utils.remove_spectral_norm(ours)
