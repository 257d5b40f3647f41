"""torchlean.data: loaders, digits, Burgers' equation, the standard-library text corpus."""

import math
import sys

import numpy as np
import pytest

import torchlean as tl
from torchlean.data import (
    CharDataset, CharTokenizer, DataLoader, Dataset, TensorDataset, burgers_dataset, burgers_solve,
    char_lm_batches, default_collate, gaussian_random_field, permutation, random_split, text_corpus,
    train_val_split, unigram_baseline,
)
from torchlean.errors import DomainError, IndexRangeError, ShapeError
from torchlean.spec.rng import uniform


# ---- datasets and the loader ----------------------------------------------------------------

def _toy(n=10):
    x = tl.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3))
    y = tl.tensor(np.arange(n, dtype=np.int32))
    return TensorDataset(x, y)


def test_tensor_dataset_indexing():
    ds = _toy()
    assert len(ds) == 10
    x, y = ds[3]
    assert x.tolist() == [9.0, 10.0, 11.0] and int(y) == 3
    assert ds[-1][0].tolist() == [27.0, 28.0, 29.0]
    with pytest.raises(IndexRangeError, match="index 10 out of range"):
        ds[10]
    with pytest.raises(ShapeError, match=r"\(3, 2\).*\(4,\)"):
        TensorDataset(tl.ones(3, 2), tl.ones(4))


