"""Test records: casts and device moves."""

from __future__ import annotations

import numpy as np

from ...errors import DeviceError, DTypeError
from . import BadInput, OpInfo, Sample, defop, rand

defop(OpInfo("cast", lambda rng: [Sample((rand(rng, 3, 4),), {"dtype": "float64"}),
                                   Sample((rand(rng, 5),), {"dtype": "float32"}),
                                   # truncation toward zero; no gradient
                                   Sample((rand(rng, 2, 5, lo=-3, hi=3),), {"dtype": "int64"}),
                                   Sample((rng.integers(-1, 2, size=(7,)).astype(np.float64),), {"dtype": "bool"})],
             lambda rng: [BadInput((np.ones(3),), {"dtype": "complex128"}, DTypeError, "complex128"),
                          BadInput((np.ones(3),), {"dtype": "int3"}, DTypeError, "int3")],
             # rounding to float32 has no float64 central difference; the tape VJP is checked
             fd=False))
defop(OpInfo("to_device", lambda rng: [Sample((rand(rng, 3, 4),), {"device": "cpu"})],
             lambda rng: [BadInput((np.ones(3),), {"device": "tpu"}, DeviceError, "tpu")]))
