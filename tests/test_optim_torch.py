"""torch.optim and torch.optim.lr_scheduler against PyTorch: the same parameters and gradients give
the same trajectories, state dicts load both ways, and schedulers give the same learning rates."""

import math
import warnings

import numpy as np
import pytest

import torchlean as tl
from torchlean.errors import TorchLeanError

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((5, 4))
Y = RNG.standard_normal(5)
P0 = [RNG.standard_normal(4), RNG.standard_normal((2, 3))]


def _grads(ps):
    """A smooth nonlinear gradient field, bounded enough that ``maximize`` does not overflow."""
    g0 = A.T @ np.tanh(A @ ps[0] - Y) + 0.3 * np.sin(ps[0])
    return [g0, np.cos(ps[1]) + 0.2 * ps[1]]


def _pair(dtype=np.float64):
    tp = [torch.nn.Parameter(torch.tensor(p.astype(dtype))) for p in P0]
    lp = [tl.nn.Parameter(tl.tensor(p.astype(dtype))) for p in P0]
    return tp, lp


def _step(opt, ps, lib):
    for p, g in zip(ps, _grads([_np(p) for p in ps])):
        p.grad = lib.tensor(g.astype(_np(p).dtype))
    opt.step()


def _np(p):
    return p.detach().numpy() if isinstance(p, torch.Tensor) else p.numpy()


def _close(tp, lp, rtol):
    for a, b in zip(tp, lp):
        np.testing.assert_allclose(_np(b), _np(a), rtol=rtol, atol=rtol)


CASES = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("AdamW", dict(lr=0.05, amsgrad=True)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, betas=(0.8, 0.9))),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adamax", dict(lr=0.05)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.9, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, centered=True, maximize=True)),
    ("Rprop", dict(lr=0.05)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
]
IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in CASES]


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_trajectory_matches_torch_float64(name, kw):
    tp, lp = _pair()
    topt, lopt = getattr(torch.optim, name)(tp, **kw), getattr(tl.optim, name)(lp, **kw)
    for _ in range(20):
        _step(topt, tp, torch)
        _step(lopt, lp, tl)
    _close(tp, lp, 1e-10)
    assert not np.allclose(_np(lp[0]), P0[0])   # it moved


@pytest.mark.parametrize("name,kw", CASES[::3], ids=IDS[::3])
def test_trajectory_matches_torch_float32(name, kw):
    tp, lp = _pair(np.float32)
    topt, lopt = getattr(torch.optim, name)(tp, **kw), getattr(tl.optim, name)(lp, **kw)
    for _ in range(20):
        _step(topt, tp, torch)
        _step(lopt, lp, tl)
    _close(tp, lp, 2e-5)
    assert _np(lp[0]).dtype == np.float32


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_param_groups_have_torchs_keys_and_values(name, kw):
    tp, lp = _pair()
    tg = getattr(torch.optim, name)(tp, **kw).state_dict()["param_groups"][0]
    lg = getattr(tl.optim, name)(lp, **kw).state_dict()["param_groups"][0]
    assert set(lg) == set(tg)
    for k in tg:
        assert lg[k] == tg[k], k


def _to_plain(sd):
    """A state dict with every tensor (torch's or torchlean's) as a NumPy array."""
    if isinstance(sd, dict):
        return {k: _to_plain(v) for k, v in sd.items()}
    if isinstance(sd, list):
        return [_to_plain(v) for v in sd]
    if isinstance(sd, (torch.Tensor, tl.Tensor)):
        return np.array(_np(sd))
    return sd


def _to_torch(sd):
    if isinstance(sd, dict):
        return {k: _to_torch(v) for k, v in sd.items()}
    if isinstance(sd, list):
        return [_to_torch(v) for v in sd]
    if isinstance(sd, np.ndarray):
        return torch.tensor(sd)
    return sd


