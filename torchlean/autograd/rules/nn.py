"""Runtime rules: nn."""

from __future__ import annotations
