"""The Trainer and ``torchlean train``: loop, evaluation, bit-for-bit resume, checkpoint refusal, plots."""

from __future__ import annotations

import json
import os
import re
import sys

import numpy as np
import pytest

import torchlean as tl
from torchlean import cli, nn
from torchlean import train as tltrain
from torchlean.data import DataLoader, TensorDataset, load_digits
from torchlean.models import MLP
from torchlean.train import CheckpointError, Trainer

pytest.importorskip("safetensors")



def _digits():
    return load_digits("train")


class DropMLP(nn.Module):
    """An MLP with dropout, so that resuming must restore the random generator's counter."""

    def __init__(self, hidden=32):
        super().__init__()
        self.config = {"hidden": hidden}
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, 10))

    def forward(self, x):
        return self.net(x)


def make_trainer(ckpt=None, *, seed=0, init_seed=None, hidden=32, loader_seed=0, epochs=3, name="digits",
                 model_cls=DropMLP, batch_size=50):
    x, y = _digits()
    tl.manual_seed(seed if init_seed is None else init_seed)
    model = model_cls(hidden=hidden)
    tl.manual_seed(seed)
    opt = tl.optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True, seed=loader_seed)
    xt, yt = load_digits("test")

    def eval_fn(m):
        return {"accuracy": float((m(xt).numpy().argmax(1) == yt.numpy()).mean())}
    return Trainer(model, opt, nn.F.cross_entropy, loader, eval_fn, checkpoint=ckpt, epochs=epochs,
                   progress="none", name=name, metric="accuracy")


def _params(t):
    return {k: v.numpy().copy() for k, v in t.model.state_dict().items()}


def _opt_arrays(t):
    out = {}
    for i, st in t.optimizer.state_dict()["state"].items():
        for k, v in st.items():
            out[f"{i}/{k}"] = v.numpy().copy() if hasattr(v, "numpy") else v
    return out


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


def test_trainer_learns_and_evaluates_each_epoch():
    t = make_trainer(epochs=3)
    h = t.fit()
    assert t.step == 3 * t.steps_per_epoch == 87
    assert len(h["loss"]) == 87 and np.mean(h["loss"][-10:]) < h["loss"][0] / 2
    assert [e["epoch"] for e in h["eval"]] == [1, 2, 3]
    assert [e["step"] for e in h["eval"]] == [29, 58, 87]
    assert t.final_metrics()["accuracy"] > 0.85
    assert t.throughput > 0


@pytest.mark.parametrize("loader_seed", [0, None])
def test_resume_mid_epoch_is_bit_for_bit(tmp_path, loader_seed):
    """Stop after 40 steps (inside the second epoch), resume in a fresh trainer, finish: same state."""
    full = make_trainer(loader_seed=loader_seed)
    full.fit()

    ck = str(tmp_path / "run.safetensors")
    first = make_trainer(ck, loader_seed=loader_seed)
    first.fit(stop_at=40)
    assert first.step == 40 and first.pos == 40 - first.steps_per_epoch
    state = _state(ck)
    assert state["trainer"]["step"] == 40 and state["trainer"]["in_epoch"]

    tl.manual_seed(12345)  # the resumed process draws differently before loading
    second = make_trainer(ck, init_seed=7, loader_seed=loader_seed)
    assert not np.array_equal(_params(second)["net.0.weight"], _params(first)["net.0.weight"])
    second.load_checkpoint()
    assert (second.step, second.epoch, second.pos) == (40, 1, 11)
    second.fit()
    assert second.step == full.step
    _assert_same(_params(second), _params(full))
    _assert_same(_opt_arrays(second), _opt_arrays(full))
    assert second.history["loss"] == full.history["loss"]
    assert [e["accuracy"] for e in second.history["eval"]] == [e["accuracy"] for e in full.history["eval"]]


def test_resume_at_epoch_boundary_is_bit_for_bit(tmp_path):
    full = make_trainer(epochs=2)
    full.fit()
    ck = str(tmp_path / "a.safetensors")
    first = make_trainer(ck, epochs=2)
    first.fit(stop_at=29)
    second = make_trainer(ck, epochs=2, init_seed=3)
    second.load_checkpoint()
    assert (second.step, second.epoch, second.pos) == (29, 1, 0)
    second.fit()
    _assert_same(_params(second), _params(full))


