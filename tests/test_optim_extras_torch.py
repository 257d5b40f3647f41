"""SparseAdam, ASGD, Adafactor, optimizer hooks and optim.swa_utils against PyTorch."""

import importlib
import math
import warnings

import numpy as np
import pytest

import torchlean as tl
from torchlean.errors import TorchLeanError

torch = pytest.importorskip("torch")

SHAPES = [(5,), (4, 3), (2, 3, 4), ()]


def _pair(shapes, seed=0):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ours = [tl.nn.Parameter(tl.tensor(a.copy())) for a in arrs]
    theirs = [torch.nn.Parameter(torch.tensor(a.copy())) for a in arrs]
    return ours, theirs


def _grads(shapes, rng, sparse_rows=False):
    out = []
    for s in shapes:
        g = rng.standard_normal(s).astype(np.float32)
        if sparse_rows and len(s) >= 1:
            g[rng.random(s[0]) < 0.5] = 0.0       # whole rows absent, as an Embedding's sparse grad
        out.append(g)
    return out


def _run(ours_cls, torch_cls, kwargs, shapes=SHAPES, steps=6, sparse=False, seed=0):
    ours, theirs = _pair(shapes, seed)
    o = ours_cls(ours, **kwargs)
    t = torch_cls(theirs, **kwargs)
    rng = np.random.default_rng(seed + 1)
    for _ in range(steps):
        for p, q, g in zip(ours, theirs, _grads(shapes, rng, sparse)):
            p.grad = tl.tensor(g)
            q.grad = torch.tensor(g).to_sparse(1) if sparse else torch.tensor(g)
        o.step()
        t.step()
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=2e-5, atol=2e-6)
    return o, t, ours, theirs


def _assert_state_close(sd_ours, sd_torch):
    assert sd_ours["param_groups"] == sd_torch["param_groups"]
    assert sorted(sd_ours["state"]) == sorted(sd_torch["state"])
    for i, st in sd_torch["state"].items():
        mine = sd_ours["state"][i]
        assert sorted(mine) == sorted(st)
        for k, v in st.items():
            if isinstance(v, torch.Tensor):
                assert isinstance(mine[k], tl.Tensor), k
                assert tuple(mine[k].shape) == tuple(v.shape), k
                assert str(mine[k].dtype).split(".")[-1] == str(v.dtype).split(".")[-1], k
                np.testing.assert_allclose(mine[k].numpy(), v.numpy(), rtol=2e-5, atol=2e-6, err_msg=k)
            else:
                assert type(mine[k]) is type(v) and mine[k] == v, k


OPTS = [
    ("ASGD", {}),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=2, weight_decay=0.1)),
    ("ASGD", dict(lr=0.05, t0=0, maximize=True)),
    ("Adafactor", {}),
    ("Adafactor", dict(lr=0.05, beta2_decay=-0.5, eps=(1e-6, 1e-2), d=1.5, weight_decay=0.1)),
    ("Adafactor", dict(lr=0.03, maximize=True)),
    ("Adafactor", dict(lr=1.0, d=2.0)),      # rho_t = 1/sqrt(t) once t > 1
]


@pytest.mark.parametrize("name,kwargs", OPTS)
def test_trajectory_and_state_dict(name, kwargs):
    shapes = SHAPES if name != "Adafactor" else [(5,), (4, 3), (2, 3, 4)]
    o, t, _, _ = _run(getattr(tl.optim, name), getattr(torch.optim, name), kwargs, shapes=shapes)
    _assert_state_close(o.state_dict(), t.state_dict())


def _continue(o, t, ours, theirs, shapes, seed, steps=3, sparse=False):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        for p, q, g in zip(ours, theirs, _grads(shapes, rng, sparse)):
            p.grad = tl.tensor(g)
            q.grad = torch.tensor(g).to_sparse(1) if sparse else torch.tensor(g)
        o.step()
        t.step()
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name,kwargs,sparse", [
    ("ASGD", dict(lr=0.05, t0=1), False),
    ("Adafactor", dict(lr=0.05), False),
    ("SparseAdam", dict(lr=0.05), True),
])
def test_state_dict_crosses_both_ways(name, kwargs, sparse):
    shapes = [(5,), (4, 3)]
    o, t, ours, theirs = _run(getattr(tl.optim, name), getattr(torch.optim, name), kwargs, shapes=shapes,
                              steps=4, sparse=sparse)
    # torch -> torchlean: a fresh optimizer of ours resumes torch's trajectory
    ours2 = [tl.nn.Parameter(tl.tensor(q.detach().numpy().copy())) for q in theirs]
    o2 = getattr(tl.optim, name)(ours2, lr=0.5)
    o2.load_state_dict(t.state_dict())
    assert o2.param_groups[0]["lr"] == kwargs["lr"]
    # torchlean -> torch
    theirs2 = [torch.nn.Parameter(torch.tensor(p.detach().numpy().copy())) for p in ours]
    t2 = getattr(torch.optim, name)(theirs2, lr=0.5)
    sd = o.state_dict()
    t2.load_state_dict({"state": {i: {k: (torch.tensor(v.numpy()) if isinstance(v, tl.Tensor) else v)
                                      for k, v in st.items()} for i, st in sd["state"].items()},
                        "param_groups": sd["param_groups"]})
    _continue(o2, t, ours2, theirs, shapes, 7, sparse=sparse)
    _continue(o, t2, ours, theirs2, shapes, 7, sparse=sparse)


