"""IR compiler: compile time, and a training step through the compiled program vs eager.

Cases, each the median of many runs after a warm-up, in one process:

* ``compile``: ``ir.compile`` of a random well-formed graph of about 100 nodes
  (``ir.gen.random_graph``, fixed seed): checking, lowering, payload upload.
* ``mlp step``: forward + backward (no optimizer) of an MLP 256-256-256-256-10
  (4 linear layers, ReLU between, MSE loss) at batch 32, float32, through

  - ``program``: ``ir.compile``'d graph, ``prog(x); prog.backward()``;
  - ``tl.compile``: the traced module, ``f(x); f.backward()`` (writes ``.grad``);
  - ``eager tape``: ``loss_fn(x).backward()`` on the Tensor front end;
  - with ``--cuda-graph``: ``program, CUDA graph`` (``ir.compile(..., cuda_graph=True)``:
    an input copy and two graph launches) and ``tl.compile, CUDA graph`` (the same plus
    the parameter copies into the graph's buffers and the ``.grad`` writes);
  - ``torch``: PyTorch eager, the same weights (when torch is installed);

  and the ratios to the eager tape and to torch.
* ``tiny ops``: forward + backward of a chain of 100 ops on shape (16,) tensors
  (``x = exp(relu(x * y + z))``, 25 times), time per op: the cost of dispatch,
  which compilation removes.

    python -m torchlean.bench.bench_ir.py [--runs N] [--device cpu|cuda] [--cuda-graph] [--against torch|none]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import torchlean as tl
from torchlean.testing.timing import median_times  # noqa: E402

from torchlean import ir
from torchlean.ir.gen import random_graph

SIZES = (256, 256, 256, 256, 10)
BATCH = 32
TINY_CHAIN = 25  # iterations of the 4-op chain (100 ops)


def median_time(fn, runs: int, warmup: int, sync=None) -> float:
    """Median wall time of ``fn()`` in seconds (``sync()`` after each call, e.g. a GPU sync)."""
    return median_times({"fn": fn}, runs, warmup, sync, blocks=1)["fn"]




def graph_of_about(n_nodes: int, seed: int = 0):
    """A random graph with about ``n_nodes`` nodes (op nodes plus their leaves)."""
    n_ops = n_nodes // 2
    while True:
        rg = random_graph(np.random.default_rng(seed), n_ops)
        if len(rg.graph.nodes) >= n_nodes or n_ops > n_nodes:
            return rg
        n_ops += 5


def mlp_data(seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / np.sqrt(fan_in)
        params.append((rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                       rng.uniform(-bound, bound, fan_out).astype(np.float32)))
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    t = rng.standard_normal((BATCH, SIZES[-1])).astype(np.float32)
    return params, x, t


def tl_model(params, device):
    nn = tl.nn
    layers = []
    for i, (w, b) in enumerate(params):
        lin = nn.Linear(w.shape[1], w.shape[0])
        lin.load_state_dict({"weight": w, "bias": b})
        layers += [lin] + ([nn.ReLU()] if i < len(params) - 1 else [])
    return nn.Sequential(*layers).to(device)


def torch_step(params, x, t, device="cpu"):
    import torch
    layers = []
    for i, (w, b) in enumerate(params):
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
        layers += [lin] + ([torch.nn.ReLU()] if i < len(params) - 1 else [])
    model = torch.nn.Sequential(*layers).to(device)
    xt, tt = torch.from_numpy(x).to(device), torch.from_numpy(t).to(device)

    def step():
        for p in model.parameters():
            p.grad = None
        torch.nn.functional.mse_loss(model(xt), tt).backward()
    return step


def _table(times: dict, base: str, torch_t) -> None:
    print(f"{'case':<24}{'time':>12}{'vs ' + base:>16}{'vs torch':>12}")
    for name, s in times.items():
        vs_t = f"{s / torch_t:.2f}x" if torch_t else "-"
        print(f"{name:<24}{s * 1e6:>10.2f}us{s / times[base]:>15.2f}x{vs_t:>12}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--cuda-graph", action="store_true", help="also time the CUDA-graph program (cuda only)")
    ap.add_argument("--against", default="torch", choices=("torch", "none"))
    args = ap.parse_args(argv)
    dev = args.device
    sync = None
    if dev == "cuda":
        from torchlean.cuda import synchronize as sync

    rg = graph_of_about(100)
    g, payload = rg.graph, rg.payload
    with np.errstate(all="ignore"):
        t_compile = median_time(lambda: ir.compile(g, payload, device=dev), max(10, args.runs // 10), 2, sync)
    print(f"compile: {len(g.nodes)}-node random graph ({len(ir.compile(g, payload, device=dev).steps)} steps) "
          f"on {dev}: {t_compile * 1e3:.2f} ms")

    params, x, t = mlp_data()
    model = tl_model(params, dev)
    xt, tt = tl.tensor(x, device=dev), tl.tensor(t, device=dev)

    def loss_fn(x):
        return tl.nn.functional.mse_loss(model(x), tt)

    g2, p2 = ir.trace(loss_fn, xt)
    prog = ir.compile(g2, p2, device=dev)

    def prog_step():
        prog(xt)
        prog.backward()

    f = tl.compile(loss_fn, xt)

    def compiled_step():
        for p in model.parameters():
            p.grad = None
        f(xt)
        f.backward()

    def eager_step():
        for p in model.parameters():
            p.grad = None
        loss_fn(xt).backward()

    cases = {"program (ir.compile)": prog_step, "tl.compile": compiled_step, "eager tape": eager_step}
    if args.cuda_graph:
        if dev != "cuda":
            print("--cuda-graph needs --device cuda", file=sys.stderr)
            return 2
        try:
            gprog = ir.compile(g2, p2, device=dev, cuda_graph=True)
        except tl.TorchLeanError as e:
            print(f"(CUDA graph not available for this program: {e})")
        else:
            def graph_step():
                gprog(xt)
                gprog.backward()
            cases["program, CUDA graph"] = graph_step
            fg = tl.compile(loss_fn, xt, cuda_graph=True)

            def compiled_graph_step():
                for p in model.parameters():
                    p.grad = None
                fg(xt)
                fg.backward()
            cases["tl.compile, CUDA graph"] = compiled_graph_step
    torch_t = None
    if args.against == "torch":
        try:
            import torch
            torch.backends.cuda.matmul.allow_tf32 = False
            cases["torch eager"] = torch_step(params, x, t, dev)
        except ImportError:
            print("(torch not installed: torchlean timings only)")

    times = median_times(cases, args.runs, 10, sync)
    torch_t = times.get("torch eager")
    print(f"\nMLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32, forward + backward on {dev} "
          f"(median of {args.runs})")
    _table(times, "eager tape", torch_t)

    # Per-op overhead: a chain of 100 tiny ops, where dispatch, not arithmetic, is the cost.
    rng = np.random.default_rng(1)
    a = tl.tensor(rng.uniform(-0.5, 0.5, 16).astype(np.float32), device=dev)
    y = tl.tensor(-rng.uniform(0, 0.5, 16).astype(np.float32), device=dev, requires_grad=True)
    z = tl.tensor(rng.uniform(-0.5, 0.5, 16).astype(np.float32), device=dev, requires_grad=True)

    def chain(x):
        for _ in range(TINY_CHAIN):
            x = (x * y + z).relu().exp()
        return x.sum()

    g3, p3 = ir.trace(chain, a)
    cprog = ir.compile(g3, p3, device=dev)

    def chain_prog():
        cprog(a)
        cprog.backward()

    def chain_eager():
        y.grad = z.grad = None
        chain(a).backward()

    tiny = {"program (ir.compile)": chain_prog, "eager tape": chain_eager}
    if args.against == "torch" and dev == "cpu":
        try:
            import torch
            ta = torch.from_numpy(a.numpy())
            ty, tz = (torch.tensor(v.numpy(), requires_grad=True) for v in (y, z))

            def chain_torch():
                ty.grad = tz.grad = None
                x = ta
                for _ in range(TINY_CHAIN):
                    x = (x * ty + tz).relu().exp()
                x.sum().backward()
            tiny["torch eager"] = chain_torch
        except ImportError:
            pass
    n_ops = len(cprog.steps)
    times = median_times(tiny, args.runs, 10, sync)
    print(f"\ntiny-op chain: {n_ops} ops on shape (16,), forward + backward, time per op")
    _table({k: v / n_ops for k, v in times.items()}, "eager tape", times.get("torch eager") and
           times["torch eager"] / n_ops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
