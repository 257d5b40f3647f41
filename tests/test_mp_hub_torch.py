"""torchlean.multiprocessing, torchlean.serialization's safe globals, torchlean.hub / utils.model_zoo,
against torch on the same inputs."""

import argparse
import collections
import dataclasses
import hashlib
import io
import multiprocessing as _stdlib_mp
import os
import shutil
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import torchlean as tl
import torchlean.hub as hub
import torchlean.multiprocessing as mp
import torchlean.utils.model_zoo as model_zoo
from torchlean import serialization
from torchlean.errors import AutogradError, TorchLeanError

# Children started by spawn import this module to find their function; they need no oracle.
torch = pytest.importorskip("torch") if _stdlib_mp.parent_process() is None else None

Point = collections.namedtuple("Point", "x y")


@dataclasses.dataclass
class Config:
    lr: float = 0.1
    layers: tuple = (2, 3)


class WithSetstate:
    def __setstate__(self, state):          # code a file would make us run
        raise AssertionError("ran __setstate__")


# ---- functions the child processes run -------------------------------------------------------

def _add_rank(i, t, q, items=None):
    t[2 * i:2 * i + 2] += float(i + 1)    # each child its own half: no two read-modify-writes race
    q.put(i)
    if items is not None and i == 0:      # tensors sent back (copies of their values)
        q.put([x.detach() * 2 for x in items] + [items[0].requires_grad, items[1].dtype.name, type(items[2]).__name__])


def _raise(i):
    if i == 1:
        raise ValueError(f"boom in {i}")


def _exit3(i):
    os._exit(3)


def _fit(i, models, xs, ys, steps):
    """Process i trains models[i] only (losses decouple, so concurrent runs are deterministic)."""
    m = models[i]
    opt = tl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((m(xs[i]) - ys[i]) ** 2).mean()
        loss.backward()
        opt.step()


def _hogwild(i, model, x, y, steps):
    opt = tl.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        ((model(x[i::2]) - y[i::2]) ** 2).mean().backward()
        opt.step()


# ---- multiprocessing ---------------------------------------------------------------------------

def test_public_names_and_sharing_strategies():
    import multiprocessing as std
    for name in std.__all__:
        assert getattr(mp, name) is getattr(std, name), name
    assert mp.get_all_sharing_strategies() == torch.multiprocessing.get_all_sharing_strategies()
    assert mp.get_sharing_strategy() == torch.multiprocessing.get_sharing_strategy()
    mp.set_sharing_strategy("file_system")
    try:
        assert mp.get_sharing_strategy() == "file_system"
    finally:
        mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(AssertionError, match="invalid sharing strategy 'nope'"):
        mp.set_sharing_strategy("nope")
    with pytest.raises(AssertionError):
        torch.multiprocessing.set_sharing_strategy("nope")


def test_tensors_cross_a_queue_with_values_dtype_shape_and_grad_flag():
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    a = tl.tensor([[1.5, -2.0], [3.0, 4.0]], requires_grad=True)
    b = tl.arange(6, dtype=tl.int64).reshape(2, 3)
    p = tl.nn.Parameter(tl.ones(3))
    q.put([a, b, p])
    ra, rb, rp = q.get(timeout=20)
    assert ra.tolist() == a.tolist() and ra.requires_grad and ra.dtype == tl.float32
    assert rb.tolist() == [[0, 1, 2], [3, 4, 5]] and rb.dtype == tl.int64 and not rb.requires_grad
    assert type(rp) is tl.nn.Parameter and rp.requires_grad and rp.tolist() == [1.0, 1.0, 1.0]
    assert not ra.is_shared()
    rb.add_(1)  # a copy: the sender's tensor keeps its values
    assert b.tolist() == [[0, 1, 2], [3, 4, 5]] and rb.tolist() == [[1, 2, 3], [4, 5, 6]]
    with pytest.raises(AutogradError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps(a * 2)


def test_spawned_children_write_into_shared_memory_and_send_tensors_back():
    t = tl.zeros(4).share_memory_()
    assert t.is_shared() and not tl.zeros(2).is_shared()
    q = mp.get_context("spawn").SimpleQueue()
    items = [tl.tensor([1.0, 2.0], requires_grad=True), tl.tensor([1, 2], dtype=tl.int32), tl.nn.Parameter(tl.ones(1))]
    mp.spawn(_add_rank, args=(t, q, items), nprocs=2)
    assert t.tolist() == [1.0, 1.0, 2.0, 2.0]      # child 0 added 1 to its half, child 1 added 2
    got = [q.get() for _ in range(3)]
    assert sorted(g for g in got if isinstance(g, int)) == [0, 1]
    got = next(g for g in got if isinstance(g, list))
    assert got[0].tolist() == [2.0, 4.0] and got[1].tolist() == [2, 4] and got[2].tolist() == [2.0]
    assert got[3:] == [True, "int32", "Parameter"]


def test_forked_children_see_and_make_shared_updates():
    t = tl.ones(4).share_memory_()
    ctx = mp.start_processes(_add_rank, args=(t, mp.get_context("fork").SimpleQueue()), nprocs=2,
                             join=False, start_method="fork")
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 2
    while not ctx.join():
        pass
    assert t.tolist() == [2.0, 2.0, 3.0, 3.0]


def test_spawn_reraises_a_child_exception_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException) as e:
        mp.spawn(_raise, nprocs=2)
    msg = str(e.value)
    assert msg.startswith("\n\n-- Process 1 terminated with the following error:\nTraceback (most recent call last):")
    assert "ValueError: boom in 1" in msg and e.value.error_index == 1
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 3") as e:
        mp.start_processes(_exit3, nprocs=1, start_method="fork")
    assert e.value.exit_code == 3 and e.value.error_index == 0
    with pytest.warns(FutureWarning, match="only supports start_method=spawn"):
        assert mp.spawn(_raise, nprocs=0, start_method="fork") is None


