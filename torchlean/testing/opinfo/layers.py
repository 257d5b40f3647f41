"""Test records: layers."""

from __future__ import annotations