@pytest.mark.parametrize("name,kw", CASES[1::2], ids=IDS[1::2])
def test_state_dicts_load_both_ways_and_continue_the_trajectory(name, kw):
    tp, lp = _pair()
    topt = getattr(torch.optim, name)(tp, **kw)
    for _ in range(8):
        _step(topt, tp, torch)
    tsd = topt.state_dict()
    # torch's state dict (as arrays) into torchlean, parameters copied: the same continuation
    lp = [tl.nn.Parameter(tl.tensor(_np(p).copy())) for p in tp]
    lopt = getattr(tl.optim, name)(lp, **kw)
    lopt.load_state_dict(_to_plain(tsd))
    # and torchlean's state dict (Tensors) back into a fresh torch optimizer
    lsd = lopt.state_dict()
    for st in lsd["state"].values():
        if "step" in st:
            assert isinstance(st["step"], tl.Tensor) and st["step"].dtype == tl.float32
    assert set(lsd["state"][0]) == set(tsd["state"][0])
    tp2 = [torch.nn.Parameter(p.detach().clone()) for p in tp]
    topt2 = getattr(torch.optim, name)(tp2, **kw)
    topt2.load_state_dict(_to_torch(_to_plain(lsd)))
    for _ in range(8):
        _step(topt, tp, torch)
        _step(lopt, lp, tl)
        _step(topt2, tp2, torch)
    _close(tp, lp, 1e-10)
    _close(tp, tp2, 1e-12)


