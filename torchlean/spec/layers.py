"""Spec family: model layers (conv/pool N-d, normalization, attention, FFT, selective scan)."""

from __future__ import annotations
