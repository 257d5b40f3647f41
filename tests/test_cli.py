"""The ``torchlean`` command, run in-process through ``torchlean.cli.main``."""

import re
import subprocess
import sys
import types

import pytest

from torchlean import cli
from torchlean.testing.checks import Result

from conftest import CUDA


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_quickstart_tensors(capsys):
    code, out, err = run(capsys, "quickstart", "tensors")
    assert code == 0, err
    assert ">>> x @ x.T" in out
    assert "[[14. 32.]\n [32. 77.]]" in out          # [[1,2,3],[4,5,6]] @ its transpose
    assert ">>> x + tl.tensor([10., 20., 30.])" in out and "[[11. 22. 33.]" in out
    assert ">>> x.sum()\n21.0" in out
    assert ">>> x.sum(dim=0)\n[5. 7. 9.]" in out
    assert ">>> x[..., None].shape\ntorchlean.Size([2, 3, 1])" in out


def test_quickstart_autograd_fast_matches_spec(capsys):
    code, out, err = run(capsys, "quickstart", "autograd")
    assert code == 0, err
    errs = [float(m) for m in re.findall(r"max abs error fast vs spec: (\S+)", out)]
    assert len(errs) == 2, out                       # the tensor function and the Linear + MSE loss
    assert all(0 <= e < 1e-4 for e in errs), errs    # float32 fast path vs float64 spec
    assert "sum(sin(x) * x**2)" in out and "mse_loss(Linear(3, 2)" in out
    assert "weight.grad" in out and "bias.grad" in out


def test_quickstart_mlp_loss_falls(capsys):
    code, out, err = run(capsys, "quickstart", "mlp", "--steps", "60")
    assert code == 0, err
    m = re.search(r"mean loss before (\S+), after (\S+) ", out)
    assert m, out
    before, after = float(m.group(1)), float(m.group(2))
    assert after < before / 3, (before, after)
    preds = re.findall(r"prediction at \((\S+), (\S+)\): (\S+)\s+target (\S+)", out)
    assert [(a, b) for a, b, _, _ in preds] == [("0", "0"), ("0.25", "-0.75")]
    for _, _, p, t in preds:
        assert float(t) == pytest.approx(0.2)
        assert abs(float(p) - float(t)) < 0.5
    assert "60 steps on cpu" in out


def test_quickstart_all_sections_in_order(capsys):
    code, out, err = run(capsys, "quickstart", "--steps", "5")
    assert code == 0, err
    heads = [out.index(f"== {s} ") for s in ("tensors", "autograd", "mlp")]
    assert heads == sorted(heads)


def test_quickstart_rejects_bad_steps(capsys):
    code, out, err = run(capsys, "quickstart", "mlp", "--steps", "0")
    assert code == 1                                  # a usage error is an error in the input
    assert "positive integer" in err


def test_check_add_table(capsys):
    code, out, err = run(capsys, "check", "--device", "cpu", "--op", "add")
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].split() == ["op", "check", "device", "max", "abs", "err", "max", "rel", "err", "n", "result"]
    rows = {(ln.split()[0], ln.split()[1]): ln.split() for ln in lines[2:] if ln and not ln.startswith(" ")}
    for check in ("forward", "vjp", "bad"):
        row = rows[("add", check)]
        assert row[2] == "cpu" and row[-1] == "PASS", row
    assert float(rows[("add", "forward")][3]) < 1e-5
    summary = lines[-1]
    assert re.fullmatch(r"\d+ ops, \d+ checks on cpu: all passed", summary), summary


def test_check_verbose_has_one_row_per_sample(capsys):
    code, agg, _ = run(capsys, "check", "--op", "exp")
    code_v, ver, _ = run(capsys, "check", "--op", "exp", "-v")
    assert code == code_v == 0
    assert len(ver.splitlines()) > len(agg.splitlines())


def test_check_pattern_matching_nothing(capsys):
    code, out, err = run(capsys, "check", "--op", "no_such_op_xyz")
    assert code == 1
    assert out == ""
    assert err.startswith("error: check: no op matching 'no_such_op_xyz'")
    assert "Traceback" not in err


def test_check_failure_exits_1(capsys, monkeypatch):
    import torchlean.testing.checks as checks
    fake = [Result("add", "forward", "cpu", 1e-8, 1e-8, True, "ok"),
            Result("add", "vjp", "cpu", 0.5, 0.25, False, "2-D: gradient off")]
    monkeypatch.setattr(checks, "run_checks", lambda device, pattern: fake)
    code, out, err = run(capsys, "check", "--op", "add")
    assert code == 1
    assert re.search(r"^add\s+vjp\s+cpu\s+5\.00e-01\s+2\.50e-01\s+1\s+FAIL$", out, re.M), out
    assert "FAIL add vjp on cpu: 2-D: gradient off" in out
    assert out.rstrip().endswith("1 ops, 2 checks on cpu: 1 FAILED in 1 op(s)")


@pytest.mark.skipif(CUDA, reason="a GPU is present")
def test_check_cuda_without_gpu(capsys):
    code, out, err = run(capsys, "check", "--device", "cuda")
    assert code == 2
    assert err.startswith("error: --device cuda:")
    assert "Traceback" not in err
    assert out == ""


