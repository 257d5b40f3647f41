"""Attribute checks shared by the spec families: each raises the documented error naming the op."""

from __future__ import annotations

import math

import numpy as np

from ..errors import DomainError, ShapeError


def check_eps(op, eps):
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not math.isfinite(eps) or eps < 0:
        raise DomainError(f"{op}: eps must be a finite number >= 0, got {eps!r}")


def check_int(op, name, v, lo):
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
        raise ShapeError(f"{op}: {name} must be an int >= {lo}, got {v!r}")
