"""The example tasks of ``torchlean train MODEL``: :data:`TASKS` and :func:`build_task`.

Each :class:`TaskSpec` names its data, its main metric and goal, a builder
(``build(seed, batch_size, device)``: the model, the loss, the training loader and the
evaluation) and the defaults (batch size, learning rate, run length, optimizer) sized
for two CPU cores. The data are loaded by the builder each time it is called (the
generated sets come from the on-disk cache of :mod:`torchlean.data`); the
:class:`~torchlean.train.trainer.Trainer` that :func:`build_task` returns holds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import nn, optim
from ..data import (CharDataset, CharTokenizer, DataLoader, Subset, TensorDataset, as_images, burgers_dataset,
                    load_digits, text_corpus, train_val_split, unigram_baseline)
from ..errors import TorchLeanError
from ..models import CNN, GPT, MLP, FNO1d, MambaLM, ResNet, ViT
from ..ops import manual_seed
from .trainer import Trainer

__all__ = ["TaskSpec", "TASKS", "build_task", "digits_task", "burgers_task", "text_task"]


@dataclass
class TaskSpec:
    """One ``torchlean train MODEL`` example: data, model, and defaults sized for two CPU cores."""

    name: str
    data: str
    metric: str
    goal: str
    build: object  # build(seed, batch_size, device) -> dict(model, loss_fn, loader, eval_fn, ...)
    batch_size: int
    lr: float
    epochs: int | None = None
    steps: int | None = None
    optimizer: str = "adam"
    weight_decay: float = 0.0
    grad_clip: float | None = None
    extra: dict = field(default_factory=dict)


# ---- digits: MLP, CNN, ResNet, ViT --------------------------------------------------------------

def _digits(seed):
    return load_digits("train", seed=seed), load_digits("test", seed=seed)


def _accuracy_eval(xt, yt, batch=512):
    yt_np = yt.numpy()

    def eval_fn(model):
        correct, loss_sum = 0, 0.0
        for i in range(0, xt.shape[0], batch):
            logits = model(xt[i:i + batch])
            loss_sum += float(nn.F.cross_entropy(logits, yt[i:i + batch], reduction="sum").item())
            correct += int((logits.numpy().argmax(-1) == yt_np[i:i + batch]).sum())
        n = xt.shape[0]
        return {"accuracy": correct / n, "test_loss": loss_sum / n}
    return eval_fn


def digits_task(make_model, images):
    """Builder of a digits example: ``make_model()``, cross-entropy, test accuracy."""
    def build(seed, batch_size, device):
        (x, y), (xt, yt) = _digits(0)
        if images:
            x, xt = as_images(x), as_images(xt)
        x, y, xt, yt = (t.to(device=device) for t in (x, y, xt, yt))
        loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True, seed=seed)
        return {"model": make_model(), "loss_fn": nn.F.cross_entropy, "loader": loader,
                "eval_fn": _accuracy_eval(xt, yt)}
    return build


# ---- Burgers: FNO1d -----------------------------------------------------------------------------

def _burgers(n_train, n_test, grid):
    u0, uT = burgers_dataset(n_train + n_test, grid=grid, seed=0)
    return u0[:n_train], uT[:n_train], u0[n_train:], uT[n_train:]


def _rel_l2_loss(pred, target):
    """Mean over samples of ||pred - target|| / ||target|| (the FNO paper's training loss)."""
    d = pred - target
    num = (d * d).sum(dim=-1).sqrt()
    den = (target * target).sum(dim=-1).sqrt()
    return (num / den).mean()


def burgers_task(n_train=800, n_test=200, grid=64, **model_kw):
    """Builder of the FNO1d example: Burgers pairs, relative-L2 loss and metric."""
    def build(seed, batch_size, device):
        u0, uT, v0, vT = (t.to(device=device) for t in _burgers(n_train, n_test, grid))
        loader = DataLoader(TensorDataset(u0, uT), batch_size=batch_size, shuffle=True, seed=seed)
        vt_np = vT.numpy().astype(np.float64)

        def eval_fn(model):
            pred = np.concatenate([model(v0[i:i + 100]).numpy() for i in range(0, v0.shape[0], 100)])
            err = np.linalg.norm(pred - vt_np, axis=-1) / np.linalg.norm(vt_np, axis=-1)
            return {"rel_l2": float(err.mean())}
        model = FNO1d(**{"modes": 16, "width": 32, "n_layers": 4, **model_kw})
        return {"model": model, "loss_fn": _rel_l2_loss, "loader": loader, "eval_fn": eval_fn}
    return build


# ---- text: GPT, Mamba ---------------------------------------------------------------------------

def _text(max_chars):
    text, vocab = text_corpus(max_chars=max_chars, seed=0)
    tok = CharTokenizer(vocab)
    tr, va = train_val_split(tok.encode(text), 0.1)
    return tok, tr, va, unigram_baseline(tr, va, tok.vocab_size)


def _lm_loss(logits, target):
    return nn.F.cross_entropy(logits.reshape((-1, logits.shape[-1])), target.reshape((-1,)))


def text_task(kind, block=64, max_chars=400_000, val_windows=96, **model_kw):
    """Builder of the GPT / Mamba examples: next-character prediction on the stdlib corpus."""
    def build(seed, batch_size, device):
        tok, tr, va, base = _text(max_chars)
        ds = CharDataset(tr, block)
        # Non-overlapping windows make an epoch one pass over the training text.
        train = Subset(ds, np.arange(0, len(ds), block))
        loader = DataLoader(train, batch_size=batch_size, shuffle=True, drop_last=True, seed=seed,
                            device=device)
        vds = CharDataset(va, block)
        vidx = np.arange(0, len(vds), block)[:val_windows]
        vx, vy = vds.batch(vidx, device)

        def eval_fn(model):
            total = 0.0
            for i in range(0, vx.shape[0], 32):
                total += float(_lm_loss(model(vx[i:i + 32]), vy[i:i + 32]).item()) * vx[i:i + 32].shape[0]
            return {"val_loss": total / vx.shape[0], "unigram": base}
        if kind == "gpt":
            model = GPT(tok.vocab_size, block_size=block, **{"n_layer": 2, "n_head": 4, "n_embd": 64, **model_kw})
        else:
            model = MambaLM(tok.vocab_size, **{"d_model": 64, "n_layer": 2, "d_state": 8, **model_kw})
        return {"model": model, "loss_fn": _lm_loss, "loader": loader, "eval_fn": eval_fn,
                "baseline": base}
    return build


# ---- the catalogue ------------------------------------------------------------------------------

def _mlp():
    return MLP(64, [128, 64], 10)


TASKS = {
    "mlp": TaskSpec("mlp", "digits (8x8)", "accuracy", ">= 95%", digits_task(_mlp, False), 64, 1e-3, epochs=20),
    "cnn": TaskSpec("cnn", "digits (8x8)", "accuracy", ">= 97%", digits_task(CNN, True), 64, 2e-3, epochs=20),
    "resnet": TaskSpec("resnet", "digits (8x8)", "accuracy", ">= 97%", digits_task(ResNet, True), 64, 2e-3,
                       epochs=6),
    "vit": TaskSpec("vit", "digits (8x8)", "accuracy", ">= 95%", digits_task(ViT, True), 64, 1e-3, epochs=20,
                    optimizer="adamw", weight_decay=0.01),
    "fno1d": TaskSpec("fno1d", "Burgers (nu=0.01, grid 64)", "rel_l2", "<= 5%", burgers_task(), 20, 2e-3,
                      epochs=30),
    "mamba": TaskSpec("mamba", "stdlib text (chars)", "val_loss", "< unigram", text_task("mamba"), 32, 3e-3,
                      steps=200, grad_clip=1.0),
    "gpt": TaskSpec("gpt", "stdlib text (chars)", "val_loss", "< unigram", text_task("gpt"), 32, 3e-3,
                    steps=300, grad_clip=1.0),
}


def build_task(name, *, device="cpu", steps=None, epochs=None, batch_size=None, lr=None, seed=0,
               checkpoint=None, progress="auto", build=None, cuda_graph="auto"):
    """A ready :class:`Trainer` for one of :data:`TASKS` (the model is initialised from ``seed``).

    ``build`` replaces the task's builder (e.g. ``text_task("gpt", n_embd=32)`` for a smaller model).
    """
    if name not in TASKS:
        raise TorchLeanError(f"train: unknown model {name!r}; choose one of {', '.join(TASKS)}")
    spec = TASKS[name]
    bs = int(batch_size or spec.batch_size)
    lr = float(lr if lr is not None else spec.lr)
    manual_seed(seed)
    parts = (build or spec.build)(seed, bs, device)
    model = parts["model"].to(device=device)
    params = list(model.parameters())
    if spec.optimizer == "adamw":
        opt = optim.AdamW(params, lr=lr, weight_decay=spec.weight_decay)
    else:
        opt = optim.Adam(params, lr=lr, weight_decay=spec.weight_decay)
    if steps is None and epochs is None:
        steps, epochs = spec.steps, spec.epochs
    eval_every = None
    if spec.steps is not None:
        eval_every = max(1, min(len(parts["loader"]), 100))
    hp = {"batch_size": bs, "lr": lr, "seed": int(seed)}
    trainer = Trainer(model, opt, parts["loss_fn"], parts["loader"], parts["eval_fn"], device=device,
                      checkpoint=checkpoint, steps=steps, epochs=epochs, grad_clip=spec.grad_clip,
                      progress=progress, name=name, metric=spec.metric, eval_every=eval_every, hparams=hp,
                      cuda_graph=cuda_graph)
    trainer.baseline = parts.get("baseline")
    return trainer
