"""The IR: kinds, checker, interpreter, save/load, CLI functions.

Random graphs come from the op test registry (torchlean.ir.gen), so every
registered op with an OpInfo takes part in the property tests.
"""

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from torchlean import ir
from torchlean.errors import BackendUnavailableError, DomainError, IRError, ShapeError
from torchlean.ir.cli import ir_check, ir_convert, ir_run
from torchlean.ir.gen import generable_kinds, random_graph
from torchlean.ir.graph import attrs_equal
from torchlean.spec import SPEC, defspec

N = ir.Node
PROP = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _mlp():
    g = ir.Graph([N(0, "input", (), (5, 3), {"index": 0}),
                  N(1, "linear", (0,), (5, 4)),
                  N(2, "relu", (1,), (5, 4)),
                  N(3, "linear", (2,), (5, 2)),
                  N(4, "log_softmax", (3,), (5, 2), {"axis": -1})])
    rng = np.random.default_rng(0)
    p = ir.Payload({(1, "weight"): rng.normal(size=(4, 3)), (1, "bias"): rng.normal(size=4),
                    (3, "weight"): rng.normal(size=(2, 4)), (3, "bias"): rng.normal(size=2)})
    return g, p


# ---- kinds ----------------------------------------------------------------------------------

def test_kinds_cover_spec_and_ir_kinds():
    assert {"input", "const", "param"} <= set(ir.KINDS)
    assert set(SPEC) <= set(ir.KINDS)
    assert len(ir.KINDS) == len(set(ir.KINDS))
    assert ir.KINDS["linear"].arity == 1 and ir.KINDS["linear"].params == ("weight", "bias")
    assert ir.KINDS["add"].arity == 2 and ir.KINDS["add"].params == ()
    assert ir.KINDS["concat"].arity == -1
    assert "no_such_op" not in ir.KINDS


def test_kinds_are_live():
    name = "ir_test_tmp_op"
    assert name not in ir.KINDS
    defspec(name, lambda x: x, lambda g, x: (g,), lambda x: tuple(x), 1)
    try:
        assert name in ir.KINDS
        g = ir.Graph([N(0, "input", (), (2,), {"index": 0}), N(1, name, (0,), (2,))])
        assert ir.check(g) == [(2,), (2,)]
    finally:
        del SPEC[name]
    assert name not in ir.KINDS


def test_param_layouts_name_spec_arity():
    # every registered parameterised kind: payload names + parent slot fill the spec's arity
    for kind, layout in ir.PARAM_INPUTS.items():
        if kind in SPEC and SPEC[kind].arity >= 0:
            assert len(layout) - 1 + ir.KINDS[kind].arity == SPEC[kind].arity, kind


# ---- check ----------------------------------------------------------------------------------

def test_check_returns_shapes_and_defaults_outputs():
    g, p = _mlp()
    assert g.outputs == (4,)
    assert ir.check(g, p) == [(5, 3), (5, 4), (5, 4), (5, 2), (5, 2)]
    # without a payload, parameterised nodes' declared shapes are trusted
    assert ir.check(g) == [(5, 3), (5, 4), (5, 4), (5, 2), (5, 2)]


def test_check_error_names_node_kind_parent_shapes_and_context():
    g = ir.Graph([N(0, "input", (), (2, 3), {"index": 0}),
                  N(1, "input", (), (4,), {"index": 1}),
                  N(2, "exp", (0,), (2, 3)),
                  N(3, "add", (2, 1), (2, 3)),
                  N(4, "relu", (3,), (2, 3))])
    with pytest.raises(IRError) as e:
        ir.check(g)
    msg = str(e.value)
    assert msg.startswith("node 3 (add)")
    assert "(2, 3), (4,)" in msg                       # parent shapes
    assert ">> %3 = add(%2, %1)" in msg                 # the node, marked
    assert "%1 = input" in msg and "%4 = relu" in msg   # neighbours


