"""MLP autoencoder on synthetic low-rank data (3 clusters on a 4-dim subspace of R^32), MSE + Adam.

Pass: reconstruction MSE falls under a bar (relative to the data variance), and the 4-dim codes
recover the cluster labels by leave-one-out nearest neighbour.
"""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
rng = np.random.default_rng(0)

N, D, R, K = 384, 32, 4, 3
basis = np.linalg.qr(rng.standard_normal((D, R)))[0].astype(np.float32)       # (D, R) orthonormal
centers = rng.standard_normal((K, R)).astype(np.float32) * 2.0
labels = rng.integers(0, K, size=N)
latent = centers[labels] + 0.3 * rng.standard_normal((N, R)).astype(np.float32)
X = latent @ basis.T + 0.01 * rng.standard_normal((N, D)).astype(np.float32)
X = X.astype(np.float32)


class AutoEncoder(nn.Module):
    def __init__(self, d, h, r):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Linear(h, r))
        self.decoder = nn.Sequential(nn.Linear(r, h), nn.Tanh(), nn.Linear(h, d))

    def forward(self, x):
        z = self.encoder(x)
        return self.decoder(z), z


model = AutoEncoder(D, 64, R).to(device)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.zero_()
        else:
            fan_in = p.shape[1]
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) / np.sqrt(fan_in)))

x = torch.from_numpy(X).to(device)
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
loss_fn = nn.MSELoss()
losses = []
for step in range(200):
    opt.zero_grad()
    recon, _ = model(x)
    loss = loss_fn(recon, x)
    loss.backward()
    opt.step()
    losses.append(loss.item())

model.eval()
with torch.no_grad():
    recon, codes = model(x)
    mse = F.mse_loss(recon, x).item()
    var = x.var(dim=0, unbiased=False).sum().item() / D
    d = torch.cdist(codes, codes)
    d.fill_diagonal_(float("inf"))
    nn_idx = d.argmin(dim=1).cpu().numpy()
nn_acc = float((labels[nn_idx] == labels).mean())

rel = mse / var
print(f"first loss {losses[0]:.5f}  final mse {mse:.6f}  relative {rel:.4f}  1-NN acc {nn_acc:.3f}")
assert rel < 0.05, rel
assert nn_acc > 0.95, nn_acc
print("PORT-RESULT " + json.dumps({
    "backend": torch.__name__,
    "same_loss_first": losses[0],
    "same_loss_10": losses[10],
    "same_loss_200": losses[-1],
    "relative_mse": rel,
    "same_nn_acc": nn_acc,
}))