@pytest.mark.parametrize("kwargs", [{}, dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6), dict(lr=0.02, maximize=True)])
def test_sparse_adam_rows(kwargs):
    shapes = [(6, 3), (7,)]
    o, t, _, _ = _run(tl.optim.SparseAdam, torch.optim.SparseAdam, kwargs, shapes=shapes, steps=8, sparse=True)
    sd = o.state_dict()
    assert sd["state"][0]["step"] == t.state_dict()["state"][0]["step"] == 8
    _assert_state_close(sd, t.state_dict())


def test_sparse_adam_skips_all_zero_gradient_but_counts_step():
    p = tl.nn.Parameter(tl.ones(3, 2))
    q = torch.nn.Parameter(torch.ones(3, 2))
    o, t = tl.optim.SparseAdam([p]), torch.optim.SparseAdam([q])
    p.grad, q.grad = tl.zeros(3, 2), torch.zeros(3, 2).to_sparse(1)
    o.step()
    t.step()
    assert o.state[p]["step"] == t.state[q]["step"] == 1
    np.testing.assert_array_equal(p.detach().numpy(), np.ones((3, 2), np.float32))


def test_defaults_and_errors():
    for name in ("SparseAdam", "ASGD", "Adafactor"):
        a = getattr(tl.optim, name)([tl.nn.Parameter(tl.ones(2))]).param_groups[0]
        b = getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))]).param_groups[0]
        assert {k: v for k, v in a.items() if k != "params"} == {k: v for k, v in b.items() if k != "params"}, name
    with pytest.raises(TorchLeanError, match="learning rate"):
        tl.optim.SparseAdam([tl.nn.Parameter(tl.ones(1))], lr=0.0)
    with pytest.raises(TorchLeanError, match="learning rate"):
        tl.optim.ASGD([tl.nn.Parameter(tl.ones(1))], lr=-1.0)
    with pytest.raises(TorchLeanError, match="beta2_decay"):
        tl.optim.Adafactor([tl.nn.Parameter(tl.ones(1))], beta2_decay=0.5)
    with pytest.raises(TorchLeanError, match="d should be >= 1"):
        tl.optim.Adafactor([tl.nn.Parameter(tl.ones(1))], d=0.5)


# ---- hooks ---------------------------------------------------------------------------------------

def _hook_log(mod, opt_cls, p):
    log = []
    opt = opt_cls([p], lr=0.1)
    h1 = opt.register_step_pre_hook(lambda o, a, k: log.append(("pre", len(a), dict(k))))
    h2 = opt.register_step_post_hook(lambda o, a, k: log.append(("post", len(a), dict(k))))
    optimizer = importlib.import_module(mod.__name__ + ".optim.optimizer")
    g1 = optimizer.register_optimizer_step_pre_hook(lambda o, a, k: log.append(("gpre", o is opt)))
    g2 = optimizer.register_optimizer_step_post_hook(lambda o, a, k: log.append(("gpost", o is opt)))
    try:
        p.grad = mod.ones(2)
        opt.step()
        h1.remove()
        g2.remove()
        opt.step(closure=None)
    finally:
        for h in (h1, h2, g1, g2):
            h.remove()
    opt.step()
    return log


def test_step_hooks_order_args_and_removal():
    ours = _hook_log(tl, tl.optim.SGD, tl.nn.Parameter(tl.ones(2)))
    theirs = _hook_log(torch, torch.optim.SGD, torch.nn.Parameter(torch.ones(2)))
    assert ours == theirs
    assert ours[:4] == [("gpre", True), ("pre", 1, {}), ("post", 1, {}), ("gpost", True)]


