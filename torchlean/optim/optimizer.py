"""The ``Optimizer`` base: parameter groups, per-parameter state, state dicts in PyTorch's layout,
and PyTorch's optimizers (``SGD Adam AdamW NAdam RAdam Adamax Adagrad Adadelta RMSprop Rprop LBFGS``).

Each optimizer's update works on the parameter's device: SGD, Adam/AdamW, Adagrad, RMSprop and
Adadelta are one fused in-place kernel (``get_kernels(p.device).sgd_step`` and friends, see
``torchlean/kernels/api.py``); the others are made of the contract's elementwise kernels, in
PyTorch's order of operations. Gradients are read, never written (their buffers may be shared).

PyTorch's flags that only select its implementation (``foreach``, ``fused``, ``capturable``,
``differentiable``) are accepted and kept in ``param_groups`` for state-dict compatibility; they
have no effect here (every step is the same single implementation, never differentiable).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections import OrderedDict, defaultdict
from itertools import chain

import numpy as np

from ..errors import DomainError, TorchLeanError
from ..kernels import get_kernels
from ..nn.module import RemovableHandle
from ..tensor import Tensor, enable_grad, no_grad

# Keys of a state entry that PyTorch keeps as 0-d float32 tensors and torchlean as Python numbers.
_SCALAR_STATE = ("step", "mu_product", "eta", "mu")

# Hooks run around every optimizer's ``step`` (torch.optim.optimizer's globals).
_global_optimizer_pre_hooks: OrderedDict = OrderedDict()
_global_optimizer_post_hooks: OrderedDict = OrderedDict()


def register_optimizer_step_pre_hook(hook) -> RemovableHandle:
    """Run ``hook(optimizer, args, kwargs)`` before every optimizer's ``step``; a returned
    ``(args, kwargs)`` pair replaces the step's arguments. Returns a handle whose ``remove()`` undoes it.

        >>> import torchlean as tl
        >>> h = tl.optim.optimizer.register_optimizer_step_pre_hook(lambda opt, a, k: None)
        >>> h.remove()
    """
    handle = RemovableHandle(_global_optimizer_pre_hooks)
    _global_optimizer_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook) -> RemovableHandle:
    """Run ``hook(optimizer, args, kwargs)`` after every optimizer's ``step``; returns a removable handle."""
    handle = RemovableHandle(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[handle.id] = hook
    return handle


def _hooked_step(func):
    """``func`` (a ``step``) with the global and per-optimizer step hooks around it, torch's order:
    global then own pre-hooks, the step, own then global post-hooks."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        self = args[0]
        for pre_hook in chain(_global_optimizer_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if isinstance(result, tuple) and len(result) == 2:
                    args, kwargs = result
                else:
                    raise TorchLeanError(f"{func} must return None or a tuple of (new_args, new_kwargs), "
                                         f"but got {result}.")
        out = func(*args, **kwargs)
        for post_hook in chain(self._optimizer_step_post_hooks.values(), _global_optimizer_post_hooks.values()):
            post_hook(self, args, kwargs)
        return out

    wrapper.hooked = True
    return wrapper


def _check(name, value, lo=0.0, strict=False, hi=None):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        ok = value > lo if strict else value >= lo
        if hi is not None:
            ok = ok and value < hi
    if not ok:
        rng = f"({lo}, {hi})" if hi is not None else (f"> {lo}" if strict else f">= {lo}")
        raise DomainError(f"invalid {name}: {value!r} (expected {rng})")


def _is_array(v):
    return hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, (np.generic, Tensor))


def _f32(x):
    """x rounded to float32, as PyTorch's float32 scalar state tensors hold it."""
    return float(np.float32(x))


class Optimizer:
    """Base class: ``param_groups`` (dicts of params and options), ``state`` (per param).

    Subclasses define ``_update(p, g, state, group)``, which receives the parameter,
    its gradient array (already negated under ``maximize``) and its state dict.

        >>> import torchlean as tl
        >>> w = tl.nn.Parameter(tl.ones(2))
        >>> opt = tl.optim.SGD([w], lr=0.1)
        >>> opt.add_param_group({"params": [tl.nn.Parameter(tl.ones(1))], "lr": 0.5})
        >>> [g["lr"] for g in opt.param_groups]
        [0.1, 0.5]
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = defaultdict(dict)   # as PyTorch's: an untouched parameter reads as {}
        self.param_groups: list = []
        self._optimizer_step_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._patch_step_function()
        if isinstance(params, Tensor):
            raise TorchLeanError(f"{type(self).__name__}: params must be an iterable of Tensors or dicts, "
                                 "got a single Tensor")
        groups = list(params)
        if not groups:
            raise TorchLeanError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own options (unset ones take the defaults)."""
        group = param_group
        if not isinstance(group, dict):
            raise TorchLeanError(f"add_param_group: expected a dict, got {type(group).__name__}")
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        if params and isinstance(params[0], tuple):   # named parameters, as PyTorch accepts them
            group = dict(group, param_names=[n for n, _ in params])
            params = [p for _, p in params]
        for p in params:
            if not isinstance(p, Tensor):
                raise TorchLeanError(f"{type(self).__name__}: can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise TorchLeanError(f"{type(self).__name__}: can only optimize leaf tensors")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params) or any(id(p) in seen for p in params):
            raise TorchLeanError(f"{type(self).__name__}: some parameters appear in more than one group")
        g = dict(group)
        g["params"] = params
        for k, v in self.defaults.items():
            g.setdefault(k, v)
        self.param_groups.append(g)

    def _patch_step_function(self) -> None:
        """Wrap this class's ``step`` (once) with the step hooks, as torch does at construction."""
        cls = type(self)
        if not getattr(cls.step, "hooked", False):
            cls.step = _hooked_step(cls.step)

    # -- hooks (torch's signatures; each returns a handle whose ``remove()`` unregisters it) ------
    @staticmethod
    def _register(table, hook, prepend=False):
        handle = RemovableHandle(table)
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_step_pre_hook(self, hook) -> RemovableHandle:
        """``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)`` before each ``step``.

            >>> import torchlean as tl
            >>> opt = tl.optim.SGD([tl.nn.Parameter(tl.ones(1))], lr=0.1)
            >>> seen = []
            >>> h = opt.register_step_pre_hook(lambda o, a, k: seen.append(len(a)))
            >>> opt.step(); h.remove(); opt.step(); seen
            [1]
        """
        return self._register(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook) -> RemovableHandle:
        """``hook(optimizer, args, kwargs) -> None`` after each ``step``."""
        return self._register(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer) -> None`` before :meth:`state_dict` builds its result."""
        return self._register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict) -> state_dict or None`` (a returned dict replaces it)."""
        return self._register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict) -> state_dict or None`` before :meth:`load_state_dict` reads it."""
        return self._register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer) -> None`` after :meth:`load_state_dict`."""
        return self._register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every parameter (None by default, else fresh zeros)."""
        for g in self.param_groups:
            for p in g["params"]:
                if p._grad is None:
                    continue
                p._grad = None if set_to_none else Tensor(get_kernels(p.device).zeros(p.shape, p.dtype))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()`` if given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        batched = self._update_many is not None
        for group in self.param_groups:
            by_device: dict = {}
            for p in group["params"]:
                if p._grad is None:
                    continue
                g = p._grad._value
                if g.dtype != p.dtype:
                    g = get_kernels(p.device).astype(g, p.dtype)
                st = self.state.get(p)
                if st is None:
                    st = self.state[p] = {}
                if batched:
                    # Updated together after the loop, a multi-tensor step per device (maximize included).
                    by_device.setdefault(p.device, []).append((p, g, st))
                    continue
                if group.get("maximize", False):
                    g = get_kernels(p.device).neg(g)
                self._update(p, g, st, group)
            for items in by_device.values():
                self._update_many(items, group)
        return loss

    def _update(self, p, g, state, group):
        raise TorchLeanError(f"{type(self).__name__} does not define an update")

    # Subclasses whose device kernels update many parameters per launch define
    # ``_update_many(items, group)`` over ``(param, grad, state)`` triples of device parameters.
    _update_many = None
    # True where state arrays are flat vectors over all parameters (LBFGS), not one per parameter.
    _flat_state = False

    # -- state dicts -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {name: value}}, "param_groups": [...]}``, PyTorch's layout.

        Parameters are numbered in group order; state arrays are returned as Tensors sharing
        the optimizer's buffers, and ``step`` (``mu_product``) as 0-d float32 Tensors, as in PyTorch.
        """
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        index, groups, n = {}, [], 0
        for g in self.param_groups:
            ids = []
            for p in g["params"]:
                if id(p) not in index:
                    index[id(p)] = n
                    n += 1
                ids.append(index[id(p)])
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = ids
            groups.append(packed)
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                st = self.state.get(p)
                if st:
                    state[index[id(p)]] = {k: self._save_value(k, v, p) for k, v in st.items()}
        out = {"state": state, "param_groups": groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, out)
            if result is not None:
                out = result
        return out

    @classmethod
    def _save_value(cls, key, v, p):
        if key in _SCALAR_STATE and isinstance(v, numbers.Real):  # on the CPU, as torch keeps ``step``
            return Tensor(np.array(v, dtype=np.float32))
        if _is_array(v):
            return Tensor(v)
        if isinstance(v, np.generic) and v.dtype.kind == "f":   # LBFGS's scalars: 0-d tensors, as PyTorch's
            return Tensor(get_kernels(p.device).from_host(np.array(v), v.dtype))
        if isinstance(v, list):
            return [cls._save_value(None, x, p) for x in v]
        return v

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore options and state saved by :meth:`state_dict`, torchlean's or PyTorch's (copies,
        cast to each parameter's dtype and device; torch tensors are read without importing torch)."""
        if isinstance(state_dict, dict):
            state_dict = state_dict.copy()   # shallow, as torch's: a pre-hook may edit it
            for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
                result = pre_hook(self, state_dict)
                if result is not None:
                    state_dict = result
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise TorchLeanError("load_state_dict: expected a dict with 'state' and 'param_groups'")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise TorchLeanError(f"load_state_dict: the state dict has {len(saved)} parameter groups, "
                                 f"this optimizer has {len(self.param_groups)}")
        for i, (sg, g) in enumerate(zip(saved, self.param_groups)):
            if len(sg["params"]) != len(g["params"]):
                raise TorchLeanError(f"load_state_dict: group {i} has {len(sg['params'])} parameters in the "
                                     f"state dict and {len(g['params'])} in this optimizer")
        by_index = {}
        for sg, g in zip(saved, self.param_groups):
            for idx, p in zip(sg["params"], g["params"]):
                by_index[int(idx)] = p
        raw = {int(k): v for k, v in state_dict["state"].items()}
        unknown = sorted(set(raw) - set(by_index))
        if unknown:
            raise TorchLeanError(f"load_state_dict: state for unknown parameter indices {unknown}")
        new_state = {}
        for idx, st in raw.items():
            p = by_index[idx]
            new_state[p] = {k: self._load_value(k, v, p) for k, v in st.items()}
        self.state = defaultdict(dict, new_state)
        for sg, g in zip(saved, self.param_groups):
            for k, v in sg.items():
                if k != "params":
                    g[k] = tuple(v) if isinstance(v, list) and isinstance(self.defaults.get(k), tuple) else v
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)

    def _load_value(self, key, v, p):
        if isinstance(v, (list, tuple)):
            return [self._load_value(None, x, p) for x in v]
        if isinstance(v, Tensor):
            v = v.numpy()
        elif hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor, without importing torch
            v = v.detach().cpu().numpy()
        if isinstance(v, np.ndarray):
            if v.ndim == 0 and self._flat_state and key not in _SCALAR_STATE and v.dtype.kind == "f":
                return np.asarray(v, dtype=p._value.dtype)[()]   # LBFGS's scalars keep the parameters' dtype
            if v.ndim == 0 or (key in _SCALAR_STATE and v.size == 1):  # (1,) where a file format has no 0-d
                x = v.reshape(()).item()
                return float(x) if v.dtype.kind == "f" else int(x)
            if not self._flat_state and v.shape != p.shape:
                raise TorchLeanError(f"load_state_dict: state {key!r} has shape {v.shape}, parameter has {p.shape}")
            # a copy: the state dict's Tensors may share the buffers of the optimizer that made it
            return get_kernels(p.device).from_host(np.array(v, dtype=p.dtype, order="C"), p.dtype)
        if isinstance(v, np.generic):
            return v.item()
        return v

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines) + "\n)"


