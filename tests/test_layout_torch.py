"""torch's module layout around the model: device objects, backends flags, accelerator, cuda queries,
matmul precision, thread counts, default device, amp names, each compared with torch."""

import copy
import pickle
import warnings

import numpy as np
import pytest

import torchlean as tl
from torchlean.errors import BackendUnavailableError, DeviceError, TorchLeanError

torch = pytest.importorskip("torch")

CUDA = tl.cuda.is_available()


# ---- tl.device ----------------------------------------------------------------------------------

DEVICE_ARGS = [("cpu",), ("cuda",), ("cuda:0",), ("cuda:1",), ("cuda", 0), ("cuda", 3), ("cpu", 0), ("cuda:12",)]


@pytest.mark.parametrize("args", DEVICE_ARGS, ids=str)
def test_device_fields_str_repr_match_torch(args):
    d, t = tl.device(*args), torch.device(*args)
    assert (d.type, d.index) == (t.type, t.index)
    assert str(d) == str(t)
    assert repr(d) == repr(t)
    assert f"{d}" == f"{t}" and "%s" % d == "%s" % t


def test_device_keywords_and_copy_from_device():
    assert repr(tl.device(type="cuda", index=2)) == repr(torch.device(type="cuda", index=2))
    assert repr(tl.device(tl.device("cuda:1"))) == repr(torch.device(torch.device("cuda:1")))


@pytest.mark.parametrize("a,b", [(("cuda:0",), ("cuda",)), (("cuda:0",), ("cuda", 0)), (("cpu",), ("cpu",)),
                                 (("cpu",), ("cpu", 0)), (("cuda:1",), ("cuda:0",)), (("cpu",), ("cuda",))])
def test_device_equality_and_hash_match_torch(a, b):
    eq = torch.device(*a) == torch.device(*b)
    assert (tl.device(*a) == tl.device(*b)) is eq
    assert (tl.device(*a) != tl.device(*b)) is (not eq)
    if eq:
        assert hash(tl.device(*a)) == hash(tl.device(*b))
    assert len({tl.device(*a), tl.device(*b)}) == len({torch.device(*a), torch.device(*b)})


def test_device_pickles_and_copies():
    d = tl.device("cuda", 0)
    for e in (pickle.loads(pickle.dumps(d)), copy.deepcopy(d), copy.copy(d)):
        assert repr(e) == "device(type='cuda', index=0)" and e == d
    with pytest.raises(AttributeError):
        d.index = 3


@pytest.mark.parametrize("bad", ["gpu", "CUDA", "cuda:-1", "cuda:x", "cpu:0:1", "mps"])
def test_device_bad_strings_raise(bad):
    if bad != "mps":   # torch knows mps; this backend does not
        with pytest.raises(RuntimeError):
            torch.device(bad)
    with pytest.raises(DeviceError, match="device"):
        tl.device(bad)


def test_device_bad_index_arguments_raise():
    with pytest.raises(RuntimeError):
        torch.device("cuda", -1)
    with pytest.raises(DeviceError, match="index"):
        tl.device("cuda", -1)
    with pytest.raises(RuntimeError, match="must not include an index"):
        torch.device("cuda:0", 1)
    with pytest.raises(DeviceError, match="must not include an index"):
        tl.device("cuda:0", 1)
    with pytest.raises(DeviceError):
        tl.device(None)


def test_tensor_device_is_a_device_object_like_torch():
    x, tx = tl.zeros(2), torch.zeros(2)
    assert (x.device == tl.device("cpu")) is (tx.device == torch.device("cpu")) is True
    assert (x.device == tl.device("cuda")) is (tx.device == torch.device("cuda")) is False
    assert x.device.type == tx.device.type == "cpu"
    assert x.device.index is tx.device.index is None
    assert str(x.device) == str(tx.device) and repr(x.device) == repr(tx.device)
    assert x.device == "cpu"           # also a device string (torch says False here)
    assert tl.device("cuda:0") == "cuda" and tl.device("cpu") != "cuda"


@pytest.mark.parametrize("dev", [lambda m: m.device("cpu"), lambda m: m.device("cpu", 0), lambda m: "cpu:0",
                                 lambda m: m.zeros(1).device])
