"""Custom Dataset returning dicts, default collation, random_split, MSE/SmoothL1 regression, ReduceLROnPlateau."""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, random_split

rng = np.random.default_rng(0)
device = "cuda" if torch.cuda.is_available() else "cpu"


class HousingDataset(Dataset):
    """Synthetic tabular regression: y = sin(x0) + 0.5*x1*x2 - 0.5*x3^2 + noise; samples are dicts."""

    def __init__(self, n):
        self.x = rng.uniform(-1.5, 1.5, size=(n, 6)).astype(np.float32)
        y = np.sin(self.x[:, 0]) + 0.5 * self.x[:, 1] * self.x[:, 2] - 0.5 * self.x[:, 3] ** 2
        self.y = (y + rng.normal(0, 0.05, size=n)).astype(np.float32)
        self.weight = rng.uniform(0.5, 1.5, size=n).astype(np.float32)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {
            "features": torch.from_numpy(self.x[i]),
            "target": torch.tensor([self.y[i]]),
            "weight": self.weight[i],          # numpy scalar -> collated to a tensor
            "meta": np.array([i], dtype=np.int64),  # numpy array -> collated to a tensor
            "index": i,                         # python int -> collated to a tensor
        }


ds = HousingDataset(600)
first = ds[0]
train_ds, val_ds = random_split(ds, [500, 100], generator=torch.Generator().manual_seed(0))
train_loader = DataLoader(train_ds, batch_size=48, shuffle=True, drop_last=True, num_workers=0,
                          pin_memory=torch.cuda.is_available())
val_loader = DataLoader(val_ds, batch_size=64)

batch = next(iter(DataLoader(ds, batch_size=4)))
collate_info = {k: [list(v.shape), str(v.dtype).split(".")[-1]] for k, v in batch.items()}

model = nn.Sequential(nn.Linear(6, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)).to(device)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.zero_()
        else:
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) / np.sqrt(p.shape[1])))

# Deterministic first-step check on the first 4 samples (no shuffling).
x0 = batch["features"].to(device)
y0 = batch["target"].to(device)
same_init_mse = F.mse_loss(model(x0), y0).item()
same_init_smoothl1 = F.smooth_l1_loss(model(x0), y0, beta=0.5).item()

optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=2,
                                                       threshold=1e-3, min_lr=1e-4)
criterion = nn.SmoothL1Loss(reduction="none")


def validate():
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for b in val_loader:
            pred = model(b["features"].to(device))
            total += F.mse_loss(pred, b["target"].to(device), reduction="sum").item()
            n += len(b["index"])
    return total / n


val_start = validate()
history = []
for epoch in range(25):
    model.train()
    for b in train_loader:
        pred = model(b["features"].to(device))
        per_sample = criterion(pred, b["target"].to(device)).squeeze(1)
        loss = (per_sample * b["weight"].to(device)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    v = validate()
    scheduler.step(v)
    history.append(v)
lr_end = optimizer.param_groups[0]["lr"]
assert scheduler.get_last_lr()[0] == lr_end
print(f"val MSE {val_start:.4f} -> {history[-1]:.4f} (best {min(history):.4f}), lr {lr_end}")
print("collated:", collate_info)
if not (history[-1] < 0.05 and history[-1] < 0.05 * val_start):
    print("validation loss above bar")
    sys.exit(1)
print("PORT-RESULT " + json.dumps({
    "same_init_mse": same_init_mse,
    "same_init_smoothl1": same_init_smoothl1,
    "same_collate": collate_info,
    "same_lengths": [len(train_ds), len(val_ds), len(train_loader), len(val_loader)],
    "same_first_item_target": first["target"].item(),
    "val_start": val_start,
    "val_end": history[-1],
    "lr_end": lr_end,
}))
