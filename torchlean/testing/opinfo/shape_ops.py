"""Test records: shape_ops."""

from __future__ import annotations