@pytest.mark.skipif(CUDA, reason="a GPU is present")
def test_quickstart_cuda_without_gpu(capsys):
    code, out, err = run(capsys, "quickstart", "tensors", "--device", "cuda")
    assert code == 2
    assert "--device cuda" in err


def test_ir_missing_file(capsys, tmp_path):
    missing = tmp_path / "nope.json"
    code, out, err = run(capsys, "ir", "check", str(missing))
    assert code != 0
    assert err.startswith("error:")
    assert "nope.json" in err
    assert "Traceback" not in err


def test_ir_unavailable(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchlean.ir.cli", None)
    code, out, err = run(capsys, "ir", "check", "model.json")
    assert code == 2
    assert err == "error: ir: not available in this build\n"


def test_ir_dispatch(capsys, monkeypatch):
    calls = []
    fake = types.SimpleNamespace(
        ir_check=lambda f: calls.append(("check", f)) or 0,
        ir_run=lambda f, inputs, device: calls.append(("run", f, inputs, device)) or 0,
        ir_convert=lambda f, out: calls.append(("convert", f, out)) or 1)
    monkeypatch.setitem(sys.modules, "torchlean.ir.cli", fake)
    assert run(capsys, "ir", "check", "g.json")[0] == 0
    assert run(capsys, "ir", "run", "g.json", "a.npy", "b.npy")[0] == 0
    assert run(capsys, "ir", "convert", "m.onnx")[0] == 1
    assert calls == [("check", "g.json"), ("run", "g.json", ["a.npy", "b.npy"], "cpu"),
                     ("convert", "m.onnx", "m.json")]


def test_unknown_subcommand(capsys):
    code, out, err = run(capsys, "frobnicate")
    assert code == 1
    assert "invalid choice: 'frobnicate'" in err
    assert "usage: torchlean" in err


def test_no_subcommand(capsys):
    code, out, err = run(capsys)
    assert code == 1
    assert "usage: torchlean" in err


def test_train_unavailable(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchlean.train", None)
    code, out, err = run(capsys, "train", "mlp")
    assert code == 2
    assert err == "error: train: not available in this build\n"


def test_train_dispatch(capsys, monkeypatch):
    seen = {}
    fake = types.SimpleNamespace(main=lambda model, **kw: seen.update(model=model, **kw) or 0)
    monkeypatch.setitem(sys.modules, "torchlean.train", fake)
    code, out, err = run(capsys, "train", "mlp", "--steps", "7", "--lr", "0.01")
    assert code == 0, err
    assert seen == {"model": "mlp", "device": "cpu", "steps": 7, "batch_size": None, "lr": 0.01,
                    "checkpoint": None, "plot": None}


def test_bench_lists_suites(capsys):
    code, out, err = run(capsys, "bench")
    assert code == 0, err
    assert re.search(r"^\s+cpu\s+CPU: MLP training step", out, re.M), out


def test_bench_forwards_the_suites_own_options(capsys, monkeypatch):
    import runpy
    seen = []
    monkeypatch.setattr(runpy, "run_path", lambda path, run_name=None: seen.append(list(sys.argv)))
    code, out, err = run(capsys, "bench", "--runs", "3", "onnx", "--only-full", "--resnet18", "1,32")
    assert code == 0, err
    assert seen[0][0].endswith("bench_onnx.py") and seen[0][1:] == ["--runs", "3", "--only-full", "--resnet18", "1,32"]


def test_bench_unknown_suite_is_clean_error(capsys):
    code, out, err = run(capsys, "bench", "no_such_suite")
    assert code == 1
    assert err.startswith("error: bench: unknown suite 'no_such_suite' (known: ")
    assert "cpu" in err and "Traceback" not in err


def test_python_dash_m():
    r = subprocess.run([sys.executable, "-m", "torchlean", "check", "--op", "sin"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^sin\s+forward\s+cpu\s+\S+\s+\S+\s+\d+\s+PASS$", r.stdout, re.M), r.stdout


def test_readme_starts_with_the_commands_ci_runs():
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    lines = (root / "README.md").read_text().splitlines()
    assert lines[0] == "```bash" and lines[3] == "```"
    assert lines[1] == "python -m venv .venv && . .venv/bin/activate && pip install -e . && torchlean quickstart"
    install_and_test = lines[2].split(" && ")
    assert install_and_test == ['pip install -e ".[test]"', "pip install torch==2.13.0", "python -m pytest -q"]
    ci = [ln.strip() for ln in (root / ".ci" / "run").read_text().splitlines()]
    assert "python -m pytest -q" in ci                  # the same test command, nothing added
    assert 'pip install -q -e ".[test]"' in ci and "pip install -q torch==2.13.0" in ci


def test_bench_suite_without_its_packages_is_unavailable(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)        # import cupy fails as on a machine without it
    code, out, err = run(capsys, "bench", "cuda_kernels")
    assert code == 2
    assert err.startswith("error: bench cuda_kernels: this suite needs CuPy") and "Traceback" not in err


def test_check_in_half_precision_bounds_every_op_by_the_unit_roundoff(capsys):
    code, out, err = run(capsys, "check", "--dtype", "float16", "--op", "softmax")
    assert code == 0, err
    assert "float16 forward" in out and "float16 vjp" in out and "units of u |y64|" in out
    assert "all passed" in out
