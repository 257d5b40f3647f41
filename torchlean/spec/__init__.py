"""The spec layer: the reference meaning (forward, VJP, shape rule) of every op.

``SPEC[name]`` is a :class:`~torchlean.spec.registry.SpecOp`. The functions are
plain NumPy, written for clarity and valid in float64; the IR interpreter and the
tape's reference mode (``fast_kernels=False``) run them, and every device kernel
is tested against them.
"""

from importlib import import_module

from .registry import FAMILIES, SPEC, SpecOp, defspec

for _family in FAMILIES:
    import_module(f"{__name__}.{_family}")  # registration
from .compound import COMPOUNDS  # noqa: E402  (registration, after the primitives it composes)

__all__ = ["SPEC", "SpecOp", "defspec", "FAMILIES", "COMPOUNDS"]
