"""Differences from torch found by the port programs (tests/ports/), checked against torch."""

import math

import numpy as np
import pytest

import torchlean as tl

torch = pytest.importorskip("torch")

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("values", [
    [0.0, -INF], [1.0, -INF], [1.5, NAN], [INF, 2.25, -3.0], [0.0, 0.0], [1e-6, INF],
    [100.0, NAN, 0.0], [NAN], [-0.5, -INF, 12.0], [[0.0, -INF], [0.0, 0.0]],
])
def test_repr_width_ignores_non_finite_values(values):
    # torch pads every value to the width of the finite ones: a causal mask prints tensor([[0., -inf], ...
    assert repr(tl.tensor(values)) == repr(torch.tensor(values))


def test_repr_causal_mask_matches_torch():
    ours = tl.nn.Transformer.generate_square_subsequent_mask(4)
    ref = torch.nn.Transformer.generate_square_subsequent_mask(4)
    assert repr(ours) == repr(ref)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())
