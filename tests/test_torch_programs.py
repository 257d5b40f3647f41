"""Whole PyTorch programs of the tensor-and-autograd kind, run as written with ``torch`` bound to
torch and then to torchlean: the results agree to float32 precision.

Each program is the source text of an ordinary PyTorch script (manual parameters, autograd, in-place
updates under no_grad, indexing idioms); only the module behind the name ``torch`` changes.
Random numbers differ between the two libraries, so inputs come from NumPy.
"""

import textwrap

import numpy as np
import pytest

import torchlean

torch = pytest.importorskip("torch")

LINEAR_REGRESSION = """
# The classic tutorial: fit y = 2x + 1 with autograd and a hand-written SGD step.
x = torch.tensor(data["x"])
y = 2 * x + 1 + torch.tensor(data["noise"])
w = torch.zeros(1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
losses = []
for step in range(60):
    pred = x * w + b
    loss = ((pred - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        b -= 0.1 * b.grad
        w.grad.zero_()
        b.grad.zero_()
    losses.append(loss.item())
result = [w.item(), b.item(), losses[0], losses[-1]]
"""

SOFTMAX_CLASSIFIER = """
# A two-layer classifier written with raw tensors: init under no_grad, cross entropy by
# indexing log-probabilities, accuracy with the (values, indices) idiom, in-place SGD.
X = torch.tensor(data["X"])
Y = torch.tensor(data["Y"]).long()
W1 = torch.empty(8, 16)
W2 = torch.empty(16, 3)
with torch.no_grad():
    W1.copy_(torch.tensor(data["W1"]))
    W2.copy_(torch.tensor(data["W2"]))
b1 = torch.zeros(16)
for p in (W1, W2, b1):
    p.requires_grad_()
history = []
for epoch in range(25):
    h = (X @ W1 + b1).clamp(min=0)
    logits = h @ W2
    logp = logits - logits.logsumexp(dim=1, keepdim=True)
    loss = -logp[torch.arange(len(Y)), Y].mean()
    for p in (W1, W2, b1):
        p.grad = None
    loss.backward()
    with torch.no_grad():
        for p in (W1, W2, b1):
            p.sub_(0.5 * p.grad)
    _, pred = logits.max(1)
    acc = (pred == Y).float().mean().item()
    history.append((loss.item(), acc))
top2 = logits.topk(2, dim=1).indices[:5].tolist()
result = [history[0][0], history[-1][0], history[-1][1], top2, int(pred.sum())]
"""

BIGRAM = """
# A bigram character model in the makemore style: counts with index_put accumulate, a lookup
# table trained with one-hot @ W, sampling replaced by argmax.
xs = torch.tensor(data["xs"])
ys = torch.tensor(data["ys"])
N = torch.zeros((5, 5), dtype=torch.int32)
for a, b in zip(xs.tolist(), ys.tolist()):
    N[a, b] += 1
P = (N + 1).float()
P /= P.sum(1, keepdim=True)
nll = -P[xs, ys].log().mean()
W = torch.tensor(data["W"], requires_grad=True)
for k in range(30):
    xenc = torch.nn.functional.one_hot(xs, num_classes=5).float() if hasattr(torch.nn.functional, "one_hot") \\
        else torch.eye(5)[xs]
    logits = xenc @ W
    counts = logits.exp()
    probs = counts / counts.sum(1, keepdims=True)
    loss = -probs[torch.arange(len(xs)), ys].log().mean() + 0.01 * (W ** 2).mean()
    W.grad = None
    loss.backward()
    W.data += -5.0 * W.grad
best = probs.argmax(dim=1)
result = [N.sum().item(), nll.item(), loss.item(), best.tolist()[:8], P.max(dim=1).values.tolist()]
"""

AUTOGRAD_TOOLS = """
# autograd.grad for an input gradient, a hook that clips, retain_grad, and a custom Function.
class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g

x = torch.tensor(data["v"], requires_grad=True)
h = Square.apply(x)
h.retain_grad()
h.register_hook(lambda g: g.clamp(-0.5, 0.5))
out = (h * torch.tensor(data["w"])).sum()
(gx,) = torch.autograd.grad(out, x, retain_graph=True)
out.backward()
mask = x > 0
sel = x[mask]
y = x.detach().clone()
y[~mask] = 0.0
y[:2] += 10
result = [gx.tolist(), x.grad.tolist(), h.grad.tolist(), sel.tolist(), y.tolist(), x.grad_fn is None]
"""