def _state(ck):
    """The state JSON a checkpoint file carries in its safetensors metadata."""
    data = open(ck, "rb").read()
    n = int.from_bytes(data[:8], "little")
    return json.loads(json.loads(data[8:8 + n])["__metadata__"]["state"])


def _rewrite(ck, edit=None, arrays=None, redigest=True):
    """Write ``ck`` again with its state edited by ``edit(state)`` (and other arrays), its digests
    recomputed as a save would (``redigest``) or kept."""
    import safetensors.numpy as stn
    from torchlean.train import trainer as T
    data = open(ck, "rb").read()
    n = int.from_bytes(data[:8], "little")
    meta = json.loads(data[8:8 + n])["__metadata__"]
    state = json.loads(meta["state"])
    arrays = stn.load(data) if arrays is None else arrays
    if edit is not None:
        edit(state)
    if redigest:
        state["tensors"]["sha256"] = T._tensor_digest(arrays)
        meta["digest"] = T._digest(state)
    meta["state"] = json.dumps(state)
    open(ck, "wb").write(stn.save(arrays, metadata=meta))


def test_checkpoint_is_one_file_with_the_user_s_permissions(tmp_path):
    ck = str(tmp_path / "c.safetensors")
    stale = tmp_path / ".c.safetensors.999999999.abcd.tmp"      # left by a killed save (no such process)
    stale.write_bytes(b"partial")
    old = os.umask(0o027)
    try:
        t = make_trainer(ck, epochs=1)
        t.fit()
    finally:
        os.umask(old)
    assert sorted(os.listdir(tmp_path)) == ["c.safetensors"]     # no companion file, no temporaries
    assert os.stat(ck).st_mode & 0o777 == 0o640
    state = _state(ck)
    assert state["format"] == "torchlean.checkpoint.v2"
    assert state["model"] == {"class": "DropMLP", "config": {"hidden": 32}}
    assert state["optimizer"]["class"] == "Adam"
    ents = state["tensors"]["entries"]
    assert ents["model/net.0.weight"] == ["float32", [32, 64]]
    assert ents["optim/0/exp_avg"] == ["float32", [32, 64]]
    assert state["trainer"]["rng"][0] == 0 and state["trainer"]["rng"][1] > 0


KILL_SCRIPT = """
import os, sys
sys.path.insert(0, {tests!r})
import test_train as T
ck, stop, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
calls = [0]
real = {{name: getattr(os, name) for name in ("replace", "fsync", "open", "remove", "fchmod")}}

def counting(name):
    def f(*a, **kw):
        if saving[0]:
            calls[0] += 1
            if calls[0] == kill_at:
                os._exit(9)                      # killed right before this file operation
        return real[name](*a, **kw)
    return f

saving = [False]
for name in real:
    setattr(os, name, counting(name))
t = T.make_trainer(ck)
orig = t.save_checkpoint
def save(*a, **kw):
    saving[0] = True
    try:
        return orig(*a, **kw)
    finally:
        saving[0] = False
t.save_checkpoint = save
if os.path.exists(ck):
    t.load_checkpoint()
t.fit(stop_at=stop)
print("ops", calls[0])
"""


def test_a_kill_before_any_file_operation_of_a_save_loses_nothing(tmp_path):
    """Kill the process before each file operation of a save in turn; the next run resumes from the
    previous checkpoint (or the new one) and ends bit-identical to an uninterrupted run."""
    import subprocess
    import sys
    full = make_trainer()
    full.fit()
    script = tmp_path / "killer.py"
    script.write_text(KILL_SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__))))

    def run(ck, stop, kill_at):
        return subprocess.run([sys.executable, str(script), ck, str(stop), str(kill_at)], capture_output=True,
                              text=True, timeout=300)
    first = tmp_path / "probe.safetensors"
    p = run(str(first), 40, 0)                              # count the file operations of two saves
    assert p.returncode == 0, p.stderr
    ops = int(p.stdout.split()[-1]) // 2
    assert ops >= 4
    for k in range(1, ops + 1):
        ck = str(tmp_path / f"k{k}.safetensors")
        assert run(ck, 29, 0).returncode == 0                # a good checkpoint at the end of epoch 1
        p = run(ck, 40, k)                                     # killed during the save at step 40
        assert p.returncode == 9, p.stderr
        t = make_trainer(ck)
        t.load_checkpoint()                                    # the previous or the new checkpoint
        assert t.step in (29, 40)
        t.fit()
        _assert_same(_params(t), _params(full))
        assert [f for f in os.listdir(tmp_path) if f.startswith(f".k{k}.")] == []   # cleaned by the load


