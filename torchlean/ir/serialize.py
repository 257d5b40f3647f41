"""Saving and loading IR graphs: JSON ``"torchlean.ir.v1"`` plus a safetensors side file.

The format is described in ``docs/ir-format.md``. Attributes round-trip exactly:
tuples, lists, None, bools, ints, floats (non-finite ones included), strings,
slices, Ellipsis, dicts, NumPy dtypes, NumPy scalars and small arrays (index arrays, targets,
boolean masks) are each written with an explicit encoding. Payload arrays go to
``path + ".safetensors"`` (only when the payload is not empty), whose SHA-256
is recorded in the JSON so a stale or damaged side file is detected.

Loading validates every field and then runs :func:`~torchlean.ir.check` with the
payload; a malformed, truncated or mismatched file raises
:class:`~torchlean.errors.IRError`, never another exception.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np

from ..fileio import atomic_write
from ..errors import BackendUnavailableError, IRError, TorchLeanError
from .graph import Graph, Node, Payload
from .infer import check

__all__ = ["save", "load", "dumps", "loads", "FORMAT", "encode_attr", "decode_attr"]

FORMAT = "torchlean.ir.v1"
SIDE_SUFFIX = ".safetensors"

_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64")
_TOP_KEYS = {"format", "nodes", "outputs", "payload"}
_NODE_KEYS = {"id", "kind", "parents", "out_shape", "attrs"}
_PAYLOAD_KEYS = {"file", "sha256", "tensors"}
_TENSOR_KEYS = {"node", "name", "dtype", "shape"}


def _safetensors():
    try:
        import safetensors.numpy as stn
    except ImportError:
        raise BackendUnavailableError(
            "IR payloads are stored with safetensors, which is not installed: "
            "pip install safetensors") from None
    return stn


# ---- attribute encoding ---------------------------------------------------------------------

def _enc_float(v: float):
    if math.isfinite(v):
        return v
    return {"$float": "nan" if v != v else ("inf" if v > 0 else "-inf")}


def _enc_scalar_value(v, kind):
    if kind == "b":
        return bool(v)
    if kind in "iu":
        return int(v)
    return _enc_float(float(v))


def encode_attr(v, where: str = "attr"):
    """JSON form of one attribute value (see docs/ir-format.md); IRError if unsupported."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return _enc_float(v)
    if isinstance(v, tuple):
        return [encode_attr(x, where) for x in v]
    if isinstance(v, list):
        return {"$list": [encode_attr(x, where) for x in v]}
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise IRError(f"save: {where}: dict attributes need str keys, got {list(v)!r}")
        return {"$dict": [[k, encode_attr(x, where)] for k, x in v.items()]}
    if isinstance(v, slice):
        return {"$slice": [encode_attr(v.start, where), encode_attr(v.stop, where),
                           encode_attr(v.step, where)]}
    if v is Ellipsis:
        return {"$ellipsis": None}
    if isinstance(v, np.ndarray):
        if v.dtype.name not in _DTYPES:
            raise IRError(f"save: {where}: arrays of dtype {v.dtype} cannot be stored")
        flat = [_enc_scalar_value(x, v.dtype.kind) for x in v.reshape(-1).tolist()]
        return {"$array": {"dtype": v.dtype.name, "shape": list(v.shape), "data": flat}}
    if isinstance(v, np.dtype):
        if v.name not in _DTYPES:
            raise IRError(f"save: {where}: dtype {v} cannot be stored")
        return {"$dtype": v.name}
    if isinstance(v, np.generic):
        if v.dtype.name not in _DTYPES:
            raise IRError(f"save: {where}: scalars of dtype {v.dtype} cannot be stored")
        return {"$scalar": {"dtype": v.dtype.name, "value": _enc_scalar_value(v.item(), v.dtype.kind)}}
    raise IRError(f"save: {where}: cannot store a value of type {type(v).__name__}: {v!r}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _dec_float(v, where):
    if isinstance(v, float) or _is_int(v):
        return float(v)
    if isinstance(v, dict) and set(v) == {"$float"} and v["$float"] in ("nan", "inf", "-inf"):
        return float(v["$float"])
    raise IRError(f"load: {where}: expected a float, got {v!r}")


def _dec_scalar_value(v, dtype: np.dtype, where):
    kind = dtype.kind
    if kind == "b":
        if not isinstance(v, bool):
            raise IRError(f"load: {where}: expected a bool, got {v!r}")
        return v
    if kind in "iu":
        info = np.iinfo(dtype)
        if not _is_int(v) or not info.min <= v <= info.max:
            raise IRError(f"load: {where}: expected an int in the range of {dtype}, got {v!r}")
        return v
    return _dec_float(v, where)


def _dec_dtype(d, where) -> np.dtype:
    if not isinstance(d, str) or d not in _DTYPES:
        raise IRError(f"load: {where}: unknown dtype {d!r} (known: {', '.join(_DTYPES)})")
    return np.dtype(d)


def _dec_shape(s, where) -> tuple:
    if not isinstance(s, list) or not all(_is_int(d) and 0 <= d < 2 ** 62 for d in s):
        raise IRError(f"load: {where}: expected a shape (list of non-negative ints), got {s!r}")
    return tuple(s)


def decode_attr(v, where: str = "attr"):
    """Inverse of :func:`encode_attr`; IRError on anything it would not have written."""
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise IRError(f"load: {where}: non-finite floats must be written as {{\"$float\": ...}}")
        return v
    if isinstance(v, list):
        return tuple(decode_attr(x, where) for x in v)
    if not isinstance(v, dict) or len(v) != 1:
        raise IRError(f"load: {where}: malformed attribute value {v!r}")
    (tag, body), = v.items()
    if tag == "$float":
        return _dec_float(v, where)
    if tag == "$list":
        if not isinstance(body, list):
            raise IRError(f"load: {where}: $list needs a list, got {body!r}")
        return [decode_attr(x, where) for x in body]
    if tag == "$dict":
        if not isinstance(body, list) or not all(
                isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str) for kv in body):
            raise IRError(f"load: {where}: $dict needs a list of [str, value] pairs")
        keys = [kv[0] for kv in body]
        if len(set(keys)) != len(keys):
            raise IRError(f"load: {where}: $dict has repeated keys {keys}")
        return {k: decode_attr(x, where) for k, x in body}
    if tag == "$slice":
        if not isinstance(body, list) or len(body) != 3:
            raise IRError(f"load: {where}: $slice needs [start, stop, step], got {body!r}")
        parts = [decode_attr(x, where) for x in body]
        if not all(p is None or _is_int(p) for p in parts):
            raise IRError(f"load: {where}: slice bounds must be ints or null, got {body!r}")
        return slice(*parts)
    if tag == "$ellipsis":
        if body is not None:
            raise IRError(f"load: {where}: $ellipsis takes null")
        return Ellipsis
    if tag == "$array":
        if not isinstance(body, dict) or set(body) != {"dtype", "shape", "data"}:
            raise IRError(f"load: {where}: $array needs exactly dtype, shape and data")
        dt = _dec_dtype(body["dtype"], where)
        shape = _dec_shape(body["shape"], where)
        data = body["data"]
        if not isinstance(data, list) or len(data) != math.prod(shape):
            raise IRError(f"load: {where}: $array of shape {shape} needs {math.prod(shape)} "
                          f"entries in data")
        vals = [_dec_scalar_value(x, dt, where) for x in data]
        return np.array(vals, dtype=dt).reshape(shape)
    if tag == "$dtype":
        return _dec_dtype(body, where)
    if tag == "$scalar":
        if not isinstance(body, dict) or set(body) != {"dtype", "value"}:
            raise IRError(f"load: {where}: $scalar needs exactly dtype and value")
        dt = _dec_dtype(body["dtype"], where)
        return dt.type(_dec_scalar_value(body["value"], dt, where))
    raise IRError(f"load: {where}: unknown attribute tag {tag!r}")


