"""ONNX import: an ONNX model becomes an IR graph and a payload.

Each ONNX node is translated by one function of the table :data:`CONVERTERS`
(keyed by ONNX op type) into IR nodes of the spec's kinds. Constants
(initializers, ``Constant`` nodes, and any node whose inputs are all constant)
are folded on the host; those still needed at run time become ``const`` nodes,
and weights of layers (Gemm, Conv, normalization, embedding Gather) go to the
payload of parameterised nodes. Shapes must be static (or given through
``input_shapes``). An ONNX op or attribute that has no exact IR meaning raises
:class:`~torchlean.errors.IRError` naming it and the ONNX node.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict

import numpy as np

from ..errors import BackendUnavailableError, IRError, TorchLeanError
from ..spec import SPEC
from .graph import Graph, Node, Payload, index_inputs, kind_info, spec_args
from .infer import check

__all__ = ["from_onnx", "CONVERTERS"]


def _onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        raise BackendUnavailableError(
            "ONNX import needs the onnx package: pip install onnx  (or pip install 'torchlean[onnx]')"
        ) from None
    return onnx, helper, numpy_helper


class _Ref(int):
    """A value computed at run time: the id of the IR node that produces it."""


class _Builder:
    """Appends IR nodes, inferring shapes with the spec rules, or folds constants."""

    def __init__(self):
        self.nodes: list = []
        self.shapes: list = []
        self.payload = Payload()
        self._const_ids: dict = {}
        self.where = ""          # the ONNX node being translated, for messages
        self.n_outputs = 1       # how many outputs that node declares

    def fail(self, msg):
        raise IRError(f"from_onnx: {self.where}: {msg}")

    def shape(self, v) -> tuple:
        return self.shapes[v] if isinstance(v, _Ref) else tuple(np.shape(v))

    def constant(self, v, what: str) -> np.ndarray:
        if isinstance(v, _Ref):
            self.fail(f"{what} must be a constant (an initializer or Constant), "
                      f"but it is computed at run time")
        return np.asarray(v)

    def node(self, v) -> _Ref:
        """``v`` as a node id, materialising a constant as a ``const`` node (once per array)."""
        if isinstance(v, _Ref):
            return v
        key = id(v)
        if key not in self._const_ids:
            a = np.asarray(v)
            if a.dtype.kind != "f":
                a = a.astype(np.float64)
            i = self._append("const", (), tuple(a.shape), {})
            self.payload[(i, "value")] = a
            self._const_ids[key] = (i, v)          # keep v alive so id() stays unique
        return self._const_ids[key][0]

    def _append(self, kind, parents, shape, attrs) -> _Ref:
        i = len(self.nodes)
        self.nodes.append(Node(i, kind, tuple(int(p) for p in parents), tuple(shape), attrs))
        self.shapes.append(tuple(shape))
        return _Ref(i)

    def add(self, kind: str, *inputs, params=None, **attrs):
        """Apply IR kind ``kind`` to ``inputs`` (node refs or constants).

        ``params`` maps the kind's payload names to arrays. When every input is a
        constant the spec forward runs now and a constant comes back.
        """
        info = kind_info(kind)
        if info is None:
            self.fail(f"maps to the IR kind {kind!r}, which is not registered in this build")
        params = dict(params or {})
        if set(params) != set(info.params):
            raise AssertionError(f"{kind}: params {sorted(params)} vs {info.params}")
        fake = Node(-1, kind)
        if not any(isinstance(v, _Ref) for v in inputs) and not params:
            try:
                return np.asarray(SPEC[kind].forward(*[np.asarray(v) for v in inputs], **attrs))
            except Exception:  # not foldable on these dtypes: emit the node instead
                pass
        refs = [self.node(v) for v in inputs]
        in_shapes = spec_args(fake, [self.shapes[r] for r in refs],
                              {(-1, k): tuple(a.shape) for k, a in params.items()})
        try:
            shape = tuple(int(d) for d in SPEC[kind].shape(*in_shapes, **attrs))
        except TorchLeanError as e:
            self.fail(f"as IR {kind}: {e}")
        r = self._append(kind, refs, shape, attrs)
        for k, a in params.items():
            self.payload[(int(r), k)] = a
        return r


# ---- helpers --------------------------------------------------------------------------------

def _ints(v) -> tuple:
    return tuple(int(x) for x in np.asarray(v).reshape(-1))


def _scalar(b: _Builder, v, what) -> float:
    a = b.constant(v, what)
    if a.size != 1:
        b.fail(f"{what} must be a single number, got shape {a.shape}")
    return float(a.reshape(()))


def _norm_axis(b, axis, rank, what="axis"):
    if not -rank <= axis < max(rank, 1):
        b.fail(f"{what} {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def _spatial(b, attrs, d, name, default):
    v = attrs.get(name)
    if v is None:
        return (default,) * d
    v = tuple(int(x) for x in v)
    if len(v) != d:
        b.fail(f"attribute {name}={list(v)} needs {d} entries (one per spatial axis)")
    return v


def _sym_pads(b, attrs, d):
    pads = attrs.get("pads")
    if pads is None:
        return (0,) * d
    pads = tuple(int(p) for p in pads)
    if len(pads) != 2 * d:
        b.fail(f"attribute pads={list(pads)} needs {2 * d} entries")
    if pads[:d] != pads[d:]:
        b.fail(f"asymmetric pads {list(pads)} (begin {list(pads[:d])}, end {list(pads[d:])}) "
               f"are not supported; the IR pads each axis symmetrically")
    return pads[:d]


def _pads_with_cells(b, x, attrs, d, fill):
    """``(x, pads)``: ONNX ``pads`` (begin and end per spatial axis) as the IR's symmetric padding, the
    excess on the longer side written into ``x`` as ``fill`` cells (zeros for a convolution, -inf for a
    max pool: exporters write asymmetric pads for SAME padding and for ceil-mode pooling before opset 10)."""
    pads = attrs.get("pads")
    if pads is None:
        return x, (0,) * d
    pads = tuple(int(p) for p in pads)
    if len(pads) != 2 * d:
        b.fail(f"attribute pads={list(pads)} needs {2 * d} entries")
    if any(p < 0 for p in pads):
        b.fail(f"negative pads {list(pads)} are not supported")
    begin, end = pads[:d], pads[d:]
    for i in range(d):
        extra = end[i] - begin[i]
        if extra:
            ax = 2 + i
            s = b.shape(x)
            cells = np.full(s[:ax] + (abs(extra),) + s[ax + 1:], fill, dtype=np.float32)
            x = b.add("concat", *((x, cells) if extra > 0 else (cells, x)), axis=ax)
    return x, tuple(min(p, q) for p, q in zip(begin, end))


def _auto_pad(b, attrs):
    ap = attrs.get("auto_pad", "NOTSET")
    if isinstance(ap, bytes):
        ap = ap.decode()
    if ap not in ("NOTSET", "VALID"):
        b.fail(f"attribute auto_pad={ap!r} is not supported (give explicit pads)")


def _opt(inputs, k):
    return inputs[k] if len(inputs) > k and inputs[k] is not None else None


# ---- converters: (builder, inputs, attrs, opset) -> output value(s) --------------------------

def _binary(kind):
    return lambda b, xs, a, opset: b.add(kind, xs[0], xs[1])


def _unary(kind):
    return lambda b, xs, a, opset: b.add(kind, xs[0])


def _mul(b, xs, a, opset):
    x, y = xs
    # x * c with a one-entry constant c is the spec's scale (same shape as x).
    for u, v in ((x, y), (y, x)):
        if isinstance(u, _Ref) and not isinstance(v, _Ref) and np.size(v) == 1 \
                and np.ndim(v) <= len(b.shape(u)):
            return b.add("scale", u, c=float(np.asarray(v).reshape(())))
    return b.add("mul", x, y)


def _pow(b, xs, a, opset):
    return b.add("pow", xs[0], exponent=_scalar(b, xs[1], "the exponent of Pow"))


def _leaky_relu(b, xs, a, opset):
    alpha = float(a.get("alpha", 0.01))
    x = xs[0]
    # For alpha <= 1, leaky_relu(x) = max(x, alpha * x); for alpha > 1 it is the min.
    return b.add("maximum" if alpha <= 1 else "minimum", x, b.add("scale", x, c=alpha))


def _gelu(b, xs, a, opset):
    ap = a.get("approximate", "none")
    return b.add("gelu", xs[0], approximate=ap.decode() if isinstance(ap, bytes) else ap)


def _softmax(kind):
    def conv(b, xs, a, opset):
        x = xs[0]
        s = b.shape(x)
        r = len(s)
        if opset >= 13:
            return b.add(kind, x, axis=_norm_axis(b, int(a.get("axis", -1)), r))
        # Before opset 13, (log)softmax acts on the input coerced to 2-D at `axis`.
        ax = _norm_axis(b, int(a.get("axis", 1)), r)
        if ax == r - 1:
            return b.add(kind, x, axis=r - 1)
        flat = b.add("reshape", x, shape=(math.prod(s[:ax]), math.prod(s[ax:])))
        return b.add("reshape", b.add(kind, flat, axis=1), shape=s)
    return conv


def _matmul(b, xs, a, opset):
    return b.add("matmul", xs[0], xs[1])


def _gemm(b, xs, a, opset):
    A, B, C = xs[0], xs[1], _opt(xs, 2)
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    if int(a.get("transA", 0)):
        A = b.add("transpose", A, dim0=0, dim1=1)
    tb = int(a.get("transB", 0))
    if not isinstance(B, _Ref):
        w = np.asarray(B)
        w = w if tb else w.T
        if len(b.shape(A)) != 2 or w.ndim != 2:
            b.fail(f"Gemm needs 2-D operands, got {b.shape(A)} and {np.shape(B)}")
        out = w.shape[0]
        bias = None
        if C is None or beta == 0:
            bias = np.zeros(out, dtype=w.dtype)
        elif not isinstance(C, _Ref):
            c = np.asarray(C)
            if c.size in (1, out) and (c.ndim <= 1 or (c.ndim == 2 and c.shape[0] == 1)):
                bias = np.broadcast_to(c.reshape(-1), (out,)) * beta
        weight = (w.astype(np.float64) * alpha).astype(w.dtype) if alpha != 1 else np.ascontiguousarray(w)
        if bias is not None:
            return b.add("linear", A, params={"weight": weight,
                                              "bias": np.asarray(bias, dtype=w.dtype).copy()})
        y = b.add("linear_nobias", A, params={"weight": weight})
        return b.add("add", y, C if beta == 1 else b.add("scale", C, c=beta))
    if tb:
        B = b.add("transpose", B, dim0=0, dim1=1)
    y = b.add("matmul", A, B)
    if alpha != 1:
        y = b.add("scale", y, c=alpha)
    if C is not None and beta != 0:
        y = b.add("add", y, C if beta == 1 else b.add("scale", C, c=beta))
    return y


def _reshape(b, xs, a, opset):
    x = xs[0]
    s = b.shape(x)
    target = _ints(b.constant(xs[1], "the shape input of Reshape")) if opset >= 5 \
        else tuple(int(d) for d in a.get("shape", ()))
    allow_zero = int(a.get("allowzero", 0))
    out = []
    for k, d in enumerate(target):
        if d == 0 and not allow_zero:
            if k >= len(s):
                b.fail(f"shape {list(target)} copies axis {k} of an input of rank {len(s)}")
            d = s[k]
        out.append(d)
    if out.count(-1) > 1 or any(d < -1 for d in out):
        b.fail(f"invalid target shape {list(target)}")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        total = math.prod(s)
        if known == 0 or total % known:
            b.fail(f"cannot infer -1 in shape {list(target)} for an input of shape {s}")
        out[out.index(-1)] = total // known
    return b.add("reshape", x, shape=tuple(out))


def _flatten(b, xs, a, opset):
    s = b.shape(xs[0])
    ax = int(a.get("axis", 1))
    if not -len(s) <= ax <= len(s):
        b.fail(f"axis {ax} out of range for rank {len(s)}")
    ax = ax + len(s) if ax < 0 else ax
    return b.add("reshape", xs[0], shape=(math.prod(s[:ax]), math.prod(s[ax:])))


def _transpose(b, xs, a, opset):
    r = len(b.shape(xs[0]))
    perm = tuple(int(p) for p in a.get("perm", range(r - 1, -1, -1)))
    return b.add("permute", xs[0], dims=perm)


def _axes(b, xs, a, opset, since):
    """Axes from the attribute (older opsets) or the second input (opset >= ``since``)."""
    if opset >= since:
        v = _opt(xs, 1)
        return None if v is None else _ints(b.constant(v, "the axes input"))
    return None if a.get("axes") is None else tuple(int(x) for x in a["axes"])


def _squeeze(b, xs, a, opset):
    x = xs[0]
    r = len(b.shape(x))
    axes = _axes(b, xs, a, opset, 13)
    if axes is None:
        return b.add("squeeze", x)
    for ax in sorted({_norm_axis(b, ax, r) for ax in axes}, reverse=True):
        x = b.add("squeeze", x, dim=ax)
    return x


def _unsqueeze(b, xs, a, opset):
    x = xs[0]
    axes = _axes(b, xs, a, opset, 13)
    if axes is None:
        b.fail("Unsqueeze needs axes")
    r = len(b.shape(x)) + len(axes)
    norm = sorted({_norm_axis(b, ax, r) for ax in axes})
    if len(norm) != len(axes):
        b.fail(f"repeated axes {list(axes)}")
    for ax in norm:
        x = b.add("unsqueeze", x, dim=ax)
    return x


def _concat(b, xs, a, opset):
    if "axis" not in a:
        b.fail("Concat needs an axis attribute")
    r = len(b.shape(xs[0]))
    return b.add("concat", *xs, axis=_norm_axis(b, int(a["axis"]), r))


def _slice(b, xs, a, opset):
    x = xs[0]
    s = b.shape(x)
    if opset >= 10:
        starts = _ints(b.constant(xs[1], "starts of Slice"))
        ends = _ints(b.constant(xs[2], "ends of Slice"))
        axes = _opt(xs, 3)
        axes = tuple(range(len(starts))) if axes is None else _ints(b.constant(axes, "axes of Slice"))
        steps = _opt(xs, 4)
        steps = (1,) * len(starts) if steps is None else _ints(b.constant(steps, "steps of Slice"))
    else:
        starts, ends = tuple(a.get("starts", ())), tuple(a.get("ends", ()))
        axes = tuple(a.get("axes", range(len(starts))))
        steps = (1,) * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        b.fail("starts, ends, axes and steps of Slice differ in length")
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        ax = _norm_axis(b, ax, len(s))
        d = b.shape(x)[ax]
        if sp == 0:
            b.fail("Slice step 0")
        st = st + d if st < 0 else st
        en = en + d if en < 0 else en
        if sp > 0:
            st, en = min(max(st, 0), d), min(max(en, 0), d)
            if (st, en, sp) == (0, d, 1):
                continue
            x = b.add("slice", x, axis=ax, start=st, stop=max(en, st), step=sp)
        else:
            st, en = min(max(st, 0), d - 1), min(max(en, -1), d - 1)
            # A reversed slice is a gather of explicit indices (slice/getitem take steps >= 1).
            x = b.add("index_select", x, axis=ax, indices=np.arange(st, en, sp, dtype=np.int64))
    return x


def _gather_runtime(b, data, idx, ax):
    """Gather along ``ax`` at indices that are a value of the graph: ``take_along`` of the data at
    the indices broadcast over the other axes, reshaped to ONNX's ``data[:ax] + idx + data[ax+1:]``."""
    s, q = b.shape(data), b.shape(idx)
    m = int(np.prod(q))
    col = b.add("reshape", idx, shape=(1,) * ax + (m,) + (1,) * (len(s) - ax - 1))
    full = b.add("broadcast_to", col, shape=s[:ax] + (m,) + s[ax + 1:])
    y = b.add("take_along", data, full, axis=ax)
    return b.add("reshape", y, shape=s[:ax] + tuple(q) + s[ax + 1:])