def test_device_objects_accepted_where_strings_are(dev):
    data = [[1.5, -2.0], [3.0, 4.25]]
    for make in (lambda m: m.tensor(data, device=dev(m)), lambda m: m.zeros(2, 3, device=dev(m)),
                 lambda m: m.ones(2, device=dev(m)), lambda m: m.full((2,), 7.0, device=dev(m)),
                 lambda m: m.arange(5, device=dev(m)), lambda m: m.eye(3, device=dev(m)),
                 lambda m: m.linspace(0, 1, 5, device=dev(m)), lambda m: m.empty(2, device=dev(m)).zero_(),
                 lambda m: m.tensor(data).to(dev(m)), lambda m: m.tensor(data).to(device=dev(m)),
                 lambda m: m.zeros_like(m.tensor(data), device=dev(m)),
                 lambda m: m.as_tensor(data, device=dev(m)), lambda m: m.tensor(data).new_ones(3, device=dev(m))):
        a, b = make(tl), make(torch)
        assert a.device.type == b.device.type == "cpu"
        np.testing.assert_array_equal(np.asarray(a.tolist()), b.numpy())


def test_module_to_device_object():
    lin = tl.nn.Linear(3, 2)
    assert lin.to(tl.device("cpu")) is lin and lin.weight.device == tl.device("cpu")
    assert lin.to(tl.device("cpu"), dtype=tl.float64).weight.dtype == tl.float64


def test_other_cuda_index_refused_everywhere():
    """One GPU per process: once CUDA memory is in use on cuda:0, another index is refused (without CUDA,
    naming any GPU says that CUDA is unavailable)."""
    x = tl.zeros(2)
    if CUDA:
        tl.ones(1, device="cuda")
    for f in (lambda: x.to(tl.device("cuda", 1)), lambda: x.to("cuda:1"), lambda: tl.zeros(2, device="cuda:1"),
              lambda: tl.tensor([1.0], device=tl.device("cuda:2")), lambda: tl.nn.Linear(2, 2).to("cuda:1")):
        with pytest.raises(DeviceError if CUDA else BackendUnavailableError, match="cuda:0" if CUDA else "CuPy"):
            f()
    assert tl.zeros(1).device == tl.device("cpu") and tl.get_default_device() == tl.device("cpu")
    with pytest.raises(DeviceError, match="unknown device"):
        tl.zeros(2, device="mps")


# ---- default device ---------------------------------------------------------------------------------

def test_default_device_matches_torch():
    assert repr(tl.get_default_device()) == repr(torch.get_default_device()) == "device(type='cpu')"
    try:
        tl.set_default_device(tl.device("cpu"))
        torch.set_default_device("cpu")
        assert repr(tl.get_default_device()) == repr(torch.get_default_device())
        assert tl.zeros(2).device == tl.device("cpu")
        tl.set_default_device("cuda")
        assert repr(tl.get_default_device()) == "device(type='cuda', index=0)"
        if not CUDA:
            with pytest.raises(BackendUnavailableError):
                tl.zeros(2)
            assert tl.zeros(2, device="cpu").device.type == "cpu"   # an explicit device still wins
        if CUDA:
            tl.ones(1, device="cuda")
        with pytest.raises(DeviceError if CUDA else BackendUnavailableError):
            tl.set_default_device("cuda:1")
    finally:
        tl.set_default_device(None)
        torch.set_default_device(None)
    assert repr(tl.get_default_device()) == repr(torch.get_default_device())
    assert tl.ones(2).device == tl.device("cpu")


# ---- backends ---------------------------------------------------------------------------------------

def _flags(m):
    return (m.backends.cudnn.allow_tf32, m.backends.cudnn.benchmark, m.backends.cudnn.deterministic,
            m.backends.cudnn.enabled, m.backends.cuda.matmul.allow_tf32, m.get_float32_matmul_precision(),
            m.backends.mps.is_available())


@pytest.fixture
def restore_flags():
    saved = [_flags(tl), _flags(torch)]
    yield
    for m, f in zip((tl, torch), saved):
        m.backends.cudnn.allow_tf32, m.backends.cudnn.benchmark, m.backends.cudnn.deterministic = f[:3]
        m.backends.cudnn.enabled = f[3]
        m.set_float32_matmul_precision(f[5])


