"""CPU: MLP training step, eager tiny-op overhead, fast vs spec mode (ratios vs PyTorch).

Cases, each timed as the median of many runs after a warm-up, in one process:

* ``mlp step``: one training step (zero_grad, forward, cross-entropy, backward,
  Adam step) of an MLP 784-256-256-10 at batch 128, float32; torchlean / torch,
  goal <= 1.5.
* ``tiny ops``: a chain of add, mul, relu, exp on shape (16,) tensors with
  autograd recording (x = exp(relu(x * y + z)), 25 times), time per op; goal <= 2.
  Forward + backward per op is reported as well.
* ``spec mode``: the same MLP step in reference mode (``fast_kernels=False``),
  against torchlean's fast mode (no goal: it shows what the spec costs).

PyTorch runs with as many threads as NumPy's BLAS (read with threadpoolctl when
installed), so the ratio compares like with like; both counts are printed.

    python -m torchlean.bench.bench_cpu.py [--runs N] [--against torch|none] [--save]
    torchlean bench cpu [--save]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path

import numpy as np

import torchlean as tl
from torchlean.testing.timing import median_times  # noqa: E402

TINY_CHAIN = 25  # iterations of the 4-op chain per timed call (100 ops)


def blas_threads() -> tuple[int, str]:
    """NumPy's BLAS thread count and library name (best effort without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
        for info in threadpool_info():
            if info.get("user_api") == "blas":
                return int(info["num_threads"]), str(info.get("internal_api", "blas"))
    except ImportError:
        pass
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var]), f"blas ({var})"
    return os.cpu_count() or 1, "blas (assumed: one thread per core)"




# ---- data shared by both frameworks -------------------------------------------------------------

def mlp_data(seed=0, batch=128, sizes=(784, 256, 256, 10)):
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1 / np.sqrt(fan_in)
        params.append((rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                       rng.uniform(-bound, bound, fan_out).astype(np.float32)))
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    return params, x, y


def tiny_data(seed=1, n=16):
    # y <= 0 keeps the chain bounded: x * y + z <= z < 0.5, so x stays below e**0.5.
    rng = np.random.default_rng(seed)
    x, z = (rng.uniform(-0.5, 0.5, n).astype(np.float32) for _ in range(2))
    return x, -rng.uniform(0, 0.5, n).astype(np.float32), z


# ---- torchlean ----------------------------------------------------------------------------------

def tl_mlp_step(params, x, y):
    from torchlean import nn, optim
    layers = []
    for i, (w, b) in enumerate(params):
        lin = nn.Linear(w.shape[1], w.shape[0])
        lin.load_state_dict({"weight": w, "bias": b})
        layers += [lin] + ([nn.ReLU()] if i < len(params) - 1 else [])
    model = nn.Sequential(*layers)
    opt = optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = tl.tensor(x), tl.tensor(y)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def tl_tiny(a, b, c, backward: bool):
    x0 = tl.tensor(a, requires_grad=True)
    y = tl.tensor(b, requires_grad=True)
    z = tl.tensor(c, requires_grad=True)

    def chain():
        x = x0
        for _ in range(TINY_CHAIN):
            x = (x * y + z).relu().exp()
        if backward:
            x.sum().backward()
        return x
    return chain


# ---- torch --------------------------------------------------------------------------------------

def torch_mlp_step(torch, params, x, y):
    layers = []
    for i, (w, b) in enumerate(params):
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
        layers += [lin] + ([torch.nn.ReLU()] if i < len(params) - 1 else [])
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def torch_tiny(torch, a, b, c, backward: bool):
    x0 = torch.tensor(a, requires_grad=True)
    y = torch.tensor(b, requires_grad=True)
    z = torch.tensor(c, requires_grad=True)

    def chain():
        x = x0
        for _ in range(TINY_CHAIN):
            x = (x * y + z).relu().exp()
        if backward:
            x.sum().backward()
        return x
    return chain


# ---- report -------------------------------------------------------------------------------------

def _fmt_t(s: float) -> str:
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.2f} us"


