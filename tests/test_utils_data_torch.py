"""torchlean.utils.data against torch.utils.data: collation, batching, samplers, DistributedSampler's
index lists, worker processes and worker error reporting."""

import collections
import os
import time

import numpy as np
import pytest

import torchlean as tl
from torchlean.utils import data as tld

torch = pytest.importorskip("torch")
tud = torch.utils.data

Point = collections.namedtuple("Point", "x y")


def canon(obj):
    """A comparable form of a (nested) batch from either library: tensors by dtype, shape and values."""
    if isinstance(obj, (tl.Tensor, torch.Tensor)):
        return ("T", str(obj.dtype).split(".")[-1], tuple(obj.shape), obj.tolist())
    if isinstance(obj, dict):
        return ("D", type(obj).__name__, {k: canon(v) for k, v in obj.items()})
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return ("NT", type(obj).__name__, tuple(canon(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [canon(v) for v in obj])
    return ("V", obj)


def both(make):
    """``make(lib, mod)`` with torchlean (tl, tld) and with torch (torch, tud)."""
    return make(tl, tld), make(torch, tud)


# ---- collation ------------------------------------------------------------------------------------

def _samples(lib):
    return [{"img": lib.ones(2, 3) * i, "label": i, "w": 0.5 * i, "flag": i % 2 == 0, "name": f"s{i}",
             "arr": np.arange(4, dtype=np.float32) + i, "i32": np.int32(i), "f64": np.float64(i) / 3,
             "pair": (lib.tensor([i, i + 1]), [i * 1.5, -i]), "pt": Point(i, float(i))}
            for i in range(3)]


def test_default_collate_nested_matches_torch():
    ours, ref = both(lambda lib, mod: mod.default_collate(_samples(lib)))
    assert canon(ours) == canon(ref)
    # the dtypes torch gives, spelled out
    assert ours["label"].dtype == tl.int64 and ours["w"].dtype == tl.float64 and ours["flag"].dtype == tl.bool
    assert ours["arr"].dtype == tl.float32 and ours["i32"].dtype == tl.int32 and ours["name"] == ["s0", "s1", "s2"]
    assert isinstance(ours["pair"], list) and isinstance(ours["pt"], Point)


def test_default_collate_tuple_of_tensors_and_lists():
    def make(lib, mod):
        return mod.default_collate([(lib.arange(3) + i, [lib.zeros(2, 2), 7]) for i in range(4)])
    ours, ref = both(make)
    assert canon(ours) == canon(ref)


def test_default_convert_matches_torch():
    data = {"a": np.arange(3.0), "b": (np.int64(4), "x"), "c": [np.ones((2, 2), np.float32)], "d": 1.5}
    ours, ref = both(lambda lib, mod: mod.default_convert(data))
    assert canon(ours) == canon(ref)


def test_collate_errors():
    with pytest.raises(tld.CollateShapeError, match=r"\[3\] at entry 0 and \[4\] at entry 1"):
        tld.default_collate([tl.zeros(3), tl.zeros(4)])
    with pytest.raises(RuntimeError):  # what torch raises for both
        tld.default_collate([[1, 2], [1, 2, 3]])
    with pytest.raises(RuntimeError):
        tud.default_collate([[1, 2], [1, 2, 3]])
    with pytest.raises(TypeError, match="found <class 'object'>"):
        tld.default_collate([object(), object()])
    with pytest.raises(tl.TorchLeanError):
        tld.default_collate([np.array(["a"]), np.array(["b"])])


# ---- datasets -----------------------------------------------------------------------------------

def test_datasets_match_torch():
    def make(lib, mod):
        t = mod.TensorDataset(lib.arange(12).reshape(6, 2), lib.arange(6) * 10)
        c = mod.ConcatDataset([t, mod.Subset(t, [5, 0, 3])])
        s = mod.StackDataset(a=list(range(6)), b=t)
        return [len(t), t[2], t[-1], len(c), c[6], c[-1], c.cumulative_sizes, len(t + t), s[4]]
    ours, ref = both(make)
    assert canon(ours) == canon(ref)
    with pytest.raises(ValueError):
        tld.ConcatDataset([[1, 2]])[-3]
    with pytest.raises(tl.TorchLeanError):
        tld.TensorDataset(tl.zeros(3), tl.zeros(4))


def test_random_split_lengths_and_reproducibility():
    for lengths in ([3, 7], [0.25, 0.5, 0.25], [0.3, 0.3, 0.4], [1 / 3] * 3):
        ours = tld.random_split(range(10), lengths, generator=tl.Generator().manual_seed(4))
        ref = tud.random_split(range(10), lengths, generator=torch.Generator().manual_seed(4))
        assert [len(s) for s in ours] == [len(s) for s in ref]
        flat = [i for s in ours for i in s]
        assert sorted(flat) == list(range(10))
        again = tld.random_split(range(10), lengths, generator=tl.Generator().manual_seed(4))
        assert [list(s) for s in again] == [list(s) for s in ours]
    with pytest.warns(UserWarning) as rec:
        parts = tld.random_split(range(2), [0.9, 0.05, 0.05])
    assert [len(p) for p in parts] == [2, 0, 0]
    assert [str(w.message) for w in rec] == [f"Length of split at index {i} is 0. This might result in an empty "
                                             "dataset." for i in (1, 2)]
    with pytest.raises(ValueError, match="does not equal"):
        tld.random_split(range(10), [3, 3])


def test_iterable_datasets_chain():
    class R(tld.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n

    ch = R(2) + R(3)
    assert isinstance(ch, tld.ChainDataset) and list(ch) == [0, 1, 0, 1, 2] and len(ch) == 5


# ---- samplers -----------------------------------------------------------------------------------

def test_samplers_sequential_batch_match_torch():
    for bs, dl in ((3, False), (3, True), (5, False), (10, True), (11, False), (11, True)):
        ours = tld.BatchSampler(tld.SequentialSampler(range(10)), bs, dl)
        ref = tud.BatchSampler(tud.SequentialSampler(range(10)), bs, dl)
        assert list(ours) == list(ref) and len(ours) == len(ref)


def test_random_samplers_index_sets_and_reproducibility():
    g = lambda s: tl.Generator().manual_seed(s)
    r = list(tld.RandomSampler(range(7), generator=g(1)))
    assert sorted(r) == list(range(7)) and r == list(tld.RandomSampler(range(7), generator=g(1)))
    r = list(tld.RandomSampler(range(4), num_samples=10, generator=g(1)))
    assert len(r) == 10 and sorted(r[:4]) == [0, 1, 2, 3] and sorted(r[4:8]) == [0, 1, 2, 3]
    r = list(tld.RandomSampler(range(5), replacement=True, num_samples=70, generator=g(2)))
    assert len(r) == 70 and set(r) <= set(range(5)) and len(set(r)) == 5
    assert len(tld.RandomSampler(range(5), replacement=True, num_samples=70)) == 70
    r = list(tld.SubsetRandomSampler([3, 9, 11, 20], generator=g(3)))
    assert sorted(r) == [3, 9, 11, 20]
    w = list(tld.WeightedRandomSampler([0, 2.0, 0, 1.0], 50, generator=g(0)))
    assert len(w) == 50 and set(w) == {1, 3}
    w = list(tld.WeightedRandomSampler([0.1, 0.9, 0.4, 0.7, 3.0, 0.6], 6, replacement=False, generator=g(0)))
    assert sorted(w) == list(range(6))
    # the global stream drives an unseeded sampler: reseeding replays it
    tl.manual_seed(5)
    a = list(tld.RandomSampler(range(9)))
    tl.manual_seed(5)
    assert list(tld.RandomSampler(range(9))) == a
    for bad in (lambda: tld.RandomSampler(range(3), num_samples=0), lambda: tld.BatchSampler(range(3), 0, False),
                lambda: tld.WeightedRandomSampler([[1.0]], 2)):
        with pytest.raises(ValueError):
            bad()


@pytest.mark.parametrize("n,reps,drop", [(10, 3, False), (10, 3, True), (10, 4, False), (2, 5, False),
                                         (12, 4, True), (7, 2, True)])
def test_distributed_sampler_exact_lists(n, reps, drop):
    for rank in range(reps):
        ours = tld.DistributedSampler(range(n), num_replicas=reps, rank=rank, shuffle=False, drop_last=drop)
        ref = tud.DistributedSampler(range(n), num_replicas=reps, rank=rank, shuffle=False, drop_last=drop)
        assert list(ours) == list(ref) and len(ours) == len(ref)


def test_distributed_sampler_shuffle_coverage_and_epochs():
    def lists(epoch, seed=0):
        out = []
        for r in range(3):
            s = tld.DistributedSampler(range(11), num_replicas=3, rank=r, seed=seed)
            s.set_epoch(epoch)
            out.append(list(s))
        return out

    e0 = lists(0)
    assert [len(x) for x in e0] == [4, 4, 4]
    flat = [i for x in e0 for i in x]
    assert set(flat) == set(range(11)) and len(flat) == 12  # one index padded
    assert lists(0) == e0 and lists(1) != e0 and lists(0, seed=1) != e0
    with pytest.raises(ValueError, match="invalid rank 3"):
        tld.DistributedSampler(range(4), num_replicas=3, rank=3)


# ---- DataLoader ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bs,drop", [(1, False), (3, False), (3, True), (4, True), (10, False), (12, True)])
def test_loader_batches_match_torch(bs, drop):
    def make(lib, mod):
        ds = mod.TensorDataset(lib.arange(20).reshape(10, 2).float(), lib.arange(10))
        dl = mod.DataLoader(ds, batch_size=bs, drop_last=drop)
        return [len(dl), list(dl)]
    ours, ref = both(make)
    assert canon(ours) == canon(ref)


def test_loader_options_match_torch():
    def make(lib, mod):
        samples = [{"x": np.full(2, i, np.float32), "y": i, "t": (i, "s"), "z": [["a", i]], "p": Point("q", i)}
                   for i in range(7)]
        out = []
        out.append(list(mod.DataLoader(samples, batch_size=None)))                # no auto-batching
        bsamp = mod.BatchSampler(mod.SequentialSampler(samples), 3, False)
        out.append(list(mod.DataLoader(samples, batch_sampler=bsamp)))
        out.append(list(mod.DataLoader(samples, batch_size=2, sampler=[6, 0, 3], collate_fn=lambda b: [s["y"] for s in b])))
        dl = mod.DataLoader(samples, batch_size=3)
        out.append([list(dl), list(dl)])                                           # iterating twice
        out.append(list(mod.DataLoader(samples, batch_size=None, num_workers=1 if lib is tl else 0)))
        out.append(list(mod.DataLoader(samples, batch_size=3, num_workers=2 if lib is tl else 0)))
        return out
    ours, ref = both(make)
    assert canon(ours) == canon(ref)


def test_loader_shuffle_with_generator():
    ds = tld.TensorDataset(tl.arange(10))
    run = lambda s: [b[0].tolist() for b in tld.DataLoader(ds, batch_size=4, shuffle=True,
                                                            generator=tl.Generator().manual_seed(s))]
    a = run(0)
    assert [len(b) for b in a] == [4, 4, 2] and sorted(i for b in a for i in b) == list(range(10)) and run(0) == a
    dl = tld.DataLoader(ds, batch_size=10, shuffle=True, generator=tl.Generator().manual_seed(0))
    e1, e2 = next(iter(dl))[0].tolist(), next(iter(dl))[0].tolist()
    assert sorted(e1) == sorted(e2) == list(range(10)) and e1 != e2  # each epoch its own order


def test_loader_argument_errors_as_torch():
    ds = list(range(5))
    for kw in ({"num_workers": -1}, {"timeout": -1}, {"prefetch_factor": 2}, {"persistent_workers": True},
               {"sampler": [0], "shuffle": True}, {"batch_sampler": [[0]], "batch_size": 2},
               {"batch_size": None, "drop_last": True}, {"multiprocessing_context": "fork"}):
        with pytest.raises(ValueError):
            tud.DataLoader(ds, **kw)
        with pytest.raises(ValueError):
            tld.DataLoader(ds, **kw)
    dl = tld.DataLoader(ds)
    with pytest.raises(ValueError, match="batch_size attribute"):
        dl.batch_size = 3


def test_pin_memory_accepted_without_effect():
    ds = tld.TensorDataset(tl.arange(4.0))
    if tl.cuda.is_available():
        pinned = [b[0].tolist() for b in tld.DataLoader(ds, batch_size=2, pin_memory=True)]
    else:  # torch warns the same when there is no accelerator
        with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator"):
            pinned = [b[0].tolist() for b in tld.DataLoader(ds, batch_size=2, pin_memory=True)]
    assert pinned == [[0.0, 1.0], [2.0, 3.0]]


def test_subset_of_tensor_dataset_through_workers():
    def make(lib, mod):
        ds = mod.TensorDataset(lib.arange(16).reshape(8, 2).float(), lib.arange(8))
        sub = mod.Subset(ds, [7, 2, 5, 0, 1])
        return [sub[[0, 1]], list(mod.DataLoader(sub, batch_size=2))]
    ours, ref = both(make)
    assert canon(ours) == canon(ref)
    ds = tld.TensorDataset(tl.arange(16).reshape(8, 2).float(), tl.arange(8))
    workers = list(tld.DataLoader(tld.Subset(ds, [7, 2, 5, 0, 1]), batch_size=2, num_workers=2))
    assert canon(workers) == canon(ours[1])


class Noisy(tld.Dataset):
    """Samples that carry the process and the worker seed, and a random draw from the worker's stream."""

    def __len__(self):
        return 9

    def __getitem__(self, i):
        info = tld.get_worker_info()
        return {"i": i, "x": np.full((2,), i, np.float64), "pid": os.getpid(),
                "wid": -1 if info is None else info.id}


def test_workers_equal_single_process():
    def run(w, **kw):
        dl = tld.DataLoader(Noisy(), batch_size=2, num_workers=w, **kw)
        return [(b["i"].tolist(), b["x"].tolist()) for b in dl], dl
    ref, _ = run(0)
    ours, dl = run(2)
    assert ours == ref and len(dl) == 5
    batches = list(tld.DataLoader(Noisy(), batch_size=2, num_workers=2))
    wids = [b["wid"].tolist() for b in batches]
    assert wids == [[0, 0], [1, 1], [0, 0], [1, 1], [0]]       # round robin, as torch
    assert all(p != os.getpid() for b in batches for p in b["pid"].tolist())
    unordered, _ = run(2, in_order=False, prefetch_factor=1)
    assert sorted(unordered) == sorted(ref)


def test_workers_seed_and_init_fn():
    seen = []

    def init(wid):
        info = tld.get_worker_info()
        assert info.id == wid and info.num_workers == 2

    dl = tld.DataLoader(list(range(4)), batch_size=1, num_workers=2, worker_init_fn=init,
                        collate_fn=lambda b: (tld.get_worker_info().seed, tl.rand(1).item()),
                        generator=tl.Generator().manual_seed(7))
    seen = list(dl)
    again = list(tld.DataLoader(list(range(4)), batch_size=1, num_workers=2, worker_init_fn=init,
                                collate_fn=lambda b: (tld.get_worker_info().seed, tl.rand(1).item()),
                                generator=tl.Generator().manual_seed(7)))
    assert seen == again
    assert seen[1][0] == seen[0][0] + 1 and seen[2][0] == seen[0][0]   # base seed + worker id
    assert seen[0][1] != seen[1][1]


class Stream(tld.IterableDataset):
    def __init__(self, n, split):
        self.n, self.split = n, split

    def __iter__(self):
        info = (tud if self.split == "torch" else tld).get_worker_info() if self.split else None
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


class TorchStream(tud.IterableDataset):
    def __init__(self, n, split):
        self.n, self.split = n, split

    def __iter__(self):
        info = tud.get_worker_info() if self.split else None
        return iter(range(self.n)) if info is None else iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


@pytest.mark.parametrize("split,drop", [(True, False), (False, False), (True, True)])
def test_iterable_dataset_workers_match_torch(split, drop):
    ours = [b.tolist() for b in tld.DataLoader(Stream(11, split), batch_size=3, num_workers=2, drop_last=drop)]
    ref = [b.tolist() for b in tud.DataLoader(TorchStream(11, split), batch_size=3, num_workers=2, drop_last=drop)]
    assert ours == ref
    assert len(tld.DataLoader(Stream(11, split), batch_size=3, drop_last=drop)) == \
        len(tud.DataLoader(TorchStream(11, split), batch_size=3, drop_last=drop))


def test_persistent_workers_epochs():
    ds = tld.TensorDataset(tl.arange(10))
    dl = tld.DataLoader(ds, batch_size=3, num_workers=2, persistent_workers=True)
    it = iter(dl)
    next(it)                                          # an epoch broken off early
    pids = {w.pid for w in it._workers}
    for _ in range(2):
        assert [b[0].tolist() for b in dl] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
        assert {w.pid for w in dl._iterator._workers} == pids
    stream = tld.DataLoader(Stream(5, True), batch_size=2, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in stream] == [b.tolist() for b in stream] == [[0, 2], [1, 3], [4]]
    dl._iterator._shutdown_workers()
    stream._iterator._shutdown_workers()


class Faulty(tld.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError(f"sample {i} is corrupt")
        return i


def test_worker_error_names_worker_and_original_exception():
    with pytest.raises(ValueError) as info:
        list(tld.DataLoader(Faulty(), batch_size=2, num_workers=2))
    msg = str(info.value)
    assert "Caught ValueError in DataLoader worker process 0" in msg and "sample 5 is corrupt" in msg
    assert isinstance(info.value, tl.TorchLeanError)
    # torch's wording: "Caught ValueError in DataLoader worker process 0.\nOriginal Traceback ..."
    assert msg.startswith("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most recent call")
    # failed iterators left as garbage do not slow down (or disturb) the next loaders' workers
    t = time.monotonic()
    for _ in range(3):
        with pytest.raises(ValueError, match="corrupt"):
            list(tld.DataLoader(Faulty(), batch_size=2, num_workers=2))
    assert time.monotonic() - t < 3

    def bad_init(wid):
        if wid == 1:
            raise KeyError("no config")
    with pytest.raises(KeyError, match="worker process 1") as info:
        list(tld.DataLoader(list(range(6)), batch_size=1, num_workers=2, worker_init_fn=bad_init))
    assert "no config" in str(info.value)


class Dies(tld.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            os._exit(3)
        return i


class Slow(tld.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(3)
        return i


def test_dead_worker_and_timeout():
    with pytest.raises(tld.DataLoaderError, match=r"worker 1 .*exit code 3.*exited unexpectedly"):
        list(tld.DataLoader(Dies(), batch_size=2, num_workers=2))
    t = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.3 seconds"):
        list(tld.DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.3))
    assert time.monotonic() - t < 3


def test_spawn_context():
    ds = tld.TensorDataset(tl.arange(6).float())
    dl = tld.DataLoader(ds, batch_size=4, num_workers=1, multiprocessing_context="spawn")
    assert [b[0].tolist() for b in dl] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]]


def test_base_classes_name_the_missing_method():
    from torchlean.errors import AbstractMethodError
    from torchlean.utils.data import Dataset, IterableDataset, Sampler
    for call, what in ((lambda: Dataset()[0], "__getitem__"), (lambda: iter(IterableDataset()), "__iter__"),
                       (lambda: iter(Sampler()), "__iter__")):
        with pytest.raises(NotImplementedError, match=what) as e:   # torch's class, caught as in torch
            call()
        assert isinstance(e.value, AbstractMethodError)