# ---- documents ------------------------------------------------------------------------------

def _doc(g: Graph, payload, side_name, digest) -> dict:
    nodes = []
    for n in g.nodes:
        attrs = {k: encode_attr(v, f"node {n.id} ({n.kind}) attr {k!r}") for k, v in n.attrs.items()}
        nodes.append({"id": n.id, "kind": n.kind, "parents": list(n.parents),
                      "out_shape": list(n.out_shape), "attrs": attrs})
    tensors = [{"node": i, "name": name, "dtype": a.dtype.name, "shape": list(a.shape)}
               for (i, name), a in sorted(payload.items())]
    return {"format": FORMAT, "nodes": nodes, "outputs": list(g.outputs),
            "payload": {"file": side_name, "sha256": digest, "tensors": tensors}}


def _payload_bytes(payload) -> bytes:
    stn = _safetensors()
    arrays = {}
    for (i, name), a in payload.items():
        if a.dtype.name not in _DTYPES:
            raise IRError(f"save: payload entry {(i, name)!r} has dtype {a.dtype}, not storable")
        arrays[f"{i}/{name}"] = np.array(a, order="C", copy=True)  # ascontiguousarray makes 0-d 1-d
    return stn.save(arrays)


def dumps(g: Graph, payload=None, side_name=None, side_bytes=None) -> str:
    """The JSON text of ``g`` (payload described, not included: see :func:`save`)."""
    payload = Payload(payload or {})
    digest = hashlib.sha256(side_bytes).hexdigest() if side_bytes is not None else None
    return json.dumps(_doc(g, payload, side_name, digest), allow_nan=False, indent=1)


