"""tl.compile against eager and against torch.compile: training steps, both frameworks in one process.

Models (fp32, TF32 off), each trained with forward, loss, backward and an Adam step:

* ``mlp``: 784-256-256-10 at batch 128 on the CPU; 1024-4096x3-1000 at batch 512 on CUDA;
* ``encoder``: 4 x TransformerEncoderLayer(d 256, 4 heads, ff 1024, dropout 0, batch_first), batch
  16 x 64 tokens on the CPU; 6 x d 512, 8 heads, ff 2048, batch 32 x 256 on CUDA; MSE to a target;
* ``cnn``: conv 3-32-64 (3x3) + ReLU + max-pool, linear to 10, batch 64 of 32x32 (no batch norm).

Columns: median ms per step of torchlean eager, ``tl.compile(model)``, and on CUDA
``tl.compile(model, mode="reduce-overhead")`` (CUDA graphs); torch eager, ``torch.compile`` and on CUDA
``torch.compile(mode="reduce-overhead")``; then torchlean compiled / torch compiled (lower is better).
A torch.compile that fails here (no C++ compiler or Triton) prints ``-``. Not a test.

    python -m torchlean.bench.bench_compile [--device cpu|cuda] [--runs N] [--only mlp,encoder,cnn]
    torchlean bench compile --device cuda
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np


def _models(tl_or_torch, device, case):
    nn = tl_or_torch.nn
    cuda = device == "cuda"
    if case == "mlp":
        sizes = (1024, 4096, 4096, 4096, 1000) if cuda else (784, 256, 256, 10)
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*layers[:-1]), (512 if cuda else 128, sizes[0]), ("class", sizes[-1])
    if case == "encoder":
        d, h, ff, n, b, t = (512, 8, 2048, 6, 32, 256) if cuda else (256, 4, 1024, 4, 16, 64)
        layer = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, n, enable_nested_tensor=False), (b, t, d), ("mse", None)
    if case == "cnn":
        m = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 8 * 8, 10))
        return m, (64, 3, 32, 32), ("class", 10)
    raise SystemExit(f"unknown case {case!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--against", choices=("torch", "none"), default="torch")
    ap.add_argument("--only", default="mlp,encoder,cnn")
    args = ap.parse_args(argv)
    import torchlean as tl
    from torchlean.testing.timing import median_times
    torch = None
    if args.against == "torch":
        try:
            import torch
        except ImportError:
            print("torch is not installed: torchlean timings only")
    dev = args.device
    if dev == "cuda" and torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    syncs = [s for s in ((tl.cuda.synchronize if dev == "cuda" else None),
                         (torch.cuda.synchronize if dev == "cuda" and torch is not None else None)) if s]

    def sync():
        for s in syncs:
            s()

    rng = np.random.default_rng(0)
    modes = ["default"] + (["reduce-overhead"] if dev == "cuda" else [])
    head = (f"{'case':<8} {'tl eager':>9} " + " ".join(f"{'tl ' + m[:6]:>9}" for m in modes)
            + f" {'torch':>9} " + " ".join(f"{'t ' + m[:6]:>9}" for m in modes) + f" {'tl/t comp':>9}")
    print(f"training step, median ms of {args.runs} ({dev})")
    print(head)
    for case in filter(None, args.only.split(",")):
        tm = _models(torch, dev, case)[0] if torch is not None else None
        tlm, xshape, (loss, classes) = _models(tl, dev, case)
        if tm is not None:
            tlm.load_state_dict({k: tl.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
        x = rng.standard_normal(xshape).astype(np.float32)
        y = (rng.integers(0, classes, xshape[0]) if loss == "class" else
             rng.standard_normal(xshape).astype(np.float32))

        def step_fn(fw, model, opt, xx, yy):
            F = fw.nn.functional

            def step():
                opt.zero_grad(set_to_none=True)
                out = model(xx)
                ls = F.cross_entropy(out, yy) if loss == "class" else F.mse_loss(out, yy)
                ls.backward()
                opt.step()
            return step

        fns = {}
        tlm = tlm.to(dev)
        xt, yt = tl.tensor(x, device=dev), tl.tensor(y, device=dev)
        opt = tl.optim.Adam(tlm.parameters(), lr=1e-4)
        fns["tl eager"] = step_fn(tl, tlm, opt, xt, yt)
        for m in modes:
            fns["tl " + m] = step_fn(tl, tl.compile(tlm, mode=None if m == "default" else m), opt, xt, yt)
        if tm is not None:
            tm = tm.to(dev)
            xq, yq = torch.tensor(x, device=dev), torch.tensor(y, device=dev)
            topt = torch.optim.Adam(tm.parameters(), lr=1e-4)
            fns["torch"] = step_fn(torch, tm, topt, xq, yq)
            for m in modes:
                try:
                    f = step_fn(torch, torch.compile(tm, mode=None if m == "default" else m), topt, xq, yq)
                    for _ in range(3):
                        f()
                    fns["t " + m] = f
                except Exception as e:  # noqa: BLE001 - no compiler toolchain: report, go on
                    print(f"  torch.compile({m}) failed: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ms = {k: v * 1e3 for k, v in median_times(fns, args.runs, 3, sync=sync if syncs else None).items()}
        for msg in sorted({f"{w.category.__name__}: {w.message}" for w in caught}):
            print(f"  {case}: {msg[:160]}")
        cols = [ms["tl eager"]] + [ms["tl " + m] for m in modes]
        tcols = [ms.get("torch")] + [ms.get("t " + m) for m in modes]
        best_tl = min(ms["tl " + m] for m in modes)
        tc = [v for v in tcols[1:] if v is not None]
        ratio = f"{best_tl / min(tc):9.2f}" if tc else f"{'-':>9}"
        fmt = lambda v: f"{v:9.2f}" if v is not None else f"{'-':>9}"  # noqa: E731
        print(f"{case:<8} " + " ".join(fmt(v) for v in cols) + " " + " ".join(fmt(v) for v in tcols) + f" {ratio}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
