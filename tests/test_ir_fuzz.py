"""Loader fuzzing: damaged IR files and ONNX bytes raise TorchLeanErrors, never anything else."""

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from torchlean import ir
from torchlean.errors import IRError, TorchLeanError
from torchlean.ir.gen import random_graph

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

N = ir.Node


def _saved(tmp: Path):
    """A saved graph with a payload and attributes of every encoding; returns (json bytes, side bytes)."""
    g = ir.Graph([N(0, "input", (), (4, 3), {"index": 0, "meta": (slice(1, None, 2), Ellipsis, None),
                                            "mask": np.array([True, False]), "f": float("-inf")}),
                  N(1, "linear", (0,), (4, 5)),
                  N(2, "clamp", (1,), (4, 5), {"lo": -0.5, "hi": None}),
                  N(3, "const", (), (5,)),
                  N(4, "mul", (2, 3), (4, 5)),
                  N(5, "pow", (4,), (4, 5), {"exponent": 2})], outputs=(5, 2))
    rng = np.random.default_rng(0)
    p = ir.Payload({(1, "weight"): rng.normal(size=(5, 3)).astype(np.float32),
                    (1, "bias"): rng.normal(size=5), (3, "value"): rng.normal(size=5)})
    ir.save(g, p, tmp / "m.json")
    return (tmp / "m.json").read_bytes(), (tmp / "m.json.safetensors").read_bytes()


def _load_with(js: bytes, side: bytes):
    with tempfile.TemporaryDirectory() as name:   # one per hypothesis example, removed after it
        d = Path(name)
        (d / "m.json").write_bytes(js)
        (d / "m.json.safetensors").write_bytes(side)
        return ir.load(d / "m.json")


def test_original_loads(tmp_path):
    js, side = _saved(tmp_path)
    g, p = _load_with(js, side)
    assert len(g.nodes) == 6 and g.outputs == (5, 2) and len(p) == 3


