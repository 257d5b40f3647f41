"""Test records: linalg."""

from __future__ import annotations
