"""Runtime rules: reduce."""

from __future__ import annotations
