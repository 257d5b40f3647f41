"""ESPCN-style x2 super-resolution (Conv2d + nn.PixelShuffle(2)) on synthetic smooth images.

High-resolution images are sums of random low-frequency sinusoids; the low-resolution inputs are
F.avg_pool2d(hr, 2). The net predicts a residual on top of bilinear upsampling.
Pass: the net's PSNR on held-out images beats bicubic and nearest upsampling (F.interpolate).
"""
import json
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
rng = np.random.default_rng(0)
H = 24


def smooth_images(n):
    yy, xx = np.meshgrid(np.arange(H), np.arange(H), indexing="ij")
    out = np.zeros((n, 1, H, H), np.float32)
    for i in range(n):
        for _ in range(4):
            fy, fx = rng.uniform(-0.6, 0.6, size=2)
            ph = rng.uniform(0, 2 * np.pi)
            out[i, 0] += rng.uniform(0.3, 1.0) * np.sin(fy * yy + fx * xx + ph)
    return out


hr_train = torch.from_numpy(smooth_images(64)).to(device)
hr_test = torch.from_numpy(smooth_images(16)).to(device)
lr_train = F.avg_pool2d(hr_train, 2)
lr_test = F.avg_pool2d(hr_test, 2)


class ESPCN(nn.Module):
    def __init__(self, r=2):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.Tanh(),
            nn.Conv2d(32, 16, 3, padding=1), nn.Tanh(),
            nn.Conv2d(16, r * r, 3, padding=1),
        )
        self.shuffle = nn.PixelShuffle(r)

    def forward(self, x):
        base = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        return base + self.shuffle(self.body(x))


model = ESPCN().to(device)
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            fan_in = m.in_channels * m.kernel_size[0] * m.kernel_size[1]
            m.weight.copy_(torch.from_numpy(
                rng.standard_normal(tuple(m.weight.shape)).astype(np.float32) / np.sqrt(fan_in)))
            m.bias.zero_()
    model.body[-1].weight.mul_(0.1)


def psnr(pred, target):
    mse = F.mse_loss(pred, target).item()
    peak = (target.max() - target.min()).item()
    return 10 * math.log10(peak ** 2 / mse)


opt = torch.optim.Adam(model.parameters(), lr=2e-3)
losses = []
for step in range(100):
    idx = torch.from_numpy(np.arange(16) + 16 * (step % 4))
    pred = model(lr_train[idx])
    loss = F.mse_loss(pred, hr_train[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())

model.eval()
with torch.no_grad():
    p_net = psnr(model(lr_test), hr_test)
    p_bicubic = psnr(F.interpolate(lr_test, scale_factor=2, mode="bicubic", align_corners=False), hr_test)
    p_bilinear = psnr(F.interpolate(lr_test, size=(H, H), mode="bilinear", align_corners=False), hr_test)
    p_nearest = psnr(F.interpolate(lr_test, scale_factor=2, mode="nearest"), hr_test)

print(f"loss {losses[0]:.5f} -> {losses[-1]:.5f}  PSNR net {p_net:.2f} bicubic {p_bicubic:.2f} "
      f"bilinear {p_bilinear:.2f} nearest {p_nearest:.2f}")
assert p_net > p_bicubic + 1.0 and p_net > p_nearest + 1.0, (p_net, p_bicubic, p_nearest)
assert losses[-1] < 0.5 * losses[0]
print("PORT-RESULT " + json.dumps({
    "backend": torch.__name__,
    "same_loss_first": losses[0],
    "same_loss_10": losses[10],
    "same_psnr_bicubic": p_bicubic,
    "same_psnr_bilinear": p_bilinear,
    "same_psnr_nearest": p_nearest,
    "same_psnr_net": p_net,
    "loss_last": losses[-1],
}))
