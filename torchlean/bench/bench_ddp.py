"""Data-parallel training: DDP throughput from 1 to N GPUs, torchlean against torch, and DDP against one process.

    python -m torchlean.bench.bench_ddp [--gpus 1,2] [--steps 20] [--warmup 5] [--model gpt2]
                                        [--device cuda|cpu] [--batch B] [--tiny] [--out results.json]
                                        [--no-torch] [--no-check] [--save]
    torchlean bench ddp ...

The model is bench scale's (``build`` in :mod:`torchlean.bench.bench_scale`; GPT-2 small 12 x 768,
vocab 50304, T 256, 8 sequences per GPU by default), trained with Adam (lr 1e-4) under
``DistributedDataParallel``, one process per GPU. For each world size N of ``--gpus`` and each side,
this script (the orchestrator) starts the job with that side's launcher, running this same file as
the workers (``--worker torch|torchlean``):

* torch: ``python -m torch.distributed.run --nproc-per-node N --master-port P bench_ddp.py --worker torch ...``
* torchlean: ``python -m torchlean launch --nproc-per-node N --master-port P bench_ddp.py --worker torchlean ...``
  (the workers run under ``torchlean run``; they import torchlean explicitly and never need torch).

Every worker sets its device (``cuda.set_device(LOCAL_RANK)``), joins the group (nccl on GPUs, gloo
on CPUs), builds the model from the same seed (each side its own initialization; DDP broadcasts rank
0's weights at wrap), and draws its own data: shard ``s`` of step ``i`` is drawn from
``np.random.default_rng((i, s))`` and rank ``r`` of N takes shard ``r``, so the global batch of every
step is reproducible. All batches are put on the device before the steps. After ``--warmup`` steps,
``--steps`` steps are timed one by one (each step ends with a device synchronize); rank 0 reports
the median step time, the peak device memory (``max_memory_allocated``: model, gradients, Adam
state, DDP's buffers, the batches) and the last step's loss averaged over the ranks. Children get
``NCCL_NVLS_ENABLE=0``. float32; TF32 off on both sides.

The table: samples/s = global batch / median step time; scaling efficiency = samples/s at N /
(N x samples/s at 1); tl / torch = torchlean's median step time / torch's at the same N (lower is
better for torchlean).

The equality check (``--no-check`` skips it): the same side trained for ``--check-steps`` steps (3)
from the same initial weights, once under DDP over N = max(--gpus) processes (rank r on shard r)
and once in one process on the whole global batch (the N shards concatenated in rank order). The
loss is a mean over the batch, so DDP's averaged gradient is the full-batch gradient up to float32
rounding; the check prints the largest differences of the first step's gradients and of the final
parameters (absolute, and relative: per tensor max|a - b| / max|b|, the largest over tensors). It
runs for torchlean, and for torch as the reference for what float32 rounding gives (Adam's early
updates are about lr x sign(gradient), so a near-zero gradient rounded differently can move a weight
by up to about lr: the gradients are the sharper test).

``--tiny`` is a CPU smoke run: unless given, device cpu, ``--steps 3 --warmup 1`` and the model
``tiny-gpt`` (bench scale's GPT at 2 x 64, vocab 512, T 32, 8 sequences per process; bench scale's
own models take over a minute for this run on a small CPU).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from torchlean.bench.bench_scale import MODELS, build

SIDES = ("torch", "torchlean")
_MARK = "bench ddp worker failed:"
TINY = "tiny-gpt"


# ---- the data ------------------------------------------------------------------------------------

def shard(batch_fn, step, index, per):
    """Shard ``index`` of step ``step``: ``per`` samples drawn from ``default_rng((step, index))``
    (the model's batch cut to ``per``, or several of its batches drawn in turn and concatenated)."""
    rng = np.random.default_rng((step, index))
    xs, ys, n = [], [], 0
    while n < per:
        x, y = batch_fn(rng)
        xs.append(x)
        ys.append(y)
        n += len(x)
    return np.concatenate(xs)[:per], np.concatenate(ys)[:per]


def rank_batch(batch_fn, step, rank, world, shards, per):
    """Rank ``rank``'s part of step ``step``: shards ``rank * shards / world`` ... in order."""
    k = shards // world
    parts = [shard(batch_fn, step, s, per) for s in range(rank * k, (rank + 1) * k)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


# ---- worker mode: one process of the job ------------------------------------------------------

def _side(name):
    """``(T, dist, DDP)`` of ``name``: torch's, or torchlean's imported by its own name."""
    if name == "torch":
        import torch as T
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        T.backends.cuda.matmul.allow_tf32 = False
        T.backends.cudnn.allow_tf32 = False
    else:
        import torchlean as T
        import torchlean.distributed as dist
        from torchlean.nn.parallel import DistributedDataParallel as DDP
    return T, dist, DDP


def _numpy(t):
    return t.detach().cpu().numpy().copy()


def worker(args) -> int:
    rank, local, world = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    cuda = args.device == "cuda"
    T, dist, DDP = _side(args.worker)
    if cuda:
        T.cuda.set_device(local)   # one GPU per process, before the first CUDA tensor
    dist.init_process_group("nccl" if cuda else "gloo")
    sync = T.cuda.synchronize if cuda else (lambda: None)
    device = "cuda" if cuda else "cpu"   # the current device: this process's GPU

    T.manual_seed(args.seed)
    model, batch_fn, loss_fn = build(T, args.model)
    per = args.batch or len(batch_fn(np.random.default_rng(0))[0])
    shards = args.shards or world
    if shards % world:
        raise SystemExit(f"bench ddp: --shards {shards} is not a multiple of the world size {world}")
    model = model.to(device)
    ddp = DDP(model, device_ids=[local]) if cuda else DDP(model)
    opt = T.optim.Adam(model.parameters(), lr=1e-4)
    check = args.save_params is not None
    n_steps = args.check_steps if check else args.warmup + args.steps
    data = []
    for i in range(n_steps):
        x, y = rank_batch(batch_fn, i, rank, world, shards, per)
        data.append(tuple(T.tensor(np.ascontiguousarray(a), device=device) for a in (x, y)))

    def mean_over_ranks(loss):
        t = loss.detach().reshape(1).clone()
        dist.all_reduce(t)
        return float(t.cpu().numpy()[0]) / world

    result = dict(side=args.worker, world=world, per_rank_batch=per * shards // world, global_batch=per * shards,
                  model=args.model, device=args.device)
    if check:
        grads, losses = None, []
        for i, (x, y) in enumerate(data):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp, x, y)
            loss.backward()
            if i == 0:
                grads = {n: _numpy(p.grad) for n, p in model.named_parameters() if p.grad is not None}
            opt.step()
            losses.append(mean_over_ranks(loss))
        sync()
        if rank == 0:
            params = {n: _numpy(p) for n, p in model.named_parameters()}
            np.savez(args.save_params, **{"param/" + k: v for k, v in params.items()},
                     **{"grad/" + k: v for k, v in grads.items()})
            result["losses"] = losses
    else:
        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp, x, y)
            loss.backward()
            opt.step()
            return loss

        for x, y in data[:args.warmup]:
            step(x, y)
        sync()
        dist.barrier()
        times = []
        loss = None
        for x, y in data[args.warmup:]:
            t0 = time.perf_counter()
            loss = step(x, y)
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
        med = statistics.median(times)
        result.update(step_ms=times, median_ms=med, samples_per_s=per * shards / (med / 1e3),
                      peak_bytes=T.cuda.max_memory_allocated() if cuda else None,
                      final_loss=mean_over_ranks(loss),
                      device_name=T.cuda.get_device_name() if cuda else "cpu", version=T.__version__)
    if rank == 0 and args.result:
        Path(args.result).write_text(json.dumps(result))
        print(f"bench ddp worker: {json.dumps({k: v for k, v in result.items() if k != 'step_ms'})}", flush=True)
    dist.barrier()   # every rank done before any leaves (torch's gloo can abort a rank that tears down early)
    dist.destroy_process_group()
    return 0


