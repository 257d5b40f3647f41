"""``torch.nn.modules.container``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..module import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401

__all__ = ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]
