"""torch.compile on a training loop: a compiled MLP classifier and a compiled TransformerEncoder regressor
follow the same trajectory as their eager twins; dropout and eval mode under compile."""
import json
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
rng = np.random.default_rng(0)


def init_(model, scale=0.2):
    g = np.random.default_rng(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(g.standard_normal(tuple(p.shape)).astype(np.float32) * scale))


def train(model, x, y, loss_fn, steps, lr):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# an MLP classifier
X = torch.from_numpy(rng.standard_normal((256, 20)).astype(np.float32))
Y = torch.from_numpy((X.numpy()[:, :3].sum(1) > 0).astype(np.int64) + (X.numpy()[:, 3] > 1).astype(np.int64))
def mlp():
    m = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 3))
    init_(m)
    return m

t0 = time.perf_counter()
eager = train(mlp(), X, Y, F.cross_entropy, 120, 3e-3)
cm = torch.compile(mlp())
compiled = train(cm, X, Y, F.cross_entropy, 120, 3e-3)
mlp_gap = max(abs(a - b) for a, b in zip(eager, compiled))
assert mlp_gap < 1e-4, mlp_gap
assert compiled[-1] < 0.35 * compiled[0], (compiled[0], compiled[-1])
cm.eval()
with torch.no_grad():
    acc = (cm(X).argmax(1) == Y).float().mean().item()
assert acc > 0.9, acc
keys = list(cm.state_dict())[:2]

# a TransformerEncoder regressor (sequence sum)
S = torch.from_numpy(rng.standard_normal((32, 12, 16)).astype(np.float32))
T = F.layer_norm(S.sum(dim=1, keepdim=True).expand(-1, 12, -1).contiguous(), (16,))
def encoder():
    m = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 2,
                              enable_nested_tensor=False)
    init_(m, 0.1)
    return m

enc_eager = train(encoder(), S, T, F.mse_loss, 100, 1e-2)
enc_comp = train(torch.compile(encoder()), S, T, F.mse_loss, 100, 1e-2)
# compiled kernels may order float sums differently; compare the first steps, before training amplifies it
enc_gap = max(abs(a - b) / max(abs(a), 1e-3) for a, b in zip(enc_eager[:10], enc_comp[:10]))
assert enc_gap < 1e-3, enc_gap
assert enc_comp[-1] < 0.5 * enc_comp[0], (enc_comp[0], enc_comp[-1])

# dropout under compile still drops (training) and is the identity in eval
d = torch.compile(nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5)))
z = torch.ones(4, 8)
a, b = d(z), d(z)
assert not torch.equal(a, b)
d.eval()
assert torch.equal(d(z), d(z))

print("PORT-RESULT " + json.dumps({
    "same_mlp_losses": compiled[:5],
    "mlp_final_loss": compiled[-1],
    "same_encoder_losses": enc_comp[:3],
    "encoder_final_loss": enc_comp[-1],
    "same_state_dict_keys": keys,
    "same_accuracy": acc,
    "seconds": round(time.perf_counter() - t0, 2),
}))
