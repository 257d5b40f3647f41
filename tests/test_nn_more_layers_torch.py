"""Unflatten, Bilinear, Embedding.from_pretrained, channel dropout and AlphaDropout against torch."""

import warnings

import numpy as np
import pytest

import torchlean as tl

torch = pytest.importorskip("torch")


def test_unflatten_and_bilinear_match_torch():
    rng = np.random.default_rng(0)
    x1, x2 = rng.standard_normal((4, 3)), rng.standard_normal((4, 5))
    w, b = rng.standard_normal((2, 3, 5)), rng.standard_normal(2)
    res = []
    for lib in (tl, torch):
        m = lib.nn.Bilinear(3, 5, 2).double()
        m.load_state_dict({"weight": lib.tensor(w), "bias": lib.tensor(b)})
        a, c = lib.tensor(x1, requires_grad=True), lib.tensor(x2, requires_grad=True)
        y = m(a, c)
        (y * y).sum().backward()
        u = lib.nn.Unflatten(1, (2, 3))(lib.tensor(rng.standard_normal((2, 6))) * 0 + 1)
        res.append((y.detach().numpy(), a.grad.numpy(), c.grad.numpy(), m.weight.grad.numpy(), tuple(u.shape),
                    sorted(m.state_dict()), repr(m)))
    for p, q in zip(res[0][:4], res[1][:4]):
        np.testing.assert_allclose(p, q, rtol=1e-10)
    assert res[0][4:] == res[1][4:]


def test_embedding_from_pretrained_matches_torch():
    e = np.arange(12.0).reshape(4, 3)
    out = []
    for lib in (tl, torch):
        m = lib.nn.Embedding.from_pretrained(lib.tensor(e), freeze=False, padding_idx=1)
        y = m(lib.tensor([[0, 3], [1, 2]]))
        y.sum().backward()
        frozen = lib.nn.Embedding.from_pretrained(lib.tensor(e))
        out.append((y.tolist(), m.weight.requires_grad, frozen.weight.requires_grad, m.padding_idx,
                    m.weight.grad.tolist()))   # padding_idx's row gets no gradient
    assert out[0] == out[1]


@pytest.mark.parametrize("cls,shape", [("Dropout1d", (8, 64, 5)), ("Dropout2d", (8, 64, 3, 3)),
                                       ("Dropout3d", (4, 32, 2, 2, 2)), ("Dropout2d", (64, 3, 3))])
def test_channel_dropout_drops_whole_channels_like_torch(cls, shape):
    m = getattr(tl.nn, cls)(0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a 3-D input to Dropout2d is (N, C, L), with torch's warning
        y = m(tl.ones(*shape)).numpy()
    spatial = {"Dropout1d": 1, "Dropout2d": 2, "Dropout3d": 3}[cls] if len(shape) != 3 else 1
    per_channel = y.reshape(y.shape[:y.ndim - spatial] + (-1,))
    assert np.all((per_channel == 0).all(-1) | np.isclose(per_channel, 1 / 0.7).all(-1))
    assert 0.15 < (per_channel == 0).all(-1).mean() < 0.45
    m.eval()
    assert np.array_equal(m(tl.ones(*shape)).numpy(), np.ones(shape))
    assert repr(m) == repr(getattr(torch.nn, cls)(0.3))


def test_alpha_dropout_keeps_selu_statistics_like_torch():
    x = np.random.default_rng(1).standard_normal(200000)
    a = tl.nn.AlphaDropout(0.2)(tl.tensor(x)).numpy()
    b = torch.nn.AlphaDropout(0.2)(torch.tensor(x)).numpy()
    assert abs(a.mean() - b.mean()) < 0.02 and abs(a.std() - b.std()) < 0.02
    alpha, p = 1.7580993408473766, 0.2
    scale = 1.0 / np.sqrt((alpha ** 2 * p + 1) * (1 - p))
    dropped = alpha * scale * (p - 1)            # where the mask is 0, whatever x was
    assert abs(np.isclose(a, dropped).mean() - np.isclose(b, dropped).mean()) < 0.01
    kept_ratio = np.isclose(a, x * (1.0 / np.sqrt((1.7580993408473766 ** 2 * 0.2 + 1) * 0.8))
                            + 1.7580993408473766 * 0.2 / np.sqrt((1.7580993408473766 ** 2 * 0.2 + 1) * 0.8)).mean()
    assert 0.77 < kept_ratio < 0.83
