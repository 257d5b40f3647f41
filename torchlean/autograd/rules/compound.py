"""Runtime rules of the compound ops (:mod:`torchlean.spec.compound`), derived from their formulas.

A compound's forward runs its parts' runtime rules over the kernels and keeps them as tape nodes;
its backward is the tape's own reverse loop (:func:`torchlean.autograd.node.sweep`) over those
nodes. Each part's shape rule runs before its kernels (the rule ``checks_shapes``): the compound's
own shape rule, which composes the same rules, is not run again by dispatch.
"""

from __future__ import annotations

from ...errors import ShapeError
from ...spec import SPEC
from ...spec.compound import COMPOUNDS, run_formula
from ..node import Node, sweep
from .registry import RULES, defrule


def _compound_rule(c):
    def forward(K, *xs, **attrs):
        saved = []

        def apply(op, vals, a):
            shape = tuple(SPEC[op].shape(*[v.shape for v in vals], **a))
            y, s = RULES[op].forward(K, *vals, **a)
            if y.shape != shape:
                raise ShapeError(f"{op}: kernel produced shape {tuple(y.shape)}, shape rule says {shape}")
            saved.append(s)
            return y

        out, P = run_formula(c, xs, attrs, apply)
        nodes = [Node(None, x, True) for x in xs]
        for (op, ins, _, _), s in zip(P.steps, saved):
            nodes.append(Node(op, P.values[len(nodes)], True, ins, None, None, RULES[op], K, s, (True,) * len(ins)))
        return P.values[out], (nodes, out)

    def backward(K, saved, g, needs):
        nodes, out = saved
        grads = {out: g}
        sweep(nodes, grads, out, keep=range(len(needs)))
        return tuple(grads.get(i) if nd else None for i, nd in enumerate(needs))

    return forward, backward


for _name, _c in COMPOUNDS.items():
    defrule(_name, *_compound_rule(_c), family=_c.family, checks_shapes=True)
