"""Train, checkpoint (model/optimizer/scheduler/epoch/RNG state), rebuild, resume; compare with an uninterrupted run."""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
data_rng = np.random.default_rng(0)
X = torch.from_numpy(data_rng.standard_normal((256, 10)).astype(np.float32))
W = data_rng.standard_normal((10, 3)).astype(np.float32)
Y = torch.from_numpy(np.argmax(X.numpy() @ W, axis=1)).long()
INIT = np.random.default_rng(1)
init_values = None


def build():
    global init_values
    model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3)).to(device)
    if init_values is None:
        init_values = [INIT.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3 for p in model.parameters()]
    with torch.no_grad():
        for p, v in zip(model.parameters(), init_values):
            p.copy_(torch.from_numpy(v))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return model, opt, sched


def run_epoch(model, opt, loader):
    model.train()
    last = 0.0
    for xb, yb in loader:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        opt.step()
        last = loss.item()
    return last


def make_loader():
    return DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)


EPOCHS, SPLIT = 6, 3

# Uninterrupted run. Shuffling and dropout use torch's RNG, so the checkpoint stores it.
torch.manual_seed(123)
model, opt, sched = build()
model.eval()
with torch.no_grad():
    init_loss = nn.functional.cross_entropy(model(X.to(device)), Y.to(device)).item()
loader = make_loader()
for epoch in range(EPOCHS):
    run_epoch(model, opt, loader)
    sched.step()
full = [p.detach().clone() for p in model.parameters()]
full_buffers = [b.clone() for b in model.buffers()]

# Interrupted run: train SPLIT epochs, save, rebuild everything, load, continue.
tmp = tempfile.mkdtemp()
try:
    path = os.path.join(tmp, "ckpt.pt")
    torch.manual_seed(123)
    model, opt, sched = build()
    loader = make_loader()
    for epoch in range(SPLIT):
        run_epoch(model, opt, loader)
        sched.step()
    torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "sched": sched.state_dict(),
                "epoch": SPLIT, "rng": torch.get_rng_state()}, path)
    del model, opt, sched
    torch.manual_seed(999)  # disturb the RNG: the checkpoint must restore it

    model, opt, sched = build()
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    result = model.load_state_dict(ckpt["model"], strict=True)
    assert not result.missing_keys and not result.unexpected_keys, result
    opt.load_state_dict(ckpt["optim"])
    sched.load_state_dict(ckpt["sched"])
    torch.set_rng_state(ckpt["rng"])
    loader = make_loader()
    for epoch in range(ckpt["epoch"], EPOCHS):
        run_epoch(model, opt, loader)
        sched.step()
    resumed = [p.detach().clone() for p in model.parameters()]
    resumed_buffers = [b.clone() for b in model.buffers()]
    n_momentum = sum(1 for s in ckpt["optim"]["state"].values() if "momentum_buffer" in s)
    sd_keys = list(ckpt["model"].keys())
    ckpt_lr = ckpt["optim"]["param_groups"][0]["lr"]
finally:
    shutil.rmtree(tmp)

max_diff = max((a - b).abs().max().item() for a, b in zip(full, resumed))
max_buf_diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(full_buffers, resumed_buffers))
model.eval()
with torch.no_grad():
    acc = (model(X.to(device)).argmax(1) == Y.to(device)).float().mean().item()
print(f"max |full - resumed| params {max_diff:.3g}, buffers {max_buf_diff:.3g}; lr {sched.get_last_lr()[0]}; "
      f"train acc {acc:.3f}")
if not (max_diff <= 1e-6 and max_buf_diff <= 1e-6 and acc > 0.85):
    print("resumed run differs from the uninterrupted one")
    sys.exit(1)
print("PORT-RESULT " + json.dumps({
    "same_init_loss": init_loss,
    "same_max_diff_le_1e-6": max_diff <= 1e-6,
    "same_lr_end": sched.get_last_lr()[0],
    "same_ckpt_epoch": SPLIT,
    "same_n_momentum_buffers": n_momentum,
    "same_sched_last_epoch": sched.last_epoch,
    "same_state_dict_keys": sd_keys,
    "same_ckpt_lr": ckpt_lr,
    "max_diff": max_diff,
    "train_acc": acc,
}))
