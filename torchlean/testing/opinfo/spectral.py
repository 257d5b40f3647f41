"""Test records of the spectral family."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from . import BadInput, OpInfo, Sample, defop, rand


# ---- real FFT and spectral convolution ------------------------------------------------------

def _torch_irfft(torch, p, *, n):
    return torch.fft.irfft(torch.complex(p[..., 0], p[..., 1]), n=n)


defop(OpInfo("rfft",
             lambda rng: [Sample((rand(rng, *s),), {}, str(s)) for s in [(8,), (3, 7), (2, 3, 1), (2, 6), (2,)]],
             lambda rng: [BadInput((np.ones(()),), {}, ShapeError, "()", "0-d"),
                          BadInput((np.ones((3, 0)),), {}, ShapeError, "(3, 0)", "empty axis")],
             torch_ref=lambda torch, x: torch.view_as_real(torch.fft.rfft(x)), tol_scale=2.0))


defop(OpInfo("irfft",
             lambda rng: [Sample((rand(rng, *s, 2),), {"n": n}, f"{s} n={n}")
                          for s, n in [((5,), 8), ((3, 4), 7), ((1,), 1), ((2, 4), 6), ((2,), 2), ((2, 2), 3)]],
             lambda rng: [BadInput((np.ones((5, 2)),), {"n": 10}, ShapeError, "n = 10", "n vs bins"),
                          BadInput((np.ones((5, 3)),), {"n": 8}, ShapeError, "(5, 3)", "not packed"),
                          BadInput((np.ones((1, 2)),), {"n": 0}, ShapeError, "n", "n = 0")],
             torch_ref=_torch_irfft))


def _spectral_samples(rng):
    cases = [((8, 3), (3, 3, 3)), ((2, 7, 2), (4, 2, 2)), ((2, 6, 3), (4, 3, 2)), ((5, 1), (1, 1, 1)),
             ((1, 4, 2), (2, 2, 2))]
    return [Sample((rand(rng, *xs), rand(rng, *ws), rand(rng, *ws)), {}, f"x{xs} w{ws}") for xs, ws in cases]


def _spectral_bad(rng):
    w = np.ones((6, 2, 2))
    return [BadInput((np.ones((8, 2)), w, w), {}, ShapeError, "modes 6", "modes > grid//2+1"),
            BadInput((np.ones((8, 2)), np.ones((3, 2, 2)), np.ones((2, 2, 2))), {}, ShapeError, "w_im", "w_im"),
            BadInput((np.ones((8, 3)), np.ones((3, 2, 2)), np.ones((3, 2, 2))), {}, ShapeError, "channels", "width"),
            BadInput((np.ones(8), np.ones((3, 1, 1)), np.ones((3, 1, 1))), {}, ShapeError, "(8,)", "1-D x")]


def torch_spectral_conv1d(torch, x, w_re, w_im):
    """The FNO formulation: rfft over the grid, einsum over the kept modes, irfft."""
    grid, modes = x.shape[-2], w_re.shape[0]
    X = torch.fft.rfft(x, dim=-2)[..., :modes, :]
    Y = torch.einsum("...ki,kio->...ko", X, torch.complex(w_re, w_im))
    return torch.fft.irfft(Y, n=grid, dim=-2)


defop(OpInfo("spectral_conv1d", _spectral_samples, _spectral_bad, torch_ref=torch_spectral_conv1d,
             tol_scale=2.0))
