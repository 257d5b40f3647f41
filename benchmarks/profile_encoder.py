"""Where the GPU time of the TransformerEncoder training step goes (bench_nn_train's encoder:
6 x d512, 8 heads, ff 2048, batch 32, seq 256, fp32), torchlean's step against torch's, through
torch.profiler (which sees CuPy's kernels too): the top kernels by total GPU time, kernel counts
and the step's GPU total. Not a test; prints tables."""

from __future__ import annotations

import numpy as np


def main():
    import torch
    import torchlean as tl
    from torch.profiler import ProfilerActivity, profile

    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((32, 256, 512)).astype(np.float32) for _ in range(2))

    def enc(nn):
        layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)

    m_t = enc(torch.nn).cuda()
    m_tl = enc(tl.nn)
    m_tl.load_state_dict({k: v.detach().cpu().numpy() for k, v in m_t.state_dict().items()})
    m_tl.to("cuda")
    opt_t, opt_tl = torch.optim.Adam(m_t.parameters()), tl.optim.Adam(m_tl.parameters())
    xt, yt = torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")
    xl, yl = tl.tensor(x, device="cuda"), tl.tensor(y, device="cuda")

    def step_t():
        opt_t.zero_grad()
        torch.nn.functional.mse_loss(m_t(xt), yt).backward()
        opt_t.step()

    def step_tl():
        opt_tl.zero_grad()
        tl.nn.functional.mse_loss(m_tl(xl), yl).backward()
        opt_tl.step()

    for name, step, sync in (("torchlean", step_tl, tl.cuda.synchronize), ("torch", step_t, torch.cuda.synchronize)):
        for _ in range(3):
            step()
        sync()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            sync()
        events = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
        total = sum(e.self_device_time_total for e in events) / 1e3
        count = sum(e.count for e in events)
        print(f"\n== {name}: {count} kernels, {total:.2f} ms of GPU time per step")
        for e in sorted(events, key=lambda e: -e.self_device_time_total)[:18]:
            print(f"{e.self_device_time_total / 1e3:8.3f} ms {e.count:5d}x  {e.key[:110]}")


if __name__ == "__main__":
    main()
