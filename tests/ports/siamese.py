"""A siamese encoder trained with nn.TripletMarginLoss (and a CosineEmbeddingLoss term) on synthetic
classes; retrieval by F.normalize'd embeddings and torch.cdist / F.pairwise_distance.

Pass: top-1 retrieval accuracy of held-out queries against a gallery above a bar, better than
retrieval on the raw inputs.
"""
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
rng = np.random.default_rng(0)

C, D, E = 8, 24, 8          # classes, input dim, embedding dim
protos = rng.standard_normal((C, D)).astype(np.float32)
# a nuisance direction per sample with a large scale, so raw distances retrieve poorly
nuis = rng.standard_normal((4, D)).astype(np.float32) * 1.5


def sample(n):
    y = rng.integers(0, C, size=n)
    x = protos[y] + 0.5 * rng.standard_normal((n, D)).astype(np.float32) \
        + rng.standard_normal((n, 4)).astype(np.float32) @ nuis
    return x.astype(np.float32), y


Xtr, ytr = sample(512)
Xg, yg = sample(160)     # gallery
Xq, yq = sample(160)     # queries


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, E))

    def forward(self, x):
        return F.normalize(self.net(x), p=2, dim=1)


class Siamese(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()

    def forward(self, a, b):
        return self.encoder(a), self.encoder(b)


model = Siamese().to(device)
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, nn.Linear):
            m.weight.copy_(torch.from_numpy(
                rng.standard_normal(tuple(m.weight.shape)).astype(np.float32) * np.sqrt(2.0 / m.in_features)))
            m.bias.zero_()

# triplets drawn with numpy: anchor, positive (same class), negative (other class)
by_class = [np.flatnonzero(ytr == c) for c in range(C)]
T = 1600
anc = rng.integers(0, len(Xtr), size=T)
pos = np.array([rng.choice(by_class[ytr[i]]) for i in anc])
neg_cls = (ytr[anc] + rng.integers(1, C, size=T)) % C
neg = np.array([rng.choice(by_class[c]) for c in neg_cls])

Xt = torch.from_numpy(Xtr).to(device)
triplet = nn.TripletMarginLoss(margin=0.5, p=2)
cosine = nn.CosineEmbeddingLoss(margin=0.2)
opt = torch.optim.Adam(model.parameters(), lr=2e-3)

B = 100
losses = []
for epoch in range(5):
    for s in range(0, T, B):
        a = Xt[torch.from_numpy(anc[s:s + B])]
        p = Xt[torch.from_numpy(pos[s:s + B])]
        n = Xt[torch.from_numpy(neg[s:s + B])]
        ea, ep = model(a, p)          # one shared encoder on two inputs
        en = model.encoder(n)
        target = torch.cat([torch.ones(B), -torch.ones(B)]).to(device)
        loss = triplet(ea, ep, en) + 0.5 * cosine(torch.cat([ea, ea]), torch.cat([ep, en]), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())

model.eval()
with torch.no_grad():
    g = model.encoder(torch.from_numpy(Xg).to(device))
    q = model.encoder(torch.from_numpy(Xq).to(device))
    dist = torch.cdist(q, g)                     # (160, 160)
    top1 = dist.argmin(dim=1).cpu().numpy()
    acc = float((yg[top1] == yq).mean())
    raw = torch.cdist(torch.from_numpy(Xq), torch.from_numpy(Xg)).argmin(dim=1).numpy()
    raw_acc = float((yg[raw] == yq).mean())
    # positive pairs closer than negative pairs on average (pairwise_distance on paired rows)
    same = torch.from_numpy(np.array([np.flatnonzero(yg == c)[0] for c in yq]))
    other = torch.from_numpy(np.array([np.flatnonzero(yg != c)[0] for c in yq]))
    d_pos = F.pairwise_distance(q, g[same]).mean().item()
    d_neg = F.pairwise_distance(q, g[other]).mean().item()

print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}  retrieval acc {acc:.3f} (raw {raw_acc:.3f})  "
      f"d_pos {d_pos:.3f} d_neg {d_neg:.3f}")
assert acc > 0.9 and acc > raw_acc + 0.1, (acc, raw_acc)
assert d_pos < d_neg
print("PORT-RESULT " + json.dumps({
    "backend": torch.__name__,
    "same_loss_first": losses[0],
    "same_loss_5": losses[5],
    "same_raw_acc": raw_acc,
    "loss_last": losses[-1],
    "acc": acc,
    "d_pos": d_pos,
    "d_neg": d_neg,
}))