def test_every_truncation_of_json_is_rejected(tmp_path):
    js, side = _saved(tmp_path)
    for cut in range(0, len(js), max(1, len(js) // 400)):
        with pytest.raises(IRError):
            _load_with(js[:cut], side)


def test_truncations_of_payload_are_rejected(tmp_path):
    js, side = _saved(tmp_path)
    for cut in range(0, len(side), max(1, len(side) // 100)):
        with pytest.raises(IRError):
            _load_with(js, side[:cut])


@FUZZ
@given(data=st.data())
def test_byte_flips_in_json(tmp_path, data):
    js, side = _saved(tmp_path)
    buf = bytearray(js)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] ^= data.draw(st.integers(1, 255))
    try:
        g, p = _load_with(bytes(buf), side)
    except TorchLeanError:
        return
    ir.check(g, p)  # anything that loads is a valid graph


@FUZZ
@given(data=st.data())
def test_byte_flips_in_payload(tmp_path, data):
    js, side = _saved(tmp_path)
    buf = bytearray(side)
    i = data.draw(st.integers(0, len(buf) - 1))
    buf[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(IRError):
        _load_with(js, bytes(buf))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2 ** 40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6) | st.sampled_from(["$float", "$array", "$slice", "inf", "input", "linear"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["$float", "$list", "$dict", "$slice", "$ellipsis", "$array", "$scalar", "$dtype",
                         "dtype", "shape", "data", "value", "x"]), inner, max_size=3),
    max_leaves=12)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for k, v in enumerate(doc):
            yield from _paths(v, prefix + (k,))


@FUZZ
@given(data=st.data())
def test_wrong_types_anywhere(tmp_path, data):
    js, side = _saved(tmp_path)
    doc = json.loads(js)
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    new = data.draw(JSON_VALUES)
    node = doc
    for k in path[:-1]:
        node = node[k]
    if data.draw(st.booleans()) and isinstance(node, dict):
        del node[path[-1]]
    else:
        node[path[-1]] = new
    try:
        g, p = _load_with(json.dumps(doc).encode(), side)
    except TorchLeanError:
        return
    ir.check(g, p)


@pytest.mark.parametrize("doc", [
    [], 3, "x", None, {}, {"format": "torchlean.ir.v0", "nodes": [], "outputs": [], "payload": {}},
    {"format": "torchlean.ir.v1", "nodes": [], "outputs": [], "payload": {"file": None, "sha256": None, "tensors": []}},
    {"format": "torchlean.ir.v1", "nodes": [{"id": 0, "kind": "input", "parents": [], "out_shape": [2],
                                            "attrs": {"index": 0}}],
     "outputs": [0], "payload": {"file": "../../etc/passwd", "sha256": "0" * 64,
                                 "tensors": [{"node": 0, "name": "value", "dtype": "float32", "shape": [2]}]}},
    {"format": "torchlean.ir.v1", "nodes": [{"id": 0, "kind": "input", "parents": [], "out_shape": [2],
                                            "attrs": {"index": 0, "a": {"$array": {"dtype": "uint8", "shape": [1],
                                                                                   "data": [256]}}}}],
     "outputs": [0], "payload": {"file": None, "sha256": None, "tensors": []}},
])
def test_malformed_documents(tmp_path, doc):
    (tmp_path / "d.json").write_text(json.dumps(doc))
    with pytest.raises(IRError):
        ir.load(tmp_path / "d.json")


def test_non_json_and_deep_nesting(tmp_path):
    for blob in [b"\xff\xfe\x00", b"NaN", b"[" * 100000, b'{"format": Infinity}']:
        (tmp_path / "d.json").write_bytes(blob)
        with pytest.raises(IRError):
            ir.load(tmp_path / "d.json")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_random_graph_files_survive_truncation(tmp_path, seed):
    rng = np.random.default_rng(seed)
    rg = random_graph(rng, int(rng.integers(1, 6)))
    d = Path(tempfile.mkdtemp(dir=tmp_path))
    ir.save(rg.graph, rg.payload, d / "g.json")
    js = (d / "g.json").read_bytes()
    for cut in rng.integers(0, len(js), size=20):
        (d / "g.json").write_bytes(js[:cut])
        with pytest.raises(IRError):
            ir.load(d / "g.json")


# ---- ONNX bytes -----------------------------------------------------------------------------

def _onnx_bytes():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(8, 6)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(size=8).astype(np.float32), "b"),
             numpy_helper.from_array(np.array([0, -1], np.int64), "shp"),
             numpy_helper.from_array(np.array([1, 3], np.int64), "idx")]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Reshape", ["r", "shp"], ["s"]),
             helper.make_node("Gather", ["s", "idx"], ["t"], axis=1),
             helper.make_node("Softmax", ["t"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return m.SerializeToString()


def _try_onnx(blob):
    try:
        g, p = ir.from_onnx(blob)
    except TorchLeanError:
        return
    ir.check(g, p)


def test_onnx_original_imports():
    g, p = ir.from_onnx(_onnx_bytes())
    assert [n.kind for n in g.nodes][:2] == ["input", "linear"]


def test_onnx_truncations():
    blob = _onnx_bytes()
    for cut in range(0, len(blob), max(1, len(blob) // 300)):
        _try_onnx(blob[:cut])


@FUZZ
@given(data=st.data())
def test_onnx_byte_flips(data):
    buf = bytearray(_onnx_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] ^= data.draw(st.integers(1, 255))
    _try_onnx(bytes(buf))


def test_onnx_not_a_model():
    for blob in [b"", b"\x00" * 10, os.urandom(64), b"hello"]:
        _try_onnx(blob)


def test_random_graph_of_kinds_without_float_results_raises():
    # compare only gives booleans: the generator must say so instead of drawing forever.
    with pytest.raises(TorchLeanError, match="not a float"):
        random_graph(np.random.default_rng(0), 3, kinds=["compare"])
    rg = random_graph(np.random.default_rng(0), 4, kinds=["compare", "exp"])
    assert [n.kind for n in rg.graph.nodes if n.kind not in ("input", "const")] == ["exp"] * 4