def _oracle_fit(tms, xs, ys, steps):
    for m, x, y in zip(tms, xs, ys):
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        for _ in range(steps):
            opt.zero_grad()
            ((m(x) - y) ** 2).mean().backward()
            opt.step()


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_shared_module_trained_by_two_processes_matches_torch(method):
    torch.manual_seed(0)
    tms = [torch.nn.Linear(3, 2) for _ in range(2)]
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((8, 3)).astype(np.float32) for _ in range(2)]
    ys = [rng.standard_normal((8, 2)).astype(np.float32) for _ in range(2)]
    models = tl.nn.ModuleList([tl.nn.Linear(3, 2) for _ in range(2)])
    models.load_state_dict({k: tl.tensor(v.detach().numpy())
                            for k, v in torch.nn.ModuleList(tms).state_dict().items()})
    models.share_memory()
    assert all(p.is_shared() for p in models.parameters())
    mp.start_processes(_fit, args=(models, [tl.tensor(x) for x in xs], [tl.tensor(y) for y in ys], 20),
                       nprocs=2, start_method=method)
    _oracle_fit(tms, [torch.tensor(x) for x in xs], [torch.tensor(y) for y in ys], 20)
    want = torch.nn.ModuleList(tms).state_dict()
    for k, v in models.state_dict().items():
        np.testing.assert_allclose(v.numpy(), want[k].numpy(), rtol=1e-5, atol=1e-6)


def test_hogwild_two_processes_on_one_model_reduce_the_loss():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    model = tl.nn.Linear(4, 1)
    model.share_memory()
    before = float(((model(tl.tensor(x)) - tl.tensor(y)) ** 2).mean())
    mp.start_processes(_hogwild, args=(model, tl.tensor(x), tl.tensor(y), 150), nprocs=2, start_method="fork")
    after = float(((model(tl.tensor(x)) - tl.tensor(y)) ** 2).mean())
    assert after < 1e-3 * before
    np.testing.assert_allclose(model.weight.numpy(), [[1.0, -2.0, 0.5, 3.0]], atol=2e-2)


# ---- serialization: safe globals ---------------------------------------------------------------

def _torch_file(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.fixture
def clean_globals():
    serialization.clear_safe_globals()
    torch.serialization.clear_safe_globals()
    yield
    serialization.clear_safe_globals()
    torch.serialization.clear_safe_globals()


def test_allowlisted_plain_classes_load_like_torch(clean_globals):
    obj = {"args": argparse.Namespace(lr=0.1, name="run"), "pt": Point(1, 2.5), "cfg": Config(0.3, (4,)),
           "w": torch.arange(3.0)}
    data = _torch_file(obj)
    want = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)))
    assert sorted(serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))) == want
    assert "argparse.Namespace" in want and f"{__name__}.Point" in want
    with pytest.raises(serialization.UnpicklingError, match="argparse.Namespace"):
        tl.load(io.BytesIO(data))
    allow = [argparse.Namespace, Point, Config]
    with serialization.safe_globals(allow), torch.serialization.safe_globals(allow):
        assert serialization.get_safe_globals() == allow
        assert serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)) == []
        got = tl.load(io.BytesIO(data))
        ref = torch.load(io.BytesIO(data), weights_only=True)
    assert serialization.get_safe_globals() == []
    assert got["args"] == ref["args"] and type(got["args"]) is argparse.Namespace
    assert got["pt"] == ref["pt"] == Point(1, 2.5) and type(got["pt"]) is Point
    assert got["cfg"] == ref["cfg"] == Config(0.3, (4,))
    assert got["w"].tolist() == ref["w"].tolist()