def save(g: Graph, payload, path) -> None:
    """Write ``g`` to ``path`` (JSON) and a non-empty payload to ``path + ".safetensors"``.

    The graph is checked with its payload first, so only valid graphs are written.

        >>> import numpy as np, tempfile, os
        >>> from torchlean import ir
        >>> g = ir.Graph([ir.Node(0, "input", (), (3,), {"index": 0}), ir.Node(1, "relu", (0,), (3,))])
        >>> d = tempfile.TemporaryDirectory(); p = os.path.join(d.name, "g.json")
        >>> ir.save(g, None, p)
        >>> ir.load(p)[0] == g
        True
        >>> d.cleanup()
    """
    payload = Payload(payload or {})
    check(g, payload)
    path = os.fspath(path)
    side_name = side_bytes = None
    if len(payload):
        side_bytes = _payload_bytes(payload)
        side_name = os.path.basename(path) + SIDE_SUFFIX
        atomic_write(path + SIDE_SUFFIX, side_bytes)
    atomic_write(path, dumps(g, payload, side_name, side_bytes))


def _reject_constant(name):
    raise IRError(f"load: the JSON contains {name}, which is not valid JSON")


def _parse_doc(doc):
    """Validate the document's structure; return (graph, tensor entries, side file name, digest)."""
    if not isinstance(doc, dict):
        raise IRError(f"load: expected a JSON object at top level, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise IRError(f"load: unsupported format {doc.get('format')!r} (this version reads {FORMAT!r})")
    if set(doc) != _TOP_KEYS:
        raise IRError(f"load: top-level keys must be {sorted(_TOP_KEYS)}, got {sorted(doc)}")
    if not isinstance(doc["nodes"], list):
        raise IRError("load: 'nodes' must be a list")
    nodes = []
    for pos, nd in enumerate(doc["nodes"]):
        where = f"node {pos}"
        if not isinstance(nd, dict) or set(nd) != _NODE_KEYS:
            raise IRError(f"load: {where}: expected an object with keys {sorted(_NODE_KEYS)}")
        if not _is_int(nd["id"]) or not isinstance(nd["kind"], str):
            raise IRError(f"load: {where}: id must be an int and kind a string")
        where = f"node {pos} ({nd['kind']})"
        if not isinstance(nd["parents"], list) or not all(_is_int(p) for p in nd["parents"]):
            raise IRError(f"load: {where}: parents must be a list of ints")
        shape = _dec_shape(nd["out_shape"], where + " out_shape")
        if not isinstance(nd["attrs"], dict):
            raise IRError(f"load: {where}: attrs must be an object")
        attrs = {k: decode_attr(v, f"{where} attr {k!r}") for k, v in nd["attrs"].items()}
        nodes.append(Node(nd["id"], nd["kind"], tuple(nd["parents"]), shape, attrs))
    outs = doc["outputs"]
    if not isinstance(outs, list) or not all(_is_int(o) for o in outs):
        raise IRError("load: 'outputs' must be a list of node ids")
    pl = doc["payload"]
    if not isinstance(pl, dict) or set(pl) != _PAYLOAD_KEYS:
        raise IRError(f"load: 'payload' must be an object with keys {sorted(_PAYLOAD_KEYS)}")
    tensors = pl["tensors"]
    if not isinstance(tensors, list):
        raise IRError("load: payload 'tensors' must be a list")
    entries = {}
    for t in tensors:
        if not isinstance(t, dict) or set(t) != _TENSOR_KEYS or not _is_int(t["node"]) \
                or not isinstance(t["name"], str):
            raise IRError(f"load: malformed payload entry {t!r}")
        key = (t["node"], t["name"])
        if key in entries:
            raise IRError(f"load: payload entry {key!r} listed twice")
        entries[key] = (_dec_dtype(t["dtype"], f"payload {key!r}"),
                        _dec_shape(t["shape"], f"payload {key!r}"))
    side, digest = pl["file"], pl["sha256"]
    if entries:
        if not isinstance(side, str) or not side or side != os.path.basename(side) \
                or side in (".", "..") or "\\" in side or "/" in side:
            raise IRError(f"load: payload file name {side!r} must be a plain file name")
        if not isinstance(digest, str) or len(digest) != 64 or \
                any(c not in "0123456789abcdef" for c in digest):
            raise IRError(f"load: payload sha256 {digest!r} is not a hex digest")
    elif side is not None or digest is not None:
        raise IRError("load: payload file given but no tensors listed")
    return Graph(nodes, tuple(outs)), entries, side, digest


def _read_payload(base: Path, entries, side, digest) -> Payload:
    if not entries:
        return Payload()
    stn = _safetensors()
    f = base / side
    try:
        blob = f.read_bytes()
    except OSError as e:
        raise IRError(f"load: cannot read the payload file {str(f)!r}: {e}") from None
    if hashlib.sha256(blob).hexdigest() != digest:
        raise IRError(f"load: payload file {str(f)!r} does not match the SHA-256 in the JSON "
                      f"(damaged, or from another save)")
    try:
        arrays = stn.load(blob)
    except Exception as e:  # safetensors raises its own error types for malformed headers
        raise IRError(f"load: payload file {str(f)!r} is not valid safetensors: {e}") from None
    want = {f"{i}/{n}": (i, n) for i, n in entries}
    if set(arrays) != set(want):
        raise IRError(f"load: payload file holds {sorted(arrays)}, the JSON lists {sorted(want)}")
    out = Payload()
    for k, a in arrays.items():
        dt, shape = entries[want[k]]
        if a.dtype != dt or a.shape != shape:
            raise IRError(f"load: payload entry {want[k]!r} is {a.dtype}{list(a.shape)}, "
                          f"the JSON says {dt}{list(shape)}")
        out[want[k]] = a
    return out


def loads(text, base=".") -> tuple:
    """Parse JSON text (``str`` or ``bytes``); payload files are resolved against ``base``."""
    try:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8")
        doc = json.loads(text, parse_constant=_reject_constant)
    except TorchLeanError:
        raise
    except (ValueError, RecursionError, TypeError) as e:
        raise IRError(f"load: not valid JSON: {e}") from None
    try:
        g, entries, side, digest = _parse_doc(doc)
    except TorchLeanError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as e:
        raise IRError(f"load: malformed document: {type(e).__name__}: {e}") from None
    payload = _read_payload(Path(base), entries, side, digest)
    check(g, payload)
    return g, payload


def load(path) -> tuple:
    """Read a graph written by :func:`save`; returns ``(graph, payload)``, validated and checked."""
    path = Path(os.fspath(path))
    try:
        text = path.read_bytes()
    except OSError as e:
        raise IRError(f"load: cannot read {str(path)!r}: {e}") from None
    return loads(text, base=path.parent)
