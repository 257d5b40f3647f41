"""Test records: nn."""

from __future__ import annotations
