"""ONNX import of the torchvision classification families against onnxruntime (and, on a GPU, torch).

    torchlean bench onnx [--runs 20] [--save]
    python -m torchlean.bench.bench_onnx [--opsets 17,18] [--runs 20] [--resnet18 1,32] [--device cuda] [--save]

Each family is written once with torch.nn at small sizes (:func:`zoo`: the characteristic blocks of
ResNet, ResNeXt/wide ResNet, RegNet, MobileNetV2, MNASNet, EfficientNet, ShuffleNetV2, DenseNet,
VGG/AlexNet, GoogLeNet, ConvNeXt, ViT and Swin), exported by torch's exporter with random weights,
imported with ``ir.from_onnx`` and compiled. The table gives, per model and opset, the largest
difference from onnxruntime's output relative to its largest entry, and the median time of one forward
of the compiled program and of onnxruntime's CPU session (ratio > 1: torchlean slower). The test family
``tests/test_ir_onnx_zoo.py`` uses the same models. With ``--device cuda`` the compiled program runs on
the GPU (inputs and outputs on the device, a synchronize per forward) and two more columns give torch's
eager forward of the same model on the GPU and torchlean's time relative to it.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
import warnings

import numpy as np


def zoo(torch):
    """name -> (model, input shape), over the real torch (its exporter writes the ONNX files)."""
    nn = torch.nn
    F = nn.functional

    def cbr(ci, co, k=3, s=1, g=1, act=nn.ReLU):
        return nn.Sequential(nn.Conv2d(ci, co, k, s, k // 2, groups=g, bias=False), nn.BatchNorm2d(co), act())

    def head(c, n=10):
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, n))

    class Basic(nn.Module):                  # ResNet
        def __init__(self, ci, co, st):
            super().__init__()
            self.a = cbr(ci, co, 3, st)
            self.b = nn.Sequential(nn.Conv2d(co, co, 3, 1, 1, bias=False), nn.BatchNorm2d(co))
            self.sc = nn.Sequential(nn.Conv2d(ci, co, 1, st, bias=False), nn.BatchNorm2d(co)) \
                if st != 1 or ci != co else nn.Identity()

        def forward(self, x):
            return F.relu(self.b(self.a(x)) + self.sc(x))

    class Bottleneck(nn.Module):             # ResNeXt, wide ResNet, RegNet: grouped 3x3 in a bottleneck
        def __init__(self, c, width, groups):
            super().__init__()
            self.f = nn.Sequential(cbr(c, width, 1), cbr(width, width, 3, 1, groups),
                                   nn.Conv2d(width, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            return F.relu(self.f(x) + x)

    class InvertedResidual(nn.Module):       # MobileNetV2, MNASNet
        def __init__(self, c, e):
            super().__init__()
            self.f = nn.Sequential(cbr(c, c * e, 1, act=nn.ReLU6), cbr(c * e, c * e, 3, 1, c * e, nn.ReLU6),
                                   nn.Conv2d(c * e, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            return x + self.f(x)

    class SE(nn.Module):                     # EfficientNet's and RegNet's squeeze-and-excitation
        def __init__(self, c, r=4):
            super().__init__()
            self.f = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // r, 1), nn.SiLU(), nn.Conv2d(c // r, c, 1),
                                   nn.Sigmoid())

        def forward(self, x):
            return x * self.f(x)

    class MBConv(nn.Module):                 # EfficientNet
        def __init__(self, c):
            super().__init__()
            self.f = nn.Sequential(cbr(c, 4 * c, 1, act=nn.SiLU), cbr(4 * c, 4 * c, 3, 1, 4 * c, nn.SiLU), SE(4 * c),
                                   nn.Conv2d(4 * c, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            return x + self.f(x)

    class ShuffleUnit(nn.Module):            # ShuffleNetV2: chunk, branch, concat, channel shuffle
        def __init__(self, c):
            super().__init__()
            h = c // 2
            self.b = nn.Sequential(cbr(h, h, 1), nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h),
                                   cbr(h, h, 1))

        def forward(self, x):
            a, b = x.chunk(2, dim=1)
            out = torch.cat((a, self.b(b)), 1)
            n, c, hh, ww = out.shape
            return out.view(n, 2, c // 2, hh, ww).transpose(1, 2).contiguous().view(n, c, hh, ww)

    class DenseLayer(nn.Module):             # DenseNet
        def __init__(self, c, g):
            super().__init__()
            self.f = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 4 * g, 1, bias=False), nn.BatchNorm2d(4 * g),
                                   nn.ReLU(), nn.Conv2d(4 * g, g, 3, 1, 1, bias=False))

        def forward(self, x):
            return torch.cat([x, self.f(x)], 1)

    class Inception(nn.Module):              # GoogLeNet
        def __init__(self, c):
            super().__init__()
            self.a = cbr(c, 8, 1)
            self.b = nn.Sequential(cbr(c, 4, 1), cbr(4, 8, 3))
            self.c = nn.Sequential(cbr(c, 4, 1), cbr(4, 8, 3))
            self.d = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), cbr(c, 8, 1))

        def forward(self, x):
            return torch.cat([self.a(x), self.b(x), self.c(x), self.d(x)], 1)

    class LayerNorm2d(nn.LayerNorm):         # ConvNeXt's channels-first layer norm
        def forward(self, x):
            return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    class ConvNeXtBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dw, self.ln = nn.Conv2d(c, c, 7, padding=3, groups=c), nn.LayerNorm(c)
            self.a, self.b = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
            self.gamma = nn.Parameter(torch.full((c,), 0.1))

        def forward(self, x):
            y = self.b(F.gelu(self.a(self.ln(self.dw(x).permute(0, 2, 3, 1))))) * self.gamma
            return x + y.permute(0, 3, 1, 2)

    class ViT(nn.Module):                    # vit_b_16's structure at 16 x 16 pixels, patch 4
        def __init__(self, d=16, p=4, img=16, layers=2):
            super().__init__()
            self.patch = nn.Conv2d(3, d, p, p)
            self.cls = nn.Parameter(torch.randn(1, 1, d))
            self.pos = nn.Parameter(torch.randn(1, (img // p) ** 2 + 1, d))
            self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 2, 2 * d, dropout=0.0, activation="gelu",
                                                                        batch_first=True, norm_first=True), layers,
                                             enable_nested_tensor=False)
            self.head = nn.Linear(d, 10)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
            return self.head(self.enc(x)[:, 0])

    class SwinBlock(nn.Module):              # swin_t's shifted-window attention with relative position bias
        def __init__(self, d=8, w=4, h=2):
            super().__init__()
            self.w, self.h = w, h
            self.ln, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.bias = nn.Parameter(torch.randn((2 * w - 1) ** 2, h))
            c = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
            r = (c[:, :, None] - c[:, None, :]).permute(1, 2, 0) + (w - 1)
            self.register_buffer("idx", (r[..., 0] * (2 * w - 1) + r[..., 1]).flatten())

        def forward(self, x):               # (B, H, W, C)
            B, H, W, C = x.shape
            w = self.w
            y = torch.roll(self.ln(x), shifts=(-w // 2, -w // 2), dims=(1, 2))
            y = y.view(B, H // w, w, W // w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, C)
            q, k, v = self.qkv(y).reshape(y.shape[0], w * w, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) * (C // self.h) ** -0.5
            att = att + self.bias[self.idx].view(w * w, w * w, self.h).permute(2, 0, 1)
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(-1, w * w, C)
            y = self.proj(y).view(B, H // w, W // w, w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
            return x + torch.roll(y, shifts=(w // 2, w // 2), dims=(1, 2))

    return {
            "resnet": (nn.Sequential(cbr(3, 8, 3, 2), nn.MaxPool2d(3, 2, 1), Basic(8, 8, 1), Basic(8, 16, 2), head(16)),
                       (2, 3, 32, 32)),
            "resnext_wide_resnet": (nn.Sequential(cbr(3, 16), Bottleneck(16, 32, 4), head(16)), (2, 3, 16, 16)),
            "regnet": (nn.Sequential(cbr(3, 16), Bottleneck(16, 16, 8), SE(16), head(16)), (2, 3, 16, 16)),
            "mobilenet_v2": (nn.Sequential(cbr(3, 8, 3, 2, act=nn.ReLU6), InvertedResidual(8, 4), nn.Dropout(0.2), head(8)),
                             (2, 3, 16, 16)),
            "mnasnet": (nn.Sequential(cbr(3, 8, 3, 2), InvertedResidual(8, 3), head(8)), (2, 3, 16, 16)),
            "efficientnet": (nn.Sequential(cbr(3, 8, 3, 2, act=nn.SiLU), MBConv(8), head(8)), (2, 3, 16, 16)),
            "shufflenet_v2": (nn.Sequential(cbr(3, 8, 3, 2), ShuffleUnit(8), head(8)), (2, 3, 16, 16)),
            "densenet": (nn.Sequential(cbr(3, 8), DenseLayer(8, 4), DenseLayer(12, 4), nn.AvgPool2d(2), head(16)),
                         (2, 3, 16, 16)),
            "vgg_alexnet": (nn.Sequential(cbr(3, 8), nn.MaxPool2d(2), cbr(8, 8), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d((2, 2)),
                                          nn.Flatten(), nn.Linear(32, 16), nn.ReLU(), nn.Dropout(), nn.Linear(16, 10)),
                            (2, 3, 16, 16)),
            "googlenet": (nn.Sequential(cbr(3, 8, 3, 2), nn.MaxPool2d(3, 2, ceil_mode=True), Inception(8), head(32)),
                          (2, 3, 32, 32)),
            "convnext": (nn.Sequential(nn.Conv2d(3, 8, 4, 4), LayerNorm2d(8), ConvNeXtBlock(8), head(8)), (2, 3, 16, 16)),
            "vit": (ViT(), (2, 3, 16, 16)),
            "swin": (SwinBlock(), (2, 8, 8, 8)),
        }


def resnet18(torch):
    """torchvision's resnet18 written with torch.nn (the same layers and shapes, random weights)."""
    nn = torch.nn
    F = nn.functional

    class Basic(nn.Module):
        def __init__(self, ci, co, st):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(ci, co, 3, st, 1, bias=False), nn.BatchNorm2d(co)
            self.c2, self.b2 = nn.Conv2d(co, co, 3, 1, 1, bias=False), nn.BatchNorm2d(co)
            self.sc = nn.Sequential(nn.Conv2d(ci, co, 1, st, bias=False), nn.BatchNorm2d(co)) \
                if st != 1 or ci != co else nn.Identity()

        def forward(self, x):
            return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.sc(x))

    def layer(ci, co, st):
        return nn.Sequential(Basic(ci, co, st), Basic(co, co, 1))

    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                         layer(64, 64, 1), layer(64, 128, 2), layer(128, 256, 2), layer(256, 512, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000))


