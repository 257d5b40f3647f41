"""ONNX files exported by torch's exporter: imported, evaluated, compiled, against onnxruntime."""


import numpy as np
import pytest

from torchlean import ir
from torchlean.bench.bench_onnx import export

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def _blocks():
    """The blocks of the architectures people export, written with torch.nn (no torchvision needed)."""
    nn = torch.nn

    class SE(nn.Module):                       # MobileNetV3's squeeze-and-excitation
        def __init__(self, c):
            super().__init__()
            self.pool, self.a, self.b = nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, 4, 1), nn.Conv2d(4, c, 1)

        def forward(self, x):
            return x * nn.functional.hardsigmoid(self.b(torch.relu(self.a(self.pool(x)))))

    class Fire(nn.Module):                     # SqueezeNet's
        def __init__(self, cin, sq, e):
            super().__init__()
            self.sq, self.e1, self.e3 = nn.Conv2d(cin, sq, 1), nn.Conv2d(sq, e, 1), nn.Conv2d(sq, e, 3, padding=1)

        def forward(self, x):
            x = torch.relu(self.sq(x))
            return torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x))], 1)

    class GPTBlock(nn.Module):                 # nanoGPT's: a causal mask buffer, masked_fill, split
        def __init__(self, d=16, h=2, t=8):
            super().__init__()
            self.h, self.ln1, self.ln2 = h, nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.register_buffer("mask", torch.tril(torch.ones(t, t)).view(1, 1, t, t))
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (u.view(B, T, self.h, C // self.h).transpose(1, 2) for u in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // self.h) ** 0.5)
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))
            return x + self.mlp(self.ln2(x))

    class UNetBlock(nn.Module):                # upsampling (nearest, bilinear, bicubic) and reflect padding
        def __init__(self):
            super().__init__()
            self.down, self.up = nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Conv2d(7, 4, 3)

        def forward(self, x):
            y = self.down(x)
            a = nn.functional.interpolate(y, scale_factor=2, mode="nearest")
            b = nn.functional.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)
            c = nn.functional.interpolate(y, size=x.shape[-2:], mode="bicubic", align_corners=True)
            z = torch.cat([a + b + c, x], 1)
            return self.up(nn.functional.pad(z, (1, 1, 1, 1), mode="reflect"))

    class GPTTokens(nn.Module):                # GPT-2's front and back: token ids in, tied head, top-3 out
        def __init__(self, vocab=40, d=16, t=8):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(t, d)
            self.blocks, self.ln = nn.Sequential(GPTBlock(d, 2, t), GPTBlock(d, 2, t)), nn.LayerNorm(d)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            logits = self.ln(self.blocks(x)) @ self.wte.weight.T
            return logits, torch.topk(logits[:, -1], 3, dim=-1).indices

    return SE, Fire, GPTBlock, UNetBlock, GPTTokens


def _models():
    nn = torch.nn
    SE, Fire, GPTBlock, UNetBlock, GPTTokens = _blocks()
    return {
        "mobilenet_v3_block": (nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.Hardswish(),
            nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), SE(8), nn.Conv2d(8, 16, 1), nn.Hardswish(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)), (2, 3, 16, 16)),
        "squeezenet_block": (nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True), Fire(8, 4, 8),
            nn.MaxPool2d(3, 2, ceil_mode=True), Fire(16, 4, 8), nn.Conv2d(16, 10, 1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten()), (2, 3, 33, 33)),
        "activations": (nn.Sequential(nn.Linear(6, 12), nn.ELU(), nn.Linear(12, 12), nn.SELU(), nn.CELU(0.5),
                                      nn.PReLU(), nn.Softsign(), nn.Hardtanh(-0.5, 0.5), nn.Linear(12, 12),
                                      nn.ReLU6(), nn.Mish()), (4, 6)),
        "gpt_decoder": (nn.Sequential(GPTBlock(), GPTBlock()), (2, 8, 16)),
        "gpt_token_ids_top3": (GPTTokens(), (2, 8), lambda: torch.randint(0, 40, (2, 8))),
        "topk_smallest": (_TopK(), (3, 7)),
        "transformer_encoder": (nn.TransformerEncoder(
            nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 2), (2, 5, 16)),
        "unet_block": (UNetBlock(), (2, 3, 10, 12)),
        "lstm": (nn.LSTM(4, 6, batch_first=True), (2, 5, 4)),
        "lstm_2_layers_bidirectional": (nn.LSTM(4, 6, num_layers=2, bidirectional=True), (5, 2, 4)),
        "gru": (nn.GRU(4, 6, batch_first=True), (2, 5, 4)),
        "gru_bidirectional": (nn.GRU(4, 5, bidirectional=True), (7, 3, 4)),
        "rnn_tanh": (nn.RNN(4, 6, batch_first=True), (2, 5, 4)),
        "rnn_relu_2_layers_bidirectional": (nn.RNN(4, 5, num_layers=2, nonlinearity="relu", bidirectional=True),
                                            (6, 3, 4)),
        "cnn": (nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(4 * 4 * 4, 10), nn.GELU(), nn.LayerNorm(10)), (2, 1, 8, 8)),
        "mlp": (nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3), nn.LogSoftmax(-1)), (4, 6)),
        "conv1d_bn": (nn.Sequential(nn.Conv1d(3, 5, 3, stride=2), nn.BatchNorm1d(5), nn.Sigmoid(),
                                    nn.AvgPool1d(2)), (2, 3, 17)),
    }


