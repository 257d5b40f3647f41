"""Runtime rules: index."""

from __future__ import annotations