def _real_switch():
    return tl.cuda.tf32_enabled() if CUDA else None


def test_backend_flag_defaults_match_torch():
    assert _flags(tl) == _flags(torch) == (True, False, False, True, False, "highest", False)
    assert tl.backends.mps.is_built() is False
    # cuDNN is used where CUDA and the cuDNN frontend are: availability and version agree
    assert tl.backends.cudnn.is_available() is (tl.backends.cudnn.version() is not None)
    if not CUDA:
        assert tl.backends.cudnn.is_available() is False


@pytest.mark.parametrize("steps", [
    [("matmul", True)], [("matmul", True), ("matmul", False)], [("precision", "medium")],
    [("precision", "medium"), ("precision", "highest")], [("cudnn", False), ("matmul", True)],
    [("benchmark", True), ("deterministic", True), ("enabled", False)]], ids=str)
def test_backend_flag_trajectories_match_torch(steps, restore_flags):
    for m in (tl, torch):
        for what, v in steps:
            if what == "matmul":
                m.backends.cuda.matmul.allow_tf32 = v
            elif what == "precision":
                m.set_float32_matmul_precision(v)
            elif what == "cudnn":
                m.backends.cudnn.allow_tf32 = v
            else:
                setattr(m.backends.cudnn, what, v)
    assert _flags(tl) == _flags(torch)
    if CUDA:   # the one switch: on when both matmul and cudnn allow TF32
        assert _real_switch() is (tl.backends.cuda.matmul.allow_tf32 and tl.backends.cudnn.allow_tf32)


def test_allow_tf32_after_a_precision_resets_it_as_torchs_legacy_api(restore_flags):
    # torch 2.13 refuses to read the precision after mixing both APIs; its legacy setter's rule is kept
    tl.set_float32_matmul_precision("medium")
    tl.backends.cuda.matmul.allow_tf32 = True
    assert tl.get_float32_matmul_precision() == "high"
    tl.backends.cuda.matmul.allow_tf32 = False
    assert tl.get_float32_matmul_precision() == "highest"


def test_unknown_precision_warns_and_keeps_the_setting(restore_flags):
    for m in (tl, torch):
        m.set_float32_matmul_precision("high")
        with pytest.warns(UserWarning, match="has no effect"):
            m.set_float32_matmul_precision("low")
        assert m.get_float32_matmul_precision() == "high"


def test_matmul_unknown_attribute_raises_like_torch():
    for m in (tl, torch):
        with pytest.raises(AttributeError, match="Unknown attribute foo"):
            _ = m.backends.cuda.matmul.foo
        with pytest.raises(AttributeError, match="Unknown attribute foo"):
            m.backends.cuda.matmul.foo = 1


def test_cuda_set_tf32_moves_the_flags(restore_flags):
    if not CUDA:
        with pytest.raises(BackendUnavailableError):
            tl.cuda.set_tf32(True)
        assert tl.backends.cuda.matmul.allow_tf32 is False
        return
    tl.cuda.set_tf32(True)
    assert tl.backends.cuda.matmul.allow_tf32 and tl.cuda.tf32_enabled()
    tl.cuda.set_tf32(False)
    assert tl.get_float32_matmul_precision() == "highest" and not tl.cuda.tf32_enabled()


# ---- accelerator and cuda ------------------------------------------------------------------------------

def test_accelerator_matches_torch_without_an_accelerator():
    if CUDA or torch.accelerator.is_available():
        pytest.skip("compares the no-accelerator behaviour")
    assert tl.accelerator.is_available() is torch.accelerator.is_available() is False
    assert tl.accelerator.current_accelerator() is torch.accelerator.current_accelerator() is None
    assert tl.accelerator.current_accelerator(check_available=True) is None
    assert tl.accelerator.device_count() == torch.accelerator.device_count() == 0
    for name, args in (("current_device_index", ()), ("set_device_index", (0,)), ("synchronize", ())):
        with pytest.raises(RuntimeError):
            getattr(torch.accelerator, name)(*args)
        with pytest.raises(DeviceError, match=f"accelerator.{name}: cannot access accelerator"):
            getattr(tl.accelerator, name)(*args)