def test_state_dict_round_trip_and_add_param_group():
    _, lp = _pair()
    opt = tl.optim.Adam([lp[0]], lr=0.05)
    opt.add_param_group({"params": [lp[1]], "lr": 0.01, "amsgrad": True})
    tp, _ = _pair()
    topt = torch.optim.Adam([tp[0]], lr=0.05)
    topt.add_param_group({"params": [tp[1]], "lr": 0.01, "amsgrad": True})
    for _ in range(5):
        _step(opt, lp, tl)
        _step(topt, tp, torch)
    _close(tp, lp, 1e-10)
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["amsgrad"] and "max_exp_avg_sq" in sd["state"][1]
    q = [tl.nn.Parameter(tl.tensor(p.numpy().copy())) for p in lp]
    opt2 = tl.optim.Adam([{"params": [q[0]]}, {"params": [q[1]]}], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[1]["lr"] == 0.01
    for _ in range(5):
        _step(opt, lp, tl)
        _step(opt2, q, tl)
    _close(lp, q, 0)


def test_zero_grad_and_errors():
    _, lp = _pair()
    opt = tl.optim.SGD(lp, lr=0.1)
    _step(opt, lp, tl)
    opt.zero_grad(set_to_none=False)
    assert lp[0].grad.tolist() == [0.0] * 4
    opt.zero_grad()
    assert lp[0].grad is None
    with pytest.raises(TorchLeanError, match="learning rate"):
        tl.optim.Adam(lp, lr=-1.0)
    with pytest.raises(TorchLeanError, match="beta"):
        tl.optim.NAdam(lp, betas=(1.0, 0.9))
    with pytest.raises(TorchLeanError, match="eta"):
        tl.optim.Rprop(lp, etas=(1.5, 1.2))
    with pytest.raises(TorchLeanError, match="more than one group"):
        opt.add_param_group({"params": [lp[0]]})
    with pytest.raises(TorchLeanError, match="closure"):
        tl.optim.LBFGS(lp).step()
    with pytest.raises(TorchLeanError, match="parameter groups"):
        tl.optim.LBFGS(lp).add_param_group({"params": [tl.nn.Parameter(tl.ones(1))]})


# ---- LBFGS on Rosenbrock -------------------------------------------------------------------------


def _rosenbrock(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


# Fixed steps of lr=1 on Rosenbrock are chaotic (rounding differences of dot products grow), so that
# case is compared over two calls of step (40 evaluations), the others over six.
@pytest.mark.parametrize("kw,steps", [(dict(), 2), (dict(line_search_fn="strong_wolfe"), 6),
                                      (dict(line_search_fn="strong_wolfe", history_size=3, max_iter=7, lr=0.8), 6),
                                      (dict(lr=0.002, history_size=5), 6)], ids=str)
def test_lbfgs_rosenbrock_iterates_match_torch(kw, steps):
    runs = []
    for lib in (torch, tl):
        x = lib.nn.Parameter(lib.tensor([-1.5, 2.0], dtype=lib.float64))
        opt = lib.optim.LBFGS([x], **kw)
        calls = []

        def closure(opt=opt, x=x, calls=calls):
            opt.zero_grad()
            loss = _rosenbrock(x)
            loss.backward()
            calls.append(float(loss.detach()))
            return loss

        its, losses = [], []
        for _ in range(steps):
            losses.append(float(opt.step(closure).detach()))
            its.append(_np(x).copy())
        runs.append((np.array(its), losses, calls, opt.state_dict()["state"][0]))
    (ti, tloss, tcalls, tst), (li, lloss, lcalls, lst) = runs
    np.testing.assert_allclose(li, ti, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(lcalls, tcalls, rtol=1e-8, atol=1e-15)
    np.testing.assert_allclose(lloss, tloss, rtol=1e-9, atol=1e-15)
    assert len(lcalls) == len(tcalls)
    assert lst["func_evals"] == tst["func_evals"] and lst["n_iter"] == tst["n_iter"]
    assert len(lst["old_dirs"]) == len(tst["old_dirs"])
    if kw.get("line_search_fn"):
        assert _rosenbrock(li[-1]) < 1e-3


def test_lbfgs_loads_torchs_state_and_continues():
    tx = torch.nn.Parameter(torch.tensor([-1.2, 1.0], dtype=torch.float64))
    topt = torch.optim.LBFGS([tx], max_iter=4, line_search_fn="strong_wolfe")

    def make_closure(lib, x, opt):
        def closure():
            opt.zero_grad()
            loss = _rosenbrock(x)
            loss.backward()
            return loss
        return closure

    topt.step(make_closure(torch, tx, topt))
    lx = tl.nn.Parameter(tl.tensor(_np(tx).copy()))
    lopt = tl.optim.LBFGS([lx], max_iter=4, line_search_fn="strong_wolfe")
    lopt.load_state_dict(_to_plain(topt.state_dict()))
    for _ in range(3):
        topt.step(make_closure(torch, tx, topt))
        lopt.step(make_closure(tl, lx, lopt))
    np.testing.assert_allclose(_np(lx), _np(tx), rtol=1e-9)


# ---- schedulers ----------------------------------------------------------------------------------


def _sched_pair(make, opt_name="SGD", opt_kw=None, steps=30, metrics=None):
    opt_kw = opt_kw or dict(lr=0.1, momentum=0.9)
    out = []
    for lib in (torch, tl):
        w1, w2 = lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(3))
        opt = getattr(lib.optim, opt_name)([{"params": [w1]}, {"params": [w2], "lr": 0.05}], **opt_kw)
        s = make(lib.optim.lr_scheduler, opt)
        lrs, moms = [s.get_last_lr()], []
        for i in range(steps):
            opt.step()
            if metrics is not None:
                s.step(metrics[i])
            else:
                s.step()
            lrs.append(list(s.get_last_lr()))
            g = opt.param_groups[0]
            moms.append(g.get("momentum", g.get("betas", (None,))[0]))
        out.append((lrs, moms, s, opt))
    return out


SCHEDULERS = {
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda e: 0.9 ** e + 0.01 * e),
    "LambdaLR-list": lambda m, o: m.LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: 0.5]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95),
    "StepLR": lambda m, o: m.StepLR(o, step_size=4, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.3),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=6),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=12),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=20, power=2.0),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-3),
    "CyclicLR": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=4, step_size_down=6),
    "CyclicLR-tri2": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="triangular2"),
    "CyclicLR-exp": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="exp_range", gamma=0.95),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.3], total_steps=31),
    "OneCycleLR-3ph-lin": lambda m, o: m.OneCycleLR(o, max_lr=0.5, epochs=3, steps_per_epoch=11,
                                                    three_phase=True, anneal_strategy="linear"),
    "SequentialLR": lambda m, o: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.2, total_iters=5),
                                                    m.ExponentialLR(o, gamma=0.9),
                                                    m.StepLR(o, step_size=3)], milestones=[5, 15]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.5, total_iters=4),
                                                        m.ExponentialLR(o, gamma=0.9),
                                                        m.CosineAnnealingLR(o, T_max=10)]),
}


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_lrs_match_torch(name):
    (tl_lrs, tmoms, *_), (ll_lrs, lmoms, *_) = _sched_pair(SCHEDULERS[name])
    np.testing.assert_allclose(np.array(ll_lrs), np.array(tl_lrs), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.array(lmoms, float), np.array(tmoms, float), rtol=1e-12)
    assert len({tuple(x) for x in ll_lrs}) > 1