def _zeros_like(p):
    return get_kernels(p.device).zeros(p.shape, p.dtype)


def _lerp_(K, m, g, w):
    """m += w * (g - m) in place: PyTorch's ``lerp_`` (weight < 0.5 branch; both agree to rounding)."""
    K.assign(m, K.add(m, K.scale(K.sub(g, m), w)))


def _sq_avg_(K, v, g, beta):
    """v = beta * v + (1 - beta) * g * g in place."""
    K.assign(v, K.add(K.scale(v, beta), K.scale(K.mul(g, g), 1 - beta)))


def _weight_decay(K, p, g, group, decoupled=False):
    wd = group["weight_decay"]
    if wd:
        if decoupled:
            K.assign(p._value, K.scale(p._value, 1 - group["lr"] * wd))
        else:
            g = K.add(g, K.scale(p._value, wd))
    return g


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov, weight decay.

    PyTorch's rule: d = g + wd * p; buf = d (first step) else momentum * buf + (1 - dampening) * d;
    d = d + momentum * buf (Nesterov) or buf; p -= lr * d. ``foreach``, ``differentiable`` and
    ``fused`` only select PyTorch's implementation: accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> opt = SGD([p], lr=0.1)
        >>> p.grad = tl.tensor([2.0])
        >>> opt.step()
        >>> round(p.item(), 4)
        0.8
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise DomainError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _update(self, p, g, state, group):
        K = get_kernels(p.device)
        buf, first = None, False
        if group["momentum"]:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = _zeros_like(p)
                first = True
        K.sgd_step(p._value, g, buf, group["lr"], group["momentum"], group["dampening"],
                   group["weight_decay"], group["nesterov"], first)


