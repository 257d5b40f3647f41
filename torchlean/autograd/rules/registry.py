"""The runtime rules table: how the tape runs each op over a device's kernels.

A :class:`Rule` is written once against the kernel surface ``K`` (NumPy or CuPy):

* ``forward(K, *xs, **attrs) -> (y, saved)``: ``saved`` is whatever the backward
  needs and nothing more (Chainer's "retain only what backward needs");
* ``backward(K, saved, g, needs) -> tuple``: one cotangent per array input, ``None``
  where ``needs[i]`` is False or the input is not differentiable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

RULES: dict[str, "Rule"] = {}


@dataclass(frozen=True)
class Rule:
    name: str
    forward: Callable
    backward: Callable


def defrule(name: str, forward: Callable, backward: Callable) -> Rule:
    if name in RULES:
        raise RuntimeError(f"runtime rule {name!r} registered twice")
    r = Rule(name, forward, backward)
    RULES[name] = r
    return r
