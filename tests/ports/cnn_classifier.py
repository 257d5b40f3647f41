"""Small CNN classifier on synthetic 1x16x16 images of 4 classes (oriented bars + noise)."""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.backends.cudnn.benchmark = True


def make_images(n):
    x = rng.normal(0.0, 0.3, size=(n, 1, 16, 16)).astype(np.float32)
    y = rng.integers(0, 4, size=n)
    for i in range(n):
        k = int(rng.integers(3, 13))
        if y[i] == 0:      # horizontal bar
            x[i, 0, k, 2:14] += 1.0
        elif y[i] == 1:    # vertical bar
            x[i, 0, 2:14, k] += 1.0
        elif y[i] == 2:    # diagonal
            for j in range(2, 14):
                x[i, 0, j, j] += 1.0
        else:              # blob
            x[i, 0, 5:11, 5:11] += 0.7
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.fc = nn.Linear(16 * 4 * 4, 4)

    def forward(self, x):
        x = self.features(x)
        return self.fc(torch.flatten(x, 1))


def init_weights(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) / np.sqrt(fan_in)))
            elif name.endswith("bias"):
                p.zero_()


x_train, y_train = make_images(512)
x_test, y_test = make_images(256)

model = Net().to(device)
init_weights(model)
criterion = nn.CrossEntropyLoss()

# Deterministic first step on a fixed full batch (no shuffling): comparable across backends.
model.train()
opt0 = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
out = model(x_train[:64].to(device))
loss0 = criterion(out, y_train[:64].to(device))
opt0.zero_grad()
loss0.backward()
opt0.step()
first_loss = loss0.item()
with torch.no_grad():
    loss1 = criterion(model(x_train[:64].to(device)), y_train[:64].to(device)).item()
running_mean0 = model.features[1].running_mean.sum().item()

# Real training with shuffled batches.
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[4, 6], gamma=0.3)
loader = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True)
for epoch in range(7):
    model.train()
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
    scheduler.step()

model.eval()
correct = 0
test_loss = 0.0
test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=128)
with torch.no_grad():
    for xb, yb in test_loader:
        xb, yb = xb.to(device), yb.to(device)
        output = F.log_softmax(model(xb), dim=1)
        test_loss += F.nll_loss(output, yb, reduction="sum").item()
        pred = output.argmax(dim=1, keepdim=True)
        correct += pred.eq(yb.view_as(pred)).sum().item()
test_loss /= len(test_loader.dataset)
acc = correct / len(test_loader.dataset)
print(f"test loss {test_loss:.4f}, accuracy {acc:.3f}, lr {optimizer.param_groups[0]['lr']:.5f}")
if acc < 0.9:
    print("accuracy below bar")
    sys.exit(1)
print("PORT-RESULT " + json.dumps({
    "same_first_loss": first_loss,
    "same_loss_after_step": loss1,
    "same_bn_running_mean_sum": running_mean0,
    "same_final_lr": scheduler.get_last_lr()[0],
    "accuracy": acc,
    "test_loss": test_loss,
}))