# ---- orchestrator mode -----------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child_env() -> dict:
    env = dict(os.environ)
    env["NCCL_NVLS_ENABLE"] = "0"
    root = str(Path(__file__).resolve().parents[2])   # the folder holding the torchlean package
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _tail(text, lines=30):
    return "\n".join("    " + s for s in (text or "").rstrip().splitlines()[-lines:])


def launch(side, n, worker_args, tmp, timeout, tag):
    """Run one job (``n`` processes of ``side``); rank 0's result dict, or ``{"failed": why}``."""
    result = os.path.join(tmp, f"{tag}.json")
    port = _free_port()
    script = str(Path(__file__).resolve())
    if side == "torch":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n), "--master-port", str(port)]
    else:
        cmd = [sys.executable, "-m", "torchlean", "launch", "--nproc-per-node", str(n), "--master-port", str(port)]
    cmd += [script, "--worker", side, "--result", result, *worker_args]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=_child_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
        print(f"  {side} x{n}: timed out after {timeout} s; stderr tail:\n{_tail(out)}", flush=True)
        return {"failed": f"timed out after {timeout} s"}
    wall = time.perf_counter() - t0
    if p.returncode != 0 or not os.path.exists(result):
        why = f"exit code {p.returncode}" if p.returncode != 0 else "no result file from rank 0"
        errors = list(dict.fromkeys(s[s.index(_MARK) + len(_MARK):].strip()
                                    for s in (p.stderr or "").splitlines() if _MARK in s))
        print(f"  {side} x{n}: FAILED ({why}): {' '.join(cmd)}", flush=True)
        if errors:
            print("  worker errors:\n" + "\n".join("    " + e for e in errors), flush=True)
        print(f"  stderr tail:\n{_tail(p.stderr)}", flush=True)
        if p.stdout.strip():
            print(f"  stdout tail:\n{_tail(p.stdout, 10)}", flush=True)
        if errors:
            why += ": " + (errors[0] if len(errors[0]) <= 120 else errors[0][:117] + "...")
        return {"failed": why, "worker_errors": errors, "stderr_tail": (p.stderr or "")[-4000:]}
    r = json.loads(Path(result).read_text())
    r["launch_wall_s"] = wall
    return r


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(rows, device):
    """The results table (markdown) from the run dicts."""
    unit = "GPUs" if device == "cuda" else "procs"
    header = ("side", unit, "per-proc batch", "global batch", "median step ms", "samples/s", "scaling eff",
              "tl / torch step", "peak MiB", "last loss")
    base = {r["side"]: r for r in rows if r.get("world") == 1 and "failed" not in r}
    by = {(r["side"], r["world"]): r for r in rows if "failed" not in r}
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        if "failed" in r:
            out.append(f"| {r['side']} | {r['world']} | FAILED: {r['failed']} |" + " |" * (len(header) - 3))
            continue
        b = base.get(r["side"])
        eff = r["samples_per_s"] / (r["world"] * b["samples_per_s"]) if b else None
        t = by.get(("torch", r["world"]))
        ratio = r["median_ms"] / t["median_ms"] if r["side"] == "torchlean" and t else None
        peak = r["peak_bytes"] / 2**20 if r.get("peak_bytes") is not None else None
        out.append("| " + " | ".join((r["side"], str(r["world"]), str(r["per_rank_batch"]), str(r["global_batch"]),
                                      f"{r['median_ms']:.2f}", f"{r['samples_per_s']:.1f}", _fmt(eff, ".2f"),
                                      _fmt(ratio, ".2f"), _fmt(peak, ".0f"), f"{r['final_loss']:.4f}")) + " |")
    return "\n".join(out)


