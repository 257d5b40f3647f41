"""Helpers shared by the host kernel families (not kernels themselves)."""

from __future__ import annotations


def _c(x, c):
    """A Python scalar as x's dtype so NumPy never promotes float32 to float64."""
    return x.dtype.type(c)
