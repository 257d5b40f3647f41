"""CUDA: causal scaled_dot_product_attention (is_causal=True), forward + backward, torchlean against
torch's SDPA at issue 18's shapes, fp32, TF32 off, paired CUDA-event medians; prints the ratio and
the largest differences of the output and the query gradient.

    python benchmarks/probe_causal_attention.py
"""

from __future__ import annotations

import numpy as np


def main():
    import torch

    import torchlean as tl
    from torchlean.testing.timing import paired_event_median_ms

    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(0)
    print(f"{'(b, h, n, d)':<20} {'torchlean ms':>12} {'torch ms':>9} {'tl/torch':>9} {'max |dy|':>9} {'max |dq|':>9}")
    for shape in ((16, 8, 512, 64), (8, 12, 1024, 64)):
        q, k, v, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
        tq, tk, tv = (tl.tensor(a, device="cuda", requires_grad=True) for a in (q, k, v))
        tg = tl.tensor(g, device="cuda")
        rq, rk, rv = (torch.tensor(a, device="cuda", requires_grad=True) for a in (q, k, v))
        rg = torch.tensor(g, device="cuda")

        def ours():
            for t in (tq, tk, tv):
                t.grad = None
            y = tl.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
            y.backward(tg)
            return y

        def ref():
            for t in (rq, rk, rv):
                t.grad = None
            y = torch.nn.functional.scaled_dot_product_attention(rq, rk, rv, is_causal=True)
            y.backward(rg)
            return y

        y1, y2 = ours(), ref()
        dy = float(np.abs(y1.detach().cpu().numpy() - y2.detach().cpu().numpy()).max())
        dq = float(np.abs(tq.grad.cpu().numpy() - rq.grad.cpu().numpy()).max())
        a, b = paired_event_median_ms([ours, ref], 20, 3, [tl.cuda.synchronize, torch.cuda.synchronize])
        print(f"{str(shape):<20} {a:12.3f} {b:9.3f} {a / b:9.2f} {dy:9.2e} {dq:9.2e}", flush=True)


if __name__ == "__main__":
    main()
