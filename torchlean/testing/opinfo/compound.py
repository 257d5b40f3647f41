"""Test records of the compound ops, derived from the test hints of their table entries
(:mod:`torchlean.spec.compound`): a compound gets every contract check of a primitive."""

from __future__ import annotations

from ...spec.compound import COMPOUNDS
from . import BadInput, OpInfo, Sample, defop, rand_away


def _samples(c):
    lo, hi = c.domain

    def samples(rng):
        return [Sample(tuple(rand_away(rng, *s, lo=lo, hi=hi, points=c.kinks) for s in shapes), dict(a),
                       f"{shapes} {a}") for shapes in c.shapes for a in c.cases]
    return samples


def _bad(c):
    return lambda rng: [BadInput(inputs, dict(attrs), error, match) for inputs, attrs, error, match in c.bad]


for _c in COMPOUNDS.values():
    defop(OpInfo(_c.name, _samples(_c), _bad(_c), torch_ref=_c.torch, family=_c.family))
