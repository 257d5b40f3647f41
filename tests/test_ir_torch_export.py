"""ONNX files exported by torch's exporter: imported, evaluated, compiled, against onnxruntime."""

import io
import warnings

import numpy as np
import pytest

from torchlean import ir

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def _models():
    nn = torch.nn
    return {
        "cnn": (nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(4 * 4 * 4, 10), nn.GELU(), nn.LayerNorm(10)), (2, 1, 8, 8)),
        "mlp": (nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3), nn.LogSoftmax(-1)), (4, 6)),
        "conv1d_bn": (nn.Sequential(nn.Conv1d(3, 5, 3, stride=2), nn.BatchNorm1d(5), nn.Sigmoid(),
                                    nn.AvgPool1d(2)), (2, 3, 17)),
    }


def _export(model, x):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        torch.onnx.export(model, (x,), f, dynamo=False, input_names=["x"], opset_version=17)
    return f.getvalue()


@pytest.mark.parametrize("name", sorted(_models()))
def test_torch_exported_model_matches_onnxruntime(name):
    torch.manual_seed(0)
    model, shape = _models()[name]
    model.eval()
    with torch.no_grad():
        for m in model.modules():  # non-trivial running statistics, so folding them matters
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(*shape)
    data = _export(model, x)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    g, p = ir.from_onnx(data)
    ir.check(g, p)
    meaning = ir.evaluate(g, p, x.numpy().astype(np.float64))[g.outputs[0]]
    compiled = ir.compile(g, p)(x.numpy())
    scale = np.abs(ref).max()
    assert np.abs(meaning - ref).max() <= 1e-4 * scale
    assert np.abs(np.asarray(compiled) - ref).max() <= 1e-4 * scale
    report = ir.check_equivalence(g, p, x.numpy())
    assert report.passed, str(report)
