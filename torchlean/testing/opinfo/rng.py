"""Test records of the rng family."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError
from . import BadInput, OpInfo, Sample, defop, rand


# ---- dropout --------------------------------------------------------------------------------

def _dropout_samples(rng):
    return [Sample((rand(rng, 8, 16),), {"p": 0.5, "seed": 0, "counter": 0}, "p=0.5"),
            Sample((rand(rng, 3, 4, 5),), {"p": 0.1, "seed": 7, "counter": 3}, "p=0.1"),
            Sample((rand(rng, 6),), {"p": 0.0, "seed": 1, "counter": 0}, "p=0 identity"),
            Sample((rand(rng),), {"p": 0.3, "seed": 2, "counter": 5}, "0-d"),
            Sample((rand(rng, 50),), {"p": 0.9, "seed": 123, "counter": 1}, "p=0.9")]


def _dropout_bad(rng):
    return [BadInput((np.ones(3),), {"p": 1.0, "seed": 0, "counter": 0}, DomainError, "[0, 1)", "p = 1"),
            BadInput((np.ones(3),), {"p": -0.1, "seed": 0, "counter": 0}, DomainError, "-0.1", "p < 0"),
            BadInput((np.ones(3),), {"p": 0.5, "seed": -1, "counter": 0}, DomainError, "seed", "negative seed"),
            BadInput((np.ones(3),), {"p": 0.5, "seed": 0, "counter": 1.5}, DomainError, "counter", "float counter")]


defop(OpInfo("dropout", _dropout_samples, _dropout_bad))
