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


def _traced_call(name, s, device):
    """Sample ``s`` of op ``name`` run eagerly through the front end's recording (float32 on
    ``device``) while it is traced: ``(tensors, parent positions, eager result, Traced)``. The
    spec positions a parameterised kind takes from the payload are leaves of the call."""
    import torchlean as tl
    from torchlean.autograd import record
    from torchlean.ir.graph import PARAM_INPUTS, PARENTS
    from torchlean.ir.trace import trace_call
    diff = OPINFOS[name].differentiable(len(s.inputs))
    layout = PARAM_INPUTS.get(name, (PARENTS,))
    n_par = len(s.inputs) - (len(layout) - 1)
    k = layout.index(PARENTS)
    parent_pos = list(range(k, k + n_par))
    ts = [tl.tensor(x, dtype=tl.float32 if np.asarray(x).dtype.kind == "f" else None, device=device,
                    requires_grad=i in diff) for i, x in enumerate(s.inputs)]      # an index input stays integer
    out = []

    def call(*parents):
        args = list(ts)
        for i, t in zip(parent_pos, parents):
            args[i] = t
        out.append(record(name, tuple(args), s.attrs))
        return out[-1]

    traced = trace_call(call, *[ts[i] for i in parent_pos])
    return ts, parent_pos, out[0], traced


def _close(got, want, device, info, what):
    from torchlean.testing.opinfo import DEVICE_TOL
    atol, rtol = (t * info.tol_scale for t in DEVICE_TOL[device])
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=0, atol=atol + rtol * scale, err_msg=what)


@pytest.mark.parametrize("name,device", ALL)
def test_eager_ir_meaning_and_compiled_program_agree(name, device):
    """Every op three ways, from its record: eager (the front end's recording, device kernels in
    float32), the meaning of the IR graph traced from that call (ir.evaluate, spec functions in
    float64), and that graph compiled for the device (forward and backward against eager)."""
    import torchlean as tl
    from torchlean import ir
    from torchlean.kernels import get_kernels
    info = OPINFOS[name]
    K = get_kernels(device)
    rng = np.random.default_rng(7)
    for s in info.samples(rng):
        ts, parent_pos, eager, traced = _traced_call(name, s, device)
        g, payload = traced.graph, traced.payload
        meaning = ir.evaluate(g, payload, *[s.inputs[i] for i in parent_pos])[g.outputs[0]]
        _close(K.to_host(eager._value), meaning, device, info, f"{name} {s.desc}: eager against the IR's meaning")
        prog = ir.compile(g, payload, device=device, dtype=np.float32)
        y = prog(*[ts[i] for i in parent_pos])
        _close(K.to_host(y), K.to_host(eager._value), device, info, f"{name} {s.desc}: compiled forward")
        if not eager.requires_grad:
            continue
        seed = rng.standard_normal(eager.shape).astype(np.float32)
        eager.backward(tl.tensor(seed, device=device))
        grads = prog.backward(seed)
        for k, i in enumerate(parent_pos):
            if ts[i].grad is not None and ("input", k) in grads:
                _close(K.to_host(grads[("input", k)]), ts[i].grad.numpy(), device, info,
                       f"{name} {s.desc}: gradient of input {k}")
        for key, t in traced.bindings.items():
            if t.grad is not None and key in grads:
                _close(K.to_host(grads[key]), t.grad.numpy(), device, info, f"{name} {s.desc}: gradient of {key}")
