"""Spec family: linalg."""

from __future__ import annotations
