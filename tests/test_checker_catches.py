"""The checker catches real kernel bugs.

* Every kernel of the contract is value-checked on the CPU: by ``torchlean check`` (the op
  rules that call it, against the spec), by the optimizer-step check, or here against an
  independent oracle run through the kernel-case table (``kernel_cases``) — so the layout and
  reduction kernels the CUDA test file checks (slice1d, concat1d, broadcast_vec_to_rows/cols,
  reduce_sum/max_axis0/1) are checked without a GPU too.
* The edge samples (kinks, ties, x100, near overflow) enforce the documented conventions.
* ``check --model`` compares gradients node by node and runs a large-magnitude pass.
* The mutation test (tests/mutations/run.py, marked slow) plants bugs one at a time.
"""

import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from torchlean import ir
from torchlean.errors import ShapeError
from torchlean.kernels import get_kernels
from torchlean.kernels.api import KERNELS
from torchlean.testing import checks
from torchlean.testing import kernel_cases as kc
from torchlean.testing.opinfo import OPINFOS, Sample, edge

H = get_kernels("cpu")
ROOT = Path(__file__).resolve().parent.parent


# ---- independent CPU oracles for the kernels no op rule reaches ---------------------------------

def _slice1d(x, start, length):
    assert 0 <= start and 0 <= length and start + length <= x.shape[0]
    return np.array([x[start + i] for i in range(length)], dtype=x.dtype).reshape((length,) + x.shape[1:])


def _concat1d(a, b):
    out = np.empty(a.shape[0] + b.shape[0], dtype=a.dtype)
    for i in range(a.shape[0]):
        out[i] = a[i]
    for j in range(b.shape[0]):
        out[a.shape[0] + j] = b[j]
    return out


def _rows(v, rows):
    out = np.empty((rows, v.shape[0]), dtype=v.dtype)
    for i in range(rows):
        for j in range(v.shape[0]):
            out[i, j] = v[j]
    return out


def _cols(v, cols):
    out = np.empty((v.shape[0], cols), dtype=v.dtype)
    for i in range(v.shape[0]):
        for j in range(cols):
            out[i, j] = v[i]
    return out


def _fsum(vals, dtype):
    return np.asarray(math.fsum(float(v) for v in vals), dtype=dtype)


def _sum0(x):
    return np.array([_fsum(x[:, j], x.dtype) for j in range(x.shape[1])], dtype=x.dtype)


def _sum1(x):
    return np.array([_fsum(x[i, :], x.dtype) for i in range(x.shape[0])], dtype=x.dtype)


def _max0(x):
    return np.array([max(x[:, j]) for j in range(x.shape[1])], dtype=x.dtype)


def _max1(x):
    return np.array([max(x[i, :]) for i in range(x.shape[0])], dtype=x.dtype)


def _sum_axis(x, axis):
    axis = axis % x.ndim
    shape = x.shape[:axis] + x.shape[axis + 1:]
    out = np.empty(shape, dtype=x.dtype)
    for idx in np.ndindex(*shape):
        out[idx] = _fsum((x[idx[:axis] + (k,) + idx[axis:]] for k in range(x.shape[axis])), x.dtype)
    return out


def _scatter_add_row(mat, row, i):
    out = mat.copy()
    if 0 <= i < mat.shape[0]:
        for j in range(mat.shape[1]):
            out[i, j] = out[i, j] + row[j]
    return out


def _fill(x, value):
    for idx in np.ndindex(*x.shape):   # element by element: views (a transposed one) included
        x[idx] = value


def _basic_index_add(x, key, g):
    target = np.arange(x.size).reshape(x.shape)[key]       # the flat positions the key selects
    for pos, v in zip(target.reshape(-1), g.reshape(-1)):
        x.reshape(-1)[pos] = x.reshape(-1)[pos] + v


