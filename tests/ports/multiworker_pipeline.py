"""Input pipelines through DataLoader worker processes: an IterableDataset sharded by
get_worker_info(), and a map-style Dataset with a custom collate_fn, both with num_workers=2,
worker_init_fn, persistent_workers=True, prefetch_factor=2, pin_memory=False. A linear model is
trained on the map-style loader.

Pass: every sample arrives exactly once per epoch from both loaders, both workers contribute, the
persistent workers are the same processes in every epoch, and the regression loss drops by a factor.
"""
import json
import os

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

N, D = 240, 8
rng = np.random.default_rng(0)
X = rng.standard_normal((N, D)).astype(np.float32)
w_true = rng.standard_normal(D).astype(np.float32)
Y = (X @ w_true + 0.05 * rng.standard_normal(N)).astype(np.float32)


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n
        self.tag = -1

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(wid, self.n, nw):        # shard: worker k takes k, k + nw, ...
            yield i, X[i], Y[i], self.tag, os.getpid()


class Table(Dataset):
    def __init__(self):
        self.tag = -1

    def __len__(self):
        return N

    def __getitem__(self, i):
        return {"idx": i, "x": torch.from_numpy(X[i]), "y": float(Y[i]), "tag": self.tag, "pid": os.getpid()}


def init_worker(worker_id):
    info = get_worker_info()
    assert info.id == worker_id and info.num_workers == 2
    info.dataset.tag = worker_id                  # each worker has its own copy of the dataset
    np.random.seed(info.seed % 2 ** 32)


def collate_stream(items):
    idx, xs, ys, tags, pids = zip(*items)
    return torch.tensor(idx), torch.from_numpy(np.stack(xs)), torch.from_numpy(np.array(ys)), set(tags), set(pids)


def collate_table(items):
    return {"idx": torch.tensor([it["idx"] for it in items]),
            "x": torch.stack([it["x"] for it in items]),
            "y": torch.tensor([it["y"] for it in items], dtype=torch.float32),
            "tags": {it["tag"] for it in items}, "pids": {it["pid"] for it in items}}


def main():
    common = dict(num_workers=2, worker_init_fn=init_worker, persistent_workers=True, prefetch_factor=2,
                  pin_memory=False)
    stream = DataLoader(Stream(N), batch_size=16, collate_fn=collate_stream, **common)
    table = DataLoader(Table(), batch_size=20, shuffle=False, collate_fn=collate_table, **common)

    model = nn.Linear(D, 1)
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(rng.standard_normal((1, D)).astype(np.float32) * 0.1))
        model.bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()

    epoch_losses, pids_stream, pids_table, x_sums = [], [], [], []
    for epoch in range(3):
        seen, tags, pids, xsum = [], set(), set(), 0.0
        for idx, xb, yb, t, p in stream:
            seen += idx.tolist()
            tags |= t
            pids |= p
            xsum += float(xb.double().sum() + yb.double().sum())
        assert sorted(seen) == list(range(N)), "iterable: a sample was lost or repeated"
        assert tags == {0, 1}, tags
        pids_stream.append(sorted(pids))
        x_sums.append(xsum)

        seen, tags, pids, total, count = [], set(), set(), 0.0, 0
        for batch in table:
            seen += batch["idx"].tolist()
            tags |= batch["tags"]
            pids |= batch["pids"]
            loss = loss_fn(model(batch["x"]).squeeze(1), batch["y"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(batch["idx"])
            count += len(batch["idx"])
        assert seen == list(range(N)), "map-style: samples out of sampler order, lost or repeated"
        assert tags == {0, 1}, tags
        pids_table.append(sorted(pids))
        epoch_losses.append(total / count)

    assert len(pids_stream[0]) == 2 and all(p == pids_stream[0] for p in pids_stream), pids_stream
    assert all(p == pids_table[0] for p in pids_table), pids_table
    assert os.getpid() not in pids_stream[0]
    print(f"epoch losses {[round(v, 5) for v in epoch_losses]}  stream sum {x_sums[0]:.4f}")
    assert epoch_losses[-1] < 0.05 * epoch_losses[0], epoch_losses
    print("PORT-RESULT " + json.dumps({
        "backend": torch.__name__,
        "same_stream_sum": x_sums[0],
        "same_stream_sums_equal": len(set(round(s, 6) for s in x_sums)) == 1,
        "same_epoch_losses": epoch_losses,
        "same_weight_sum": model.weight.sum().item(),
        "same_workers": len(pids_table[0]),
    }))


if __name__ == "__main__":
    main()
