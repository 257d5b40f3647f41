"""CUDA: training steps of torch.nn layers at the sizes people train, torchlean vs PyTorch in one process.

* LSTM: 2 layers, input and hidden 512, sequence 256, batch 64 (time-major), MSE to a target;
* GRU and tanh RNN of the same sizes;
* TransformerEncoder: 6 x TransformerEncoderLayer(d 512, 8 heads, feed-forward 2048, dropout 0,
  batch_first), batch 32, sequence 256, MSE to a target;
* causal attention fwd+bwd (batch 8, heads 16, n 2048, d 64; ``is_causal=True``).

A step is forward, loss, backward and an Adam update (attention: forward and backward). fp32,
TF32 off. Prints median ms of each (the two frameworks timed in turns), the ratio torchlean /
torch, and both peak device memories over one step. Not a test.
"""

from __future__ import annotations

import argparse

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated subset: lstm,gru,rnn,encoder,causal")
    args = ap.parse_args(argv)
    import torch
    import torchlean as tl
    from torchlean.testing.timing import paired_event_median_ms

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    only = set(filter(None, args.only.split(",")))
    rng = np.random.default_rng(0)
    sync = [tl.cuda.synchronize, torch.cuda.synchronize]

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def peak_tl(fn):
        fn()
        tl.cuda.synchronize()
        tl.cuda.reset_peak_memory_stats()
        fn()
        tl.cuda.synchronize()
        return tl.cuda.memory_stats()["peak_bytes"] / 2 ** 20

    def peak_torch(fn):
        fn()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2 ** 20

    def pair(name, fn_tl, fn_t, reps=None):
        p1, p2 = peak_tl(fn_tl), peak_torch(fn_t)
        t1, t2 = paired_event_median_ms([fn_tl, fn_t], reps or args.reps, 3, sync)
        print(f"{name:52s} {t1:9.3f} ms {t2:9.3f} ms {t1 / t2:6.2f}x  peak {p1:8.1f} / {p2:8.1f} MiB", flush=True)

    def train_pair(name, make_tl, make_torch, x, y):
        m_tl, m_t = make_tl(), make_torch()
        m_tl.load_state_dict({k: v.detach().cpu().numpy() for k, v in m_t.state_dict().items()})
        m_tl.to("cuda")
        m_t.to("cuda")
        opt_tl = tl.optim.Adam(m_tl.parameters(), lr=1e-4)
        opt_t = torch.optim.Adam(m_t.parameters(), lr=1e-4)
        x_tl, y_tl = tl.tensor(x, device="cuda"), tl.tensor(y, device="cuda")
        x_t, y_t = torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")

        def out(o):
            return o[0] if isinstance(o, tuple) else o

        def step_tl():
            opt_tl.zero_grad()
            loss = tl.nn.functional.mse_loss(out(m_tl(x_tl)), y_tl)
            loss.backward()
            opt_tl.step()

        def step_t():
            opt_t.zero_grad()
            loss = torch.nn.functional.mse_loss(out(m_t(x_t)), y_t)
            loss.backward()
            opt_t.step()

        with torch.no_grad():
            ref = out(m_t(x_t)).cpu().numpy()
        got = out(m_tl(x_tl)).numpy()
        print(f"  {name}: max |forward difference| {np.abs(got - ref).max():.2e}", flush=True)
        pair(name, step_tl, step_t)

    T, N, H = 256, 64, 512
    x, y = arr(T, N, H), arr(T, N, H)
    for kind in ("LSTM", "GRU", "RNN"):
        if not only or kind.lower() in only:
            train_pair(f"{kind} 2x{H} seq {T} batch {N} train step",
                       lambda kind=kind: getattr(tl.nn, kind)(H, H, 2), lambda kind=kind: getattr(torch.nn, kind)(H, H, 2),
                       x, y)

    if (not only or "encoder" in only) and hasattr(tl.nn, "TransformerEncoder"):
        xb, yb = arr(32, 256, 512), arr(32, 256, 512)

        def enc(nn):
            layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
            return nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
        train_pair("TransformerEncoder 6 x d512 batch 32 seq 256 train step", lambda: enc(tl.nn), lambda: enc(torch.nn),
                   xb, yb)

    if not only or "causal" in only:
        q, k, v, g = (arr(8, 16, 2048, 64) for _ in range(4))
        ts_tl = [tl.tensor(a, device="cuda", requires_grad=True) for a in (q, k, v)]
        ts_t = [torch.tensor(a, device="cuda", requires_grad=True) for a in (q, k, v)]
        g_tl, g_t = tl.tensor(g, device="cuda"), torch.tensor(g, device="cuda")

        def att_tl():
            tl.nn.functional.scaled_dot_product_attention(*ts_tl, is_causal=True).backward(g_tl)

        def att_t():
            torch.nn.functional.scaled_dot_product_attention(*ts_t, is_causal=True).backward(g_t)
        pair("causal attention fwd+bwd b8 h16 n2048 d64", att_tl, att_t)


if __name__ == "__main__":
    main()
