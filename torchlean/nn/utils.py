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

import numpy as np

from ..errors import DeviceError, DomainError
from ..kernels import get_kernels
from ..ops import cat
from ..tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None):
    """Scale the gradients so that their joint ``norm_type``-norm is at most ``max_norm``.

    As in PyTorch the coefficient is ``min(1, max_norm / (total + 1e-6))``; returns the
    total norm (before clipping) as a 0-d tensor. Gradients are replaced, not written
    in place, because gradient buffers may be shared between leaves. ``foreach`` selects torch's
    fused kernels there; it changes nothing here.
    """
    ps = _grads(parameters)
    norm_type = float(norm_type)
    if not ps:
        return Tensor(np.zeros((), dtype=np.float32))
    if len({p.grad.device for p in ps}) > 1:
        raise DeviceError("clip_grad_norm_: gradients live on different devices")
    K = get_kernels(ps[0].grad.device)
    gs = [p.grad._value for p in ps]
    if math.isinf(norm_type):
        total = max(float(K.to_host(K.amax(K.abs(g).reshape(-1), 0, False))) if g.size else 0.0 for g in gs)
    elif norm_type <= 0:
        raise DomainError(f"clip_grad_norm_: norm_type must be positive, got {norm_type}")
    else:
        total = sum(float(K.to_host(K.sum(K.pow_scalar(K.abs(g), norm_type), None, False)))
                    for g in gs) ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise DomainError(f"clip_grad_norm_: the total norm of order {norm_type} is non-finite ({total})")
    coef = min(1.0, float(max_norm) / (total + 1e-6))
    if coef < 1.0:
        for p, g in zip(ps, gs):
            p._grad = Tensor(K.scale(g, coef))
    return Tensor(get_kernels(ps[0].device).full((), total, ps[0].grad.dtype))


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient entry to [-clip_value, clip_value]."""
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
