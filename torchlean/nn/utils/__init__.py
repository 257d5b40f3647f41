"""``tl.nn.utils``: gradient clipping, parameters as one vector, and padding sequences.

    >>> import torchlean as tl
    >>> p = tl.nn.Parameter(tl.zeros(2))
    >>> p.grad = tl.tensor([3.0, 4.0])
    >>> round(float(tl.nn.utils.clip_grad_norm_([p], 1.0)), 4)
    5.0
    >>> [round(v, 4) for v in p.grad.tolist()]
    [0.6, 0.8]
"""

from __future__ import annotations

import math
import types
import warnings

import numpy as np

from ...errors import DeviceError, DomainError, NonFiniteError
from ...kernels import get_kernels
from ...ops import cat, stack
from ...tensor import Tensor, no_grad
from . import parametrizations, parametrize, rnn  # noqa: F401 - torch.nn.utils.rnn/parametrize(ations)

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_", "parameters_to_vector",
           "vector_to_parameters", "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The ``norm_type``-norm of ``tensors`` viewed as one vector (the norm of their norms), a 0-d tensor
    on the first tensor's device; ``error_if_nonfinite`` raises NonFiniteError (a RuntimeError, as in
    torch) for a nan or inf total."""
    from ...linalg import vector_norm

    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor(np.zeros((), dtype=np.float32))
    with no_grad():
        first = tensors[0].device
        norms = [vector_norm(t, norm_type).to(device=first) for t in tensors]
        total = vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and not math.isfinite(float(total)):
        raise NonFiniteError(f"clip_grad_norm_: The total norm of order {norm_type} for gradients from `parameters` "
                          "is non-finite, so it cannot be clipped. To disable this error and scale the gradients by "
                          "the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None) -> None:
    """Scale every gradient by ``min(max_norm / (total_norm + 1e-6), 1)`` (a nan total gives nan gradients,
    as in torch). Gradients are replaced, not written in place: gradient buffers may be shared between leaves."""
    ps = _grads(parameters)
    if not ps:
        return
    with no_grad():
        total = total_norm if isinstance(total_norm, Tensor) else Tensor(np.asarray(total_norm, dtype=np.float64))
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        for p in ps:
            p._grad = p.grad * coef.to(device=p.grad.device, dtype=p.grad.dtype)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None):
    """Scale the gradients so that their joint ``norm_type``-norm is at most ``max_norm``.

    :func:`get_total_norm` of the gradients, then :func:`clip_grads_with_norm_` (coefficient
    ``min(1, max_norm / (total + 1e-6))``); returns the total norm before clipping as a 0-d tensor.
    ``foreach`` selects torch's fused kernels there; it changes nothing here.
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        gen = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if gen and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2)
    ps = _grads(parameters)
    if len({p.grad.device for p in ps}) > 1:
        raise DeviceError("clip_grad_norm_: gradients live on different devices")
    total = get_total_norm([p.grad for p in ps], norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(ps, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient entry to [-clip_value, clip_value] (nan entries stay nan)."""
    c = float(clip_value)
    for p in _grads(parameters):
        p._grad = Tensor(get_kernels(p.grad.device).clamp(p.grad._value, -c, c))


def parameters_to_vector(parameters) -> Tensor:
    """Every parameter flattened and concatenated, in order (differentiable)."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters) -> None:
    """Copy consecutive slices of ``vec`` into the parameters, in order (their values are replaced)."""
    if not isinstance(vec, Tensor) or vec.ndim != 1:
        raise DomainError(f"vector_to_parameters: expects a 1-D tensor, got {type(vec).__name__}")
    off = 0
    for p in parameters:
        n = p.numel()
        p._value = vec._value[off:off + n].reshape(tuple(p.shape)).astype(p._value.dtype, copy=True)
        off += n
    if off != vec.numel():
        raise DomainError(f"vector_to_parameters: the vector has {vec.numel()} entries, the parameters {off}")


class WeightNorm:
    """The forward pre-hook of the older ``weight_norm``: ``<name>`` is recomputed from the parameters
    ``<name>_g`` (magnitude) and ``<name>_v`` (direction) before every forward."""

    def __init__(self, name: str, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        from .parametrizations import _weight_norm

        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name: str, dim) -> "WeightNorm":
        from ..parameter import Parameter
        from .parametrizations import _norm_except_dim

        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=3)
        for hook, _ in module._hooks("forward_pre").values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise DomainError(f"weight_norm: cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        with no_grad():
            module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, fn.dim).detach()))
            module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module) -> None:
        from ..parameter import Parameter

        with no_grad():
            weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


