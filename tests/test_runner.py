"""`torchlean run`: unmodified PyTorch programs with torchlean as `torch`, one-line reports of missing
names, and the static `--report`."""

import io
import sys
import textwrap

import pytest

from torchlean import cli, runner


def _write(tmp_path, name, src):
    p = tmp_path / name
    p.write_text(textwrap.dedent(src))
    return str(p)


def test_a_torch_program_runs_on_torchlean(tmp_path):
    script = _write(tmp_path, "train.py", """
        import sys
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.optim import Adam
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
        opt = Adam(model.parameters(), lr=0.05)
        x = torch.randn(64, 3)
        y = x.sum(dim=1, keepdim=True)
        first = None
        for _ in range(100):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            first = first if first is not None else loss.item()
        with open(sys.argv[1], "w") as f:
            f.write(f"{type(torch.ones(1)).__module__} {first} {loss.item()}")
        """)
    out = tmp_path / "result.txt"
    saved = sys.modules.get("torch")
    assert runner.run_script(script, [str(out)]) == 0
    module, first, last = out.read_text().split()
    assert module.startswith("torchlean")              # the program's torch was torchlean
    assert float(last) < 0.05 * float(first)
    assert sys.modules.get("torch") is saved           # the hook is gone after the run


def test_a_missing_name_is_one_line_with_the_source_line(tmp_path):
    script = _write(tmp_path, "uses_missing.py", """
        import torch
        import torch.nn as nn
        x = torch.ones(2)
        layer = nn.NoSuchLayer(3)
        """)
    err = io.StringIO()
    assert runner.run_script(script, out=err) == 2
    msg = err.getvalue()
    assert "torch.nn.NoSuchLayer is not available in torchlean" in msg
    assert "uses_missing.py:5: layer = nn.NoSuchLayer(3)" in msg
    assert "Traceback" not in msg


@pytest.mark.parametrize("line,name", [("from torch.nn import NoSuchThing", "torch.nn.NoSuchThing"),
                                       ("import torch.no_such_module", "torch.no_such_module")])
def test_missing_imports_name_the_torch_module(tmp_path, line, name):
    script = _write(tmp_path, "imports.py", f"import torch\n{line}\n")
    err = io.StringIO()
    assert runner.run_script(script, out=err) == 2
    assert f"{name} is not available in torchlean" in err.getvalue()
    assert f"imports.py:2: {line}" in err.getvalue()


def test_a_program_error_is_the_programs_traceback_and_exit_codes_pass_through(tmp_path):
    err = io.StringIO()
    assert runner.run_script(_write(tmp_path, "boom.py", "import torch\nraise ValueError('boom')\n"), out=err) == 1
    assert "ValueError: boom" in err.getvalue() and "runner.py" not in err.getvalue()
    assert runner.run_script(_write(tmp_path, "code.py", "import sys\nsys.exit(7)\n")) == 7
    assert runner.run_script(str(tmp_path / "absent.py"), out=io.StringIO()) == 1


def test_report_lists_used_names_and_the_share_that_exists(tmp_path, capsys):
    _write(tmp_path, "a.py", """
        import torch
        from torch import nn
        import torch.nn.functional as F
        m = nn.Linear(2, 2)
        y = F.relu(torch.zeros(2))
        z = nn.NoSuchLayer()
        """)
    _write(tmp_path, "b.py", "import numpy as np\nx = np.zeros(3)\n")
    found, total = runner.report([str(tmp_path)])
    text = capsys.readouterr().out
    assert "MISSING  torch.nn.NoSuchLayer" in text
    assert "ok       torch.nn.functional.relu" in text
    used = {"torch", "torch.nn", "torch.nn.functional", "torch.nn.Linear", "torch.nn.functional.relu",
            "torch.zeros", "torch.nn.NoSuchLayer"}
    assert total == len(used) and found == total - 1
    assert f"{found} of {total} torch names used by 2 file(s)" in text


def test_cli_run_and_report(tmp_path, capsys):
    script = _write(tmp_path, "p.py", "import torch\nprint(torch.arange(3).sum().item())\n")
    assert cli.main(["run", script]) == 0
    assert capsys.readouterr().out.strip() == "3"
    assert cli.main(["run", "--report", script]) == 0
    assert "100.0%" in capsys.readouterr().out


def test_spawned_children_of_a_run_program_get_torchlean_too(tmp_path):
    # multiprocessing's spawn starts a fresh interpreter that re-imports the program: its `import torch`
    # and `import torchvision` must be torchlean's as in the parent (not a torch installed beside it)
    script = _write(tmp_path, "spawner.py", """
        import torch
        import torch.multiprocessing as mp
        import torchvision.transforms as T

        def child(q, t):
            t.add_(1)                                  # a shared tensor, updated in place
            q.put((torch.__name__, T.__name__, type(T.ToTensor()).__module__))

        if __name__ == "__main__":
            mp.set_start_method("spawn", force=True)
            t = torch.zeros(3).share_memory_()
            q = mp.Queue()
            p = mp.Process(target=child, args=(q, t))
            p.start()
            names = q.get(timeout=120)
            p.join()
            print("child", names, "exit", p.exitcode, "shared", t.tolist())
        """)
    out = io.StringIO()
    import contextlib
    with contextlib.redirect_stdout(out):
        code = runner.run_script(script, out=out)
    assert code == 0, out.getvalue()
    assert ("child ('torchlean', 'torchlean.vision.transforms', 'torchlean.vision.transforms') exit 0 "
            "shared [1.0, 1.0, 1.0]") in out.getvalue()
    assert not any(isinstance(f, runner.TorchAlias) for f in sys.meta_path)


def test_report_reads_torchvision_names_too():
    names = runner.torch_names("import torchvision\nfrom torchvision import transforms as T\n"
                               "import torchvision.models as models\nx = T.ToTensor()\nm = models.resnet18()\n"
                               "y = torchvision.utils.make_grid\n")
    assert {"torchvision", "torchvision.transforms.ToTensor", "torchvision.models.resnet18",
            "torchvision.utils.make_grid"} <= names
    assert runner.resolve("torchvision.transforms.ToTensor") is not None
    assert runner.resolve("torchvision.transforms.ElasticTransform") is None