@pytest.mark.parametrize("mutate,match", [
    (lambda g: [*g.nodes[:2], g.nodes[2].replace(parents=(3,)), *g.nodes[3:]], "not an earlier node"),
    (lambda g: [*g.nodes[:2], g.nodes[2].replace(parents=(2,)), *g.nodes[3:]], "not an earlier node"),
    (lambda g: [*g.nodes[:2], g.nodes[2].replace(parents=(0, 1)), *g.nodes[3:]], "takes 1 parent"),
    (lambda g: [*g.nodes[:2], g.nodes[2].replace(out_shape=(5, 5)), *g.nodes[3:]], "declared shape"),
    (lambda g: [*g.nodes[:2], g.nodes[2].replace(id=7), *g.nodes[3:]], "must equal its position"),
    (lambda g: [*g.nodes[:2], g.nodes[2].replace(kind="frobnicate"), *g.nodes[3:]], "unknown kind"),
    (lambda g: [*g.nodes[:2], g.nodes[2].replace(out_shape=(2, -3)), *g.nodes[3:]], "non-negative"),
    (lambda g: [g.nodes[0].replace(attrs={}), *g.nodes[1:]], "index"),
    (lambda g: [g.nodes[0], g.nodes[1].replace(attrs={"index": 0}), *g.nodes[2:]], "also used"),
    (lambda g: [g.nodes[0], g.nodes[1].replace(attrs={"index": 3}), *g.nodes[2:]], "input indices"),
])
def test_check_rejects_malformed(mutate, match):
    g = ir.Graph([N(0, "input", (), (2, 3), {"index": 0}),
                  N(1, "input", (), (2, 3), {"index": 1}),
                  N(2, "tanh", (0,), (2, 3)),
                  N(3, "mul", (2, 1), (2, 3))])
    ir.check(g)
    with pytest.raises(IRError, match=match):
        ir.check(ir.Graph(mutate(g)))


def test_check_rejects_bad_outputs_and_empty():
    with pytest.raises(IRError, match="no nodes"):
        ir.check(ir.Graph([]))
    g = [N(0, "input", (), (2,), {"index": 0})]
    with pytest.raises(IRError, match="not a node id"):
        ir.check(ir.Graph(g, outputs=(1,)))
    with pytest.raises(IRError, match="non-empty"):
        ir.check(ir.Graph(g, outputs=()))


def test_check_payload_shapes_and_keys():
    g, p = _mlp()
    bad = ir.Payload(dict(p))
    bad[(1, "weight")] = np.ones((4, 4))
    with pytest.raises(IRError, match=r"node 1 \(linear\).*input features 3"):
        ir.check(g, bad)
    missing = ir.Payload({k: v for k, v in p.items() if k != (3, "bias")})
    with pytest.raises(IRError, match=r"\(3, 'bias'\) is missing"):
        ir.check(g, missing)
    extra = ir.Payload(dict(p))
    extra[(2, "weight")] = np.ones(3)
    with pytest.raises(IRError, match=r"\(2, 'weight'\) belongs to no node"):
        ir.check(g, extra)
    c = ir.Graph([N(0, "const", (), (3,))])
    with pytest.raises(IRError, match="payload value has shape"):
        ir.check(c, ir.Payload({(0, "value"): np.ones(2)}))


def test_check_wraps_bad_attrs():
    g = ir.Graph([N(0, "input", (), (2,), {"index": 0}), N(1, "scale", (0,), (2,), {})])
    with pytest.raises(IRError, match=r"node 1 \(scale\): bad attributes"):
        ir.check(g)
    g = ir.Graph([N(0, "input", (), (2,), {"index": 0}), N(1, "scale", (0,), (2,), {"c": "x"})])
    with pytest.raises(IRError, match="scale"):
        ir.check(g)


# ---- evaluate -------------------------------------------------------------------------------

