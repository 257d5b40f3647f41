"""Test records: reduce."""

from __future__ import annotations