def _check_betas(betas):
    _check("beta parameter at index 0", betas[0], hi=1.0)
    _check("beta parameter at index 1", betas[1], hi=1.0)


class Adam(Optimizer):
    """Adam with optional AMSGrad and (``decoupled_weight_decay=True``, i.e. AdamW) decoupled weight
    decay, PyTorch's rule. ``foreach``, ``capturable``, ``differentiable`` and ``fused`` only select
    PyTorch's implementation: accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> p.grad = tl.tensor([0.5])
        >>> Adam([p], lr=0.1).step()
        >>> round(p.item(), 4)
        0.9
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    @staticmethod
    def _init_state(p, state, group):
        if not state:
            state["step"] = 0
            state["exp_avg"] = _zeros_like(p)
            state["exp_avg_sq"] = _zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = _zeros_like(p)
        state["step"] += 1

    def _update_many(self, items, group):
        """One multi-tensor step over the parameters of one device (on CUDA one launch per 24 of
        them); every parameter gets exactly the update of :meth:`_update`."""
        K = get_kernels(items[0][0].device)
        maximize = group.get("maximize", False)
        ams = group["amsgrad"]
        for p, _, st in items:
            self._init_state(p, st, group)
        b1, b2 = group["betas"]
        K.adam_step_multi([p._value for p, _, _ in items], [g for _, g, _ in items],
                          [st["exp_avg"] for _, _, st in items], [st["exp_avg_sq"] for _, _, st in items],
                          [st.get("max_exp_avg_sq") if ams else None for _, _, st in items],
                          [st["step"] for _, _, st in items], group["lr"], b1, b2, group["eps"],
                          group["weight_decay"], bool(group.get("decoupled_weight_decay")), maximize)

    def _update(self, p, g, state, group):
        self._init_state(p, state, group)
        b1, b2 = group["betas"]
        get_kernels(p.device).adam_step(p._value, g, state["exp_avg"], state["exp_avg_sq"], state["step"],
                                        group["lr"], b1, b2, group["eps"], group["weight_decay"],
                                        bool(group.get("decoupled_weight_decay")),
                                        state.get("max_exp_avg_sq") if group["amsgrad"] else None)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step
    (``Adam(..., decoupled_weight_decay=True)``, default ``weight_decay=1e-2``).

        >>> import torchlean as tl
        >>> AdamW([tl.nn.Parameter(tl.ones(1))]).param_groups[0]["decoupled_weight_decay"]
        True
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 *, maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


class NAdam(Optimizer):
    """Adam with Nesterov momentum and ``momentum_decay`` (Dozat), PyTorch's rule; ``decoupled_weight_decay``
    gives NAdamW. ``mu_product`` is kept in float32 as PyTorch keeps it. ``foreach``, ``capturable`` and
    ``differentiable`` only select PyTorch's implementation: accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> p.grad = tl.tensor([1.0])
        >>> NAdam([p]).step()
        >>> p.item() < 1.0
        True
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        _check("momentum_decay value", momentum_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def _update(self, p, g, state, group):
        K = get_kernels(p.device)
        if not state:
            state["step"] = 0
            state["mu_product"] = 1.0
            state["exp_avg"] = _zeros_like(p)
            state["exp_avg_sq"] = _zeros_like(p)
        state["step"] += 1
        step, lr, (b1, b2), md = state["step"], group["lr"], group["betas"], group["momentum_decay"]
        bc2 = 1 - b2 ** step
        g = _weight_decay(K, p, g, group, group["decoupled_weight_decay"])
        mu = b1 * (1.0 - 0.5 * 0.96 ** (step * md))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * md))
        state["mu_product"] = mp = float(np.float32(state["mu_product"]) * np.float32(mu))
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _lerp_(K, m, g, 1 - b1)
        _sq_avg_(K, v, g, b2)
        denom = K.add_scalar(K.sqrt(K.scale(v, 1.0 / bc2)), group["eps"])
        mp_next = mp * mu_next
        K.assign(p._value, K.add(p._value, K.div(K.scale(g, -lr * (1.0 - mu) / (1.0 - mp)), denom)))
        K.assign(p._value, K.add(p._value, K.div(K.scale(m, -lr * mu_next / (1.0 - mp_next)), denom)))