def _batch_norm_running_update(x, running_mean, running_var, momentum):
    n, c, s = x.shape
    count = n * s
    if c == 0 or count <= 1:
        return
    for j in range(c):
        vals = [float(x[i, j, t]) for i in range(n) for t in range(s)]
        mean = math.fsum(vals) / count
        var = math.fsum((v - mean) ** 2 for v in vals) / (count - 1)   # unbiased, as PyTorch's running_var
        for buf, stat in ((running_mean, mean), (running_var, var)):
            if buf is not None:
                buf[j] = (1.0 - momentum) * float(buf[j]) + momentum * stat   # in double, rounded once


#: kernel -> independent oracle (plain loops and math.fsum, no call of the kernel it checks).
ORACLES = {"slice1d": _slice1d, "concat1d": _concat1d, "broadcast_vec_to_rows": _rows,
           "broadcast_vec_to_cols": _cols, "reduce_sum_axis0": _sum0, "reduce_sum_axis1": _sum1,
           "reduce_max_axis0": _max0, "reduce_max_axis1": _max1, "reduce_sum_axis": _sum_axis,
           "scatter_add_row": _scatter_add_row, "fill": _fill, "basic_index_add": _basic_index_add,
           "batch_norm_running_update": _batch_norm_running_update}

#: Kernels value-checked elsewhere on the CPU, or with nothing to compare there, and why.
ELSEWHERE = {
    "graph_capture": "no CPU counterpart (kernel_cases.EXCLUDED)",
    "dlpack": "a capsule, not values: round trips in tests/test_kernels_xp.py",
    "from_dlpack": "a capsule, not values: round trips in tests/test_kernels_xp.py",
    "empty": "uninitialized memory by contract: only shape and dtype (tests/test_kernel_cases.py)",
    "host_ints": "a host copy of an index sequence: tests/test_kernel_cases.py checks it as documented",
    "rand_uniform": "random: the counter-based generator's values are checked in tests/test_data.py and "
                    "the dropout op (torchlean check)",
    "randn": "random: as rand_uniform",
    "bincount": "integer results of the front end's bincount: values against torch in tests/test_torch_*",
    "histc": "as bincount",
    "searchsorted": "as bincount",
    "unique": "as bincount",
    "flash_attention_bwd_q": "the split backward of flash attention: compared with the fused "
                             "flash_attention_bwd (which torchlean check reaches) in tests/test_cuda_kernels.py",
    "flash_attention_bwd_k": "as flash_attention_bwd_q",
    "flash_attention_bwd_v": "as flash_attention_bwd_q",
    "spectral_conv1d_rfft_bwd_x": "the FFT path of the spectral-conv backward, compared with the DFT path "
                                  "(which torchlean check reaches) in tests/test_cuda_kernels.py",
    "spectral_conv1d_rfft_bwd_wre": "as spectral_conv1d_rfft_bwd_x",
    "spectral_conv1d_rfft_bwd_wim": "as spectral_conv1d_rfft_bwd_x",
}

ORACLE = SimpleNamespace(**{**vars(H), **ORACLES})


def _kernels_reached_by_check():
    """The kernels the op rules and the optimizer check call during ``torchlean check`` on the CPU."""
    called, orig = set(), {}
    for n in KERNELS:
        f = getattr(H, n, None)
        if callable(f):
            orig[n] = f

            def wrapped(*a, _n=n, _f=f, **k):
                called.add(_n)
                return _f(*a, **k)
            setattr(H, n, wrapped)
    try:
        checks.run_checks("cpu")
        checks.run_optimizer_checks("cpu")
    finally:
        for n, f in orig.items():
            setattr(H, n, f)
    return called


def test_every_kernel_of_the_contract_is_value_checked_on_the_cpu():
    reached = _kernels_reached_by_check()
    unchecked = sorted(n for n in KERNELS if n not in reached and n not in ORACLES and n not in ELSEWHERE)
    assert not unchecked, f"kernels no CPU check compares with a reference: {unchecked}"
    assert len(reached) > 150, len(reached)
    stale = sorted(n for n in list(ORACLES) + list(ELSEWHERE) if n not in KERNELS)
    assert not stale, stale


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_cpu_kernel_against_its_oracle(name, rng):
    n_cases = 0
    for dtype in kc.dtypes(name):
        for case in kc.cases(name, rng, dtype):
            kc.run_case(name, case, H, ref=ORACLE)
            n_cases += 1
    assert n_cases >= 5, (name, n_cases)