def _gather(b, xs, a, opset):
    data, idx = xs
    if isinstance(idx, _Ref):
        return _gather_runtime(b, data, idx, _norm_axis(b, int(a.get("axis", 0)), len(b.shape(data))))
    ind = b.constant(idx, "the indices of Gather")
    if ind.dtype.kind not in "iu":
        b.fail(f"indices of dtype {ind.dtype}")
    s = b.shape(data)
    ax = _norm_axis(b, int(a.get("axis", 0)), len(s))
    d = s[ax]
    ind = ind.astype(np.int64)
    if np.any((ind < -d) | (ind >= d)):
        b.fail(f"indices out of range [-{d}, {d}) on axis {ax}")
    ind = np.where(ind < 0, ind + d, ind)          # ONNX counts negative indices from the end
    if not isinstance(data, _Ref):
        return np.take(np.asarray(data), ind, axis=ax)
    if ind.ndim == 0:
        return b.add("select", data, axis=ax, index=int(ind))
    y = b.add("index_select", data, axis=ax, indices=ind.reshape(-1))
    if ind.ndim != 1:
        y = b.add("reshape", y, shape=s[:ax] + ind.shape + s[ax + 1:])
    return y


def _gather_embedding(b, xs, a, opset):
    data, idx = xs
    # A constant 2-D table looked up along axis 0 by constant ids is an embedding.
    if not isinstance(data, _Ref) and not isinstance(idx, _Ref) and np.ndim(data) == 2 \
            and int(a.get("axis", 0)) in (0, -2) and "embedding" in SPEC \
            and np.asarray(data).dtype.kind == "f" and np.ndim(idx) >= 1:
        ind = np.asarray(idx).astype(np.int64)
        n = np.shape(data)[0]
        if np.any((ind < -n) | (ind >= n)):
            b.fail(f"indices out of range [-{n}, {n})")
        ind = np.where(ind < 0, ind + n, ind)
        return b.add("embedding", params={"weight": np.asarray(data)}, indices=ind)
    return _gather(b, xs, a, opset)


def _identity(b, xs, a, opset):
    return xs[0]


class _Outputs(tuple):
    """The several outputs of one ONNX node (Split), in order."""


def _plus(b, x, c: float):
    return b.add("add", x, np.asarray(c, dtype=np.float32))


def _hard_sigmoid_of(b, x, alpha, beta):
    return b.add("clamp", _plus(b, b.add("scale", x, c=alpha), beta), lo=0.0, hi=1.0)


def _hard_sigmoid(b, xs, a, opset):
    return _hard_sigmoid_of(b, xs[0], float(a.get("alpha", 0.2)), float(a.get("beta", 0.5)))


def _hard_swish(b, xs, a, opset):
    return b.add("mul", xs[0], _hard_sigmoid_of(b, xs[0], 1.0 / 6.0, 0.5))


def _neg_part_expm1(b, x, alpha):
    """``alpha * expm1(min(x, 0))``: the negative branch of ELU-like activations (0 for x >= 0)."""
    return b.add("scale", b.add("expm1", b.add("minimum", x, np.zeros((), np.float32))), c=alpha)


def _elu(b, xs, a, opset):
    x = xs[0]
    return b.add("add", b.add("relu", x), _neg_part_expm1(b, x, float(a.get("alpha", 1.0))))


def _selu(b, xs, a, opset):
    x = xs[0]
    alpha, gamma = float(a.get("alpha", 1.67326319217681884765625)), float(a.get("gamma", 1.05070102214813232421875))
    return b.add("scale", b.add("add", b.add("relu", x), _neg_part_expm1(b, x, alpha)), c=gamma)


def _celu(b, xs, a, opset):
    x, alpha = xs[0], float(a.get("alpha", 1.0))
    return b.add("add", b.add("relu", x), _neg_part_expm1(b, b.add("scale", x, c=1.0 / alpha), alpha))


def _mish(b, xs, a, opset):
    return b.add("mul", xs[0], b.add("tanh", b.add("softplus", xs[0])))


def _softsign(b, xs, a, opset):
    return b.add("div", xs[0], _plus(b, b.add("abs", xs[0]), 1.0))


def _prelu(b, xs, a, opset):
    x, slope = xs
    return b.add("add", b.add("relu", x), b.add("mul", slope, b.add("minimum", x, np.zeros((), np.float32))))


def _clip(b, xs, a, opset):
    if opset < 11:
        lo, hi = a.get("min"), a.get("max")
    else:
        lo, hi = _opt(xs, 1), _opt(xs, 2)
        lo = None if lo is None else _scalar(b, lo, "min of Clip")
        hi = None if hi is None else _scalar(b, hi, "max of Clip")
    return b.add("clamp", xs[0], lo=None if lo is None else float(lo), hi=None if hi is None else float(hi))


def _expand(b, xs, a, opset):
    shape = _ints(b.constant(xs[1], "the shape of Expand"))
    try:
        target = tuple(int(d) for d in np.broadcast_shapes(b.shape(xs[0]), shape))
    except ValueError:
        b.fail(f"shape {list(shape)} does not broadcast with the input's {list(b.shape(xs[0]))}")
    if target == b.shape(xs[0]):
        return xs[0]
    if not isinstance(xs[0], _Ref):
        return np.broadcast_to(np.asarray(xs[0]), target).copy()
    return b.add("broadcast_to", xs[0], shape=target)


def _constant_of_shape(b, xs, a, opset):
    onnx, helper, numpy_helper = _onnx()
    shape = _ints(b.constant(xs[0], "the shape of ConstantOfShape"))
    v = a.get("value")
    fill = np.zeros(1, np.float32) if v is None else numpy_helper.to_array(v).reshape(-1)
    return np.full(shape, fill[0], dtype=fill.dtype)


