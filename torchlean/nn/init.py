"""``tl.nn.init``: in-place initializers (PyTorch's names and formulas).

They write into the tensor's buffer without recording anything, drawing from the
counter-based generator (``tl.manual_seed``), so the same seed gives the same
weights on every device.

    >>> import torchlean as tl
    >>> w = tl.nn.Parameter(tl.zeros(3, 4))
    >>> _ = tl.nn.init.ones_(w)
    >>> float(w.sum())
    12.0
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import no_grad
from ..errors import DomainError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..tensor import Tensor, next_rng_key

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_", "dirac_",
           "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_", "trunc_normal_",
           "orthogonal_", "sparse_"]


def _float_tensor(t, op):
    if not isinstance(t, Tensor):
        raise TorchLeanError(f"{op}: expects a Tensor, got {type(t).__name__}")
    if t.dtype.kind != "f":
        raise TorchLeanError(f"{op}: expects a float tensor, got dtype {t.dtype}")
    return t


def _write(t, v):
    t._value[...] = v
    return t


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise DomainError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(t):
    if t.ndim < 2:
        raise ShapeError(f"init: fan in and fan out need a tensor with at least 2 axes, got shape {t.shape}")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def _key(generator):
    return generator.next_key() if generator is not None else next_rng_key()


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Fill with U(a, b)."""
    t = _float_tensor(tensor, "uniform_")
    s, c = _key(generator)
    u = get_kernels(t.device).rand_uniform(t.shape, s, c, t.dtype)
    return _write(t, u * (b - a) + a)


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Fill with N(mean, std**2)."""
    t = _float_tensor(tensor, "normal_")
    s, c = _key(generator)
    z = get_kernels(t.device).randn(t.shape, s, c, t.dtype)
    return _write(t, z * std + mean)


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None):
    """N(mean, std**2) restricted to [a, b], by the inverse CDF of a uniform draw between the bounds'
    probabilities (torch's method)."""
    t = _float_tensor(tensor, "trunc_normal_")
    if not a < b:
        raise DomainError(f"trunc_normal_: a must be below b, got a={a}, b={b}")
    cdf = lambda v: 0.5 * (1.0 + math.erf((v - mean) / (std * math.sqrt(2.0))))  # noqa: E731
    lo, hi = cdf(a), cdf(b)
    s, c = _key(generator)
    with no_grad():
        u = Tensor(get_kernels(t.device).rand_uniform(t.shape, s, c, t.dtype))
        z = ((u * (hi - lo) + lo) * 2.0 - 1.0).clamp(-1 + 1e-7, 1 - 1e-7).erfinv()
        v = (z * (std * math.sqrt(2.0)) + mean).clamp(a, b)
    return _write(t, v._value)


def orthogonal_(tensor, gain: float = 1.0, generator=None):
    """A (semi-)orthogonal matrix over the first axis and the rest flattened: Q of the QR of a normal
    draw, its columns' signs fixed by R's diagonal (torch's construction), times ``gain``."""
    t = _float_tensor(tensor, "orthogonal_")
    if t.ndim < 2:
        raise ShapeError(f"orthogonal_: expects a tensor with at least 2 axes, got shape {t.shape}")
    rows, cols = t.shape[0], t.numel() // t.shape[0]
    s, c = _key(generator)
    flat = get_kernels("cpu").randn((rows, cols), s, c, np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.where(np.diag(r) == 0, 1.0, np.diag(r)))
    if rows < cols:
        q = q.T
    v = (gain * q).reshape(tuple(t.shape)).astype(t._value.dtype)
    return _write(t, get_kernels(t.device).from_host(v, v.dtype))


def sparse_(tensor, sparsity: float, std: float = 0.01, generator=None):
    """N(0, std**2) with ``ceil(sparsity * rows)`` entries of every column set to zero (a 2-D tensor)."""
    t = _float_tensor(tensor, "sparse_")
    if t.ndim != 2:
        raise ShapeError(f"sparse_: expects a 2-D tensor, got shape {t.shape}")
    rows, cols = t.shape
    zeros = math.ceil(sparsity * rows)
    normal_(t, 0.0, std, generator)
    s, c = _key(generator)
    u = get_kernels("cpu").rand_uniform((rows, cols), s, c, np.float64)
    order = np.argsort(u, axis=0, kind="stable")[:zeros]
    mask = np.ones((rows, cols), dtype=bool)
    np.put_along_axis(mask, order, False, axis=0)
    t._value[...] = t._value * get_kernels(t.device).from_host(mask.astype(t._value.dtype), t._value.dtype)
    return t


def dirac_(tensor, groups: int = 1):
    """The identity convolution: a 3- to 5-D weight with 1 at each kernel's centre for the matching
    input channel (per group)."""
    t = _float_tensor(tensor, "dirac_")
    if t.ndim not in (3, 4, 5):
        raise ShapeError(f"dirac_: expects a 3, 4 or 5-D tensor, got shape {t.shape}")
    if t.shape[0] % groups:
        raise ShapeError(f"dirac_: dim 0 ({t.shape[0]}) must be divisible by groups {groups}")
    out_per = t.shape[0] // groups
    w = np.zeros(tuple(t.shape), dtype=t._value.dtype)
    centre = tuple(k // 2 for k in t.shape[2:])
    for g in range(groups):
        for d in range(min(out_per, t.shape[1])):
            w[(g * out_per + d, d) + centre] = 1.0
    return _write(t, get_kernels(t.device).from_host(w, w.dtype))


def constant_(tensor, val: float):
    return _write(_float_tensor(tensor, "constant_"), val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def eye_(tensor):
    """The identity matrix (a 2-D tensor)."""
    t = _float_tensor(tensor, "eye_")
    if t.ndim != 2:
        raise ShapeError(f"eye_: expects a 2-D tensor, got shape {t.shape}")
    _write(t, 0.0)
    n = min(t.shape)
    t._value[range(n), range(n)] = 1.0
    return t


def _kaiming_std(t, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise DomainError(f"kaiming: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    if fan == 0:
        raise ShapeError(f"kaiming: tensor of shape {t.shape} has a zero {mode}")
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan); ``Linear`` uses a = sqrt(5)."""
    t = _float_tensor(tensor, "kaiming_uniform_")
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None):
    """N(0, std**2) with std = gain / sqrt(fan)."""
    t = _float_tensor(tensor, "kaiming_normal_")
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity), generator)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    t = _float_tensor(tensor, "xavier_uniform_")
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    t = _float_tensor(tensor, "xavier_normal_")
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


_calculate_fan_in_and_fan_out = _fans
