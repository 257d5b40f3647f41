"""Learning-rate schedulers (PyTorch's ``StepLR`` and ``CosineAnnealingLR``).

Both use PyTorch's recursive ("chainable") updates, so their sequences match
PyTorch's to rounding; call ``scheduler.step()`` after ``optimizer.step()``.

    >>> import torchlean as tl
    >>> p = tl.nn.Parameter(tl.zeros(1))
    >>> opt = tl.optim.SGD([p], lr=1.0)
    >>> sched = StepLR(opt, step_size=2, gamma=0.5)
    >>> lrs = []
    >>> for _ in range(4):
    ...     opt.step(); sched.step(); lrs.append(sched.get_last_lr()[0])
    >>> lrs
    [1.0, 0.5, 0.5, 0.25]
"""

from __future__ import annotations

import math

from ..errors import DomainError, TorchLeanError
from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR"]


class LRScheduler:
    """Base class: sets every group's ``lr`` from :meth:`get_lr` at each :meth:`step`."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TorchLeanError(f"{type(self).__name__}: {type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        else:
            for i, g in enumerate(optimizer.param_groups):
                if "initial_lr" not in g:
                    raise TorchLeanError(f"{type(self).__name__}: param 'initial_lr' is not specified in "
                                         f"param_groups[{i}] when resuming (last_epoch={last_epoch})")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self) -> list:
        raise TorchLeanError(f"{type(self).__name__} does not define get_lr")

    def get_last_lr(self) -> list:
        """The learning rates set by the last :meth:`step`, one per group."""
        return list(self._last_lr)

    def step(self) -> None:
        self._step_count += 1
        self.last_epoch += 1
        lrs = self.get_lr()
        for g, lr in zip(self.optimizer.param_groups, lrs):
            g["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Everything but the optimizer (plain numbers and lists)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        if not isinstance(step_size, int) or step_size <= 0:
            raise DomainError(f"StepLR: step_size must be a positive int, got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]


class CosineAnnealingLR(LRScheduler):
    """eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2, by PyTorch's recursion."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):  # noqa: N803
        if not isinstance(T_max, int) or T_max <= 0:
            raise DomainError(f"CosineAnnealingLR: T_max must be a positive int, got {T_max!r}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        t, T, lo = self.last_epoch, self.T_max, self.eta_min
        if t == 0:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and t > 0:
            return [lo + (base - lo) * (1 + math.cos(t * math.pi / T)) / 2 for base in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                    for base, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T)) * (g["lr"] - lo) + lo
                for g in groups]
