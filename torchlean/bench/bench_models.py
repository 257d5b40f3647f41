"""Example models: training throughput of each torchlean model vs its PyTorch twin, same process.

    python -m torchlean.bench.bench_models.py [--device cpu|cuda] [--models mlp,cnn,...] [--runs 10]
                                      [--against torch|none] [--save] [--graph]
    torchlean bench models [--device cuda]

Every model of ``torchlean.models`` has a twin here written with ``torch.nn``: the
same architecture and parameter names, so the twin loads the torchlean model's
``state_dict`` as is (``copy_weights``). For each model the benchmark copies the
weights, runs a forward pass on the same batch in both (and prints the largest
difference of the outputs), then times training steps (forward, loss, backward,
Adam) and prints samples per second of each and the ratio torchlean / torch
(higher is better for torchlean). Medians over ``--runs`` timed steps after two
warm-up steps. With ``--graph`` on cuda the step is also timed captured as a CUDA graph
(``tl.cuda.capture_step``: forward, loss and backward replayed with one launch, Adam eager),
against the same eager torch step. ``tests/test_models.py`` uses the twins to check forward agreement.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import torchlean as tl  # noqa: E402
from torchlean import models as M  # noqa: E402


def _torch():
    import torch
    return torch


# ---- the twins ----------------------------------------------------------------------------------

def twin_classes():
    """The PyTorch twins, keyed by model name (defined lazily so importing needs no torch)."""
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

    class MLP(nn.Module):
        def __init__(self, in_features, hidden, out_features):
            super().__init__()
            layers, prev = [], in_features
            for h in hidden:
                layers += [nn.Linear(prev, h), nn.ReLU()]
                prev = h
            layers.append(nn.Linear(prev, out_features))
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x.flatten(1) if x.dim() > 2 else x)

    class CNN(nn.Module):
        def __init__(self, in_channels=1, num_classes=10, channels=(16, 32), image_size=8):
            super().__init__()
            c1, c2 = channels
            self.features = nn.Sequential(
                nn.Conv2d(in_channels, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            self.classifier = nn.Linear(c2 * (image_size // 4) ** 2, num_classes)

        def forward(self, x):
            return self.classifier(self.features(x).flatten(1))

    class BasicBlock(nn.Module):
        def __init__(self, in_planes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or in_planes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + (x if self.downsample is None else self.downsample(x)))

    class ResNet(nn.Module):
        def __init__(self, in_channels=1, num_classes=10, widths=(16, 32, 64), blocks_per_stage=1):
            super().__init__()
            self.conv1 = nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(widths[0])
            prev = widths[0]
            for i, w in enumerate(widths):
                blocks = []
                for j in range(blocks_per_stage):
                    blocks.append(BasicBlock(prev, w, stride=2 if (i > 0 and j == 0) else 1))
                    prev = w
                setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
            self.n_stages = len(widths)
            self.fc = nn.Linear(prev, num_classes)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            for i in range(self.n_stages):
                x = getattr(self, f"layer{i + 1}")(x)
            return self.fc(x.mean(dim=(2, 3)))

    class TransformerBlock(nn.Module):
        def __init__(self, dim, num_heads, mlp_ratio=4):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, num_heads, batch_first=True)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

        def forward(self, x):
            h = self.norm1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    class ViT(nn.Module):
        def __init__(self, image_size=8, patch_size=2, in_channels=1, num_classes=10, dim=64, depth=2,
                     num_heads=4, mlp_ratio=2):
            super().__init__()
            n = (image_size // patch_size) ** 2
            self.patch_embed = nn.Conv2d(in_channels, dim, patch_size, stride=patch_size)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, dim))
            self.blocks = nn.ModuleList([TransformerBlock(dim, num_heads, mlp_ratio) for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, num_classes)

        def forward(self, x):
            p = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(x.shape[0], 1, -1), p], dim=1) + self.pos_embed
            for b in self.blocks:
                x = b(x)
            return self.head(self.norm(x[:, 0]))

    class SpectralConv1d(nn.Module):
        def __init__(self, cin, cout, modes):
            super().__init__()
            self.modes = modes
            self.w_re = nn.Parameter(torch.zeros(modes, cin, cout))
            self.w_im = nn.Parameter(torch.zeros(modes, cin, cout))

        def forward(self, x):                       # (B, grid, C), channels last
            n = x.shape[1]
            X = torch.fft.rfft(x, dim=1)
            w = torch.complex(self.w_re, self.w_im)
            Y = torch.zeros(x.shape[0], n // 2 + 1, self.w_re.shape[2], dtype=X.dtype, device=x.device)
            Y[:, :self.modes] = torch.einsum("bki,kio->bko", X[:, :self.modes], w)
            return torch.fft.irfft(Y, n=n, dim=1)

    class FNO1d(nn.Module):
        def __init__(self, modes=16, width=32, n_layers=4, in_channels=1, hidden=128):
            super().__init__()
            self.lift = nn.Linear(in_channels + 1, width)
            self.spectral = nn.ModuleList([SpectralConv1d(width, width, modes) for _ in range(n_layers)])
            self.pointwise = nn.ModuleList([nn.Linear(width, width) for _ in range(n_layers)])
            self.proj1 = nn.Linear(width, hidden)
            self.proj2 = nn.Linear(hidden, 1)

        def forward(self, u):
            squeeze = u.dim() == 2
            if squeeze:
                u = u.unsqueeze(-1)
            n, grid = u.shape[0], u.shape[1]
            x = (torch.arange(grid, device=u.device, dtype=u.dtype) / grid).reshape(1, grid, 1).expand(n, grid, 1)
            v = self.lift(torch.cat([u, x], dim=-1))
            for i, (sc, pw) in enumerate(zip(self.spectral, self.pointwise)):
                v = sc(v) + pw(v)
                if i < len(self.spectral) - 1:
                    v = F.gelu(v)
            out = self.proj2(F.gelu(self.proj1(v)))
            return out.squeeze(-1) if squeeze else out

    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.n_head = n_head
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            b, t, e = x.shape
            qkv = self.c_attn(x).reshape(b, t, 3, self.n_head, e // self.n_head).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(b, t, e))

    class MLPBlock(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention(n_embd, n_head)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLPBlock(n_embd)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, vocab_size, block_size=64, n_layer=2, n_head=4, n_embd=64, tie_weights=True):
            super().__init__()
            self.transformer = nn.ModuleDict({
                "wte": nn.Embedding(vocab_size, n_embd), "wpe": nn.Embedding(block_size, n_embd),
                "h": nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
                "ln_f": nn.LayerNorm(n_embd)})
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            if tie_weights:
                self.lm_head.weight = self.transformer.wte.weight

        def forward(self, idx):
            t = idx.shape[-1]
            x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t, device=idx.device))
            for blk in self.transformer.h:
                x = blk(x)
            return self.lm_head(self.transformer.ln_f(x))

    class MambaBlock(nn.Module):
        def __init__(self, d_model, d_state=8, d_conv=4, expand=2, dt_rank=None):
            super().__init__()
            di = expand * d_model
            dt_rank = dt_rank or math.ceil(d_model / 16)
            self.d_inner, self.d_state, self.dt_rank = di, d_state, dt_rank
            self.in_proj = nn.Linear(d_model, 2 * di, bias=False)
            self.conv1d = nn.Conv1d(di, di, d_conv, groups=di, padding=d_conv - 1)
            self.x_proj = nn.Linear(di, dt_rank + 2 * d_state, bias=False)
            self.dt_proj = nn.Linear(dt_rank, di)
            self.A_log = nn.Parameter(torch.zeros(di, d_state))
            self.D = nn.Parameter(torch.ones(di))
            self.out_proj = nn.Linear(di, d_model, bias=False)

        def forward(self, u):
            b, t, _ = u.shape
            di, ds = self.d_inner, self.d_state
            x, z = self.in_proj(u).split(di, dim=-1)
            x = F.silu(self.conv1d(x.transpose(1, 2))[..., :t].transpose(1, 2))
            dt, Bm, Cm = self.x_proj(x).split([self.dt_rank, ds, ds], dim=-1)
            dt = F.softplus(self.dt_proj(dt))
            dA = torch.exp(dt.unsqueeze(-1) * -torch.exp(self.A_log))
            dBx = dt.unsqueeze(-1) * Bm.unsqueeze(2) * x.unsqueeze(-1)
            h = torch.zeros(b, di, ds, dtype=u.dtype, device=u.device)
            hs = []
            for i in range(t):
                h = dA[:, i] * h + dBx[:, i]
                hs.append(h)
            h = torch.stack(hs, dim=1)
            y = (h * Cm.unsqueeze(2)).sum(-1) + x * self.D
            return self.out_proj(y * F.silu(z))

    class ResidualBlock(nn.Module):
        def __init__(self, d_model, **kw):
            super().__init__()
            self.norm = nn.LayerNorm(d_model)
            self.mixer = MambaBlock(d_model, **kw)

        def forward(self, x):
            return x + self.mixer(self.norm(x))

    class MambaLM(nn.Module):
        def __init__(self, vocab_size, d_model=64, n_layer=2, d_state=8, d_conv=4, expand=2, tie_weights=True):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, d_model)
            self.layers = nn.ModuleList([ResidualBlock(d_model, d_state=d_state, d_conv=d_conv, expand=expand)
                                         for _ in range(n_layer)])
            self.norm_f = nn.LayerNorm(d_model)
            self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
            if tie_weights:
                self.lm_head.weight = self.embedding.weight

        def forward(self, idx):
            x = self.embedding(idx)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm_f(x))

    return {"mlp": MLP, "cnn": CNN, "resnet": ResNet, "vit": ViT, "fno1d": FNO1d, "gpt": GPT, "mamba": MambaLM}


# ---- model, batch and loss per example ---------------------------------------------------------

VOCAB, BLOCK = 96, 64

# name -> (torchlean class, constructor kwargs, batch size of the training example)
EXAMPLES = {
    "mlp": (M.MLP, {"in_features": 64, "hidden": [128, 64], "out_features": 10}, 64),
    "cnn": (M.CNN, {}, 64),
    "resnet": (M.ResNet, {}, 64),
    "vit": (M.ViT, {}, 64),
    "fno1d": (M.FNO1d, {"modes": 16, "width": 32, "n_layers": 4}, 20),
    "gpt": (M.GPT, {"vocab_size": VOCAB, "block_size": BLOCK, "n_layer": 2, "n_head": 4, "n_embd": 64}, 32),
    "mamba": (M.MambaLM, {"vocab_size": VOCAB, "d_model": 64, "n_layer": 2, "d_state": 8}, 32),
}


def make_pair(name, seed=0, **overrides):
    """``(ours, twin)``: the torchlean model initialised from ``seed`` and its twin holding the same weights."""
    cls, kw, _ = EXAMPLES[name]
    kw = {**kw, **overrides}
    tl.manual_seed(seed)
    ours = cls(**kw)
    twin = twin_classes()[name](**kw)
    copy_weights(ours, twin)
    return ours, twin


def copy_weights(ours, twin):
    """Load the torchlean model's state dict (parameters and buffers) into the torch twin, strictly."""
    torch = _torch()
    sd = {k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()}
    twin.load_state_dict(sd, strict=True)


