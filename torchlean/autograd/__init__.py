"""The autograd tape (:class:`Tape`, :class:`Node`) and the runtime rules."""

from .tape import Node, Tape, device_of, install_op_methods, run_op
from .rules import RULES

install_op_methods()

__all__ = ["Tape", "Node", "RULES", "device_of", "run_op"]