def test_accelerator_with_cuda():
    if not CUDA:
        pytest.skip("needs CUDA")
    assert tl.accelerator.current_accelerator() == tl.device("cuda")
    tl.ones(1, device="cuda")            # CUDA memory in use: the process's GPU is fixed
    assert tl.accelerator.device_count() == torch.cuda.device_count() and tl.accelerator.current_device_index() == 0
    tl.accelerator.set_device_index(0)
    tl.accelerator.synchronize()
    with pytest.raises(DeviceError):
        tl.accelerator.set_device_index(1)


def test_cuda_queries_match_torch_without_cuda():
    if CUDA or torch.cuda.is_available():
        pytest.skip("compares the no-CUDA behaviour")
    assert tl.cuda.is_available() is torch.cuda.is_available() is False
    assert tl.cuda.device_count() == torch.cuda.device_count() == 0
    assert tl.cuda.memory_allocated() == torch.cuda.memory_allocated() == 0
    assert tl.cuda.max_memory_allocated() == torch.cuda.max_memory_allocated() == 0
    assert tl.cuda.empty_cache() is torch.cuda.empty_cache() is None
    for name, args in (("current_device", ()), ("set_device", (0,)), ("get_device_name", ()),
                       ("synchronize", ()), ("reset_peak_memory_stats", ())):
        with pytest.raises((AssertionError, AttributeError, RuntimeError)):
            getattr(torch.cuda, name)(*args)
        with pytest.raises(BackendUnavailableError, match="CuPy"):
            getattr(tl.cuda, name)(*args)


def test_cuda_manual_seed_without_cuda_leaves_the_stream_as_torch():
    if CUDA or torch.cuda.is_available():
        pytest.skip("compares the no-CUDA behaviour")
    for m in (tl, torch):
        m.manual_seed(3)
        m.rand(4)
        m.cuda.manual_seed(3)
        m.cuda.manual_seed_all(3)
        after = m.rand(4).tolist()
        m.manual_seed(3)
        first = m.rand(4).tolist()
        assert after == m.rand(4).tolist() != first     # the CUDA seeds did not restart the CPU stream


def test_cuda_queries_with_cuda():
    if not CUDA:
        pytest.skip("needs CUDA")
    tl.ones(1, device="cuda")            # CUDA memory in use: the process's GPU is fixed
    assert tl.cuda.device_count() == torch.cuda.device_count() and tl.cuda.current_device() == 0
    tl.cuda.set_device(0)
    tl.cuda.set_device("cuda:0")
    with pytest.raises(DeviceError):
        tl.cuda.set_device(1)
    assert tl.cuda.get_device_name() == tl.cuda.get_device_name(0) == tl.cuda.device_name()
    tl.cuda.reset_peak_memory_stats()
    before = tl.cuda.memory_allocated()
    x = tl.ones(256, 1024, device="cuda")
    tl.cuda.synchronize()
    assert tl.cuda.memory_allocated() - before >= 1024 * 1024
    assert tl.cuda.max_memory_allocated() >= tl.cuda.memory_allocated()
    del x
    tl.cuda.empty_cache()
    tl.cuda.manual_seed(5)
    a = tl.rand(3, device="cuda").tolist()
    tl.cuda.manual_seed_all(5)
    assert tl.rand(3, device="cuda").tolist() == a


# ---- threads ------------------------------------------------------------------------------------------

def test_num_threads_round_trip_and_reach_the_blas_pool():
    n0, t0 = tl.get_num_threads(), torch.get_num_threads()
    assert n0 >= 1
    try:
        tl.set_num_threads(1)
        torch.set_num_threads(1)
        assert tl.get_num_threads() == torch.get_num_threads() == 1
        threadpoolctl = pytest.importorskip("threadpoolctl")
        blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)
    finally:
        tl.set_num_threads(n0)
        torch.set_num_threads(t0)
    assert tl.get_num_threads() == n0


