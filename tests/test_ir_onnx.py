"""ONNX import: models built with onnx.helper run through onnxruntime and through the
IR's meaning (ir.evaluate), compared at 1e-4 relative. Cases whose IR kinds are
not registered in this build are skipped."""

import math

import numpy as np
import pytest

from torchlean import ir
from torchlean.errors import IRError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F = TensorProto.FLOAT


def make_model(nodes, inputs, outputs, inits=None, opset=17):
    """``inputs``: {name: shape}; ``outputs``: names; ``inits``: {name: array}."""
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, F, list(s)) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, F, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def need(*kinds):
    missing = [k for k in kinds if k not in ir.KINDS]
    if missing:
        pytest.skip(f"IR kinds {missing} are not registered yet")


def compare(m, feeds, rtol=1e-4):
    """Run ``m`` in onnxruntime and through ir.evaluate; return the IR graph."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    g, p = ir.from_onnx(m)
    ir.check(g, p)
    vals = ir.evaluate(g, p, *[feeds[i.name] for i in m.graph.input if i.name in feeds])
    assert len(g.outputs) == len(want)
    for o, w in zip(g.outputs, want):
        got = vals[o]
        assert got.shape == w.shape, (got.shape, w.shape)
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        np.testing.assert_allclose(got, w, rtol=rtol, atol=rtol * scale)
    return g


def rnd(*shape, lo=-1.0, hi=1.0, seed=0):
    return np.random.default_rng(seed + len(shape)).uniform(lo, hi, size=shape).astype(np.float32)


def kinds_of(g):
    return [n.kind for n in g.nodes]


# ---- elementwise and linear ----------------------------------------------------------------

@pytest.mark.parametrize("op,kind", [("Neg", "neg"), ("Exp", "exp"), ("Abs", "abs"), ("Relu", "relu"),
                                     ("Sigmoid", "sigmoid"), ("Tanh", "tanh"), ("Sqrt", "sqrt"),
                                     ("Log", "log"), ("Sin", "sin"), ("Reciprocal", "inv"), ("Erf", "erf")])
def test_unary(op, kind):
    need(kind)
    lo = 0.1 if op in ("Sqrt", "Log", "Reciprocal") else -2.0
    m = make_model([helper.make_node(op, ["x"], ["y"])], {"x": (3, 4)}, ["y"])
    g = compare(m, {"x": rnd(3, 4, lo=lo, hi=2.0)})
    assert kinds_of(g) == ["input", kind]


@pytest.mark.parametrize("op,kind", [("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("Div", "div")])
def test_binary_broadcast_with_constant(op, kind):
    need(kind)
    m = make_model([helper.make_node(op, ["x", "c"], ["t"]), helper.make_node(op, ["t", "z"], ["y"])],
                   {"x": (2, 3, 4), "z": (3, 1)}, ["y"], {"c": rnd(4, lo=0.5, hi=2.0)})
    g = compare(m, {"x": rnd(2, 3, 4), "z": rnd(3, 1, lo=0.5, hi=2.0)})
    assert kinds_of(g).count(kind) == 2 and "const" in kinds_of(g)


def test_mul_by_scalar_is_scale():
    need("scale")
    m = make_model([helper.make_node("Mul", ["c", "x"], ["y"])], {"x": (3,)}, ["y"],
                   {"c": np.array(2.5, np.float32)})
    g = compare(m, {"x": rnd(3)})
    assert kinds_of(g) == ["input", "scale"] and g.nodes[1].attrs == {"c": 2.5}


@pytest.mark.parametrize("e", [2.0, 0.5, 3.0])
def test_pow_constant_exponent(e):
    m = make_model([helper.make_node("Pow", ["x", "e"], ["y"])], {"x": (5,)}, ["y"],
                   {"e": np.array(e, np.float32)})
    g = compare(m, {"x": rnd(5, lo=0.1, hi=2.0)})
    assert g.nodes[-1].kind == "pow" and g.nodes[-1].attrs == {"exponent": e}


def test_pow_runtime_exponent_rejected():
    m = make_model([helper.make_node("Pow", ["x", "e"], ["y"], name="p")], {"x": (5,), "e": ()}, ["y"])
    with pytest.raises(IRError, match=r"'p' \(Pow\).*exponent of Pow must be a constant"):
        ir.from_onnx(m)


@pytest.mark.parametrize("alpha", [0.1, 0.0, 2.0])
def test_leaky_relu(alpha):
    m = make_model([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=alpha)], {"x": (4, 5)}, ["y"])
    g = compare(m, {"x": rnd(4, 5, lo=-3, hi=3)})
    assert kinds_of(g)[1:] == ["scale", "maximum" if alpha <= 1 else "minimum"]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_op(approximate):
    m = make_model([helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)], {"x": (3, 7)},
                   ["y"], opset=20)
    g = compare(m, {"x": rnd(3, 7, lo=-3, hi=3)})
    assert g.nodes[-1].kind == "gelu" and g.nodes[-1].attrs == {"approximate": approximate}


def _erf_gelu(variant):
    c = {"s2": np.array(math.sqrt(2), np.float32), "r2": np.array(1 / math.sqrt(2), np.float32),
         "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32)}
    pre = [helper.make_node("Relu", ["x0"], ["x"])]
    if variant == "a":        # (x * (1 + erf(x / sqrt2))) * 0.5   (the PyTorch export)
        body = [helper.make_node("Div", ["x", "s2"], ["t"]), helper.make_node("Erf", ["t"], ["e"]),
                helper.make_node("Add", ["e", "one"], ["u"]), helper.make_node("Mul", ["x", "u"], ["v"]),
                helper.make_node("Mul", ["v", "half"], ["y0"])]
    elif variant == "b":      # x * ((1 + erf(x * 1/sqrt2)) * 0.5)
        body = [helper.make_node("Mul", ["r2", "x"], ["t"]), helper.make_node("Erf", ["t"], ["e"]),
                helper.make_node("Add", ["one", "e"], ["u"]), helper.make_node("Mul", ["u", "half"], ["w"]),
                helper.make_node("Mul", ["w", "x"], ["y0"])]
    else:                     # (0.5 * x) * (1 + erf(x / sqrt2))
        body = [helper.make_node("Mul", ["half", "x"], ["h"]), helper.make_node("Div", ["x", "s2"], ["t"]),
                helper.make_node("Erf", ["t"], ["e"]), helper.make_node("Add", ["e", "one"], ["u"]),
                helper.make_node("Mul", ["h", "u"], ["y0"])]
    post = [helper.make_node("Neg", ["y0"], ["y"])]
    return make_model(pre + body + post, {"x0": (4, 6)}, ["y"], c)


@pytest.mark.parametrize("variant", ["a", "b", "c"])
def test_erf_gelu_pattern_becomes_gelu(variant):
    g = compare(_erf_gelu(variant), {"x0": rnd(4, 6, lo=-3, hi=3)})
    assert kinds_of(g) == ["input", "relu", "gelu", "neg"]


def test_erf_outside_pattern_is_the_erf_op():
    m = make_model([helper.make_node("Erf", ["x"], ["y"], name="lonely")], {"x": (3,)}, ["y"])
    g = compare(m, {"x": rnd(3, lo=-3, hi=3)})
    assert kinds_of(g) == ["input", "erf"]


def test_erf_pattern_with_shared_intermediate_is_not_fused():
    m = _erf_gelu("a")
    m.graph.output.append(helper.make_tensor_value_info("u", F, None))
    g = compare(m, {"x0": rnd(4, 6, lo=-3, hi=3)})
    assert "gelu" not in kinds_of(g) and "erf" in kinds_of(g)


@pytest.mark.parametrize("mul_in", [["x", "s"], ["s", "x"]])
def test_x_times_sigmoid_x_becomes_silu(mul_in):
    m = make_model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", mul_in, ["y0"]),
                    helper.make_node("Neg", ["y0"], ["y"])], {"x": (4, 6)}, ["y"])
    g = compare(m, {"x": rnd(4, 6, lo=-9, hi=9)})
    assert kinds_of(g) == ["input", "silu", "neg"]


def test_sigmoid_read_twice_is_not_fused_into_silu():
    m = make_model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"]),
                    helper.make_node("Add", ["s", "y"], ["z"])], {"x": (3, 5)}, ["z"])
    g = compare(m, {"x": rnd(3, 5, lo=-6, hi=6)})
    assert "silu" not in kinds_of(g) and "sigmoid" in kinds_of(g)


@pytest.mark.parametrize("trans_b,alpha,beta,bias_shape", [
    (1, 1.0, 1.0, (4,)), (0, 0.5, 2.0, (1, 4)), (1, 1.0, 1.0, None), (0, 1.0, 1.0, (3, 4))])
def test_gemm_constant_weight(trans_b, alpha, beta, bias_shape):
    need("linear", "linear_nobias")
    w = rnd(4, 5) if trans_b else rnd(5, 4)
    inits = {"w": w}
    ins = ["x", "w"]
    if bias_shape is not None:
        inits["c"] = rnd(*bias_shape, seed=3)
        ins.append("c")
    m = make_model([helper.make_node("Gemm", ins, ["y"], transB=trans_b, alpha=alpha, beta=beta)],
                   {"x": (3, 5)}, ["y"], inits)
    g = compare(m, {"x": rnd(3, 5)})
    assert kinds_of(g)[1] in ("linear", "linear_nobias")


def test_gemm_runtime_operands():
    m = make_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=2.0)],
                   {"a": (5, 3), "b": (4, 5), "c": (4,)}, ["y"])
    g = compare(m, {"a": rnd(5, 3), "b": rnd(4, 5), "c": rnd(4)})
    assert "matmul" in kinds_of(g) and "transpose" in kinds_of(g)


def test_matmul_batched_with_constant():
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": (2, 3, 5)}, ["y"], {"w": rnd(5, 4)})
    g = compare(m, {"x": rnd(2, 3, 5)})
    assert kinds_of(g) == ["input", "const", "matmul"]


# ---- softmax, reductions --------------------------------------------------------------------

@pytest.mark.parametrize("op,kind", [("Softmax", "softmax"), ("LogSoftmax", "log_softmax")])
@pytest.mark.parametrize("axis,opset", [(-1, 13), (1, 13), (1, 11), (2, 11)])
def test_softmax(op, kind, axis, opset):
    need(kind)
    m = make_model([helper.make_node(op, ["x"], ["y"], axis=axis)], {"x": (2, 3, 4)}, ["y"], opset=opset)
    g = compare(m, {"x": rnd(2, 3, 4, lo=-3, hi=3)})
    assert kind in kinds_of(g)


@pytest.mark.parametrize("op,kind,opset,axes,keep", [
    ("ReduceMean", "reduce_mean", 13, [1], 1), ("ReduceMean", "reduce_mean", 18, [-1, 0], 0),
    ("ReduceSum", "reduce_sum", 13, [2], 0), ("ReduceSum", "reduce_sum", 11, [0, 2], 1),
    ("ReduceSum", "reduce_sum", 13, None, 0)])
def test_reduce(op, kind, opset, axes, keep):
    need(kind)
    axes_as_input = axes is not None and ((op == "ReduceSum" and opset >= 13) or opset >= 18)
    inits, ins, kw = {}, ["x"], {"keepdims": keep}
    if axes_as_input:
        inits["ax"] = np.array(axes, np.int64)
        ins.append("ax")
    elif axes is not None:
        kw["axes"] = axes
    m = make_model([helper.make_node(op, ins, ["y"], **kw)], {"x": (2, 3, 4)}, ["y"], inits, opset=opset)
    g = compare(m, {"x": rnd(2, 3, 4)})
    assert g.nodes[-1].kind == kind


def test_global_average_pool():
    need("reduce_mean")
    m = make_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])], {"x": (2, 3, 4, 5)}, ["y"])
    g = compare(m, {"x": rnd(2, 3, 4, 5)})
    assert g.nodes[-1].attrs == {"axis": (2, 3), "keepdim": True}


# ---- shape ops ------------------------------------------------------------------------------

def test_reshape_flatten_transpose():
    need("reshape", "permute")
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["a"]),
                    helper.make_node("Transpose", ["a"], ["b"], perm=[2, 0, 1]),
                    helper.make_node("Flatten", ["b"], ["c"], axis=2),
                    helper.make_node("Transpose", ["c"], ["y"])],
                   {"x": (2, 3, 4)}, ["y"], {"s": np.array([0, -1, 2], np.int64)})
    g = compare(m, {"x": rnd(2, 3, 4)})
    assert g.nodes[1].attrs == {"shape": (2, 6, 2)}


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze(opset):
    need("squeeze", "unsqueeze")
    if opset >= 13:
        nodes = [helper.make_node("Unsqueeze", ["x", "a1"], ["u"]), helper.make_node("Squeeze", ["u", "a2"], ["y"])]
        inits = {"a1": np.array([0, -1], np.int64), "a2": np.array([0, 2], np.int64)}
    else:
        nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0, -1]),
                 helper.make_node("Squeeze", ["u"], ["y"], axes=[0, 2])]
        inits = {}
    m = make_model(nodes, {"x": (3, 1, 4)}, ["y"], inits, opset=opset)
    compare(m, {"x": rnd(3, 1, 4)})


def test_concat_with_constant():
    need("concat")
    m = make_model([helper.make_node("Concat", ["x", "c", "x"], ["y"], axis=-1)], {"x": (2, 3)}, ["y"],
                   {"c": rnd(2, 2)})
    g = compare(m, {"x": rnd(2, 3)})
    assert g.nodes[-1].kind == "concat" and len(g.nodes[-1].parents) == 3


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1], [3], [0], [1]), ([0, -3], [100, -1], [1, 2], [2, 1]), ([-1], [-100], [2], [-1]),
    ([3], [0], [1], [-2])])
def test_slice(starts, ends, axes, steps):
    need("slice", "index_select")
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    m = make_model([helper.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"])], {"x": (4, 5, 6)}, ["y"],
                   {"s": i64(starts), "e": i64(ends), "a": i64(axes), "p": i64(steps)})
    compare(m, {"x": rnd(4, 5, 6)})


@pytest.mark.parametrize("idx,axis", [([2, 0, -1], 1), (1, 0), ([[0, 1], [2, 2]], 2), (-2, 2)])
def test_gather_runtime_data(idx, axis):
    need("index_select", "select")
    m = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)], {"x": (3, 4, 5)}, ["y"],
                   {"i": np.array(idx, np.int64)})
    compare(m, {"x": rnd(3, 4, 5)})


def test_gather_embedding():
    need("embedding")
    table = rnd(10, 4)
    m = make_model([helper.make_node("Gather", ["w", "i"], ["e"]), helper.make_node("Add", ["e", "x"], ["y"])],
                   {"x": (2, 3, 4)}, ["y"], {"w": table, "i": np.array([[1, 9, 0], [-1, 3, 3]], np.int64)})
    g = compare(m, {"x": rnd(2, 3, 4)})
    emb = [n for n in g.nodes if n.kind == "embedding"]
    assert len(emb) == 1 and emb[0].parents == ()


def test_shape_arithmetic_is_folded():
    need("reshape")
    # The PyTorch-export idiom: Shape -> Gather -> Unsqueeze -> Concat -> Reshape, all constant.
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
             helper.make_node("Concat", ["b1", "minus1"], ["shp"], axis=0),
             helper.make_node("Reshape", ["x", "shp"], ["y"])]
    m = make_model(nodes, {"x": (2, 3, 4)}, ["y"],
                   {"zero": np.array(0, np.int64), "ax0": np.array([0], np.int64),
                    "minus1": np.array([-1], np.int64)}, opset=13)
    g = compare(m, {"x": rnd(2, 3, 4)})
    assert kinds_of(g) == ["input", "reshape"] and g.nodes[1].attrs == {"shape": (2, 12)}


def test_identity_dropout_constant():
    const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(rnd(3), "cv"))
    m = make_model([const, helper.make_node("Identity", ["x"], ["a"]),
                    helper.make_node("Dropout", ["a", "r"], ["b"]),
                    helper.make_node("Add", ["b", "c"], ["y"])],
                   {"x": (2, 3)}, ["y"], {"r": np.array(0.3, np.float32)}, opset=13)
    g = compare(m, {"x": rnd(2, 3)})
    assert kinds_of(g) == ["input", "const", "add"]


def test_dropout_training_rejected():
    m = make_model([helper.make_node("Dropout", ["x", "r", "t"], ["y"])], {"x": (2, 3)}, ["y"],
                   {"r": np.array(0.3, np.float32), "t": np.array(True)}, opset=13)
    with pytest.raises(IRError, match="training mode"):
        ir.from_onnx(m)


def test_multiple_outputs_and_constant_output():
    m = make_model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
                    helper.make_node("Identity", ["c"], ["k"])],
                   {"x": (3,)}, ["b", "a", "k"], {"c": rnd(2)})
    g = compare(m, {"x": rnd(3)})
    assert len(g.outputs) == 3 and g.nodes[g.outputs[2]].kind == "const"


# ---- layers (registered by the conv/pool/norm family) --------------------------------------

@pytest.mark.parametrize("kw,bias", [
    ({}, True), ({"strides": [2, 1], "pads": [1, 0, 1, 0]}, True),
    ({"dilations": [1, 2], "group": 2, "pads": [1, 1, 1, 1]}, False)])
def test_conv2d(kw, bias):
    need("conv")
    groups = kw.get("group", 1)
    inits = {"w": rnd(6, 4 // groups, 3, 3)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rnd(6, seed=5)
        ins.append("b")
    m = make_model([helper.make_node("Conv", ins, ["y"], kernel_shape=[3, 3], **kw)],
                   {"x": (2, 4, 7, 8)}, ["y"], inits)
    g = compare(m, {"x": rnd(2, 4, 7, 8)})
    c = g.nodes[1]
    assert c.kind == "conv" and set(c.attrs) == {"stride", "padding", "dilation", "groups"}


def test_conv1d_and_transpose():
    need("conv", "conv_transpose")
    m = make_model([helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1]),
                    helper.make_node("ConvTranspose", ["h", "wt", "bt"], ["y"], strides=[2], pads=[1, 1])],
                   {"x": (2, 3, 9)}, ["y"], {"w": rnd(4, 3, 3), "wt": rnd(4, 2, 3, seed=1), "bt": rnd(2, seed=2)})
    compare(m, {"x": rnd(2, 3, 9)})


@pytest.mark.parametrize("op,pads", [("Conv", [0, 1, 1, 1]), ("Conv", [2, 0, 0, 1]), ("MaxPool", [0, 0, 1, 1]),
                                     ("MaxPool", [1, 0, 0, 2])])
def test_asymmetric_pads_become_cells(op, pads):
    """SAME padding and pre-opset-10 ceil-mode pooling as exporters write them: the excess of one side is
    written as zero (Conv) or -inf (MaxPool) cells."""
    x = rnd(1, 2, 5, 6)
    if op == "Conv":
        m = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=pads)], {"x": x.shape}, ["y"],
                       {"w": rnd(3, 2, 3, 3)})
    else:
        m = make_model([helper.make_node("MaxPool", ["x"], ["y"], pads=pads, kernel_shape=[3, 3], strides=[2, 2])],
                       {"x": x.shape}, ["y"])
    compare(m, {"x": x})


def test_asymmetric_pads_of_the_other_ops_are_named():
    m = make_model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[0, 1, 1, 1],
                                     count_include_pad=1, name="p1")], {"x": (1, 1, 5, 5)}, ["y"])
    with pytest.raises(IRError, match=r"'p1' \(AveragePool\): asymmetric pads"):
        ir.from_onnx(m)


@pytest.mark.parametrize("op,kind,kw", [
    ("MaxPool", "max_pool", {"kernel_shape": [2, 2]}),
    ("MaxPool", "max_pool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", "avg_pool", {"kernel_shape": [2, 3], "strides": [1, 2]}),
    ("AveragePool", "avg_pool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1})])
def test_pool(op, kind, kw):
    need(kind)
    m = make_model([helper.make_node(op, ["x"], ["y"], **kw)], {"x": (2, 3, 7, 8)}, ["y"])
    g = compare(m, {"x": rnd(2, 3, 7, 8)})
    assert g.nodes[1].kind == kind and set(g.nodes[1].attrs) == {"kernel_size", "stride", "padding"}


def test_max_pool_dilated():
    need("max_pool")
    m = make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 1],
                                     pads=[1, 0, 1, 0])], {"x": (1, 2, 7, 6)}, ["y"])
    g = compare(m, {"x": rnd(1, 2, 7, 6)})
    assert g.nodes[1].attrs["dilation"] == (2, 1)


def test_avg_pool_excluding_padding_rejected():
    m = make_model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                   {"x": (1, 1, 5, 5)}, ["y"])
    with pytest.raises(IRError, match="count_include_pad"):
        ir.from_onnx(m)


def test_batch_norm_and_layer_norm():
    need("batch_norm_eval", "layer_norm")
    m = make_model([helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["h"], epsilon=1e-3),
                    helper.make_node("LayerNormalization", ["h", "ls", "lb"], ["y"], axis=-2, epsilon=1e-5)],
                   {"x": (2, 3, 4, 5)}, ["y"],
                   {"s": rnd(3, seed=1), "b": rnd(3, seed=2), "mu": rnd(3, seed=3),
                    "var": rnd(3, lo=0.5, hi=2.0, seed=4), "ls": rnd(4, 5, seed=5), "lb": rnd(4, 5, seed=6)})
    g = compare(m, {"x": rnd(2, 3, 4, 5)})
    assert kinds_of(g) == ["input", "batch_norm_eval", "layer_norm"]


# ---- errors and options ---------------------------------------------------------------------

def test_unsupported_op_named():
    m = make_model([helper.make_node("Hardmax", ["x"], ["y"], name="hm")], {"x": (2, 3)}, ["y"])
    with pytest.raises(IRError, match=r"'hm' \(Hardmax\): unsupported ONNX op 'Hardmax'"):
        ir.from_onnx(m)


def test_unsupported_attribute_named():
    m = make_model([helper.make_node("Softmax", ["x"], ["y"], name="sm", bogus=3)], {"x": (2, 3)}, ["y"])
    with pytest.raises(IRError, match=r"'sm' \(Softmax\): unsupported attribute 'bogus'"):
        ir.from_onnx(m)


def test_dynamic_dims_need_input_shapes():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", F, ["batch", 3])],
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g)
    with pytest.raises(IRError, match="'batch' is not static"):
        ir.from_onnx(m)
    g2, _ = ir.from_onnx(m, input_shapes={"x": (5, 3)})
    assert g2.nodes[0].out_shape == (5, 3) and g2.nodes[1].out_shape == (5, 3)


def test_from_path_and_bytes(tmp_path):
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": (2,)}, ["y"])
    onnx.save(m, str(tmp_path / "m.onnx"))
    assert ir.from_onnx(tmp_path / "m.onnx")[0] == ir.from_onnx(m.SerializeToString())[0]
    with pytest.raises(IRError, match="cannot read"):
        ir.from_onnx(tmp_path / "missing.onnx")


def test_mlp_round_trip_through_save(tmp_path):
    need("linear", "softmax")
    m = make_model([helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
                    helper.make_node("Relu", ["h"], ["r"]),
                    helper.make_node("Gemm", ["r", "w2", "b2"], ["z"], transB=1),
                    helper.make_node("Softmax", ["z"], ["y"], axis=-1)],
                   {"x": (8, 6)}, ["y"], {"w1": rnd(16, 6), "b1": rnd(16), "w2": rnd(3, 16, seed=7), "b2": rnd(3)})
    g, p = ir.from_onnx(m)
    ir.save(g, p, tmp_path / "mlp.json")
    g2, p2 = ir.load(tmp_path / "mlp.json")
    assert g2 == g and p2 == p
    x = rnd(8, 6)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(ir.evaluate(g2, p2, x)[-1], want, rtol=1e-4, atol=1e-6)


# ---- activations, shape builders, Split, Where, Range, Tile (compositions of IR kinds) -------------

ACTS = [("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}), ("Elu", {}),
        ("Elu", {"alpha": 0.5}), ("Selu", {}), ("Celu", {"alpha": 2.0}), ("Mish", {}), ("Softsign", {})]


@pytest.mark.parametrize("op,attrs", ACTS, ids=[f"{o}-{a}" for o, a in ACTS])
def test_activation_compositions(op, attrs):
    x = np.linspace(-6, 6, 60, dtype=np.float32).reshape(3, 20)
    x[0, :3] = [0.0, -3.0, 3.0]                      # kinks of the hard functions
    opset = 18 if op == "Mish" else 17               # Mish is an ONNX op from opset 18
    compare(make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": (3, 20)}, ["y"], opset=opset), {"x": x})


def test_prelu_with_per_channel_slope():
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    slope = np.array([[0.1], [0.5], [-0.2]], dtype=np.float32)
    compare(make_model([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": (2, 3, 4)}, ["y"], {"s": slope}),
            {"x": x})


@pytest.mark.parametrize("opset,lo,hi", [(17, -0.5, 0.7), (17, None, 0.2), (17, -0.1, None), (6, -0.5, 0.5)])
def test_clip(opset, lo, hi):
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    if opset < 11:
        node = helper.make_node("Clip", ["x"], ["y"], min=lo, max=hi)
        inits = {}
    else:
        names = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""]
        node = helper.make_node("Clip", names, ["y"])
        inits = {k: np.float32(v) for k, v in (("lo", lo), ("hi", hi)) if v is not None}
    compare(make_model([node], {"x": (3, 4)}, ["y"], inits, opset=opset), {"x": x})


def test_expand_constant_of_shape_range_and_tile():
    x = np.random.default_rng(1).standard_normal((3, 1)).astype(np.float32)
    value = helper.make_tensor("v", F, [1], [0.25])
    nodes = [helper.make_node("Expand", ["x", "shape"], ["e"]),                        # (3, 1) -> (2, 3, 4)
             helper.make_node("Shape", ["e"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=value),          # folded from the shape
             helper.make_node("Add", ["e", "c"], ["y"]),
             helper.make_node("Range", ["r0", "r1", "r2"], ["r"]),
             helper.make_node("Add", ["y", "r"], ["z"]),
             helper.make_node("Tile", ["z", "reps"], ["out"])]
    m = make_model(nodes, {"x": (3, 1)}, ["out"],
                   {"shape": np.array([2, 3, 4], np.int64), "r0": np.float32(0), "r1": np.float32(2),
                    "r2": np.float32(0.5), "reps": np.array([1, 2, 1], np.int64)})
    g = compare(m, {"x": x})
    kinds = [n.kind for n in g.nodes]
    assert kinds.count("broadcast_to") == 1 and kinds.count("concat") == 1   # Expand, Tile; the rest folded


@pytest.mark.parametrize("opset,form", [(11, "attr"), (13, "input"), (13, "equal"), (18, "num_outputs")])
def test_split_forms(opset, form):
    x = np.arange(2 * 7 * 3, dtype=np.float32).reshape(2, 7, 3)
    outs = ["a", "b", "c"] if form != "equal" else ["a", "b"]
    if form == "equal":
        x = x[:, :6]
        node = helper.make_node("Split", ["x"], outs, axis=1)
        inits = {}
    elif form == "attr":
        node = helper.make_node("Split", ["x"], outs, axis=1, split=[2, 4, 1])
        inits = {}
    elif form == "input":
        node = helper.make_node("Split", ["x", "sizes"], outs, axis=-2)
        inits = {"sizes": np.array([3, 3, 1], np.int64)}
    else:
        node = helper.make_node("Split", ["x"], outs, axis=1, num_outputs=3)     # 3, 3, 1
        inits = {}
    nodes = [node] + [helper.make_node("Relu", [o], [o + "_r"]) for o in outs]
    compare(make_model(nodes, {"x": x.shape}, [o + "_r" for o in outs], inits, opset=opset), {"x": x})


def test_split_sizes_that_do_not_cut_the_axis_are_named():
    m = make_model([helper.make_node("Split", ["x"], ["a", "b"], axis=0, split=[1, 1])], {"x": (3, 2)}, ["a", "b"],
                   opset=11)
    with pytest.raises(IRError, match="split sizes \\[1, 1\\] do not cut axis 0 of length 3"):
        ir.from_onnx(m)


def test_where_with_a_constant_mask_as_exporters_write_causal_attention():
    x = np.random.default_rng(2).standard_normal((2, 4, 4)).astype(np.float32)
    mask = np.tril(np.ones((4, 4), bool))
    cond = helper.make_tensor("m", TensorProto.BOOL, [4, 4], mask.reshape(-1).tolist())
    nodes = [helper.make_node("Constant", [], ["mask"], value=cond),
             helper.make_node("Where", ["mask", "x", "ninf"], ["y"]),
             helper.make_node("Softmax", ["y"], ["p"], axis=-1)]
    compare(make_model(nodes, {"x": (2, 4, 4)}, ["p"], {"ninf": np.float32(-1e9)}), {"x": x})


def test_where_with_a_run_time_condition_is_named():
    nodes = [helper.make_node("Greater", ["x", "zero"], ["c"]), helper.make_node("Where", ["c", "x", "zero"], ["y"])]
    m = make_model(nodes, {"x": (3,)}, ["y"], {"zero": np.float32(0)})
    with pytest.raises(IRError, match="Greater|condition of Where must be a constant"):
        ir.from_onnx(m)


@pytest.mark.parametrize("kw", [dict(kernel_shape=[3, 3], strides=[2, 2]),                   # squeezenet's
                                dict(kernel_shape=[2, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                                dict(kernel_shape=[3, 3], strides=[3, 2], dilations=[2, 1]),
                                dict(kernel_shape=[2, 2], strides=[2, 2])])                   # no tail needed
def test_max_pool_ceil_mode(kw):
    x = np.random.default_rng(4).standard_normal((1, 2, 8, 9)).astype(np.float32)
    compare(make_model([helper.make_node("MaxPool", ["x"], ["y"], ceil_mode=1, **kw)], {"x": x.shape}, ["y"]),
            {"x": x})


def test_average_pool_ceil_mode_is_named():
    m = make_model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3], strides=[2], ceil_mode=1)],
                   {"x": (1, 1, 8)}, ["y"])
    with pytest.raises(IRError, match="ceil_mode=1 is supported for MaxPool only"):
        ir.from_onnx(m)


def _lstm_model(op="LSTM", lens=None, direction="forward", **attrs):
    rng = np.random.default_rng(6)
    T, N, I, H = 5, 3, 4, 3
    g = 4 if op == "LSTM" else 3
    nd = 2 if direction == "bidirectional" else 1
    inits = {"W": rng.standard_normal((nd, g * H, I)).astype(np.float32) * 0.5,
             "R": rng.standard_normal((nd, g * H, H)).astype(np.float32) * 0.5,
             "B": rng.standard_normal((nd, 2 * g * H)).astype(np.float32) * 0.1}
    ins = ["x", "W", "R", "B"]
    if lens is not None:
        inits["L"] = np.array(lens, np.int32)
        ins.append("L")
    if op == "GRU":
        attrs.setdefault("linear_before_reset", 1)
    node = helper.make_node(op, ins, ["Y", "Yh"], hidden_size=H, direction=direction, **attrs)
    return make_model([node], {"x": (T, N, I)}, ["Y", "Yh"], inits), rng.standard_normal((T, N, I)).astype(np.float32)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction,lens", [("forward", None), ("reverse", None), ("bidirectional", None),
                                            ("forward", [5, 2, 4])])
def test_recurrent_layers(op, direction, lens):
    m, x = _lstm_model(op, lens, direction)
    compare(m, {"x": x})


@pytest.mark.parametrize("op,attrs,match", [("LSTM", {"clip": 3.0}, "clip"),
                                            ("LSTM", {"activations": ["Sigmoid", "Tanh", "Relu"]}, "activations"),
                                            ("GRU", {"linear_before_reset": 0}, "linear_before_reset=0")])
def test_recurrent_layer_forms_not_supported_are_named(op, attrs, match):
    m, _ = _lstm_model(op, **attrs)
    with pytest.raises(IRError, match=match):
        ir.from_onnx(m)


def test_reverse_recurrence_over_shorter_sequences_is_named():
    m, _ = _lstm_model("LSTM", [5, 2, 4], "reverse")
    with pytest.raises(IRError, match="sequence_lens shorter than the sequence with a reverse direction"):
        ir.from_onnx(m)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
@pytest.mark.parametrize("opset,axes,keep", [(17, [1], 1), (17, [0, 2], 0), (18, [-1], 1), (18, None, 0)])
def test_composed_reductions(op, opset, axes, keep):
    x = np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float32) * 3
    kw = {"keepdims": keep}
    ins, inits = ["x"], {}
    if axes is not None and opset >= 18:
        ins.append("axes")
        inits["axes"] = np.array(axes, np.int64)
    elif axes is not None:
        kw["axes"] = axes
    compare(make_model([helper.make_node(op, ins, ["y"], **kw)], {"x": x.shape}, ["y"], inits, opset=opset), {"x": x})


def test_argmax_argmin_cumsum_global_max_pool_instance_norm_trilu():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["n"], epsilon=1e-3),
             helper.make_node("CumSum", ["n", "ax"], ["c"], reverse=1, exclusive=1),
             helper.make_node("Trilu", ["c", "k"], ["t"], upper=0),
             helper.make_node("GlobalMaxPool", ["t"], ["g"]),
             helper.make_node("Add", ["t", "g"], ["y"])]
    inits = {"s": rng.standard_normal(3).astype(np.float32), "b": rng.standard_normal(3).astype(np.float32),
             "ax": np.array(2, np.int64), "k": np.array(1, np.int64)}
    compare(make_model(nodes, {"x": x.shape}, ["y"], inits), {"x": x})
    for op in ("ArgMax", "ArgMin"):
        m = make_model([helper.make_node(op, ["x"], ["i"], axis=-1, keepdims=0)], {"x": x.shape}, [], {})
        m.graph.output.append(helper.make_tensor_value_info("i", TensorProto.INT64, None))
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        g, p = ir.from_onnx(m)
        np.testing.assert_array_equal(ir.evaluate(g, p, x)[g.outputs[0]], sess.run(None, {"x": x})[0])


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("keep", [0, 1])
def test_max_and_min_over_several_axes(op, keep):
    x = np.random.default_rng(9).standard_normal((2, 3, 4)).astype(np.float32)
    m = make_model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)], {"x": x.shape}, ["y"],
                   {"axes": np.array([0, 2], np.int64)}, opset=18)
    compare(m, {"x": x})


RESIZES = [dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),   # torch's
           dict(mode="nearest"),                                                                     # ONNX's defaults
           dict(mode="nearest", coordinate_transformation_mode="align_corners", nearest_mode="round_prefer_ceil"),
           dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),                 # bilinear
           dict(mode="linear", coordinate_transformation_mode="align_corners"),
           dict(mode="linear", coordinate_transformation_mode="asymmetric"),
           dict(mode="cubic", coordinate_transformation_mode="half_pixel"),                          # bicubic
           dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
           dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"),              # opset 19
           dict(mode="nearest", coordinate_transformation_mode="half_pixel_symmetric")]


@pytest.mark.parametrize("how", ["scales", "sizes"])
@pytest.mark.parametrize("attrs", RESIZES, ids=[f"{a['mode']}-{a.get('coordinate_transformation_mode', 'hp')}"
                                                 f"{'-a' if 'cubic_coeff_a' in a else ''}" for a in RESIZES])
def test_resize(attrs, how):
    x = np.random.default_rng(10).standard_normal((1, 2, 5, 6)).astype(np.float32)
    if how == "scales":
        inits = {"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 2.0, 1.5], np.float32)}
        node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], **attrs)
    else:
        inits = {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                 "sizes": np.array([1, 2, 3, 11], np.int64)}      # down on one axis, up on the other
        node = helper.make_node("Resize", ["x", "roi", "scales", "sizes"], ["y"], **attrs)
    opset = 19 if attrs.get("coordinate_transformation_mode") == "half_pixel_symmetric" else 17
    compare(make_model([node], {"x": x.shape}, ["y"], inits, opset=opset), {"x": x})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 0, 1, 2, 0, 0, 2, 1], [0, 1, 0, 0, 0, 0, 3, 0], [0, 0, -1, 1, 0, 0, 1, -2]])
def test_pad(mode, pads):
    x = np.random.default_rng(11).standard_normal((1, 2, 4, 5)).astype(np.float32)
    inits = {"pads": np.array(pads, np.int64), "v": np.float32(0.5)}
    ins = ["x", "pads", "v"] if mode == "constant" else ["x", "pads"]
    compare(make_model([helper.make_node("Pad", ins, ["y"], mode=mode)], {"x": x.shape}, ["y"], inits,
                       opset=19 if mode == "wrap" else 17), {"x": x})     # wrap: opset 19


@pytest.mark.parametrize("opset,per", [(18, "group"), (21, "channel")])
def test_group_normalization(opset, per):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    n = 3 if per == "group" else 6
    inits = {"s": rng.standard_normal(n).astype(np.float32), "b": rng.standard_normal(n).astype(np.float32)}
    m = make_model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-3)],
                   {"x": x.shape}, ["y"], inits, opset=opset)
    compare(m, {"x": x})


def test_gather_elements_and_constant_masks_from_comparisons():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[0, 3, -1, 2], [1, 1, 0, 0], [2, -4, 3, 1]], np.int64)
    pos = np.arange(4, dtype=np.float32)
    nodes = [helper.make_node("GatherElements", ["x", "i"], ["g"], axis=1),
             helper.make_node("Less", ["pos", "two"], ["lt"]),           # a constant mask, folded
             helper.make_node("GreaterOrEqual", ["pos", "one"], ["ge"]),
             helper.make_node("And", ["lt", "ge"], ["both"]),
             helper.make_node("Not", ["both"], ["mask"]),
             helper.make_node("Where", ["mask", "g", "zero"], ["y"])]
    m = make_model(nodes, {"x": x.shape}, ["y"], {"i": idx, "pos": pos, "two": np.float32(2), "one": np.float32(1),
                                                  "zero": np.float32(0)})
    compare(m, {"x": x})


def test_boolean_logic_on_run_time_values_is_named():
    nodes = [helper.make_node("Greater", ["x", "zero"], ["c"]), helper.make_node("Not", ["c"], ["y"])]
    m = make_model(nodes, {"x": (3,)}, ["y"], {"zero": np.float32(0)})
    with pytest.raises(IRError, match="boolean logic on run-time values is not supported"):
        ir.from_onnx(m)


EINSUMS = [("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),        # attention scores
           ("bhqk,bhkd->bqhd", [(2, 3, 4, 6), (2, 3, 6, 5)]),        # attention output, transposed
           ("ij,jk->ik", [(3, 4), (4, 5)]), ("i,j->ij", [(3,), (4,)]), ("bi,bi->b", [(3, 4), (3, 4)]),
           ("ij,kj->", [(3, 4), (2, 4)]), ("abc,cd->dba", [(2, 3, 4), (4, 5)]), ("ijk->kji", [(2, 3, 4)]),
           ("ijk->j", [(2, 3, 4)]), ("bij,jk->bik", [(2, 3, 4), (4, 5)])]


@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum(eq, shapes):
    rng = np.random.default_rng(14)
    names = ["x", "w"][:len(shapes)]
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)}
    compare(make_model([helper.make_node("Einsum", names, ["y"], equation=eq)], dict(zip(names, shapes)), ["y"]),
            feeds)


@pytest.mark.parametrize("eq,match", [("ii->i", "diagonal"), ("...ij,jk->...ik", "ellipses")])
def test_einsum_forms_not_supported_are_named(eq, match):
    m = make_model([helper.make_node("Einsum", ["x"] if "," not in eq else ["x", "w"], ["y"], equation=eq)],
                   {"x": (3, 3)} if "," not in eq else {"x": (3, 3), "w": (3, 2)}, ["y"])
    with pytest.raises(IRError, match=match):
        ir.from_onnx(m)


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/hostname"])
def test_external_data_outside_the_models_folder_is_refused(tmp_path, location):
    """A model whose initializer points outside its own folder is refused with a clean error, and
    nothing outside the folder is read."""
    (tmp_path / "secret.bin").write_bytes(np.arange(2, dtype=np.float32).tobytes())
    folder = tmp_path / "models"
    folder.mkdir()
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    for k, v in (("location", location), ("offset", "0"), ("length", "8")):
        e = w.external_data.add()
        e.key, e.value = k, v
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], {"x": (2,)}, ["y"])
    m.graph.initializer.append(w)
    path = folder / "m.onnx"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(IRError, match="cannot read the ONNX model"):
        ir.from_onnx(str(path))


@pytest.mark.parametrize("idx", [np.array([[0, 1], [2, 0]]), np.array([[[1], [0]]]), np.array([[-1, -2, 0]])])
def test_gather_nd(idx):
    x = np.random.default_rng(15).standard_normal((3, 2, 4)).astype(np.float32)
    m = make_model([helper.make_node("GatherND", ["x", "i"], ["y"])], {"x": x.shape}, ["y"], {"i": idx.astype(np.int64)})
    compare(m, {"x": x})


@pytest.mark.parametrize("idx", [np.array([[1], [0], [-1]]),                 # batch entries pick rows
                                 np.array([[[1, 3], [0, 0]], [[1, 1], [0, 2]], [[0, 3], [1, 0]]]),
                                 np.zeros((3, 0))])                             # empty tuples: whole slices
def test_gather_nd_with_batch_dims(idx):
    x = np.random.default_rng(15).standard_normal((3, 2, 4)).astype(np.float32)
    m = make_model([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)], {"x": x.shape}, ["y"],
                   {"i": idx.astype(np.int64)})
    compare(m, {"x": x})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):
    rng = np.random.default_rng(16)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([[2], [0], [2], [2]] if reduction != "none" else [[2], [0]], np.int64)   # repeats combine
    upd = rng.standard_normal((len(idx), 3)).astype(np.float32)
    m = make_model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)], {"x": x.shape},
                   ["y"], {"i": idx, "u": upd}, opset=18)
    compare(m, {"x": x})


@pytest.mark.parametrize("opset,axes,keep", [(17, [1], 1), (17, [0, 2], 0), (18, None, 1)])
def test_reduce_prod(opset, axes, keep):
    x = np.random.default_rng(17).uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    kw, ins, inits = {"keepdims": keep}, ["x"], {}
    if axes is not None and opset >= 18:
        ins.append("axes")
        inits["axes"] = np.array(axes, np.int64)
    elif axes is not None:
        kw["axes"] = axes
    compare(make_model([helper.make_node("ReduceProd", ins, ["y"], **kw)], {"x": x.shape}, ["y"], inits, opset=opset),
            {"x": x})


# ---- If and Loop, folded where the condition and the trip count are constants --------------------

def _branch(name, op, w):
    """A subgraph computing ``op(x, w)`` from the outer scope's ``x`` (outer names are visible)."""
    return helper.make_graph([helper.make_node(op, ["x", f"{name}_w"], [f"{name}_y"])], name, [],
                             [helper.make_tensor_value_info(f"{name}_y", F, None)],
                             [numpy_helper.from_array(np.asarray(w, np.float32), f"{name}_w")])


