"""WGAN-GP critic/generator steps on 2-D toy data: interpolates between real and fake samples, the
critic's gradient w.r.t. them via torch.autograd.grad(create_graph=True, retain_graph=True), and the
penalty ((||grad|| - 1)**2).mean() backpropagated into the critic's parameters.

Pass: the penalty's gradient w.r.t. one critic weight agrees with central finite differences (float64
copy of the critic), and after training the critic's gradient norm on interpolates is close to 1 and
the Wasserstein estimate has shrunk. The same_ values use NumPy interpolation weights; the training
loop itself draws its weights with torch.rand, as WGAN-GP code does.
"""
import copy
import json

import numpy as np
import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"
rng = np.random.default_rng(0)
torch.manual_seed(0)


def make_mlp(d_in, d_out):
    return nn.Sequential(nn.Linear(d_in, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, d_out))


critic = make_mlp(2, 1).to(device)
gen = make_mlp(2, 2).to(device)
for m in (critic, gen):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))


def real_batch(n):
    ang = rng.uniform(0, 2 * np.pi, size=n)
    pts = np.stack([np.cos(ang), np.sin(ang)], 1) * 2.0 + 0.05 * rng.standard_normal((n, 2))
    return torch.from_numpy(pts.astype(np.float32)).to(device)


def noise(n):
    return torch.from_numpy(rng.standard_normal((n, 2)).astype(np.float32)).to(device)


def gradient_penalty(crit, real, fake, alpha):
    inter = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    out = crit(inter)
    grads, = torch.autograd.grad(outputs=out, inputs=inter, grad_outputs=torch.ones_like(out),
                                 create_graph=True, retain_graph=True)
    return ((grads.norm(2, dim=1) - 1) ** 2).mean(), grads


# ---- deterministic check: penalty and its parameter gradient (numpy alpha) -------------------
B = 64
real0, fake0 = real_batch(B), gen(noise(B)).detach()
alpha0 = torch.from_numpy(rng.uniform(size=(B, 1)).astype(np.float32)).to(device)
gp0, g0 = gradient_penalty(critic, real0, fake0, alpha0)
critic.zero_grad()
gp0.backward()
w = critic[2].weight
i, j = divmod(int(w.grad.abs().argmax()), w.shape[1])   # the weight with the largest gradient
grad_w = w.grad[i, j].item()
gp_grad_norm = torch.sqrt(sum((p.grad ** 2).sum() for p in critic.parameters() if p.grad is not None)).item()
no_grad_params = [n for n, p in critic.named_parameters() if p.grad is None]   # the last bias

# central differences on a float64 copy
c64 = copy.deepcopy(critic).double()
eps = 1e-6
vals = []
for sgn in (1, -1):
    with torch.no_grad():
        c64[2].weight[i, j] += sgn * eps
    gp, _ = gradient_penalty(c64, real0.double(), fake0.double(), alpha0.double())
    vals.append(gp.item())
    with torch.no_grad():
        c64[2].weight[i, j] -= sgn * eps
fd = (vals[0] - vals[1]) / (2 * eps)
print(f"penalty {gp0.item():.5f}  d/dw autograd {grad_w:.6f}  finite diff {fd:.6f}")
assert abs(grad_w - fd) < 1e-3 * max(1.0, abs(fd)), (grad_w, fd)

# ---- a few WGAN-GP steps ---------------------------------------------------------------------
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.9))
lam = 10.0
w_est = []
for it in range(25):
    for _ in range(2):
        real = real_batch(B)
        fake = gen(noise(B)).detach()
        alpha = torch.rand(B, 1, device=device)
        gp, _ = gradient_penalty(critic, real, fake, alpha)
        loss_c = critic(fake).mean() - critic(real).mean() + lam * gp
        opt_c.zero_grad()
        loss_c.backward()
        opt_c.step()
    w_est.append(critic(real).mean().item() - critic(fake).mean().item())
    loss_g = -critic(gen(noise(B))).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()

real, fake = real_batch(256), gen(noise(256)).detach()
_, g = gradient_penalty(critic, real, fake, torch.rand(256, 1, device=device))
mean_norm = g.norm(dim=1).mean().item()
print(f"W estimate {np.mean(w_est[:5]):.3f} -> {np.mean(w_est[-5:]):.3f}  grad norm {mean_norm:.3f}")
assert 0.7 < mean_norm < 1.3, mean_norm
print("PORT-RESULT " + json.dumps({
    "backend": torch.__name__,
    "same_penalty": gp0.item(),
    "same_input_grad_sum": g0.abs().sum().item(),
    "same_grad_w": grad_w,
    "same_param_grad_norm": gp_grad_norm,
    "same_weight_index": [i, j],
    "same_no_grad_params": no_grad_params,
    "finite_diff": fd,
    "w_first": float(np.mean(w_est[:5])),
    "w_last": float(np.mean(w_est[-5:])),
    "grad_norm": mean_norm,
}))