# ---- refusals: nothing is loaded ------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path):
    ck = str(tmp_path / "s.safetensors")
    make_trainer(ck, epochs=1).fit(stop_at=10)
    return ck


def _refuses(trainer, ck, match):
    before_p, before_o = _params(trainer), _opt_arrays(trainer)
    before = (trainer.step, trainer.epoch, trainer.pos)
    with pytest.raises(CheckpointError, match=match):
        trainer.load_checkpoint(ck)
    _assert_same(_params(trainer), before_p)
    _assert_same(_opt_arrays(trainer), before_o)
    assert (trainer.step, trainer.epoch, trainer.pos) == before


def _trained_a_little():
    t = make_trainer(init_seed=5, epochs=1)
    t.fit(stop_at=3)  # non-empty optimizer state, so an unchanged state is a real check
    return t


def test_refuses_wrong_model(saved):
    t = make_trainer(hidden=16, epochs=1)
    _refuses(t, saved, r"holds model DropMLP \{'hidden': 32\}.*builds DropMLP \{'hidden': 16\}")


def test_refuses_other_task(saved):
    _refuses(make_trainer(name="other", epochs=1), saved, "written for task 'digits', this run is 'other'")


def test_refuses_other_batch_size(saved):
    _refuses(make_trainer(batch_size=40, epochs=1), saved, "batch size 50")