@pytest.mark.parametrize("bad", [0, -2])
def test_set_num_threads_rejects_what_torch_rejects(bad):
    with pytest.raises(RuntimeError, match="positive integer"):
        torch.set_num_threads(bad)
    with pytest.raises(TorchLeanError, match="set_num_threads expects a positive integer"):
        tl.set_num_threads(bad)


# ---- amp ---------------------------------------------------------------------------------------------

def _fit(m, scaler, steps=4, closure=False):
    """SGD on a fixed linear regression through a (disabled) GradScaler; the weights after."""
    m.manual_seed(0)
    lin = m.nn.Linear(3, 1)
    with m.no_grad():
        lin.weight.copy_(m.tensor([[0.5, -0.25, 0.125]]))
        lin.bias.fill_(0.1)
    opt = m.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    x = m.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0], [0.0, -1.0, 1.0], [2.0, 2.0, -1.0]])
    y = m.tensor([[1.0], [0.0], [-1.0], [2.0]])
    out = []
    for _ in range(steps):
        opt.zero_grad()
        with m.autocast(device_type="cpu", enabled=False):
            loss = ((lin(x) - y) ** 2).mean()
        scaled = scaler.scale(loss)
        assert scaled is loss
        scaled.backward()
        scaler.unscale_(opt)
        r = scaler.step(opt, (lambda: 7.0)) if closure else scaler.step(opt)
        out.append(r)
        scaler.update()
    return lin.weight.detach().tolist() + [lin.bias.detach().tolist()], out


@pytest.mark.parametrize("closure", [False, True])
def test_disabled_grad_scaler_is_torchs_pass_through(closure):
    (wa, ra), (wb, rb) = _fit(tl, tl.amp.GradScaler(enabled=False), closure=closure), \
        _fit(torch, torch.amp.GradScaler(enabled=False), closure=closure)
    np.testing.assert_allclose(np.asarray(wa[0] + wa[1]), np.asarray(wb[0] + wb[1]), rtol=1e-6, atol=1e-7)
    assert ra == rb
    for m in (tl, torch):
        s = m.amp.GradScaler("cpu", enabled=False)
        assert s.is_enabled() is False and s.get_scale() == 1.0 and s.state_dict() == {}
        assert s.load_state_dict({"scale": 8.0}) is None and s.state_dict() == {}
        pair = [m.ones(1), m.ones(2)]
        assert s.scale(pair) is pair and s.update(2.0) is None


def test_scalers_without_cuda_disable_themselves_with_torchs_warning():
    if CUDA or torch.cuda.is_available():
        pytest.skip("compares the no-CUDA behaviour")
    for m in (tl, torch):
        with pytest.warns(UserWarning, match="CUDA is not available.  Disabling"):
            s = m.amp.GradScaler()
        assert s.is_enabled() is False and s.state_dict() == {}
        with pytest.warns(FutureWarning, match="torch.cuda.amp.GradScaler"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                s = m.cuda.amp.GradScaler()
        assert s.is_enabled() is False and s.get_scale() == 1.0
        with pytest.warns(UserWarning, match="Disabling autocast"):
            with m.autocast("cuda"):
                pass
        with pytest.warns(FutureWarning, match="torch.cuda.amp.autocast"):
            m.cuda.amp.autocast(enabled=False)


def test_autocast_not_supported_yet_raises_a_clear_error(monkeypatch):
    """CPU autocast runs (tests/test_amp_torch.py); bfloat16 without ml_dtypes and CUDA autocast say why not."""
    monkeypatch.setattr(tl.bfloat16, "np", None)
    for make in (lambda: tl.autocast("cpu"), lambda: tl.autocast(device_type="cpu", dtype=tl.bfloat16)):
        with pytest.raises(BackendUnavailableError, match=r"bfloat16 on the CPU needs the ml_dtypes package"):
            make()
    monkeypatch.undo()
    if CUDA:
        with pytest.raises(BackendUnavailableError, match="issue 20"):
            tl.autocast("cuda")


# ---- the enabled GradScaler against torch's ----------------------------------------------------------

def _scaled_fit(m, steps, device="cpu", poison=(), two_optimizers=False, clip=None, gain=1.0, **kw):
    """Adam on a fixed regression through an enabled GradScaler. ``poison``: steps whose loss is
    multiplied by NaN. Returns per step (scale, growth tracker, step's return, weights)."""
    lin = m.nn.Linear(3, 2).to(device)
    other = m.nn.Linear(3, 2).to(device)
    with m.no_grad():
        lin.weight.copy_(m.tensor([[0.5, -0.25, 0.125], [0.3, 0.2, -0.1]]))
        lin.bias.copy_(m.tensor([0.1, -0.2]))
        other.weight.copy_(m.tensor([[0.2, 0.1, 0.0], [-0.1, 0.4, 0.3]]))
        other.bias.fill_(0.0)
    opts = [m.optim.Adam(lin.parameters(), lr=0.01)]
    if two_optimizers:
        opts.append(m.optim.SGD(other.parameters(), lr=0.1))
    x = m.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0], [0.0, -1.0, 1.0], [2.0, 2.0, -1.0]], device=device)
    y = m.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.5], [2.0, -2.0]], device=device)
    scaler = m.amp.GradScaler(device, **kw)
    out = []
    for k in range(steps):
        for o in opts:
            o.zero_grad()
        loss = ((lin(x) - y) ** 2).mean() + (((other(x) - y) ** 2).mean() if two_optimizers else 0.0)
        if k in poison:
            loss = loss * float("nan")
        loss = loss * gain
        scaler.scale(loss).backward()
        if clip is not None:
            scaler.unscale_(opts[0])
            m.nn.utils.clip_grad_norm_(lin.parameters(), clip)
        rets = [scaler.step(o) for o in opts]
        scaler.update()
        w = [p.detach().cpu().reshape(-1).tolist() for p in [*lin.parameters(), *other.parameters()]]
        out.append((scaler.get_scale(), scaler.state_dict()["_growth_tracker"], rets, w))
    return out, scaler


