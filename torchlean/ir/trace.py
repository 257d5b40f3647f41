"""Tracing: record a front-end call as an IR graph and its payload.

:func:`trace` runs ``module_or_fn(*example_inputs)`` once with a tracer hooked into
the front end's recording (:func:`torchlean.autograd.tracing`), which sees every op that goes through
the tape's dispatch, in any grad mode (so code under ``no_grad`` is traced too).

* Example inputs become ``input`` nodes (``index`` = argument position).
* Leaf tensors that are parameters — the module's ``named_parameters()`` matched
  by identity, or, for a plain function, any leaf with ``requires_grad`` — become
  ``param`` nodes carrying ``attrs["name"]``; other leaves (buffers, constants
  made inside the call) become ``const`` nodes. Both take a snapshot of the
  value into the payload.
* Every op becomes a node of its kind with its attributes. A parameterised kind
  (``linear``, ``conv``, ``layer_norm`` ... see :data:`~torchlean.ir.PARAM_INPUTS`)
  takes its weights from the payload, keyed ``(node_id, "weight")``; if a weight
  is computed inside the call instead, ``linear``/``linear_nobias`` are written
  as ``transpose``, ``matmul`` and ``add`` nodes, and the other kinds raise
  :class:`~torchlean.errors.IRError`.
* The outputs are the returned tensors (a tensor, or a tuple/list of them).

What a trace cannot see is fixed at its value: Python control flow takes the
path of the example inputs; work done outside the op dispatch (comparisons,
``argmax``, integer casts, ``.numpy()``) produces constants; dropout keeps the
mask it drew (its seed is an attribute). Tracing is per thread: ops that other
threads run meanwhile are not recorded.

    >>> import numpy as np
    >>> import torchlean as tl
    >>> from torchlean import ir
    >>> g, payload = ir.trace(lambda x: (x * 2.0).relu().sum(), tl.ones(3))
    >>> [n.kind for n in g.nodes]
    ['input', 'scale', 'relu', 'sum']
    >>> float(ir.evaluate(g, payload, np.ones(3))[-1])
    6.0
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..autograd import is_grad_enabled, tracing
from ..errors import IRError, TorchLeanError
from ..kernels import get_kernels
from ..tensor import Tensor
from .graph import PARAM_INPUTS, PARENTS, Graph, Node, Payload
from .compile import compile as _compile
from .infer import check

__all__ = ["trace", "Traced", "trace_call", "compile_module", "CompiledModule"]


@dataclass
class Traced:
    """A trace with what :func:`~torchlean.ir.compile_module` needs besides the graph.

    ``bindings`` maps each payload key that stands for a parameter to that
    Parameter object (a tied parameter appears under several keys);
    ``single`` is True when the call returned one tensor, not a tuple/list; ``result`` is what the
    call itself returned (eager tensors, recorded on the tape as usual).
    """
    graph: Graph
    payload: Payload
    bindings: dict = field(default_factory=dict)
    single: bool = True
    result: object = None           # what the traced (eager) call returned


def _host(v):
    if isinstance(v, np.ndarray):
        return v
    return get_kernels("cuda").to_host(v)


def _host_attr(v):
    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, tuple):
        return tuple(_host_attr(x) for x in v)
    if isinstance(v, list):
        return [_host_attr(x) for x in v]
    if isinstance(v, dict):
        return {k: _host_attr(x) for k, x in v.items()}
    if hasattr(v, "__cuda_array_interface__"):
        return _host(v)
    return v


class _Recorder:
    """The tracer the front end calls: ``(name, ts, attrs, out)`` for every op."""

    def __init__(self, params: dict | None, buffers: dict | None = None):
        self.params = params            # id(tensor) -> name, or None: every requires_grad leaf
        self.buffers = buffers or {}    # id(tensor) -> name: const leaves the caller re-binds each call
        self.nodes: list = []
        self.payload = Payload()
        self.bindings: dict = {}
        self.node_of: dict = {}         # id(tensor) -> node id
        self.computed: set = set()      # node ids that are not leaves (input or op nodes)
        self.keep: list = []            # every tensor seen, so no id() is reused while tracing
        self.n_params = 0

    def _add(self, kind, parents, shape, attrs=None) -> int:
        i = len(self.nodes)
        self.nodes.append(Node(i, kind, tuple(parents), tuple(shape), attrs or {}))
        return i

    def add_input(self, t: Tensor, index: int) -> int:
        i = self._add("input", (), t.shape, {"index": index})
        self.node_of[id(t)] = i
        self.computed.add(i)
        self.keep.append(t)
        return i

    def _param_name(self, t):
        if self.params is None:
            return "" if (t.requires_grad and t.is_leaf) else None
        return self.params.get(id(t))

    def ref(self, t: Tensor) -> int:
        """The node id standing for ``t``: its op or input node, else a new param/const leaf."""
        i = self.node_of.get(id(t))
        if i is not None:
            return i
        name = self._param_name(t)
        value = _host(t._value).copy()
        if name is not None:
            attrs = {"name": name} if name else {}
            i = self._add("param", (), t.shape, attrs)
            self.bindings[(i, "value")] = t
        else:
            i = self._add("const", (), t.shape)
            if id(t) in self.buffers:
                self.bindings[(i, "value")] = t
        self.payload[(i, "value")] = value
        self.node_of[id(t)] = i
        self.keep.append(t)
        return i

    def __call__(self, name, ts, attrs, out):
        attrs = {k: _host_attr(v) for k, v in attrs.items()}
        layout = PARAM_INPUTS.get(name)
        if layout is None:
            i = self._add(name, [self.ref(t) for t in ts], out.shape, attrs)
        else:
            i = self._parameterised(name, layout, ts, attrs, out)
        self.node_of[id(out)] = i
        self.computed.add(i)
        self.keep.append(out)

    def _parameterised(self, name, layout, ts, attrs, out) -> int:
        n_par = len(ts) - (len(layout) - 1)
        slots, k = [], 0
        for slot in layout:
            if slot == PARENTS:
                slots.append((PARENTS, ts[k:k + n_par]))
                k += n_par
            else:
                slots.append((slot, ts[k]))
                k += 1
        computed = [s for s, t in slots if s != PARENTS and self.node_of.get(id(t)) in self.computed]
        if computed:
            if name in ("linear", "linear_nobias"):
                return self._linear_ops(name, ts, out)
            raise IRError(f"trace: {name} takes its {', '.join(computed)} from the payload, but here "
                          f"{'they are' if len(computed) > 1 else 'it is'} computed inside the traced "
                          f"call (or an input); pass a parameter or a constant tensor instead")
        parents = [self.ref(t) for s, ts_ in slots if s == PARENTS for t in ts_]
        i = self._add(name, parents, out.shape, attrs)
        for s, t in slots:
            if s == PARENTS:
                continue
            self.payload[(i, s)] = _host(t._value).copy()
            self.keep.append(t)
            if self._param_name(t) is not None or id(t) in self.buffers:
                self.bindings[(i, s)] = t
        return i

    def _linear_ops(self, name, ts, out) -> int:
        # linear(w, b, x) = x @ w.T + b, written with plain kinds so a computed w can be a parent.
        w, x = ts[0], ts[-1]
        wi, xi = self.ref(w), self.ref(x)
        wt = self._add("transpose", (wi,), (w.shape[1], w.shape[0]), {"dim0": 0, "dim1": 1})
        mm_shape = out.shape
        y = self._add("matmul", (xi, wt), mm_shape)
        if name == "linear":
            y = self._add("add", (y, self.ref(ts[1])), out.shape)
        return y

    def output(self, t) -> int:
        if not isinstance(t, Tensor):
            raise TorchLeanError(f"trace: the traced call must return a Tensor or a tuple/list of "
                                 f"Tensors, got {type(t).__name__}")
        return self.ref(t)


def trace_call(module_or_fn, *example_inputs, params=None, buffers=None) -> Traced:
    """:func:`trace` with the parameter bindings and the output structure (a :class:`Traced`).

    ``params`` / ``buffers`` (``{name: tensor}``) name the parameters and buffers explicitly
    (default: a Module's own ``named_parameters()`` and no buffers, a function's every leaf that
    requires grad). Buffers stay ``const`` nodes but are listed in ``bindings`` too, so a caller can
    hand the program their current values on every call instead of the traced snapshot.
    """
    if not callable(module_or_fn):
        raise TorchLeanError(f"trace: expected a Module or a function, got {type(module_or_fn).__name__}")
    inputs = []
    for k, x in enumerate(example_inputs):
        if isinstance(x, Tensor):
            inputs.append(x)
        elif isinstance(x, np.ndarray) or hasattr(x, "__cuda_array_interface__"):
            inputs.append(Tensor(x))
        else:
            raise TorchLeanError(f"trace: example input {k} must be a Tensor or an array, "
                                 f"got {type(x).__name__}")
    if params is not None:
        params = {id(p): name for name, p in params.items()}
    elif hasattr(module_or_fn, "named_parameters"):
        params = {id(p): name for name, p in module_or_fn.named_parameters()}
    rec = _Recorder(params, {id(b): name for name, b in (buffers or {}).items()})
    for k, x in enumerate(inputs):
        rec.add_input(x, k)
    with tracing(rec):
        res = module_or_fn(*inputs)
    single = not isinstance(res, (tuple, list))
    outs = tuple(rec.output(t) for t in ([res] if single else res))
    if not outs:
        raise TorchLeanError("trace: the traced call returned no tensors")
    g = Graph(rec.nodes, outs)
    try:
        check(g, rec.payload)
    except IRError as e:
        raise IRError(f"trace: the recorded graph does not check: {e}") from None
    return Traced(g, rec.payload, rec.bindings, single, res)


def trace(module_or_fn, *example_inputs) -> tuple:
    """Record ``module_or_fn(*example_inputs)`` as ``(graph, payload)`` (see the module docs).

    The call runs once, eagerly, in the current grad mode; every op is recorded
    whatever that mode is.
    """
    t = trace_call(module_or_fn, *example_inputs)
    return t.graph, t.payload


class CompiledModule:
    """What :func:`compile_module` (``tl.compile``) returns: a traced, compiled callable.

    ``f(*inputs)`` runs the compiled program and returns Tensors (one, or a tuple
    as the traced call returned). ``f.backward(seed=None)`` differentiates the
    last call (``seed`` as in :meth:`Program.backward`; None: ones for every
    output), **accumulates** each parameter's gradient into its ``.grad`` (as
    ``Tensor.backward`` does, so ``optimizer.step()`` works unchanged) and returns
    the gradients of the inputs, one per input, in order: a Tensor for each example
    input that had ``requires_grad``, None for the others (whose gradients are not
    computed at all).

    The program reads the module's parameters on every call: it uses their
    arrays directly (no copy) when device and dtype match, so optimizer steps are
    seen at once; with ``cuda_graph=True`` it copies them into its fixed buffers
    each call. Other tensors the call used (buffers, constants) are frozen at
    their traced values. Attributes: ``graph``, ``payload``, ``program``.
    """

    def __init__(self, traced: Traced, program, n_inputs: int):
        self.graph = traced.graph
        self.payload = traced.payload
        self.program = program
        self._bindings = traced.bindings
        self._single = traced.single
        self._n_inputs = n_inputs
        self._graph_mode = program._graph_mode is not None

    def _sync_params(self):
        prog = self.program
        for key, p in self._bindings.items():
            v = p._value
            buf = prog.param(key)
            if v is buf:
                continue
            if self._graph_mode:
                buf[...] = v if v.dtype == buf.dtype else prog.K.astype(v, buf.dtype)
            else:
                prog.bind_param(key, v)

    def __call__(self, *inputs):
        if len(inputs) != self._n_inputs:
            raise TorchLeanError(f"compiled call: takes {self._n_inputs} input(s), got {len(inputs)}")
        self._sync_params()
        res = self.program(*inputs) if is_grad_enabled() else self.program.infer(*inputs)
        outs = [res] if len(self.graph.outputs) == 1 else list(res)
        if self._graph_mode:  # fixed buffers: hand out copies the next call will not overwrite
            outs = [self.program.K.copy(y) for y in outs]
        ts = [Tensor(y) for y in outs]
        return ts[0] if self._single else tuple(ts)

    def backward(self, seed=None) -> tuple:
        """Gradients of the last call: parameters' ``.grad`` accumulate; input gradients returned."""
        if seed is not None:
            seed = [s._value if isinstance(s, Tensor) else s for s in seed] \
                if isinstance(seed, (list, tuple)) else (seed._value if isinstance(seed, Tensor) else seed)
        grads = self.program.backward(seed)
        K = self.program.K
        for key, p in self._bindings.items():
            g = grads.get(key)
            if g is None or not p.requires_grad:
                continue
            g = K.copy(g) if g.dtype == p.dtype else K.astype(g, p.dtype)
            p._grad = Tensor(g) if p._grad is None else Tensor(p._grad._value + g)
        return tuple(Tensor(K.copy(grads[("input", k)])) if ("input", k) in grads else None
                     for k in range(self._n_inputs))

    def __repr__(self):
        return f"CompiledModule({self.program!r})"


