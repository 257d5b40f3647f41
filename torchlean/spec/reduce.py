"""Spec family: reduce."""

from __future__ import annotations