def test_evaluate_mlp_matches_numpy():
    g, p = _mlp()
    x = np.random.default_rng(1).normal(size=(5, 3))
    vals = ir.evaluate(g, p, x)
    h = np.maximum(x @ p[(1, "weight")].T + p[(1, "bias")], 0)
    z = h @ p[(3, "weight")].T + p[(3, "bias")]
    want = z - z.max(-1, keepdims=True) - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))
    np.testing.assert_allclose(vals[4], want, rtol=1e-12, atol=1e-12)
    assert all(v.dtype == np.float64 for v in vals)
    assert len(vals) == len(g.nodes)


def test_evaluate_float32_payload_is_cast_to_float64():
    g = ir.Graph([N(0, "input", (), (3,), {"index": 0}), N(1, "param", (), (3,)),
                  N(2, "mul", (0, 1), (3,))])
    p = ir.Payload({(1, "value"): np.array([0.1, 0.2, 0.3], np.float32)})
    y = ir.evaluate(g, p, np.array([1, 2, 3]))[-1]
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, np.array([1, 2, 3]) * np.float32([0.1, 0.2, 0.3]).astype(np.float64))


def test_evaluate_log_domain_error():
    g = ir.Graph([N(0, "input", (), (3,), {"index": 0}), N(1, "log", (0,), (3,))])
    np.testing.assert_allclose(ir.evaluate(g, None, np.array([1.0, np.e, 2.0]))[1], [0, 1, np.log(2)])
    for bad in ([1.0, 0.0, 2.0], [1.0, -3.0, 2.0]):
        with pytest.raises(DomainError, match=r"node 1 \(log\)"):
            ir.evaluate(g, None, np.array(bad))


def test_evaluate_input_errors():
    g = ir.Graph([N(0, "input", (), (3,), {"index": 0}), N(1, "neg", (0,), (3,))])
    with pytest.raises(ShapeError, match="takes 1 input"):
        ir.evaluate(g, None)
    with pytest.raises(ShapeError, match=r"input 0 \(node 0\) has shape \(4,\)"):
        ir.evaluate(g, None, np.ones(4))


def test_evaluate_input_order_follows_index():
    g = ir.Graph([N(0, "input", (), (2,), {"index": 1}), N(1, "input", (), (2,), {"index": 0}),
                  N(2, "sub", (0, 1), (2,))])
    y = ir.evaluate(g, None, np.array([1.0, 1.0]), np.array([5.0, 7.0]))[-1]
    np.testing.assert_array_equal(y, [4.0, 6.0])


@PROP
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 10))
def test_random_graphs_check_and_evaluate_like_the_fast_kernels(seed, n):
    # The interpreter (spec functions) against an independent implementation of every node: the
    # CPU kernels in float64, run by a compiled program, node by node. A compiled program computes
    # in one dtype, where a cast is a pass-through: the rounding of a cast is the meaning's alone.
    rg = random_graph(np.random.default_rng(seed), n, kinds=generable_kinds(exclude=("cast",)))
    shapes = ir.check(rg.graph, rg.payload)
    assert shapes == [tuple(np.shape(v)) for v in rg.values]
    with np.errstate(all="ignore"):
        vals = ir.evaluate(rg.graph, rg.payload, *rg.inputs)
        fast = ir.compile(rg.graph, rg.payload, dtype=np.float64).run_all(*rg.inputs)
    for i, (a, b) in enumerate(zip(vals, fast)):
        scale = float(np.nanmax(np.abs(a), initial=0.0))
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-9 * max(scale, 1.0),
                                   err_msg=f"node {i} ({rg.graph.nodes[i].kind})")


def _mutations(rg, rng):
    g = rg.graph
    nodes = list(g.nodes)
    ops = [n for n in nodes if n.kind not in ir.IR_KINDS]
    n = ops[int(rng.integers(len(ops)))]
    fwd = list(n.parents) or [0]
    fwd[int(rng.integers(len(fwd)))] = n.id + int(rng.integers(0, 3))
    yield "forward parent", n.replace(parents=tuple(fwd))
    info = ir.KINDS[n.kind]
    yield "arity", n.replace(parents=() if info.arity < 0 else n.parents + (0,))
    s = n.out_shape
    yield "shape", n.replace(out_shape=s + (2,) if rng.random() < 0.5 or not s else
                             s[:-1] + (s[-1] + 1,))


