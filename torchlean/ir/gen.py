"""Random well-formed IR graphs, for property tests of everything that consumes graphs
(checker, serializer, interpreter, compiler).

Graphs are drawn from the op test registry (:data:`torchlean.testing.opinfo.OPINFOS`):
each new node takes one of its kind's sample inputs, so every op that has an
OpInfo (and is an IR kind) can appear without any per-op code here. Parents are
earlier nodes of the right shape when there are some (with probability
``reuse``), otherwise fresh ``input``/``const`` leaves holding the sample's
arrays; payload inputs of parameterised kinds take the sample's arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import TorchLeanError
from ..spec import SPEC
from ..testing.opinfo import OPINFOS
from .graph import PARENTS, Graph, KINDS, Node, Payload, kind_info, spec_args
from .interpret import DOMAINS

__all__ = ["RandomGraph", "random_graph", "generable_kinds"]


@dataclass
class RandomGraph:
    """A graph, its payload, the inputs to feed it, and every node's value by direct spec calls."""
    graph: Graph
    payload: Payload
    inputs: list
    values: list = field(default_factory=list)


def generable_kinds(exclude=()) -> list:
    """Spec kinds that have an OpInfo, sorted (the default choice of :func:`random_graph`)."""
    return sorted(k for k in OPINFOS if k in KINDS and k in SPEC and k not in exclude)


#: The largest condition number of a matrix a generated graph feeds to a decomposition: a reused value
#: can be (near) singular, an outer sum of two vectors say, where a decomposition is defined but its
#: gradient is not, and no float32 program can stay near the float64 meaning's.
DECOMPOSITION_COND = 1e3


def _ok_for(kind, args, attrs) -> bool:
    guard = DOMAINS.get(kind)
    if guard is not None and guard(*args, **attrs):
        return False
    if kind.startswith("linalg_"):
        for a in args:
            a = np.asarray(a)
            if a.ndim >= 2 and a.dtype.kind == "f" and a.size and \
                    not np.all(np.linalg.cond(a.reshape((-1,) + a.shape[-2:])) < DECOMPOSITION_COND):
                return False
    return True


def random_graph(rng: np.random.Generator, n_ops: int, kinds=None, reuse: float = 0.6) -> RandomGraph:
    """A random well-formed graph of ``n_ops`` op nodes (plus their leaves).

    Outputs are the last node and, at random, a few others. ``values`` are
    computed by calling ``SPEC[kind].forward`` directly, independently of
    :func:`~torchlean.ir.evaluate`.
    """
    kinds = generable_kinds() if kinds is None else list(kinds)
    nodes: list = []
    values: list = []
    payload = Payload()
    inputs: list = []

    def leaf(a):
        i = len(nodes)
        if rng.random() < 0.6:
            nodes.append(Node(i, "input", (), a.shape, {"index": len(inputs)}))
            inputs.append(a)
        else:
            nodes.append(Node(i, "const", (), a.shape, {}))
            payload[(i, "value")] = a
        values.append(a)
        return i

    added = skipped = 0
    while added < n_ops:
        if skipped > 100 * len(kinds):
            raise TorchLeanError(f"random_graph: kinds {sorted(set(kinds))} gave {skipped} draws in a row "
                                 f"whose result is not a float; give a kind with float results")
        kind = kinds[int(rng.integers(len(kinds)))]
        samples = OPINFOS[kind].samples(np.random.default_rng(int(rng.integers(2 ** 32))))
        s = samples[int(rng.integers(len(samples)))]
        # Graphs of float values only: a comparison, an index (an integer result, or an integer
        # input such as take_along's) or an integer cast is discontinuous,
        # so no float32 program can stay within a contract of its float64 meaning next to a tie.
        # And of one float dtype: a program and a tape run a graph in one precision, where a cast
        # between floats would mix float32 and float64 inputs of one op.
        with np.errstate(all="ignore"):
            if kind == "cast" or any(np.asarray(x).dtype.kind in "iu" for x in s.inputs) \
                    or np.asarray(SPEC[kind].forward(*s.inputs, **s.attrs)).dtype.kind != "f":
                skipped += 1
                continue
        added += 1
        skipped = 0
        layout = kind_info(kind).layout
        xs = list(s.inputs)
        n_par = len(xs) - (len(layout) - 1)
        params, parent_arrays, k = {}, [], 0
        for slot in layout:
            if slot == PARENTS:
                parent_arrays, k = xs[k:k + n_par], k + n_par
            else:
                params[slot], k = np.asarray(xs[k]), k + 1
        parents = []
        for a in parent_arrays:
            a = np.asarray(a, dtype=np.float64)
            cands = [j for j, v in enumerate(values) if v.shape == a.shape]
            j = None
            if cands and rng.random() < reuse:
                j = cands[int(rng.integers(len(cands)))]
                trial = [values[p] for p in parents] + [values[j]]
                trial += [np.asarray(x) for x in parent_arrays[len(trial):]]
                if not _ok_for(kind, spec_args(Node(-1, kind), trial,
                                               {(-1, n): v for n, v in params.items()}), s.attrs):
                    j = None
            parents.append(leaf(a) if j is None else j)
        i = len(nodes)
        args = spec_args(Node(i, kind), [values[p] for p in parents],
                         {(i, n): v for n, v in params.items()})
        with np.errstate(all="ignore"):
            y = np.asarray(SPEC[kind].forward(*args, **s.attrs))
        shape = tuple(SPEC[kind].shape(*[np.shape(a) for a in args], **s.attrs))
        nodes.append(Node(i, kind, tuple(parents), shape, dict(s.attrs)))
        for n, v in params.items():
            payload[(i, n)] = v
        values.append(y)
    last = len(nodes) - 1
    extra = {int(j) for j in rng.integers(0, len(nodes), size=int(rng.integers(0, 3)))}
    outs = tuple(sorted(extra - {last})) + (last,)
    return RandomGraph(Graph(nodes, outs), payload, inputs, values)
