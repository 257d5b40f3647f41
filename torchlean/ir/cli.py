"""The ``torchlean ir check|run|convert`` and ``torchlean check --model`` commands as plain functions.

Each prints a short report and returns a process exit code: 0 success, 1 the
file or model is invalid (the error is printed), 2 the request cannot be served
here (a missing optional backend or device).
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from ..errors import BackendUnavailableError, DeviceError, DomainError, TorchLeanError
from .compile import compile
from .equivalence import check_equivalence
from .graph import Graph, format_node, index_input_bounds
from .infer import check
from .interpret import evaluate
from .onnx import from_onnx
from .serialize import load, save

__all__ = ["ir_check", "ir_run", "ir_convert", "check_model"]

#: The input scale of ``check --model``'s large-magnitude pass.
LARGE = 100.0


def _summary(g: Graph, payload) -> str:
    kinds = Counter(n.kind for n in g.nodes)
    top = ", ".join(f"{k} x{c}" for k, c in kinds.most_common(8))
    more = "" if len(kinds) <= 8 else f", ... ({len(kinds)} kinds)"
    n_par = sum(int(np.size(a)) for a in payload.values())
    return (f"{len(g.nodes)} nodes ({top}{more}); {len(g.inputs)} input(s); "
            f"outputs {list(g.outputs)}; {len(payload)} payload tensors, {n_par} numbers")


def _fail(e: Exception) -> int:
    print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
    return 2 if isinstance(e, (BackendUnavailableError, DeviceError)) else 1


def ir_check(path) -> int:
    """Load and check an IR file; print its summary and output shapes."""
    try:
        g, payload = load(path)
        shapes = check(g, payload)
    except TorchLeanError as e:
        return _fail(e)
    print(f"ok: {path}: {_summary(g, payload)}")
    for o in g.outputs:
        print(f"  output %{o} ({g.nodes[o].kind}): shape {shapes[o]}")
    return 0


def _describe(a) -> str:
    a = np.asarray(a)
    head = np.array2string(a.reshape(-1)[:6], precision=6, separator=", ")
    stats = "" if a.size == 0 else \
        f" min {float(np.min(a)):.6g} max {float(np.max(a)):.6g} mean {float(np.mean(a)):.6g}"
    return f"shape {a.shape} {a.dtype}{stats} first {head}"


def ir_run(path, inputs, device: str = "cpu") -> int:
    """Run an IR file on ``.npy`` inputs and print each output.

    The graph is compiled (``torchlean.ir.compile``, float32) for ``device`` and run
    there; ``torchlean check --model`` compares that run with the meaning.
    """
    try:
        g, payload = load(path)
        xs = []
        for p in inputs:
            try:
                xs.append(np.load(p, allow_pickle=False))
            except (OSError, ValueError) as e:
                raise TorchLeanError(f"cannot read input {p!r}: {e}") from None
        prog = compile(g, payload, device=device)
        res = prog.infer(*xs)
        outs = list(res) if isinstance(res, (list, tuple)) else [res]
        outs = [prog.K.to_host(v) for v in outs]
    except TorchLeanError as e:
        return _fail(e)
    print(f"ran {path} on {device}: {len(g.nodes)} nodes, {len(prog.steps)} compiled steps")
    for o, v in zip(g.outputs, outs):
        print(f"  output %{o}: {_describe(v)}")
    return 0


def _load_model(path):
    p = str(path)
    if p.lower().endswith(".onnx"):
        return from_onnx(p)
    return load(p)


def check_model(path, device: str = "cpu", seed: int = 0) -> int:
    """Check a model file's compiled program against its meaning, node by node.

    ``path`` is an IR JSON file or an ONNX model (by its ``.onnx`` suffix). The
    inputs are random normal arrays of the input nodes' shapes from a fixed
    ``seed`` (if the meaning is undefined on them — a ``log`` of a negative
    entry — positive uniform inputs are used instead). Prints the equivalence
    table and the first node where ``device`` diverges from the meaning.
    Every node's local gradient is checked too (a random cotangent through the
    device's backward rule against the spec's VJP), and the whole check runs a
    second time on the inputs scaled by :data:`LARGE` (x100), where a kernel that
    lacks a stability trick (a softmax without its max shift) overflows.
    Returns 0 when every node is inside the float32 contract in both passes, 1 on a
    divergence or an invalid file, 2 when the device is unavailable.
    """
    try:
        g, payload = _load_model(path)
        check(g, payload)
        shapes = [g.nodes[i].out_shape for i in g.inputs]
        bounds = index_input_bounds(g)         # integer inputs (token ids): random valid indices
        rng = np.random.default_rng(seed)

        def draw(k, s, real):
            return rng.integers(0, bounds[k], size=s) if k in bounds else real(s)
        xs = [draw(k, s, rng.standard_normal) for k, s in enumerate(shapes)]
        note = "random normal inputs" + (", random indices for the integer ones" if bounds else "")
        try:
            evaluate(g, payload, *xs)
        except DomainError:
            xs = [draw(k, s, lambda sh: rng.uniform(0.1, 1.0, size=sh)) for k, s in enumerate(shapes)]
            note = "random uniform(0.1, 1) inputs (the meaning is undefined on normal ones)"
        report = check_equivalence(g, payload, *xs, device=device, seed=seed)
        big = [x if k in bounds else x * LARGE for k, x in enumerate(xs)]
        try:
            large = check_equivalence(g, payload, *big, device=device, seed=seed + 1)
        except DomainError:  # the meaning is undefined at x100 (a log of a negative entry): no such pass
            large = None
    except TorchLeanError as e:
        return _fail(e)
    print(f"check {path} on {device}: {_summary(g, payload)}")
    print(f"inputs: {note}, seed {seed}")
    print(report)
    if large is None:
        print(f"\nlarge-magnitude pass: skipped, the meaning is undefined on the inputs x{LARGE:g}")
    else:
        print(f"\nlarge-magnitude pass: the same inputs x{LARGE:g}")
        print(large)
    for rep, what in ((report, ""), (large, f" (inputs x{LARGE:g})")):
        if rep is None or rep.passed:
            continue
        i, kind = rep.first_divergence
        print(f"{device} diverges from the meaning first at node {i} ({kind}), its {rep[i].what}{what}:",
              file=sys.stderr)
        print(f"  {format_node(g.nodes[i])}", file=sys.stderr)
        return 1
    return 0


def ir_convert(onnx_path, out_json) -> int:
    """Import an ONNX model and save it as IR JSON (+ safetensors payload)."""
    try:
        g, payload = from_onnx(onnx_path)
        save(g, payload, out_json)
    except TorchLeanError as e:
        return _fail(e)
    print(f"converted {onnx_path} -> {out_json}: {_summary(g, payload)}")
    return 0