@pytest.mark.parametrize("case", ["overflow", "overflow_then_growth", "nan_steps", "clip", "two_optimizers"])
def test_enabled_grad_scaler_matches_torch(case):
    kw = {"overflow": dict(init_scale=2.0 ** 126, gain=1e6, backoff_factor=2.0 ** -8, growth_interval=2),
          "overflow_then_growth": dict(init_scale=2.0 ** 127, growth_interval=3),   # growth would overflow
          "nan_steps": dict(init_scale=2.0 ** 10, growth_interval=2, poison=(1, 2, 5)),
          "clip": dict(init_scale=2.0 ** 12, clip=0.5, poison=(3,)),
          "two_optimizers": dict(init_scale=2.0 ** 8, two_optimizers=True, poison=(2,), growth_interval=2,
                                 backoff_factor=0.25, growth_factor=4.0)}[case]
    (a, sa), (b, sb) = _scaled_fit(tl, 9, **kw), _scaled_fit(torch, 9, **kw)
    for k, ((sc_a, tr_a, r_a, w_a), (sc_b, tr_b, r_b, w_b)) in enumerate(zip(a, b)):
        assert (sc_a, tr_a, r_a) == (sc_b, tr_b, r_b), f"step {k}"
        np.testing.assert_allclose(np.concatenate(w_a), np.concatenate(w_b), rtol=1e-6, atol=1e-7,
                                   err_msg=f"step {k}")
    assert sa.state_dict() == sb.state_dict()
    scales = [kw["init_scale"]] + [step[0] for step in a]
    if case == "overflow":                      # the scaled gradients overflow until the scale has backed off
        first = next(k for k in range(9) if a[k][3] != (a[k - 1][3] if k else None) and scales[k + 1] >= scales[k])
        assert first >= 2 and scales[first] == 2.0 ** (126 - 8 * first)
    if case == "overflow_then_growth":          # growing past float32's range is refused: the scale stays
        assert set(scales) == {2.0 ** 127} and [step[1] for step in a][:4] == [1, 2, 0, 1]
    for k in kw.get("poison", ()):
        assert a[k][3] == a[k - 1][3] and scales[k + 1] < scales[k]   # skipped, and the scale backed off


