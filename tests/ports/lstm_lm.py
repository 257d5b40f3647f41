"""Char-level 2-layer LSTM language model on a synthetic grammar, truncated BPTT."""
import json
import math
import sys

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(0)
device = "cuda" if torch.cuda.is_available() else "cpu"

# Synthetic grammar: sentences "the <noun> <verb>s the <noun> ." with a small vocabulary.
nouns = ["cat", "dog", "bird", "fox"]
verbs = ["see", "chase", "like"]
words = []
for _ in range(400):
    words += ["the", nouns[rng.integers(4)], verbs[rng.integers(3)] + "s", "the", nouns[rng.integers(4)], "."]
text = " ".join(words)
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
V = len(chars)


class LM(nn.Module):
    def __init__(self, vocab, emb=16, hidden=48):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, state=None):
        h, state = self.lstm(self.embed(x), state)
        return self.head(h), state

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.lstm.num_layers, bsz, self.lstm.hidden_size),
                weight.new_zeros(self.lstm.num_layers, bsz, self.lstm.hidden_size))


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


model = LM(V).to(device)
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(rng.uniform(-0.15, 0.15, size=tuple(p.shape)).astype(np.float32)))

B, T = 16, 20
n = (len(data) - 1) // B
inputs = data[: n * B].view(B, n)
targets = data[1: n * B + 1].view(B, n)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def evaluate():
    model.eval()
    total, count = 0.0, 0
    state = None
    with torch.no_grad():
        for i in range(0, n - T + 1, T):
            logits, state = model(inputs[:, i:i + T].to(device), state)
            total += criterion(logits.reshape(-1, V), targets[:, i:i + T].reshape(-1).to(device)).item() * B * T
            count += B * T
    return math.exp(total / count)


ppl_start = evaluate()
losses = []
for epoch in range(3):
    model.train()
    state = model.init_hidden(B)
    for i in range(0, n - T + 1, T):
        x = inputs[:, i:i + T].to(device)
        y = targets[:, i:i + T].to(device)
        state = repackage_hidden(state)
        logits, state = model(x, state)
        loss = criterion(logits.reshape(-1, V), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        losses.append(loss.item())
        if len(losses) == 1:
            first_gnorm = float(gnorm)
ppl_end = evaluate()
print(f"perplexity {ppl_start:.2f} -> {ppl_end:.2f} (vocab {V})")
if not (ppl_end < 0.4 * ppl_start and ppl_end < 4.0):
    print("perplexity did not drop enough")
    sys.exit(1)
print("PORT-RESULT " + json.dumps({
    "same_ppl_start": ppl_start,
    "same_first_losses": losses[:5],
    "same_first_grad_norm": first_gnorm,
    "same_ppl_end": ppl_end,
    "steps": len(losses),
}))