class RAdam(Optimizer):
    """Rectified Adam (Liu et al.), PyTorch's rule: plain momentum SGD while the variance estimate's
    length rho_t <= 5, then the rectified adaptive step; ``decoupled_weight_decay`` gives RAdamW.
    ``foreach``, ``capturable`` and ``differentiable``: accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> p.grad = tl.tensor([2.0])
        >>> RAdam([p], lr=0.1).step()
        >>> round(p.item(), 4)
        0.8
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    def _update(self, p, g, state, group):
        K = get_kernels(p.device)
        if not state:
            state["step"] = 0
            state["exp_avg"] = _zeros_like(p)
            state["exp_avg_sq"] = _zeros_like(p)
        state["step"] += 1
        step, lr, (b1, b2) = state["step"], group["lr"], group["betas"]
        g = _weight_decay(K, p, g, group, group["decoupled_weight_decay"])
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _lerp_(K, m, g, 1 - b1)
        _sq_avg_(K, v, g, b2)
        bc1 = 1 - b1 ** step
        bc2 = 1 - b2 ** step
        upd = K.scale(K.scale(m, 1.0 / bc1), lr)
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * (b2 ** step) / bc2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = K.div(K.full(p.shape, bc2 ** 0.5, p.dtype), K.add_scalar(K.sqrt(v), group["eps"]))
            upd = K.scale(K.mul(upd, adaptive), rect)
        K.assign(p._value, K.sub(p._value, upd))


class Adamax(Optimizer):
    """Adamax (Adam with the infinity norm), PyTorch's rule: u = max(beta2 * u, |g| + eps);
    p -= lr / (1 - beta1**t) * m / u. ``foreach``, ``capturable`` and ``differentiable``: accepted,
    no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> p.grad = tl.tensor([3.0])
        >>> Adamax([p], lr=0.1).step()
        >>> round(p.item(), 4)
        0.9
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _update(self, p, g, state, group):
        K = get_kernels(p.device)
        if not state:
            state["step"] = 0
            state["exp_avg"] = _zeros_like(p)
            state["exp_inf"] = _zeros_like(p)
        state["step"] += 1
        b1, b2 = group["betas"]
        g = _weight_decay(K, p, g, group)
        m, u = state["exp_avg"], state["exp_inf"]
        _lerp_(K, m, g, 1 - b1)
        K.assign(u, K.maximum(K.scale(u, b2), K.add_scalar(K.abs(g), group["eps"])))
        clr = group["lr"] / (1 - b1 ** state["step"])
        K.assign(p._value, K.sub(p._value, K.scale(K.div(m, u), clr)))