@PROP
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 8))
def test_random_graph_mutations_are_rejected(seed, n):
    rng = np.random.default_rng(seed)
    rg = random_graph(rng, n)
    for what, bad in _mutations(rg, rng):
        nodes = list(rg.graph.nodes)
        nodes[bad.id] = bad
        with pytest.raises(IRError, match=f"node {bad.id} "):
            ir.check(ir.Graph(nodes, rg.graph.outputs), rg.payload)


# ---- save / load ----------------------------------------------------------------------------

@PROP
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 10))
def test_random_graphs_round_trip(seed, n, tmp_path):
    rg = random_graph(np.random.default_rng(seed), n)
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "g.json"   # tmp_path is shared by all examples
    ir.save(rg.graph, rg.payload, path)
    g2, p2 = ir.load(path)
    assert g2 == rg.graph and p2 == rg.payload
    for a, b in zip(g2.nodes, rg.graph.nodes):
        assert attrs_equal(a.attrs, b.attrs)
    assert os.path.exists(str(path) + ".safetensors") == bool(len(rg.payload))


EXOTIC = {
    "index": 0,
    "t": (1, (2, 3), ()), "l": [1, [2.5, None]], "none": None, "b": True, "s": "héllo",
    "f": -0.0, "inf": float("inf"), "ninf": -float("inf"), "nan": float("nan"), "big": 2 ** 70,
    "sl": (slice(1, None, -2), Ellipsis, None, slice(None)), "d": {"a": (1,), "b": [slice(0, 3)]},
    "ints": np.array([[0, 5], [2, 1]], np.int64), "mask": np.array([True, False, True]),
    "u8": np.array([255, 0], np.uint8), "f32": np.array([np.nan, 1.5, -np.inf], np.float32),
    "empty": np.zeros((0, 3), np.int32), "zd": np.array(7, np.int16),
    "np_int": np.int64(3), "np_f": np.float32(0.1), "np_b": np.bool_(True), "dt": np.dtype("float32"),
}


def test_exotic_attrs_round_trip_exactly(tmp_path):
    g = ir.Graph([N(0, "input", (), (2,), dict(EXOTIC)), N(1, "exp", (0,), (2,))])
    ir.save(g, None, tmp_path / "x.json")
    g2, p2 = ir.load(tmp_path / "x.json")
    assert len(p2) == 0 and not os.path.exists(str(tmp_path / "x.json") + ".safetensors")
    a = g2.nodes[0].attrs
    assert list(a) == list(EXOTIC)
    for k, v in EXOTIC.items():
        assert attrs_equal(a[k], v), k
    assert type(a["t"]) is tuple and type(a["l"]) is list and type(a["l"][1]) is list
    assert a["sl"][1] is Ellipsis and a["sl"][0] == slice(1, None, -2)
    assert str(a["f"]) == "-0.0" and a["big"] == 2 ** 70


def test_getitem_and_index_attrs_round_trip(tmp_path):
    if "getitem" not in ir.KINDS:
        pytest.skip("getitem is not registered yet")
    idx = (Ellipsis, None, slice(None, None, 2), 1)
    g = ir.Graph([N(0, "input", (), (2, 3, 4), {"index": 0}),
                  N(1, "getitem", (0,), SPEC["getitem"].shape((2, 3, 4), index=idx), {"index": idx})])
    ir.save(g, None, tmp_path / "g.json")
    g2, _ = ir.load(tmp_path / "g.json")
    assert g2 == g
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(ir.evaluate(g2, None, x)[1], x[idx])


def test_save_rejects_unstorable_attr(tmp_path):
    g = ir.Graph([N(0, "input", (), (2,), {"index": 0, "obj": object()})])
    with pytest.raises(IRError, match="obj"):
        ir.save(g, None, tmp_path / "g.json")