def test_allowlist_by_name_and_refusal_of_classes_with_code(clean_globals):
    data = _torch_file({"pt": Point(3, 4)})
    serialization.add_safe_globals([(Point, f"{__name__}.Point")])
    assert tl.load(io.BytesIO(data))["pt"] == Point(3, 4)
    serialization.clear_safe_globals()
    assert serialization.get_safe_globals() == []
    with pytest.raises(serialization.UnpicklingError, match="length 2"):
        serialization.add_safe_globals([(Point, "a", "b")])
    data = _torch_file({"x": WithSetstate()})
    serialization.add_safe_globals([WithSetstate, print])
    with pytest.raises(serialization.UnpicklingError, match="WithSetstate although it is allowlisted"):
        tl.load(io.BytesIO(data))
    with pytest.raises(ValueError, match="checkpoint returned by torch.save"):
        serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(b"not a zip"))


# ---- hub / model_zoo ---------------------------------------------------------------------------

def test_get_dir_follows_torch_home_and_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "xdg" / "torch" / "hub")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "th" / "hub")
    hub.set_dir(str(tmp_path / "mine"))
    try:
        assert hub.get_dir() == str(tmp_path / "mine")
    finally:
        hub._hub_dir = None


def test_load_state_dict_from_url_file_urls_and_hash_check(monkeypatch, tmp_path):
    torch.manual_seed(0)
    sd = torch.nn.Linear(3, 2).state_dict()
    src = tmp_path / "src" / "lin.pth"
    src.parent.mkdir()
    torch.save(sd, src)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    good = tmp_path / "src" / f"lin-{digest[:8]}.pth"
    bad = tmp_path / "src" / "lin-deadbeef.pth"
    shutil.copy(src, good)
    shutil.copy(src, bad)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    got = hub.load_state_dict_from_url(good.as_uri(), check_hash=True, progress=False)
    assert (tmp_path / "home" / "hub" / "checkpoints" / good.name).exists()
    ref = torch.hub.load_state_dict_from_url(good.as_uri(), model_dir=str(tmp_path / "t"), check_hash=True,
                                             progress=False)
    assert list(got) == list(ref)
    for k in ref:
        np.testing.assert_array_equal(got[k].numpy(), ref[k].numpy())
    with pytest.raises(RuntimeError, match='invalid hash value \\(expected "deadbeef"'):
        hub.load_state_dict_from_url(bad.as_uri(), model_dir=str(tmp_path / "m"), check_hash=True, progress=False)
    assert not (tmp_path / "m" / bad.name).exists()
    zoo = model_zoo.load_url(bad.as_uri(), model_dir=str(tmp_path / "z"), file_name="other.pth", progress=False)
    assert zoo["weight"].tolist() == ref["weight"].tolist()
    dst = tmp_path / "copy.bin"
    hub.download_url_to_file(src.as_uri(), str(dst), hash_prefix=digest[:10], progress=False)
    assert dst.read_bytes() == src.read_bytes()


HUBCONF = '''
dependencies = ["numpy"]

def _helper():
    return 0

def scaled(k, bias=0.0):
    """A constant vector model."""
    return [float(k) + bias] * 3
'''


def test_hub_load_list_help_from_a_local_hubconf(tmp_path):
    (tmp_path / "hubconf.py").write_text(HUBCONF)
    got = hub.load(str(tmp_path), "scaled", 2.0, source="local", bias=1.0)
    ref = torch.hub.load(str(tmp_path), "scaled", 2.0, source="local", bias=1.0)
    assert got == ref == [3.0, 3.0, 3.0]
    assert hub.list(str(tmp_path)) == ["scaled"]
    assert hub.help(str(tmp_path), "scaled") == "A constant vector model."
    with pytest.raises(RuntimeError, match="Cannot find callable nope in hubconf"):
        hub.load(str(tmp_path), "nope", source="local")
    with pytest.raises(TorchLeanError, match="downloading repositories .* is not supported"):
        hub.load("pytorch/vision", "resnet18")
    with pytest.raises(TorchLeanError, match="not supported"):
        hub.list("pytorch/vision")
