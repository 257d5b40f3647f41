"""Small models exported to IR JSON for ``torchlean check --model`` in the mutation test.

Run as ``python models.py OUTDIR`` with the package under test on ``PYTHONPATH``; writes
``mlp.json``, ``cnn.json`` and ``attn.json`` (each with its safetensors payload).
"""

import sys
from pathlib import Path

import torchlean as torch
import torchlean.nn as nn
import torchlean.nn.functional as F
from torchlean import ir


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(6, 16), nn.LayerNorm(16), nn.Linear(16, 5)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = h + torch.tanh(self.norm(h)) + torch.sigmoid(h) + F.softplus(h)
        z = self.fc2(h) * 4.0      # a sharp temperature: the x100 pass drives the logits past exp's range
        return F.log_softmax(z, dim=-1) + F.softmax(z, dim=-1)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 2 * 2, 3)

    def forward(self, x):
        h = self.pool(torch.relu(self.conv(x)))
        return F.softmax(self.fc(h.flatten(1)) * 4.0, dim=-1)


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        a = F.scaled_dot_product_attention(self.q(x), self.k(x), self.v(x))
        return F.gelu(self.norm(a + x))


def export(out: Path):
    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    for name, model, x in (("mlp", MLP(), torch.randn(4, 6)), ("cnn", CNN(), torch.randn(2, 2, 8, 8)),
                           ("attn", Attn(), torch.randn(2, 5, 8))):
        g, payload = ir.trace(model, x)
        ir.save(g, payload, str(out / f"{name}.json"))


if __name__ == "__main__":
    export(Path(sys.argv[1]))
