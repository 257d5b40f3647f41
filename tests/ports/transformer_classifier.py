"""nn.TransformerEncoder text classifier with padding masks, masked mean pooling, label smoothing, OneCycleLR."""
import json
import math
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
device = "cuda" if torch.cuda.is_available() else "cpu"

# Synthetic task: variable-length sequences of tokens 2..V-1 (0 = pad). Class 1 iff token 3 occurs
# more often than token 4 (ties excluded), so the model must count over the unpadded positions.
V, L, PAD = 12, 16, 0


def make(n):
    x = np.zeros((n, L), dtype=np.int64)
    y = np.zeros(n, dtype=np.int64)
    i = 0
    while i < n:
        length = int(rng.integers(4, L + 1))
        seq = rng.integers(2, V, size=length)
        c3, c4 = (seq == 3).sum(), (seq == 4).sum()
        if c3 == c4:
            continue
        x[i, :length] = seq
        y[i] = int(c3 > c4)
        i += 1
    return torch.from_numpy(x), torch.from_numpy(y)


class PositionalEncoding(nn.Module):
    """Sinusoidal positions, as in the PyTorch tutorial (batch-first here)."""

    def __init__(self, d_model, dropout=0.0, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + 0.1 * self.pe[:, :x.size(1)])


class Classifier(nn.Module):
    def __init__(self, d=32, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(V, d, padding_idx=PAD)
        self.pos = PositionalEncoding(d)
        layer = nn.TransformerEncoderLayer(d_model=d, nhead=heads, dim_feedforward=64, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, norm=nn.LayerNorm(d),
                                             enable_nested_tensor=False)
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        pad = x == PAD                                   # True where padded
        h = self.encoder(self.pos(self.embed(x) * math.sqrt(self.embed.embedding_dim)), src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        pooled = (h * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return self.head(pooled)


x_train, y_train = make(512)
x_test, y_test = make(256)
model = Classifier().to(device)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) / np.sqrt(p.shape[-1])))
        elif "norm" in name and name.endswith("weight"):
            p.fill_(1.0)
        else:
            p.zero_()
    model.embed.weight[PAD].zero_()

criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
epochs, bs = 6, 64
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
loader = DataLoader(TensorDataset(x_train, y_train), batch_size=bs, shuffle=True)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, epochs=epochs, steps_per_epoch=len(loader))

# Deterministic values: loss of the initial model on a fixed batch and a gradient of it.
model.train()
first = criterion(model(x_train[:64].to(device)), y_train[:64].to(device))
first_loss = first.item()
grad_probe = torch.autograd.grad(first, model.head.weight)[0].abs().sum().item()

lrs = []
for epoch in range(epochs):
    model.train()
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])

model.eval()
with torch.no_grad():
    pred = model(x_test.to(device)).argmax(-1)
    acc = (pred == y_test.to(device)).float().mean().item()
    # padding must not change the prediction: append extra pad columns
    padded = torch.cat([x_test, torch.zeros(len(x_test), 4, dtype=torch.long)], dim=1).to(device)
    same_pred = bool((model(padded).argmax(-1) == pred).all())
print(f"test accuracy {acc:.3f}; final loss {loss.item():.3f}; padding-invariant {same_pred}")
if not (acc > 0.85 and same_pred):
    print("criterion failed")
    sys.exit(1)
print("PORT-RESULT " + json.dumps({
    "same_first_loss": first_loss,
    "same_head_grad_l1": grad_probe,
    "same_lr_peak": max(lrs),
    "same_lr_first_last": [lrs[0], lrs[-1]],
    "same_padding_invariant": same_pred,
    "accuracy": acc,
}))
