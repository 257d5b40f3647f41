"""Helpers shared by the host kernel families (not kernels themselves)."""

from __future__ import annotations

import numpy as np


xp = np


SAFE_LOG_EPS = 1e-6


def _c(x, c):
    """A Python scalar as x's dtype so NumPy never promotes float32 to float64."""
    return x.dtype.type(c)
