"""Compound ops: each defined once, in the table below, as a formula over primitives.

A compound's formula is a function ``formula(P, *xs, **attrs)`` that combines its array inputs
only through calls ``P.<op>(*arrays, **attributes)`` of ops of :data:`~torchlean.spec.SPEC` (its
*parts*) and reads shapes with ``P.shape(v)``. From that one formula the compound gets:

* its meaning here: the forward runs the parts' spec forwards; the VJP runs the parts' spec VJPs
  in reverse order; the shape rule runs the parts' shape rules on shapes (an error a part raises
  is re-raised naming the compound first);
* its runtime rule (:mod:`torchlean.autograd.rules.compound`): the parts' runtime rules over the
  device kernels, differentiated by the tape's own reverse loop;
* its IR kind and lowering (a compound is an op like any other) and its test record
  (:mod:`torchlean.testing.opinfo.compound`), from the test hints of its entry.

So a compound needs no spec, rule or kernel code of its own. It becomes a primitive only for a
reason (a fused kernel for speed, numerical stability), stated in that primitive's ``why``.

    >>> import numpy as np
    >>> from torchlean.spec import SPEC
    >>> SPEC["leaky_relu"].forward(np.array([-2.0, 3.0]), negative_slope=0.1).tolist()
    [-0.2, 3.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import DomainError, ShapeError, TorchLeanError
from .registry import SPEC, defspec


@dataclass(frozen=True)
class Compound:
    """One entry of :data:`COMPOUNDS`: the formula, and how to test it.

    ``cases``: attribute dicts to test; ``shapes``: tuples of input shapes to test (one tuple per
    sample); ``domain``/``kinks``: sample inputs are uniform on ``domain`` and kept away from the
    ``kinks``; ``torch``: ``torch_ref(torch, *tensors, **attrs)``; ``bad``: ``(inputs, attrs,
    error class, message fragment)`` tuples that must raise."""
    name: str
    formula: Callable
    arity: int
    family: str
    cases: tuple = ({},)
    shapes: tuple = (((7,),), ((3, 4),), ((2, 3, 5),), ((),))
    domain: tuple = (-2.0, 2.0)
    kinks: tuple = ()
    torch: Callable | None = None
    bad: tuple = ()


#: The compound table, by name.
COMPOUNDS: dict[str, Compound] = {}


class _Handle:
    """A value inside a formula: the index of its slot in the run."""

    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


class _Parts:
    """What a formula calls ``P``: each ``P.<op>(...)`` applies one part through ``apply``. The
    methods, one per op of the spec table, are added by :func:`defcompound` (an attribute found
    on the class costs a tenth of a ``__getattr__`` call, and a formula runs on every eager call)."""

    __slots__ = ("values", "steps", "_apply", "_shape_of")

    def __init__(self, values, apply, shape_of):
        self.values = values            # slot -> value (arrays, or shapes for the shape rule)
        self.steps = []                 # (op, input slots, attrs, output slot)
        self._apply = apply
        self._shape_of = shape_of

    def shape(self, h):
        return self._shape_of(self.values[h.i])

    def __getattr__(self, op):
        raise AttributeError(f"a compound's formula can call only ops of the spec table, not {op!r}")


def _part(op):
    def part(self, *hs, **attrs):
        values = self.values
        slots = tuple([h.i for h in hs])
        values.append(self._apply(op, [values[i] for i in slots], attrs))
        out = len(values) - 1
        self.steps.append((op, slots, attrs, out))
        return _Handle(out)
    part.__name__ = part.__qualname__ = op
    return part


def run_formula(compound: Compound, inputs, attrs, apply, shape_of=np.shape):
    """Run ``compound``'s formula with ``apply(op, values, attrs) -> value`` for every part.

    Returns ``(output slot, parts)``: ``parts.values`` holds every value (the inputs in slots
    0 .. arity-1) and ``parts.steps`` the parts in the order they ran. An error raised inside
    is re-raised, same class, with the compound's name first."""
    P = _Parts(list(inputs), apply, shape_of)
    try:
        out = compound.formula(P, *[_Handle(i) for i in range(len(inputs))], **attrs)
    except TorchLeanError as e:
        raise type(e)(f"{compound.name}: {e}") from None
    except TypeError as e:
        raise TorchLeanError(f"{compound.name}: bad arguments {sorted(attrs)}: {e}") from None
    return out.i, P


