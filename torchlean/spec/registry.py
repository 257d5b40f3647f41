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
* ``arity``: number of array inputs, or ``-1`` for a variadic op (concat, stack);
* ``family``: the op's family (:data:`FAMILIES`), the name of the file that defines it here,
  its runtime rule in ``autograd/rules/``, its kernels in ``kernels/host/`` and
  ``kernels/cuda/`` and its test record in ``testing/opinfo/`` — for a primitive. A compound
  (``compound=True``) is defined in the table of :mod:`torchlean.spec.compound` instead and
  gets everything else from its formula;
* ``ints``: whether the op is defined on integer and bool inputs (with an integer result: moving,
  comparing, adding or summing integers). An op that is not (``sqrt``, ``softmax``, ``mean``) is
  refused on them by the dispatch, naming the op, so no float result is ever truncated into an
  integer dtype; the front end converts first where torch does (``int_tensor.sqrt()`` is float32).
  The families that only move values (shape, index, memory) are; elsewhere the default is
  :data:`INT_OPS`.
* ``why``: for a primitive whose meaning is also a formula of other ops, the reason it is a
  primitive (a fused kernel for speed, numerical stability).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

#: The op families: one file name each in every layer (see the module docs).
FAMILIES = ("elementwise", "reduce", "shape", "index", "linalg", "softmax", "loss", "rng", "norm",
            "attention", "spectral", "scan", "conv", "memory")

SPEC: dict[str, "SpecOp"] = {}

#: The ops outside the value-moving families that are defined on integer (and bool) inputs.
INT_OPS = frozenset({"add", "sub", "mul", "neg", "abs", "relu", "maximum", "minimum", "clamp", "compare", "where",
                     "pow", "sum", "reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin"})
_INT_FAMILIES = ("shape", "index", "memory")


def family_of_module(module: str) -> str:
    """The family a module of a family layer belongs to: its own name (``...spec.elementwise``)."""
    return module.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class SpecOp:
    name: str
    forward: Callable
    vjp: Callable
    shape: Callable
    arity: int
    family: str = ""
    compound: bool = False
    why: str = ""
    ints: bool = False


def defspec(name: str, forward: Callable, vjp: Callable, shape: Callable, arity: int, family: str | None = None,
            compound: bool = False, why: str = "", ints: bool | None = None) -> SpecOp:
    """Register the meaning of ``name``; registering a name twice is a bug. ``family`` defaults to
    that of the calling module (``torchlean.spec.<family>``)."""
    if name in SPEC:
        raise RuntimeError(f"spec op {name!r} registered twice")
    family = family or family_of_module(sys._getframe(1).f_globals["__name__"])
    if ints is None:
        ints = family in _INT_FAMILIES or name in INT_OPS
    op = SpecOp(name, forward, vjp, shape, arity, family, compound, why, ints)
    SPEC[name] = op
    return op
