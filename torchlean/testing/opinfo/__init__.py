"""The op test registry: one small :class:`OpInfo` record per op drives every
contract check (pytest and ``torchlean check``) on every device.

A record says how to draw sample inputs (float64, kept off kinks; ``edge`` samples
sit exactly on kinks and ties and at large magnitudes), which inputs
are differentiable, which bad inputs must raise which error, and optionally how
torch computes the same thing (the test oracle).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import import_module
from typing import Callable

import numpy as np

from ...spec import FAMILIES
from ...spec.registry import family_of_module

# Tolerances once per device: |device - spec| <= atol + rtol * max|spec| (float32 vs float64).
DEVICE_TOL = {"cpu": (2e-5, 2e-4), "cuda": (5e-5, 5e-4)}


@dataclass
class Sample:
    inputs: tuple            # float64 NumPy arrays (the op's array inputs)
    attrs: dict = field(default_factory=dict)
    desc: str = ""


@dataclass
class BadInput:
    inputs: tuple            # arrays (any dtype) handed to the op
    attrs: dict
    error: type              # the TorchLeanError subclass that must be raised
    match: str = ""          # a substring the message must contain (besides the op name)
    desc: str = ""


@dataclass
class OpInfo:
    name: str
    samples: Callable[[np.random.Generator], list]          # rng -> [Sample]
    bad: Callable[[np.random.Generator], list] = lambda rng: []  # rng -> [BadInput]
    diff: tuple | None = None     # indices of differentiable inputs (None: all)
    fd: bool = True               # check the spec VJP against central differences
    torch_ref: Callable | None = None  # torch_ref(torch, *tensors, **attrs) -> tensor
    tol_scale: float = 1.0        # multiplies DEVICE_TOL for ops that sum many terms
    devices: tuple = ("cpu", "cuda")
    family: str = ""            # set by defop: the family file that registers the record
    # Samples at kinks, ties and large magnitudes (opinfo/edge.py): checked by ``torchlean check``
    # (device forward and device VJP against the spec) but never by finite differences, which are
    # undefined at a kink and meaningless near overflow.
    edge: Callable[[np.random.Generator], list] = lambda rng: []

    def differentiable(self, n_inputs: int) -> tuple:
        return tuple(range(n_inputs)) if self.diff is None else self.diff


OPINFOS: dict[str, OpInfo] = {}


def defop(info: OpInfo) -> OpInfo:
    """Register ``info`` in the family of the calling module; registering a name twice is a bug."""
    info.family = info.family or family_of_module(sys._getframe(1).f_globals["__name__"])
    if info.name in OPINFOS:
        raise RuntimeError(f"opinfo {info.name!r} registered twice")
    OPINFOS[info.name] = info
    return info


def rand(rng, *shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape)


def rand_away(rng, *shape, lo=-1.0, hi=1.0, gap=0.05, points=(0.0,)):
    """Uniform samples kept at least ``gap`` away from the kinks in ``points``."""
    x = rng.uniform(lo, hi, size=shape)
    for p in points:
        near = np.abs(x - p) < gap
        x = np.where(near, p + np.where(x >= p, gap, -gap) * 2, x)
    return x


for _family in FAMILIES:
    import_module(f"{__name__}.{_family}")  # registration
from . import compound  # noqa: E402,F401  (registration)
from . import edge  # noqa: E402,F401  (edge samples of the records above)

__all__ = ["OpInfo", "Sample", "BadInput", "OPINFOS", "defop", "DEVICE_TOL", "rand", "rand_away"]
