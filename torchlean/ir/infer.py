"""The IR checker: well-formedness and shape inference from the spec's shape rules.

:func:`check` walks the nodes once, in order, and infers every node's shape from
the same shape rules that the front end and the tape use (``SPEC[kind].shape``);
nothing about shapes is written twice.
"""

from __future__ import annotations

import numpy as np

from ..errors import IRError, TorchLeanError
from ..spec import SPEC
from .graph import Graph, KINDS, Node, format_node, kind_info, spec_args

__all__ = ["check", "node_error"]

_CONTEXT = 2  # nodes shown on each side of the offending one


def node_error(g: Graph, i: int, msg: str, shapes=None) -> IRError:
    """An IRError for node ``i``: the message, then the node's neighbourhood and parents.

    ``shapes`` (the shapes inferred so far) is used to print each shown node's
    inferred shape next to its declared one when they differ.
    """
    nodes = g.nodes
    show = set(range(max(0, i - _CONTEXT), min(len(nodes), i + _CONTEXT + 1)))
    n = nodes[i] if 0 <= i < len(nodes) else None
    if isinstance(n, Node) and isinstance(n.parents, tuple):
        show |= {p for p in n.parents if isinstance(p, int) and 0 <= p < len(nodes)}
    lines = [msg, "  near:"]
    last = None
    for j in sorted(show):
        if last is not None and j != last + 1:
            lines.append("      ...")
        mark = ">>" if j == i else "  "
        line = f"  {mark} {format_node(nodes[j])}"
        if shapes is not None and j < len(shapes) and isinstance(nodes[j], Node) \
                and shapes[j] != nodes[j].out_shape:
            line += f"  (inferred {shapes[j]})"
        lines.append(line)
        last = j
    return IRError("\n".join(lines))


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_shape(s) -> bool:
    return isinstance(s, tuple) and all(_is_int(d) and d >= 0 for d in s)


def check(g: Graph, payload=None) -> list:
    """Check ``g`` and return every node's shape (a list of tuples, one per node).

    Invariants established, in node order (the first violation raises
    :class:`~torchlean.errors.IRError` naming the node id, its kind, its parents'
    shapes and the surrounding nodes):

    1. ``g`` has at least one node; ``g.nodes[i]`` is a :class:`Node` with ``id == i``.
    2. ``kind`` is in :data:`~torchlean.ir.KINDS` (an ``input``/``const``/``param``
       or a registered spec op).
    3. ``parents`` are ints with ``0 <= p < id`` (parents come first), and their
       number is the kind's arity (spec arity minus payload inputs; variadic
       kinds need at least one).
    4. ``out_shape`` is a tuple of non-negative ints; ``attrs`` a dict with str keys.
    5. ``input`` nodes carry ``attrs["index"]``; the indices are exactly
       ``0 .. k-1`` for the graph's ``k`` inputs. An input's declared shape is the truth.
    6. With a ``payload``: every payload entry a node's kind needs is present
       (``value`` for const/param, the :data:`~torchlean.ir.PARAM_INPUTS` names for
       parameterised kinds), every entry belongs to such a node, and
       const/param shapes are the payload arrays' shapes. Without a payload,
       const/param shapes are their declared shapes, and the shape of a
       parameterised node (whose weights only the payload knows) is its declared
       shape; everything downstream is still inferred from them.
    7. Every other node's shape is ``SPEC[kind].shape(*parent_shapes, **attrs)``
       (parameter shapes in their spec slots), and equals its declared ``out_shape``.
    8. ``g.outputs`` is a non-empty tuple of valid node ids.

    Any exception a shape rule raises on a malformed node becomes an IRError too,
    so a loaded file can never crash the checker.

        >>> from torchlean import ir
        >>> g = ir.Graph([ir.Node(0, "input", (), (3,), {"index": 0}),
        ...               ir.Node(1, "exp", (0,), (4,))])
        >>> try:
        ...     ir.check(g)
        ... except ir.IRError as e:
        ...     print(str(e).splitlines()[0])
        node 1 (exp): declared shape (4,) but the shape rule gives (3,); parent shapes (3,)
    """
    if not isinstance(g, Graph):
        raise IRError(f"check: expected an ir.Graph, got {type(g).__name__}")
    if not g.nodes:
        raise IRError("check: the graph has no nodes")
    shapes: list = []
    input_index: dict = {}
    for i, n in enumerate(g.nodes):
        shapes.append(_check_node(g, i, n, shapes, payload, input_index))
    if sorted(input_index) != list(range(len(input_index))):
        raise IRError(f"check: input indices {sorted(input_index)} must be 0 .. {len(input_index) - 1} "
                      f"(input nodes {sorted(input_index.values())})")
    _check_outputs(g)
    if payload is not None:
        _check_payload_keys(g, payload)
    return shapes


