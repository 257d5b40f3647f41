"""Training steps at the sizes people train, torchlean against torch, one process, on the GPU.

    torchlean bench scale [--models gpt2,gpt6,vit,resnet18,mlp,lstm] [--rounds 5] [--steps 5] [--no-compile]
    python -m torchlean.bench.bench_scale ...

Every model is written once, as an ordinary PyTorch program over a module namespace ``T``, and
built twice: with ``T = torch`` and with ``T = torchlean`` (the weights are torch's, loaded through
``load_state_dict``). A step is forward, loss, backward and Adam. Modes, each timed in turns with
the others (every round runs ``--steps`` steps of each, and a mode's time is the median over
rounds of its mean step time):

* torch eager; torch CUDA graph (the whole step, Adam with ``capturable=True``, captured once
  and replayed: torch's own recipe); torch.compile (Inductor, default mode; ``--no-compile`` skips);
* torchlean eager; torchlean captured (``tl.cuda.capture_step``: forward, loss and backward
  replayed as one CUDA graph, Adam eager).

The first losses of torch and torchlean are compared before timing (same weights, same batch).
Peak memory is the most device memory held by tensors during an eager step, with the model, its
gradients and the optimizer state alive, less what was allocated before the model was built (``torch.cuda.max_memory_allocated`` and
``torchlean.cuda.max_memory_allocated``). float32, TF32 off on both sides. The table gives
samples/s and ratios to torch eager (higher is better for torchlean), and the captured step
against torch's CUDA graph.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

MODELS = ("gpt2", "gpt6", "vit", "resnet18", "mlp", "lstm")


# ---- the models, written once over T (torch or torchlean) ----------------------------------------

def build(T, name):
    """``(model, batch, loss_fn)``: ``batch(rng)`` gives NumPy inputs and targets, ``loss_fn(model, x, y)``."""
    nn, F = T.nn, T.nn.functional

    class Block(nn.Module):
        def __init__(self, d, heads, causal):
            super().__init__()
            self.heads, self.causal = heads, causal
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, L, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, L, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, L, C))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, vocab, block, layers, d, heads):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
            self.blocks = nn.ModuleList([Block(d, heads, True) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.wte.weight  # tied, as GPT-2
            for e in (self.wte, self.wpe):
                nn.init.normal_(e.weight, std=0.02)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(T.arange(idx.shape[1], device=idx.device))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    class ViT(nn.Module):
        def __init__(self, image, patch, layers, d, heads, classes):
            super().__init__()
            self.patch = nn.Conv2d(3, d, patch, stride=patch)
            self.pos = nn.Parameter(T.zeros(1, (image // patch) ** 2, d))
            self.blocks = nn.ModuleList([Block(d, heads, False) for _ in range(layers)])
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, classes)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x).mean(dim=1))

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.short = None
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + (x if self.short is None else self.short(x)))

    class ResNet18(nn.Module):
        def __init__(self, classes=10):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
            layers, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            return self.fc(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1).flatten(1))

    class LSTMLM(nn.Module):
        def __init__(self, vocab, d, layers):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.rnn = nn.LSTM(d, d, layers, batch_first=True)
            self.head = nn.Linear(d, vocab)

        def forward(self, idx):
            return self.head(self.rnn(self.emb(idx))[0])

    def tokens(vocab, batch, seq):
        return lambda rng: (rng.integers(0, vocab, (batch, seq)), rng.integers(0, vocab, (batch, seq)))

    def lm_loss(vocab):
        return lambda m, x, y: F.cross_entropy(m(x).reshape(-1, vocab), y.reshape(-1))

    def classify(m, x, y):
        return F.cross_entropy(m(x), y)

    if name == "gpt2":
        return GPT(50304, 256, 12, 768, 12), tokens(50304, 8, 256), lm_loss(50304)
    if name == "gpt6":
        return GPT(8192, 512, 6, 512, 8), tokens(8192, 16, 512), lm_loss(8192)
    if name == "vit":
        return (ViT(32, 4, 6, 384, 6, 10),
                lambda rng: (rng.standard_normal((128, 3, 32, 32), dtype=np.float32), rng.integers(0, 10, 128)),
                classify)
    if name == "resnet18":
        return (ResNet18(),
                lambda rng: (rng.standard_normal((128, 3, 32, 32), dtype=np.float32), rng.integers(0, 10, 128)),
                classify)
    if name == "mlp":
        mlp = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                            nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))
        return (mlp, lambda rng: (rng.standard_normal((512, 1024), dtype=np.float32), rng.integers(0, 1000, 512)),
                classify)
    if name == "lstm":
        return LSTMLM(8192, 512, 2), tokens(8192, 64, 256), lm_loss(8192)
    if name == "tiny-gpt":   # the GPT at toy size, for smoke runs on a CPU (not in MODELS)
        return GPT(512, 32, 2, 64, 4), tokens(512, 8, 32), lm_loss(512)
    raise SystemExit(f"bench scale: unknown model {name!r} (known: {', '.join(MODELS)})")


LABELS = {"gpt2": "GPT-2 small 12 x 768, vocab 50304, T 256 (8)", "gpt6": "GPT 6 x 512, vocab 8192, T 512 (16)",
          "vit": "ViT-S 32px patch 4, 6 x 384 (128)", "resnet18": "ResNet-18 CIFAR (128)",
          "mlp": "MLP 1024-4096x3-1000 (512)", "lstm": "LSTM LM 2 x 512, vocab 8192, T 256 (64)"}


# ---- the steps -----------------------------------------------------------------------------------

def _step(model, opt, loss_fn, x, y):
    """One training step of ``model`` (forward, loss, backward, optimizer), as a function."""
    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
        return loss
    return step


def _eager(T, name, batch, state=None):
    """``T``'s model (torch's seeded weights, or ``state`` loaded), its batch on the GPU, Adam and the
    eager step; the first loss, the model's weights (``state``, on the host) and the eager step's
    peak: the most tensor memory during a step, less what was allocated before the model (earlier
    models' graph pools). ``T`` is torch or torchlean: the same calls serve both."""
    T.cuda.synchronize()
    base = T.cuda.memory_allocated()
    T.manual_seed(0)
    model, _, loss_fn = build(T, name)
    if state is not None:
        model.load_state_dict({k: T.tensor(v.numpy()) for k, v in state.items()})
    model = model.to("cuda")
    x, y = (T.tensor(np.ascontiguousarray(a), device="cuda") for a in batch)
    opt = T.optim.Adam(model.parameters(), lr=1e-4)

    eager = _step(model, opt, loss_fn, x, y)

    first = float(loss_fn(model, x, y).detach())
    if state is None:
        state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    for _ in range(2):
        eager()
    T.cuda.synchronize()
    T.cuda.reset_peak_memory_stats()
    eager()
    T.cuda.synchronize()
    return model, loss_fn, x, y, opt, eager, first, state, T.cuda.max_memory_allocated() - base


def torch_steps(torch, name, batch, compile_too, graph_too=True):
    """torch's step functions {mode: step}, the first loss, the weights, the eager peak (bytes)."""
    model, loss_fn, x, y, opt, eager, first, state, peak = _eager(torch, name, batch)
    steps = {"torch eager": eager}
    if not graph_too:
        return steps, first, state, peak

    gmodel, _, _ = build(torch, name)
    gmodel = gmodel.cuda()
    gmodel.load_state_dict(state)
    gopt = torch.optim.Adam(gmodel.parameters(), lr=1e-4, capturable=True)
    sx, sy = x.clone(), y.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            gopt.zero_grad(set_to_none=True)
            loss_fn(gmodel, sx, sy).backward()
            gopt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    gopt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        gloss = loss_fn(gmodel, sx, sy)
        gloss.backward()
        gopt.step()

    def replay():
        sx.copy_(x)
        sy.copy_(y)
        graph.replay()
        return gloss

    steps["torch graph"] = replay
    if compile_too:
        cmodel, _, _ = build(torch, name)
        cmodel = cmodel.cuda()
        cmodel.load_state_dict(state)
        copt = torch.optim.Adam(cmodel.parameters(), lr=1e-4)
        steps["torch.compile"] = _step(torch.compile(cmodel), copt, loss_fn, x, y)
    return steps, first, state, peak


def torchlean_steps(tl, name, batch, state, capture_too=True):
    """torchlean's step functions {mode: step} on torch's weights, the first loss, the eager peak."""
    model, loss_fn, x, y, opt, eager, first, _, peak = _eager(tl, name, batch, state)
    steps = {"torchlean eager": eager}
    if not capture_too:
        return steps, first, peak
    captured = tl.cuda.capture_step(lambda a, b: loss_fn(model, a, b), x, y)

    def graph():
        opt.zero_grad(set_to_none=True)
        loss = captured(x, y)
        opt.step()
        return loss

    steps["torchlean captured"] = graph
    return steps, first, peak


def time_modes(steps: dict, syncs: dict, rounds: int, per_round: int) -> dict:
    """Median over rounds of the mean step time (ms) of each mode, the modes taking turns."""
    for name, fn in steps.items():  # warm-up (and compilation) outside the timing
        for _ in range(2):
            fn()
        syncs[name]()
    times = {k: [] for k in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            syncs[name]()
            t0 = time.perf_counter()
            for _ in range(per_round):
                fn()
            syncs[name]()
            times[name].append((time.perf_counter() - t0) * 1e3 / per_round)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (it compiles for minutes)")
    ap.add_argument("--device", default="cuda", choices=["cuda"])
    ap.add_argument("--against", default="torch", choices=["torch"])
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench scale: needs PyTorch with CUDA (the reference in the same process)", file=sys.stderr)
        return 2
    import torchlean as tl
    if not (torch.cuda.is_available() and tl.cuda.is_available()):
        print("bench scale: needs a CUDA GPU visible to both torch and torchlean (CuPy)", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, float32, TF32 off; "
          f"rounds {args.rounds} x {args.steps} steps; ratios: torch eager time / mode time")
    header = ("model", "torch eager", "torch graph", "torch.compile", "tl eager", "tl captured", "tl capt / torch graph",
              "peak MiB tl / torch", "loss diff")
    rows = []
    for name in args.models.split(","):
        rng = np.random.default_rng(0)
        batch = build(tl, name)[1](rng)  # the same NumPy batch for both
        tsteps, tfirst, state, tpeak = torch_steps(torch, name, batch, not args.no_compile)
        lsteps, lfirst, lpeak = torchlean_steps(tl, name, batch, state)
        steps = {**tsteps, **lsteps}
        syncs = {k: (torch.cuda.synchronize if k.startswith("torch") and not k.startswith("torchlean")
                     else tl.cuda.synchronize) for k in steps}
        ms = time_modes(steps, syncs, args.rounds, args.steps)
        base = ms["torch eager"]
        ratio = {k: base / v for k, v in ms.items()}
        rel = ms["torch graph"] / ms["torchlean captured"]
        row = (LABELS[name], f"{ms['torch eager']:.2f} ms", f"{ratio['torch graph']:.2f}",
               f"{ratio['torch.compile']:.2f}" if "torch.compile" in ratio else "-",
               f"{ratio['torchlean eager']:.2f}", f"{ratio['torchlean captured']:.2f}", f"{rel:.2f}",
               f"{lpeak / 2**20:.0f} / {tpeak / 2**20:.0f} ({lpeak / tpeak:.2f}x)", f"{abs(lfirst - tfirst):.1e}")
        rows.append(row)
        print(" | ".join(row), flush=True)
        del tsteps, lsteps, steps
        torch.cuda.empty_cache()
        tl.cuda.empty_cache()
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
