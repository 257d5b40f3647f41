"""``tl.nn.utils.parametrizations``: weight normalization and spectral normalization as parametrizations.

Both are registered with :func:`~torchlean.nn.utils.parametrize.register_parametrization`, with torch's
state dict keys (``parametrizations.weight.original0`` / ``original1`` for weight_norm;
``parametrizations.weight.original`` and the power-iteration buffers ``parametrizations.weight.0._u`` /
``_v`` for spectral_norm), so torch checkpoints load and give the same outputs and gradients.

    >>> import torchlean as tl
    >>> m = weight_norm(tl.nn.Linear(4, 3))
    >>> [n for n, _ in m.named_parameters()]
    ['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
    >>> tuple(m.parametrizations.weight.original0.shape)
    (3, 1)
"""

from __future__ import annotations

from ...errors import DomainError, IndexRangeError
from ...ops import randn
from ...tensor import Tensor, no_grad
from ..module import Module
from . import parametrize

__all__ = ["weight_norm", "spectral_norm"]


def _norm_except_dim(v, dim):
    """torch.norm_except_dim(v, 2, dim): the 2-norm over every axis but ``dim``, kept as size-1 axes;
    ``dim == -1`` is the norm of the whole tensor (a 0-d tensor), as torch's convention."""
    if dim == -1:
        return v.norm()
    axes = [a for a in range(v.ndim) if a != dim]
    return (v * v).sum(dim=tuple(axes), keepdim=True).sqrt() if axes else v.abs()


def _weight_norm(v, g, dim):
    """torch._weight_norm: ``v * (g / ||v||)`` with the norm taken over every axis but ``dim``."""
    return v * (g / _norm_except_dim(v, dim))


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name: str = "weight", dim=0):
    """Reparametrize ``module.<name>`` as ``g * v / ||v||``: ``original0`` is the magnitude ``g`` (norm over
    every axis but ``dim``; ``dim=None`` the whole tensor), ``original1`` the direction ``v``. Checkpoints of
    the older hook-based weight norm (``<name>_g``, ``<name>_v``) load too."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _compat(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(_compat)
    return module


def _normalize(x, eps):
    return x / x.norm().clamp(min=eps)


class _SpectralNorm(Module):
    """``weight / sigma``, sigma the largest singular value of the weight viewed as a matrix (axis ``dim``
    first), estimated by power iteration; the iteration runs (``n_power_iterations`` steps, no gradient)
    each time the weight is computed in training mode, as torch's."""

    def __init__(self, weight, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexRangeError(f"spectral_norm: dim {dim} is out of range for a {ndim}-D weight")
        if n_power_iterations <= 0:
            raise DomainError(f"spectral_norm: expected n_power_iterations to be positive, got {n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                mat = self._reshape_weight_to_matrix(weight)
                h, w = mat.shape
                self.register_buffer("_u", _normalize(randn(h, dtype=weight.dtype, device=weight.device), eps))
                self.register_buffer("_v", _normalize(randn(w, dtype=weight.dtype, device=weight.device), eps))
                self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, mat, n):
        with no_grad():
            for _ in range(n):
                self._u = _normalize(mat @ self._v, self.eps)
                self._v = _normalize(mat.T @ self._u, self.eps)

    def forward(self, weight):
        if weight.ndim == 1:
            return _normalize(weight, self.eps)
        mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(mat.detach(), self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * (mat @ v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def _spectral_dim(module) -> int:
    """The weight axis spectral normalization treats as the output one: 1 for transposed
    convolutions, 0 otherwise (torch's default)."""
    from ..pooling import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim=None):
    """Divide ``module.<name>`` by its spectral norm (power iteration). ``dim`` defaults to 1 for transposed
    convolutions and 0 otherwise; the vectors ``_u``, ``_v`` are buffers of the parametrization."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise DomainError(f"Module '{type(module).__name__}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = _spectral_dim(module)
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