def _split(b, xs, a, opset):
    x = xs[0]
    s = b.shape(x)
    ax = _norm_axis(b, int(a.get("axis", 0)), len(s))
    sizes = a.get("split") if opset < 13 else _opt(xs, 1)
    n_out = b.n_outputs
    if sizes is not None:
        sizes = _ints(b.constant(sizes, "the split sizes of Split") if opset >= 13 else sizes)
    elif "num_outputs" in a:
        n = int(a["num_outputs"])
        step = -(-s[ax] // n)          # ceil: the last part takes the remainder (opset 18)
        sizes = tuple(min(step, s[ax] - k * step) for k in range(n))
    else:
        if s[ax] % n_out:
            b.fail(f"axis {ax} of length {s[ax]} does not split into {n_out} equal parts")
        sizes = (s[ax] // n_out,) * n_out
    if sum(sizes) != s[ax] or len(sizes) != n_out or min(sizes) < 0:
        b.fail(f"split sizes {list(sizes)} do not cut axis {ax} of length {s[ax]} into {n_out} outputs")
    out, start = [], 0
    for k in sizes:
        out.append(b.add("slice", x, axis=ax, start=start, stop=start + k))
        start += k
    return _Outputs(out)


# ---- recurrent layers: ONNX LSTM / GRU onto the IR's time-loop kinds (one per direction) ------------

def _rnn_common(b, xs, a, op, gates):
    """Checks shared by LSTM, GRU and RNN; returns (X, W, R, B, lengths mask or None, H, directions)."""
    for name, default in (("clip", None), ("input_forget", 0), ("layout", 0)):
        v = a.get(name, default)
        if v not in (None, 0, default):
            b.fail(f"attribute {name}={v} is not supported")
    if a.get("activations") is not None and op != "RNN":
        b.fail("attribute activations is not supported (the default gate functions only)")
    direction = a.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in ("forward", "reverse", "bidirectional"):
        b.fail(f"direction {direction!r} is not one of forward, reverse, bidirectional")
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    X = xs[0]
    T, N = b.shape(X)[:2]
    W = b.constant(xs[1], f"W of {op}").astype(np.float64)
    R = b.constant(xs[2], f"R of {op}").astype(np.float64)
    H = R.shape[-1]
    if "hidden_size" in a and int(a["hidden_size"]) != H:
        b.fail(f"hidden_size={a['hidden_size']} does not match R's shape {list(R.shape)}")
    B = _opt(xs, 3)
    B = np.zeros((len(dirs), 2 * gates * H)) if B is None else b.constant(B, f"B of {op}").astype(np.float64)
    mask = None
    lens = _opt(xs, 4)
    if lens is not None:
        lens = _ints(b.constant(lens, f"sequence_lens of {op}"))
        if any(n != T for n in lens):
            if "reverse" in dirs:
                b.fail("sequence_lens shorter than the sequence with a reverse direction are not supported")
            mask = np.arange(T)[:, None] < np.asarray(lens)[None, :]
    return X, W, R, B, mask, H, dirs, T, N


def _state0(b, v, k, N, H):
    return np.zeros((N, H)) if v is None else b.add("select", v, axis=0, index=k) if isinstance(v, _Ref) \
        else np.asarray(v)[k]


def _reorder(m, order, H):
    """The gate blocks of ``m`` (rows of H) in ``order``."""
    return np.concatenate([m[i * H:(i + 1) * H] for i in order])


def _lstm(b, xs, a, opset):
    X, W, R, B, mask, H, dirs, T, N = _rnn_common(b, xs, a, "LSTM", 4)
    if _opt(xs, 7) is not None and np.any(b.constant(xs[7], "P of LSTM")):
        b.fail("peephole weights P are not supported")
    order = (0, 2, 3, 1)            # ONNX's i, o, f, c -> the IR's i, f, g, o
    ys, hs, cs = [], [], []
    extra = {} if mask is None else {"mask": mask}
    for k, d in enumerate(dirs):
        w, r = _reorder(W[k], order, H), _reorder(R[k], order, H)
        bias = _reorder(B[k][:4 * H], order, H) + _reorder(B[k][4 * H:], order, H)
        gx = b.add("add", b.add("matmul", X, w.T.copy()), bias)
        if d == "reverse":
            gx = b.add("flip", gx, dims=(0,))
        st = b.add("lstm_scan", gx, r, _state0(b, _opt(xs, 5), k, N, H), _state0(b, _opt(xs, 6), k, N, H), **extra)
        h = b.add("select", st, axis=0, index=0)
        c = b.add("select", st, axis=0, index=1)
        hs.append(b.add("select", h, axis=0, index=T - 1))
        cs.append(b.add("select", c, axis=0, index=T - 1))
        ys.append(b.add("flip", h, dims=(0,)) if d == "reverse" else h)
    return _rnn_outputs(b, ys, mask, hs, cs)


def _gru(b, xs, a, opset):
    X, W, R, B, mask, H, dirs, T, N = _rnn_common(b, xs, a, "GRU", 3)
    if not int(a.get("linear_before_reset", 0)):
        b.fail("linear_before_reset=0 is not supported (torch's GRU, which the IR's gru_scan is, applies "
               "the reset gate after the recurrent product: linear_before_reset=1)")
    order = (1, 0, 2)               # ONNX's z, r, h -> the IR's r, z, n
    ys, hs = [], []
    extra = {} if mask is None else {"mask": mask}
    for k, d in enumerate(dirs):
        w, r = _reorder(W[k], order, H), _reorder(R[k], order, H)
        wb, rb = _reorder(B[k][:3 * H], order, H), _reorder(B[k][3 * H:], order, H)
        gx = b.add("add", b.add("matmul", X, w.T.copy()), wb)
        if d == "reverse":
            gx = b.add("flip", gx, dims=(0,))
        h = b.add("gru_scan", gx, r, rb, _state0(b, _opt(xs, 5), k, N, H), **extra)
        hs.append(b.add("select", h, axis=0, index=T - 1))
        ys.append(b.add("flip", h, dims=(0,)) if d == "reverse" else h)
    return _rnn_outputs(b, ys, mask, hs)


def _rnn(b, xs, a, opset):
    """ONNX's plain RNN, H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb), on the IR's ``rnn_scan``; f is Tanh
    (the default) or Relu, the same for every direction (torch's nn.RNN exports that way)."""
    X, W, R, B, mask, H, dirs, T, N = _rnn_common(b, xs, a, "RNN", 1)
    acts = [v.decode() if isinstance(v, bytes) else v for v in (a.get("activations") or ["Tanh"] * len(dirs))]
    if len(set(a.lower() for a in acts)) != 1 or acts[0].lower() not in ("tanh", "relu"):
        b.fail(f"activations {acts} are not supported (Tanh or Relu, the same for every direction)")
    extra = {} if mask is None else {"mask": mask}
    ys, hs = [], []
    for k, d in enumerate(dirs):
        gx = b.add("add", b.add("matmul", X, W[k].T.copy()), B[k][:H] + B[k][H:])
        if d == "reverse":
            gx = b.add("flip", gx, dims=(0,))
        h = b.add("rnn_scan", gx, R[k].copy(), _state0(b, _opt(xs, 5), k, N, H), nonlinearity=acts[0].lower(),
                  **extra)
        hs.append(b.add("select", h, axis=0, index=T - 1))
        ys.append(b.add("flip", h, dims=(0,)) if d == "reverse" else h)
    return _rnn_outputs(b, ys, mask, hs)


def _rnn_outputs(b, ys, mask, *finals):
    """``Y`` (T, directions, N, H) and the final states (directions, N, H), as ONNX orders them. The
    scans hold a shorter sequence's state past its end (its final state is then the last row); ONNX's
    ``Y`` is zero there."""
    if mask is not None:
        keep = mask.astype(np.float32)[:, :, None]
        ys = [b.add("mul", y, keep) for y in ys]
    Y = b.add("concat", *[b.add("unsqueeze", y, dim=1) for y in ys], axis=1)
    outs = [Y]
    for f in finals:
        outs.append(b.add("concat", *[b.add("unsqueeze", v, dim=0) for v in f], axis=0))
    return _Outputs(outs)


# ---- Resize and Pad ---------------------------------------------------------------------------------

def _resize_matrix(b, n_in, n_out, scale, a, roi=(0.0, 1.0)):
    """``(matrix, inside)`` of one axis of ONNX Resize: the (n_out, n_in) matrix whose row i weighs the
    input rows output i reads (nearest: one weight 1; linear: two; cubic: four; with ``antialias``
    and a scale below 1, the filter stretched by 1 / scale and normalized), with the coordinate
    mapping and the edge rule of ONNX's reference (neighbours past the ends take the edge value);
    ``inside`` is None, or for tf_crop_and_resize the mask of outputs whose coordinate lies in the
    input (the others take ``extrapolation_value``)."""
    def attr(name, default):
        v = a.get(name, default)
        return v.decode() if isinstance(v, bytes) else v
    ctm = attr("coordinate_transformation_mode", "half_pixel")
    mode = attr("mode", "nearest")
    i = np.arange(n_out, dtype=np.float64)
    if ctm == "half_pixel":
        x = (i + 0.5) / scale - 0.5
    elif ctm == "pytorch_half_pixel":
        x = (i + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    elif ctm == "align_corners":
        x = i * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    elif ctm == "asymmetric":
        x = i / scale
    elif ctm == "half_pixel_symmetric":   # opset 19: half_pixel, centred when n_out != n_in * scale
        adjustment = n_out / (n_in * scale)
        x = n_in / 2 * (1 - adjustment) + (i + 0.5) / scale - 0.5
    elif ctm == "tf_crop_and_resize":     # the region roi = (start, end), in fractions of n_in - 1,
        span = (roi[1] - roi[0]) * (n_in - 1)   # over the integer output length (the spec, onnxruntime)
        x = roi[0] * (n_in - 1) + (np.full(n_out, span / 2) if n_out == 1 else i * span / (n_out - 1))
    else:
        b.fail(f"coordinate_transformation_mode={ctm!r} is not supported")
    in_crop = ((x >= 0) & (x <= n_in - 1)) if ctm == "tf_crop_and_resize" else None
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    if mode == "nearest":
        nm = attr("nearest_mode", "round_prefer_floor")
        frac = x - np.floor(x)
        if nm == "floor":
            k = np.floor(x)
        elif nm == "ceil":
            k = np.ceil(x)
        elif nm == "round_prefer_floor":
            k = np.where(frac == 0.5, np.floor(x), np.round(x))
        elif nm == "round_prefer_ceil":
            k = np.where(frac == 0.5, np.ceil(x), np.round(x))
        else:
            b.fail(f"nearest_mode={nm!r} is not supported")
        m[rows, np.clip(k, 0, n_in - 1).astype(int)] = 1.0
        return m, in_crop
    exclude = int(a.get("exclude_outside", 0))
    if int(a.get("antialias", 0)) and scale < 1 and mode in ("linear", "cubic"):
        # The reference's antialiasing filter: taps x0 + j around x0 = ceil(x) - 1 (ratio in (0, 1]),
        # the kernel evaluated at scale * (j - ratio), the weights normalized.
        x0 = np.ceil(x) - 1
        ratio = (x - x0)[:, None]
        reach = 1 if mode == "linear" else 2
        start = int(np.floor(-reach / scale) + 1)
        taps = np.arange(start, 2 - start)
        u = np.abs(scale * (taps[None, :] - ratio))
        if mode == "linear":
            w = np.clip(1 - u, 0, 1)
        else:
            A = float(a.get("cubic_coeff_a", -0.75))
            w = np.where(u <= 1, ((A + 2) * u - (A + 3)) * u * u + 1,
                         np.where(u < 2, ((A * u - 5 * A) * u + 8 * A) * u - 4 * A, 0.0))
        w = w / w.sum(axis=1, keepdims=True)
        k = x0.astype(int)[:, None] + taps[None, :]
        if exclude:
            w = np.where((k >= 0) & (k < n_in), w, 0.0)
            w = w / w.sum(axis=1, keepdims=True)
        np.add.at(m, (np.repeat(rows, taps.size), np.clip(k, 0, n_in - 1).reshape(-1)), w.reshape(-1))
        return m, in_crop
    x0 = np.floor(x)
    t = x - x0
    if mode == "linear":
        taps, w = (0, 1), [1 - t, t]
    elif mode == "cubic":
        A = float(a.get("cubic_coeff_a", -0.75))
        u = [t + 1, t, 1 - t, 2 - t]
        w = [((A * u[0] - 5 * A) * u[0] + 8 * A) * u[0] - 4 * A, ((A + 2) * u[1] - (A + 3)) * u[1] * u[1] + 1,
             ((A + 2) * u[2] - (A + 3)) * u[2] * u[2] + 1, ((A * u[3] - 5 * A) * u[3] + 8 * A) * u[3] - 4 * A]
        taps = (-1, 0, 1, 2)
    else:
        b.fail(f"mode={mode!r} is not supported")
    for tap, wt in zip(taps, w):
        k = x0.astype(int) + tap
        inside = (k >= 0) & (k < n_in)
        wt = np.where(inside, wt, 0.0) if exclude else wt
        np.add.at(m, (rows, np.clip(k, 0, n_in - 1)), wt)
    if exclude:
        m /= m.sum(axis=1, keepdims=True)
    return m, in_crop


def _resize(b, xs, a, opset):
    x = xs[0]
    s = b.shape(x)
    for name in ("keep_aspect_ratio_policy", "axes"):
        if a.get(name) not in (None, 0, b"stretch", "stretch"):
            b.fail(f"attribute {name}={a[name]!r} is not supported")
    ctm = a.get("coordinate_transformation_mode", b"half_pixel")
    crop = (ctm.decode() if isinstance(ctm, bytes) else ctm) == "tf_crop_and_resize"
    roi = _opt(xs, 1)
    roi = b.constant(roi, "roi of Resize").astype(np.float64).reshape(-1) if roi is not None else np.zeros(0)
    if crop and roi.size != 2 * len(s):
        b.fail(f"tf_crop_and_resize needs an roi of {2 * len(s)} values (starts, then ends), got {roi.size}")
    rois = [(roi[ax], roi[ax + len(s)]) if crop else (0.0, 1.0) for ax in range(len(s))]
    scales, sizes = _opt(xs, 2), _opt(xs, 3)
    if sizes is not None and np.size(b.constant(sizes, "sizes of Resize")):
        out = _ints(b.constant(sizes, "sizes of Resize"))
        sc = [o / n for o, n in zip(out, s)]
    elif scales is not None and np.size(b.constant(scales, "scales of Resize")):
        sc = [float(v) for v in b.constant(scales, "scales of Resize").reshape(-1)]
        out = tuple(int(np.floor(n * f)) for n, f in zip(s, sc))   # as the reference and onnxruntime: not x (end - start)
    else:
        b.fail("give scales or sizes")
    if len(out) != len(s):
        b.fail(f"scales/sizes have {len(out)} entries for an input of rank {len(s)}")
    keep = None
    for ax in range(len(s)):
        if out[ax] == s[ax] and sc[ax] == 1.0 and rois[ax] == (0.0, 1.0):
            continue
        m, inside = _resize_matrix(b, s[ax], out[ax], sc[ax], a, rois[ax])
        if inside is not None and not inside.all():
            shape = [1] * len(s)
            shape[ax] = out[ax]
            here = inside.reshape(shape)
            keep = here if keep is None else keep & here
        last = len(s) - 1
        if ax != last:
            x = b.add("transpose", x, dim0=ax, dim1=last)
        x = b.add("matmul", x, m.T.copy())
        if ax != last:
            x = b.add("transpose", x, dim0=ax, dim1=last)
    if keep is not None:       # tf_crop_and_resize: outputs sampled outside the input take the fill value
        fill = np.full(out, float(a.get("extrapolation_value", 0.0)), dtype=np.float32)
        x = b.add("where", x, fill, cond=np.broadcast_to(keep, out).copy())
    return x


def _pad(b, xs, a, opset):
    x = xs[0]
    s = b.shape(x)
    r = len(s)
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if opset >= 11:
        pads = _ints(b.constant(xs[1], "pads of Pad"))
        value = _opt(xs, 2)
        value = 0.0 if value is None else _scalar(b, value, "constant_value of Pad")
        axes = _opt(xs, 3)
        axes = tuple(range(r)) if axes is None else tuple(_norm_axis(b, v, r) for v in _ints(b.constant(axes, "axes")))
    else:
        pads, value, axes = tuple(int(p) for p in a.get("pads", ())), float(a.get("value", 0.0)), tuple(range(r))
    if len(pads) != 2 * len(axes):
        b.fail(f"pads {list(pads)} need {2 * len(axes)} entries")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        b.fail(f"mode={mode!r} is not supported")
    for k, ax in enumerate(axes):
        lo, hi = pads[k], pads[k + len(axes)]
        n = b.shape(x)[ax]
        if lo < 0 or hi < 0:   # negative pads crop
            x = b.add("slice", x, axis=ax, start=max(-lo, 0), stop=n - max(-hi, 0))
            lo, hi, n = max(lo, 0), max(hi, 0), b.shape(x)[ax]
        if not lo and not hi:
            continue
        if mode == "reflect" and (lo >= n or hi >= n):
            b.fail(f"reflect pads {lo}, {hi} need an axis longer than them (axis {ax} has {n})")
        if mode == "wrap" and (lo > n or hi > n):
            b.fail(f"wrap pads {lo}, {hi} need an axis at least as long (axis {ax} has {n})")
        parts = []
        for size, before in ((lo, True), (hi, False)):
            if not size:
                parts.append(None)
                continue
            shape = b.shape(x)[:ax] + (size,) + b.shape(x)[ax + 1:]
            if mode == "constant":
                part = np.full(shape, value)
            elif mode == "edge":
                edge = b.add("slice", x, axis=ax, start=0 if before else n - 1, stop=1 if before else n)
                part = b.add("broadcast_to", edge, shape=shape)
            elif mode == "wrap":           # the other end, as circular padding
                part = b.add("slice", x, axis=ax, start=n - size if before else 0, stop=n if before else size)
            else:
                piece = b.add("slice", x, axis=ax, start=1, stop=size + 1) if before else \
                    b.add("slice", x, axis=ax, start=n - 1 - size, stop=n - 1)
                part = b.add("flip", piece, dims=(ax,))
            parts.append(part)
        x = b.add("concat", *[p for p in (parts[0], x, parts[1]) if p is not None], axis=ax)
    return x


def _compare(op):
    return lambda b, xs, a, opset: b.add("compare", xs[0], xs[1], op=op)


def _logic(fn, arity):
    """Not / And / Or / Xor: folded at import (the shape and mask computations exporters write);
    on run-time values the IR has no boolean ops."""
    def conv(b, xs, a, opset):
        if any(isinstance(v, _Ref) for v in xs[:arity]):
            b.fail("boolean logic on run-time values is not supported (only on constants, folded at import)")
        return fn(*[np.asarray(v).astype(bool) for v in xs[:arity]])
    return conv


def _group_norm(b, xs, a, opset):
    x, scale, bias = xs
    s = b.shape(x)
    G = int(a["num_groups"]) if "num_groups" in a else b.fail("num_groups is required")
    C = s[1]
    if len(s) < 2 or C % G:
        b.fail(f"{C} channels do not split into {G} groups")
    sc = b.constant(scale, "scale of GroupNormalization").astype(np.float64).reshape(-1)
    bi = b.constant(bias, "bias of GroupNormalization").astype(np.float64).reshape(-1)
    if sc.size == G and G != C:   # opsets 18-20: one scale and bias per group
        sc, bi = np.repeat(sc, C // G), np.repeat(bi, C // G)
    if sc.size != C or bi.size != C:
        b.fail(f"scale and bias need {C} (or {G}) entries, got {sc.size} and {bi.size}")
    return _normalize_groups(b, x, G, float(a.get("epsilon", 1e-5)), sc, bi)


def _gather_elements(b, xs, a, opset):
    x = xs[0]
    s = b.shape(x)
    ax = _norm_axis(b, int(a.get("axis", 0)), len(s))
    if isinstance(xs[1], _Ref):             # indices computed by the graph: checked when it runs
        return b.add("take_along", x, xs[1], axis=ax)
    idx = b.constant(xs[1], "indices of GatherElements").astype(np.int64)
    if idx.ndim != len(s):
        b.fail(f"indices of rank {idx.ndim} for data of rank {len(s)}")
    if np.any((idx < -s[ax]) | (idx >= s[ax])):
        b.fail(f"indices out of range [-{s[ax]}, {s[ax]}) on axis {ax}")
    idx = np.where(idx < 0, idx + s[ax], idx)
    if not isinstance(x, _Ref):
        return np.take_along_axis(np.asarray(x), idx, axis=ax)
    return b.add("gather", x, axis=ax, index=idx)


def _topk(b, xs, a, opset):
    """The k largest (smallest) entries along ``axis`` and their indices, sorted, the lower index first
    among ties (ONNX's rule): a stable argsort, its first k, and ``take_along`` of the values."""
    x = xs[0]
    s = b.shape(x)
    ax = _norm_axis(b, int(a.get("axis", -1)), len(s))
    k = _ints(b.constant(xs[1], "K of TopK"))
    if len(k) != 1 or not 0 <= k[0] <= s[ax]:
        b.fail(f"K={list(k)} must be one value in [0, {s[ax]}] (the size of axis {ax})")
    k, largest = k[0], bool(int(a.get("largest", 1)))
    if not isinstance(x, _Ref):
        xv = np.asarray(x)
        order = np.argsort(-xv if largest else xv, axis=ax, kind="stable")
        idx = np.take(order, np.arange(k), axis=ax)
        return _Outputs([np.take_along_axis(xv, idx, axis=ax), idx.astype(np.int64)])
    idx = b.add("argsort", x, axis=ax, descending=largest)
    if k != s[ax]:
        idx = b.add("slice", idx, axis=ax, start=0, stop=k, step=1)
    return _Outputs([b.add("take_along", x, idx, axis=ax), idx])


def _einsum(b, xs, a, opset):
    """Einsum of one or two operands as sums, a transposition, reshapes and one batched matmul: the
    indices of both operands and the output are batch axes, those of both and not the output are
    contracted, those of one operand only are kept (or summed first when the output lacks them)."""
    eq = a.get("equation", b"")
    eq = (eq.decode() if isinstance(eq, bytes) else eq).replace(" ", "")
    if "..." in eq or "->" not in eq:
        b.fail(f"equation {eq!r}: give the output explicitly (-> ...), without ellipses")
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    if len(terms) != len(xs) or len(terms) not in (1, 2):
        b.fail(f"equation {eq!r}: one or two operands are supported, got {len(xs)}")
    ops = []
    for t, x in zip(terms, xs):
        if len(set(t)) != len(t):
            b.fail(f"equation {eq!r}: a repeated index within one operand (a diagonal) is not supported")
        if len(t) != len(b.shape(x)):
            b.fail(f"equation {eq!r}: term {t!r} for an operand of rank {len(b.shape(x))}")
        other = set(out).union(*[set(u) for u in terms if u is not t])
        gone = tuple(i for i, c in enumerate(t) if c not in other)
        if gone:                     # an index only this operand has and the output drops: sum it now
            x = b.add("reduce_sum", x, axis=gone)
            t = "".join(c for i, c in enumerate(t) if i not in gone)
        ops.append((t, x))
    size = {}
    for t, x in ops:
        for c, n in zip(t, b.shape(x)):
            if size.setdefault(c, n) != n:
                b.fail(f"equation {eq!r}: index {c!r} has sizes {size[c]} and {n}")

    def arrange(t, x, order):
        perm = tuple(t.index(c) for c in order)
        return x if perm == tuple(range(len(perm))) else b.add("permute", x, dims=perm)

    if len(ops) == 1:
        t, x = ops[0]
        return arrange(t, x, out)
    (ta, A), (tb, B) = ops
    batch = [c for c in out if c in ta and c in tb]
    left = [c for c in out if c in ta and c not in tb]
    right = [c for c in out if c in tb and c not in ta]
    contr = [c for c in ta if c in tb and c not in out]
    prod = lambda cs: math.prod(size[c] for c in cs)  # noqa: E731
    A2 = b.add("reshape", arrange(ta, A, batch + left + contr), shape=(prod(batch), prod(left), prod(contr)))
    B2 = b.add("reshape", arrange(tb, B, batch + contr + right), shape=(prod(batch), prod(contr), prod(right)))
    y = b.add("reshape", b.add("matmul", A2, B2), shape=tuple(size[c] for c in batch + left + right))
    return arrange("".join(batch + left + right), y, out)


def _gather_nd(b, xs, a, opset):
    """GatherND with constant indices: with ``batch_dims`` = d, the data's first d axes pair with the
    indices' first d (one lookup table per batch entry); the batch and indexed axes are flattened into
    one whose rows index_select takes."""
    x = xs[0]
    s = b.shape(x)
    idx = b.constant(xs[1], "indices of GatherND").astype(np.int64)
    bd = int(a.get("batch_dims", 0))
    if not 0 <= bd < min(len(s), idx.ndim):
        b.fail(f"batch_dims={bd} must lie in [0, {min(len(s), idx.ndim)})")
    if tuple(idx.shape[:bd]) != tuple(s[:bd]):
        b.fail(f"the batch axes of the indices {list(idx.shape[:bd])} differ from the data's {list(s[:bd])}")
    k = idx.shape[-1]
    if bd + k > len(s):
        b.fail(f"index tuples of length {k} for data of rank {len(s)} with batch_dims={bd}")
    lead = np.asarray(s[bd:bd + k])
    if np.any((idx < -lead) | (idx >= lead)):
        b.fail(f"indices out of range of the data's axes {list(s[bd:bd + k])}")
    idx = np.where(idx < 0, idx + lead, idx)
    nb, q = math.prod(s[:bd]), tuple(idx.shape[bd:-1])
    local = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), s[bd:bd + k]) if k else \
        np.zeros(idx.shape[:-1], np.int64)
    rows = (np.arange(nb).reshape((nb,) + (1,) * len(q)) * math.prod(s[bd:bd + k])
            + np.reshape(local, (nb,) + q)).reshape(-1)
    out_shape = tuple(s[:bd]) + q + tuple(s[bd + k:])
    if not isinstance(x, _Ref):
        return np.asarray(x).reshape((-1,) + s[bd + k:])[rows].reshape(out_shape)
    flat = b.add("reshape", x, shape=(nb * math.prod(s[bd:bd + k]),) + s[bd + k:])
    picked = b.add("index_select", flat, axis=0, indices=rows.astype(np.int64))
    return b.add("reshape", picked, shape=out_shape)


def _scatter_nd(b, xs, a, opset):
    """ScatterND with constant indices: ``put`` at the flat offsets of every updated element (the last
    write wins where indices repeat; reduction="add" accumulates)."""
    red = a.get("reduction", b"none")
    red = red.decode() if isinstance(red, bytes) else red
    if red not in ("none", "add", "mul", "max", "min"):
        b.fail(f"reduction={red!r} is not supported (none, add, mul, max or min)")
    x, upd = xs[0], xs[2]
    s = b.shape(x)
    idx = b.constant(xs[1], "indices of ScatterND").astype(np.int64)
    k = idx.shape[-1]
    if tuple(b.shape(upd)) != idx.shape[:-1] + s[k:]:
        b.fail(f"updates of shape {list(b.shape(upd))}, expected {list(idx.shape[:-1] + s[k:])}")
    lead = np.asarray(s[:k])
    if np.any((idx < -lead) | (idx >= lead)):
        b.fail(f"indices out of range of the data's leading axes {list(s[:k])}")
    idx = np.where(idx < 0, idx + lead, idx)
    base = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), s[:k]) * math.prod(s[k:])
    offsets = base.reshape(base.shape + (1,) * (len(s) - k)) + np.arange(math.prod(s[k:])).reshape(s[k:])
    if red in ("none", "add"):
        return b.add("put", x, upd, index=offsets.astype(np.int64), accumulate=red == "add")
    return _scatter_combine(b, x, upd, offsets.reshape(-1), {"mul": "mul", "max": "maximum", "min": "minimum"}[red])


