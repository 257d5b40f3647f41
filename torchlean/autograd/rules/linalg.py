"""Runtime rules: linalg."""

from __future__ import annotations