IDIOMS = """
# Lines that recur across public example programs, one result each.
x = torch.tensor([row[:4] for row in data["X"][:6]])
y = torch.tensor(data["Y"])[:6]
r = []
r.append(x.size(0) + x.shape[-1] + len(x) + x.dim() + x.numel())
r.append(x.view(-1, 2).shape[0])
r.append(torch.cat([x, x * 2], 1).sum().item())
r.append(x.unsqueeze(1).expand(-1, 3, -1).shape)
r.append((x > 0).sum().item())
r.append((x.argmax(dim=1) == y % 4).float().mean().item())
r.append(torch.max(x, 1)[1].tolist())
r.append(x.data.cpu().numpy().sum().item())
r.append(x.clone().detach().requires_grad_().is_leaf)
r.append(x[x > 0.5].tolist())
r.append(torch.where(x > 0, x, torch.zeros_like(x)).sum().item())
r.append(x.masked_fill(x < 0, 0.0).sum().item())
r.append(x.t().contiguous().view(-1)[:3].tolist())
r.append(torch.FloatTensor([1, 2]).tolist())
r.append(x.type(torch.LongTensor).dtype == torch.long)
r.append(torch.arange(10).float().mean().item())
r.append(torch.linspace(0, 1, 5).tolist())
r.append(x.new_zeros(2, 3).shape)
r.append(torch.stack([x, x], dim=0).permute(1, 0, 2).shape)
r.append(x.std(dim=0, unbiased=False).tolist())
r.append(torch.randperm(4).sort().values.tolist())
r.append(x.chunk(2, dim=1)[1].shape)
r.append([t.shape for t in x.split([1, 3], dim=1)])
r.append(torch.eye(3)[torch.tensor([2, 0])].tolist())
r.append(torch.nn.functional.one_hot(torch.tensor([0, 2]), 3).tolist())
r.append(x.clamp(min=0).pow(2).sum(dim=-1, keepdim=True).sqrt().squeeze(-1).tolist())
r.append(x.flatten().topk(3).values.tolist())
r.append(torch.einsum("ij,kj->ik", x, x).trace().item())
r.append(x.cumsum(0)[-1].tolist())
r.append(torch.isclose(x, x + 1e-9).all().item())
r.append(torch.norm(x, dim=1).tolist())
r.append(x.log_softmax(dim=-1).exp().sum(-1).tolist())
r.append(int(torch.tensor(3.7)) + float(torch.tensor(0.5)))
r.append(x.mean().item() if x.is_floating_point() else None)
r.append(torch.tensor([[1, 2], [3, 4]]).T.tolist())
r.append([float(v) for v in torch.tensor([1.5, 2.5]) * torch.tensor(2)])
result = [v.tolist() if hasattr(v, "tolist") else list(v) if isinstance(v, tuple) else v for v in r]
"""

PROGRAMS = {"linear_regression": LINEAR_REGRESSION, "idioms": IDIOMS, "softmax_classifier": SOFTMAX_CLASSIFIER,
            "bigram": BIGRAM, "autograd_tools": AUTOGRAD_TOOLS}


def _data():
    rng = np.random.default_rng(0)
    return {"x": rng.uniform(-1, 1, 32).astype(np.float32).tolist(),
            "noise": (0.05 * rng.standard_normal(32)).astype(np.float32).tolist(),
            "X": rng.standard_normal((30, 8)).astype(np.float32).tolist(),
            "Y": rng.integers(0, 3, 30).tolist(),
            "W1": (0.3 * rng.standard_normal((8, 16))).astype(np.float32).tolist(),
            "W2": (0.3 * rng.standard_normal((16, 3))).astype(np.float32).tolist(),
            "xs": rng.integers(0, 5, 40).tolist(), "ys": rng.integers(0, 5, 40).tolist(),
            "W": (0.1 * rng.standard_normal((5, 5))).astype(np.float32).tolist(),
            "v": rng.standard_normal(6).astype(np.float32).tolist(),
            "w": rng.standard_normal(6).astype(np.float32).tolist()}


def _run(source, lib):
    env = {"torch": lib, "data": _data()}
    exec(textwrap.dedent(source), env)
    return env["result"]


def _close(a, b, path="result"):
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=2e-4, abs=2e-5), path
    else:
        assert a == b, path


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_gives_torchs_results(name):
    _close(_run(PROGRAMS[name], torchlean), _run(PROGRAMS[name], torch))
