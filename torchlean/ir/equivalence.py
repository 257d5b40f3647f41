"""Differential check of a compiled program against the meaning, node by node.

:func:`check_equivalence` runs :func:`~torchlean.ir.evaluate` (the spec, float64)
and the compiled :class:`~torchlean.ir.Program` (the device's kernels, in the
program's dtype) on the same inputs and reports, for every node:

* the **end-to-end** error: the program's value against the meaning's value. It
  includes the rounding that earlier nodes passed down, amplified by whatever
  the graph does to it (a ``div`` by a small number, a ``exp``), so on its own it
  cannot tell a faithful kernel in an ill-conditioned graph from a wrong kernel;
* the **local** error: the program's value against the spec applied to *the
  program's own* parent values (and uploaded payload), in float64. This isolates
  the node's kernel: it is exactly the per-op float32 contract that the op tests
  check (``DEVICE_TOL[device]`` scaled by the op's ``tol_scale``, ``atol + rtol *
  max|reference|`` as in :mod:`torchlean.testing.checks`).

With ``grads=True`` (the default) each node's **local gradient** is checked the same
way: a random cotangent of the node's shape is pulled back through the device's
backward rule (on the values the program saved) and through the spec's VJP in
float64 on the same parent values; a wrong derivative in a kernel shows up at its
node even when every forward value is right.

A node is inside the contract when its local value error and its local gradient
error are; the report passes when every node is, and ``first_divergence`` names
the first node that is not — the place where the device stopped computing the
meaning (``report[i].what`` says whether the value or the gradient left it).
Entries whose float64 reference lies beyond the program dtype's range are
compared with that dtype's infinity, which is what a faithful kernel gives there.

    >>> import numpy as np
    >>> from torchlean import ir
    >>> g = ir.Graph([ir.Node(0, "input", (), (3,), {"index": 0}),
    ...               ir.Node(1, "exp", (0,), (3,)),
    ...               ir.Node(2, "sum", (1,), ())])
    >>> rep = ir.check_equivalence(g, None, np.array([0.1, 0.2, 0.3]))
    >>> rep.passed, rep.first_divergence
    (True, None)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import TorchLeanError
from ..spec import SPEC
from ..testing.opinfo import DEVICE_TOL, OPINFOS
from .compile import LOWERING, compile
from .graph import Graph, spec_args
from .interpret import evaluate

__all__ = ["check_equivalence", "Report", "NodeReport"]


@dataclass
class NodeReport:
    """One node's row: errors against the meaning and the contract verdict."""
    id: int
    kind: str
    shape: tuple
    abs_err: float          # end-to-end: program value vs the meaning
    rel_err: float
    local_abs: float        # local: program value vs the spec on the program's own inputs
    local_rel: float
    tol: float              # the float32 contract for the local error: atol + rtol * max|reference|
    ok: bool
    grad_abs: float = 0.0   # local gradient error (device backward vs spec VJP, same inputs, random cotangent)
    grad_tol: float = 0.0   # its contract
    grad_ok: bool = True

    @property
    def value_ok(self) -> bool:
        return bool(np.isfinite(self.local_abs)) and self.local_abs <= self.tol

    @property
    def what(self) -> str:
        """What left the meaning: ``"value"``, ``"gradient"`` or ``""`` (nothing)."""
        return "" if self.ok else ("value" if not self.value_ok else "gradient")

    @property
    def status(self) -> str:
        return "ok" if self.ok else f"DIVERGES ({self.what})"


