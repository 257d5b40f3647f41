"""The spec table: one :class:`SpecOp` per op name.

A spec op is the reference meaning of an op, written for clarity in NumPy and
valid in float64:

* ``forward(*xs, **attrs) -> y``: ``xs`` are the op's array inputs (every one a
  float array), ``attrs`` its non-array arguments (axes, exponents, host index
  sequences, targets, masks); attrs are keyword-only everywhere.
* ``vjp(g, *xs, **attrs) -> tuple``: one cotangent per array input, each of its
  input's shape, or ``None`` where the input is not differentiable.
* ``shape(*in_shapes, **attrs) -> out_shape``: the shape rule shared by the
  front end, the tape and the IR checker; it raises :class:`ShapeError` (or another
  :class:`TorchLeanError`) naming the op and the offending shapes or values.
* ``arity``: number of array inputs, or ``-1`` for a variadic op (concat, stack).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

SPEC: dict[str, "SpecOp"] = {}


@dataclass(frozen=True)
class SpecOp:
    name: str
    forward: Callable
    vjp: Callable
    shape: Callable
    arity: int


def defspec(name: str, forward: Callable, vjp: Callable, shape: Callable, arity: int) -> SpecOp:
    """Register the meaning of ``name``; registering a name twice is a bug."""
    if name in SPEC:
        raise RuntimeError(f"spec op {name!r} registered twice")
    op = SpecOp(name, forward, vjp, shape, arity)
    SPEC[name] = op
    return op