def _spec_op(c: Compound):
    def forward(*xs, **attrs):
        out, P = run_formula(c, xs, attrs, lambda op, vs, a: SPEC[op].forward(*vs, **a))
        return P.values[out]

    def vjp(g, *xs, **attrs):
        out, P = run_formula(c, xs, attrs, lambda op, vs, a: SPEC[op].forward(*vs, **a))
        grads = {out: g}
        for op, ins, a, o in reversed(P.steps):
            gy = grads.pop(o, None)
            if gy is None:
                continue
            for i, gi in zip(ins, SPEC[op].vjp(gy, *[P.values[k] for k in ins], **a)):
                if gi is not None:
                    grads[i] = gi if i not in grads else grads[i] + gi
        return tuple(grads.get(i, np.zeros_like(np.asarray(x, dtype=np.float64))) for i, x in enumerate(xs))

    def shape(*shapes, **attrs):
        out, P = run_formula(c, [tuple(s) for s in shapes], attrs,
                             lambda op, ss, a: tuple(SPEC[op].shape(*ss, **a)), shape_of=tuple)
        return P.values[out]

    return forward, vjp, shape


def defcompound(name, formula, arity, family, **tests) -> Compound:
    """Add a compound to :data:`COMPOUNDS` and its meaning to the spec table."""
    c = Compound(name, formula, arity, family, **tests)
    if name in COMPOUNDS:
        raise RuntimeError(f"compound {name!r} registered twice")
    COMPOUNDS[name] = c
    for op in SPEC:  # the parts a formula can call: every op defined so far
        if op not in _Parts.__dict__:
            setattr(_Parts, op, _part(op))
    forward, vjp, shape = _spec_op(c)
    defspec(name, forward, vjp, shape, arity, family=family, compound=True)
    return c


# ---- the table --------------------------------------------------------------------------------

def _slope(v):
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise DomainError(f"negative_slope must be a finite number, got {v!r}")
    return float(v)


defcompound(
    "leaky_relu",
    # relu(x) - s * relu(-x): exactly x above 0 and exactly s * x below; the gradient at 0 is 0
    # (relu'(0) = 0, DESIGN.md), where PyTorch's is s.
    lambda P, x, *, negative_slope=0.01: P.sub(P.relu(x), P.scale(P.relu(P.neg(x)),
                                                                 c=_slope(negative_slope))),
    1, "elementwise",
    cases=({}, {"negative_slope": 0.2}, {"negative_slope": -1.5}), kinks=(0.0,),
    torch=lambda torch, x, *, negative_slope=0.01: torch.nn.functional.leaky_relu(x, negative_slope),
    bad=(((np.ones(3),), {"negative_slope": float("nan")}, DomainError, "negative_slope"),),
)


def _l1_loss(P, a, b, *, reduction="mean"):
    d = P.abs(P.sub(a, b))
    if reduction == "none":
        return d
    if reduction == "sum":
        return P.sum(d)
    if reduction == "mean":
        return P.reduce_mean(d, axis=tuple(range(len(P.shape(d)))))
    raise DomainError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


defcompound(
    "l1_loss", _l1_loss, 2, "loss",
    cases=({}, {"reduction": "sum"}, {"reduction": "none"}),
    shapes=(((7,), (7,)), ((3, 4), (3, 4)), ((2, 3, 5), (2, 3, 5)), ((3, 4), (4,))),
    torch=lambda torch, a, b, *, reduction="mean": torch.nn.functional.l1_loss(
        *torch.broadcast_tensors(a, b), reduction=reduction),
    bad=(((np.ones((2, 3)), np.ones(4)), {}, ShapeError, "(2, 3)"),
         ((np.ones(3), np.ones(3)), {"reduction": "avg"}, DomainError, "reduction")),
)