def test_refuses_truncated_file(saved):
    data = open(saved, "rb").read()
    open(saved, "wb").write(data[: len(data) // 2])
    _refuses(_trained_a_little(), saved, "truncated or another kind of file|cannot be read")


def test_refuses_tensors_from_another_save(saved, tmp_path):
    import safetensors.numpy as stn
    other = str(tmp_path / "o.safetensors")
    make_trainer(other, epochs=1).fit(stop_at=12)
    _rewrite(saved, arrays=stn.load(open(other, "rb").read()), redigest=False)
    _refuses(_trained_a_little(), saved, "do not match their recorded digest")


def test_refuses_edited_state(saved):
    _rewrite(saved, lambda s: s["trainer"].update(step=5), redigest=False)
    _refuses(_trained_a_little(), saved, "modified after it was written")


@pytest.mark.parametrize("edit, field", [
    (lambda s: s["trainer"].update(step="big"), "trainer.step"),
    (lambda s: s["trainer"].update(rng=[0]), "trainer.rng"),
    (lambda s: s["trainer"].pop("history"), "trainer.history"),
    (lambda s: s["trainer"].update(pos=10 ** 6), "trainer.pos"),
    (lambda s: s["optimizer"]["param_groups"][0].update(lr="big"), r"optimizer.param_groups\[0\].lr"),
    (lambda s: s["optimizer"]["param_groups"][0].update(betas=[0.9]), r"optimizer.param_groups\[0\].betas"),
    (lambda s: s["optimizer"]["param_groups"][0].update(params=["x"]), r"optimizer.param_groups\[0\].params"),
    (lambda s: s.update(model=[]), "model"),
    (lambda s: s["tensors"]["entries"].update({"model/x": "f32"}), "tensors.entries"),
])
def test_refuses_a_wrong_field_naming_it_before_loading_anything(saved, edit, field):
    _rewrite(saved, edit)                                       # a consistent file with a bad value
    _refuses(_trained_a_little(), saved, "field " + field)


def test_refuses_missing_file(tmp_path):
    _refuses(_trained_a_little(), str(tmp_path / "nope.safetensors"), "does not exist")


def test_refuses_bit_flip_in_tensors(saved):
    data = bytearray(open(saved, "rb").read())
    data[-3] ^= 0x01
    open(saved, "wb").write(bytes(data))
    _refuses(_trained_a_little(), saved, "do not match their recorded digest")


def test_trainer_argument_errors():
    x, y = _digits()
    loader = DataLoader(TensorDataset(x, y), batch_size=50)
    m = MLP(64, [8], 10)
    opt = tl.optim.SGD(m.parameters(), lr=0.1)
    with pytest.raises(tl.TorchLeanError, match="steps or epochs"):
        Trainer(m, opt, nn.F.cross_entropy, loader)
    with pytest.raises(tl.TorchLeanError, match="not both"):
        Trainer(m, opt, nn.F.cross_entropy, loader, steps=3, epochs=1)
    with pytest.raises(tl.TorchLeanError, match="progress"):
        Trainer(m, opt, nn.F.cross_entropy, loader, steps=3, progress="fancy")


def test_non_finite_loss_stops_with_a_clear_error():
    x, y = _digits()
    m = nn.Linear(64, 1)
    target = y.float().reshape(-1, 1)
    t = Trainer(m, tl.optim.SGD(m.parameters(), lr=10.0), nn.F.mse_loss,
                DataLoader(TensorDataset(x * 100, target), batch_size=50), steps=200, progress="none")
    with pytest.raises(tl.TorchLeanError, match="smaller learning rate"):
        t.fit()


# ---- the command line -----------------------------------------------------------------------------

def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_train_mlp_checkpoint_plot_and_resume(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    ck, png = str(tmp_path / "m.safetensors"), str(tmp_path / "m.png")
    code, out, err = _run(capsys, "train", "mlp", "--steps", "30", "--checkpoint", ck, "--plot", png)
    assert code == 0, err
    assert re.search(r"^mlp: accuracy \d+\.\d\d%, goal >= 95%; 30 steps in .* samples/s; plot .*; checkpoint",
                     out, re.M), out
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    # Resume to 60 steps; compare with a straight 60-step run.
    code, out, err = _run(capsys, "train", "mlp", "--steps", "60", "--checkpoint", ck, "--resume")
    assert code == 0, err
    assert "resumed at step 30" in out
    straight = str(tmp_path / "s.safetensors")
    code, _, err = _run(capsys, "train", "mlp", "--steps", "60", "--checkpoint", straight)
    assert code == 0, err
    from safetensors.numpy import load_file
    a, b = load_file(ck), load_file(straight)
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def test_cli_resume_refuses_other_settings(capsys, tmp_path):
    ck = str(tmp_path / "m.safetensors")
    assert _run(capsys, "train", "mlp", "--steps", "5", "--checkpoint", ck)[0] == 0
    code, out, err = _run(capsys, "train", "mlp", "--steps", "10", "--lr", "0.5", "--checkpoint", ck, "--resume")
    assert code == 1 and "settings" in err
    code, out, err = _run(capsys, "train", "cnn", "--steps", "10", "--checkpoint", ck, "--resume")
    assert code == 1 and "written for task 'mlp'" in err
    code, out, err = _run(capsys, "train", "mlp", "--resume")
    assert code == 1 and "--resume needs --checkpoint" in err


def test_cli_unknown_model_and_plain_progress(capsys):
    code, out, err = _run(capsys, "train", "lstm")
    assert code == 1 and "unknown model 'lstm'" in err and "mlp" in err
    code = tltrain.main("mlp", steps=5, progress="plain")
    out, err = capsys.readouterr()
    assert code == 0
    assert re.search(r"mlp step 5/5 +epoch 1 +loss \d+\.\d+ +[\d,]+ samples/s", err), err
    assert re.search(r"mlp step 5 epoch 1: accuracy", err), err


def test_cli_plot_without_matplotlib(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = _run(capsys, "train", "mlp", "--steps", "2", "--plot", str(tmp_path / "p.png"))
    assert code == 2
    assert "needs matplotlib: pip install matplotlib" in err
    assert not (tmp_path / "p.png").exists()


def test_cli_unwritable_checkpoint_fails_before_training(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = _run(capsys, "train", "mlp", "--steps", "2", "--checkpoint", str(blocker / "ck"))
    assert code == 1 and "cannot write the checkpoint" in err and "is not a folder" in err
    assert "step 1" not in err + out                      # nothing was trained
