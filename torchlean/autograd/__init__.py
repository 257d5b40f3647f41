"""Autograd: the tape (:class:`Tape`, :class:`Node`), the runtime rules (:data:`RULES`), the
dispatch (:func:`forward_op`) and the front end's recording (:func:`record`, :func:`backward`)."""

from .dispatch import DISPATCH, SPEC_RULES, device_of, forward_op
from .record import (DIFFERENTIABLE_VJPS, GraphTape, Variable, attach, backward, enable_grad, grad, inference_mode, is_grad_enabled,
                     mark_written, no_grad, queue_callback, record, recorded_leaves, resolve, set_grad_enabled,
                     set_result_class, tracing, wrap)
from . import functional  # noqa: F401 - torch.autograd.functional
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .rules import RULES
from .tape import Node, Tape, install_op_methods, run_op, sweep

install_op_methods()

__all__ = ["Tape", "Node", "RULES", "device_of", "run_op", "forward_op", "sweep", "record", "backward",
           "no_grad", "enable_grad", "is_grad_enabled", "Variable", "GraphTape", "tracing", "set_result_class",
           "wrap", "resolve", "recorded_leaves", "DISPATCH", "SPEC_RULES", "grad", "attach", "mark_written",
           "set_grad_enabled", "inference_mode", "Function", "FunctionCtx", "once_differentiable",
           "DIFFERENTIABLE_VJPS", "gradcheck", "gradgradcheck", "GradcheckError", "queue_callback"]