def test_the_oracles_catch_a_wrong_kernel(rng):
    off_by_one = SimpleNamespace(**{**vars(H), "slice1d": lambda x, s, n: x[s + 1:s + 1 + n].copy()})
    case = kc.cases("slice1d", rng, "float32")[0]
    with pytest.raises(AssertionError, match="slice1d"):
        kc.run_case("slice1d", case, off_by_one, ref=ORACLE)
    wrong_axis = SimpleNamespace(**{**vars(H), "reduce_max_axis0": lambda x: x.max(axis=0) * 0 + x.min(axis=0)})
    case = [c for c in kc.cases("reduce_max_axis0", rng, "float32") if c.args[0].shape[0] > 1][0]
    with pytest.raises(AssertionError, match="reduce_max_axis0"):
        kc.run_case("reduce_max_axis0", case, wrong_axis, ref=ORACLE)


# ---- the seeds' kernel contracts ----------------------------------------------------------------

def test_slice1d_enforces_start_plus_length_within_n():
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(H.slice1d(x, 7, 3), [7, 8, 9])
    assert H.slice1d(x, 10, 0).shape == (0,)
    for start, length in ((8, 3), (-1, 2), (0, 11), (3, -1), (11, 0)):
        with pytest.raises(ShapeError, match=r"slice1d: x\[.*\(10,\)"):
            H.slice1d(x, start, length)
    with pytest.raises(ValueError):  # ShapeError is a ValueError, as torch raises there
        H.slice1d(x, 9, 2)


def test_flash_attention_defaults_to_the_seeds_soft_fill():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 3, 4)).astype(np.float32) for _ in range(3))
    mask = np.array([[[1, 0, 1], [0, 0, 0], [1, 1, 1]]], dtype=bool)
    out, lse = H.flash_attention_fwd(q, k, v, mask, 0.5)
    ref, ref_lse = H.flash_attention_fwd(q, k, v, mask, 0.5, False)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(lse, ref_lse)
    # soft: the fully blocked row averages every value (all logits -1000); hard would give 0
    np.testing.assert_allclose(out[0, 1], v[0].mean(axis=0), rtol=1e-5)
    hard, _ = H.flash_attention_fwd(q, k, v, mask, 0.5, True)
    np.testing.assert_array_equal(hard[0, 1], np.zeros(4, np.float32))


# ---- edge samples: the conventions and the stability tricks -------------------------------------

EDGE_OPS = sorted(n for n, info in OPINFOS.items() if info.edge(np.random.default_rng(0)))


def test_edge_samples_cover_the_exp_log_and_kink_ops():
    for name in ("softmax", "log_softmax", "cross_entropy", "nll_loss", "softplus", "sigmoid", "tanh",
                 "layer_norm", "flash_attention", "multi_head_attention", "relu", "abs", "clamp", "maximum",
                 "minimum", "reduce_max", "reduce_min", "max_pool", "leaky_relu", "l1_loss", "sqrt"):
        assert name in EDGE_OPS, name
    descs = [s.desc for s in OPINFOS["softmax"].edge(np.random.default_rng(0))]
    assert any(d.startswith("x100:") for d in descs) and any(d.startswith("x1e+37:") for d in descs)
    relu = OPINFOS["relu"].edge(np.random.default_rng(0))
    assert all(np.any(s.inputs[0] == 0.0) for s in relu)


@pytest.mark.parametrize("name", EDGE_OPS)
def test_edge_samples_pass_on_the_cpu(name):
    info = OPINFOS[name]
    rng = np.random.default_rng(5)
    res = checks.check_samples(info, info.edge(rng), "cpu", rng, "edge ")
    bad = [r for r in res if not r.passed]
    assert res and not bad, bad