def test_enabled_grad_scaler_api_and_errors_match_torch():
    import pickle
    for m in (tl, torch):
        s = m.amp.GradScaler("cpu", init_scale=8.0, growth_interval=5)
        assert s.is_enabled() and s.get_scale() == 8.0
        assert s.state_dict() == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                  "growth_interval": 5, "_growth_tracker": 0}
        w = m.nn.Parameter(m.tensor([1.0, -2.0]))
        opt = m.optim.SGD([w], lr=0.1)
        with pytest.raises((RuntimeError, AssertionError), match="Attempted unscale_ but _scale is None"):
            s.unscale_(opt)
        pair = s.scale([m.tensor(1.0), (m.tensor(2.0), m.tensor(3.0))])
        assert isinstance(pair, list) and isinstance(pair[1], tuple) and [pair[0].item(), pair[1][1].item()] == [8.0, 24.0]
        gen = s.scale(iter([m.tensor(0.5)]))
        assert not isinstance(gen, (list, tuple)) and [t.item() for t in gen] == [4.0]
        with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
            s.scale(3.0)
        s.scale((w * w).sum()).backward()
        s.unscale_(opt)
        assert w.grad.tolist() == [2.0, -4.0]
        with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called on this optimizer"):
            s.unscale_(opt)
        with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
            s.step(opt, closure=lambda: 0.0)
        s.step(opt)
        with pytest.raises(RuntimeError, match=r"step\(\) has already been called since the last update"):
            s.step(opt)
        with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step"):
            s.unscale_(opt)
        s.update(new_scale=32.0)
        assert s.get_scale() == 32.0
        s.update(m.tensor(4.0))
        assert s.get_scale() == 4.0
        clone = pickle.loads(pickle.dumps(s))
        assert clone.state_dict() == s.state_dict() and clone.get_scale() == 4.0
        t = m.amp.GradScaler("cpu")
        t.load_state_dict(s.state_dict())
        assert t.state_dict() == s.state_dict()
        with pytest.raises(RuntimeError, match="The source state dict is empty"):
            t.load_state_dict({})
        with pytest.raises((ValueError, AssertionError), match="growth factor must be > 1.0"):
            m.amp.GradScaler("cpu", growth_factor=1.0)
        with pytest.raises((ValueError, AssertionError), match="backoff factor must be < 1.0"):
            m.amp.GradScaler("cpu", backoff_factor=1.0)


@pytest.mark.cuda
def test_enabled_grad_scaler_on_cuda_matches_the_cpu():
    if not CUDA:
        pytest.skip("needs CUDA")
    kw = dict(init_scale=2.0 ** 127, growth_interval=3, poison=(5,))
    a, _ = _scaled_fit(tl, 9, device="cuda", **kw)
    b, _ = _scaled_fit(tl, 9, device="cpu", **kw)
    for (sc_a, tr_a, r_a, w_a), (sc_b, tr_b, r_b, w_b) in zip(a, b):
        assert (sc_a, tr_a, r_a) == (sc_b, tr_b, r_b)
        np.testing.assert_allclose(np.concatenate(w_a), np.concatenate(w_b), rtol=1e-5, atol=1e-6)


def test_autocast_disabled_forms_match_torch():
    assert tl.autocast is tl.amp.autocast
    for m in (tl, torch):
        with m.autocast(device_type="cpu", dtype=m.bfloat16, enabled=False) as ctx:
            v = (m.ones(2) * 3).tolist()
        assert v == [3.0, 3.0] and ctx is not None

        @m.autocast("cpu", enabled=False)
        def f(x):
            return (x * 2).tolist()
        assert f(m.ones(2)) == [2.0, 2.0] and f.__name__ == "f"
        with pytest.warns(UserWarning, match="target dtype is not supported"):
            m.autocast("cpu", dtype=m.float32)          # torch disables; so does torchlean
    with pytest.raises(ValueError, match="device_type"):
        torch.autocast(1)
    with pytest.raises(DeviceError, match="device_type"):
        tl.autocast(1)
    with pytest.raises(TypeError):
        tl.amp.GradScaler(enabled=False, bogus=1)


def test_cuda_amp_is_importable_as_a_module():
    from torchlean.cuda.amp import GradScaler, autocast
    assert issubclass(GradScaler, tl.amp.GradScaler) and issubclass(autocast, tl.amp.autocast)
    assert tl.cuda.amp.GradScaler is GradScaler