def _check_node(g, i, n, shapes, payload, input_index):
    def fail(msg):
        raise node_error(g, i, msg, shapes)

    if not isinstance(n, Node):
        fail(f"node {i}: expected an ir.Node, got {type(n).__name__}")
    head = f"node {i} ({n.kind})" if isinstance(n.kind, str) else f"node {i}"
    if not _is_int(n.id) or n.id != i:
        fail(f"{head}: id {n.id!r} must equal its position {i}")
    if not isinstance(n.kind, str) or n.kind not in KINDS:
        fail(f"{head}: unknown kind {n.kind!r} (not in ir.KINDS)")
    info = kind_info(n.kind)
    if not isinstance(n.parents, tuple) or not all(_is_int(p) for p in n.parents):
        fail(f"{head}: parents must be a tuple of ints, got {n.parents!r}")
    for p in n.parents:
        if not 0 <= p < i:
            fail(f"{head}: parent {p} is not an earlier node (parents must have ids in 0 .. {i - 1})")
    k = len(n.parents)
    if (info.arity >= 0 and k != info.arity) or (info.arity < 0 and k < 1):
        want = "at least 1" if info.arity < 0 else str(info.arity)
        fail(f"{head}: takes {want} parent(s), got {k}")
    if not _is_shape(n.out_shape):
        fail(f"{head}: out_shape must be a tuple of non-negative ints, got {n.out_shape!r}")
    if not isinstance(n.attrs, dict) or not all(isinstance(a, str) for a in n.attrs):
        fail(f"{head}: attrs must be a dict with str keys, got {n.attrs!r}")
    parent_shapes = tuple(shapes[p] for p in n.parents)
    ctx = f"; parent shapes {', '.join(str(s) for s in parent_shapes) or 'none'}"

    if n.kind == "input":
        idx = n.attrs.get("index")
        if not _is_int(idx) or idx < 0:
            fail(f"{head}: attrs['index'] must be a non-negative int, got {idx!r}")
        if int(idx) in input_index:
            fail(f"{head}: input index {idx} is also used by node {input_index[int(idx)]}")
        input_index[int(idx)] = i
        return n.out_shape

    param_shapes = {}
    for name in info.params:
        if payload is None:
            continue
        a = payload.get((i, name))
        if a is None:
            fail(f"{head}: payload entry {(i, name)!r} is missing")
        if not isinstance(a, np.ndarray):
            fail(f"{head}: payload entry {(i, name)!r} is not an array ({type(a).__name__})")
        param_shapes[name] = tuple(a.shape)

    if n.kind in ("const", "param"):
        if payload is not None and param_shapes["value"] != n.out_shape:
            fail(f"{head}: declared shape {n.out_shape} but the payload value has shape "
                 f"{param_shapes['value']}")
        return n.out_shape
    if info.params and payload is None:
        return n.out_shape

    ins = spec_args(n, parent_shapes, {(i, k): v for k, v in param_shapes.items()})
    try:
        got = SPEC[n.kind].shape(*ins, **n.attrs)
    except TorchLeanError as e:
        fail(f"{head}: {e}{ctx}")
    except Exception as e:  # a malformed attribute can trip a rule in any way
        fail(f"{head}: bad attributes or inputs ({type(e).__name__}: {e}){ctx}")
    try:
        got = tuple(int(d) for d in got)
    except (TypeError, ValueError):
        fail(f"{head}: the shape rule returned {got!r}, not a shape{ctx}")
    if got != n.out_shape:
        pn = "" if not info.params else \
            "; payload shapes " + ", ".join(f"{k} {v}" for k, v in param_shapes.items())
        fail(f"{head}: declared shape {n.out_shape} but the shape rule gives {got}{ctx}{pn}")
    return got


def _check_outputs(g):
    outs = g.outputs
    if not isinstance(outs, tuple) or not outs:
        raise IRError(f"check: outputs must be a non-empty tuple of node ids, got {outs!r}")
    for o in outs:
        if not _is_int(o) or not 0 <= o < len(g.nodes):
            raise IRError(f"check: output {o!r} is not a node id (the graph has {len(g.nodes)} nodes)")


def _check_payload_keys(g, payload):
    for key in payload:
        ok = isinstance(key, tuple) and len(key) == 2 and _is_int(key[0]) and 0 <= key[0] < len(g.nodes)
        if ok:
            info = kind_info(g.nodes[key[0]].kind)
            ok = key[1] in info.params
        if not ok:
            raise IRError(f"check: payload entry {key!r} belongs to no node that takes it "
                          f"(node kinds take: " + _takes(g) + ")")


def _takes(g) -> str:
    parts = []
    for n in g.nodes:
        info = kind_info(n.kind)
        if info.params:
            parts.append(f"{n.id}: {', '.join(info.params)}")
        if len(parts) > 6:
            parts.append("...")
            break
    return "; ".join(parts) or "none"

