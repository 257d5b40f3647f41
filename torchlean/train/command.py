"""``torchlean train MODEL``: train one of the example tasks, print a summary, plot the curves.

:func:`main` is what :mod:`torchlean.cli` calls; :func:`plot_history` draws a
trainer's :attr:`~torchlean.train.trainer.Trainer.history` to a PNG (needs matplotlib).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

from ..errors import BackendUnavailableError, TorchLeanError
from .tasks import TASKS, build_task

__all__ = ["main", "plot_history"]


_METRIC_LABELS = {"accuracy": "test accuracy", "rel_l2": "test relative L2 error",
                  "val_loss": "validation loss (nats / char)"}


def plot_history(history, path, title="", metric=None, baseline=None) -> None:
    """Loss (per step, with a moving average) and the evaluation metric, side by side, to a PNG."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise BackendUnavailableError("--plot needs matplotlib: pip install matplotlib") from e
    steps, loss = np.asarray(history["step"]), np.asarray(history["loss"], dtype=np.float64)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3), dpi=90)
    ax = axes[0]
    ax.plot(steps, loss, color="0.75", lw=0.8, label="batch")
    if len(loss) >= 10:
        w = max(2, len(loss) // 25)
        ma = np.convolve(loss, np.ones(w) / w, mode="valid")
        ax.plot(steps[w - 1:], ma, color="C0", lw=1.5, label=f"mean of {w}")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_yscale("log" if np.all(loss > 0) else "linear")
    ax.legend(frameon=False, fontsize=8)
    ax = axes[1]
    ev = history["eval"]
    if ev and metric:
        ax.plot([e["step"] for e in ev], [e[metric] for e in ev], "o-", color="C1", ms=3, label=metric)
        if baseline is not None:
            ax.axhline(baseline, color="0.4", ls="--", lw=1, label=f"unigram {baseline:.2f}")
        ax.legend(frameon=False, fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel(_METRIC_LABELS.get(metric, metric or ""))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def _format_metric(metric, value):
    return f"{100 * value:.2f}%" if metric in ("accuracy", "rel_l2") else f"{value:.4f}"


def _check_writable(path):
    """Fail before training, not at the first save, when the checkpoint's folder cannot be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise TorchLeanError(f"train: cannot write the checkpoint {path!r}: {folder!r} is not a folder")
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise TorchLeanError(f"train: cannot write the checkpoint {path!r}: {e.strerror or e}") from None


def main(model, *, device="cpu", steps=None, batch_size=None, lr=None, checkpoint=None, plot=None,
         epochs=None, seed=0, resume=False, progress="auto", out=None, cuda_graph="auto") -> int:
    """``torchlean train MODEL``: train one of :data:`TASKS`, print a summary; returns 0.

    ``resume=True`` continues from ``checkpoint`` (the run's settings must match the
    checkpoint's; ``steps`` / ``epochs`` may extend the run).
    """
    out = out or sys.stdout
    if steps is not None and epochs is not None:
        raise TorchLeanError("train: give --steps or --epochs, not both")
    if resume and not checkpoint:
        raise TorchLeanError("train: --resume needs --checkpoint PATH")
    if plot:  # fail before training, not after
        try:
            import matplotlib  # noqa: F401
        except ImportError as e:
            raise BackendUnavailableError("--plot needs matplotlib: pip install matplotlib") from e
    if checkpoint and not resume:
        _check_writable(checkpoint)
    t0 = time.perf_counter()
    trainer = build_task(model, device=device, steps=steps, epochs=epochs, batch_size=batch_size, lr=lr,
                         seed=seed, checkpoint=checkpoint, progress=progress, cuda_graph=cuda_graph)
    spec = TASKS[model]
    if resume:
        tr = trainer.load_checkpoint(checkpoint)
        if steps is None and epochs is None:
            trainer.total_steps = int(tr["total_steps"])
        if trainer.total_steps < trainer.step:
            raise TorchLeanError(f"train: the checkpoint is at step {trainer.step}, past the requested "
                                 f"{trainer.total_steps} steps")
        print(f"{model}: resumed at step {trainer.step} (epoch {trainer.epoch}) of {trainer.total_steps}",
              file=out)
    nparams = sum(int(np.prod(p.shape)) for p in trainer.model.parameters())
    print(f"{model}: {type(trainer.model).__name__} ({nparams:,} parameters) on {spec.data}, {device}, "
          f"{trainer.total_steps} steps of batch {trainer.loader.batch_size}", file=out)
    trainer.fit()
    res = trainer.final_metrics()
    wall = time.perf_counter() - t0
    m = spec.metric
    line = f"{model}: {m} {_format_metric(m, res[m])}" if m in res else f"{model}: no evaluation"
    if getattr(trainer, "baseline", None) is not None:
        line += f" (unigram baseline {trainer.baseline:.4f})"
    line += (f", goal {spec.goal}; {trainer.step} steps in {wall:.1f} s, "
             f"{trainer.throughput:,.0f} samples/s")
    if trainer.cuda_graph:
        line += " (eager steps: " + trainer.graph_note + ")" if trainer.graph_note else " (captured CUDA graph steps)"
    if plot:
        plot_history(trainer.history, plot, title=f"{model} on {spec.data}", metric=m,
                     baseline=getattr(trainer, "baseline", None))
        line += f"; plot {plot}"
    if checkpoint:
        line += f"; checkpoint {checkpoint}"
    print(line, file=out)
    return 0
