"""A plain MLP classifier on synthetic tabular data: nn.Sequential with Dropout, kaiming_uniform_/zeros_
init (then overwritten by NumPy weights so both backends start equal), class-weighted
CrossEntropyLoss, SGD with Nesterov momentum, ReduceLROnPlateau on the validation loss, and early
stopping that keeps the best state with copy.deepcopy(model.state_dict()) and restores it with
load_state_dict.

Pass: test accuracy of the restored best model over a bar, the restored model reproduces the best
validation loss exactly, and early stopping triggered before the epoch cap.
The same_ values come from a dropout-free evaluation before training and the first full-batch step;
training itself uses dropout and shuffling (backend random streams), as real programs do.
"""
import copy
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
rng = np.random.default_rng(0)
torch.manual_seed(0)

# tabular data: 10 features (2 irrelevant), 3 imbalanced classes from a random nonlinear teacher
n, d, k = 1500, 10, 3
Xall = rng.standard_normal((n, d)).astype(np.float32)
W1 = rng.standard_normal((d, 16)).astype(np.float32)
W1[8:] = 0
W2 = rng.standard_normal((16, k)).astype(np.float32)
logits = np.tanh(Xall @ W1) @ W2 + np.array([1.0, 0.0, -1.0])
yall = logits.argmax(1)
mu, sd = Xall[:1000].mean(0), Xall[:1000].std(0)
Xall = (Xall - mu) / sd
Xtr, ytr = Xall[:1000], yall[:1000]
Xva, yva = Xall[1000:1250], yall[1000:1250]
Xte, yte = Xall[1250:], yall[1250:]
counts = np.bincount(ytr, minlength=k)
class_w = torch.tensor((counts.sum() / (k * counts)).astype(np.float32))

model = nn.Sequential(
    nn.Linear(d, 64), nn.ReLU(), nn.Dropout(0.2),
    nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2),
    nn.Linear(64, k),
).to(device)
for m in model:
    if isinstance(m, nn.Linear):
        nn.init.kaiming_uniform_(m.weight, nonlinearity="relu")
        nn.init.zeros_(m.bias)
# overwrite with NumPy draws (same kaiming-uniform bound) so both backends start from equal weights
with torch.no_grad():
    for m in model:
        if isinstance(m, nn.Linear):
            bound = np.sqrt(6.0 / m.in_features)
            m.weight.copy_(torch.from_numpy(rng.uniform(-bound, bound, tuple(m.weight.shape)).astype(np.float32)))

to_t = lambda a: torch.from_numpy(a).to(device)
Xtr_t, ytr_t, Xva_t, yva_t, Xte_t, yte_t = map(to_t, (Xtr, ytr, Xva, yva, Xte, yte))
crit = nn.CrossEntropyLoss(weight=class_w.to(device))
opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=3)


def evaluate(X, y):
    model.eval()
    with torch.no_grad():
        out = model(X)
        return crit(out, y).item(), (out.argmax(1) == y).float().mean().item()


# deterministic part: eval-mode loss, then one full-batch step in eval mode (no dropout)
same_val0, _ = evaluate(Xva_t, yva_t)
model.eval()
opt.zero_grad()
crit(model(Xtr_t), ytr_t).backward()
opt.step()
same_val1, _ = evaluate(Xva_t, yva_t)
opt.state.clear()

loader = DataLoader(TensorDataset(Xtr_t, ytr_t), batch_size=100, shuffle=True)
best_loss, best_state, best_epoch, bad, patience = float("inf"), None, -1, 0, 8
lrs = []
for epoch in range(60):
    model.train()
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb, weight=class_w.to(device)).backward()
        opt.step()
    val_loss, val_acc = evaluate(Xva_t, yva_t)
    sched.step(val_loss)
    lrs.append(opt.param_groups[0]["lr"])
    if val_loss < best_loss - 1e-4:
        best_loss, best_epoch, bad = val_loss, epoch, 0
        best_state = copy.deepcopy(model.state_dict())
    else:
        bad += 1
        if bad >= patience:
            break
stopped = epoch

model.load_state_dict(best_state)
restored_loss, _ = evaluate(Xva_t, yva_t)
test_loss, test_acc = evaluate(Xte_t, yte_t)
print(f"stopped at epoch {stopped} (best {best_epoch}, val {best_loss:.4f}), lr {lrs[-1]:.4g}, "
      f"test acc {test_acc:.3f}")
assert stopped < 59, "early stopping never triggered"
assert abs(restored_loss - best_loss) < 1e-6, (restored_loss, best_loss)
assert test_acc > 0.82, test_acc
assert min(lrs) < 0.03, "ReduceLROnPlateau never reduced the learning rate"
print("PORT-RESULT " + json.dumps({
    "backend": torch.__name__,
    "same_val_loss_init": same_val0,
    "same_val_loss_after_step": same_val1,
    "same_class_weight": class_w.tolist(),
    "stopped": stopped,
    "best_epoch": best_epoch,
    "test_acc": test_acc,
}))
