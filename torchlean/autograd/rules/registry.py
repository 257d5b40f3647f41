"""The runtime rules table: how the tape runs each op over a device's kernels.

A :class:`Rule` is written once against the kernel surface ``K`` (NumPy or CuPy):

* ``forward(K, *xs, **attrs) -> (y, saved)``: ``saved`` is whatever the backward
  needs and nothing more (Chainer's "retain only what backward needs");
* ``backward(K, saved, g, needs) -> tuple``: one cotangent per array input, ``None``
  where ``needs[i]`` is False or the input is not differentiable;
* ``infer(K, *xs, **attrs) -> y`` (optional): the forward's value without what only the
  backward needs, for a result nothing will differentiate (no grad mode, no input requiring
  grad); the same value as ``forward``'s, bit for bit.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

from ...spec.registry import family_of_module

RULES: dict[str, "Rule"] = {}


@dataclass(frozen=True)
class Rule:
    """``checks_shapes``: the forward runs the shape rule of each op it is made of before that
    op's kernels (a compound), so dispatch does not run the op's own shape rule, which would
    compose the same rules once more.

    ``region(saved) -> (shape, key)``, for a one-input op whose cotangent is ``g`` written at ``key``
    of zeros of ``shape`` (its backward is ``basic_index_bwd(g, shape, key)``): the reverse loop
    adds ``g`` at ``key`` of the input's gradient instead (``basic_index_add``), so the pieces of a
    split cost one zero fill between them, not one each plus the sums."""
    name: str
    forward: Callable
    backward: Callable
    family: str = ""
    checks_shapes: bool = False
    region: Callable | None = None
    infer: Callable | None = None


#: The ops whose rule has an ``infer``: the eager front end asks for it only for these.
INFER: set = set()


def defrule(name: str, forward: Callable, backward: Callable, family: str | None = None,
            checks_shapes: bool = False, region: Callable | None = None, infer: Callable | None = None) -> Rule:
    """Register the runtime rule of ``name``; twice is a bug. ``family`` defaults to that of the
    calling module (``torchlean.autograd.rules.<family>``)."""
    if name in RULES:
        raise RuntimeError(f"runtime rule {name!r} registered twice")
    r = Rule(name, forward, backward, family or family_of_module(sys._getframe(1).f_globals["__name__"]),
             checks_shapes, region, infer)
    RULES[name] = r
    if infer is not None:
        INFER.add(name)
    return r


def pick(needs, *grads):
    """``grads`` with None where ``needs`` is False: what a backward returns for unneeded inputs."""
    return tuple(gr if nd else None for gr, nd in zip(grads, needs))