def compare(a_path, b_path):
    """The largest differences between two saved checkpoints: {"param"|"grad": (abs, rel, name)}."""
    a, b = np.load(a_path), np.load(b_path)
    out = {}
    for kind in ("param", "grad"):
        keys = sorted(k for k in a.files if k.startswith(kind + "/"))
        missing = sorted(set(keys) ^ {k for k in b.files if k.startswith(kind + "/")})
        if missing:
            raise ValueError(f"the checkpoints differ in their tensors: {missing[:5]}")
        worst_abs, worst_rel, where = 0.0, 0.0, ""
        for k in keys:
            x, y = a[k].astype(np.float64), b[k].astype(np.float64)
            d = float(np.max(np.abs(x - y))) if x.size else 0.0
            scale = float(np.max(np.abs(y))) if y.size else 0.0
            rel = d / scale if scale > 0 else (0.0 if d == 0 else float("inf"))
            worst_abs = max(worst_abs, d)
            if rel >= worst_rel:
                worst_rel, where = rel, k[len(kind) + 1:]
        out[kind] = {"max_abs": worst_abs, "max_rel": worst_rel, "max_rel_tensor": where}
    return out


def check(side, n, common, tmp, timeout):
    """DDP over ``n`` processes against one process on the same global batch, ``side``'s own."""
    paths = {w: os.path.join(tmp, f"check_{side}_{w}.npz") for w in (n, 1)}
    runs = {}
    for w in (n, 1):
        print(f"  check {side}: {w} process(es) on {n} shard(s) ...", flush=True)
        runs[w] = launch(side, w, common + ["--shards", str(n), "--save-params", paths[w]], tmp, timeout,
                         f"check_{side}_{w}")
        if "failed" in runs[w]:
            return {"side": side, "world": n, "failed": runs[w]["failed"]}
    try:
        diff = compare(paths[n], paths[1])
    except (OSError, ValueError) as e:
        return {"side": side, "world": n, "failed": f"could not compare the checkpoints: {e}"}
    return {"side": side, "world": n, "per_rank_batch": runs[n]["per_rank_batch"],
            "global_batch": runs[n]["global_batch"], "losses_ddp": runs[n]["losses"], "losses_one": runs[1]["losses"],
            **diff}