class Adagrad(Optimizer):
    """Adagrad: sum += g**2; p -= lr / (1 + (step - 1) * lr_decay) * g / (sqrt(sum) + eps).
    State is created at construction, as in PyTorch. ``foreach``, ``differentiable`` and ``fused``:
    accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> p.grad = tl.tensor([2.0])
        >>> Adagrad([p], lr=0.1).step()
        >>> round(p.item(), 4)
        0.9
    """

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check("learning rate", lr)
        _check("lr_decay value", lr_decay)
        _check("weight_decay value", weight_decay)
        _check("initial_accumulator_value", initial_accumulator_value)
        _check("epsilon value", eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))
        # PyTorch creates Adagrad's state eagerly, so a state dict taken before the
        # first step already holds the accumulators.
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"step": 0, "sum": get_kernels(p.device).full(
                    p.shape, group["initial_accumulator_value"], p.dtype)}

    def _update(self, p, g, state, group):
        if not state:
            state["step"] = 0
            state["sum"] = get_kernels(p.device).full(p.shape, group["initial_accumulator_value"], p.dtype)
        state["step"] += 1
        get_kernels(p.device).adagrad_step(p._value, g, state["sum"], state["step"], group["lr"],
                                           group["lr_decay"], group["weight_decay"], group["eps"])


