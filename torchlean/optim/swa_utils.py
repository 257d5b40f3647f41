"""``tl.optim.swa_utils``: stochastic weight averaging and EMA of a model's weights (PyTorch's
``torch.optim.swa_utils``): :class:`AveragedModel`, :class:`SWALR`, :func:`update_bn` and the
averaging functions ``get_swa_avg_fn``, ``get_ema_avg_fn`` (one tensor at a time) and
``get_swa_multi_avg_fn``, ``get_ema_multi_avg_fn`` (lists of tensors, updated in place).

    >>> import torchlean as tl
    >>> from torchlean.optim.swa_utils import AveragedModel
    >>> net = tl.nn.Linear(1, 1)
    >>> swa = AveragedModel(net)
    >>> with tl.no_grad():
    ...     _ = net.weight.fill_(1.0)
    >>> swa.update_parameters(net)
    >>> with tl.no_grad():
    ...     _ = net.weight.fill_(3.0)
    >>> swa.update_parameters(net)
    >>> swa.module.weight.item(), int(swa.n_averaged)
    (2.0, 2)
"""

from __future__ import annotations

import itertools
import math
from copy import deepcopy

import numpy as np

from ..errors import DomainError, TorchLeanError
from ..nn.layers import _BatchNorm
from ..nn.module import Module
from ..tensor import Tensor, no_grad
from .lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise DomainError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _n(num_averaged):
    return float(num_averaged.item()) if isinstance(num_averaged, Tensor) else float(num_averaged)


def get_ema_multi_avg_fn(decay=0.999):
    """``ema_update(ema_params, current_params, num_averaged)``: each ema param lerps toward the
    current one by ``1 - decay``, in place."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        with no_grad():
            if ema_param_list[0].is_floating_point():
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """``swa_update(averaged_params, current_params, num_averaged)``: the running mean, in place."""
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with no_grad():
            n = _n(num_averaged)
            if averaged_param_list[0].is_floating_point():
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.lerp_(p_model, 1 / (n + 1))
            else:
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.add_((p_model - p_avg) * (1.0 / (n + 1)))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """``ema_update(ema_param, current_param, num_averaged)`` -> decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """``swa_update(averaged_param, current_param, num_averaged)`` -> the running mean."""
    def swa_update(averaged_param, current_param, num_averaged):
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` whose parameters (and buffers with ``use_buffers=True``) are the
    running average of the model's, updated by :meth:`update_parameters`: the equal-weight mean
    (SWA) by default, or ``avg_fn(averaged, current, n_averaged)`` / ``multi_avg_fn(averaged_list,
    current_list, n_averaged)`` (e.g. :func:`get_ema_multi_avg_fn` for an EMA). ``n_averaged`` is an
    int64 buffer. Without ``use_buffers`` the buffers are copied from the model at each update.
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise TorchLeanError("AveragedModel: only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        n = Tensor(np.zeros((), dtype=np.int64))
        self.register_buffer("n_averaged", n.to(device) if device is not None else n)
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model) -> None:
        """Fold ``model``'s current parameters into the average (the first call copies them)."""
        with no_grad():
            if self.use_buffers:
                self_param = itertools.chain(self.module.parameters(), self.module.buffers())
                model_param = itertools.chain(model.parameters(), model.buffers())
            else:
                self_param, model_param = self.parameters(), model.parameters()
            mine, theirs = [], []
            copy_param = int(self.n_averaged.item()) == 0
            for p_averaged, p_model in zip(self_param, model_param):
                p_model_ = p_model.detach().to(p_averaged.device)
                mine.append(p_averaged.detach())
                theirs.append(p_model_)
                if copy_param:
                    p_averaged.detach().copy_(p_model_)
            if int(self.n_averaged.item()) > 0:
                if self.multi_avg_fn is not None or self.avg_fn is None:
                    groups: dict = {}     # by device and dtype, as torch groups them
                    for p_averaged, p_model in zip(mine, theirs):
                        a, m = groups.setdefault((str(p_averaged.device), str(p_averaged.dtype)), ([], []))
                        a.append(p_averaged)
                        m.append(p_model)
                    for a, m in groups.values():
                        if self.multi_avg_fn is not None:
                            self.multi_avg_fn(a, m, self.n_averaged)
                        else:
                            avg = get_swa_avg_fn()
                            for p_averaged, p_model in zip(a, m):
                                p_averaged.copy_(avg(p_averaged, p_model, self.n_averaged))
                else:
                    for p_averaged, p_model in zip(mine, theirs):
                        p_averaged.copy_(self.avg_fn(p_averaged, p_model, self.n_averaged))
            if not self.use_buffers:
                for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                    b_swa.detach().copy_(b_model.detach().to(b_swa.device))
            self.n_averaged.copy_(self.n_averaged + 1)


def update_bn(loader, model, device=None) -> None:
    """Recompute every batch-norm layer's running statistics with one pass over ``loader`` (the
    cumulative average over its batches; a batch that is a list or tuple gives its first item).

        >>> import torchlean as tl
        >>> net = tl.nn.BatchNorm1d(1)
        >>> update_bn([tl.tensor([[1.0], [3.0]])], net)
        >>> net.running_mean.item(), net.training
        (2.0, True)
    """
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            if device is not None:
                input = input.to(device)
            model(input)
    for bn_module, momentum in momenta.items():
        bn_module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr to ``swa_lr`` over ``anneal_epochs`` steps (``"cos"`` or ``"linear"``),
    then holds it (PyTorch's schedule, state dict included).

        >>> import torchlean as tl
        >>> opt = tl.optim.SGD([tl.nn.Parameter(tl.ones(1))], lr=1.0)
        >>> sched = SWALR(opt, swa_lr=0.5, anneal_epochs=2, anneal_strategy="linear")
        >>> lrs = []
        >>> for _ in range(3):
        ...     opt.step(); sched.step(); lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.75, 0.5, 0.5]
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise DomainError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise DomainError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        self._warn_get_lr()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def state_dict(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
