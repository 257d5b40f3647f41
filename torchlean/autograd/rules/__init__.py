"""Runtime rules by op family, all registered in :data:`RULES`."""

from .registry import RULES, Rule, defrule
from . import elementwise, reduce, shape_ops, index, linalg, nn  # noqa: F401  (registration)
from . import layers  # noqa: F401
from . import conv  # noqa: F401
from . import convert  # noqa: F401

__all__ = ["RULES", "Rule", "defrule"]
