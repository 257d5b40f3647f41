"""The ``Optimizer`` base: parameter groups, per-parameter state, state dicts.

Each optimizer's update is one in-place kernel of the parameter's device
(``get_kernels(p.device).sgd_step`` and friends, see ``torchlean/kernels/api.py``)
operating on ``p``'s buffer and on state arrays that live on the same device.
Gradients are read, never written (their buffers may be shared between leaves).
"""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import DomainError, TorchLeanError
from ..kernels import get_kernels
from ..tensor import Tensor, enable_grad


def _check(name, value, lo=0.0, strict=False, hi=None):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        ok = value > lo if strict else value >= lo
        if hi is not None:
            ok = ok and value < hi
    if not ok:
        rng = f"({lo}, {hi})" if hi is not None else (f"> {lo}" if strict else f">= {lo}")
        raise DomainError(f"invalid {name}: {value!r} (expected {rng})")


class Optimizer:
    """Base class: ``param_groups`` (dicts of params and options), ``state`` (per param).

    Subclasses define ``_update(p, g, state, group)``, which receives the parameter,
    its gradient array and its state dict, and calls the device's step kernel.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = {}
        self.param_groups: list = []
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

    def add_param_group(self, group: dict) -> None:
        """Add a group of parameters with its own options (unset ones take the defaults)."""
        if not isinstance(group, dict):
            raise TorchLeanError(f"add_param_group: expected a dict, got {type(group).__name__}")
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
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

    # -- state dicts -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {name: Tensor | number}}, "param_groups": [...]}`` (PyTorch's layout).

        Parameters are numbered in group order; state arrays are returned as Tensors
        sharing the optimizer's buffers.
        """
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
                    state[index[id(p)]] = {k: (Tensor(v) if hasattr(v, "shape") and hasattr(v, "dtype")
                                               and not isinstance(v, np.generic) else v)
                                           for k, v in st.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore options and state saved by :meth:`state_dict` (copies, cast to each parameter)."""
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
        self.state = new_state
        for sg, g in zip(saved, self.param_groups):
            for k, v in sg.items():
                if k != "params":
                    g[k] = tuple(v) if isinstance(v, list) and isinstance(self.defaults.get(k), tuple) else v

    @staticmethod
    def _load_value(key, v, p):
        if isinstance(v, Tensor):
            v = v.numpy()
        elif hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor, without importing torch
            v = v.detach().cpu().numpy()
        if isinstance(v, np.ndarray):
            if key == "step":
                return float(v) if v.dtype.kind == "f" else int(v)
            if v.shape != p.shape:
                raise TorchLeanError(f"load_state_dict: state {key!r} has shape {v.shape}, parameter has {p.shape}")
            return get_kernels(p.device).from_host(np.ascontiguousarray(v, dtype=p.dtype), p.dtype)
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


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov, weight decay.

    PyTorch's rule: d = g + wd * p; buf = d (first step) else momentum * buf + (1 - dampening) * d;
    d = d + momentum * buf (Nesterov) or buf; p -= lr * d.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> opt = SGD([p], lr=0.1)
        >>> p.grad = tl.tensor([2.0])
        >>> opt.step()
        >>> round(p.item(), 4)
        0.8
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 *, maximize=False):
        _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise DomainError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize))

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


class Adam(Optimizer):
    """Adam (and, with ``decoupled`` weight decay, AdamW) with optional AMSGrad (PyTorch's rule)."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 *, maximize=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("beta parameter at index 0", betas[0], hi=1.0)
        _check("beta parameter at index 1", betas[1], hi=1.0)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize))

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
        K.adam_step_multi([p._value for p, _, _ in items], [g for _, g, _ in items], [st["exp_avg"] for _, _, st in items],
              [st["exp_avg_sq"] for _, _, st in items],
              [st.get("max_exp_avg_sq") if ams else None for _, _, st in items],
              [st["step"] for _, _, st in items], group["lr"], b1, b2, group["eps"], group["weight_decay"],
              self._decoupled, maximize)

    def _update(self, p, g, state, group):
        self._init_state(p, state, group)
        b1, b2 = group["betas"]
        get_kernels(p.device).adam_step(p._value, g, state["exp_avg"], state["exp_avg_sq"], state["step"],
                                        group["lr"], b1, b2, group["eps"], group["weight_decay"],
                                        self._decoupled, state.get("max_exp_avg_sq") if group["amsgrad"] else None)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class Adagrad(Optimizer):
    """Adagrad: sum += g**2; p -= lr / (1 + (step - 1) * lr_decay) * g / (sqrt(sum) + eps)."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10, *, maximize=False):
        _check("learning rate", lr)
        _check("lr_decay value", lr_decay)
        _check("weight_decay value", weight_decay)
        _check("initial_accumulator_value", initial_accumulator_value)
        _check("epsilon value", eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps,
                                      maximize=maximize))
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
    """RMSprop with optional momentum and centering (PyTorch's rule)."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 *, maximize=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        _check("alpha value", alpha)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

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
    """Adadelta: running averages of g**2 and of the squared updates (PyTorch's rule)."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, *, maximize=False):
        _check("learning rate", lr)
        _check("rho value", rho, hi=1.0 + 1e-12)
        _check("epsilon value", eps)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _update(self, p, g, state, group):
        if not state:
            state["step"] = 0
            state["square_avg"] = _zeros_like(p)
            state["acc_delta"] = _zeros_like(p)
        state["step"] += 1
        get_kernels(p.device).adadelta_step(p._value, g, state["square_avg"], state["acc_delta"], group["lr"],
                                            group["rho"], group["eps"], group["weight_decay"])
