"""torch.fft under torchlean: the real-valued helpers (``fftfreq``, ``rfftfreq``, ``fftshift``,
``ifftshift``) with torch's signatures; the transforms themselves take or return complex tensors,
which torchlean does not have, and raise ``DTypeError`` saying so (docs/differences.md). The seeds'
real-packed transform is ``torchlean.nn.functional.rfft`` / ``irfft`` (``(..., n//2+1, 2)``, [re, im]).

    >>> import torchlean as tl
    >>> tl.fft.fftfreq(4).tolist()
    [0.0, 0.25, -0.5, -0.25]
    >>> tl.fft.fftshift(tl.arange(5)).tolist()
    [3, 4, 0, 1, 2]
"""

from __future__ import annotations

import numpy as np

from .errors import DTypeError, ShapeError

__all__ = ["fftfreq", "rfftfreq", "fftshift", "ifftshift",
           "fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn"]


def _freqs(name, values, n, d, dtype, device, requires_grad):
    from .dtypes import get_default_dtype
    from .ops.creation import tensor
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ShapeError(f"fft.{name}: n must be a non-negative int, got {n!r}")
    with np.errstate(divide="ignore", invalid="ignore"):     # n = 0: rfftfreq's one entry is 0/0, as torch's
        vals = np.asarray(values, dtype=np.float64) / (float(d) * n)
    out = tensor(vals, dtype=get_default_dtype() if dtype is None else dtype, device=device)
    return out.requires_grad_(requires_grad) if requires_grad else out


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point transform: ``[0, 1, ..., -(n//2), ..., -1] / (d n)``."""
    k = np.arange(n) if n else np.zeros(0)
    return _freqs("fftfreq", np.where(k < (n + 1) // 2, k, k - n), n, d, dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point real transform: ``[0, 1, ..., n//2] / (d n)``."""
    return _freqs("rfftfreq", np.arange(n // 2 + 1), n, d, dtype, device, requires_grad)


def _shift(x, dim, sign):
    from .ops import roll
    dims = tuple(range(x.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    return roll(x, tuple(sign * (x.shape[a] // 2) for a in dims), dims)


def fftshift(input, dim=None):  # noqa: A002
    """``input`` rolled so that the zero frequency is in the middle (every axis, or ``dim``)."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):  # noqa: A002
    """The inverse of :func:`fftshift`."""
    return _shift(input, dim, -1)


def _complex(name):
    def transform(*args, **kwargs):
        raise DTypeError(f"fft.{name}: takes or returns a complex tensor, and torchlean has no complex dtype; "
                         f"torchlean.nn.functional.rfft / irfft give the real-packed transform (..., n//2+1, 2)")
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"torch.fft.{name}: raises DTypeError (no complex tensors in torchlean)."
    return transform


for _name in ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
              "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn"):
    globals()[_name] = _complex(_name)