@pytest.mark.parametrize("flag", [True, False])
def test_if_with_a_constant_condition_is_its_branch(flag):
    c = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(flag)))
    node = helper.make_node("If", ["c"], ["y"], then_branch=_branch("then", "Add", rnd(3)),
                            else_branch=_branch("else", "Mul", rnd(3, seed=4)))
    relu = helper.make_node("Relu", ["y"], ["z"])
    g = compare(make_model([c, node, relu], {"x": (2, 3)}, ["z"]), {"x": rnd(2, 3, seed=1)})
    assert ("add" in kinds_of(g)) == flag and ("mul" in kinds_of(g)) != flag


def test_if_with_a_run_time_condition_names_the_node():
    cond = helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0)
    pos = helper.make_node("Greater", ["s", "zero"], ["c"])
    node = helper.make_node("If", ["c"], ["y"], name="branchy", then_branch=_branch("then", "Add", rnd(3)),
                            else_branch=_branch("else", "Mul", rnd(3)))
    m = make_model([cond, pos, node], {"x": (2, 3)}, ["y"], {"zero": np.float32(0.0)})
    with pytest.raises(IRError, match="branchy.*If.*computed at run time"):
        ir.from_onnx(m)


def test_loop_with_a_constant_trip_count_is_unrolled():
    """Three iterations of acc = acc * 0.5 + x, with a scan output of each acc (as a for loop exports)."""
    I64, B = TensorProto.INT64, TensorProto.BOOL
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["acc_in", "half"], ["h"]),
         helper.make_node("Add", ["h", "x"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("acc_in", F, [2, 3])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("acc_out", F, [2, 3]),
         helper.make_tensor_value_info("scan", F, [2, 3])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    nodes = [helper.make_node("Constant", [], ["m"], value=numpy_helper.from_array(np.array(3, np.int64))),
             helper.make_node("Constant", [], ["t"], value=numpy_helper.from_array(np.array(True))),
             helper.make_node("Loop", ["m", "t", "acc0"], ["acc", "accs"], body=body)]
    g = compare(make_model(nodes, {"x": (2, 3)}, ["acc", "accs"], {"acc0": rnd(2, 3, seed=3)}),
                {"x": rnd(2, 3, seed=2)})
    assert kinds_of(g).count("add") == 3


def test_loop_with_a_run_time_trip_count_names_the_node():
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["co"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                             [helper.make_tensor_value_info("co", TensorProto.BOOL, [])])
    nodes = [helper.make_node("ArgMax", ["x"], ["m"], axis=1, keepdims=0),      # an int64 computed at run time
             helper.make_node("Loop", ["m", ""], [], name="spin", body=body),
             helper.make_node("Relu", ["x"], ["y"])]
    with pytest.raises(IRError, match="spin.*Loop.*trip count M of Loop is computed at run time"):
        ir.from_onnx(make_model(nodes, {"x": (1, 3)}, ["y"]))


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_resize_half_pixel_symmetric_with_a_fractional_output(mode):
    """Scales whose output sizes round down (5 x 1.3 = 6.5 -> 6, 6 x 1.7 = 10.2 -> 10): the symmetric
    mode shifts the sampling grid to the centre, which plain half_pixel does not."""
    x = np.random.default_rng(13).standard_normal((1, 2, 5, 6)).astype(np.float32)
    inits = {"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 1.3, 1.7], np.float32)}
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode=mode,
                            coordinate_transformation_mode="half_pixel_symmetric")
    compare(make_model([node], {"x": x.shape}, ["y"], inits, opset=19), {"x": x})


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 0.6, 0.4], [1, 1, 0.5, 1.5]])   # down on both; down and up
def test_resize_antialias(mode, scales):
    """antialias=1: the filter stretched by 1 / scale when downscaling (opset 18)."""
    x = np.random.default_rng(14).standard_normal((1, 2, 9, 10)).astype(np.float32)
    inits = {"roi": np.zeros(0, np.float32), "scales": np.array(scales, np.float32)}
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode=mode, antialias=1)
    compare(make_model([node], {"x": x.shape}, ["y"], inits, opset=18), {"x": x})


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("how", ["scales", "sizes"])
def test_resize_tf_crop_and_resize(mode, how):
    """A region of interest, part of it outside the input: those outputs take extrapolation_value."""
    x = np.random.default_rng(15).standard_normal((1, 2, 6, 7)).astype(np.float32)
    roi = np.array([0, 0, 0.2, -0.3, 1, 1, 0.9, 0.8], np.float32)
    inits = {"roi": roi}
    if how == "scales":
        inits["scales"] = np.array([1, 1, 1.5, 0.9], np.float32)
        ins = ["x", "roi", "scales"]
    else:
        inits.update(scales=np.zeros(0, np.float32), sizes=np.array([1, 2, 5, 8], np.int64))
        ins = ["x", "roi", "scales", "sizes"]
    node = helper.make_node("Resize", ins, ["y"], mode=mode, coordinate_transformation_mode="tf_crop_and_resize",
                            extrapolation_value=-7.0)
    compare(make_model([node], {"x": x.shape}, ["y"], inits, opset=18), {"x": x})