def compile_module(module_or_fn, *example_inputs, device=None, dtype=None, cuda_graph: bool = False):
    """Trace ``module_or_fn`` on ``example_inputs``, compile it, return a :class:`CompiledModule`.

    ``device`` defaults to the first example input's device, ``dtype`` to its
    dtype when it is a float (float32 otherwise). Input gradients are computed for
    the example inputs that require grad. This is ``tl.compile``.

        >>> import torchlean as tl
        >>> lin = tl.nn.Linear(3, 2)
        >>> f = tl.compile(lin, tl.ones(4, 3))
        >>> y = f(tl.ones(4, 3))
        >>> bool(((y - lin(tl.ones(4, 3))).abs().max() < 1e-6).item())
        True
        >>> _ = f.backward()
        >>> lin.weight.grad.shape
        torchlean.Size([2, 3])
    """
    t = trace_call(module_or_fn, *example_inputs)
    first = next((x for x in example_inputs if isinstance(x, Tensor)), None)
    if device is None:
        device = first.device if first is not None else "cpu"
    if dtype is None:
        dtype = first.dtype if first is not None and first.dtype.kind == "f" else np.float32
    grad_inputs = [k for k, x in enumerate(example_inputs) if isinstance(x, Tensor) and x.requires_grad]
    prog = _compile(t.graph, t.payload, device=device, dtype=dtype, cuda_graph=cuda_graph,
                    grad_inputs=grad_inputs)
    return CompiledModule(t, prog, len(example_inputs))