class RMSprop(Optimizer):
    """RMSprop with optional momentum and centering (PyTorch's rule). ``foreach``, ``capturable`` and
    ``differentiable``: accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> p.grad = tl.tensor([1.0])
        >>> RMSprop([p], lr=0.01).step()
        >>> round(p.item(), 4)
        0.9
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        _check("alpha value", alpha)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _update(self, p, g, state, group):
        if not state:
            state["step"] = 0
            state["square_avg"] = _zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = _zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = _zeros_like(p)
        state["step"] += 1
        get_kernels(p.device).rmsprop_step(
            p._value, g, state["square_avg"],
            state.get("momentum_buffer") if group["momentum"] > 0 else None,
            state.get("grad_avg") if group["centered"] else None,
            group["lr"], group["alpha"], group["eps"], group["weight_decay"], group["momentum"])


class Adadelta(Optimizer):
    """Adadelta: running averages of g**2 and of the squared updates (PyTorch's rule).
    ``capturable``, ``foreach`` and ``differentiable``: accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> p.grad = tl.tensor([1.0])
        >>> Adadelta([p]).step()
        >>> p.item() < 1.0
        True
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check("learning rate", lr)
        _check("rho value", rho, hi=1.0 + 1e-12)
        _check("epsilon value", eps)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    def _update(self, p, g, state, group):
        if not state:
            state["step"] = 0
            state["square_avg"] = _zeros_like(p)
            state["acc_delta"] = _zeros_like(p)
        state["step"] += 1
        get_kernels(p.device).adadelta_step(p._value, g, state["square_avg"], state["acc_delta"], group["lr"],
                                            group["rho"], group["eps"], group["weight_decay"])


class Rprop(Optimizer):
    """Resilient backpropagation, PyTorch's rule: per-element step sizes grow by ``etas[1]`` while the
    gradient keeps its sign, shrink by ``etas[0]`` when it flips (that element then skips its update),
    clamped to ``step_sizes``. ``foreach``, ``capturable`` and ``differentiable``: accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> p.grad = tl.tensor([5.0])
        >>> Rprop([p], lr=0.1).step()
        >>> round(p.item(), 4)
        0.9
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False,
                 foreach=None, maximize=False, differentiable=False):
        _check("learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise DomainError(f"Rprop: invalid eta values {tuple(etas)!r} (expected 0 < etaminus < 1 < etaplus)")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _update(self, p, g, state, group):
        K = get_kernels(p.device)
        if not state:
            state["step"] = 0
            state["prev"] = _zeros_like(p)
            state["step_size"] = K.full(p.shape, group["lr"], p.dtype)
        state["step"] += 1
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        prev, size = state["prev"], state["step_size"]
        zero = _zeros_like(p)
        sign = K.sign(K.mul(g, prev))
        down = K.compare(sign, zero, "lt")
        factor = K.where(K.compare(sign, zero, "gt"), K.full(p.shape, etaplus, p.dtype),
                         K.where(down, K.full(p.shape, etaminus, p.dtype), K.full(p.shape, 1.0, p.dtype)))
        K.assign(size, K.clamp(K.mul(size, factor), lo, hi))
        g = K.where(down, zero, g)
        K.assign(p._value, K.sub(p._value, K.mul(K.sign(g), size)))
        K.assign(prev, g)


# ---- L-BFGS ------------------------------------------------------------------------------------


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to ``bounds``."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


class LBFGS(Optimizer):
    """L-BFGS (PyTorch's algorithm, after minFunc): ``step(closure)`` runs up to ``max_iter``
    iterations, each a two-loop recursion over the last ``history_size`` curvature pairs, then a fixed
    step ``lr`` or (``line_search_fn="strong_wolfe"``) a strong-Wolfe line search. One parameter group.

        >>> import torchlean as tl
        >>> x = tl.nn.Parameter(tl.tensor([3.0, -2.0]))
        >>> opt = LBFGS([x], line_search_fn="strong_wolfe")
        >>> def closure():
        ...     opt.zero_grad(); loss = ((x - 1.0) ** 2).sum(); loss.backward(); return loss
        >>> _ = opt.step(closure)
        >>> [round(v, 4) for v in x.tolist()]
        [1.0, 1.0]
    """

    _flat_state = True

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        _check("learning rate", lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise DomainError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise TorchLeanError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, param_group):
        if self.param_groups:
            raise TorchLeanError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    # flat vectors over all parameters, on the first parameter's device
    def _K(self):
        return get_kernels(self._params[0].device)

    def _gather_flat_grad(self):
        K = self._K()
        views = []
        for p in self._params:
            if p._grad is None:
                views.append(K.zeros((p.numel(),), p.dtype))
            else:
                g = p._grad._value
                if g.dtype != p.dtype:
                    g = K.astype(g, p.dtype)
                views.append(K.ascontiguous(g).reshape(-1))
        return K.concat(views, 0)

    def _add_grad(self, t, d):
        K = self._K()
        offset = 0
        for p in self._params:
            n = p.numel()
            K.assign(p._value, K.add(p._value, K.scale(K.slice1d(d, offset, n).reshape(p.shape), t)))
            offset += n

    def _clone_param(self):
        return [self._K().copy(p._value) for p in self._params]

    def _set_param(self, xs):
        for p, x in zip(self._params, xs):
            self._K().assign(p._value, x)

    # Reductions come back as NumPy scalars of the parameters' dtype: like PyTorch's 0-d tensors,
    # they keep float32 arithmetic (NEP 50) in the scalar recurrences of a float32 problem.
    def _dot(self, a, b):
        K = self._K()
        return K.to_host(K.sum(K.mul(a, b), None, False))[()]

    def _abs_max(self, a):
        K = self._K()
        return K.to_host(K.amax(K.abs(a), 0, False))[()]

    def _evaluate(self, closure):
        with enable_grad():
            loss = closure()
        return loss, float(loss)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        _, loss = self._evaluate(closure)
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def _strong_wolfe(self, obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
        K = self._K()
        d_norm = self._abs_max(d)
        g = K.copy(g)
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals = 1
        gtd_new = self._dot(g_new, d)
        t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
        done = False
        ls_iter = 0
        while ls_iter < max_ls:
            if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
                bracket, bracket_f = [t_prev, t], [f_prev, f_new]
                bracket_g, bracket_gtd = [g_prev, K.copy(g_new)], [gtd_prev, gtd_new]
                break
            if abs(gtd_new) <= -c2 * gtd:
                bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
                done = True
                break
            if gtd_new >= 0:
                bracket, bracket_f = [t_prev, t], [f_prev, f_new]
                bracket_g, bracket_gtd = [g_prev, K.copy(g_new)], [gtd_prev, gtd_new]
                break
            min_step = t + 0.01 * (t - t_prev)
            max_step = t * 10
            tmp = t
            t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
            t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, K.copy(g_new), gtd_new
            f_new, g_new = obj_func(x, t, d)
            ls_func_evals += 1
            gtd_new = self._dot(g_new, d)
            ls_iter += 1
        if ls_iter == max_ls:
            bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
        insuf_progress = False
        low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
        while not done and ls_iter < max_ls:
            if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
                break
            t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1],
                                   bracket_gtd[1])
            eps = 0.1 * (max(bracket) - min(bracket))
            if min(max(bracket) - t, t - min(bracket)) < eps:
                if insuf_progress or t >= max(bracket) or t <= min(bracket):
                    t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                    insuf_progress = False
                else:
                    insuf_progress = True
            else:
                insuf_progress = False
            f_new, g_new = obj_func(x, t, d)
            ls_func_evals += 1
            gtd_new = self._dot(g_new, d)
            ls_iter += 1
            if f_new > f + c1 * t * gtd or f_new >= bracket_f[low_pos]:
                bracket[high_pos], bracket_f[high_pos] = t, f_new
                bracket_g[high_pos], bracket_gtd[high_pos] = K.copy(g_new), gtd_new
                low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
            else:
                if abs(gtd_new) <= -c2 * gtd:
                    done = True
                elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                    bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                    bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
                bracket[low_pos], bracket_f[low_pos] = t, f_new
                bracket_g[low_pos], bracket_gtd[low_pos] = K.copy(g_new), gtd_new
        return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals

    def step(self, closure=None):
        """Up to ``max_iter`` L-BFGS iterations; ``closure`` (required) re-evaluates the loss and its
        gradients. Returns the loss of the first evaluation."""
        if closure is None:
            raise TorchLeanError("LBFGS.step requires a closure that re-evaluates the loss")
        with no_grad():
            return self._step(closure)

    def _step(self, closure):
        K = self._K()
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss, loss = self._evaluate(closure)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if self._abs_max(flat_grad) <= tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = K.neg(flat_grad)
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = K.sub(flat_grad, prev_flat_grad)
                s = K.scale(d, t)
                ys = self._dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / self._dot(y, y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = K.neg(flat_grad)
                for i in range(num_old - 1, -1, -1):
                    al[i] = self._dot(old_stps[i], q) * ro[i]
                    q = K.sub(q, K.scale(old_dirs[i], al[i]))
                d = r = K.scale(q, H_diag)
                for i in range(num_old):
                    be_i = self._dot(old_dirs[i], r) * ro[i]
                    r = K.add(r, K.scale(old_stps[i], al[i] - be_i))
                d = r
            prev_flat_grad = K.copy(flat_grad)
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / K.to_host(K.sum(K.abs(flat_grad), None, False))[()]) * lr
            else:
                t = lr
            gtd = self._dot(flat_grad, d)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = self._strong_wolfe(obj_func, x_init, t, d, loss, flat_grad,
                                                                       gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = self._abs_max(flat_grad) <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    _, loss = self._evaluate(closure)
                    flat_grad = self._gather_flat_grad()
                    opt_cond = self._abs_max(flat_grad) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if self._abs_max(K.scale(d, t)) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
