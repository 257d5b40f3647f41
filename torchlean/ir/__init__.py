"""The IR: graphs of spec ops that can be checked, evaluated (their meaning), saved,
loaded, imported from ONNX, traced from front-end code, compiled to a device
program and checked against their meaning node by node.

    >>> import numpy as np
    >>> from torchlean import ir
    >>> g = ir.Graph([ir.Node(0, "input", (), (2, 3), {"index": 0}),
    ...               ir.Node(1, "linear", (0,), (2, 4)),
    ...               ir.Node(2, "relu", (1,), (2, 4))])
    >>> payload = ir.Payload({(1, "weight"): np.ones((4, 3)), (1, "bias"): np.zeros(4)})
    >>> ir.check(g, payload)
    [(2, 3), (2, 4), (2, 4)]
    >>> ir.evaluate(g, payload, np.ones((2, 3)))[-1].tolist()
    [[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]]

Node kinds are the spec table's op names plus ``input``, ``const`` and ``param``
(:data:`KINDS`, a live view of the spec table); parameterised kinds read their
weights from the payload as :data:`PARAM_INPUTS` lays out.
"""

from ..errors import IRError
from .graph import (INDEX_PARENTS, IR_KINDS, KINDS, PARAM_INPUTS, PARENTS, Graph, KindInfo, Node, Payload,
                    index_input_bounds, index_inputs, kind_info, spec_args)
from .infer import check
from .interpret import DOMAINS, evaluate
from .serialize import FORMAT, load, save
from .onnx import from_onnx
from .compile import LOWERING, Lowering, Program, compile, missing_lowerings
from .equivalence import NodeReport, Report, check_equivalence
from .trace import CompiledModule, compile_module, trace

__all__ = ["Node", "Graph", "Payload", "KINDS", "IR_KINDS", "PARAM_INPUTS", "PARENTS", "KindInfo",
           "kind_info", "spec_args", "index_inputs", "index_input_bounds", "INDEX_PARENTS", "check", "evaluate", "DOMAINS", "save", "load", "FORMAT",
           "from_onnx", "IRError", "compile", "Program", "LOWERING", "Lowering", "missing_lowerings",
           "check_equivalence", "Report", "NodeReport", "trace", "compile_module", "CompiledModule"]