@pytest.mark.cuda
@pytest.mark.parametrize("name", EDGE_OPS)
def test_edge_samples_pass_on_cuda(name):
    info = OPINFOS[name]
    rng = np.random.default_rng(5)
    res = checks.check_samples(info, info.edge(rng), "cuda", rng, "edge ")
    bad = [r for r in res if not r.passed]
    assert res and not bad, bad


TINY_OPS = sorted(n for n in edge.TINY_OPS if n in OPINFOS)


def _tiny_results(name, device):
    rng = np.random.default_rng(5)
    return checks.check_samples(OPINFOS[name], edge.tiny(name, rng), device, rng, "tiny ")


@pytest.mark.parametrize("name", TINY_OPS)
def test_subnormal_samples_pass_on_the_cpu(name):
    res = _tiny_results(name, "cpu")
    bad = [r for r in res if not r.passed]
    assert res and not bad, bad


@pytest.mark.cuda
@pytest.mark.parametrize("name", TINY_OPS)
def test_subnormal_samples_pass_on_cuda(name):
    res = _tiny_results(name, "cuda")
    bad = [r for r in res if not r.passed]
    assert res and not bad, bad


def test_subnormal_pass_catches_a_kernel_that_flushes_to_zero(monkeypatch):
    """What CuPy's -ftz=true does to float32 arithmetic, planted in the CPU kernels: caught, op named."""
    def flush(a):
        a = np.asarray(a)
        return np.where(np.abs(a) < np.finfo(np.float32).tiny, np.zeros_like(a), a)

    mul, add, relu = H.mul, H.add, H.relu
    monkeypatch.setattr(H, "mul", lambda a, b: flush(mul(flush(a), flush(b))))
    monkeypatch.setattr(H, "add", lambda a, b: flush(add(flush(a), flush(b))))
    monkeypatch.setattr(H, "relu", lambda x: relu(flush(x)))
    for name in ("mul", "add", "relu"):
        bad = [r for r in _tiny_results(name, "cpu") if not r.passed]
        assert bad and all(r.op == name and r.check.startswith("tiny") for r in bad), name
    assert edge.tiny("softmax", np.random.default_rng(0)) == []   # not homogeneous: no tiny samples


def _vjp(name, x, attrs=None):
    rng = np.random.default_rng(0)
    s = Sample((np.asarray(x, dtype=np.float64),), attrs or {}, "hand")
    return checks.check_vjp(OPINFOS[name], s, "cpu", rng)


def test_check_vjp_enforces_relu_prime_zero_at_zero(monkeypatch):
    assert _vjp("relu", [-1.0, 0.0, 0.0, 2.0]).passed
    monkeypatch.setattr(H, "relu_bwd", lambda x, g: np.where(x >= 0, g, np.zeros_like(g)))
    assert not _vjp("relu", [-1.0, 0.0, 0.0, 2.0]).passed


def test_check_forward_catches_a_softmax_without_its_max_shift(monkeypatch):
    x = np.array([[300.0, 100.0, -200.0], [1.0, 2.0, 3.0]])
    s = Sample((x,), {"axis": -1}, "x100")
    assert checks.check_forward(OPINFOS["softmax"], s, "cpu").passed

    def unshifted(z):
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)
    monkeypatch.setattr(H, "softmax", unshifted)
    with np.errstate(all="ignore"):
        assert not checks.check_forward(OPINFOS["softmax"], s, "cpu").passed


# ---- optimizers under check ---------------------------------------------------------------------

def test_every_fused_optimizer_kernel_is_checked():
    from torchlean.kernels.api import CONTRACT
    assert set(CONTRACT["optim"]) == set(checks.OPTIMIZER_CHECKS)
    res = checks.run_optimizer_checks("cpu")
    assert res and all(r.passed for r in res), [r for r in res if not r.passed]