def table(rows) -> str:
    head = ("case", "torchlean", "reference", "ratio", "goal", "verdict")
    body = []
    for case, t_tl, t_ref, goal in rows:
        ratio = t_tl / t_ref if t_ref else None
        verdict = "" if goal is None or ratio is None else ("ok" if ratio <= goal else "over goal")
        body.append((case, _fmt_t(t_tl), _fmt_t(t_ref) if t_ref else "-",
                     f"{ratio:.2f}x" if ratio is not None else "-",
                     f"<= {goal:g}x" if goal is not None else "-", verdict))
    widths = [max(len(head[i]), *(len(r[i]) for r in body)) for i in range(len(head))]
    line = lambda cells: "  ".join(c.ljust(w) if i in (0, 5) else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in body])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--against", choices=("torch", "none"), default=None,
                    help="reference (default: torch when installed)")
    ap.add_argument("--runs", type=int, default=50, help="timed runs per case (default 50)")
    ap.add_argument("--save", action="store_true", help="also write benchmarks/results/cpu_<date>.txt")
    args = ap.parse_args(argv)
    if args.device != "cpu":
        print("error: the cpu suite runs on the CPU only; see `torchlean bench` for other suites",
              file=sys.stderr)
        return 2

    torch = None
    if args.against != "none":
        try:
            import torch
        except ImportError:
            if args.against == "torch":
                print("error: --against torch needs PyTorch: pip install torch", file=sys.stderr)
                return 2

    n_blas, blas_name = blas_threads()
    lines = [f"torchlean {tl.__version__} CPU benchmark, {datetime.date.today().isoformat()}",
             f"machine: {platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores; "
             f"python {platform.python_version()}; numpy {np.__version__}",
             f"numpy BLAS threads: {n_blas} ({blas_name})"]
    if torch is not None:
        torch.set_num_threads(n_blas)
        lines.append(f"torch {torch.__version__} threads: {torch.get_num_threads()} "
                     f"(set to NumPy's BLAS count)")
    lines.append(f"median of {args.runs} runs after warm-up")
    print("\n".join(lines), flush=True)

    rows = []
    params, x, y = mlp_data()
    if torch is not None:
        # Same weights, data and optimizer: the losses of the first steps must agree.
        a, b = tl_mlp_step(params, x, y), torch_mlp_step(torch, params, x, y)
        la, lb = [a() for _ in range(3)], [b() for _ in range(3)]
        dev = max(abs(p - q) for p, q in zip(la, lb))
        lines.append(f"check: losses of 3 MLP steps, torchlean {la[-1]:.6f} vs torch {lb[-1]:.6f} "
                     f"(max difference {dev:.1e})")
        print(lines[-1], flush=True)
        if dev > 1e-3:
            print("error: torchlean and torch disagree on the MLP step; timings would compare "
                  "different computations", file=sys.stderr)
            return 1
    cases = {"fast": tl_mlp_step(params, x, y)}
    if torch is not None:
        cases["torch"] = torch_mlp_step(torch, params, x, y)
    t = median_times(cases, args.runs, warmup=5)
    rows.append(("mlp 784-256-256-10 b128 train step (fast)", t["fast"], t.get("torch"), 1.5))

    n_ops = 4 * TINY_CHAIN
    a, b, c = tiny_data()
    for bwd, goal in ((False, 2.0), (True, None)):
        cases = {"tl": tl_tiny(a, b, c, bwd)}
        if torch is not None:
            cases["torch"] = torch_tiny(torch, a, b, c, bwd)
        t = median_times(cases, args.runs * 4, warmup=20)
        rows.append((f"tiny op (16,) {'fwd+bwd' if bwd else 'fwd, recording'}, per op",
                     t["tl"] / n_ops, t["torch"] / n_ops if "torch" in t else None, goal))

    with tl.options(fast_kernels=False):
        step_spec = tl_mlp_step(params, x, y)

    def spec_step():
        with tl.options(fast_kernels=False):
            step_spec()
    t = median_times({"spec": spec_step, "fast": tl_mlp_step(params, x, y)}, max(10, args.runs // 2), 2)
    rows.append(("mlp train step, spec mode vs fast mode", t["spec"], t["fast"], None))

    out = table(rows) + ("\n\nratio = torchlean / reference (torch, or fast mode for the spec-mode row); "
                         "lower is better")
    print()
    print(out)
    if args.save:
        d = Path.cwd() / "benchmarks" / "results"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"cpu_{datetime.date.today().isoformat()}.txt"
        path.write_text("\n".join(lines) + "\n\n" + out + "\n")
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
