"""The IR's data: nodes, graphs, payloads, and the table of node kinds.

A :class:`Graph` is a list of :class:`Node` in topological order, exactly as in
the seeds' ``NN.IR.Graph``: node ``i`` sits at position ``i``, its parents have
smaller ids, and ``outputs`` names the nodes whose values the graph returns
(by default the last node). A :class:`Payload` holds the arrays that are not
computed: the values of ``const``/``param`` nodes and the weights of
parameterised kinds (``linear``, ``conv``, ``layer_norm`` ...), keyed by
``(node_id, name)``.

Node kinds (:data:`KINDS`) are the op names of the spec table plus three kinds
that only the IR has:

* ``input``: a graph input; ``attrs["index"]`` says which argument of
  :func:`~torchlean.ir.evaluate` it is; its declared ``out_shape`` is the truth.
* ``const``: a fixed array, ``payload[(id, "value")]`` (not trained).
* ``param``: a trainable array, ``payload[(id, "value")]``.

Every other kind ``k`` means ``SPEC[k].forward``. A parameterised kind takes some
of its spec inputs from the payload instead of from parent nodes;
:data:`PARAM_INPUTS` lists, per kind, the spec's array arguments in order, with
:data:`PARENTS` marking where the parent values go. So an IR ``linear`` node has
one parent ``x`` and payload entries ``weight``/``bias``, and means spec
``linear(weight, bias, x)``. Adding a parameterised op is one line there; any
other spec op is an IR kind as soon as it is registered.

    >>> from torchlean import ir
    >>> g = ir.Graph([ir.Node(0, "input", (), (2, 3), {"index": 0}),
    ...               ir.Node(1, "relu", (0,), (2, 3))])
    >>> g.outputs
    (1,)
    >>> ir.check(g)
    [(2, 3), (2, 3)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..errors import IRError
from ..spec import SPEC

__all__ = ["Node", "Graph", "Payload", "KINDS", "IR_KINDS", "PARAM_INPUTS", "PARENTS",
           "KindInfo", "kind_info", "spec_args", "format_node"]

#: Marks, in a :data:`PARAM_INPUTS` layout, the slot that the node's parents fill (in order).
PARENTS = "*"

#: Spec argument layout of the parameterised kinds: payload entry names in the
#: spec's positional order, with :data:`PARENTS` where the parent values go.
PARAM_INPUTS: dict[str, tuple] = {
    "linear": ("weight", "bias", PARENTS),
    "linear_nobias": ("weight", PARENTS),
    "embedding": ("weight", PARENTS),
    "conv": (PARENTS, "weight", "bias"),
    "conv_transpose": (PARENTS, "weight", "bias"),
    "layer_norm": (PARENTS, "weight", "bias"),
    "batch_norm_eval": (PARENTS, "weight", "bias", "running_mean", "running_var"),
}

#: Kinds that exist only in the IR, with their parent count.
IR_KINDS: dict[str, int] = {"input": 0, "const": 0, "param": 0}


@dataclass(frozen=True)
class KindInfo:
    """What the IR knows about a kind: parents expected (-1: one or more) and payload names."""
    name: str
    arity: int
    params: tuple = ()
    layout: tuple = (PARENTS,)


def kind_info(kind: str) -> KindInfo | None:
    """The :class:`KindInfo` of ``kind``, or None when no such kind is registered (yet)."""
    if kind in IR_KINDS:
        names = ("value",) if kind in ("const", "param") else ()
        return KindInfo(kind, IR_KINDS[kind], names, ())
    op = SPEC.get(kind)
    if op is None:
        return None
    layout = PARAM_INPUTS.get(kind, (PARENTS,))
    params = tuple(n for n in layout if n != PARENTS)
    arity = op.arity if op.arity < 0 else op.arity - len(params)
    return KindInfo(kind, arity, params, layout)


class _Kinds(Mapping):
    """Live view ``kind -> KindInfo`` over the IR-only kinds and the spec table.

    It is computed on every access, so an op family registered after
    ``torchlean.ir`` was imported is an IR kind at once.
    """

    def __getitem__(self, kind):
        info = kind_info(kind) if isinstance(kind, str) else None
        if info is None:
            raise KeyError(kind)
        return info

    def __iter__(self):
        yield from IR_KINDS
        yield from (k for k in SPEC if k not in IR_KINDS)

    def __len__(self):
        return len(IR_KINDS) + sum(1 for k in SPEC if k not in IR_KINDS)

    def __contains__(self, kind):
        return isinstance(kind, str) and (kind in IR_KINDS or kind in SPEC)

    def __repr__(self):
        return f"KINDS({sorted(self)})"


#: Every node kind: ``"input"``, ``"const"``, ``"param"`` and every spec op name.
KINDS = _Kinds()


def _as_shape(s) -> tuple:
    try:
        return tuple(int(d) if isinstance(d, (int, np.integer)) and not isinstance(d, bool) else d
                     for d in s)
    except TypeError:
        return s


@dataclass(frozen=True)
class Node:
    """One IR node: ``kind`` applied to the values of ``parents`` (and its payload entries).

    ``out_shape`` is the declared result shape (checked by :func:`~torchlean.ir.check`);
    ``attrs`` are the spec op's keyword attributes (for ``input``: ``index``).
    """
    id: int
    kind: str
    parents: tuple = ()
    out_shape: tuple = ()
    attrs: dict = field(default_factory=dict)

    def __post_init__(self):
        # Normalise lists to tuples so graphs compare and hash the same however they were built.
        if isinstance(self.parents, (list, tuple)):
            object.__setattr__(self, "parents", tuple(self.parents))
        if isinstance(self.out_shape, (list, tuple)):
            object.__setattr__(self, "out_shape", _as_shape(self.out_shape))
        if self.attrs is None:
            object.__setattr__(self, "attrs", {})

    def replace(self, **changes) -> "Node":
        """A copy with some fields changed (nodes are immutable)."""
        d = dict(id=self.id, kind=self.kind, parents=self.parents, out_shape=self.out_shape,
                 attrs=dict(self.attrs))
        d.update(changes)
        return Node(**d)


class Graph:
    """Nodes in topological order (id == position) and the ids of the outputs.

    Construction does not validate: :func:`~torchlean.ir.check` does, so a
    malformed graph can be built, inspected and reported on.
    """

    def __init__(self, nodes, outputs=None):
        self.nodes = tuple(nodes)
        if outputs is None:
            outputs = (len(self.nodes) - 1,) if self.nodes else ()
        elif isinstance(outputs, (int, np.integer)) and not isinstance(outputs, bool):
            outputs = (int(outputs),)
        self.outputs = tuple(outputs)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __getitem__(self, i: int) -> Node:
        return self.nodes[i]

    def __eq__(self, other):
        return isinstance(other, Graph) and self.outputs == other.outputs and \
            len(self.nodes) == len(other.nodes) and \
            all(a.id == b.id and a.kind == b.kind and a.parents == b.parents and
                a.out_shape == b.out_shape and attrs_equal(a.attrs, b.attrs)
                for a, b in zip(self.nodes, other.nodes))

    __hash__ = None

    @property
    def inputs(self) -> tuple:
        """Ids of the ``input`` nodes, ordered by their ``index`` attribute."""
        ins = [n for n in self.nodes if n.kind == "input"]
        return tuple(n.id for n in sorted(ins, key=lambda n: n.attrs.get("index", 0)))

    def format(self) -> str:
        """One line per node, ``%i = kind(%p, ...) {attrs} : shape``; outputs marked."""
        lines = [format_node(n) for n in self.nodes]
        lines.append("return " + ", ".join(f"%{o}" for o in self.outputs))
        return "\n".join(lines)

    def __repr__(self):
        return f"Graph({len(self.nodes)} nodes, outputs={self.outputs})"


def _short(v, width=48) -> str:
    if isinstance(v, np.ndarray):
        r = f"array<{v.dtype}{list(v.shape)}>"
    else:
        r = repr(v)
    return r if len(r) <= width else r[:width - 3] + "..."


def format_node(n) -> str:
    """Render a node (or whatever sits in its place) the same way in listings and errors."""
    if not isinstance(n, Node):
        return f"<not a Node: {_short(n)}>"
    ps = ", ".join(f"%{p}" for p in n.parents) if isinstance(n.parents, tuple) else _short(n.parents)
    at = ""
    if isinstance(n.attrs, dict) and n.attrs:
        at = " {" + ", ".join(f"{k}={_short(v)}" for k, v in n.attrs.items()) + "}"
    return f"%{n.id} = {n.kind}({ps}){at} : {n.out_shape}"


class Payload(Mapping):
    """Arrays keyed by ``(node_id, name)``: const/param values and layer weights.

        >>> import numpy as np
        >>> p = Payload({(1, "weight"): np.ones((4, 3)), (1, "bias"): np.zeros(4)})
        >>> p[(1, "weight")].shape
        (4, 3)
        >>> sorted(p.names(1))
        ['bias', 'weight']
    """

    def __init__(self, entries=None):
        self._d: dict = {}
        for k, v in (dict(entries) if entries is not None else {}).items():
            self[k] = v

    def __setitem__(self, key, value):
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], (int, np.integer))
                and not isinstance(key[0], bool) and isinstance(key[1], str)):
            raise IRError(f"payload keys are (node_id, name) pairs, got {key!r}")
        self._d[(int(key[0]), key[1])] = np.asarray(value)

    def __getitem__(self, key):
        return self._d[key]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)

    def names(self, node_id: int) -> set:
        """Names stored for ``node_id``."""
        return {n for (i, n) in self._d if i == node_id}

    def __eq__(self, other):
        if not isinstance(other, Payload) or set(self._d) != set(other._d):
            return False
        return all(self._d[k].dtype == other._d[k].dtype and self._d[k].shape == other._d[k].shape
                   and np.array_equal(self._d[k], other._d[k], equal_nan=self._d[k].dtype.kind in "fc")
                   for k in self._d)

    __hash__ = None

    def __repr__(self):
        body = ", ".join(f"{k}: {_short(v)}" for k, v in sorted(self._d.items()))
        return f"Payload({{{body}}})"


#: Kinds whose parent at the given position is an integer index read at run time.
INDEX_PARENTS: dict[str, int] = {"take_along": 1}


def index_input_bounds(g) -> dict:
    """``{input position: n}`` for the graph inputs that some node reads as an integer index
    (:data:`INDEX_PARENTS`), directly or through ops of the shape family (a reshape, a broadcast):
    their entries must lie in ``[-n, n)``, n the smallest axis they index. Those inputs keep their
    integer dtype where the graph runs; every other input is converted to the graph's float dtype."""
    from ..spec import SPEC
    from ..spec.shape import axis_of
    by_id = {n.id: n for n in g.nodes}
    out: dict = {}
    for n in g.nodes:
        pos = INDEX_PARENTS.get(n.kind)
        if pos is None or pos >= len(n.parents):
            continue
        x = by_id[n.parents[0]].out_shape
        size = x[axis_of(n.kind, n.attrs.get("axis", 0), len(x))] if x else 1
        todo, seen = [n.parents[pos]], set()
        while todo:
            p = by_id.get(todo.pop())
            if p is None or p.id in seen:
                continue
            seen.add(p.id)
            if p.kind == "input":
                k = int(p.attrs["index"])
                out[k] = min(out.get(k, size), size)
            elif p.kind in SPEC and SPEC[p.kind].family == "shape" and p.parents:
                todo.append(p.parents[0])
    return out


def index_inputs(g) -> frozenset:
    """The positions of the inputs :func:`index_input_bounds` finds."""
    return frozenset(index_input_bounds(g))


def spec_args(node: Node, parent_values, payload) -> tuple:
    """The positional arguments of ``SPEC[node.kind].forward`` for ``node``.

    ``parent_values`` are the parents' values in order; payload entries fill the
    slots :data:`PARAM_INPUTS` names. Works on values and on shapes alike (the
    checker passes shapes), so ``payload`` may map to either.
    """
    layout = PARAM_INPUTS.get(node.kind, (PARENTS,))
    args = []
    for slot in layout:
        if slot == PARENTS:
            args.extend(parent_values)
        else:
            args.append(payload[(node.id, slot)])
    return tuple(args)


def attrs_equal(a, b) -> bool:
    """Exact equality of attribute values: same types, same arrays (dtype and shape), NaN == NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and \
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(attrs_equal(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(attrs_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, slice):
        return attrs_equal((a.start, a.stop, a.step), (b.start, b.stop, b.step))
    if isinstance(a, (float, np.floating)):
        return (a != a and b != b) or a == b
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a == b
    return a == b
