"""Spec family: index."""

from __future__ import annotations