def test_save_checks_graph(tmp_path):
    g = ir.Graph([N(0, "input", (), (2,), {"index": 0}), N(1, "exp", (0,), (3,))])
    with pytest.raises(IRError, match="declared shape"):
        ir.save(g, None, tmp_path / "g.json")
    assert not os.path.exists(tmp_path / "g.json")


def test_missing_safetensors_is_backend_error(tmp_path, monkeypatch):
    import sys
    g, p = _mlp()
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    monkeypatch.setitem(sys.modules, "safetensors", None)
    with pytest.raises(BackendUnavailableError, match="pip install safetensors"):
        ir.save(g, p, tmp_path / "m.json")


def test_load_detects_swapped_payload(tmp_path):
    g, p = _mlp()
    ir.save(g, p, tmp_path / "a.json")
    p2 = ir.Payload({k: v + 1 for k, v in p.items()})
    ir.save(g, p2, tmp_path / "b.json")
    os.replace(tmp_path / "b.json.safetensors", tmp_path / "a.json.safetensors")
    with pytest.raises(IRError, match="SHA-256"):
        ir.load(tmp_path / "a.json")
    os.remove(tmp_path / "a.json.safetensors")
    with pytest.raises(IRError, match="cannot read the payload file"):
        ir.load(tmp_path / "a.json")


def test_load_wrong_version(tmp_path):
    g, p = _mlp()
    ir.save(g, p, tmp_path / "a.json")
    text = (tmp_path / "a.json").read_text().replace("torchlean.ir.v1", "torchlean.ir.v2")
    (tmp_path / "a.json").write_text(text)
    with pytest.raises(IRError, match="unsupported format 'torchlean.ir.v2'"):
        ir.load(tmp_path / "a.json")


# ---- CLI functions --------------------------------------------------------------------------

def test_cli_check_run(tmp_path, capsys):
    g, p = _mlp()
    path = tmp_path / "m.json"
    ir.save(g, p, path)
    assert ir_check(path) == 0
    out = capsys.readouterr().out
    assert "ok:" in out and "5 nodes" in out and "output %4 (log_softmax): shape (5, 2)" in out
    x = np.random.default_rng(2).normal(size=(5, 3))
    np.save(tmp_path / "x.npy", x)
    assert ir_run(path, [str(tmp_path / "x.npy")], "cpu") == 0
    out = capsys.readouterr().out
    assert "output %4: shape (5, 2) float32" in out  # compiled for the device, float32
    assert ir_run(path, [], "cpu") == 1
    assert "takes 1 input" in capsys.readouterr().err
    assert ir_check(tmp_path / "nope.json") == 1
    assert "cannot read" in capsys.readouterr().err


def test_cli_run_other_device_without_compiler(tmp_path, capsys):
    g, p = _mlp()
    ir.save(g, p, tmp_path / "m.json")
    np.save(tmp_path / "x.npy", np.zeros((5, 3)))
    if callable(getattr(ir, "compile", None)):
        pytest.skip("ir.compile exists; device runs are tested with it")
    assert ir_run(tmp_path / "m.json", [str(tmp_path / "x.npy")], "cuda") == 2
    assert "ir.compile" in capsys.readouterr().err


def test_cli_convert(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w]))
    onnx.save(m, str(tmp_path / "m.onnx"))
    assert ir_convert(tmp_path / "m.onnx", tmp_path / "m.json") == 0
    assert "linear x1" in capsys.readouterr().out
    g, p = ir.load(tmp_path / "m.json")
    assert [n.kind for n in g.nodes] == ["input", "linear", "relu"]
    np.testing.assert_array_equal(ir.evaluate(g, p, np.ones((2, 3)))[-1], np.full((2, 4), 3.0))
    (tmp_path / "bad.onnx").write_bytes(b"\x00garbage")
    assert ir_convert(tmp_path / "bad.onnx", tmp_path / "b.json") == 1
