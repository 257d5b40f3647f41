"""Viscous Burgers' equation: a pseudo-spectral solver and an FNO-style operator-learning data set.

    u_t + u u_x = nu u_xx    on the periodic domain [0, L)   (L = 1 for the data set)

Method. Fourier pseudo-spectral in space (``numpy.fft.rfft`` over the last axis),
the nonlinear term in conservative form ``-(1/2) d/dx (u^2)`` with the 2/3 rule
(modes ``|k| > (n - 1) // 3`` are zeroed, so the quadratic product does not alias
into the kept band), and the diffusion integrated exactly by an integrating factor
with classical RK4 for the rest (IF-RK4; the form of Trefethen's *Spectral Methods
in MATLAB*, program 27). The step is set from the advective CFL number of the
initial condition, which is safe for the whole run because viscous Burgers obeys
a maximum principle (``max |u|`` never grows). Each sample's step count depends on
its own initial condition only (rounded up to one of a few sizes so samples can
be stepped together), so a sample's trajectory does not depend on which other
samples are in the batch.

Initial conditions (the law stated in the FNO paper's Burgers benchmark): Gaussian random fields
``N(0, sigma^2 (-Laplacian + tau^2 I)^(-gamma))`` with ``sigma = 25, tau = 5,
gamma = 2``, mean zero, drawn from the counter-based generator so sample ``i``
is the same for every ``n_samples``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..errors import DomainError, ShapeError
from ..spec.rng import random_bits
from ..ops import from_numpy
from .cache import cache_path, load_npz, save_npz_atomic

# Bumped whenever the generated numbers would change, so stale cache files are not reused.
_VERSION = 1
_IC_STREAM = 0x42555247  # counter of the initial-condition draws ("BURG")
_MODE_STRIDE = 1 << 24


def _wavenumbers(n: int, length: float) -> np.ndarray:
    return 2.0 * math.pi / length * np.arange(n // 2 + 1, dtype=np.float64)


def dealias_mask(n: int) -> np.ndarray:
    """Boolean mask over the ``n // 2 + 1`` rfft bins kept by the 2/3 rule: ``k <= (n - 1) // 3``."""
    return np.arange(n // 2 + 1) <= (n - 1) // 3


def _step_count(umax: float, t_final: float, dx: float, cfl: float) -> int:
    # At least 8 steps: for a nearly-zero u0 the CFL count alone would allow a single RK4 step.
    n = max(8, math.ceil(t_final * umax / (cfl * dx)))
    # Round up to 4 significant bits (at most 1/8 extra work) so samples share step sizes.
    b = 1 << max(0, n.bit_length() - 4)
    return -(-n // b) * b


def _if_rk4(vhat, n, nu, dt, steps, kx, mask):
    """``steps`` IF-RK4 steps of size ``dt`` for rfft coefficients ``vhat`` (rows, n // 2 + 1)."""
    E = np.exp(-nu * kx * kx * dt / 2.0)
    E2 = E * E
    g = np.where(mask, -0.5j * dt * kx, 0.0)

    def N(v):
        u = np.fft.irfft(v, n=n, axis=-1)
        return g * np.fft.rfft(u * u, axis=-1)

    v = vhat
    for _ in range(steps):
        a = N(v)
        b = N(E * (v + a / 2.0))
        c = N(E * v + b / 2.0)
        d = N(E2 * v + E * c)
        v = E2 * v + (E2 * a + 2.0 * E * (b + c) + d) / 6.0
    return v


def burgers_solve(u0, nu: float, t_final: float, length: float = 1.0, cfl: float = 0.5) -> np.ndarray:
    """Solve viscous Burgers' equation from ``u0`` (..., n) on ``[0, length)`` to ``t_final``.

    Returns float64 of ``u0``'s shape. ``u0`` is first projected onto the dealiased
    band (its modes above ``(n - 1) // 3`` are dropped). ``cfl`` is ``dt * max|u0| / dx``;
    IF-RK4 on the dealiased band is stable up to about 1.35, the default leaves
    room. The mean of ``u`` is conserved exactly (the nonlinear term has no k = 0
    part) and, for ``nu > 0``, the energy ``mean(u^2)`` does not increase.

        >>> import numpy as np
        >>> x = np.arange(64) / 64
        >>> u = burgers_solve(1e-3 * np.sin(2 * np.pi * x), nu=0.1, t_final=0.5)
        >>> bool(abs(u.max() / 1e-3 - np.exp(-0.1 * (2 * np.pi) ** 2 * 0.5)) < 1e-4)
        True
    """
    u0 = np.asarray(u0, dtype=np.float64)
    if u0.ndim == 0 or u0.shape[-1] < 4:
        raise ShapeError(f"burgers_solve: needs at least 4 grid points on the last axis, got shape {u0.shape}")
    if not (nu >= 0 and math.isfinite(nu)):
        raise DomainError(f"burgers_solve: viscosity nu must be finite and >= 0, got {nu}")
    if not (t_final >= 0 and math.isfinite(t_final)):
        raise DomainError(f"burgers_solve: t_final must be finite and >= 0, got {t_final}")
    if not (0 < cfl <= 1.35):
        raise DomainError(f"burgers_solve: cfl must be in (0, 1.35], got {cfl}")
    if not np.all(np.isfinite(u0)):
        raise DomainError("burgers_solve: initial condition has non-finite values")
    n = u0.shape[-1]
    lead = u0.shape[:-1]
    flat = u0.reshape(-1, n)
    kx = _wavenumbers(n, length)
    mask = dealias_mask(n)
    vhat = np.fft.rfft(flat, axis=-1) * mask
    if t_final == 0:
        return np.fft.irfft(vhat, n=n, axis=-1).reshape(u0.shape)
    dx = length / n
    umax = np.abs(np.fft.irfft(vhat, n=n, axis=-1)).max(axis=-1)
    steps = np.array([_step_count(float(m), t_final, dx, cfl) for m in umax])
    out = np.empty_like(vhat)
    for s in np.unique(steps):
        rows = np.nonzero(steps == s)[0]
        out[rows] = _if_rk4(vhat[rows], n, nu, t_final / int(s), int(s), kx, mask)
    return np.fft.irfft(out, n=n, axis=-1).reshape(lead + (n,))


def _mode_normals(n_samples: int, m: int, seed: int) -> np.ndarray:
    """Standard normals (n_samples, m, 2): sample i, mode k draw from indices i * 2**24 + 2k, +1.

    Keyed per (sample, mode), not by position in the array, so a field drawn on a
    finer grid has the same low modes (the same function, better resolved).
    """
    if m >= _MODE_STRIDE // 4:
        raise ShapeError(f"gaussian_random_field: grid too large ({3 * m + 1} points)")
    out = np.empty((n_samples, m, 2))
    for i in range(n_samples):
        bits = random_bits(4 * m, seed, _IC_STREAM, offset=i * _MODE_STRIDE)
        u = (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 2 ** 53)
        # Box-Muller per mode: two uniforms give the cos and sin normals of one pair.
        r = np.sqrt(-2.0 * np.log(1.0 - u[0::2]))
        th = 2.0 * math.pi * u[1::2]
        out[i, :, 0] = r[0::2] * np.cos(th[0::2])
        out[i, :, 1] = r[1::2] * np.cos(th[1::2])
    return out


def gaussian_random_field(n_samples: int, grid: int, seed: int = 0, sigma: float = 25.0, tau: float = 5.0,
                          gamma: float = 2.0, length: float = 1.0) -> np.ndarray:
    """Mean-zero periodic Gaussian random fields, float64 (n_samples, grid).

    Covariance ``sigma^2 (-Laplacian + tau^2 I)^(-gamma)`` on ``[0, length)``: the
    Fourier mode of wavenumber ``kappa = 2 pi k / length`` has standard deviation
    ``sigma (kappa^2 + tau^2)^(-gamma / 2)``. Only the modes kept by the 2/3 rule
    are drawn, so the field is exactly representable by the solver. Row ``i``
    depends on ``(seed, i)`` only, and its Fourier modes do not depend on ``grid``:
    the same seed on a finer grid gives the same field, sampled more finely, plus
    the extra modes the finer grid can hold.
    """
    if grid < 4:
        raise ShapeError(f"gaussian_random_field: grid must be >= 4, got {grid}")
    m = (grid - 1) // 3
    z = _mode_normals(int(n_samples), m, int(seed))
    kappa = 2.0 * math.pi / length * np.arange(1, m + 1)
    std = sigma * (kappa ** 2 + tau ** 2) ** (-gamma / 2.0)
    # KL expansion in the orthonormal basis e^{i kappa x} / sqrt(L) of a real field:
    # c_k = std_k (a - i b) / sqrt(2 L); the rfft packing multiplies by grid.
    c = std * (z[..., 0] - 1j * z[..., 1]) / math.sqrt(2.0 * length)
    coef = np.zeros((int(n_samples), grid // 2 + 1), dtype=np.complex128)
    coef[:, 1:m + 1] = c * grid
    return np.fft.irfft(coef, n=grid, axis=-1)


def burgers_dataset(n_samples: int, grid: int = 128, nu: float = 0.01, t_final: float = 1.0, seed: int = 0,
                    cache_dir=None, cache: bool = True, oversample: int = 1, verbose: bool = False):
    """Pairs ``(u0, uT)`` of Burgers' equation on ``[0, 1)``: float32 Tensors (n_samples, grid).

    ``u0`` are Gaussian random fields (see :func:`gaussian_random_field`), ``uT`` the
    solution at ``t_final`` with viscosity ``nu``, both sampled at ``x = i / grid``.
    At the default ``nu = 0.01`` fronts form (slopes grow up to ninefold early on)
    and then decay, staying resolved: the grid-128 answer agrees with a grid-1024
    solve to about 1e-7 relative. For smaller ``nu`` pass ``oversample`` (solve on
    ``grid * oversample`` points from the same ``u0``, return every
    ``oversample``-th point). Computed in float64, rounded to float32; cached as
    ``.npz`` (see :mod:`torchlean.data.cache`) keyed by every parameter;
    ``cache=False`` neither reads nor writes the cache.

        >>> u0, uT = burgers_dataset(4, grid=64, cache=False)
        >>> u0.shape, uT.dtype
        (torchlean.Size([4, 64]), torchlean.float32)
    """
    n_samples, grid, oversample = int(n_samples), int(grid), int(oversample)
    if n_samples < 1:
        raise ShapeError(f"burgers_dataset: n_samples must be >= 1, got {n_samples}")
    if grid < 4:
        raise ShapeError(f"burgers_dataset: grid must be >= 4, got {grid}")
    if oversample < 1:
        raise ShapeError(f"burgers_dataset: oversample must be >= 1, got {oversample}")
    params = {"version": _VERSION, "n_samples": n_samples, "grid": grid, "nu": float(nu),
              "t_final": float(t_final), "seed": int(seed), "oversample": oversample,
              "ic": "grf(sigma=25,tau=5,gamma=2)", "cfl": 0.5}
    path = cache_path("burgers", params, cache_dir) if cache else None
    if path is not None:
        hit = load_npz(path)
        if hit is not None and "u0" in hit and "uT" in hit and hit["u0"].shape == (n_samples, grid) \
                and hit["uT"].shape == (n_samples, grid):
            return from_numpy(hit["u0"]), from_numpy(hit["uT"])
    t0 = time.perf_counter()
    u0 = gaussian_random_field(n_samples, grid, seed)
    if oversample == 1:
        uT = burgers_solve(u0, nu, t_final)
    else:
        fine = grid * oversample
        c = np.zeros((n_samples, fine // 2 + 1), dtype=np.complex128)
        c[:, :grid // 2 + 1] = np.fft.rfft(u0, axis=-1) * oversample
        if grid % 2 == 0:
            c[:, grid // 2] = 0.0  # the coarse Nyquist bin is empty (the field is dealiased)
        uT = burgers_solve(np.fft.irfft(c, n=fine, axis=-1), nu, t_final)[:, ::oversample]
    u0 = u0.astype(np.float32)
    uT = uT.astype(np.float32)
    if verbose:
        print(f"burgers_dataset: {n_samples} trajectories at grid {grid} in {time.perf_counter() - t0:.2f} s")
    if path is not None:
        save_npz_atomic(path, u0=u0, uT=uT)
    return from_numpy(u0), from_numpy(uT)
