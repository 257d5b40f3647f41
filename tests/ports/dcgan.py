"""Small DCGAN on synthetic 8x8 images: ConvTranspose2d generator, Conv2d + LeakyReLU discriminator."""
import json
import math
import sys

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
NZ = 8

# "Real" images: a bright 4x4 square at a random position on a dark background, in [-1, 1].
N = 512
real = -np.ones((N, 1, 8, 8), dtype=np.float32)
for i in range(N):
    r, c = rng.integers(0, 5, size=2)
    real[i, 0, r:r + 4, c:c + 4] = 1.0
real += rng.normal(0, 0.05, size=real.shape).astype(np.float32)
real_t = torch.from_numpy(real)

netG = nn.Sequential(
    nn.ConvTranspose2d(NZ, 32, 4, 1, 0, bias=False), nn.BatchNorm2d(32), nn.ReLU(True),   # 4x4
    nn.ConvTranspose2d(32, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),   # 8x8
    nn.Conv2d(16, 1, 3, 1, 1, bias=False), nn.Tanh(),
).to(device)
netD = nn.Sequential(
    nn.Conv2d(1, 16, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),              # 4x4
    nn.Conv2d(16, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2, inplace=True),  # 2x2
    nn.Flatten(), nn.Linear(32 * 2 * 2, 1),
).to(device)


def weights_init(m):
    # the DCGAN paper's scheme (the PyTorch example's classname test), drawn with NumPy
    classname = m.__class__.__name__
    if classname.find("Conv") != -1 or classname.find("Linear") != -1:
        m.weight.data.copy_(torch.from_numpy(rng.normal(0, 0.02, size=tuple(m.weight.shape)).astype(np.float32)))
        if m.bias is not None:
            m.bias.data.fill_(0)
    elif classname.find("BatchNorm") != -1:
        m.weight.data.copy_(torch.from_numpy(rng.normal(1.0, 0.02, size=tuple(m.weight.shape)).astype(np.float32)))
        nn.init.constant_(m.bias.data, 0)


netG.apply(weights_init)
netD.apply(weights_init)
criterion = nn.BCEWithLogitsLoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))

B, steps = 64, 60
batches = rng.integers(0, N, size=(steps, B))
noises = rng.standard_normal((steps, B, NZ, 1, 1)).astype(np.float32)
hist = []
real_label, fake_label = 1.0, 0.0
for step in range(steps):
    xr = real_t[batches[step]].to(device)
    b_size = xr.size(0)
    # (1) update D: maximize log(D(x)) + log(1 - D(G(z))), real and fake gradients accumulated
    netD.zero_grad()
    label = torch.full((b_size,), real_label, dtype=torch.float, device=device)
    output = netD(xr).view(-1)
    errD_real = criterion(output, label)
    errD_real.backward()
    D_x = torch.sigmoid(output).mean().item()
    z = torch.from_numpy(noises[step]).to(device)
    fake = netG(z)
    label.fill_(fake_label)
    output = netD(fake.detach()).view(-1)
    errD_fake = criterion(output, label)
    errD_fake.backward()
    errD = errD_real + errD_fake
    optD.step()
    # (2) update G: maximize log(D(G(z)))
    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake).view(-1)
    errG = criterion(output, label)
    errG.backward()
    optG.step()
    hist.append((errD.item(), errG.item()))

# How well does D separate real from fake after a few steps (eval mode, fresh noise)?
netD.eval()
netG.eval()
with torch.no_grad():
    z = torch.randn(256, NZ, 1, 1, device=device)
    p_real = torch.sigmoid(netD(real_t[:256].to(device))).mean().item()
    p_fake = torch.sigmoid(netD(netG(z))).mean().item()
    gen = netG(z)
print(f"lossD {hist[0][0]:.3f} -> {hist[-1][0]:.3f}, lossG {hist[0][1]:.3f} -> {hist[-1][1]:.3f}; "
      f"D(real) {p_real:.3f}, D(fake) {p_fake:.3f}")
ok = all(math.isfinite(a) and math.isfinite(b) for a, b in hist)
early_sep = min(d for d, _ in hist[:10]) < 0.9 * hist[0][0]  # D learns to separate early on
ok = ok and early_sep and p_real > p_fake and bool(gen.abs().max() <= 1.0)
if not ok:
    print("criterion failed")
    sys.exit(1)
print("PORT-RESULT " + json.dumps({
    "same_first_lossD": hist[0][0],
    "same_first_lossG": hist[0][1],
    "same_losses_5": [v for pair in hist[:5] for v in pair],
    "same_min_lossD_10": min(d for d, _ in hist[:10]),
    "lossD_end": hist[-1][0],
    "lossG_end": hist[-1][1],
    "p_real": p_real,
    "p_fake": p_fake,
}))
