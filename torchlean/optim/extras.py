"""PyTorch's less common optimizers: ``SparseAdam``, ``ASGD``, ``Adafactor`` (update rules, defaults,
state-dict layout of torch 2.x).

Each update is computed on the host in the parameter's dtype, in PyTorch's order of operations,
and written back to the parameter's device. ``foreach``, ``capturable`` and ``differentiable``
only select PyTorch's implementation: accepted and kept in ``param_groups``, no effect here.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import DomainError, TorchLeanError
from ..kernels import get_kernels
from ..tensor import Tensor
from .optimizer import Optimizer, _check, _f32


def _host(p, x):
    return get_kernels(p.device).to_host(x)


def _put(p, dst, arr):
    K = get_kernels(p.device)
    K.assign(dst, K.from_host(np.asarray(arr, dtype=p.dtype), p.dtype))


def _lerp(a, b, w):
    """PyTorch's ``lerp``: a + w * (b - a) for w < 0.5, else b - (b - a) * (1 - w)."""
    dt = a.dtype.type
    return a + dt(w) * (b - a) if abs(w) < 0.5 else b - (b - a) * dt(1 - w)


def _check_lr(name, lr, strict=False):
    if not isinstance(lr, numbers.Real) or isinstance(lr, bool) or not (lr > 0 if strict else lr >= 0):
        raise DomainError(f"{name}: invalid learning rate: {lr!r} (expected {'> 0' if strict else '>= 0'})")


class SparseAdam(Optimizer):
    """Adam's lazy variant: only the rows that have a gradient update their moments and values.

    PyTorch requires sparse gradients here; torchlean has dense tensors only, so the rows (entries
    along dim 0; every entry of a 1-d parameter) present in the gradient are those holding a
    non-zero value, as ``grad.to_sparse(1)`` would keep them, e.g. the rows an ``Embedding``
    looked up. State dict as PyTorch's (``step`` a Python int).

        >>> import torchlean as tl
        >>> w = tl.nn.Parameter(tl.ones(3, 2))
        >>> w.grad = tl.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
        >>> tl.optim.SparseAdam([w], lr=0.1).step()
        >>> [round(v, 4) for v in w.detach().numpy().ravel().tolist()]
        [1.0, 1.0, 0.9, 1.0, 1.0, 1.0]
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        _check_lr("SparseAdam", lr, strict=True)
        _check("epsilon value", eps, strict=True)
        _check("beta parameter at index 0", betas[0], hi=1.0)
        _check("beta parameter at index 1", betas[1], hi=1.0)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    @classmethod
    def _save_value(cls, key, v, p):
        if key == "step":   # PyTorch's SparseAdam keeps an int step
            return int(v)
        return super()._save_value(key, v, p)

    def _update(self, p, g, state, group):
        if not state:
            state["step"] = 0
            state["exp_avg"] = get_kernels(p.device).zeros(p.shape, p.dtype)
            state["exp_avg_sq"] = get_kernels(p.device).zeros(p.shape, p.dtype)
        state["step"] += 1
        grad = _host(p, g)
        if grad.ndim == 0:
            rows = np.array(grad != 0).reshape(())
            sel = (...,) if bool(rows) else None
        else:
            nz = grad.reshape(grad.shape[0], -1).any(axis=1)
            sel = (np.nonzero(nz)[0],) if nz.any() else None
        if sel is None:     # an empty sparse gradient: no update, as PyTorch skips it
            return
        b1, b2 = group["betas"]
        m, v, w = _host(p, state["exp_avg"]), _host(p, state["exp_avg_sq"]), _host(p, p._value)
        gv = grad[sel]
        old_m, old_v = m[sel], v[sel]
        dt = gv.dtype.type
        upd_m = (gv - old_m) * dt(1 - b1)
        upd_v = (gv * gv - old_v) * dt(1 - b2)
        m[sel] = old_m + upd_m
        v[sel] = old_v + upd_v
        numer = upd_m + old_m
        denom = np.sqrt(upd_v + old_v) + dt(group["eps"])
        step = state["step"]
        step_size = group["lr"] * math.sqrt(1 - b2 ** step) / (1 - b1 ** step)
        w[sel] = w[sel] + dt(-step_size) * (numer / denom)
        _put(p, state["exp_avg"], m)
        _put(p, state["exp_avg_sq"], v)
        _put(p, p._value, w)


class ASGD(Optimizer):
    """Averaged SGD (Polyak and Juditsky), PyTorch's rule: p *= 1 - lambd * eta; p -= eta * g; the
    average ``ax`` follows p with weight ``mu``; then eta = lr / (1 + lambd * lr * t)**alpha and
    mu = 1 / max(1, t - t0). ``eta`` and ``mu`` are kept in float32 as PyTorch keeps them.
    ``foreach``, ``capturable`` and ``differentiable``: accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.tensor([1.0]))
        >>> p.grad = tl.tensor([2.0])
        >>> tl.optim.ASGD([p], lr=0.1).step()
        >>> round(p.item(), 4)
        0.8
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        _check_lr("ASGD", lr)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _update(self, p, g, state, group):
        if not state:
            state["step"] = 0
            state["eta"] = _f32(group["lr"])
            state["mu"] = 1.0
            state["ax"] = get_kernels(p.device).zeros(p.shape, p.dtype)
        state["step"] += 1
        lr, lambd, wd = group["lr"], group["lambd"], group["weight_decay"]
        grad, w = _host(p, g), _host(p, p._value)
        dt = w.dtype.type
        if wd != 0:
            grad = grad + w * dt(wd)
        eta = state["eta"]
        w = w * dt(1 - lambd * eta)
        w = w + grad * dt(-eta)
        _put(p, p._value, w)
        if state["mu"] != 1:
            ax = _host(p, state["ax"])
            _put(p, state["ax"], ax + (w - ax) * dt(state["mu"]))
        else:
            _put(p, state["ax"], w)
        step = state["step"]
        state["eta"] = _f32(lr / ((1 + lambd * lr * step) ** group["alpha"]))
        state["mu"] = _f32(1 / max(1, step - group["t0"]))


