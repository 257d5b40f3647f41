"""The torchvision classification families, exported by torch and imported (the models of
``torchlean.bench.bench_onnx.zoo``: each family's characteristic blocks written with torch.nn at small
sizes, since torchvision does not load against the test torch here), at opsets 11 (brought to 13 by
onnx.version_converter), 13, 17, 18 and 20 with random weights, compared with onnxruntime through the
IR's meaning, the compiled program and the equivalence report (tests/test_ir_torch_export.py's check)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from test_ir_torch_export import check_exported  # noqa: E402

from torchlean.bench.bench_onnx import zoo  # noqa: E402


@pytest.mark.parametrize("opset", [11, 13, 17, 18, 20])
@pytest.mark.parametrize("name", sorted(zoo(torch)))
def test_classification_family_imports_and_matches_onnxruntime(name, opset):
    if name == "vit" and opset < 14:
        pytest.skip("torch's exporter cannot write scaled_dot_product_attention below opset 14")
    model, shape = zoo(torch)[name]
    err, _, _, _ = check_exported(model, shape, opset)
    assert err <= 1e-5