class _TopK(torch.nn.Module):
    """TopK (smallest two, on a column with ties) into arithmetic: values and indices both used."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(7, 5)

    def forward(self, x):
        y = torch.cat([self.lin(x), torch.zeros(x.shape[0], 2)], 1)
        v, i = torch.topk(y, 2, dim=1, largest=False)
        return v * 3 + 1, i


def check_exported(model, shape, opset, x=None):
    """Export ``model`` (random weights, non-trivial batch-norm statistics) at ``opset``, import it, and
    compare every output with onnxruntime through the IR's meaning and the compiled program, and the
    equivalence report. Returns the largest difference of the first output relative to its largest
    entry, the compiled program and the input."""
    torch.manual_seed(0)
    model.eval()
    with torch.no_grad():
        for m in model.modules():  # non-trivial running statistics, so folding them matters
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(*shape) if x is None else x
    data = export(torch, model, x, opset)
    refs = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})
    ref = refs[0]
    g, p = ir.from_onnx(data)
    ir.check(g, p)
    values = ir.evaluate(g, p, x.numpy().astype(np.float64) if x.is_floating_point() else x.numpy())
    assert len(g.outputs) == len(refs)
    for o, r in zip(g.outputs[1:], refs[1:]):   # the other outputs too (an LSTM's final h and c)
        assert values[o].shape == r.shape and np.abs(values[o] - r).max() <= 1e-4 * max(1.0, np.abs(r).max())
    meaning = values[g.outputs[0]]
    program = ir.compile(g, p)
    compiled = program(x.numpy())
    if isinstance(compiled, (tuple, list)):     # several graph outputs (an LSTM's output and final states)
        compiled = compiled[0]
    scale = np.abs(ref).max()
    assert np.abs(meaning - ref).max() <= 1e-4 * scale
    assert np.abs(np.asarray(compiled) - ref).max() <= 1e-4 * scale
    report = ir.check_equivalence(g, p, x.numpy())
    assert report.passed, str(report)
    return float(np.abs(meaning - ref).max() / scale), program, x.numpy(), data


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("name", sorted(_models()))
def test_torch_exported_model_matches_onnxruntime(name, opset):
    model, shape, *make = _models()[name]
    check_exported(model, shape, opset, make[0]() if make else None)


def test_check_model_draws_valid_token_ids_for_an_integer_input(tmp_path, capsys):
    """``torchlean check --model`` on a model taking token ids: the integer input gets random ids below
    the vocabulary (its bound found through the graph), not normal floats, and no x100 pass."""
    from torchlean.ir.cli import check_model
    path = tmp_path / "gpt_tokens.onnx"
    path.write_bytes(export(torch, _blocks()[4]().eval(), torch.randint(0, 40, (2, 8)), 17))
    g, _ = ir.from_onnx(str(path))
    assert ir.index_input_bounds(g) == {0: 40}
    assert check_model(str(path)) == 0
    out = capsys.readouterr().out
    assert "random indices for the integer ones" in out and "take_along" in out
