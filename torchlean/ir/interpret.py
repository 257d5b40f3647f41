"""The meaning of an IR graph: run every node's spec forward, in order.

This is the seeds' ``denoteAll``: the value of node ``i`` is the spec function of
its kind applied to the values of its parents (and its payload entries). The
compiled program and every fast path are checked against it.
"""

from __future__ import annotations

import numpy as np

from ..errors import DomainError, ShapeError
from ..spec import SPEC
from .graph import Graph, index_inputs, spec_args
from .infer import check

__all__ = ["evaluate", "DOMAINS"]

#: Domain guards of the interpreter, keyed by kind: ``guard(*spec_args, **attrs)`` returns
#: None or a message. Fast paths follow IEEE here; the meaning refuses (DESIGN.md).
DOMAINS = {
    "log": lambda x, **_: None if np.all(np.asarray(x) > 0) else
    f"log of a non-positive entry (min {np.min(x) if np.size(x) else 'n/a'})",
}


def _cast(v, dtype):
    v = np.asarray(v)
    return v.astype(dtype, copy=False) if v.dtype.kind in "fiu" else v


def evaluate(g: Graph, payload=None, *inputs, dtype=np.float64) -> list:
    """Every node's value under the spec meaning (a list indexed by node id).

    ``inputs[k]`` feeds the input node with ``attrs["index"] == k`` and must have its
    declared shape. Inputs and payload arrays are cast to ``dtype`` (float64 by
    default) before use, so the result is the reference meaning. The graph is
    checked first (:func:`~torchlean.ir.check`, with the payload). ``log`` of a
    non-positive entry raises :class:`~torchlean.errors.DomainError` naming the node.

        >>> import numpy as np
        >>> from torchlean import ir
        >>> g = ir.Graph([ir.Node(0, "input", (), (2,), {"index": 0}),
        ...               ir.Node(1, "const", (), (2,)),
        ...               ir.Node(2, "mul", (0, 1), (2,))])
        >>> vals = ir.evaluate(g, ir.Payload({(1, "value"): np.array([2.0, 3.0])}), np.array([1.0, 4.0]))
        >>> vals[-1].tolist()
        [2.0, 12.0]
    """
    payload = {} if payload is None else payload
    check(g, payload)
    n_inputs = len(g.inputs)
    if len(inputs) != n_inputs:
        raise ShapeError(f"evaluate: the graph takes {n_inputs} input(s), got {len(inputs)}")
    params = {k: _cast(v, dtype) for k, v in payload.items()}
    env: list = []                                   # env[i] is node i's value
    ints = index_inputs(g)
    for n in g.nodes:
        if n.kind == "input":
            v = np.asarray(inputs[n.attrs["index"]])
            if v.dtype.kind not in "iu" or n.attrs["index"] not in ints:   # an index keeps its dtype
                v = v.astype(dtype)
            if v.shape != n.out_shape:
                raise ShapeError(f"evaluate: input {n.attrs['index']} (node {n.id}) has shape "
                                 f"{v.shape}, the graph declares {n.out_shape}")
        elif n.kind in ("const", "param"):
            v = params[(n.id, "value")]
        else:
            args = spec_args(n, [env[p] for p in n.parents], params)
            guard = DOMAINS.get(n.kind)
            msg = guard(*args, **n.attrs) if guard else None
            if msg:
                raise DomainError(f"evaluate: node {n.id} ({n.kind}): {msg}")
            v = np.asarray(SPEC[n.kind].forward(*args, **n.attrs))
        env.append(v)
    return env