class SpectralNorm:
    """The forward pre-hook of the older ``spectral_norm``: ``<name>`` is recomputed before every forward as
    ``<name>_orig / sigma``, sigma = u . (W v) for the buffers ``<name>_u``, ``<name>_v``, which (in training
    mode) ``n_power_iterations`` steps of power iteration update first (v, then u, as torch's)."""

    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float):
        if n_power_iterations <= 0:
            raise DomainError(f"spectral_norm: expected n_power_iterations to be positive, got {n_power_iterations}")
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def _matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration: bool):
        from .parametrizations import _normalize
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self._matrix(weight)
        if do_power_iteration:
            with no_grad():
                m = mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(_normalize(m.T @ u, self.eps))
                    u.copy_(_normalize(m @ v, self.eps))
            u, v = u.clone(), v.clone()
        return weight / (u * (mat @ v)).sum()

    @staticmethod
    def apply(module, name: str, n_power_iterations: int, dim: int, eps: float) -> "SpectralNorm":
        from ...ops import randn
        from ..parameter import Parameter
        from .parametrizations import _normalize
        for hook, _ in module._hooks("forward_pre").values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise DomainError(f"spectral_norm: cannot register two spectral_norm hooks on the same parameter "
                                  f"{name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if weight is None:
            raise DomainError(f"Module '{type(module).__name__}' has no parameter with name '{name}'")
        with no_grad():
            h, w = fn._matrix(weight).shape
            u = _normalize(randn(h, dtype=weight.dtype, device=weight.device), eps)
            v = _normalize(randn(w, dtype=weight.dtype, device=weight.device), eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight if isinstance(weight, Parameter) else Parameter(weight))
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        setattr(module, name, weight.detach())
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module) -> None:
        from ..parameter import Parameter
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        del module._parameters[self.name + "_orig"]
        del module._buffers[self.name + "_u"]
        del module._buffers[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim=None):
    """The older, hook-based spectral normalization: parameter ``<name>_orig``, buffers ``<name>_u`` and
    ``<name>_v``; ``dim`` defaults to 1 for transposed convolutions, else 0."""
    if dim is None:
        from .parametrizations import _spectral_dim
        dim = _spectral_dim(module)
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def _remove_hook(module, cls, name, what):
    """Undo the forward pre-hook of ``cls`` on ``name``: the parameter is back, with its current value."""
    table = module._hooks("forward_pre")
    for k, (hook, _) in list(table.items()):
        if isinstance(hook, cls) and hook.name == name:
            hook.remove(module)
            del table[k]
            return module
    raise DomainError(f"{what} of '{name}' not found in {type(module).__name__}")


def remove_spectral_norm(module, name: str = "weight"):
    """Undo :func:`spectral_norm`: ``<name>`` is a parameter again, holding the current normalized weight."""
    return _remove_hook(module, SpectralNorm, name, "spectral_norm")


def weight_norm(module, name: str = "weight", dim=0):
    """The older, hook-based weight normalization (deprecated in torch, FutureWarning as torch):
    parameters ``<name>_g`` and ``<name>_v`` replace ``<name>``."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Undo :func:`weight_norm`: ``<name>`` is a parameter again, holding the current normalized weight."""
    return _remove_hook(module, WeightNorm, name, "weight_norm")
