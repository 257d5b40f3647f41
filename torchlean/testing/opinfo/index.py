"""Test records: index."""

from __future__ import annotations
