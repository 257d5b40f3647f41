"""Runtime rules by op family, all registered in :data:`RULES`."""

from importlib import import_module

from ...spec import FAMILIES
from .registry import RULES, Rule, defrule

for _family in FAMILIES:
    import_module(f"{__name__}.{_family}")  # registration

__all__ = ["RULES", "Rule", "defrule"]
