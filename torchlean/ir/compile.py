"""The IR compiler: lower a graph to a flat program over a device's kernels.

:func:`compile` turns a checked :class:`~torchlean.ir.Graph` into a :class:`Program`:

* every node is lowered through the one table :data:`LOWERING` (``kind -> tape op``).
  For almost every kind the lowering is the identity — the registry op of the same
  name, run through its runtime rule ``RULES[op]`` over the device kernels ``K``,
  with payload entries supplied in the slots :data:`~torchlean.ir.PARAM_INPUTS`
  names. ``input``/``const``/``param`` nodes become value slots, not steps;
  ``to_device`` and ``cast`` are pass-throughs (a program runs on one device,
  in one float dtype: the ``dtype`` it was compiled for);
* payload arrays are converted to the program's dtype and uploaded **once**;
* the program is a flat list of steps whose argument slots are precomputed, so a
  call is one loop: no shape rules, no dispatch, no tape bookkeeping.

This is the Python form of the seeds' ``IRExec`` bridge: the compiled forward of
node ``i`` is the runtime rule of its kind on the values of its parents, and
:func:`~torchlean.ir.check_equivalence` checks it, node by node, against
:func:`~torchlean.ir.evaluate` (the meaning).

    >>> import numpy as np
    >>> from torchlean import ir
    >>> g = ir.Graph([ir.Node(0, "input", (), (2, 3), {"index": 0}),
    ...               ir.Node(1, "linear", (0,), (2, 4)),
    ...               ir.Node(2, "relu", (1,), (2, 4)),
    ...               ir.Node(3, "sum", (2,), ())])
    >>> payload = ir.Payload({(1, "weight"): np.ones((4, 3)), (1, "bias"): np.zeros(4)})
    >>> prog = ir.compile(g, payload)
    >>> float(prog(np.ones((2, 3))))
    24.0
    >>> grads = prog.backward()
    >>> grads[(1, "weight")].tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0], [2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]

Values in and out are device arrays (NumPy on ``"cpu"``, CuPy on ``"cuda"``); the
front end's :func:`~torchlean.ir.compile_module` wraps them in Tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..autograd import Node as TapeNode
from ..autograd import RULES, sweep
from ..errors import AutogradError, DeviceError, IRError, ShapeError, TorchLeanError
from ..kernels import get_kernels
from ..spec import SPEC
from .graph import PARAM_INPUTS, PARENTS, Graph, Node, format_node, index_inputs
from .infer import check

__all__ = ["compile", "Program", "Lowering", "LOWERING", "missing_lowerings", "NON_TRAINABLE"]

#: Payload entry names that are state, not trainable weights: they get no gradient.
NON_TRAINABLE = frozenset({"running_mean", "running_var"})

_ndarray = np.ndarray


@dataclass(frozen=True)
class Lowering:
    """How one IR kind runs in a program: the tape op whose runtime rule it uses.

    ``op=None`` lowers the node to a pass-through of its only parent (no step, the
    node's value *is* its parent's value and the gradient flows through unchanged);
    with ``passes`` given, only the nodes whose attributes it accepts pass through, and the
    others run the rule of their kind.
    """
    kind: str
    op: str | None
    why: str = ""
    passes: object = None

    def passes_through(self, attrs) -> bool:
        return self.op is None and (self.passes is None or self.passes(attrs))


#: Kinds whose lowering is not the identity.
_LOWER_OVERRIDES: dict[str, Lowering] = {
    "to_device": Lowering("to_device", None, "a program runs on one device: moves are pass-throughs"),
    "cast": Lowering("cast", None, "a program computes in one float dtype: float casts are pass-throughs, "
                     "casts to integers and bools run", lambda attrs: np.dtype(attrs["dtype"]).kind == "f"),
}


class _LoweringTable(Mapping):
    """Live view ``kind -> Lowering`` over the spec table (like :data:`~torchlean.ir.KINDS`).

    The default is the identity (the op of the same name); :data:`_LOWER_OVERRIDES`
    lists the exceptions. ``input``, ``const`` and ``param`` are not steps and are
    not in the table.
    """

    def __getitem__(self, kind):
        low = _LOWER_OVERRIDES.get(kind)
        if low is not None:
            return low
        if isinstance(kind, str) and kind in SPEC:
            return Lowering(kind, kind)
        raise KeyError(kind)

    def __iter__(self):
        return iter(sorted(SPEC))

    def __len__(self):
        return len(SPEC)

    def __contains__(self, kind):
        return kind in _LOWER_OVERRIDES or (isinstance(kind, str) and kind in SPEC)

    def __repr__(self):
        odd = ", ".join(f"{k}->{v.op}" for k, v in sorted(_LOWER_OVERRIDES.items()))
        return f"LOWERING({len(self)} kinds; identity except {odd})"


#: The IR lowering table: ``LOWERING[kind].op`` is the tape op a node of ``kind`` runs.
LOWERING = _LoweringTable()


def missing_lowerings() -> list[str]:
    """Spec kinds that cannot be compiled: their lowering names an op without a runtime rule."""
    return sorted(k for k in LOWERING if LOWERING[k].op is not None and LOWERING[k].op not in RULES)


def _host_cast(v, dtype):
    # The same conversion as the interpreter: numeric payload arrays take the program dtype.
    v = np.asarray(v)
    return v.astype(dtype, copy=False) if v.dtype.kind in "fiu" else v


class _Step:
    __slots__ = ("node", "op", "fwd", "inf", "args", "attrs", "out", "rg", "needs", "k", "tnode")

    def __init__(self, node, rule, args, attrs, out, rg, needs, k, tnode):
        self.node = node          # the IR node it lowers
        self.op = rule.name
        self.fwd = rule.forward
        self.inf = rule.infer     # the value alone, for a run under no_grad (or None)
        self.args = args          # argument slots
        self.attrs = attrs
        self.out = out            # its slot
        self.rg = rg
        self.needs = needs
        self.k = k
        self.tnode = tnode        # the tape node of its slot (value, saved, rule for the backward)


def _fmt_attrs(attrs) -> str:
    if not attrs:
        return ""
    line = format_node(Node(0, "", (), (), attrs))
    return " " + line[line.index("{"):line.rindex("}") + 1]


class Program:
    """A compiled graph: ``prog(*inputs)`` runs it, ``prog.backward(seed)`` differentiates it.

    Built by :func:`compile`. Attributes: ``graph``, ``device``, ``dtype``, ``steps``
    (one per non-leaf node, in order; each knows its argument slots), ``slot_of``
    (node id -> value slot; a pass-through node shares its parent's slot), ``nodes`` (one tape
    node per slot: a call writes each step's value and saved state there, and
    :meth:`backward` is the tape's own reverse loop, :func:`torchlean.autograd.sweep`, over them).

    **Values.** Inputs may be NumPy arrays, CuPy arrays or Tensors; they are
    converted to the program's device and dtype (float inputs of another dtype
    are cast, as the interpreter does) and must have the declared shapes. Results
    are device arrays: one array for a single-output graph, else a list in
    ``graph.outputs`` order.

    **Backward.** A call keeps each step's ``saved`` (only for steps that reach a
    gradient) until the next call; :meth:`backward` may be called several times
    with different seeds in between. Gradients are returned for the inputs,
    keyed ``("input", k)`` (all, or those :func:`compile`'s ``grad_inputs`` names),
    for every ``param`` node, keyed ``(node_id, "value")``, and for the payload
    weights of parameterised nodes, keyed like the payload (``(node_id, "weight")``)
    — all but ``const`` values and :data:`NON_TRAINABLE` state. Unreached ones are
    zeros.

    **Reused buffers.** Uploaded payload arrays live as long as the program. The
    gradient arrays :meth:`backward` returns and the default all-ones seeds are
    allocated once and overwritten by every backward: copy a gradient to keep it
    past the next call. Forward values are fresh arrays on every call (in CUDA
    graph mode they are fixed buffers too; see :func:`compile`).
    """

    def __init__(self, g: Graph, payload, device: str, dtype, shapes: list, grad_inputs=None):
        self.graph = g
        self.device = device
        self.dtype = np.dtype(dtype)
        K = self.K = get_kernels(device)
        self._cpu = device == "cpu"
        n = len(g.nodes)
        self.shapes = [tuple(s) for s in shapes]
        self.slot_of: list[int] = [0] * n
        slot_shape: list = []
        nodes: list = []
        self.param_slots: dict = {}          # payload key -> slot (const/param values included)
        self.input_slots: list = []          # (index, slot, shape) in index order
        self._index_inputs = index_inputs(g)  # inputs read as integer indices (keep their dtype)
        self.steps: list[_Step] = []

        # Slot i holds node i's value; payload weights of parameterised nodes get slots n, n+1, ...
        # (leaves: the reverse loop never visits them, it only adds to their gradients).
        slot_shape.extend(self.shapes)
        nodes.extend(TapeNode(gn.kind, None, False) for gn in g.nodes)

        def upload(key, requires, slot=None):
            a = _host_cast(payload[key], self.dtype)
            v = K.from_host(np.asarray(a, order="C"), a.dtype)
            if slot is None:
                slot_shape.append(tuple(a.shape))
                nodes.append(TapeNode(f"{key[0]}.{key[1]}", None, False))
                slot = len(nodes) - 1
            nodes[slot].value = v
            nodes[slot].requires_grad = bool(requires and a.dtype.kind == "f")
            self.param_slots[key] = slot
            return slot

        for node in g.nodes:
            kind = node.kind
            s = node.id
            if kind == "input":
                index = int(node.attrs["index"])
                nodes[s].requires_grad = grad_inputs is None or index in grad_inputs
                self.input_slots.append((int(node.attrs["index"]), s, tuple(node.out_shape)))
            elif kind in ("const", "param"):
                upload((node.id, "value"), kind == "param", s)
            else:
                low = LOWERING.get(kind)
                if low is None:
                    raise IRError(f"compile: node {node.id} ({kind}): no lowering for this kind")
                if low.passes_through(node.attrs):
                    if len(node.parents) != 1:
                        raise IRError(f"compile: node {node.id} ({kind}) lowers to a pass-through "
                                      f"but has {len(node.parents)} parents")
                    self.slot_of[node.id] = self.slot_of[node.parents[0]]
                    continue
                op = low.op or kind
                rule = RULES.get(op)
                if rule is None:
                    raise IRError(f"compile: node {node.id} ({kind}) lowers to op {op!r}, "
                                  f"which has no runtime rule")
                args = []
                for name in PARAM_INPUTS.get(kind, (PARENTS,)):
                    if name == PARENTS:
                        args.extend(self.slot_of[p] for p in node.parents)
                    else:
                        args.append(upload((node.id, name), name not in NON_TRAINABLE))
                needs = tuple(nodes[a].requires_grad for a in args)
                tn = nodes[s]
                tn.requires_grad = any(needs)
                tn.parents = tuple(args)
                tn.rule, tn.K, tn.saved, tn.needs = rule, K, None, needs
                self.steps.append(_Step(node, rule, tuple(args), dict(node.attrs), s, tn.requires_grad, needs,
                                        len(self.steps), tn))
            self.slot_of[node.id] = s
        self.input_slots.sort()
        self.nodes = nodes
        self._slot_shape = slot_shape
        self.output_slots = [self.slot_of[o] for o in g.outputs]
        # Steps that the outputs depend on: a plain call runs only these.
        live = set(self.output_slots)
        for st in reversed(self.steps):
            if st.out in live:
                live.update(st.args)
        self._live = [st for st in self.steps if st.out in live]
        self.grad_slots: dict = {("input", i): s for i, s, _ in self.input_slots if nodes[s].requires_grad}
        for key, s in self.param_slots.items():
            if nodes[s].requires_grad:
                self.grad_slots[key] = s
        self._gbuf: dict = {}                # grad key -> preallocated gradient array
        self._ones: list | None = None       # preallocated default seeds
        self._ran = None                     # the steps the last call ran (None: no call yet)
        self._inferred = False               # whether the last call ran under no_grad (nothing saved)
        self._sweep_at = [None]              # the slot whose backward runs (for error reports)
        self._graph_mode = None              # a _CudaGraph once captured
        self._failed_step = None             # the step that raised last, for error reports

    # -- running -------------------------------------------------------------------------------
    def _input(self, k, x, shape):
        if hasattr(x, "_value") and hasattr(x, "requires_grad"):  # a front-end Tensor
            x = x._value
        K = self.K
        # An integer array given for an input the graph reads as an index (take_along's) keeps
        # its dtype; every other input runs in the program's float dtype.
        dt = x.dtype if k in self._index_inputs and getattr(x, "dtype", None) is not None \
            and x.dtype.kind in "iu" else self.dtype
        if self._cpu:
            if type(x) is not _ndarray or x.dtype != dt or not x.flags.c_contiguous:
                if not isinstance(x, (np.ndarray, np.generic, list, tuple, int, float)):
                    raise DeviceError(f"program on cpu: input {k} is a {type(x).__name__}; "
                                      f"move it to the host first")
                x = np.asarray(x, dtype=dt, order="C")  # ascontiguousarray makes 0-d 1-d
        elif isinstance(x, (np.ndarray, np.generic, list, tuple, int, float)):
            x = K.from_host(np.asarray(x), dt)
        elif x.dtype != dt:
            x = K.astype(x, dt)
        if tuple(x.shape) != shape:
            raise ShapeError(f"program: input {k} has shape {tuple(x.shape)}, the graph declares {shape}")
        return x

    def _start(self, inputs):
        if len(inputs) != len(self.input_slots):
            raise ShapeError(f"program: the graph takes {len(self.input_slots)} input(s), got {len(inputs)}")
        nodes = self.nodes
        for (k, s, shape), x in zip(self.input_slots, inputs):
            nodes[s].value = self._input(k, x, shape)

    def _run(self, steps, check_shapes=False, infer=False):
        K = self.K
        nodes = self.nodes
        cpu = self._cpu
        st = None
        self._ran = None
        self._inferred = infer
        try:
            for st in steps:
                if infer:
                    f = st.inf
                    y, s = (f(K, *[nodes[a].value for a in st.args], **st.attrs), None) if f is not None else \
                        st.fwd(K, *[nodes[a].value for a in st.args], **st.attrs)
                    st.tnode.value, st.tnode.saved = (np.asarray(y) if cpu and type(y) is not _ndarray else y), None
                    continue
                y, s = st.fwd(K, *[nodes[a].value for a in st.args], **st.attrs)
                if cpu and type(y) is not _ndarray:
                    y = np.asarray(y)  # NumPy turns 0-d results into scalars; programs hold arrays
                if check_shapes and tuple(y.shape) != self._slot_shape[st.out]:
                    raise ShapeError(f"program: node {st.node.id} ({st.node.kind}) produced shape "
                                     f"{tuple(y.shape)}, the graph declares {self._slot_shape[st.out]}")
                tn = st.tnode
                tn.value = y
                tn.saved = s if st.rg else None
        except Exception:
            self._failed_step = st  # lets callers (CUDA graph capture) name the node
            raise
        self._ran = steps

    def __call__(self, *inputs):
        """Run the program; the graph's outputs as device arrays (a list when there are several)."""
        if self._graph_mode is not None:
            return self._graph_mode.forward(inputs)
        self._start(inputs)
        self._run(self._live)
        outs = [self.nodes[s].value for s in self.output_slots]
        return outs[0] if len(outs) == 1 else outs

    def infer(self, *inputs):
        """The outputs of a call that nothing will differentiate: each step runs its rule's inference
        form where it has one (the same values, bit for bit, without what only the backward needs:
        max pooling skips finding each window's winner) and keeps nothing for a backward, which
        then raises until the next call. A program in CUDA graph mode replays its captured step."""
        if self._graph_mode is not None:
            return self._graph_mode.forward(inputs)
        self._start(inputs)
        self._run(self._live, infer=True)
        outs = [self.nodes[s].value for s in self.output_slots]
        return outs[0] if len(outs) == 1 else outs

    def run_all(self, *inputs) -> list:
        """Run every step (outputs' ancestors or not) and return every node's value, by node id.

        Each step's result shape is checked against the graph. Gradients are
        available afterwards, as after a call.
        """
        if self._graph_mode is not None:
            raise DeviceError("run_all: a program in CUDA graph mode only replays its captured step; "
                              "compile without cuda_graph=True to inspect every node")
        self._start(inputs)
        self._run(self.steps, check_shapes=True)
        return [self.nodes[s].value for s in self.slot_of]

    # -- reverse accumulation -------------------------------------------------------------------
    def _seeds(self, seed):
        K = self.K
        outs = self.output_slots
        if seed is None:
            if self._ones is None:
                self._ones = [K.full(self._slot_shape[s], 1.0, self._value_dtype(s)) for s in outs]
            return list(self._ones)
        seeds = [seed] if len(outs) == 1 and not isinstance(seed, (list, tuple)) else list(seed)
        if len(seeds) != len(outs):
            raise ShapeError(f"backward: {len(seeds)} seed(s) for {len(outs)} output(s)")
        res = []
        for o, (s, g) in enumerate(zip(outs, seeds)):
            if g is None:
                res.append(None)
                continue
            g = self._input(f"seed {o}", g, self._slot_shape[s])
            res.append(g if g.dtype == self._value_dtype(s) else K.astype(g, self._value_dtype(s)))
        return res

    def _value_dtype(self, s):
        v = self.nodes[s].value
        return v.dtype if v is not None else self.dtype

    def _grad_buffers(self):
        if not self._gbuf:
            K = self.K
            for key, s in self.grad_slots.items():
                v = self.nodes[s].value
                dt = v.dtype if v is not None and key[0] != "input" else self.dtype
                self._gbuf[key] = K.zeros(self._slot_shape[s], dt)
        return self._gbuf

    def backward(self, seed=None) -> dict:
        """Gradients of the last call's outputs, by reverse accumulation over the steps.

        ``seed``: None (all ones for every output: the gradient of the sum of all
        outputs' entries), an array (single-output graphs), or a list with one
        array or None per output (None: that output sends no gradient). Returns
        ``{("input", k): g, (node_id, name): g, ...}`` (see :class:`Program`); the
        arrays are the program's buffers, overwritten by the next backward.
        """
        if self._graph_mode is not None:
            return self._graph_mode.backward(seed)
        if self._ran is None:
            raise AutogradError("backward: run the program (prog(*inputs)) before backward")
        if self._inferred:
            raise AutogradError("backward: the last run was Program.infer, which keeps nothing for a backward; "
                                "call the program (prog(*inputs)) first")
        return self._backward(self._seeds(seed))

    def _backward(self, seeds):
        K = self.K
        bufs = self._grad_buffers()
        nodes = self.nodes
        grads: dict = {}
        start = -1
        for s, g in zip(self.output_slots, seeds):
            if g is not None and nodes[s].requires_grad:
                grads[s] = g if s not in grads else grads[s] + g
                start = max(start, s)
        keep = set(self.grad_slots.values())
        try:
            sweep(nodes, grads, start, keep, self._sweep_at)
        except Exception:
            at = self._sweep_at[0]
            self._failed_step = next((st for st in self.steps if st.out == at), None)
            raise
        for key, buf in bufs.items():
            g = grads.get(self.grad_slots[key])
            if g is None:
                K.fill(buf, 0)
            else:
                K.assign(buf, g)
        return dict(bufs)

    def release_gradients(self) -> None:
        """Hand the gradient arrays of the last :meth:`backward` over to the caller: the next
        backward writes into new arrays instead of overwriting them (saves the caller a copy).
        Not available in CUDA graph mode, whose gradient buffers are part of the captured graph."""
        if self._graph_mode is not None:
            raise DeviceError("release_gradients: a CUDA graph program's gradient buffers are fixed; copy them")
        self._gbuf = {}

    # -- payload ----------------------------------------------------------------------------------
    def param(self, key):
        """The device array a payload entry was uploaded to (``key`` as in the payload)."""
        return self.nodes[self.param_slots[key]].value

    def bind_param(self, key, value) -> None:
        """Use ``value`` (a device array of the entry's shape) as payload entry ``key`` from now on.

        A value of the program's device and dtype is used as is (no copy), so
        later in-place updates of it are seen by the program; anything else is
        converted. Not available in CUDA graph mode, whose buffers are fixed
        (copy into :meth:`param` instead).
        """
        if self._graph_mode is not None:
            raise DeviceError("bind_param: a CUDA graph program's payload buffers are fixed; "
                              "copy new values into prog.param(key) instead")
        s = self.param_slots[key]
        old = self.nodes[s].value
        v = self._input(f"payload {key}", value, self._slot_shape[s])
        if v.dtype != old.dtype:
            v = self.K.astype(v, old.dtype)
        self.nodes[s].value = v

    def format(self) -> str:
        """The program listing: one line per step, ``%out = op(%args)`` with the node it lowers."""
        lines = [f"program on {self.device} ({self.dtype.name}): {len(self.steps)} steps, "
                 f"{len(self.param_slots)} uploaded arrays"]
        names = {s: f"%{k[0]}.{k[1]}" for k, s in self.param_slots.items() if k[1] != "value"}
        for st in self.steps:
            args = ", ".join(names.get(a, f"%{a}") for a in st.args)
            op = st.op if st.op == st.node.kind else f"{st.op} (lowering {st.node.kind})"
            lines.append(f"  %{st.out} = {op}({args}){_fmt_attrs(st.attrs)}")
        lines.append("  return " + ", ".join(f"%{s}" for s in self.output_slots))
        return "\n".join(lines)

    def __repr__(self):
        mode = ", cuda_graph" if self._graph_mode is not None else ""
        return (f"Program({len(self.graph.nodes)} nodes -> {len(self.steps)} steps on "
                f"{self.device}, {self.dtype.name}{mode})")


def compile(g: Graph, payload=None, device: str = "cpu", dtype=np.float32,  # noqa: A001 - the API's name
            cuda_graph: bool = False, grad_inputs=None) -> Program:
    """Lower ``g`` (checked with its payload) to a :class:`Program` on ``device`` in ``dtype``.

    ``grad_inputs``: the input indices whose gradients :meth:`Program.backward`
    computes (default: all). Steps that only lead to other inputs' gradients are
    then skipped in backward, as the tape skips leaves without ``requires_grad``.

    ``cuda_graph=True`` (``device="cuda"`` only) captures the whole step into two
    CUDA graphs — the forward and the backward — that each call replays with one
    launch. Inputs are copied into fixed device buffers; outputs, gradients and
    the payload are fixed buffers too (each call overwrites them). The capture runs
    with a private CuPy memory pool, after one warm-up step on the capture stream
    (which compiles every kernel and fills the pool), so no memory the graphs use
    is ever handed to anyone else. An op whose rule does host work (a host
    transfer, a synchronisation) cannot be captured: :class:`DeviceError` names the
    node.

        >>> import numpy as np
        >>> from torchlean import ir
        >>> g = ir.Graph([ir.Node(0, "input", (), (3,), {"index": 0}),
        ...               ir.Node(1, "exp", (0,), (3,))])
        >>> ir.compile(g, device="cpu", dtype=np.float64)(np.zeros(3)).tolist()
        [1.0, 1.0, 1.0]
    """
    payload = {} if payload is None else payload
    if device not in ("cpu", "cuda"):
        raise DeviceError(f"compile: unknown device {device!r}; expected 'cpu' or 'cuda'")
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TorchLeanError(f"compile: dtype must be a float dtype, got {dtype}")
    shapes = check(g, payload)
    if grad_inputs is not None:
        grad_inputs = {int(k) for k in grad_inputs}
    prog = Program(g, payload, device, dtype, shapes, grad_inputs)
    if cuda_graph:
        if device != "cuda":
            raise DeviceError(f"compile: cuda_graph=True needs device='cuda', got {device!r}")
        prog._graph_mode = _CudaGraph(prog)
    return prog


class _CudaGraph:
    """The CUDA graph mode of a :class:`Program` (see :func:`compile`): the forward and the
    backward captured with :class:`torchlean.kernels.cuda.graphs.GraphCapture` (a private memory
    pool, a capture stream, direct cuBLAS calls), after one warm-up step in the same scope, which
    compiles every kernel and fills the pool."""

    def __init__(self, prog: Program):
        K = prog.K
        self.prog = prog
        self.ran = False
        outs = prog.output_slots
        self.capture = K.graph_capture()
        with self.capture.scope():
            self.inputs = [K.zeros(shape, prog.dtype) for _, _, shape in prog.input_slots]
            try:
                prog._start(self.inputs)
                prog._run(prog._live)
                self.seeds = [K.full(prog._slot_shape[s], 1.0, prog._value_dtype(s)) for s in outs]
                prog._backward(self.seeds)
            except Exception as e:
                raise self._error("the warm-up step", e) from e
            # Hand the warm-up's values back to the private pool for the capture to reuse.
            for st in prog.steps:
                st.tnode.value = st.tnode.saved = None
            self.fwd = self._capture("the forward", lambda: (prog._start(self.inputs), prog._run(prog._live)))
            self.outputs = [prog.nodes[s].value for s in outs]
            self.bwd = self._capture("the backward", lambda: prog._backward(self.seeds))
            self.grads = dict(prog._gbuf)
        self.seeds_are_ones = True

    def _error(self, what, e):
        st = getattr(self.prog, "_failed_step", None)
        where = f" at node {st.node.id} ({st.node.kind})" if st is not None else ""
        return DeviceError(f"compile(cuda_graph=True): capturing {what} failed{where}: "
                           f"{type(e).__name__}: {e}. Every op in a captured program must run "
                           f"without host transfers or synchronisation; compile without "
                           f"cuda_graph=True to run this graph")

    def _capture(self, what, fn):
        self.prog._failed_step = None
        try:
            return self.capture.capture(fn)
        except Exception as e:
            raise self._error(what, e) from e

    def forward(self, inputs):
        prog = self.prog
        K = prog.K
        if len(inputs) != len(self.inputs):
            raise ShapeError(f"program: the graph takes {len(self.inputs)} input(s), got {len(inputs)}")
        for (k, _, shape), buf, x in zip(prog.input_slots, self.inputs, inputs):
            K.assign(buf, prog._input(k, x, shape))
        self.fwd.launch()
        self.ran = True
        outs = self.outputs
        return outs[0] if len(outs) == 1 else list(outs)

    def backward(self, seed):
        K = self.prog.K
        if not self.ran:
            raise AutogradError("backward: run the program (prog(*inputs)) before backward")
        if seed is None:
            if not self.seeds_are_ones:
                for b in self.seeds:
                    K.fill(b, 1)
                self.seeds_are_ones = True
        else:
            for b, g in zip(self.seeds, self.prog._seeds(seed)):
                if g is None:
                    K.fill(b, 0)
                else:
                    K.assign(b, g)
            self.seeds_are_ones = False
        self.bwd.launch()
        return dict(self.grads)