@pytest.mark.parametrize("mod", [tl, torch])
def test_pre_hook_replaces_arguments(mod):
    p = mod.nn.Parameter(mod.ones(2))
    opt = mod.optim.SGD([p], lr=1.0)
    calls = []

    def closure():
        calls.append(1)
        return 5.0

    opt.register_step_pre_hook(lambda o, a, k: (a, {"closure": closure}))
    p.grad = mod.ones(2)
    assert opt.step() == 5.0 and calls == [1]
    opt.register_step_pre_hook(lambda o, a, k: "bad")
    with pytest.raises((RuntimeError, TorchLeanError), match="must return None or a tuple"):
        opt.step()


def _state_dict_hooks(mod):
    p = mod.nn.Parameter(mod.ones(2))
    opt = mod.optim.Adam([p], lr=0.1)
    log = []
    opt.register_state_dict_pre_hook(lambda o: log.append("sd_pre"))
    opt.register_state_dict_pre_hook(lambda o: log.append("sd_pre_first"), prepend=True)

    def post(o, sd):
        log.append("sd_post")
        sd = dict(sd)
        sd["extra"] = 1
        return sd
    opt.register_state_dict_post_hook(post)
    sd = opt.state_dict()

    def lpre(o, sd):
        log.append(("ld_pre", "extra" in sd))
        sd = dict(sd)
        sd.pop("extra")
        sd["param_groups"] = [dict(sd["param_groups"][0], lr=0.25)]
        return sd
    h = opt.register_load_state_dict_pre_hook(lpre)
    opt.register_load_state_dict_post_hook(lambda o: log.append(("ld_post", o.param_groups[0]["lr"])))
    opt.load_state_dict(sd)
    h.remove()
    opt.param_groups[0]["lr"] = 0.5
    sd.pop("extra")
    opt.load_state_dict(sd)
    return log, "extra" in sd


def test_state_dict_hooks():
    assert _state_dict_hooks(tl) == _state_dict_hooks(torch)
    assert _state_dict_hooks(tl)[0] == ["sd_pre_first", "sd_pre", "sd_post", ("ld_pre", True), ("ld_post", 0.25),
                                        ("ld_post", 0.1)]


def test_hooks_on_user_subclass_step():
    class Mine(tl.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1})

        def step(self, closure=None):
            return "stepped"
    opt = Mine([tl.nn.Parameter(tl.ones(1))])
    seen = []
    opt.register_step_post_hook(lambda o, a, k: seen.append(a[0] is o))
    assert opt.step() == "stepped" and seen == [True]


# ---- swa_utils -----------------------------------------------------------------------------------

def _nets(seed=0):
    rng = np.random.default_rng(seed)
    tnet = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    onet = tl.nn.Sequential(tl.nn.Linear(3, 4), tl.nn.BatchNorm1d(4), tl.nn.Linear(4, 2))
    sd = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32) if v.is_floating_point() else v.numpy()
          for k, v in tnet.state_dict().items()}
    sd["1.running_var"] = np.abs(sd["1.running_var"]) + 0.5
    tnet.load_state_dict({k: torch.tensor(v) for k, v in sd.items()})
    onet.load_state_dict({k: tl.tensor(v) for k, v in sd.items()})
    return onet, tnet


def _perturb(onet, tnet, rng):
    for (n, p), (_, q) in zip(onet.named_parameters(), tnet.named_parameters()):
        d = rng.standard_normal(tuple(q.shape)).astype(np.float32)
        with torch.no_grad():
            q.add_(torch.tensor(d))
        with tl.no_grad():
            p.add_(tl.tensor(d))
    x = rng.standard_normal((8, 3)).astype(np.float32)
    onet.train()
    tnet.train()
    onet(tl.tensor(x))
    tnet(torch.tensor(x))


def _avg_kwargs(mod, kind):
    su = mod.optim.swa_utils
    return {"swa": {}, "ema_multi": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.9)},
            "ema": {"avg_fn": su.get_ema_avg_fn(0.8)}, "swa_fn": {"avg_fn": su.get_swa_avg_fn()},
            "swa_multi": {"multi_avg_fn": su.get_swa_multi_avg_fn()},
            "ema_buffers": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.7), "use_buffers": True}}[kind]


