"""Variational autoencoder on synthetic binary 8x8 patterns; ELBO improves."""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
device = "cuda" if torch.cuda.is_available() else "cpu"

# Binary images: a horizontal and a vertical line at random positions, flipped pixels as noise.
N = 1024
imgs = np.zeros((N, 8, 8), dtype=np.float32)
for i in range(N):
    imgs[i, rng.integers(8), :] = 1.0
    imgs[i, :, rng.integers(8)] = 1.0
flip = rng.random(imgs.shape) < 0.02
imgs = np.where(flip, 1.0 - imgs, imgs).astype(np.float32).reshape(N, 64)
x_all = torch.from_numpy(imgs)


class VAE(nn.Module):
    def __init__(self, d=64, h=128, z=4):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, h), nn.ReLU())
        self.mu = nn.Linear(h, z)
        self.logvar = nn.Linear(h, z)
        self.dec = nn.Sequential(nn.Linear(z, h), nn.ReLU(), nn.Linear(h, d))

    def encode(self, x):
        h = self.enc(x)
        return self.mu(h), self.logvar(h)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + std * torch.randn_like(std)

    def forward(self, x):
        mu, logvar = self.encode(x)
        z = self.reparameterize(mu, logvar) if self.training else mu
        return self.dec(z), mu, logvar


def loss_fn(logits, x, mu, logvar):
    rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (rec + kl) / x.size(0), rec / x.size(0), kl / x.size(0)


model = VAE().to(device)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.zero_()
        else:
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) / np.sqrt(p.shape[1])))


def deterministic_elbo():
    """Negative ELBO with z = mu (no sampling) plus sigmoid+BCE reconstruction error."""
    model.eval()
    with torch.no_grad():
        logits, mu, logvar = model(x_all.to(device))
        loss, rec, kl = loss_fn(logits, x_all.to(device), mu, logvar)
        rec2 = F.binary_cross_entropy(torch.sigmoid(logits), x_all.to(device), reduction="sum") / N
    return loss.item(), rec.item(), kl.item(), rec2.item()


start = deterministic_elbo()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

# One full-batch step with the noise drawn by NumPy: comparable across backends.
model.train()
eps = torch.from_numpy(rng.standard_normal((N, 4)).astype(np.float32)).to(device)
mu, logvar = model.encode(x_all.to(device))
z = mu + torch.exp(0.5 * logvar) * eps
first_loss, _, _ = loss_fn(model.dec(z), x_all.to(device), mu, logvar)
optimizer.zero_grad()
first_loss.backward()
optimizer.step()
after_first = deterministic_elbo()

loader = DataLoader(TensorDataset(x_all), batch_size=64, shuffle=True)
for epoch in range(15):
    model.train()
    for (xb,) in loader:
        xb = xb.to(device)
        logits, mu, logvar = model(xb)
        loss, _, _ = loss_fn(logits, xb, mu, logvar)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
end = deterministic_elbo()
print(f"-ELBO {start[0]:.2f} -> {end[0]:.2f}; reconstruction {start[1]:.2f} -> {end[1]:.2f}; KL {end[2]:.2f}")

# Decoding the prior mean and a few random latents gives valid probabilities.
with torch.no_grad():
    samples = torch.sigmoid(model.dec(torch.randn(8, 4, device=device)))
ok = end[0] < 0.65 * start[0] and end[1] < 25.0 and abs(end[1] - end[3]) < 1e-2 * end[1]
ok = ok and bool(((samples >= 0) & (samples <= 1)).all())
if not ok:
    print("criterion failed")
    sys.exit(1)
print("PORT-RESULT " + json.dumps({
    "same_start_neg_elbo": start[0],
    "same_start_rec": start[1],
    "same_start_rec_sigmoid_bce": start[3],
    "same_start_kl": start[2],
    "same_first_step_loss": first_loss.item(),
    "same_neg_elbo_after_first_step": after_first[0],
    "end_neg_elbo": end[0],
    "end_rec": end[1],
    "end_kl": end[2],
}))
