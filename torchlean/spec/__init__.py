"""The spec layer: the reference meaning (forward, VJP, shape rule) of every op.

``SPEC[name]`` is a :class:`~torchlean.spec.registry.SpecOp`. The functions are
plain NumPy, written for clarity and valid in float64; the IR interpreter and the
tape's reference mode (``fast_kernels=False``) run them, and every device kernel
is tested against them.
"""

from .registry import SPEC, SpecOp, defspec
from . import elementwise, reduce, shape_ops, index, linalg, nn  # noqa: F401  (registration)
from . import layers  # noqa: F401
from . import conv  # noqa: F401
from . import convert  # noqa: F401

__all__ = ["SPEC", "SpecOp", "defspec"]
