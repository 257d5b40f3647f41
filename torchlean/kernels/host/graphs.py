"""The graphs family on the CPU: there are no CUDA graphs to capture here."""

from __future__ import annotations

from ...errors import DeviceError


def graph_capture():
    raise DeviceError("graph_capture: CUDA graphs need device 'cuda'; the CPU runs every step eagerly")
