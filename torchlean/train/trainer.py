"""The :class:`Trainer`: the training loop, evaluation, progress and checkpoints.

``Trainer`` runs the usual loop (forward, loss, backward, optional gradient
clipping, optimizer step) over a :class:`~torchlean.data.DataLoader`, evaluates
on held-out data at the end of every epoch, shows progress (tqdm when installed,
otherwise a plain line every few steps) with the loss and the throughput in
samples per second, and keeps the curves in :attr:`Trainer.history`.

A checkpoint is one safetensors file ``PATH``, committed atomically (a temporary file in the same
folder, fsync, one ``os.replace``, fsync of the folder), so a kill at any instant leaves the
previous checkpoint or the new one, never a mix; temporary files of killed saves are removed by
the next save or load. It holds the model's state dict (``model/<name>``), the optimizer's state
arrays (``optim/<index>/<key>``), the current epoch's order when the loader draws it from the global
generator (``trainer/order``), and in its metadata the state as JSON: the trainer state (step,
epoch, batch position inside the epoch, the counter-based generator's seed and counter, history),
the optimizer's options and scalar state, the scheduler's state, the model's class and
configuration, every tensor's dtype and shape and a digest of all tensors' bytes; the metadata's
own digest covers the state and, through that, the tensors.

:meth:`Trainer.load_checkpoint` verifies all of that — digests, a schema of every field it reads
(types and ranges, the optimizer's options against this run's), model class and configuration,
names, dtypes and shapes, optimizer class and layout — before it touches the model, so a
truncated, edited or foreign checkpoint is refused with a :class:`CheckpointError` naming the
field, and nothing is half-loaded. On the CPU a run resumed from a checkpoint (even one written
in the middle of an epoch) ends with exactly the parameters of the uninterrupted run: the batch
order is a pure function of (seed, epoch), the position inside the epoch is saved, and so are
the optimizer's moments and the generator's counter.

    >>> import torchlean as tl
    >>> from torchlean.data import DataLoader, TensorDataset
    >>> _ = tl.manual_seed(0)
    >>> x = tl.randn(64, 3); y = x.sum(1, keepdim=True)
    >>> net = tl.nn.Linear(3, 1)
    >>> t = Trainer(net, tl.optim.SGD(net.parameters(), lr=0.1), tl.nn.F.mse_loss,
    ...             DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, seed=0),
    ...             epochs=20, progress="none")
    >>> t.fit()["loss"][-1] < 1e-3
    True
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time

import numpy as np

from .. import nn
from ..capture import capture_step
from ..errors import BackendUnavailableError, TorchLeanError
from ..fileio import atomic_write, remove_stale_temporaries
from ..tensor import Tensor, get_rng_state, no_grad, set_rng_state

__all__ = ["Trainer", "CheckpointError", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "torchlean.checkpoint.v2"


class CheckpointError(TorchLeanError, ValueError):
    """A checkpoint that cannot be used: missing, truncated, edited, or written for another model."""


# ---- helpers ------------------------------------------------------------------------------------

def _host(v) -> np.ndarray:
    a = v.numpy() if isinstance(v, Tensor) else np.asarray(v)
    return np.ascontiguousarray(a)


def _digest(obj) -> str:
    """SHA-256 of the canonical JSON form of ``obj`` (sorted keys, no whitespace)."""
    s = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def _jsonable(v, where):
    """``v`` as plain JSON values (tuples become lists); anything else is an error."""
    if isinstance(v, (list, tuple)):
        return [_jsonable(x, where) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x, where) for k, x in v.items()}
    if isinstance(v, np.generic):
        return v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise CheckpointError(f"checkpoint: cannot store {type(v).__name__} at {where}")


def _safetensors():
    try:
        import safetensors.numpy as stn
    except ImportError as e:
        raise BackendUnavailableError("checkpoints need the safetensors package: pip install safetensors") from e
    return stn


def _tensor_digest(tensors: dict) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        h.update(json.dumps([name, str(a.dtype), list(a.shape)]).encode("utf-8"))
        h.update(a.tobytes())
    return h.hexdigest()


_HEADER_LIMIT = 100 * 2 ** 20


def _read_file(path):
    """``(state, arrays)`` of a checkpoint file, its digest verified (nothing is checked against a run)."""
    stn = _safetensors()
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint: {path} does not exist")
    remove_stale_temporaries(path)
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    if n < 2 or n > min(_HEADER_LIMIT, len(data) - 8):
        raise CheckpointError(f"checkpoint: {path} ({len(data)} bytes) is not a torchlean checkpoint: "
                              "truncated or another kind of file")
    try:
        meta = json.loads(data[8:8 + n].decode("utf-8")).get("__metadata__") or {}
        arrays = stn.load(data)
    except Exception as e:  # noqa: BLE001 - any parse failure means a corrupt file
        raise CheckpointError(f"checkpoint: {path} cannot be read as safetensors ({e})") from None
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint: {path} has format {meta.get('format')!r}, expected "
                              f"{CHECKPOINT_FORMAT!r}")
    try:
        state = json.loads(meta.get("state", ""))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"checkpoint: the state recorded in {path} is not valid JSON ({e})") from None
    if not isinstance(state, dict) or meta.get("digest") != _digest(state):
        raise CheckpointError(f"checkpoint: {path} was modified after it was written (digest mismatch)")
    recorded = state.get("tensors", {}).get("sha256") if isinstance(state.get("tensors"), dict) else None
    if recorded != _tensor_digest(arrays):
        raise CheckpointError(f"checkpoint: the tensors of {path} do not match their recorded digest: "
                              "modified or damaged")
    return state, arrays


def _kind(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, (list, tuple)):
        return "list"
    return "null" if v is None else type(v).__name__


def _need(ok, field, what):
    if not ok:
        raise CheckpointError(f"checkpoint: field {field} {what}")


def _int(v, field, low=0):
    _need(isinstance(v, int) and not isinstance(v, bool) and v >= low, field,
          f"must be an integer >= {low}, got {v!r}")


def _check_schema(state):
    """Every field the loader reads exists with the right type and range (refused naming the field)."""
    for key, typ in (("task", str), ("model", dict), ("tensors", dict), ("optimizer", dict), ("trainer", dict)):
        _need(isinstance(state.get(key), typ), key, f"must be a {typ.__name__}, got {_kind(state.get(key))}")
    _need(isinstance(state["model"].get("class"), str), "model.class", "must be a string")
    ents = state["tensors"].get("entries")
    _need(isinstance(ents, dict), "tensors.entries", "must be an object")
    for k, e in ents.items():
        _need(isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], list)
              and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in e[1]),
              f"tensors.entries[{k!r}]", f"must be [dtype, shape], got {e!r}")
    opt = state["optimizer"]
    _need(isinstance(opt.get("class"), str), "optimizer.class", "must be a string")
    _need(isinstance(opt.get("param_groups"), list), "optimizer.param_groups", "must be a list")
    for gi, g in enumerate(opt["param_groups"]):
        _need(isinstance(g, dict) and isinstance(g.get("params"), list), f"optimizer.param_groups[{gi}]",
              "must be an object with a list 'params'")
        for i in g["params"]:
            _int(i, f"optimizer.param_groups[{gi}].params")
    _need(isinstance(opt.get("state"), dict), "optimizer.state", "must be an object")
    for idx, entry in opt["state"].items():
        _need(isinstance(entry, dict), f"optimizer.state[{idx!r}]", "must be an object")
    sch = state.get("scheduler")
    _need(sch is None or (isinstance(sch, dict) and isinstance(sch.get("class"), str)
                          and isinstance(sch.get("state"), dict)), "scheduler", "must be null or {class, state}")
    tr = state["trainer"]
    for k in ("step", "epoch", "pos", "samples_seen"):
        _int(tr.get(k), f"trainer.{k}")
    for k in ("total_steps", "steps_per_epoch", "batch_size"):
        _int(tr.get(k), f"trainer.{k}", 1)
    _need(tr["pos"] < tr["steps_per_epoch"] or tr["pos"] == 0, "trainer.pos",
          f"must be below steps_per_epoch ({tr['steps_per_epoch']}), got {tr['pos']}")
    _need(tr.get("loader_seed") is None or _kind(tr.get("loader_seed")) == "number", "trainer.loader_seed",
          "must be null or an integer")
    _need(isinstance(tr.get("in_epoch"), bool), "trainer.in_epoch", "must be true or false")
    rng = tr.get("rng")
    _need(isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                          and v >= 0 for v in rng),
          "trainer.rng", f"must be [seed, counter], got {rng!r}")
    _need(_kind(tr.get("train_seconds")) == "number" and tr["train_seconds"] >= 0, "trainer.train_seconds",
          "must be a non-negative number")
    hist = tr.get("history")
    _need(isinstance(hist, dict) and all(isinstance(v, list) for v in hist.values())
          and all(isinstance(hist.get(k), list) for k in ("step", "loss", "eval")), "trainer.history",
          "must be an object of lists (step, loss, eval)")


def _check_like(got: dict, want: dict, field: str):
    """``got`` has ``want``'s keys with values of the same kinds (numbers, bools, lists of a length ...)."""
    _need(isinstance(got, dict), field, "must be an object")
    extra = sorted(set(got) - set(want) - {"params"})
    _need(not extra, field, f"has keys this run does not know: {extra[:5]}")
    for k, w in want.items():
        _need(k in got, f"{field}.{k}", "is missing")
        g = got[k]
        _need(_kind(g) == _kind(w) or (w is None or g is None), f"{field}.{k}",
              f"must be a {_kind(w)} like this run's {w!r}, got {g!r}")
        if _kind(w) == "list" and w is not None and g is not None:
            _need(len(g) == len(w), f"{field}.{k}", f"must have {len(w)} entries, got {len(g)}")
        if _kind(w) == "number" and isinstance(g, float):
            _need(math.isfinite(g) or not math.isfinite(w), f"{field}.{k}", f"must be finite, got {g!r}")