def _scatter_combine(b, x, upd, off, kind):
    """``out[off[i]] = kind(out[off[i]], upd[i])`` for every i in order (ScatterND's mul, max and min),
    in rounds: round r applies each target's r-th update, so no round writes a target twice; a round
    is the update values put into a zero tensor at their targets, combined with the data by ``kind``
    and selected by the (constant) mask of those targets."""
    s = b.shape(x)
    size = math.prod(s)
    if not isinstance(x, _Ref) and not isinstance(upd, _Ref):      # all constants: folded here
        out, u = np.array(x).reshape(-1), np.asarray(upd).reshape(-1)
        f = {"mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}[kind]
        for i, t in enumerate(off.tolist()):
            out[t] = f(out[t], u[i])
        return out.reshape(s)
    rank = np.zeros(off.size, np.int64)      # how many earlier updates share each one's target
    seen: dict = {}
    for i, t in enumerate(off.tolist()):
        rank[i] = seen.get(t, 0)
        seen[t] = rank[i] + 1
    cur = b.add("reshape", x, shape=(size,))
    flat_u = b.add("reshape", upd, shape=(off.size,))
    for r in range(int(rank.max()) + 1 if off.size else 0):
        pick = np.flatnonzero(rank == r)
        vals = b.add("index_select", flat_u, axis=0, indices=pick)
        full = b.add("put", np.zeros(size, np.float32), vals, index=off[pick].astype(np.int64), accumulate=False)
        mask = np.zeros(size, bool)
        mask[off[pick]] = True
        cur = b.add("where", b.add(kind, cur, full), cur, cond=mask)
    return b.add("reshape", cur, shape=s)


def _reduce_prod(b, xs, a, opset):
    x = xs[0]
    got = _reduce_axes(b, xs, a, opset, 18)
    if got is None:
        return x
    axes, keep = got
    for ax in sorted(axes, reverse=True):   # the running product's last entry, one axis at a time
        n = b.shape(x)[ax]
        x = b.add("slice", b.add("cumprod", x, axis=ax), axis=ax, start=n - 1, stop=n)
        if not keep:
            x = b.add("squeeze", x, dim=ax)
    return x


def _where(b, xs, a, opset):
    cond = b.constant(xs[0], "the condition of Where").astype(bool)
    x, y = xs[1], xs[2]
    if not isinstance(x, _Ref) and not isinstance(y, _Ref):
        return np.where(cond, np.asarray(x), np.asarray(y))
    target = tuple(int(d) for d in np.broadcast_shapes(cond.shape, b.shape(x), b.shape(y)))
    x, y = (v if b.shape(v) == target else _expand(b, [v, np.asarray(target)], {}, opset) for v in (x, y))
    return b.add("where", x, y, cond=np.broadcast_to(cond, target).copy())


def _range(b, xs, a, opset):
    start, limit, delta = (b.constant(v, "the inputs of Range") for v in xs)
    return np.arange(start.reshape(()), limit.reshape(()), delta.reshape(()), dtype=np.result_type(start, limit, delta))


def _tile(b, xs, a, opset):
    reps = _ints(b.constant(xs[1], "the repeats of Tile"))
    x = xs[0]
    if not isinstance(x, _Ref):
        return np.tile(np.asarray(x), reps)
    if len(reps) != len(b.shape(x)):
        b.fail(f"repeats {list(reps)} need one entry per axis of the input (rank {len(b.shape(x))})")
    for ax, r in enumerate(reps):
        if r != 1:
            x = b.add("concat", *([x] * r), axis=ax)
    return x


def _dropout(b, xs, a, opset):
    train = _opt(xs, 2)
    if train is not None and bool(b.constant(train, "training_mode of Dropout").reshape(-1)[0]):
        b.fail("Dropout in training mode is not supported (inference only)")
    return xs[0]


def _shape(b, xs, a, opset):
    s = b.shape(xs[0])
    lo, hi = int(a.get("start", 0)), a.get("end")
    return np.array(s[lo: None if hi is None else int(hi)], dtype=np.int64)


def _cast(b, xs, a, opset):
    onnx, _, _ = _onnx()
    to = int(a["to"])
    dt = onnx.helper.tensor_dtype_to_np_dtype(to)
    if not isinstance(xs[0], _Ref):
        return np.asarray(xs[0]).astype(dt)
    if np.dtype(dt).kind != "f":
        b.fail(f"Cast of a run-time value to {np.dtype(dt)} (IR values are floats)")
    return xs[0]


def _reduce(kind, axes_input_since):
    def conv(b, xs, a, opset):
        x = xs[0]
        got = _reduce_axes(b, xs, a, opset, axes_input_since)
        if got is None:
            return x
        axes, keep = got
        if kind in ("reduce_max", "reduce_min"):    # one axis per IR op: reduce them in turn
            return _extreme_over(b, kind, x, axes, keep)
        return b.add(kind, x, axis=axes, keepdim=keep)
    return conv


def _extreme_over(b, kind, x, axes, keep):
    """``kind`` (reduce_max / reduce_min) over several axes, one at a time."""
    for ax in sorted(axes, reverse=True):
        x = b.add(kind, x, axis=ax, keepdim=keep)
    return x


def _reduce_axes(b, xs, a, opset, since):
    """``(axes, keepdim)`` of an ONNX reduction, or None when it reduces nothing (noop_with_empty_axes)."""
    r = len(b.shape(xs[0]))
    axes = _axes(b, xs, a, opset, since)
    if not axes:
        if int(a.get("noop_with_empty_axes", 0)):
            return None
        axes = tuple(range(r))
    return tuple(sorted({_norm_axis(b, ax, r) for ax in axes})), bool(int(a.get("keepdims", 1)))


def _reduce_composed(what):
    """ReduceL1, ReduceL2, ReduceSumSquare and ReduceLogSumExp as compositions (axes an input from opset 18)."""
    def conv(b, xs, a, opset):
        x = xs[0]
        got = _reduce_axes(b, xs, a, opset, 18)
        if got is None:
            return b.add("abs", x) if what == "l1" else b.add("mul", x, x) if what == "sumsq" else x
        axes, keep = got
        if what == "logsumexp":   # max-shifted, so large entries do not overflow
            m = _extreme_over(b, "reduce_max", x, axes, True)
            sm = b.add("reduce_sum", b.add("exp", b.add("sub", x, m)), axis=axes, keepdim=True)
            out = b.add("add", b.add("log", sm), m)
            if keep:
                return out
            return b.add("reshape", out, shape=tuple(d for i, d in enumerate(b.shape(x)) if i not in axes))
        y = b.add("abs", x) if what == "l1" else b.add("mul", x, x)
        y = b.add("reduce_sum", y, axis=axes, keepdim=keep)
        return b.add("sqrt", y) if what == "l2" else y
    return conv


def _arg_extreme(kind):
    def conv(b, xs, a, opset):
        if int(a.get("select_last_index", 0)):
            b.fail("select_last_index=1 is not supported (the first of tied entries is returned)")
        r = len(b.shape(xs[0]))
        return b.add(kind, xs[0], axis=_norm_axis(b, int(a.get("axis", 0)), r),
                     keepdim=bool(int(a.get("keepdims", 1))))
    return conv


def _cumsum(b, xs, a, opset):
    x = xs[0]
    ax = _norm_axis(b, int(_scalar(b, xs[1], "the axis of CumSum")), len(b.shape(x)))
    rev = bool(int(a.get("reverse", 0)))
    y = b.add("flip", x, dims=(ax,)) if rev else x
    c = b.add("cumsum", y, axis=ax)
    if int(a.get("exclusive", 0)):
        c = b.add("sub", c, y)
    return b.add("flip", c, dims=(ax,)) if rev else c


def _global_max_pool(b, xs, a, opset):
    r = len(b.shape(xs[0]))
    return _extreme_over(b, "reduce_max", xs[0], tuple(range(2, r)), True)


def _normalize_groups(b, x, groups, eps, scale, bias):
    """``x`` (N, C, ...) normalized over each of ``groups`` groups of channels and their spatial cells
    (the no-affine layer norm of the flattened group), then ``scale`` and ``bias`` per channel."""
    s = b.shape(x)
    flat = b.add("reshape", x, shape=(s[0], groups, (s[1] // groups) * math.prod(s[2:])))
    y = b.add("reshape", b.add("layer_norm_noaffine", flat, normalized_ndim=1, eps=eps), shape=s)
    per_channel = (s[1],) + (1,) * (len(s) - 2)
    return b.add("add", b.add("mul", y, scale.reshape(per_channel)), bias.reshape(per_channel))


def _instance_norm(b, xs, a, opset):
    x, scale, bias = xs
    s = b.shape(x)
    if len(s) < 3:
        b.fail(f"input of shape {list(s)} has no spatial axes")
    return _normalize_groups(b, x, s[1], float(a.get("epsilon", 1e-5)),
                             b.constant(scale, "scale of InstanceNormalization").astype(np.float64),
                             b.constant(bias, "B of InstanceNormalization").astype(np.float64))


def _trilu(b, xs, a, opset):
    x = xs[0]
    k = int(_scalar(b, xs[1], "k of Trilu")) if _opt(xs, 1) is not None else 0
    s = b.shape(x)
    if len(s) < 2:
        b.fail(f"input of shape {list(s)} is not a matrix")
    keep = (np.triu if int(a.get("upper", 1)) else np.tril)(np.ones(s[-2:], bool), k)
    if not isinstance(x, _Ref):
        return np.where(keep, np.asarray(x), 0)
    return b.add("where", x, np.zeros(s), cond=np.broadcast_to(keep, s).copy())


def _global_avg_pool(b, xs, a, opset):
    r = len(b.shape(xs[0]))
    return b.add("reduce_mean", xs[0], axis=tuple(range(2, r)), keepdim=True)


def _conv(kind):
    def conv(b, xs, a, opset):
        x, w, bias = xs[0], xs[1], _opt(xs, 2)
        w = b.constant(w, f"the weight of {'Conv' if kind == 'conv' else 'ConvTranspose'}")
        d = w.ndim - 2
        if d < 1:
            b.fail(f"weight of shape {w.shape} has no spatial axes")
        _auto_pad(b, a)
        ks = _spatial(b, a, d, "kernel_shape", None)
        if a.get("kernel_shape") is not None and ks != tuple(w.shape[2:]):
            b.fail(f"kernel_shape {list(ks)} differs from the weight's {list(w.shape[2:])}")
        groups = int(a.get("group", 1))
        if kind == "conv_transpose":
            if any(int(p) for p in a.get("output_padding", ())) or a.get("output_shape") is not None:
                b.fail("ConvTranspose output_padding / output_shape are not supported")
            out = w.shape[1] * groups
        else:
            out = w.shape[0]
        bias = np.zeros(out, dtype=w.dtype) if bias is None else b.constant(bias, "the bias")
        if kind == "conv":
            x, pads = _pads_with_cells(b, x, a, d, 0.0)
        else:
            pads = _sym_pads(b, a, d)
        return b.add(kind, x, params={"weight": w, "bias": bias},
                     stride=_spatial(b, a, d, "strides", 1), padding=pads,
                     dilation=_spatial(b, a, d, "dilations", 1), groups=groups)
    return conv


def _pool(kind):
    def conv(b, xs, a, opset):
        d = len(b.shape(xs[0])) - 2
        if d < 1:
            b.fail(f"input of shape {b.shape(xs[0])} has no spatial axes")
        if a.get("kernel_shape") is None:
            b.fail("kernel_shape is required")
        _auto_pad(b, a)
        ceil = bool(int(a.get("ceil_mode", 0)))
        if ceil and kind != "max_pool":
            b.fail("ceil_mode=1 is supported for MaxPool only")
        dil = _spatial(b, a, d, "dilations", 1)
        extra = {}
        if any(v != 1 for v in dil):
            if kind != "max_pool":
                b.fail(f"dilations {list(dil)} are not supported for {kind}")
            extra["dilation"] = dil
        if int(a.get("storage_order", 0)):
            b.fail("storage_order=1 is not supported")
        x = xs[0]
        if kind == "max_pool":
            x, pad = _pads_with_cells(b, x, a, d, -np.inf)
        else:
            pad = _sym_pads(b, a, d)
        if ceil:
            x = _ceil_mode_tail(b, x, _spatial(b, a, d, "kernel_shape", 1), _spatial(b, a, d, "strides", 1), pad, dil)
        if kind == "avg_pool" and any(pad) and not int(a.get("count_include_pad", 0)):
            b.fail("AveragePool with padding and count_include_pad=0 is not supported "
                   "(the IR's avg_pool counts padded cells)")
        return b.add(kind, x, kernel_size=_spatial(b, a, d, "kernel_shape", 1),
                     stride=_spatial(b, a, d, "strides", 1), padding=pad, **extra)
    return conv


def _ceil_mode_tail(b, x, k, s, p, dil):
    """``x`` with -inf cells appended to each spatial axis so that a floor-mode max pool gives the
    ceil-mode output size (a window that would start in the end padding is dropped, as ONNX and torch
    do); -inf never wins a max."""
    shape = b.shape(x)
    for i in range(len(k)):
        ax = 2 + i
        n, span = shape[ax], dil[i] * (k[i] - 1) + 1
        out = -(-(n + 2 * p[i] - span) // s[i]) + 1
        if (out - 1) * s[i] >= n + p[i]:
            out -= 1
        extra = (out - 1) * s[i] + span - (n + 2 * p[i])
        if extra > 0:
            tail = np.full(shape[:ax] + (extra,) + shape[ax + 1:], -np.inf, dtype=np.float32)
            x = b.add("concat", x, tail, axis=ax)
            shape = b.shape(x)
    return x


def _batch_norm(b, xs, a, opset):
    if int(a.get("training_mode", 0)):
        b.fail("BatchNormalization in training mode is not supported (inference only)")
    names = ("weight", "bias", "running_mean", "running_var")
    params = {n: b.constant(v, f"the {n} of BatchNormalization") for n, v in zip(names, xs[1:5])}
    return b.add("batch_norm_eval", xs[0], params=params, eps=float(a.get("epsilon", 1e-5)))


def _layer_norm(b, xs, a, opset):
    x = xs[0]
    s = b.shape(x)
    ax = _norm_axis(b, int(a.get("axis", -1)), len(s))
    ns = s[ax:]
    w = b.constant(xs[1], "the scale of LayerNormalization")
    bias = _opt(xs, 2)
    bias = np.zeros(w.shape, dtype=w.dtype) if bias is None else b.constant(bias, "the bias")
    if w.shape != ns or bias.shape != ns:
        w = np.broadcast_to(w, ns).copy()
        bias = np.broadcast_to(bias, ns).copy()
    return b.add("layer_norm", x, params={"weight": w, "bias": bias},
                 normalized_ndim=len(ns), eps=float(a.get("epsilon", 1e-5)))


#: ONNX op type -> (converter, attribute names it understands).
CONVERTERS: dict = {
    "Add": (_binary("add"), ()), "Sub": (_binary("sub"), ()), "Mul": (_mul, ()),
    "Div": (_binary("div"), ()), "Max": (_binary("maximum"), ()), "Min": (_binary("minimum"), ()),
    "Pow": (_pow, ()), "Neg": (_unary("neg"), ()), "Sqrt": (_unary("sqrt"), ()),
    "Exp": (_unary("exp"), ()), "Log": (_unary("log"), ()), "Abs": (_unary("abs"), ()),
    "Relu": (_unary("relu"), ()), "Sigmoid": (_unary("sigmoid"), ()), "Tanh": (_unary("tanh"), ()),
    "Sin": (_unary("sin"), ()), "Cos": (_unary("cos"), ()), "Reciprocal": (_unary("inv"), ()),
    "Softplus": (_unary("softplus"), ()), "Erf": (_unary("erf"), ()),
    "Tan": (_unary("tan"), ()), "Asin": (_unary("asin"), ()), "Acos": (_unary("acos"), ()),
    "Atan": (_unary("atan"), ()), "Sinh": (_unary("sinh"), ()), "Cosh": (_unary("cosh"), ()),
    "Asinh": (_unary("asinh"), ()), "Acosh": (_unary("acosh"), ()), "Atanh": (_unary("atanh"), ()),
    "Floor": (_unary("floor"), ()), "Ceil": (_unary("ceil"), ()), "Round": (_unary("round"), ()),
    "Sign": (_unary("sign"), ()),
    "Mod": (lambda b, xs, a, opset: b.add("fmod" if int(a.get("fmod", 0)) else "remainder", xs[0], xs[1]),
            ("fmod",)),
    "LeakyRelu": (_leaky_relu, ("alpha",)), "Gelu": (_gelu, ("approximate",)),
    "Softmax": (_softmax("softmax"), ("axis",)), "LogSoftmax": (_softmax("log_softmax"), ("axis",)),
    "MatMul": (_matmul, ()), "Gemm": (_gemm, ("alpha", "beta", "transA", "transB")),
    "Reshape": (_reshape, ("allowzero", "shape")), "Flatten": (_flatten, ("axis",)),
    "Transpose": (_transpose, ("perm",)), "Squeeze": (_squeeze, ("axes",)),
    "Unsqueeze": (_unsqueeze, ("axes",)), "Concat": (_concat, ("axis",)),
    "Slice": (_slice, ("starts", "ends", "axes")), "Gather": (_gather_embedding, ("axis",)),
    "Identity": (_identity, ()), "Dropout": (_dropout, ("seed", "ratio", "is_test")),
    "Shape": (_shape, ("start", "end")), "Cast": (_cast, ("to", "saturate")),
    "ReduceMean": (_reduce("reduce_mean", 18), ("axes", "keepdims", "noop_with_empty_axes")),
    "ReduceSum": (_reduce("reduce_sum", 13), ("axes", "keepdims", "noop_with_empty_axes")),
    "ReduceMax": (_reduce("reduce_max", 18), ("axes", "keepdims", "noop_with_empty_axes")),
    "ReduceMin": (_reduce("reduce_min", 18), ("axes", "keepdims", "noop_with_empty_axes")),
    "Conv": (_conv("conv"), ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")),
    "ConvTranspose": (_conv("conv_transpose"), ("auto_pad", "dilations", "group", "kernel_shape",
                                                "pads", "strides", "output_padding", "output_shape")),
    "MaxPool": (_pool("max_pool"), ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                                    "storage_order", "strides")),
    "AveragePool": (_pool("avg_pool"), ("auto_pad", "ceil_mode", "count_include_pad", "dilations",
                                        "kernel_shape", "pads", "strides")),
    "GlobalAveragePool": (_global_avg_pool, ()),
    "BatchNormalization": (_batch_norm, ("epsilon", "momentum", "training_mode", "spatial")),
    "LayerNormalization": (_layer_norm, ("axis", "epsilon", "stash_type")),
    "HardSigmoid": (_hard_sigmoid, ("alpha", "beta")), "HardSwish": (_hard_swish, ()),
    "Elu": (_elu, ("alpha",)), "Selu": (_selu, ("alpha", "gamma")), "Celu": (_celu, ("alpha",)),
    "Mish": (_mish, ()), "Softsign": (_softsign, ()), "PRelu": (_prelu, ()), "Clip": (_clip, ("min", "max")),
    "Expand": (_expand, ()), "ConstantOfShape": (_constant_of_shape, ("value",)),
    "Split": (_split, ("axis", "split", "num_outputs")), "Where": (_where, ()), "Range": (_range, ()),
    "Tile": (_tile, ()),
    "ReduceL1": (_reduce_composed("l1"), ("axes", "keepdims", "noop_with_empty_axes")),
    "ReduceL2": (_reduce_composed("l2"), ("axes", "keepdims", "noop_with_empty_axes")),
    "ReduceSumSquare": (_reduce_composed("sumsq"), ("axes", "keepdims", "noop_with_empty_axes")),
    "ReduceLogSumExp": (_reduce_composed("logsumexp"), ("axes", "keepdims", "noop_with_empty_axes")),
    "ArgMax": (_arg_extreme("argmax"), ("axis", "keepdims", "select_last_index")),
    "ArgMin": (_arg_extreme("argmin"), ("axis", "keepdims", "select_last_index")),
    "CumSum": (_cumsum, ("exclusive", "reverse")), "GlobalMaxPool": (_global_max_pool, ()),
    "InstanceNormalization": (_instance_norm, ("epsilon",)), "Trilu": (_trilu, ("upper",)),
    "Resize": (_resize, ("antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                         "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode")),
    "Pad": (_pad, ("mode", "pads", "value")),
    "Equal": (_compare("eq"), ()), "Less": (_compare("lt"), ()), "LessOrEqual": (_compare("le"), ()),
    "Greater": (_compare("gt"), ()), "GreaterOrEqual": (_compare("ge"), ()),
    "Not": (_logic(np.logical_not, 1), ()), "And": (_logic(np.logical_and, 2), ()),
    "Or": (_logic(np.logical_or, 2), ()), "Xor": (_logic(np.logical_xor, 2), ()),
    "GroupNormalization": (_group_norm, ("epsilon", "num_groups", "stash_type")),
    "GatherElements": (_gather_elements, ("axis",)), "Einsum": (_einsum, ("equation",)),
    "GatherND": (_gather_nd, ("batch_dims",)), "ScatterND": (_scatter_nd, ("reduction",)),
    "ReduceProd": (_reduce_prod, ("axes", "keepdims", "noop_with_empty_axes")),
    "LSTM": (_lstm, ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                     "input_forget", "layout")),
    "GRU": (_gru, ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                   "layout", "linear_before_reset")),
    "TopK": (_topk, ("axis", "largest", "sorted")),
    "RNN": (_rnn, ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                   "layout")),
}

# Ops whose converters give all their outputs (an _Outputs).
_MULTI_OUTPUT = {"Split", "LSTM", "GRU", "RNN", "TopK"}

# Outputs beyond the first that may exist as long as nothing reads them.
_UNUSED_EXTRA_OUTPUTS = {"Dropout", "LayerNormalization", "BatchNormalization", "MaxPool"}


# ---- the Erf form of GELU --------------------------------------------------------------------

def _find_gelus(nodes, const_of, consumers, graph_outputs):
    """Match ``x * 0.5 * (1 + erf(x / sqrt 2))`` (in its common arrangements).

    Returns ``{index of the last node: (x, y, indices of all pattern nodes)}``.
    """
    producer = {o: k for k, n in enumerate(nodes) for o in n.output}

    def cval(name):
        c = const_of(name)
        return None if c is None or np.size(c) != 1 else float(np.asarray(c).reshape(-1)[0])

    def other(n, name):
        ins = list(n.input)
        if len(ins) != 2 or name not in ins:
            return None
        return ins[1] if ins[0] == name else ins[0]

    def only_consumer(name):
        cs = consumers.get(name, [])
        if len(cs) != 1 or name in graph_outputs:
            return None
        return cs[0]

    def near(v, t):
        return v is not None and abs(v - t) < 1e-3 * abs(t)

    def half_of(k, x):
        """Is node k ``x * 0.5`` / ``0.5 * x`` / ``x / 2``?"""
        n = nodes[k]
        if n.op_type == "Mul" and x in n.input:
            return near(cval(other(n, x)), 0.5)
        return n.op_type == "Div" and list(n.input[:1]) == [x] and near(cval(n.input[1]), 2.0)

    found = {}
    for ke, e in enumerate(nodes):
        if e.op_type != "Erf" or len(e.input) != 1:
            continue
        kt = producer.get(e.input[0])
        if kt is None or only_consumer(e.input[0]) != ke:
            continue
        t = nodes[kt]
        x = None
        if t.op_type == "Div" and len(t.input) == 2 and near(cval(t.input[1]), math.sqrt(2)):
            x = t.input[0]
        elif t.op_type == "Mul" and len(t.input) == 2:
            for a_, c_ in ((t.input[0], t.input[1]), (t.input[1], t.input[0])):
                if near(cval(c_), 1 / math.sqrt(2)):
                    x = a_
        if x is None:
            continue
        ka = only_consumer(e.output[0])
        if ka is None or nodes[ka].op_type != "Add" or not near(cval(other(nodes[ka], e.output[0])), 1.0):
            continue
        u = nodes[ka].output[0]
        km = only_consumer(u)
        if km is None or nodes[km].op_type != "Mul":
            continue
        m = nodes[km]
        w = other(m, u)
        part = [kt, ke, ka, km]
        last = None
        if w == x:                                           # (x * u) * 0.5
            kh = only_consumer(m.output[0])
            if kh is not None and half_of(kh, m.output[0]):
                last, part = kh, part + [kh]
        elif w is not None and near(cval(w), 0.5):           # x * (u * 0.5)
            kf = only_consumer(m.output[0])
            if kf is not None and nodes[kf].op_type == "Mul" and other(nodes[kf], m.output[0]) == x:
                last, part = kf, part + [kf]
        elif w is not None and w in producer:                # (x * 0.5) * u
            kh = producer[w]
            if only_consumer(w) == km and half_of(kh, x):
                last, part = km, part + [kh]
        if last is not None:
            found[last] = (x, nodes[last].output[0], set(part))
    return found


def _find_silus(nodes, consumers, graph_outputs):
    """Match ``Mul(x, Sigmoid(x))`` whose sigmoid nothing else reads: SiLU (Swish), as exporters write
    ``nn.SiLU``. Returns ``{index of the Mul: (x, y, {indices of the Sigmoid and the Mul})}``."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output}
    found = {}
    for km, m in enumerate(nodes):
        if m.op_type != "Mul" or len(m.input) != 2:
            continue
        for s_name, x in ((m.input[0], m.input[1]), (m.input[1], m.input[0])):
            ks = producer.get(s_name)
            if ks is not None and nodes[ks].op_type == "Sigmoid" and list(nodes[ks].input) == [x] \
                    and consumers.get(s_name) == [km] and s_name not in graph_outputs:
                found[km] = (x, m.output[0], {ks, km})
                break
    return found


# ---- the driver ------------------------------------------------------------------------------

def _load_model(model_or_path):
    onnx, _, _ = _onnx()
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    try:
        if isinstance(model_or_path, (bytes, bytearray)):
            return onnx.load_model_from_string(bytes(model_or_path))
        return onnx.load(os.fspath(model_or_path))
    except TorchLeanError:
        raise
    except Exception as e:  # protobuf decode errors, missing files, external data
        raise IRError(f"from_onnx: cannot read the ONNX model: {type(e).__name__}: {e}") from None


def from_onnx(model_or_path, input_shapes=None) -> tuple:
    """Translate an ONNX model (a ``ModelProto``, a path or serialized bytes) to ``(graph, payload)``.

    Graph inputs (those that are not initializers) become ``input`` nodes in
    order; their shapes must be static unless ``input_shapes`` (a list of
    shapes, or a dict name -> shape) fixes them. The outputs of the ONNX graph
    are the IR graph's outputs. Supported ops are the keys of :data:`CONVERTERS`,
    and the Erf form of GELU becomes one ``gelu`` node (one fused kernel instead of five), ``x * sigmoid(x)``
    one ``silu`` node.

        >>> import numpy as np
        >>> from onnx import helper, TensorProto
        >>> from torchlean import ir
        >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
        >>> m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
        >>> g, payload = ir.from_onnx(m)
        >>> [n.kind for n in g.nodes]
        ['input', 'relu']
    """
    model = _load_model(model_or_path)
    try:
        return _convert(model, input_shapes)
    except TorchLeanError:
        raise
    except Exception as e:  # a damaged model can hold anything; report it, never crash
        raise IRError(f"from_onnx: malformed ONNX model: {type(e).__name__}: {e}") from None


#: Models of an older opset are first brought to this one by onnx.version_converter (where it can:
#: otherwise the converters below read the older forms themselves).
MIN_OPSET = 13


def _opset(model) -> int:
    opset = 1
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = int(imp.version)
    return opset


def _upgraded(model):
    """``model`` converted to :data:`MIN_OPSET` when older (the model itself when the converter fails)."""
    if _opset(model) >= MIN_OPSET:
        return model
    try:
        from onnx import version_converter
        return version_converter.convert_version(model, MIN_OPSET)
    except Exception:  # noqa: BLE001 - an op the converter has no adapter for: read the older forms
        return model


def _convert(model, input_shapes):
    onnx, helper, numpy_helper = _onnx()
    model = _upgraded(model)
    opset = _opset(model)
    graph = model.graph
    b = _Builder()
    env: dict = {}
    for init in graph.initializer:
        try:
            env[init.name] = numpy_helper.to_array(init)
        except Exception as e:
            raise IRError(f"from_onnx: initializer {init.name!r} cannot be read: {e}") from None
    n_in = 0
    int_inputs: dict = {}
    for vi in graph.input:
        if vi.name in env:
            continue
        b.where = f"graph input {vi.name!r}"
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            b.fail("only tensor inputs are supported")
        if tt.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            int_inputs[n_in] = vi.name     # token ids: allowed where the graph reads them as indices
        elif tt.elem_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                  onnx.TensorProto.FLOAT16):
            b.fail(f"element type {onnx.TensorProto.DataType.Name(tt.elem_type)} is not a float or "
                   f"integer type")
        given = None
        if isinstance(input_shapes, dict):
            given = input_shapes.get(vi.name)
        elif input_shapes is not None and n_in < len(input_shapes):
            given = input_shapes[n_in]
        if given is not None:
            shape = tuple(int(d) for d in given)
        else:
            if not tt.HasField("shape"):
                b.fail("has no shape; pass input_shapes")
            shape = []
            for d in tt.shape.dim:
                if not d.HasField("dim_value") or d.dim_value < 0:
                    b.fail(f"dimension {d.dim_param or '?'!r} is not static; pass input_shapes")
                shape.append(int(d.dim_value))
            shape = tuple(shape)
        if any(d < 0 for d in shape):
            b.fail(f"negative dimension in {shape}")
        env[vi.name] = b._append("input", (), shape, {"index": n_in})
        n_in += 1

    _run_nodes(b, list(graph.node), env, [o.name for o in graph.output], opset, fuse=True)

    b.where = "graph outputs"
    outputs = [o.name for o in graph.output]
    if not outputs:
        b.fail("the ONNX graph has no outputs")
    out_ids = tuple(int(b.node(_get(b, env, name))) for name in outputs)
    g = Graph(b.nodes, out_ids)
    check(g, b.payload)
    as_numbers = sorted(set(int_inputs) - index_inputs(g))
    if as_numbers:
        b.where = f"graph input {int_inputs[as_numbers[0]]!r}"
        b.fail("an integer input is supported where the graph only indexes with it (Gather, GatherElements); "
               "this one is also used as a number")
    return g, b.payload


def _run_nodes(b, nodes, env, outputs, opset, fuse=False):
    """Convert ``nodes`` in order into ``env`` (ONNX names -> IR refs or constants). ``fuse``: match the
    Erf form of GELU and ``x * sigmoid(x)`` (SiLU) first (the top-level graph). If and Loop are unfolded here: an If whose condition
    is a constant becomes its chosen branch, a Loop with a constant trip count and constant conditions
    becomes that many copies of its body; a condition or count computed at run time raises IRError."""
    onnx, helper, numpy_helper = _onnx()
    consumers = defaultdict(list)
    for k, n in enumerate(nodes):
        for name in n.input:
            consumers[name].append(k)

    def const_of(name):
        if name in env and not isinstance(env[name], _Ref):
            return env[name]
        for n in nodes:
            if n.op_type == "Constant" and name in n.output:
                return _constant_value(b, n, helper, numpy_helper)
        return None

    fused = {}
    if fuse:
        fused = {k: ("gelu",) + v for k, v in _find_gelus(nodes, const_of, consumers, set(outputs)).items()}
        taken = set().union(*(p for _, _, _, p in fused.values())) if fused else set()
        fused.update((k, ("silu",) + v) for k, v in _find_silus(nodes, consumers, set(outputs)).items()
                     if not v[2] & taken)
    in_pattern = set().union(*(p for _, _, _, p in fused.values())) if fused else set()
    for k, n in enumerate(nodes):
        b.where = f"ONNX node {n.name or k!r} ({n.op_type})"
        if n.domain not in ("", "ai.onnx"):
            b.fail(f"op domain {n.domain!r} is not supported")
        if k in fused:
            kind, x, y, _ = fused[k]
            env[y] = b.add(kind, _get(b, env, x))
            continue
        if k in in_pattern:
            continue
        if n.op_type == "Constant":
            env[n.output[0]] = _constant_value(b, n, helper, numpy_helper)
            continue
        if n.op_type in ("If", "Loop"):
            (_if if n.op_type == "If" else _loop)(b, n, env, opset)
            continue
        if n.op_type not in CONVERTERS:
            b.fail(f"unsupported ONNX op {n.op_type!r}")
        fn, known = CONVERTERS[n.op_type]
        attrs = {}
        for at in n.attribute:
            if at.name not in known:
                b.fail(f"unsupported attribute {at.name!r} of {n.op_type}")
            attrs[at.name] = helper.get_attribute_value(at)
        ins = [None if name == "" else _get(b, env, name) for name in n.input]
        outs = [o for o in n.output if o]
        b.n_outputs = len(n.output)
        if n.op_type not in _MULTI_OUTPUT:
            extra = [o for o in outs[1:] if consumers.get(o) or o in outputs]
            if extra:
                b.fail(f"output {extra[0]!r} is used, but only the first output of {n.op_type} is supported")
        if not outs:
            continue
        got = fn(b, ins, attrs, opset)
        if isinstance(got, _Outputs):
            for name, v in zip(n.output, got):
                if name:
                    env[name] = v
        else:
            env[outs[0]] = got


#: Most iterations a Loop is unrolled to (each copies its body into the graph).
LOOP_UNROLL_LIMIT = 1024


def _static_flag(b, v, what) -> bool:
    if isinstance(v, _Ref):
        b.fail(f"{what} is computed at run time; only a constant one is folded (the branches and "
               f"bodies of shape tests), not a data-dependent one")
    a = np.asarray(v)
    if a.size != 1:
        b.fail(f"{what} must hold one value, got shape {a.shape}")
    return bool(a.reshape(-1)[0])


def _subgraph(b, n, name):
    for at in n.attribute:
        if at.name == name:
            return _onnx()[1].get_attribute_value(at)
    b.fail(f"attribute {name} is missing")


def _run_subgraph(b, sub, env, bound: dict, opset):
    """The values of ``sub``'s outputs, its nodes converted in a scope that sees ``env`` (the outer
    names), its initializers and ``bound`` (its formal inputs)."""
    numpy_helper = _onnx()[2]
    where = b.where
    scope = dict(env)
    for init in sub.initializer:
        scope[init.name] = numpy_helper.to_array(init)
    scope.update(bound)
    outs = [o.name for o in sub.output]
    _run_nodes(b, list(sub.node), scope, outs, opset)
    b.where = where
    return [_get(b, scope, o) for o in outs]


def _if(b, n, env, opset):
    branch = _subgraph(b, n, "then_branch" if _static_flag(b, _get(b, env, n.input[0]), "the condition of If")
                       else "else_branch")
    vals = _run_subgraph(b, branch, env, {}, opset)
    if len(vals) != len(n.output):
        b.fail(f"the chosen branch gives {len(vals)} outputs for {len(n.output)}")
    for name, v in zip(n.output, vals):
        if name:
            env[name] = v


def _loop(b, n, env, opset):
    body = _subgraph(b, n, "body")
    m = None if len(n.input) < 1 or n.input[0] == "" else _get(b, env, n.input[0])
    if m is None:
        b.fail("a Loop without a trip count M is not folded (its end depends on run-time values)")
    if isinstance(m, _Ref):
        b.fail("the trip count M of Loop is computed at run time; only a constant one is unrolled")
    m = int(np.asarray(m).reshape(-1)[0])
    if m > LOOP_UNROLL_LIMIT:
        b.fail(f"trip count {m} exceeds the unrolling limit {LOOP_UNROLL_LIMIT}")
    cond = True if len(n.input) < 2 or n.input[1] == "" else _static_flag(b, _get(b, env, n.input[1]),
                                                                          "the condition of Loop")
    carried = [_get(b, env, name) for name in n.input[2:]]
    names = [i.name for i in body.input]
    if len(names) != 2 + len(carried):
        b.fail(f"the body takes {len(names)} inputs for {len(carried)} loop-carried values")
    scans: list = []
    i = 0
    while i < m and cond:
        bound = {names[0]: np.array(i, dtype=np.int64), names[1]: np.array(cond)}
        bound.update(zip(names[2:], carried))
        out = _run_subgraph(b, body, env, bound, opset)
        cond = _static_flag(b, out[0], "the condition the Loop body returns")
        carried = out[1:1 + len(carried)]
        scans.append(out[1 + len(carried):])
        i += 1
    n_scan = len(body.output) - 1 - len(carried)
    results = list(carried)
    for j in range(n_scan):
        items = [it[j] for it in scans]
        if not items:
            b.fail("a Loop that runs no iteration has empty scan outputs, whose shape the body does not fix")
        if all(not isinstance(v, _Ref) for v in items):
            results.append(np.stack([np.asarray(v) for v in items]))
        else:
            results.append(b.add("concat", *[b.add("unsqueeze", v, dim=0) for v in items], axis=0))
    for name, v in zip(n.output, results):
        if name:
            env[name] = v


def _get(b, env, name):
    if name not in env:
        b.fail(f"input {name!r} is not defined before use")
    return env[name]


def _constant_value(b, n, helper, numpy_helper):
    if len(n.attribute) != 1:
        b.fail("Constant needs exactly one value attribute")
    at = n.attribute[0]
    v = helper.get_attribute_value(at)
    if at.name == "value":
        return numpy_helper.to_array(v)
    if at.name in ("value_float", "value_floats"):
        return np.asarray(v, dtype=np.float32)
    if at.name in ("value_int", "value_ints"):
        return np.asarray(v, dtype=np.int64)
    b.fail(f"Constant attribute {at.name!r} is not supported")