def test_cycle_momentum_uses_adams_beta1():
    make = lambda m, o: m.OneCycleLR(o, max_lr=0.1, total_steps=20)
    (tl_lrs, tmoms, *_), (ll_lrs, lmoms, _, lopt) = _sched_pair(make, "Adam", dict(lr=0.1), steps=19)
    np.testing.assert_allclose(ll_lrs, tl_lrs, rtol=1e-12)
    np.testing.assert_allclose(lmoms, tmoms, rtol=1e-12)
    assert lopt.param_groups[0]["betas"][1] == 0.999


def test_reduce_lr_on_plateau_matches_torch():
    metrics = [1.0, 0.9, 0.95, 0.96, 0.97, 0.85, 0.85, 0.86, 0.9, 0.91, 0.92, 0.93, 0.5, 0.6, 0.7, 0.8] * 2
    for kw in (dict(patience=2, factor=0.5, cooldown=1, min_lr=[0.01, 0.02]),
               dict(mode="max", patience=1, threshold=0.05, threshold_mode="abs")):
        make = lambda m, o, kw=kw: m.ReduceLROnPlateau(o, **kw)
        (tl_lrs, *_), (ll_lrs, *_) = _sched_pair(make, metrics=metrics, steps=len(metrics))
        np.testing.assert_allclose(ll_lrs, tl_lrs, rtol=1e-12)


def test_step_with_epoch_uses_the_closed_form_and_warns():
    lrs = []
    for lib in (torch, tl):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        s = lib.optim.lr_scheduler.MultiStepLR(opt, [2, 5], gamma=0.5)
        opt.step()
        with pytest.warns(UserWarning, match="epoch parameter"):
            s.step(6)
        lrs.append(s.get_last_lr())
    assert lrs[1] == lrs[0] == [0.25]


def test_scheduler_warns_when_stepped_before_the_optimizer():
    opt = tl.optim.SGD([tl.nn.Parameter(tl.ones(1))], lr=1.0)
    s = tl.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    opt2 = tl.optim.SGD([tl.nn.Parameter(tl.ones(1))], lr=1.0)
    s2 = tl.optim.lr_scheduler.StepLR(opt2, 2)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s2.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        s2.get_lr()


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "OneCycleLR", "CyclicLR",
                                  "CosineAnnealingWarmRestarts", "SequentialLR", "ChainedScheduler"])
def test_scheduler_state_dicts_load_torchs_and_continue(name):
    make = SCHEDULERS[name]
    tw = torch.nn.Parameter(torch.ones(1))
    topt = torch.optim.SGD([{"params": [tw]}, {"params": [torch.nn.Parameter(torch.ones(1))], "lr": 0.05}],
                           lr=0.1, momentum=0.9)
    ts = make(torch.optim.lr_scheduler, topt)
    for _ in range(9):
        topt.step()
        ts.step()
    lopt = tl.optim.SGD([{"params": [tl.nn.Parameter(tl.ones(1))]},
                         {"params": [tl.nn.Parameter(tl.ones(1))], "lr": 0.05}], lr=0.1, momentum=0.9)
    ls = make(tl.optim.lr_scheduler, lopt)
    lopt.load_state_dict(_to_plain(topt.state_dict()))
    sd = ts.state_dict()
    assert set(ls.state_dict()) == set(sd)
    ls.load_state_dict(sd)
    for _ in range(12):
        topt.step()
        ts.step()
        lopt.step()
        ls.step()
        np.testing.assert_allclose(ls.get_last_lr(), ts.get_last_lr(), rtol=1e-12)
        assert math.isclose(lopt.param_groups[0]["momentum"], topt.param_groups[0]["momentum"], rel_tol=1e-12)


def test_named_parameters_are_accepted_as_torch_accepts_them():
    tlin, llin = torch.nn.Linear(3, 2), tl.nn.Linear(3, 2)
    tg = torch.optim.SGD(tlin.named_parameters(), lr=0.1).state_dict()["param_groups"][0]
    lg = tl.optim.SGD(llin.named_parameters(), lr=0.1).state_dict()["param_groups"][0]
    assert lg["param_names"] == tg["param_names"] == ["weight", "bias"]
    assert lg["params"] == tg["params"] == [0, 1]