@pytest.mark.parametrize("kind", ["swa", "ema_multi", "ema", "swa_fn", "swa_multi", "ema_buffers"])
def test_averaged_model(kind):
    onet, tnet = _nets()
    oavg = tl.optim.swa_utils.AveragedModel(onet, **_avg_kwargs(tl, kind))
    tavg = torch.optim.swa_utils.AveragedModel(tnet, **_avg_kwargs(torch, kind))
    rng = np.random.default_rng(3)
    for _ in range(4):
        _perturb(onet, tnet, rng)
        oavg.update_parameters(onet)
        tavg.update_parameters(tnet)
    osd, tsd = oavg.state_dict(), tavg.state_dict()
    assert list(osd) == list(tsd)
    for k in tsd:
        np.testing.assert_allclose(osd[k].numpy(), tsd[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert int(oavg.n_averaged) == 4
    x = rng.standard_normal((5, 3)).astype(np.float32)
    oavg.eval()
    tavg.eval()
    np.testing.assert_allclose(oavg(tl.tensor(x)).detach().numpy(), tavg(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_avg_fn_errors():
    with pytest.raises(TorchLeanError):
        tl.optim.swa_utils.get_ema_avg_fn(1.5)
    with pytest.raises(TorchLeanError):
        tl.optim.swa_utils.AveragedModel(tl.nn.Linear(1, 1), avg_fn=lambda *a: a[0], multi_avg_fn=lambda *a: None)


@pytest.mark.parametrize("kwargs", [dict(swa_lr=0.05), dict(swa_lr=[0.05, 0.2], anneal_epochs=3,
                                                            anneal_strategy="linear"),
                                    dict(swa_lr=0.01, anneal_epochs=0)])
def test_swalr_sequence_and_state_dict(kwargs):
    def run(mod):
        opt = mod.optim.SGD([{"params": [mod.nn.Parameter(mod.ones(1))], "lr": 1.0},
                             {"params": [mod.nn.Parameter(mod.ones(1))], "lr": 0.5}], lr=0.1)
        sched = mod.optim.swa_utils.SWALR(opt, **kwargs)
        lrs = [sched.get_last_lr()]
        for _ in range(12):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr())
        return lrs, sched.state_dict()
    (ol, osd), (tl_, tsd) = run(tl), run(torch)
    np.testing.assert_allclose(np.array(ol), np.array(tl_), rtol=1e-12)
    assert sorted(osd) == sorted(tsd)
    assert osd["_anneal_strategy"] == tsd["_anneal_strategy"] and osd["anneal_epochs"] == tsd["anneal_epochs"]
    with pytest.raises(TorchLeanError):
        tl.optim.swa_utils.SWALR(tl.optim.SGD([tl.nn.Parameter(tl.ones(1))]), swa_lr=0.1, anneal_strategy="x")


def test_swalr_load_state_dict_restores_anneal_func():
    opt = tl.optim.SGD([tl.nn.Parameter(tl.ones(1))], lr=1.0)
    a = tl.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="linear")
    b = tl.optim.swa_utils.SWALR(tl.optim.SGD([tl.nn.Parameter(tl.ones(1))], lr=1.0), swa_lr=0.1)
    b.load_state_dict(a.state_dict())
    assert b.anneal_func(0.25) == 0.25
    assert a.anneal_func is not None and math.isclose(tl.optim.swa_utils.SWALR._cosine_anneal(0.5), 0.5)


def test_update_bn():
    onet, tnet = _nets(1)
    rng = np.random.default_rng(5)
    batches = [rng.standard_normal((6, 3)).astype(np.float32) * 2 + 1 for _ in range(4)]
    onet.eval()
    tnet.eval()
    tl.optim.swa_utils.update_bn([(tl.tensor(b), 0) for b in batches], onet)
    torch.optim.swa_utils.update_bn([(torch.tensor(b), 0) for b in batches], tnet)
    assert onet.training is False and onet[1].momentum == tnet[1].momentum == 0.1
    for k in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(onet[1], k).numpy(), getattr(tnet[1], k).numpy(), rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tl.optim.swa_utils.update_bn([tl.ones(2, 3)], tl.nn.Linear(3, 1))   # no batch norm: nothing to do


def test_runner_resolves_names():
    from torchlean.runner import resolve
    for name in ("torch.optim.swa_utils.AveragedModel", "torch.optim.swa_utils.SWALR",
                 "torch.optim.swa_utils.update_bn", "torch.optim.SparseAdam", "torch.optim.ASGD",
                 "torch.optim.Adafactor", "torch.optim.optimizer.register_optimizer_step_pre_hook",
                 "torch.optim.optimizer.register_optimizer_step_post_hook"):
        assert resolve(name) is not None, name
