"""nn.init's distributions and nn.utils' vector helpers, against torch's (statistics and exact values)."""

import math

import numpy as np
import pytest

import torchlean as tl

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("fn,kw,mean,std", [
    ("trunc_normal_", dict(mean=1.0, std=2.0, a=-1.0, b=3.0), None, None),
    ("kaiming_uniform_", dict(a=math.sqrt(5)), 0.0, None),
    ("kaiming_normal_", dict(mode="fan_out", nonlinearity="relu"), 0.0, None),
    ("xavier_uniform_", dict(gain=2.0), 0.0, None),
    ("xavier_normal_", dict(), 0.0, None),
])
def test_initializers_have_torchs_statistics(fn, kw, mean, std):
    a = getattr(tl.nn.init, fn)(tl.zeros(400, 300), **kw).numpy()
    b = getattr(torch.nn.init, fn)(torch.zeros(400, 300), **kw).numpy()
    assert float(a.mean()) == pytest.approx(float(b.mean()), abs=0.02 * max(float(b.std()), 1e-3) + 0.01)
    assert float(a.std()) == pytest.approx(float(b.std()), rel=0.03)
    if fn in ("trunc_normal_", "kaiming_uniform_", "xavier_uniform_"):  # bounded: the same support
        lo, hi = (kw["a"], kw["b"]) if fn == "trunc_normal_" else (-np.abs(b).max() * 1.01, np.abs(b).max() * 1.01)
        assert lo <= a.min() and a.max() <= hi


def test_orthogonal_sparse_dirac_match_torch():
    w = tl.nn.init.orthogonal_(tl.zeros(5, 3, 2), gain=1.5).numpy().reshape(5, -1)
    np.testing.assert_allclose(w @ w.T, 2.25 * np.eye(5), atol=1e-5)   # 5 rows of 6: orthonormal rows
    s = tl.nn.init.sparse_(tl.zeros(10, 4), 0.25).numpy()
    assert ((s == 0).sum(0) == math.ceil(0.25 * 10)).all()
    d, t = tl.nn.init.dirac_(tl.zeros(6, 3, 3, 3), groups=2), torch.nn.init.dirac_(torch.zeros(6, 3, 3, 3), groups=2)
    np.testing.assert_array_equal(d.numpy(), t.numpy())
    g = tl.Generator().manual_seed(3)
    a = tl.nn.init.normal_(tl.zeros(5), generator=g).tolist()
    g.manual_seed(3)
    assert tl.nn.init.normal_(tl.zeros(5), generator=g).tolist() == a


def test_parameters_to_vector_round_trip_matches_torch():
    res = []
    for lib in (tl, torch):
        net = lib.nn.Linear(3, 2)
        with lib.no_grad():
            net.weight.copy_(lib.tensor(np.arange(6.0).reshape(2, 3)))
            net.bias.copy_(lib.tensor([7.0, 8.0]))
        v = lib.nn.utils.parameters_to_vector(net.parameters())
        lib.nn.utils.vector_to_parameters(v * 2, net.parameters())
        res.append((v.tolist(), net.weight.tolist(), net.bias.tolist()))
    assert res[0] == res[1]
