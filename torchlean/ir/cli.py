"""The ``torchlean ir check|run|convert`` commands as plain functions.

Each prints a short report and returns a process exit code: 0 success, 1 the
file or model is invalid (the error is printed), 2 the request cannot be served
here (a missing optional backend or device).
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from ..errors import BackendUnavailableError, DeviceError, TorchLeanError
from .graph import Graph
from .infer import check
from .interpret import evaluate
from .onnx import from_onnx
from .serialize import load, save

__all__ = ["ir_check", "ir_run", "ir_convert"]


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

    On ``"cpu"`` the graph is evaluated under its meaning (the spec, float64).
    Other devices need the IR compiler (``torchlean.ir.compile``).
    """
    try:
        g, payload = load(path)
        xs = []
        for p in inputs:
            try:
                xs.append(np.load(p, allow_pickle=False))
            except (OSError, ValueError) as e:
                raise TorchLeanError(f"cannot read input {p!r}: {e}") from None
        if device == "cpu":
            vals = evaluate(g, payload, *xs)
            outs = [vals[o] for o in g.outputs]
        else:
            from .. import ir as _ir
            compile_fn = getattr(_ir, "compile", None)  # the lowering, when this build has it
            if not callable(compile_fn):
                raise DeviceError(f"ir run on {device!r} needs ir.compile, which this build "
                                  f"does not include; use --device cpu")
            prog = compile_fn(g, payload, device=device)
            res = prog(*xs)
            outs = list(res) if isinstance(res, (list, tuple)) else [res]
    except TorchLeanError as e:
        return _fail(e)
    print(f"ran {path} on {device}: {len(g.nodes)} nodes")
    for o, v in zip(g.outputs, outs):
        v = v.numpy() if hasattr(v, "numpy") else v
        print(f"  output %{o}: {_describe(v)}")
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
