"""Host kernels of the rng family: the counter-based generator of :mod:`torchlean.spec.rng`,
bit for bit the numbers of the CUDA kernels."""

from __future__ import annotations

import math

import numpy as np

from ...spec.rng import uniform


def rand_uniform(shape, seed, counter, dtype):
    n = math.prod(shape)
    return uniform(n, seed, counter, dtype).reshape(shape)


def randn(shape, seed, counter, dtype):
    # Box-Muller on the float64 uniforms of indices 2i and 2i+1, then rounded to dtype.
    n = math.prod(shape)
    u = uniform(2 * n, seed, counter, np.float64)
    u1 = 1.0 - u[0::2]  # in (0, 1]: log never sees 0
    z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u[1::2])
    return z.astype(dtype).reshape(shape)


def bernoulli_mask(shape, p_keep, seed, counter, dtype):
    return (rand_uniform(shape, seed, counter, np.float32) < np.float32(p_keep)).astype(dtype)
