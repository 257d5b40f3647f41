"""Spec family: nn."""

from __future__ import annotations