def check_lines(c, steps):
    if "failed" in c:
        return [f"check {c['side']}: FAILED: {c['failed']}"]
    p, g = c["param"], c["grad"]
    dl = max(abs(a - b) for a, b in zip(c["losses_ddp"], c["losses_one"]))
    return [f"check {c['side']}: DDP over {c['world']} processes x {c['per_rank_batch']} against 1 process x "
            f"{c['global_batch']}, {steps} Adam steps from the same weights and data:",
            f"    parameters after step {steps}: max abs diff {p['max_abs']:.3e}, max rel diff {p['max_rel']:.3e} "
            f"({p['max_rel_tensor']})",
            f"    gradients of step 1:    max abs diff {g['max_abs']:.3e}, max rel diff {g['max_rel']:.3e} "
            f"({g['max_rel_tensor']})",
            f"    loss per step (DDP, mean over ranks): {', '.join(f'{v:.6f}' for v in c['losses_ddp'])}; "
            f"one process: {', '.join(f'{v:.6f}' for v in c['losses_one'])} (max diff {dl:.1e})"]


def _have_torch() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None and importlib.util.find_spec("torch.distributed") is not None


def orchestrate(args) -> int:
    try:
        gpus = sorted({int(g) for g in args.gpus.split(",") if g.strip()})
    except ValueError:
        gpus = []
    if not gpus or gpus[0] < 1:
        print(f"bench ddp: --gpus {args.gpus!r}: give positive world sizes, e.g. 1,2", file=sys.stderr)
        return 2
    if args.steps < 1 or args.warmup < 0 or args.check_steps < 1:
        print("bench ddp: --steps and --check-steps must be at least 1, --warmup at least 0", file=sys.stderr)
        return 2
    sides = list(SIDES)
    if args.no_torch or args.against == "none":
        sides.remove("torch")
    elif not _have_torch():
        print("bench ddp: PyTorch is not installed: torchlean only (--no-torch)", flush=True)
        sides.remove("torch")
    common = ["--model", args.model, "--device", args.device, "--seed", str(args.seed), "--steps", str(args.steps),
              "--warmup", str(args.warmup), "--check-steps", str(args.check_steps)]
    if args.batch:
        common += ["--batch", str(args.batch)]
    print(f"bench ddp: model {args.model}, device {args.device}, world sizes {gpus}, sides {', '.join(sides)}; "
          f"{args.warmup} warm-up + {args.steps} timed steps; Adam lr 1e-4, float32, TF32 off; NCCL_NVLS_ENABLE=0",
          flush=True)
    tmp = tempfile.mkdtemp(prefix="bench_ddp_")
    rows, checks = [], []
    try:
        for n in gpus:
            for side in sides:
                if n > 1 and args.device == "cpu" and n > (os.cpu_count() or 1):
                    print(f"  note: {n} processes on {os.cpu_count()} CPU cores", flush=True)
                print(f"  {side} x{n} ...", flush=True)
                r = launch(side, n, common, tmp, args.timeout, f"{side}_{n}")
                r.setdefault("side", side)
                r.setdefault("world", n)
                if "failed" not in r:
                    print(f"  {side} x{n}: median step {r['median_ms']:.2f} ms, {r['samples_per_s']:.1f} samples/s "
                          f"(launch {r['launch_wall_s']:.1f} s)", flush=True)
                rows.append(r)
        if args.check and gpus[-1] > 1:
            for side in ["torchlean"] + [s for s in sides if s == "torch"]:
                checks.append(check(side, gpus[-1], common, tmp, args.timeout))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ok = [r for r in rows if "failed" not in r]
    names = sorted({f"{r['side']} {r['version']} on {r['device_name']}" for r in ok})
    text = [f"DDP training, {args.model}, {args.device}: {'; '.join(names) or 'no run succeeded'}",
            f"median over {args.steps} timed steps (after {args.warmup}), each ending with a device synchronize; "
            f"scaling eff = samples/s at N / (N x samples/s at 1); tl / torch = step time ratio (lower is better "
            f"for torchlean)", "", table(rows, args.device)]
    if checks:
        text.append("")
        for c in checks:
            text += check_lines(c, args.check_steps)
        text.append("(Adam's first steps move a weight by about lr x sign(gradient): a gradient near zero whose "
                    "rounding differs moves its weight by up to about lr = 1e-4; the gradients are the direct test)")
    elif args.check:
        text += ["", "check: skipped (it needs a world size above 1 in --gpus)"]
    out = "\n".join(text)
    print()
    print(out)
    if args.out:
        Path(args.out).write_text(json.dumps({"config": vars(args), "runs": rows, "checks": checks}, indent=1))
        print(f"wrote {args.out}")
    if args.save:
        d = Path.cwd() / "benchmarks" / "results"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"ddp_{args.device}_{datetime.date.today().isoformat()}.txt"
        path.write_text(out + "\n")
        print(f"saved {path}")
    failed = [r for r in rows if "failed" in r] + [c for c in checks if "failed" in c]
    return 1 if failed else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="1,2", help="world sizes, comma-separated (processes on --device cpu)")
    ap.add_argument("--steps", "--runs", type=int, default=None, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 5)")
    ap.add_argument("--model", default=None, choices=MODELS + (TINY,),
                    help=f"bench scale's model (default gpt2), or {TINY} (2 x 64, vocab 512, T 32, 8 per process)")
    ap.add_argument("--batch", type=int, default=None, help="samples per process (default: the model's batch)")
    ap.add_argument("--device", default=None, choices=["cuda", "cpu"], help="default cuda")
    ap.add_argument("--tiny", action="store_true", help=f"CPU smoke run: cpu, {TINY}, 3 + 1 steps")
    ap.add_argument("--out", default=None, help="write every result as JSON here")
    ap.add_argument("--no-torch", action="store_true", help="torchlean only")
    ap.add_argument("--against", default="torch", choices=["torch", "none"], help="none: as --no-torch")
    ap.add_argument("--check", action=argparse.BooleanOptionalAction, default=True,
                    help="the equality check of DDP against one process (default on)")
    ap.add_argument("--check-steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=1200, help="seconds allowed to one launch")
    ap.add_argument("--save", action="store_true", help="also write benchmarks/results/ddp_<device>_<date>.txt")
    # worker mode (the orchestrator passes these)
    ap.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--shards", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--save-params", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    tiny = dict(device="cpu", model=TINY, steps=3, warmup=1) if args.tiny else {}
    for k, v in dict(device="cuda", model="gpt2", steps=20, warmup=5).items():
        if getattr(args, k) is None:
            setattr(args, k, tiny.get(k, v))
    if args.worker:
        try:
            return worker(args)
        except Exception as e:  # noqa: BLE001 - one marked line for the orchestrator, then the traceback
            traceback.print_exc()
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            print(f"{_MARK} rank {os.environ.get('RANK', '?')}: {type(e).__name__}: {first}", file=sys.stderr,
                  flush=True)
            return 1
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
