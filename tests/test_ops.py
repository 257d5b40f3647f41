"""Registry-driven contract tests: every op of OPINFOS on every device."""

import numpy as np
import pytest

from torchlean.autograd import RULES
from torchlean.spec import SPEC
from torchlean.testing import checks
from torchlean.testing.opinfo import OPINFOS

NAMES = sorted(OPINFOS)


def _param(name, device):
    marks = [pytest.mark.cuda] if device == "cuda" else []
    return pytest.param(name, device, marks=marks, id=f"{name}-{device}")


ALL = [_param(n, d) for n in NAMES for d in ("cpu", "cuda") if d in OPINFOS[n].devices]


def test_every_op_in_every_table():
    missing = [(n, t) for n in SPEC for t, tbl in (("RULES", RULES), ("OPINFOS", OPINFOS)) if n not in tbl]
    assert not missing, f"ops missing from tables: {missing}"
    extra = [n for n in list(RULES) + list(OPINFOS) if n not in SPEC]
    assert not extra, f"ops without a spec: {extra}"


def _fail(results):
    return [r for r in results if not r.passed]


@pytest.mark.parametrize("name", NAMES)
def test_spec_vjp_matches_finite_differences(name):
    info = OPINFOS[name]
    if not info.fd:
        pytest.skip("no finite-difference check for this op (non-smooth by design)")
    rng = np.random.default_rng(1)
    res = [checks.check_fd(info, s, rng) for s in info.samples(rng)]
    assert not _fail(res), _fail(res)


@pytest.mark.parametrize("name,device", ALL)
def test_device_forward_matches_spec(name, device):
    info = OPINFOS[name]
    rng = np.random.default_rng(2)
    res = [checks.check_forward(info, s, device) for s in info.samples(rng)]
    assert not _fail(res), _fail(res)


@pytest.mark.parametrize("name,device", ALL)
def test_device_vjp_matches_spec(name, device):
    info = OPINFOS[name]
    rng = np.random.default_rng(3)
    res = [checks.check_vjp(info, s, device, rng) for s in info.samples(rng)]
    assert not _fail(res), _fail(res)


@pytest.mark.parametrize("name", NAMES)
def test_reference_mode_matches_spec(name):
    info = OPINFOS[name]
    rng = np.random.default_rng(4)
    res = [checks.check_vjp(info, s, "cpu", rng, fast=False) for s in info.samples(rng)]
    assert not _fail(res), _fail(res)


@pytest.mark.parametrize("name,device", ALL)
def test_bad_inputs_raise_documented_errors(name, device):
    info = OPINFOS[name]
    res = checks.check_bad(info, device, np.random.default_rng(5))
    assert not _fail(res), _fail(res)


@pytest.mark.parametrize("name", [n for n in NAMES if OPINFOS[n].torch_ref is not None])
def test_spec_matches_torch(name):
    torch = pytest.importorskip("torch")
    info = OPINFOS[name]
    rng = np.random.default_rng(6)
    for s in info.samples(rng):
        ts = [torch.tensor(x, dtype=torch.float64, requires_grad=(i in info.differentiable(len(s.inputs))))
              for i, x in enumerate(s.inputs)]
        y = info.torch_ref(torch, *ts, **s.attrs)
        ref = SPEC[name].forward(*s.inputs, **s.attrs)
        np.testing.assert_allclose(np.asarray(ref), y.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=s.desc)
        g = rng.standard_normal(y.shape)
        diff = [t for t in ts if t.requires_grad]
        if diff:
            tg = torch.autograd.grad(y, diff, torch.tensor(g), allow_unused=True)
            sg = SPEC[name].vjp(g, *s.inputs, **s.attrs)
            for k, i in enumerate(info.differentiable(len(s.inputs))):
                want = np.zeros_like(s.inputs[i]) if tg[k] is None else tg[k].numpy()
                np.testing.assert_allclose(sg[i], want, rtol=1e-9, atol=1e-11, err_msg=f"{s.desc} d{i}")