class Adafactor(Optimizer):
    """Adafactor (Shazeer and Stern), PyTorch's variant: second moments factored over the last two
    dimensions (``row_var``, ``col_var``; a ``variance`` for vectors), beta2_t = 1 - t**beta2_decay,
    relative step size rho_t = min(lr, 1/sqrt(t)) scaled by the parameter's RMS (at least eps2),
    updates clipped to RMS ``d``, decoupled ``weight_decay``. ``eps=(None, 1e-3)``: eps1 None is the
    parameter dtype's machine epsilon. ``foreach``: accepted, no effect here.

        >>> import torchlean as tl
        >>> p = tl.nn.Parameter(tl.ones(2, 2))
        >>> p.grad = tl.ones(2, 2)
        >>> tl.optim.Adafactor([p]).step()
        >>> round(p[0, 0].item(), 4)
        0.99
    """

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if not isinstance(lr, numbers.Real) or not 0.0 <= lr:
            raise DomainError(f"Adafactor: learning rate should be >= 0 but is: {lr!r}")
        if not 0.0 >= beta2_decay:
            raise DomainError(f"Adafactor: beta2_decay should be <= 0 but is: {beta2_decay!r}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise DomainError(f"Adafactor: epsilon1 should be >= 0 but is: {eps[0]!r}")
        if not 0.0 <= eps[1]:
            raise DomainError(f"Adafactor: epsilon2 should be >= 0 but is: {eps[1]!r}")
        if not 1.0 <= d:
            raise DomainError(f"Adafactor: clipping threshold d should be >= 1 but is: {d!r}")
        if not 0.0 <= weight_decay:
            raise DomainError(f"Adafactor: weight_decay should be >= 0 but is: {weight_decay!r}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _load_value(self, key, v, p):
        if key in ("row_var", "col_var") and p.ndim > 1:   # factored: not the parameter's shape
            want = p.shape[:-1] + (1,) if key == "row_var" else p.shape[:-2] + (1, p.shape[-1])
            if isinstance(v, Tensor):
                v = v.numpy()
            elif hasattr(v, "detach") and hasattr(v, "cpu"):  # a torch tensor, without importing torch
                v = v.detach().cpu().numpy()
            v = np.asarray(v)
            if tuple(v.shape) != tuple(want):
                raise TorchLeanError(f"Adafactor.load_state_dict: state {key!r} has shape {tuple(v.shape)}, "
                                     f"expected {tuple(want)} for a parameter of shape {tuple(p.shape)}")
            return get_kernels(p.device).from_host(np.array(v, dtype=p.dtype, order="C"), p.dtype)
        return super()._load_value(key, v, p)

    def _update(self, p, g, state, group):
        K = get_kernels(p.device)
        if not state:
            state["step"] = 0
            if p.ndim > 1:
                state["row_var"] = K.zeros(p.shape[:-1] + (1,), p.dtype)
                state["col_var"] = K.zeros(p.shape[:-2] + (1, p.shape[-1]), p.dtype)
            else:
                state["variance"] = K.zeros(p.shape, p.dtype)
        state["step"] += 1
        eps1, eps2 = group["eps"]
        lr, d, wd = group["lr"], group["d"], group["weight_decay"]
        grad, w = _host(p, g), _host(p, p._value)
        dt = w.dtype.type
        if eps1 is None:
            eps1 = float(np.finfo(w.dtype).eps)
        t = float(_f32(state["step"]))
        one_minus_beta2_t = t ** group["beta2_decay"]
        rho_t = min(lr, 1 / (t ** 0.5))
        alpha = max(eps2, float(np.linalg.norm(w.ravel())) / (w.size ** 0.5)) * rho_t
        if wd != 0:
            w = w * dt(1 - lr * wd)
        if grad.ndim > 1:
            row_var, col_var = _host(p, state["row_var"]), _host(p, state["col_var"])
            row_mean = (grad * grad).sum(axis=-1, keepdims=True) / dt(grad.shape[-1])
            row_var = _lerp(row_var, row_mean, one_minus_beta2_t)
            col_mean = (grad * grad).sum(axis=-2, keepdims=True) / dt(grad.shape[-2])
            col_var = _lerp(col_var, col_mean, one_minus_beta2_t)
            _put(p, state["row_var"], row_var)
            _put(p, state["col_var"], col_var)
            var_estimate = np.matmul(row_var, col_var)
            var_estimate = var_estimate / np.maximum(row_var.mean(axis=-2, keepdims=True), dt(eps1))
        else:
            variance = _host(p, state["variance"])
            variance = _lerp(variance, grad * grad, one_minus_beta2_t)
            _put(p, state["variance"], variance)
            var_estimate = variance.copy()
        update = (dt(1) / np.sqrt(np.maximum(var_estimate, dt(eps1 * eps1)))) * grad
        denom = max(1.0, float(np.linalg.norm(update.ravel())) / ((update.size ** 0.5) * d))
        _put(p, p._value, w + update * dt(-alpha / denom))