@dataclass
class Report:
    """The result of :func:`check_equivalence`: one :class:`NodeReport` per node, in order."""
    nodes: list = field(default_factory=list)
    device: str = "cpu"
    dtype: str = "float32"

    @property
    def passed(self) -> bool:
        """True when every node's local error is inside the contract."""
        return all(r.ok for r in self.nodes)

    @property
    def first_divergence(self):
        """``(node_id, kind)`` of the first node outside the contract, or None."""
        for r in self.nodes:
            if not r.ok:
                return (r.id, r.kind)
        return None

    @property
    def max_abs_err(self) -> float:
        """The largest end-to-end absolute error over all nodes."""
        return max((r.abs_err for r in self.nodes), default=0.0)

    @property
    def max_rel_err(self) -> float:
        """The largest end-to-end relative error over all nodes."""
        return max((r.rel_err for r in self.nodes), default=0.0)

    def failures(self) -> list:
        """The rows of the nodes outside the contract."""
        return [r for r in self.nodes if not r.ok]

    def __getitem__(self, node_id: int) -> NodeReport:
        return self.nodes[node_id]

    def __len__(self):
        return len(self.nodes)

    def __str__(self):
        head = ["node", "kind", "shape", "abs err", "rel err", "local abs", "local rel", "contract",
                "grad local", "grad contract", "status"]
        rows = [[f"%{r.id}", r.kind, str(r.shape), _e(r.abs_err), _e(r.rel_err), _e(r.local_abs),
                 _e(r.local_rel), _e(r.tol), _e(r.grad_abs), _e(r.grad_tol), r.status] for r in self.nodes]
        widths = [max(len(h), *(len(row[j]) for row in rows)) if rows else len(h) for j, h in enumerate(head)]
        right = {3, 4, 5, 6, 7, 8, 9}

        def line(cells):
            return "  ".join(c.rjust(w) if j in right else c.ljust(w)
                             for j, (c, w) in enumerate(zip(cells, widths))).rstrip()

        verdict = "passed" if self.passed else f"{len(self.failures())} outside the contract"
        out = [f"equivalence on {self.device} ({self.dtype}) against the meaning (float64): "
               f"{len(self.nodes)} nodes, {verdict}",
               line(head), line(["-" * w for w in widths])]
        out += [line(r) for r in rows]
        fd = self.first_divergence
        if fd is None:
            out.append(f"every node inside the float32 contract; largest end-to-end error "
                       f"{_e(self.max_abs_err)} abs, {_e(self.max_rel_err)} rel")
        else:
            r = self.nodes[fd[0]]
            if r.what == "value":
                out.append(f"first divergence: node {r.id} ({r.kind}): local error {_e(r.local_abs)} "
                           f"exceeds the contract {_e(r.tol)}")
            else:
                out.append(f"first divergence: node {r.id} ({r.kind}): local gradient error "
                           f"{_e(r.grad_abs)} exceeds the contract {_e(r.grad_tol)}")
        return "\n".join(out)

    __repr__ = __str__


def _e(x: float) -> str:
    return f"{x:.2e}" if np.isfinite(x) else str(x)


def _err(got, ref) -> tuple[float, float, float]:
    """(max abs error, relative error, max |ref|), with NaN == NaN; inf where shapes differ."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return float("inf"), float("inf"), 0.0
    if ref.size == 0:
        return 0.0, 0.0, 0.0
    both_nan = np.isnan(got) & np.isnan(ref)
    same_inf = np.isinf(got) & (got == ref)
    with np.errstate(invalid="ignore"):
        d = np.where(both_nan | same_inf, 0.0, np.abs(got - ref))
    if np.isnan(d).any():
        return float("nan"), float("nan"), 0.0
    finite_ref = np.where(both_nan | np.isinf(ref), 0.0, ref)
    a = float(d.max())
    scale = float(np.abs(finite_ref).max())
    return a, (a / scale if scale > 0 else a), scale


def _in_range(ref, dtype):
    """``ref`` with entries beyond ``dtype``'s finite range replaced by that dtype's infinity."""
    ref = np.asarray(ref, dtype=np.float64)
    big = float(np.finfo(dtype).max) if np.dtype(dtype).kind == "f" else np.inf
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(ref) > big, np.sign(ref) * np.inf, ref)


def _local_grad(prog, n, step, args64, seed):
    """(error, scale) of node ``n``'s device backward against the spec VJP on ``args64``."""
    K = prog.K
    tn = step.tnode
    if not step.rg or tn.saved is None or tn.value is None or tn.value.dtype.kind != "f":
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    gy = rng.standard_normal(tuple(tn.value.shape)).astype(prog.dtype).astype(np.float64)
    with np.errstate(all="ignore"):
        ref = SPEC[n.kind].vjp(gy, *args64, **n.attrs)
        got = tn.rule.backward(K, tn.saved, K.from_host(gy, prog.dtype), step.needs)
    worst_a = worst_scale = 0.0
    for i, (need, gd) in enumerate(zip(step.needs, got)):
        if not need or gd is None or i >= len(ref) or ref[i] is None:
            continue
        gd = np.asarray(K.to_host(gd), dtype=np.float64)
        a, _, scale = _err(gd, _in_range(ref[i], prog.dtype))
        if not np.isfinite(a):
            return a, scale
        worst_a, worst_scale = max(worst_a, a), max(worst_scale, scale)
    return worst_a, worst_scale