@pytest.mark.cuda
def test_fused_optimizer_kernels_on_cuda():
    res = checks.run_optimizer_checks("cuda")
    assert res and all(r.passed for r in res), [r for r in res if not r.passed]


def test_optimizer_check_catches_a_wrong_bias_correction(monkeypatch):
    real = H.adam_step

    def no_sqrt(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled, vmax=None):
        real(p, g, m, v, step, lr, beta1, beta2 ** 2, eps, weight_decay, decoupled, vmax)
    monkeypatch.setattr(H, "adam_step", no_sqrt)
    res = checks.run_optimizer_checks("cpu", "adam_step")
    assert res and not any(r.passed for r in res if r.op == "adam_step")


# ---- check --model: gradients and the large-magnitude pass --------------------------------------

def _graph():
    return ir.Graph([ir.Node(0, "input", (), (3, 4), {"index": 0}),
                     ir.Node(1, "softmax", (0,), (3, 4), {"axis": -1}),
                     ir.Node(2, "relu", (1,), (3, 4)),
                     ir.Node(3, "sum", (2,), ())])


def test_check_equivalence_reports_local_gradients():
    x = np.random.default_rng(0).standard_normal((3, 4))
    rep = ir.check_equivalence(_graph(), None, x)
    assert rep.passed and rep[1].grad_tol > 0 and rep[1].grad_abs < rep[1].grad_tol
    assert "grad local" in str(rep)


def test_check_equivalence_names_a_wrong_gradient(monkeypatch):
    x = np.random.default_rng(0).standard_normal((3, 4))
    monkeypatch.setattr(H, "softmax_bwd", lambda y, g: y * g)   # the subtraction forgotten
    rep = ir.check_equivalence(_graph(), None, x)
    assert not rep.passed and rep.first_divergence == (1, "softmax") and rep[1].what == "gradient"
    assert rep[1].value_ok
    assert "local gradient error" in str(rep)


def test_check_model_has_a_large_magnitude_pass(tmp_path, monkeypatch, capsys):
    from torchlean.ir.cli import check_model
    path = tmp_path / "m.json"
    ir.save(_graph(), {}, str(path))
    assert check_model(str(path)) == 0
    assert "large-magnitude pass" in capsys.readouterr().out

    def unshifted(z):
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)
    monkeypatch.setattr(H, "softmax", unshifted)
    with np.errstate(all="ignore"):
        assert check_model(str(path)) == 1
    err = capsys.readouterr().err
    assert "node 1 (softmax)" in err and "x100" in err


def test_large_pass_accepts_float32_overflow_where_the_meaning_overflows_too():
    g = ir.Graph([ir.Node(0, "input", (), (4,), {"index": 0}), ir.Node(1, "exp", (0,), (4,))])
    rep = ir.check_equivalence(g, None, np.array([1.0, 50.0, 100.0, 200.0]))   # exp(100) > float32 max
    assert rep.passed, rep


# ---- the mutation test ----------------------------------------------------------------------------

@pytest.mark.slow
def test_mutation_test_check_catches_every_value_changing_mutant(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("tl_mutation_run", ROOT / "tests" / "mutations" / "run.py")
    mutation_run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutation_run)
    rows = mutation_run.run(workdir=tmp_path)
    assert len(rows) >= 20
    missed = [r["id"] for r in rows if r["kind"] == "value" and not r["check"]]
    assert not missed, f"torchlean check missed {missed}"
    missed_model = [r["id"] for r in rows if r["model_expected"] and not r["model"]]
    assert not missed_model, f"torchlean check --model missed {missed_model}"
    missed_kernel = [r["id"] for r in rows if r["kind"] == "kernel" and not r["kernel_tests"]]
    assert not missed_kernel, f"the CPU kernel tests missed {missed_kernel}"


def test_mutation_runner_is_executable():
    p = ROOT / "tests" / "mutations" / "run.py"
    assert p.exists() and p.read_text().startswith("#!")
    out = subprocess.run([sys.executable, str(p), "--list"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip().splitlines()) >= 20