def test_loader_batches_len_and_drop_last():
    ds = _toy(10)
    loader = DataLoader(ds, batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    assert [tuple(b[0].shape) for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert batches[0][1].dtype == np.int64 and batches[0][0].dtype == np.float32
    assert np.concatenate([b[1].numpy() for b in batches]).tolist() == list(range(10))
    dl = DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dl) == 2 and [tuple(b[0].shape) for b in dl] == [(4, 3), (4, 3)]
    assert len(DataLoader(ds, batch_size=5, drop_last=True)) == 2
    with pytest.raises(ShapeError, match="batch_size"):
        DataLoader(ds, batch_size=0)


def test_shuffle_reproducible_and_differs_across_epochs():
    ds = _toy(50)

    def epoch_orders(loader, k):
        return [np.concatenate([b[1].numpy() for b in loader]) for _ in range(k)]

    a = epoch_orders(DataLoader(ds, batch_size=8, shuffle=True, seed=7), 3)
    b = epoch_orders(DataLoader(ds, batch_size=8, shuffle=True, seed=7), 3)
    for e in range(3):
        assert sorted(a[e].tolist()) == list(range(50))   # each epoch is a permutation
        assert np.array_equal(a[e], b[e])                   # same seed, same epochs
    assert not np.array_equal(a[0], a[1]) and not np.array_equal(a[1], a[2])
    c = epoch_orders(DataLoader(ds, batch_size=8, shuffle=True, seed=8), 1)
    assert not np.array_equal(a[0], c[0])
    # The documented formula: argsort of the float64 uniforms of key (seed, epoch).
    expect = np.argsort(uniform(50, 7, 1, np.float64), kind="stable")
    assert np.array_equal(a[1], expect)
    # set_epoch jumps to an epoch's order.
    dl = DataLoader(ds, batch_size=50, shuffle=True, seed=7)
    dl.set_epoch(2)
    assert np.array_equal(next(iter(dl))[1].numpy(), a[2])


def test_shuffle_without_seed_follows_manual_seed():
    ds = _toy(20)

    def first_epoch():
        return np.concatenate([b[1].numpy() for b in DataLoader(ds, batch_size=6, shuffle=True)])

    tl.manual_seed(3)
    a = first_epoch()
    tl.manual_seed(3)
    assert np.array_equal(a, first_epoch())
    assert sorted(a.tolist()) == list(range(20))


class _Squares(Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"x": float(i) ** 2, "i": i, "v": np.full(2, i, dtype=np.float64)}


def test_generic_dataset_collate_and_fast_path_agree():
    out = list(DataLoader(_Squares(), batch_size=3))
    assert len(out) == 3
    assert out[0]["x"].dtype == np.float32 and out[0]["x"].tolist() == [0.0, 1.0, 4.0]
    assert out[0]["i"].dtype == np.int64 and out[2]["i"].tolist() == [6]
    assert out[1]["v"].dtype == np.float64 and out[1]["v"].shape == (3, 2)
    ds = _toy(13)
    fast = list(DataLoader(ds, batch_size=4, shuffle=True, seed=1))
    slow = list(DataLoader(ds, batch_size=4, shuffle=True, seed=1, collate_fn=default_collate))
    for f, s in zip(fast, slow):
        assert np.array_equal(f[0].numpy(), s[0].numpy()) and np.array_equal(f[1].numpy(), s[1].numpy())
        assert f[1].dtype == s[1].dtype == np.int64
    with pytest.raises(ShapeError, match=r"\(2,\) and \(3,\)"):
        default_collate([np.zeros(2), np.zeros(3)])


def test_random_split():
    ds = _toy(10)
    a, b = random_split(ds, [7, 3], seed=0)
    ia, ib = a.indices.tolist(), b.indices.tolist()
    assert len(a) == 7 and len(b) == 3 and sorted(ia + ib) == list(range(10))
    a2, _ = random_split(ds, [7, 3], seed=0)
    assert a2.indices.tolist() == ia
    assert random_split(ds, [7, 3], seed=1)[0].indices.tolist() != ia
    assert [len(s) for s in random_split(ds, [0.5, 0.25, 0.25], seed=0)] == [6, 2, 2]
    # A subset batches through its parent's fast path and indexes like a list.
    x, y = next(iter(DataLoader(b, batch_size=3)))
    assert y.tolist() == ib and x.shape == (3, 3)
    assert int(b[0][1]) == ib[0]
    with pytest.raises(ShapeError, match="do not sum"):
        random_split(ds, [5, 3])
    assert sorted(permutation(100, 5).tolist()) == list(range(100))


# ---- digits ---------------------------------------------------------------------------------

def test_digits_split_balance_and_range():
    from torchlean.data import as_images, load_digits
    x, y = load_digits("train")
    xt, yt = load_digits("test")
    assert x.shape == (1438, 64) and xt.shape == (359, 64) and y.shape == (1438,)
    assert x.dtype == np.float32 and y.dtype == np.int64
    xn, xtn = x.numpy(), xt.numpy()
    assert xn.min() == 0.0 and xn.max() == 1.0
    # Pixels are counts 0..16 scaled by 1/16.
    assert np.array_equal(xn * 16, np.round(xn * 16))
    counts_all = np.bincount(np.concatenate([y.numpy(), yt.numpy()]), minlength=10)
    assert counts_all.tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    ct = np.bincount(yt.numpy(), minlength=10)
    assert np.all(np.abs(ct - 0.2 * counts_all) <= 0.5)          # stratified
    # Train and test are disjoint: no test row appears in the train set.
    train_rows = {r.tobytes() for r in np.concatenate([xn, y.numpy()[:, None]], 1)}
    assert not any(r.tobytes() in train_rows for r in np.concatenate([xtn, yt.numpy()[:, None]], 1))
    x2, _ = load_digits("train")
    assert np.array_equal(x2.numpy(), xn)
    assert not np.array_equal(load_digits("test", seed=1)[1].numpy(), yt.numpy())
    raw, _ = load_digits("all", normalize=False)
    assert raw.shape == (1797, 64) and raw.numpy().max() == 16.0
    img = as_images(xt)
    assert img.shape == (359, 1, 8, 8) and np.array_equal(img.numpy()[5, 0, 2], xtn[5, 16:24])
    assert as_images(xtn).shape == (359, 1, 8, 8)
    with pytest.raises(DomainError, match="split"):
        load_digits("valid")


def test_digits_need_no_scikit_learn(monkeypatch):
    from torchlean.data import digits
    monkeypatch.setitem(sys.modules, "sklearn", None)             # importing it would fail
    x, y = digits.load_digits("all", normalize=False)
    assert x.shape == (1797, 64) and y.numpy()[:10].tolist() == list(range(10))


def test_shipped_digits_equal_scikit_learn_s():
    sk = pytest.importorskip("sklearn.datasets")
    from torchlean.data import load_digits
    x, y = load_digits("all", normalize=False)
    d = sk.load_digits()
    assert np.array_equal(x.numpy(), d.data.astype(np.float32)) and np.array_equal(y.numpy(), d.target)


# ---- Burgers' equation ----------------------------------------------------------------------

def _grid(n):
    return np.arange(n) / n


def test_burgers_matches_cole_hopf_solution():
    # phi = 1 + a exp(-4 pi^2 nu t) cos(2 pi x) solves the heat equation, so
    # u = -2 nu phi_x / phi solves viscous Burgers exactly (Cole-Hopf).
    nu, a, x = 0.1, 0.5, _grid(128)

    def exact(t):
        e = a * math.exp(-4 * math.pi ** 2 * nu * t)
        return 4 * math.pi * nu * e * np.sin(2 * math.pi * x) / (1 + e * np.cos(2 * math.pi * x))

    for t in (0.05, 0.3):
        u = burgers_solve(exact(0.0), nu, t)
        assert np.abs(u - exact(t)).max() < 1e-6 * np.abs(exact(0.0)).max()


def test_burgers_small_sine_decays_like_heat_equation():
    nu, t, eps, x = 0.05, 0.8, 1e-4, _grid(64)
    u = burgers_solve(eps * np.sin(2 * math.pi * 3 * x), nu, t)
    amp = np.abs(np.fft.rfft(u)[3]) * 2 / 64
    assert abs(amp / eps - math.exp(-nu * (6 * math.pi) ** 2 * t)) < 1e-6


def test_burgers_conserves_mean_and_dissipates_energy():
    u0 = 0.3 + gaussian_random_field(4, 64, seed=2)
    energies = [np.mean(u0 ** 2, axis=-1)]
    for t in (0.1, 0.2, 0.4):
        u = burgers_solve(u0, 0.02, t)
        assert np.allclose(u.mean(-1), u0.mean(-1), atol=1e-12, rtol=0)
        energies.append(np.mean(u ** 2, axis=-1))
    assert np.all(np.diff(np.array(energies), axis=0) < 0)
    with pytest.raises(DomainError, match="nu"):
        burgers_solve(u0, -1.0, 1.0)


def test_gaussian_random_field_statistics_and_resolution_consistency():
    f = gaussian_random_field(400, 64, seed=0)
    assert f.shape == (400, 64) and np.abs(f.mean(-1)).max() < 1e-12   # mean zero
    # Pointwise variance = sum over k >= 1 of 2 sigma^2 (kappa^2 + tau^2)^-2 for the kept modes.
    k = np.arange(1, 22)
    var = np.sum(2 * 625.0 * ((2 * np.pi * k) ** 2 + 25.0) ** -2)
    assert abs(f.var() / var - 1) < 0.1
    # The same seed on a 4x finer grid has the same low modes.
    g = gaussian_random_field(3, 256, seed=0)
    assert np.allclose(np.fft.rfft(g)[:, 1:22] / 256, np.fft.rfft(f[:3])[:, 1:22] / 64, atol=1e-12)


def test_burgers_dataset_deterministic_cached_and_prefix_stable(tmp_path, monkeypatch):
    u0, uT = burgers_dataset(6, grid=64, seed=1, cache_dir=tmp_path)
    assert u0.shape == uT.shape == (6, 64) and u0.dtype == uT.dtype == np.float32
    files = list(tmp_path.glob("burgers-*.npz"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    a0, aT = burgers_dataset(6, grid=64, seed=1, cache=False)
    assert np.array_equal(a0.numpy(), u0.numpy()) and np.array_equal(aT.numpy(), uT.numpy())
    # Served from the cache: overwrite the file's content and see it come back.
    np.savez(files[0], u0=np.zeros((6, 64), np.float32), uT=np.ones((6, 64), np.float32))
    c0, cT = burgers_dataset(6, grid=64, seed=1, cache_dir=tmp_path)
    assert c0.numpy().sum() == 0 and cT.numpy().sum() == 6 * 64
    # TORCHLEAN_CACHE is the default directory; other parameters get other files.
    monkeypatch.setenv("TORCHLEAN_CACHE", str(tmp_path / "env"))
    burgers_dataset(3, grid=64, seed=1, nu=0.02)
    assert len(list((tmp_path / "env").glob("burgers-*.npz"))) == 1
    # Sample i does not depend on how many samples were asked for.
    p0, pT = burgers_dataset(3, grid=64, seed=1, cache=False)
    assert np.array_equal(p0.numpy(), u0.numpy()[:3]) and np.allclose(pT.numpy(), uT.numpy()[:3], atol=1e-7)
    assert not np.array_equal(burgers_dataset(3, grid=64, seed=2, cache=False)[0].numpy(), p0.numpy())
    # The solution is nontrivial and resolved: a 4x finer solve from the same u0 agrees
    # (to about 1e-4 at 64 points; 1e-7 at the default 128).
    assert 0.1 < uT.numpy().std() / u0.numpy().std() < 0.9
    _, fT = burgers_dataset(6, grid=64, seed=1, oversample=4, cache=False)
    assert np.abs(fT.numpy() - uT.numpy()).max() < 1e-3 * np.abs(uT.numpy()).max()


# ---- text corpus ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus():
    return text_corpus(max_chars=200_000, seed=0)


def test_text_corpus_deterministic_and_nontrivial(corpus):
    text, vocab = corpus
    assert len(text) == 200_000
    assert text_corpus(max_chars=200_000, seed=0) == corpus
    assert text_corpus(max_chars=200_000, seed=1)[0] != text
    assert vocab == "".join(sorted(set(text))) and 60 <= len(vocab) <= 96
    assert set(vocab) <= set(chr(c) for c in range(32, 127)) | {"\n"}
    assert text.count("def ") > 100 and text.count("import ") > 20 and text.count("\n") > 3000


def test_tokenizer_and_char_dataset(corpus):
    text, vocab = corpus
    tok = CharTokenizer(vocab)
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and ids.shape == (len(text),) and ids.max() < tok.vocab_size
    assert tok.decode(ids[:500]) == text[:500]
    assert tok.decode(tl.tensor(ids[:10])) == text[:10]
    with pytest.raises(IndexRangeError, match="'\\\\t'"):
        tok.encode("a\tb")
    tr, va = train_val_split(ids)
    assert len(va) == 20_000 and np.array_equal(np.concatenate([tr, va]), ids)
    ds = CharDataset(tr, block_size=16)
    assert len(ds) == len(tr) - 16
    x, y = ds[5]
    assert x.tolist() == tr[5:21].tolist() and y.tolist() == tr[6:22].tolist()
    bx, by = next(iter(DataLoader(ds, batch_size=8, shuffle=True, seed=0)))
    assert bx.shape == by.shape == (8, 16) and bx.dtype == np.int64
    assert np.array_equal(bx.numpy()[:, 1:], by.numpy()[:, :-1])
    order = DataLoader(ds, batch_size=8, shuffle=True, seed=0).order(0)[:8]
    assert np.array_equal(bx.numpy(), np.stack([tr[i:i + 16] for i in order]))
    s1 = [b[0].numpy() for b in char_lm_batches(tr, 16, 4, seed=3, num_batches=3)]
    s2 = [b[0].numpy() for b in char_lm_batches(tr, 16, 4, seed=3, num_batches=3)]
    assert len(s1) == 3 and all(np.array_equal(a, b) for a, b in zip(s1, s2))
    assert not np.array_equal(s1[0], s1[1])


def test_unigram_baseline(corpus):
    # Hand-computed: train counts (3, 1) + 1 -> p = (4/6, 2/6); val = [0, 1].
    assert math.isclose(unigram_baseline([0, 0, 0, 1], [0, 1]),
                        -(math.log(4 / 6) + math.log(2 / 6)) / 2, rel_tol=1e-12)
    text, vocab = corpus
    tok = CharTokenizer(vocab)
    tr, va = train_val_split(tok.encode(text))
    h = unigram_baseline(tr, va, tok.vocab_size)
    assert 2.0 < h < 5.0
    assert h < math.log(tok.vocab_size)       # better than uniform


@pytest.mark.cuda
def test_loader_places_batches_on_the_gpu():
    ds = _toy(10)
    host_batches = list(DataLoader(ds, batch_size=4, shuffle=True, seed=2))
    gpu_batches = list(DataLoader(ds, batch_size=4, shuffle=True, seed=2, device="cuda"))
    for h, g in zip(host_batches, gpu_batches):
        assert g[0].device == "cuda" and g[1].dtype == np.int64
        assert np.array_equal(g[0].numpy(), h[0].numpy()) and np.array_equal(g[1].numpy(), h[1].numpy())
    # A dataset whose tensors live on the GPU is gathered there.
    gds = TensorDataset(*(tl.tensor(t.numpy(), device="cuda") for t in ds.tensors))
    on_gpu = list(DataLoader(gds, batch_size=4, shuffle=True, seed=2))
    assert on_gpu[0][0].device == "cuda"
    assert np.array_equal(on_gpu[1][0].numpy(), host_batches[1][0].numpy())
    on_cpu = list(DataLoader(gds, batch_size=4, shuffle=True, seed=2, device="cpu"))
    assert on_cpu[0][0].device == "cpu" and np.array_equal(on_cpu[2][1].numpy(), host_batches[2][1].numpy())
