"""Runtime rules by op family, all registered in :data:`RULES`."""

from importlib import import_module

from ...spec import FAMILIES
from .registry import RULES, Rule, defrule

for _family in FAMILIES:
    import_module(f"{__name__}.{_family}")  # registration
from . import compound  # noqa: E402,F401  (registration, after the rules of the parts)

__all__ = ["RULES", "Rule", "defrule"]