def _rng_state():
    return [int(v) for v in get_rng_state()]


def _set_rng_state(state):
    set_rng_state(state)


def _model_config(model):
    return _jsonable(getattr(model, "config", {}), "model.config")


class _Progress:
    """A tqdm bar (``"tqdm"``, or ``"auto"`` on a terminal) or one plain line every ``every`` steps."""

    def __init__(self, mode, total, initial, every, desc, stream=None):
        self.stream = stream or sys.stderr
        self.every = max(1, int(every))
        self.bar = None
        if mode == "auto" and not getattr(self.stream, "isatty", lambda: False)():
            mode = "plain"  # a log file or CI: periodic lines, not a redrawn bar
        self.mode = mode
        if mode in ("auto", "tqdm"):
            try:
                from tqdm.auto import tqdm
            except ImportError:
                if mode == "tqdm":
                    raise BackendUnavailableError("progress bars need tqdm: pip install tqdm") from None
                self.mode = "plain"
            else:
                self.bar = tqdm(total=total, initial=initial, desc=desc, unit="step", file=self.stream,
                                dynamic_ncols=True, leave=True)
                self.mode = "tqdm"
        self.total = total
        self.desc = desc

    def update(self, step, loss, rate, epoch):
        if self.mode == "tqdm":
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4f}", samples_s=f"{rate:,.0f}", epoch=epoch, refresh=False)
        elif self.mode == "plain" and (step % self.every == 0 or step == self.total):
            print(f"{self.desc} step {step}/{self.total}  epoch {epoch}  loss {loss:.4f}  "
                  f"{rate:,.0f} samples/s", file=self.stream, flush=True)

    def write(self, msg):
        if self.mode == "tqdm":
            self.bar.write(msg, file=self.stream)
        elif self.mode != "none":
            print(msg, file=self.stream, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _to_device(batch, device):
    if isinstance(batch, Tensor):
        return batch if batch.device == device else batch.to(device=device)
    if isinstance(batch, (tuple, list)):
        return type(batch)(_to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch


def _batch_size_of(batch):
    first = batch[0] if isinstance(batch, (tuple, list)) else batch
    return int(first.shape[0]) if hasattr(first, "shape") and len(first.shape) else 1


# ---- the trainer --------------------------------------------------------------------------------

class Trainer:
    """Train ``model`` with ``optimizer`` on the batches of ``train_loader``.

    Parameters:
        model: an ``nn.Module``; called on the first field of each batch.
        optimizer: a ``tl.optim`` optimizer over the model's parameters.
        loss_fn: ``loss_fn(output, target) -> 0-d Tensor`` (batches are ``(input, target)``).
        train_loader: a :class:`~torchlean.data.DataLoader`.
        eval_fn: ``eval_fn(model) -> {name: float}``, run under ``no_grad`` in eval mode at
            the end of every epoch (or every ``eval_every`` steps) and at the end.
        device: where the model and batches live (``"cpu"`` or ``"cuda"``).
        checkpoint: a path; saved at every evaluation and when :meth:`fit` returns.
        steps / epochs: the length of the run (give one; ``epochs`` counts loader passes).
        scheduler: an optional LR scheduler stepped after every optimizer step.
        grad_clip: clip the global gradient norm to this value before each step.
        progress: ``"auto"`` (a tqdm bar on a terminal when tqdm is installed, else a plain line
            every ``log_every`` steps), ``"tqdm"``, ``"plain"``, ``"none"``.
        name: the task name recorded in checkpoints (a checkpoint of another task is refused).
        metric: the name of the main entry of ``eval_fn``'s result (for the summary).
        cuda_graph: on ``"cuda"``, run each step's forward, loss and backward as one captured CUDA
            graph (:mod:`torchlean.capture`; the optimizer step stays eager). ``"auto"`` (the
            default) captures on the first step and keeps the eager step if the capture fails (a
            note says why) or for a batch of another shape; ``True`` raises instead; ``False``
            runs every step eagerly. Ignored on the CPU.
    """

    def __init__(self, model, optimizer, loss_fn, train_loader, eval_fn=None, *, device="cpu",
                 checkpoint=None, steps=None, epochs=None, scheduler=None, eval_every=None,
                 grad_clip=None, progress="auto", log_every=None, name=None, metric=None,
                 hparams=None, cuda_graph="auto"):
        if steps is None and epochs is None:
            raise TorchLeanError("Trainer: give steps or epochs")
        if steps is not None and epochs is not None:
            raise TorchLeanError("Trainer: give steps or epochs, not both")
        if cuda_graph not in ("auto", True, False):
            raise TorchLeanError(f"Trainer: cuda_graph must be 'auto', True or False, got {cuda_graph!r}")
        if progress not in ("auto", "tqdm", "plain", "none"):
            raise TorchLeanError(f"Trainer: progress must be auto, tqdm, plain or none, got {progress!r}")
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.loader = train_loader
        self.eval_fn = eval_fn
        self.device = device
        self.checkpoint = os.fspath(checkpoint) if checkpoint is not None else None
        self.scheduler = scheduler
        self.grad_clip = grad_clip
        self.progress = progress
        self.name = name or type(model).__name__.lower()
        self.metric = metric
        self.hparams = dict(hparams or {})
        self.steps_per_epoch = len(train_loader)
        if self.steps_per_epoch < 1:
            raise TorchLeanError("Trainer: the training loader yields no batches")
        self.total_steps = int(steps) if steps is not None else int(epochs) * self.steps_per_epoch
        if self.total_steps < 1:
            raise TorchLeanError(f"Trainer: the run must have at least one step, got {self.total_steps}")
        self.eval_every = int(eval_every) if eval_every else self.steps_per_epoch
        self.log_every = int(log_every) if log_every else max(1, min(self.steps_per_epoch, 50))
        self.step = 0
        self.epoch = 0
        self.pos = 0  # batches of the current epoch already consumed
        self._order = None
        self.history = {"step": [], "loss": [], "eval": []}
        self.train_seconds = 0.0
        self.samples_seen = 0
        self.cuda_graph = cuda_graph if device == "cuda" else False
        self._captured = None      # the CapturedStep, once made
        self.graph_note = None     # why the eager step is used when cuda_graph="auto" could not capture

    # -- the loop ------------------------------------------------------------------------------------
    def _epoch_order(self, epoch):
        return np.asarray(self.loader.order(epoch), dtype=np.int64)

    def _batch(self, order, pos):
        bs = self.loader.batch_size
        chunk = order[pos * bs:(pos + 1) * bs]
        return next(iter(self.loader._batches(chunk)))

    def _step_fn(self, x, y):
        return self.loss_fn(self.model(x), y)

    def _captured_step(self, x, y):
        """The CapturedStep for batches like ``(x, y)``, made on first use; None for the eager step."""
        if not self.cuda_graph or self.graph_note is not None:
            return None
        if self._captured is None:
            try:
                self._captured = capture_step(self._step_fn, x, y)
            except TorchLeanError as e:
                if self.cuda_graph is True:
                    raise
                self.graph_note = f"{type(e).__name__}: {e}"
                return None
        return self._captured if self._captured.accepts(x, y) else None

    def train_step(self, batch) -> float:
        """One optimizer step on ``batch`` (``(input, target)``); returns the loss."""
        x, y = batch[0], batch[1]
        step = self._captured_step(x, y)
        if step is not None:
            self.optimizer.zero_grad()
            loss = step(x, y)
        else:
            out = self.model(x)
            loss = self.loss_fn(out, y)
            self.optimizer.zero_grad()
            loss.backward()
        if self.grad_clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        return float(loss.item())

    def evaluate(self) -> dict:
        """``eval_fn(model)`` in eval mode under ``no_grad`` (training mode is restored)."""
        if self.eval_fn is None:
            return {}
        was = self.model.training
        self.model.eval()
        try:
            with no_grad():
                res = self.eval_fn(self.model)
        finally:
            self.model.train(was)
        return {k: float(v) for k, v in res.items()}

    def _record_eval(self, bar):
        res = self.evaluate()
        if res:
            self.history["eval"].append({"step": self.step, "epoch": self.epoch, **res})
            bar.write(f"{self.name} step {self.step} epoch {self._shown_epoch()}: "
                      + ", ".join(f"{k} {v:.4f}" for k, v in res.items()))
        if self.checkpoint:
            self.save_checkpoint()
        return res

    def fit(self, stop_at=None) -> dict:
        """Train until :attr:`total_steps` (or until step ``stop_at``); returns :attr:`history`.

        ``stop_at`` ends the call early (a checkpoint is saved if a path was given), as an
        interrupted run would; calling :meth:`fit` again, or on a trainer restored with
        :meth:`load_checkpoint`, continues where it stopped.
        """
        end = self.total_steps if stop_at is None else min(int(stop_at), self.total_steps)
        self.model.train()
        bar = _Progress(self.progress, self.total_steps, self.step, self.log_every, self.name)
        last_eval_step = self.history["eval"][-1]["step"] if self.history["eval"] else -1
        try:
            while self.step < end:
                if self._order is None:
                    self._order = self._epoch_order(self.epoch)
                batch = _to_device(self._batch(self._order, self.pos), self.device)
                t0 = time.perf_counter()
                loss = self.train_step(batch)
                self.train_seconds += time.perf_counter() - t0
                n = _batch_size_of(batch)
                self.samples_seen += n
                self.pos += 1
                self.step += 1
                self.history["step"].append(self.step)
                self.history["loss"].append(loss)
                if not math.isfinite(loss):
                    raise TorchLeanError(f"{self.name}: the loss became {loss} at step {self.step}; "
                                         "try a smaller learning rate")
                bar.update(self.step, loss, self.throughput, self._shown_epoch())
                if self.pos >= self.steps_per_epoch:
                    self.epoch += 1
                    self.pos = 0
                    self._order = None
                if self.step % self.eval_every == 0 or self.step == self.total_steps:
                    self._record_eval(bar)
                    last_eval_step = self.step
            if self.step == end and end < self.total_steps and self.checkpoint and last_eval_step != self.step:
                self.save_checkpoint()
        finally:
            bar.close()
        return self.history

    def _shown_epoch(self) -> int:
        """The epoch the last step belongs to, counted from 1 (progress and evaluation lines agree)."""
        return max(1, -(-self.step // self.steps_per_epoch))

    @property
    def throughput(self) -> float:
        """Training samples per second (time spent in training steps only)."""
        return self.samples_seen / self.train_seconds if self.train_seconds > 0 else 0.0

    def final_metrics(self) -> dict:
        """The last evaluation's results (empty before the first)."""
        if not self.history["eval"]:
            return {}
        return {k: v for k, v in self.history["eval"][-1].items() if k not in ("step", "epoch")}

    # -- checkpoints ---------------------------------------------------------------------------------
    def _uses_global_rng_order(self):
        return bool(getattr(self.loader, "shuffle", False)) and getattr(self.loader, "seed", 0) is None

    def save_checkpoint(self, path=None) -> None:
        """Write model, optimizer and trainer state to ``path`` (default: the trainer's) in one atomic
        commit: one safetensors file whose metadata holds the state, written beside and renamed over
        the previous checkpoint (which stays whole until the rename)."""
        stn = _safetensors()
        path = os.fspath(path or self.checkpoint)
        if not path:
            raise CheckpointError("save_checkpoint: no path given")
        tensors, shapes = {}, {}
        for k, v in self.model.state_dict().items():
            tensors["model/" + k] = _host(v)
        osd = self.optimizer.state_dict()
        ostate = {}
        for idx, st in osd["state"].items():
            entry = {}
            for k, v in st.items():
                if isinstance(v, Tensor) or isinstance(v, np.ndarray):
                    name = f"optim/{idx}/{k}"
                    tensors[name] = _host(v)
                    entry[k] = {"__tensor__": name}
                else:
                    entry[k] = _jsonable(v, f"optimizer state {idx}/{k}")
            ostate[str(idx)] = entry
        if self._order is not None and self._uses_global_rng_order():
            tensors["trainer/order"] = self._order
        for k, a in tensors.items():
            shapes[k] = [str(a.dtype), list(a.shape)]
        state = {
            "format": CHECKPOINT_FORMAT,
            "task": self.name,
            "model": {"class": type(self.model).__name__, "config": _model_config(self.model)},
            "tensors": {"sha256": _tensor_digest(tensors), "entries": shapes},
            "optimizer": {"class": type(self.optimizer).__name__,
                          "param_groups": _jsonable(osd["param_groups"], "optimizer param_groups"),
                          "state": ostate},
            "scheduler": (None if self.scheduler is None else
                          {"class": type(self.scheduler).__name__,
                           "state": _jsonable(self.scheduler.state_dict(), "scheduler state")}),
            "trainer": {"step": self.step, "epoch": self.epoch, "pos": self.pos,
                        "total_steps": self.total_steps, "steps_per_epoch": self.steps_per_epoch,
                        "batch_size": self.loader.batch_size, "loader_seed": getattr(self.loader, "seed", None),
                        "in_epoch": self._order is not None, "rng": _rng_state(),
                        "samples_seen": self.samples_seen, "train_seconds": self.train_seconds,
                        "history": self.history, "hparams": _jsonable(self.hparams, "hparams")},
        }
        text = json.dumps(state, sort_keys=True, separators=(",", ":"), allow_nan=True)
        # The digest covers the state and (through tensors.sha256) every tensor's bytes: a file is
        # used only as one consistent whole.
        meta = {"format": CHECKPOINT_FORMAT, "state": text, "digest": _digest(state)}
        atomic_write(path, stn.save(tensors, metadata=meta))

    def _read_checkpoint(self, path):
        """Read and verify everything; returns ``(state, arrays)`` without touching the model."""
        try:
            state, arrays = _read_file(path)
            _check_schema(state)
            self._check_matches(state, arrays, path)
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:  # a shape the checks missed
            raise CheckpointError(f"checkpoint: {path} is malformed ({type(e).__name__}: {e})") from None
        return state, arrays

    def _check_matches(self, state, arrays, path):
        """The checkpoint fits this run: task, model, optimizer, loader, settings, tensor layout."""
        if state["task"] != self.name:
            raise CheckpointError(f"checkpoint: {path} was written for task {state['task']!r}, "
                                  f"this run is {self.name!r}")
        want = {"class": type(self.model).__name__, "config": _model_config(self.model)}
        if state["model"] != want:
            raise CheckpointError(f"checkpoint: {path} holds model {state['model']['class']} "
                                  f"{state['model']['config']}, this run builds {want['class']} {want['config']}")
        if state["optimizer"]["class"] != type(self.optimizer).__name__:
            raise CheckpointError(f"checkpoint: optimizer {state['optimizer']['class']} in the checkpoint, "
                                  f"{type(self.optimizer).__name__} in this run")
        tr = state["trainer"]
        if tr["batch_size"] != self.loader.batch_size or tr["steps_per_epoch"] != self.steps_per_epoch:
            raise CheckpointError(f"checkpoint: written with batch size {tr['batch_size']} "
                                  f"({tr['steps_per_epoch']} batches per epoch), this run has "
                                  f"{self.loader.batch_size} ({self.steps_per_epoch})")
        if tr["loader_seed"] != getattr(self.loader, "seed", None):
            raise CheckpointError(f"checkpoint: the loader was seeded {tr['loader_seed']}, this run's loader "
                                  f"{getattr(self.loader, 'seed', None)}")
        if tr.get("hparams") != _jsonable(self.hparams, "hparams"):
            raise CheckpointError(f"checkpoint: written with settings {tr.get('hparams')}, this run has "
                                  f"{self.hparams}")
        entries = state["tensors"]["entries"]
        if set(arrays) != set(entries):
            raise CheckpointError(f"checkpoint: {path} holds tensors {sorted(set(arrays) ^ set(entries))[:5]} "
                                  f"that do not match its record")
        for k, a in arrays.items():
            if [str(a.dtype), list(a.shape)] != entries[k]:
                raise CheckpointError(f"checkpoint: tensor {k} is {a.dtype}{list(a.shape)}, "
                                      f"recorded as {entries[k]}")
        msd = self.model.state_dict()
        have = {k[len("model/"):] for k in arrays if k.startswith("model/")}
        if have != set(msd):
            missing, extra = sorted(set(msd) - have), sorted(have - set(msd))
            raise CheckpointError(f"checkpoint: model entries differ (missing {missing[:5]}, unexpected "
                                  f"{extra[:5]})")
        for k, v in msd.items():
            a = arrays["model/" + k]
            if tuple(a.shape) != tuple(v.shape) or a.dtype != v.dtype:
                raise CheckpointError(f"checkpoint: {k} is {a.dtype}{tuple(a.shape)} in the checkpoint, "
                                      f"{v.dtype}{tuple(v.shape)} in the model")
        groups = state["optimizer"]["param_groups"]
        if len(groups) != len(self.optimizer.param_groups):
            raise CheckpointError(f"checkpoint: {len(groups)} optimizer parameter groups, this optimizer has "
                                  f"{len(self.optimizer.param_groups)}")
        params = []
        for gi, (sg, g) in enumerate(zip(groups, self.optimizer.param_groups)):
            if len(sg["params"]) != len(g["params"]):
                raise CheckpointError(f"checkpoint: an optimizer group has {len(sg['params'])} parameters, "
                                      f"this optimizer's has {len(g['params'])}")
            _check_like(sg, {k: v for k, v in g.items() if k != "params"}, f"optimizer.param_groups[{gi}]")
            params.extend(zip(sg["params"], g["params"]))
        by_index = dict(params)
        for idx, entry in state["optimizer"]["state"].items():
            p = by_index.get(int(idx)) if idx.lstrip("-").isdigit() else None
            if p is None:
                raise CheckpointError(f"checkpoint: optimizer state for unknown parameter {idx!r}")
            for k, v in entry.items():
                if isinstance(v, dict) and "__tensor__" in v:
                    a = arrays.get(v["__tensor__"])
                    if a is None:
                        raise CheckpointError(f"checkpoint: optimizer tensor {v['__tensor__']} is missing")
                    if k != "step" and tuple(a.shape) != tuple(p.shape):
                        raise CheckpointError(f"checkpoint: optimizer state {idx}/{k} has shape "
                                              f"{tuple(a.shape)}, its parameter {tuple(p.shape)}")
        if (state["scheduler"] is None) != (self.scheduler is None):
            raise CheckpointError("checkpoint: field scheduler: the checkpoint "
                                  f"{'has none' if state['scheduler'] is None else 'has one'}, this run "
                                  f"{'has none' if self.scheduler is None else 'has one'}")
        if self.scheduler is not None:
            if state["scheduler"]["class"] != type(self.scheduler).__name__:
                raise CheckpointError(f"checkpoint: scheduler {state['scheduler']['class']} in the checkpoint, "
                                      f"{type(self.scheduler).__name__} in this run")
            _check_like(state["scheduler"]["state"], _jsonable(self.scheduler.state_dict(), "scheduler state"),
                        "scheduler.state")
        if tr["in_epoch"] and self._uses_global_rng_order() and "trainer/order" not in arrays:
            raise CheckpointError("checkpoint: the current epoch's batch order is missing")

    def load_checkpoint(self, path=None) -> dict:
        """Restore model, optimizer, scheduler and trainer state from ``path``; returns the trainer state.

        Everything is verified first (see the module docstring); on any mismatch a
        :class:`CheckpointError` is raised and nothing has been changed.
        """
        path = os.fspath(path or self.checkpoint)
        state, arrays = self._read_checkpoint(path)
        self.model.load_state_dict({k[len("model/"):]: a for k, a in arrays.items() if k.startswith("model/")})
        ostate = {}
        for idx, entry in state["optimizer"]["state"].items():
            ostate[int(idx)] = {k: (arrays[v["__tensor__"]] if isinstance(v, dict) and "__tensor__" in v else v)
                                for k, v in entry.items()}
        self.optimizer.load_state_dict({"state": ostate, "param_groups": state["optimizer"]["param_groups"]})
        if self.scheduler is not None and state.get("scheduler"):
            self.scheduler.load_state_dict(state["scheduler"]["state"])
        tr = state["trainer"]
        self.step, self.epoch, self.pos = int(tr["step"]), int(tr["epoch"]), int(tr["pos"])
        self.samples_seen, self.train_seconds = int(tr["samples_seen"]), float(tr["train_seconds"])
        self.history = tr["history"]
        if tr["in_epoch"]:
            self._order = (arrays["trainer/order"] if self._uses_global_rng_order()
                           else self._epoch_order(self.epoch))
        else:
            self._order = None
        _set_rng_state(tr["rng"])
        return tr