def efficientnet_b0(torch):
    """torchvision's efficientnet_b0 written with torch.nn (MBConv blocks with squeeze-excitation and
    SiLU, the same stages, widths and kernel sizes; random weights, eval mode)."""
    nn = torch.nn

    def cbn(ci, co, k, s=1, g=1, act=True):
        layers = [nn.Conv2d(ci, co, k, s, (k - 1) // 2, groups=g, bias=False), nn.BatchNorm2d(co)]
        return nn.Sequential(*layers, nn.SiLU()) if act else nn.Sequential(*layers)

    class SE(nn.Module):
        def __init__(self, c, sq):
            super().__init__()
            self.fc1, self.fc2 = nn.Conv2d(c, sq, 1), nn.Conv2d(sq, c, 1)

        def forward(self, x):
            s = x.mean((2, 3), keepdim=True)
            return x * torch.sigmoid(self.fc2(nn.functional.silu(self.fc1(s))))

    class MBConv(nn.Module):
        def __init__(self, e, k, s, ci, co):
            super().__init__()
            h = ci * e
            self.res = s == 1 and ci == co
            self.block = nn.Sequential(*([cbn(ci, h, 1)] if e != 1 else []), cbn(h, h, k, s, h),
                                       SE(h, max(1, ci // 4)), cbn(h, co, 1, act=False))

        def forward(self, x):
            y = self.block(x)
            return y + x if self.res else y

    stages = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
              (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1)]
    layers = [cbn(3, 32, 3, 2)]
    for e, k, s, ci, co, n in stages:
        for i in range(n):
            layers.append(MBConv(e, k, s if i == 0 else 1, ci if i == 0 else co, co))
    model = nn.Sequential(*layers, cbn(320, 1280, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2),
                          nn.Linear(1280, 1000))
    for m in model.modules():   # torchvision's initialisation (torch.nn's default lets the signal vanish)
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.uniform_(m.weight, -m.out_features ** -0.5, m.out_features ** -0.5)
            nn.init.zeros_(m.bias)
    return model


def calibrate(torch, model, x):
    """Batch-norm running statistics set to ``x``'s (one training-mode forward with cumulative
    averaging), so that the eval-mode model normalizes its activations as a trained one does
    instead of letting a deep random network's signal vanish. Returns the model in eval mode."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.momentum = None
        m.reset_running_stats()
    model.train()
    with torch.no_grad():
        model(x)
    return model.eval()


def export(torch, model, x, opset):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        torch.onnx.export(model, (x,), f, dynamo=False, input_names=["x"], opset_version=opset)
    return f.getvalue()


def _median_ms(fn, rounds):
    fn()
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="torchlean bench onnx", description=__doc__.splitlines()[0])
    ap.add_argument("--opsets", default="17,18")
    ap.add_argument("--runs", "--rounds", dest="rounds", type=int, default=20, help="timed forwards per model (median)")
    ap.add_argument("--save", action="store_true", help="also write the table to ./benchmarks/results/")
    ap.add_argument("--resnet18", metavar="BATCHES", default="",
                    help="also time the full-size resnet18 at 224 x 224 for these batch sizes (e.g. 1,32)")
    ap.add_argument("--efficientnet-b0", metavar="BATCHES", default="",
                    help="also time the full-size efficientnet_b0 at 224 x 224 for these batch sizes")
    ap.add_argument("--only-full", action="store_true", help="skip the small family models")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="where the compiled program runs (cuda: torch's eager GPU forward is timed too)")
    args = ap.parse_args(argv)
    try:
        import onnxruntime as ort
        import torch
    except ImportError as e:
        print(f"bench onnx: needs torch and onnxruntime ({e})", file=sys.stderr)
        return 2
    import torchlean as tl
    from torchlean import ir
    gpu = args.device == "cuda"
    if gpu:
        lines = ["| model | opset | max diff / max abs | torchlean cuda ms | onnxruntime cpu ms | torch cuda ms "
                 "| tl / ort | tl / torch |", "|---|---|---|---|---|---|---|---|"]
    else:
        lines = ["| model | opset | max diff / max abs | torchlean ms | onnxruntime ms | ratio |",
                 "|---|---|---|---|---|---|"]
    print("\n".join(lines))
    runs = [] if args.only_full else [(opset, name, model, shape) for opset in (int(v) for v in args.opsets.split(","))
                                      for name, (model, shape) in sorted(zoo(torch).items())]
    runs += [(17, f"resnet18 batch {b}", resnet18(torch), (int(b), 3, 224, 224))
             for b in args.resnet18.split(",") if b]
    runs += [(17, f"efficientnet_b0 batch {b}", efficientnet_b0(torch), (int(b), 3, 224, 224))
             for b in args.efficientnet_b0.split(",") if b]
    for opset, name, model, shape in runs:
        torch.manual_seed(0)
        model.eval()
        x = torch.randn(*shape)
        if shape[-1] >= 100:
            calibrate(torch, model, x[:8])
        data = export(torch, model, x, opset)
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        feed = {"x": x.numpy()}
        ref = sess.run(None, feed)[0]
        g, p = ir.from_onnx(data)
        prog = ir.compile(g, p, device=args.device)
        xin = tl.tensor(x.numpy(), device="cuda") if gpu else x.numpy()
        out = prog.infer(xin)
        out = out[0] if isinstance(out, (tuple, list)) else out
        out = np.asarray(prog.K.to_host(out))
        err = float(np.abs(out - ref).max() / np.abs(ref).max())
        rounds = args.rounds if shape[-1] < 100 else max(10, args.rounds // 2)   # onnxruntime settles slowly
        if gpu:
            def fwd():
                prog.infer(xin)
                tl.cuda.synchronize()
        else:
            def fwd():
                prog.infer(xin)
        # onnxruntime first: OpenBLAS's threads keep spinning for a while after torchlean's GEMMs and
        # would take the cores onnxruntime's own threads need (its batch-1 resnet18 doubles).
        ort_ms = _median_ms(lambda: sess.run(None, feed), rounds)
        tl_ms = _median_ms(fwd, rounds)
        if gpu:
            tm, tx = model.cuda(), x.cuda()

            def tfwd():
                with torch.no_grad():
                    tm(tx)
                torch.cuda.synchronize()
            torch_ms = _median_ms(tfwd, rounds)
            model.cpu()
            lines.append(f"| {name} | {opset} | {err:.1e} | {tl_ms:.3f} | {ort_ms:.3f} | {torch_ms:.3f} "
                         f"| {tl_ms / ort_ms:.2f} | {tl_ms / torch_ms:.2f} |")
        else:
            lines.append(f"| {name} | {opset} | {err:.1e} | {tl_ms:.3f} | {ort_ms:.3f} | {tl_ms / ort_ms:.1f} |")
        print(lines[-1], flush=True)
    if args.save:
        import datetime
        import pathlib
        out = pathlib.Path("benchmarks/results") / f"onnx_{args.device}_{datetime.date.today().isoformat()}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