def make_batch(name, batch_size, seed=0):
    """A NumPy ``(input, target)`` batch of the example's shapes (digits-like images, Burgers-like fields, ids)."""
    rng = np.random.default_rng(seed)
    if name == "mlp":
        return rng.random((batch_size, 64), dtype=np.float32), rng.integers(0, 10, batch_size)
    if name in ("cnn", "resnet", "vit"):
        return rng.random((batch_size, 1, 8, 8), dtype=np.float32), rng.integers(0, 10, batch_size)
    if name == "fno1d":
        u = rng.standard_normal((batch_size, 64)).astype(np.float32)
        return u, np.roll(u, 3, axis=1) * np.float32(0.5)
    ids = rng.integers(0, VOCAB, (batch_size, BLOCK + 1))
    return ids[:, :-1], ids[:, 1:]


def loss_ours(name, out, y):
    if name == "fno1d":
        d = out - y
        return ((d * d).sum(dim=-1).sqrt() / (y * y).sum(dim=-1).sqrt()).mean()
    if name in ("gpt", "mamba"):
        return tl.nn.F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return tl.nn.F.cross_entropy(out, y)


def loss_torch(name, out, y):
    torch = _torch()
    if name == "fno1d":
        return (torch.linalg.vector_norm(out - y, dim=-1) / torch.linalg.vector_norm(y, dim=-1)).mean()
    if name in ("gpt", "mamba"):
        return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return torch.nn.functional.cross_entropy(out, y)


