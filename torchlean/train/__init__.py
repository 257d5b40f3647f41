"""Training: a small :class:`Trainer`, the example tasks, and the ``torchlean train MODEL`` command.

- :mod:`torchlean.train.trainer`: :class:`Trainer` (the loop, evaluation, progress, CUDA-graph
  steps, summaries) and its checkpoints (:class:`CheckpointError`);
- :mod:`torchlean.train.tasks`: the example catalogue :data:`TASKS` (data, models, metrics,
  defaults), its builders and :func:`build_task`, which returns a ready :class:`Trainer`;
- :mod:`torchlean.train.command`: :func:`main`, the ``torchlean train`` command, and
  :func:`plot_history`.
"""

from .command import main, plot_history
from .tasks import TASKS, TaskSpec, build_task, burgers_task, digits_task, text_task
from .trainer import CHECKPOINT_FORMAT, CheckpointError, Trainer

__all__ = ["Trainer", "CheckpointError", "TASKS", "main", "build_task", "digits_task",
           "burgers_task", "text_task", "plot_history", "TaskSpec", "CHECKPOINT_FORMAT"]