def check_equivalence(g: Graph, payload=None, *inputs, device: str = "cpu", dtype=np.float32,
                      program=None, grads: bool = True, seed: int = 0) -> Report:
    """Run the meaning and the compiled program side by side; a :class:`Report` per node.

    ``program`` may be a :class:`~torchlean.ir.Program` already compiled from ``g``
    and ``payload`` (it is compiled here otherwise, on ``device`` in ``dtype``).
    ``grads`` also checks each node's local gradient (random cotangents from ``seed``).
    Printing the report gives the table; ``report.passed`` and
    ``report.first_divergence`` give the verdict.
    """
    payload = {} if payload is None else payload
    prog = program if program is not None else compile(g, payload, device=device, dtype=dtype)
    K = prog.K
    with np.errstate(all="ignore"):  # IEEE infs and NaNs are compared, not warned about
        ref = evaluate(g, payload, *inputs)
        # Floats widened for the comparisons; integer and bool values keep their dtype (an index
        # that a node's spec reads must stay an integer).
        vals = [np.asarray(K.to_host(v), dtype=np.float64) if v.dtype.kind == "f" else np.asarray(K.to_host(v))
                for v in prog.run_all(*inputs)]
    params = {key: np.asarray(K.to_host(prog.param(key)), dtype=np.float64)
              if prog.param(key).dtype.kind in "fiu" else K.to_host(prog.param(key))
              for key in prog.param_slots}
    atol, rtol = DEVICE_TOL.get(prog.device, DEVICE_TOL["cuda"])
    report = Report(device=prog.device, dtype=prog.dtype.name)
    step_of = {st.node.id: st for st in prog.steps}
    for n in g.nodes:
        i = n.id
        a, r, _ = _err(vals[i], ref[i])
        kind = n.kind
        if kind == "input":
            local_ref = np.asarray(inputs[n.attrs["index"]], dtype=np.float64)
        elif kind in ("const", "param"):
            local_ref = np.asarray(payload[(i, "value")], dtype=np.float64)
        elif LOWERING[kind].op is None:
            local_ref = vals[n.parents[0]]          # a pass-through computes nothing
        else:
            args = spec_args(n, [vals[p] for p in n.parents], params)
            with np.errstate(all="ignore"):
                local_ref = np.asarray(SPEC[kind].forward(*args, **n.attrs))
            if local_ref.dtype.kind == "f":
                local_ref = _in_range(local_ref, prog.dtype)
        la, lr, scale = _err(vals[i], local_ref)
        info = OPINFOS.get(kind)
        ts = info.tol_scale if info is not None else 1.0
        tol = atol * ts + rtol * ts * scale
        ok = bool(np.isfinite(la)) and la <= tol
        ga, gtol, gok = 0.0, 0.0, True
        if grads and i in step_of and kind not in ("input", "const", "param"):
            try:
                ga, gscale = _local_grad(prog, n, step_of[i], args, seed * 1_000_003 + i)
            except TorchLeanError as e:  # a spec without a VJP here (an integer result): nothing to compare
                ga, gscale = 0.0, 0.0
                del e
            gtol = atol * ts + rtol * ts * gscale
            gok = bool(np.isfinite(ga)) and ga <= gtol
        report.nodes.append(NodeReport(i, kind, tuple(n.out_shape), a, r, la, lr, tol, ok and gok, ga, gtol, gok))
    return report