# ---- timing ---------------------------------------------------------------------------------------

def _median_step(step, n, sync):
    for _ in range(2):
        step()
    sync()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(name, device, steps, against=True, graph=False):
    torch = _torch() if against else None
    ours, twin = make_pair(name) if against else (None, None)
    if not against:
        cls, kw, _ = EXAMPLES[name]
        tl.manual_seed(0)
        ours = cls(**kw)
    bs = EXAMPLES[name][2]
    xb, yb = make_batch(name, bs)
    x, y = tl.tensor(xb).to(device=device), tl.tensor(yb).to(device=device)
    ours.to(device=device)
    diff = None
    if against:
        with tl.no_grad():
            out = ours(x).numpy()
        with torch.no_grad():
            ref = twin(torch.tensor(xb)).numpy()
        diff = float(np.max(np.abs(out - ref)) / max(1e-30, np.max(np.abs(ref))))
    opt = tl.optim.Adam(ours.parameters(), lr=1e-3)

    def step_ours():
        loss = loss_ours(name, ours(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()

    sync_ours = (lambda: None) if device == "cpu" else (lambda: tl.cuda.synchronize())
    t_ours = _median_step(step_ours, steps, sync_ours)
    t_graph = None
    if graph and device == "cuda":
        captured = tl.cuda.capture_step(lambda a, b: loss_ours(name, ours(a), b), x, y)

        def step_graph():
            opt.zero_grad()
            loss = captured(x, y)
            opt.step()
            loss.item()
        t_graph = _median_step(step_graph, steps, sync_ours)
    t_torch = None
    tdev = device if against and (device == "cpu" or torch.cuda.is_available()) else None
    if tdev is not None:
        twin.to(tdev)
        tx, ty = torch.tensor(xb).to(tdev), torch.tensor(yb).to(tdev)
        topt = torch.optim.Adam(twin.parameters(), lr=1e-3)

        def step_torch():
            loss = loss_torch(name, twin(tx), ty)
            topt.zero_grad()
            loss.backward()
            topt.step()
            loss.item()
        sync_torch = (lambda: None) if tdev == "cpu" else torch.cuda.synchronize
        t_torch = _median_step(step_torch, steps, sync_torch)
    return bs, diff, t_ours, t_torch, t_graph


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--models", default=",".join(EXAMPLES), help="comma-separated subset of " + ",".join(EXAMPLES))
    ap.add_argument("--runs", "--steps", dest="runs", type=int, default=10,
                    help="timed training steps per model (default 10)")
    ap.add_argument("--against", choices=("torch", "none"), default=None,
                    help="time the torch twins too (default: when torch is installed)")
    ap.add_argument("--save", action="store_true", help="also write the table to benchmarks/results/")
    ap.add_argument("--graph", action="store_true",
                    help="on cuda, also time the step captured as a CUDA graph (tl.cuda.capture_step)")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown:
        ap.error(f"unknown models {unknown}; choose from {list(EXAMPLES)}")
    against = args.against != "none"
    if against:
        try:
            torch = _torch()
        except ImportError:
            if args.against == "torch":
                ap.error("--against torch needs PyTorch installed")
            against = False
    lines = []

    def emit(s):
        lines.append(s)
        print(s, flush=True)

    if against:
        torch.manual_seed(0)
        tdev = args.device if args.device == "cpu" or torch.cuda.is_available() else "unavailable"
        emit(f"training step (forward, loss, backward, Adam), torchlean on {args.device}, torch on {tdev}; "
             f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    else:
        emit(f"training step (forward, loss, backward, Adam), torchlean on {args.device}")
    graph = args.graph and args.device == "cuda"
    emit(f"{'model':<8} {'batch':>5} {'fwd rel diff':>12} {'torchlean samples/s':>20} {'torch samples/s':>16} "
         f"{'ratio':>6}" + (f" {'captured samples/s':>19} {'ratio':>6}" if graph else ""))
    for name in names:
        bs, diff, a, b, c = bench(name, args.device, args.runs, against, graph)
        d = f"{diff:>12.1e}" if diff is not None else f"{'-':>12}"
        tb = f"{bs / b:>16,.0f}" if b else f"{'-':>16}"
        ratio = f"{b / a:>6.2f}" if b else f"{'-':>6}"
        extra = ""
        if graph:
            gratio = f"{b / c:>6.2f}" if b else f"{'-':>6}"
            extra = f" {bs / c:>19,.0f} {gratio}"
        emit(f"{name:<8} {bs:>5} {d} {bs / a:>20,.0f} {tb} {ratio}{extra}")
    if args.save:
        out = Path.cwd() / "benchmarks" / "results" / f"models_{args.device}_{time.strftime('%Y-%m-%d')}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
