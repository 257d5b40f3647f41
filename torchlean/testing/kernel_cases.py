"""Sample arguments for every kernel of the buffer contract (:mod:`torchlean.kernels.api`).

The table behind :func:`cases` is keyed by *signature class*, not by kernel: each kernel's class
is read off the contract (its family and its documented signature string, parsed by
:func:`signature`), so one generator serves every kernel of a class, and a kernel added to the
contract with a known signature shape gets cases with no edit here. A one-argument kernel
``"(x)"`` in ``CONTRACT["elementwise"]`` is an elementwise unary op; ``"(x, g)"`` there a fused
backward; ``"(a, b)"`` a broadcasting binary op; ``"(shape, seed, counter, dtype)"`` an RNG
kernel; ``"(p, g, <state>..., lr, ...)"`` an in-place optimizer step; ``"(x[N, C, S], <arrays>[C],
<attributes>)"`` in ``CONTRACT["norm"]`` a normalization forward or, documented ``-> None``, an
update of the per-channel arrays in place (batch norm's running statistics); any ``<fwd>_bwd`` /
``<fwd>_backward`` whose arguments are the forward's arguments, its named outputs, ``g``,
``need_*`` flags and ``<arg>_shape`` is a backward whose cases are made from the forward's cases
(:func:`classify` has the rules). Kernels whose arguments follow no such pattern are named in
one small mapping, :data:`DECLARED`. A kernel with no class and no documented exclusion
(:data:`EXCLUDED`) is listed by :func:`missing`.

:func:`run_case` runs a case on a surface (the CUDA one) and on the host surface (the
reference) and compares what the case says to compare: the returned outputs, or for in-place
kernels (optimizer steps, ``fill``, ``assign``, batch norm's running statistics) the updated
argument arrays, within the case's :class:`Tol`. :func:`documented_problems` checks a host run
against the shapes and dtypes the contract documents.

    >>> import numpy as np
    >>> from torchlean.kernels import get_kernels
    >>> from torchlean.testing.kernel_cases import cases, classify, run_case
    >>> classify("relu"), classify("relu_bwd"), classify("conv_backward")
    ('ew_unary', 'ew_bwd', 'backward')
    >>> cs = cases("relu", np.random.default_rng(0), "float32")
    >>> [c.args[0].shape for c in cs[:3]]
    [(0,), (1,), (31,)]
    >>> out = run_case("relu", cs[2], get_kernels("cpu"))  # the host against itself
"""

from __future__ import annotations

import ast
import itertools
import keyword
import math
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..kernels import HOST
from ..kernels.api import CONTRACT

# ---- dtypes and sizes ----------------------------------------------------------------------------

FLOATS = ("float32", "float64")
INTS = ("int64", "int32")
#: Layout kernels move bytes: every dtype.
ANY = FLOATS + ("int32", "int64", "bool", "float16", "uint8")
#: Sizes that are no multiple of any block size, and the empty and size-1 cases.
SIZES = (0, 1, 31, 1000, 4097)

#: dtypes a family's kernels are tested in (FLOATS where not named), and per-kernel exceptions.
FAMILY_DTYPES = {"shape": ANY}
KERNEL_DTYPES = {"reduce_from_broadcast_to": FLOATS,  # a sum, not data movement
                 "device_ints": INTS, "host_ints": INTS}

#: Kernels with no case, and why. Everything else in the contract must have cases.
EXCLUDED = {
    "graph_capture": ("no host counterpart: it returns a CUDA graph capture scope (private memory pool, "
                      "capture stream, cuBLAS capture state) and the CPU surface raises DeviceError by "
                      "contract, so there is nothing to compare; captured graphs are checked against eager "
                      "steps in tests/test_capture.py and test_gemm_is_captured_by_a_cuda_graph"),
}


# ---- tolerances -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tol:
    """How a float output is compared with the reference.

    ``mode``: ``"close"``: ``|d - r| <= atol + rtol |r|`` elementwise (NaN where the reference has
    NaN); ``"norm"``: ``||d - r|| <= rtol ||r|| + atol`` (matrix products: summation orders differ);
    ``"sumabs"``: ``|d - r| <= rtol * K(|args|) + atol``, ``K(|args|)`` the kernel on the absolute
    values of its float arguments, in float64 (sums: the error bound of any summation order).
    ``peak`` adds ``peak * max |r|`` (over all compared outputs of the case) to ``atol``.
    ``ref64``: the reference is the host kernel on the float arguments upcast to float64.
    ``meta``: shapes and dtypes only (uninitialised memory)."""
    rtol: float = 0.0
    atol: float = 0.0
    mode: str = "close"
    peak: float = 0.0
    ref64: bool = False
    meta: bool = False


EXACT = Tol()
_EPS32, _EPS64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)


def _t(f32: Tol | None, f64: Tol | None) -> dict:
    return {k: v for k, v in (("float32", f32), ("float64", f64)) if v is not None}


#: Float comparisons, by dtype (the tolerances of the hand-written tests they replace).
DEFAULT_TOL = _t(Tol(1e-5, 1e-6), Tol(1e-12, 1e-13))
FAMILY_TOL = {
    "reduce": _t(Tol(4 * _EPS32, 0.0, "sumabs", ref64=True), Tol(4 * _EPS64, 0.0, "sumabs", ref64=True)),
    "shape": _t(EXACT, EXACT), "index": _t(EXACT, EXACT), "memory": _t(EXACT, EXACT), "rng": _t(EXACT, EXACT),
    # float32 products against the float64 product by the relative norm (TF32 would sit near 1e-3)
    "linalg": _t(Tol(1e-5, 1e-30, "norm", ref64=True), Tol(1e-12, 1e-12)),
    "optim": _t(Tol(2e-5, 2e-5), Tol(1e-12, 1e-12)),
    "conv": _t(Tol(1e-4, 1e-4), Tol(1e-11, 1e-11)),
    "norm": _t(Tol(2e-5, 2e-5), Tol(1e-12, 1e-12)),
    "attention": _t(Tol(1e-4, 2e-5, ref64=True), Tol(1e-10, 1e-10)),
    "spectral": _t(Tol(1e-4, 1e-4), Tol(1e-10, 1e-10)),
    "scan": _t(Tol(2e-5, 2e-5), Tol(1e-12, 1e-12)),
}
_SPECTRAL_CONV = _t(Tol(0.0, 0.0, peak=3e-5), Tol(0.0, 0.0, peak=1e-12))  # a truncated DFT errs relative to its peak
_FA_BWD = _t(Tol(1e-3, 1e-4, peak=1e-4, ref64=True), Tol(1e-10, 1e-10))
KERNEL_TOL = {
    # IEEE basic operations: equal to NumPy bit for bit, in every launch layout
    "add": _t(EXACT, EXACT), "sub": _t(EXACT, EXACT), "mul": _t(EXACT, EXACT), "div": _t(EXACT, EXACT),
    "max_bwd": DEFAULT_TOL,  # routes g: no sum to bound
    # sorting and counting pick or count entries: exact (bincount's weighted sums round once from double)
    "argsort": _t(EXACT, EXACT), "unique": _t(EXACT, EXACT), "histc": _t(EXACT, EXACT),
    "searchsorted": _t(EXACT, EXACT), "bincount": _t(Tol(1e-6, 1e-6), Tol(1e-12, 1e-12)),
    "reduce_from_broadcast_to": _t(Tol(1e-6, 1e-6, "sumabs", ref64=True), Tol(1e-14, 1e-14, "sumabs", ref64=True)),
    # row sums inside the backward: float32 on the host, double on the GPU
    "softmax_bwd": _t(Tol(1e-5, 1e-5), None), "log_softmax_bwd": _t(Tol(1e-5, 1e-5), None),
    # dgamma/dbeta sum over every row, in different orders
    "layer_norm_bwd": _t(Tol(1e-3, 1e-3), None), "batch_norm_bwd": _t(Tol(1e-3, 1e-3), None),
    "selective_scan_diag_bwd": _t(Tol(1e-4, 1e-4), None),
    # recurrences: a product and a cell per step, errors carried through time
    **{k: _t(Tol(2e-4, 2e-4), Tol(1e-11, 1e-11)) for k in ("lstm_scan_fwd", "lstm_scan_bwd", "gru_scan_fwd",
                                                           "gru_scan_bwd", "rnn_scan_fwd", "rnn_scan_bwd")},
    "flash_attention_bwd": _FA_BWD, "flash_attention_bwd_q": _FA_BWD, "flash_attention_bwd_k": _FA_BWD,
    "flash_attention_bwd_v": _FA_BWD,
    "spectral_conv1d_rfft_fwd": _SPECTRAL_CONV, "spectral_conv1d_rfft_bwd_x": _SPECTRAL_CONV,
    "spectral_conv1d_rfft_bwd_wre": _SPECTRAL_CONV, "spectral_conv1d_rfft_bwd_wim": _SPECTRAL_CONV,
    "spectral_conv1d_rfft_bwd": _SPECTRAL_CONV,
    # Box-Muller through the GPU's log/cos: equal up to an ulp or two
    "randn": _t(Tol(4 * _EPS32, 4 * _EPS32), Tol(4 * _EPS64, 4 * _EPS64)),
}
#: Tolerances of one kernel for one attribute value: (kernel, attribute, value) -> by dtype.
PARAM_TOL = {
    # for large |x| the tanh form's derivative is a difference of terms near 1 (1 + t, 1 - t*t): in
    # float32 that cancellation leaves a few 1e-6 absolute on any device, host included
    ("gelu_bwd", "approximate", "tanh"): _t(Tol(1e-5, 1e-5), None),
}


def tolerance(name: str, dtype, params: dict | None = None, contract: dict = CONTRACT) -> Tol:
    """The tolerance of kernel ``name``'s float outputs in ``dtype``."""
    dt = np.dtype(dtype).name
    if dt not in FLOATS:
        return EXACT
    for (kname, attr, value), by_dtype in PARAM_TOL.items():
        if kname == name and params and params.get(attr) == value and dt in by_dtype:
            return by_dtype[dt]
    for table in (KERNEL_TOL.get(name), FAMILY_TOL.get(family_of(name, contract))):
        if table and dt in table:
            return table[dt]
    return DEFAULT_TOL[dt]


# ---- cases ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """An argument made on each surface from a host array: ``fn(array on that surface, xp)`` (a
    transposed, offset, strided or stride-0 view: layouts an upload cannot carry)."""
    base: Any
    fn: Callable
    desc: str = "view"


@dataclass(frozen=True)
class Steps:
    """An argument that changes from call to call: the case calls the kernel ``len(values)``
    times (an optimizer's gradient and step count), in-place state carried over."""
    values: tuple


class _SurfaceDevice:
    """Stands for the device name of the surface a case runs on."""

    def __repr__(self):
        return "<surface device>"


SURFACE_DEVICE = _SurfaceDevice()


@dataclass
class Case:
    """One call (or a sequence of calls, see :class:`Steps`) of a kernel.

    ``args``/``kwargs``: host values (NumPy arrays are moved to the surface; positions in
    ``host`` stay host objects, as index sequences do; ``None``: read off the signature).
    ``outputs``: which returned outputs are compared (``None``: all). ``inplace``: argument
    positions whose arrays (or lists of arrays) the kernel updates in place, compared after the
    calls. ``tol``: for float outputs (``None``: :func:`tolerance` of the kernel). ``desc``: what
    the case is (failure messages name it); ``dtype``: the dtype it was made for; ``params``: its
    attribute values (tolerances may depend on them). ``bwd``: the case may seed cases of the
    kernel's backward. ``convert(output, surface)``: turns an output that is no array (a DLPack
    capsule) into one of that surface before the comparison."""
    args: tuple
    kwargs: dict = field(default_factory=dict)
    outputs: tuple | None = None
    inplace: tuple = ()
    host: tuple | None = None
    tol: Tol | None = None
    desc: str = ""
    dtype: str = ""
    params: dict = field(default_factory=dict)
    bwd: bool = True
    convert: Callable | None = None


# ---- the contract's signature strings ------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    name: str
    dims: tuple | None   # the documented dims, e.g. ("rows", "cols"); None when not documented
    optional: bool       # "| None"
    note: str            # the rest of the token (annotation)

    @property
    def host(self) -> bool:
        """Index sequences and documented host arrays stay on the host on every surface."""
        return self.name == "indices" or (("host" in self.note or "np.ndarray" in self.note)
                                          and "device" not in self.note)


@dataclass(frozen=True)
class Signature:
    args: tuple
    returns: str
    choices: dict        # attribute -> documented values ("op in {'lt', 'le'}")
    doc: str

    @property
    def names(self) -> list:
        return [a.name for a in self.args]

    def arg(self, name):
        return self.args[self.names.index(name)]


_ARG = re.compile(r"^(\w+)\s*(\[[^\]]*\])?(\s+\w+)?\s*(?:[:|](.*))?$")
_OUT = re.compile(r"^(\w+)\s*(\[[^\]]*\])?$")


def _group(s: str, start: int = 0):
    """(inside, end) of the bracket group opening at ``s[start]``."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth, stack = 0, []
    for i in range(start, len(s)):
        c = s[i]
        if c in pairs:
            stack.append(pairs[c])
            depth += 1
        elif stack and c == stack[-1]:
            stack.pop()
            depth -= 1
            if depth == 0:
                return s[start + 1:i], i + 1
    raise ValueError(f"unbalanced brackets in {s!r}")


def _split(s: str) -> list:
    """Top-level comma-separated tokens."""
    out, depth, cur = [], 0, ""
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return out


def _dims(text: str | None):
    return None if not text else tuple(t.strip() for t in _split(text[1:-1]))


def signature(doc: str) -> Signature:
    """The parsed signature string of a contract entry: arguments (names, documented dims,
    optional), the text after ``->`` and documented attribute values."""
    doc = doc.strip()
    if not doc.startswith("("):
        raise ValueError(f"a signature starts with '(': {doc!r}")
    inner, end = _group(doc, 0)
    args: list = []
    for tok in _split(inner):
        if tok.startswith("*"):  # "**kw": passed through, never generated
            continue
        m = _ARG.match(tok)
        if m is None:
            if not args:
                raise ValueError(f"cannot parse argument {tok!r} of {doc!r}")
            a = args[-1]  # a comma inside an annotation ("host 0/1 or bool array, or a device array")
            args[-1] = Arg(a.name, a.dims, a.optional, f"{a.note}, {tok}")
            continue
        args.append(Arg(m.group(1), _dims(m.group(2)), "| None" in tok, tok[m.end(1):].strip()))
    rest = doc[end:].strip()
    returns = rest[2:].strip() if rest.startswith("->") else ""
    if not returns:  # "(x) (IEEE: ...)" or "(a, b, op) op in {...} -> bool array"
        i = rest.find("->")
        returns = rest[i + 2:].strip() if i >= 0 else ""
    choices = {}
    for m in re.finditer(r"(\w+) in (\{[^}]*\})", doc):
        try:
            choices[m.group(1)] = tuple(ast.literal_eval("(" + m.group(2)[1:-1] + ",)"))
        except (ValueError, SyntaxError):
            pass
    return Signature(tuple(args), returns, choices, doc)


def documented_outputs(sig: Signature):
    """``[]`` for an in-place kernel (``-> None``); a list of ``(name | None, dims | None)`` where
    the documentation names or shapes the outputs; ``None`` where it describes them in prose."""
    r = sig.returns
    if not r:
        return None
    if re.match(r"^None\b", r):
        return []
    if r.startswith("("):
        inner, _ = _group(r, 0)
        outs = []
        for tok in _split(inner):
            m = _OUT.match(tok)
            if m is None:
                return None
            outs.append((m.group(1), _dims(m.group(2))))
        return outs
    if r.startswith("["):
        inner, _ = _group(r, 0)
        return [(None, _dims("[" + inner + "]"))]
    m = re.match(r"^(\w+)\s*(\[[^\]]*\])?(?=\s*[:=;,]|$)", r)
    if m and not m.group(1)[0].isdigit():
        return [(m.group(1), _dims(m.group(2)))]
    return None


def output_names(sig: Signature) -> list:
    """The forward's outputs by name, for binding a backward's arguments (``y`` when unnamed)."""
    outs = documented_outputs(sig)
    if not outs:
        return ["y"]
    return [n or ("y" if i == 0 else f"y{i}") for i, (n, _) in enumerate(outs)]


def kernels(contract: dict = CONTRACT) -> dict:
    return {n: d for fam in contract.values() for n, d in fam.items()}


def family_of(name: str, contract: dict = CONTRACT) -> str | None:
    for fam, names in contract.items():
        if name in names:
            return fam
    return None


def forward_of(name: str, contract: dict = CONTRACT) -> str | None:
    """The forward kernel of a backward by name: ``conv_backward`` -> ``conv_forward``,
    ``flash_attention_bwd_q`` -> ``flash_attention_fwd``, ``softmax_bwd`` -> ``softmax``."""
    names = kernels(contract)
    for suffix in ("_backward", "_bwd"):
        i = name.find(suffix)
        if i > 0:
            base = name[:i]
            for cand in (base + "_forward", base + "_fwd", base):
                if cand in names and cand != name:
                    return cand
    return None


# ---- signature classes ------------------------------------------------------------------------

#: Kernels whose arguments follow no shared pattern: their class, by name (one generator each).
DECLARED = {
    "max_bwd": "max_bwd", "sum_to_shape": "sum_to_shape",
    "argsort": "argsort", "unique": "unique", "bincount": "bincount", "histc": "histc", "searchsorted": "searchsorted",
    "cumsum": "cumulative", "cumprod": "cumulative", "cumargmax": "cumulative", "cumargmin": "cumulative",
    "concat1d": "concat1d", "slice1d": "slice1d", "swap_adjacent_at_depth": "swap_adjacent",
    "broadcast_vec_to_rows": "vec_broadcast", "broadcast_vec_to_cols": "vec_broadcast",
    "broadcast_to": "axis_map", "reduce_from_broadcast_to": "axis_map",
    "permute": "permute", "concat": "sequence", "stack": "sequence", "basic_index": "basic_index",
    "basic_index_add": "basic_index_add", "flip": "flip",
    "scatter_add_row": "scatter_row", "device_ints": "ints", "host_ints": "ints",
    "linear": "linear", "matmul_t": "matmul_t",
    "linalg_solve": "linalg", "linalg_cholesky": "linalg", "linalg_cholesky_bwd": "linalg",
    "linalg_qr": "linalg", "linalg_qr_bwd": "linalg", "linalg_svd": "linalg", "linalg_svd_bwd": "linalg",
    "linalg_eigh": "linalg", "linalg_eigh_bwd": "linalg", "linalg_det": "linalg", "linalg_det_bwd": "linalg",
    "linalg_slogdet": "linalg", "linalg_slogdet_bwd": "linalg",
    "astype": "astype", "fill": "fill", "assign": "assign", "from_host": "from_host",
    "to_device": "to_device", "bool_mask": "bool_mask", "dlpack": "dlpack",
    "mse_loss": "mse", "nll_loss": "nll",
    "conv_forward": "conv", "conv_transpose_forward": "conv_transpose",
    "flash_attention_fwd": "attention",
    "lstm_scan_fwd": "recurrence", "gru_scan_fwd": "recurrence", "rnn_scan_fwd": "recurrence",
    "rfft1d_packed": "rfft", "irfft1d_packed": "irfft", "spectral_conv1d_rfft_fwd": "spectral_conv",
}

#: Array arguments of elementwise kernels, by name; the other arguments are attributes.
EW_ARRAYS = ("x", "y", "a", "b", "g", "cond")
_EW_CLASSES = {("x",): "ew_unary", ("a", "b"): "ew_binary", ("x", "g"): "ew_bwd", ("y", "g"): "ew_bwd",
               ("a", "b", "g"): "ew_binary_bwd", ("cond", "a", "b"): "ew_where"}

#: Attribute values, by attribute name (documented ``name in {...}`` values come first).
PARAM_VALUES = {
    "c": (-2.5, 0.75),
    "p": (2, 3, 0.5, -1.5, 0, 1, -2.0),   # the first one also takes a broadcast cotangent
    "is_max": (True, False),
    "p_keep": (0.3,),
    "value": (7.5, -0.0, -np.inf),
    "beta": (1.0, 4.0),
    "eps": (1e-5,),
    # a running average's factor (optimizers take theirs from OPTIM_CONFIGS): PyTorch's default, and
    # the factor of a cumulative average's third batch (momentum=None: 1 / num_batches_tracked)
    "momentum": (0.1, 1.0 / 3.0),
}
#: Attributes that vary together: (names) -> list of value dicts.
JOINT_PARAMS = {
    ("lo", "hi"): ({"lo": -1.0, "hi": 1.0}, {"lo": None, "hi": 0.5}, {"lo": -0.5, "hi": None},
                   {"lo": None, "hi": None}, {"lo": 2.0, "hi": 1.0}),
}

#: Elementwise input domains: (lo, hi, special values written at the start of a sample).
UNARY_DOMAIN = (-8.0, 8.0, (0.0, 40.0, -40.0))  # the kink, and the overflow guards of stable forms
BWD_DOMAIN = (-6.0, 6.0, (0.0,))
DOMAIN = {
    "sqrt": (0.1, 4.0, (0.0,)),  # 0: sqrt_bwd's subgradient at y = sqrt(0)
    "log": (0.1, 4.0, ()), "inv": (0.1, 4.0, ()),
    "pow_scalar": (0.2, 3.0, ()), "pow_bwd": (0.2, 3.0, ()),
    "clamp": (-3.0, 3.0, (-1.0, 1.0, math.nan, -math.inf)),  # on the bounds: outside for the gradient
}


def _param_sets(name: str, sig: Signature, params: list, contract: dict = CONTRACT) -> list | None:
    """Value dicts for the attributes ``params`` (None when some attribute has no known values):
    values documented by the kernel (``op in {...}``) or by its forward (``gelu_bwd``'s
    ``approximate``), else :data:`JOINT_PARAMS` / :data:`PARAM_VALUES`."""
    if not params:
        return [{}]
    for names, sets in JOINT_PARAMS.items():
        if set(names) == set(params):
            return [dict(s) for s in sets]
    fwd = forward_of(name, contract)
    choices = {**(signature(kernels(contract)[fwd]).choices if fwd else {}), **sig.choices}
    values = []
    for p in params:
        v = choices.get(p) or PARAM_VALUES.get(p)
        if v is None:
            return None
        values.append(v)
    return [dict(zip(params, combo)) for combo in itertools.product(*values)]


_NORM_SHAPES = {
    ("rows", "n"): [(1, 1), (7, 32), (31, 65), (4097, 33), (5, 1000), (3, 4097), (2, 9000)],
    ("N", "C", "S"): [(1, 1, 1), (2, 3, 5), (4, 7, 31), (3, 2, 1000), (5, 4, 1)],
}


def classify(name: str, contract: dict = CONTRACT) -> str | None:
    """The signature class of kernel ``name`` (a key of :data:`GENERATORS`), or None."""
    if name in EXCLUDED:
        return None
    if name in DECLARED:
        return DECLARED[name]
    family = family_of(name, contract)
    if family is None:
        return None
    sig = signature(contract[family][name])
    names = sig.names
    if names[:1] == ["shape"] and {"seed", "counter"} <= set(names):
        extra = [n for n in names if n not in _RNG_ARGS]
        return "rng" if _param_sets(name, sig, extra, contract) is not None else None
    if names[:1] == ["shape"] and names[-1:] == ["dtype"]:
        return "alloc" if _param_sets(name, sig, names[1:-1], contract) is not None else None
    if names[:2] == ["p", "g"] and "lr" in names:
        return "optim_step" if _optim_ok(name, sig) else None
    if names[:2] == ["ps", "gs"] and "lr" in names:
        return "optim_multi" if _optim_ok(name, sig) else None
    if family == "elementwise":
        arrays = tuple(n for n in names if n in EW_ARRAYS)
        cls = _EW_CLASSES.get(arrays)
        if cls is None or names[:len(arrays)] != list(arrays):
            return None
        return cls if _param_sets(name, sig, names[len(arrays):], contract) is not None else None
    if len(sig.args) == 1 and sig.args[0].dims == ("rows", "cols"):
        return "matrix"
    if family == "reduce":
        cls = {("x", "axes", "keepdim"): "axes", ("x", "axis", "keepdim"): "axis_keep", ("x", "axis"): "nd_axis"}
        if tuple(names) in cls:
            return cls[tuple(names)]
    if family == "softmax" and names in (["x"], ["x", "mask"]):
        return "rows" if names == ["x"] else "rows_masked"
    if family == "memory" and len(names) == 1 and not sig.args[0].host:
        return "memory_x"
    if family == "index" and names[-1:] == ["indices"] and len(names) in (2, 3):
        return "gather" if len(names) == 2 else "scatter"
    if family == "linalg" and names == ["a", "b"]:
        return "matmul"
    if family == "conv" and "kernel" in names and name.endswith("_forward"):
        return "pool"
    if (family == "norm" and sig.args[0].dims in _NORM_SHAPES
            and (name.endswith("_fwd") or documented_outputs(sig) == [])):
        return "norm" if _param_sets(name, sig, _norm_attributes(sig), contract) is not None else None
    if family == "scan" and name.endswith("_fwd") and "x" in names:
        return "scan"
    if _backward_ok(name, sig, contract):
        return "backward"
    return None


def _norm_attributes(sig: Signature) -> list:
    """The attributes of a norm-class kernel: the arguments after x with no documented dims."""
    return [a.name for a in sig.args[1:] if not a.dims]


def _backward_ok(name: str, sig: Signature, contract: dict) -> bool:
    """True when every argument of ``name`` is bound by its forward's cases (see _backward)."""
    fwd = forward_of(name, contract)
    if fwd is None or "g" not in sig.names or classify(fwd, contract) is None:
        return False
    fsig = signature(kernels(contract)[fwd])
    known = set(fsig.names) | set(output_names(fsig)) | {"g", "shape"} | {f"{n}_shape" for n in fsig.names}
    return all(n in known or n.startswith("need_") for n in sig.names)


_RNG_ARGS = ("shape", "seed", "counter", "dtype")
_OPTIM_STEPS = 5
#: Optimizer hyper-parameters not named by a configuration.
DEFAULT_HYPER = dict(lr=1e-2, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, beta1=0.9,
                     beta2=0.999, eps=1e-8, decoupled=False, lr_decay=0.0, alpha=0.99, rho=0.9, maximize=False)
#: Hyper-parameters that follow the step number s = 1, 2, ...
PER_STEP = {"step": lambda s: s, "first": lambda s: s == 1}
#: Configurations per optimizer (hyper-parameters, and ``absent``: optional state passed as None);
#: an optimizer not named here runs once with every state array and DEFAULT_HYPER.
OPTIM_CONFIGS = {
    "sgd_step": [dict(lr=0.1, absent=("buf",)), dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=1e-2),
                 dict(lr=0.1, momentum=0.9, nesterov=True)],
    "adam_step": [dict(absent=("amsgrad_vmax",)), dict(weight_decay=1e-2, absent=("amsgrad_vmax",)),
                  dict(weight_decay=1e-2, decoupled=True, absent=("amsgrad_vmax",)),
                  dict(weight_decay=1e-2, decoupled=True)],
    "adagrad_step": [dict(lr=0.1, lr_decay=0.01, weight_decay=1e-3, eps=1e-10)],
    "rmsprop_step": [dict(weight_decay=1e-3, absent=("buf", "grad_avg")), dict(weight_decay=1e-3, momentum=0.9),
                     dict(weight_decay=1e-3, momentum=0.5, absent=("grad_avg",))],
    "adadelta_step": [dict(lr=1.0, eps=1e-6), dict(lr=1.0, eps=1e-6, weight_decay=1e-2)],
    "adam_step_multi": [dict(absent=("vmaxs",)), dict(weight_decay=0.1, absent=("vmaxs",)),
                        dict(weight_decay=0.1, decoupled=True, absent=("vmaxs",)), dict(),
                        dict(maximize=True, weight_decay=0.05, absent=("vmaxs",))],
}


def _optim_split(name: str, sig: Signature):
    """(state arguments, hyper-parameters) of an optimizer step: a hyper-parameter is named by
    PER_STEP, DEFAULT_HYPER or every configuration of the kernel; every other argument after
    the parameter and its gradient is state (an array, or a list of them for ``*_multi``)."""
    configs = OPTIM_CONFIGS.get(name, [{}])
    hyper = [n for n in sig.names[2:] if n in PER_STEP or n in DEFAULT_HYPER or all(n in c for c in configs)]
    return [a for a in sig.args[2:] if a.name not in hyper], hyper


def _optim_ok(name: str, sig: Signature) -> bool:
    state, hyper = _optim_split(name, sig)
    return "lr" in hyper and all(a.name.isidentifier() for a in state)


def missing(contract: dict = CONTRACT) -> list:
    """Contract kernels with neither a signature class (so no cases) nor a documented exclusion."""
    return [n for n in kernels(contract) if n not in EXCLUDED and classify(n, contract) is None]


def lineage(cls: str, contract: dict = CONTRACT) -> list:
    """Kernels of signature class ``cls`` and the backward kernels made from their cases (the
    kernels a native path with a tunable threshold serves: ``lineage("conv")``)."""
    out = []
    for n in kernels(contract):
        c = classify(n, contract)
        if c == cls or (c == "backward" and classify(forward_of(n, contract), contract) == cls):
            out.append(n)
    return out


def dtypes(name: str, contract: dict = CONTRACT) -> tuple:
    """The dtypes kernel ``name`` is tested in (empty for an excluded kernel)."""
    if name in EXCLUDED:
        return ()
    return KERNEL_DTYPES.get(name) or FAMILY_DTYPES.get(family_of(name, contract), FLOATS)


# ---- generators ---------------------------------------------------------------------------------


@dataclass
class Kernel:
    """What a generator gets: the kernel, its parsed signature, the generator and the dtype."""
    name: str
    family: str
    sig: Signature
    rng: np.random.Generator
    dtype: np.dtype
    contract: dict

    def rand(self, shape, lo=-3.0, hi=3.0, dtype=None):
        dt = np.dtype(dtype or self.dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if dt.kind == "f":
            return np.asarray(self.rng.uniform(lo, hi, size=shape)).astype(dt)
        if dt.kind == "b":
            return np.asarray(self.rng.random(shape) < 0.5)
        if dt.kind == "u":
            return np.asarray(self.rng.integers(0, 200, size=shape)).astype(dt)
        return np.asarray(self.rng.integers(-100, 100, size=shape)).astype(dt)

    def other_float(self):
        return np.dtype(np.float64 if self.dtype == np.float32 else np.float32)

    def case(self, values: dict, desc: str, **kw) -> Case:
        """A case from argument values by name, in the documented order."""
        missing_args = [n for n in self.sig.names if n not in values]
        if missing_args:
            raise KeyError(f"{self.name}: no value for argument(s) {missing_args} ({desc})")
        for key in ("host", "inplace"):
            if key in kw and kw[key] is not None:
                kw[key] = tuple(self.sig.names.index(v) if isinstance(v, str) else v for v in kw[key])
        return Case(tuple(values[n] for n in self.sig.names), desc=" ".join(desc.split()), **kw)

    def derive(self, name: str) -> Kernel:
        fam = family_of(name, self.contract)
        return Kernel(name, fam, signature(self.contract[fam][name]), self.rng, self.dtype, self.contract)


GENERATORS: dict = {}


def generator(*classes):
    def deco(fn):
        for c in classes:
            GENERATORS[c] = fn
        return fn
    return deco


def _sample(k: Kernel, shape, domain, specials=True):
    lo, hi, sp = domain
    x = k.rand(shape, lo, hi)
    if specials and sp and x.size > len(sp):
        x.reshape(-1)[:len(sp)] = sp
    return x


def _pdesc(ps: dict) -> str:
    return " ".join(f"{k}={v!r}" for k, v in ps.items())


# -- elementwise --


def _ew_parts(k: Kernel):
    arrays = [n for n in k.sig.names if n in EW_ARRAYS]
    params = k.sig.names[len(arrays):]
    return arrays, _param_sets(k.name, k.sig, params, k.contract)


@generator("ew_unary")
def _ew_unary(k: Kernel):
    _, psets = _ew_parts(k)
    dom = DOMAIN.get(k.name, UNARY_DOMAIN)
    out = []
    for shape in [(n,) for n in SIZES] + [(31, 33), ()]:
        x = _sample(k, shape, dom)
        for ps in psets:
            out.append(k.case({"x": x, **ps}, f"x{shape} {_pdesc(ps)}", params=ps))
    if k.dtype == np.float32:
        # the float32 kernel against the host in float64 on the same inputs (the first attributes)
        lo, hi, _ = dom
        x = k.rand(4097, max(lo, -6.0), min(hi, 6.0))
        out.append(k.case({"x": x, **psets[0]}, f"float32 vs the float64 host {_pdesc(psets[0])}",
                          tol=Tol(2e-6, 2e-7, ref64=True), params=psets[0]))
    return out


_BINARY_SHAPES = [((4, 1, 31), (5, 31)), ((1000,), (1000,)), ((4097,), (1,)), ((), (31,)), ((), ()),
                  ((33, 65), (65,)), ((3, 5, 7), (7,)), ((31,), ()), ((0,), (0,)), ((0, 4), (4,)), ((1,), (1,)),
                  ((31, 1000), (31, 1000))]


@generator("ew_binary")
def _ew_binary(k: Kernel):
    _, psets = _ew_parts(k)
    out = []

    def add(a, b, desc):
        for ps in psets:
            out.append(k.case({"a": a, "b": b, **ps}, f"{desc} {_pdesc(ps)}", params=ps))
    for sa, sb in _BINARY_SHAPES:
        a, b = k.rand(sa), k.rand(sb, 0.5, 2.0)
        if sa == sb and a.size >= 3:
            b.reshape(-1)[:3] = a.reshape(-1)[:3]  # ties
        elif sa == (4, 1, 31):
            b[0, :4] = a[0, 0, :4]
        add(a, b, f"{sa} op {sb}")
        if sa != sb or a.size:
            add(b, a, f"{sb} op {sa}")
    a, b = k.rand(1000), k.rand(1000, 0.5, 2.0)
    a[:3] = [np.nan, np.inf, -np.inf]
    b[3:5] = [np.nan, np.inf]
    add(a, b, "NaN and inf")
    m = k.rand((8, 6))
    add(View(m, lambda v, xp: v[:, ::2], "m[:, ::2]"), View(m, lambda v, xp: v[:, 1::2], "m[:, 1::2]"),
        "strided views")
    add(View(m, lambda v, xp: v.T, "m.T"), k.rand(8, 0.5, 2.0), "a transposed operand")
    add(k.rand((31, 33)), k.rand(33, 0.5, 2.0, dtype=k.other_float()), f"mixed dtypes {k.dtype} op {k.other_float()}")
    return out


@generator("ew_where")
def _ew_where(k: Kernel):
    out = []
    for n in SIZES:
        out.append(k.case({"cond": k.rand(n, dtype=bool), "a": k.rand(n), "b": k.rand(n)}, f"n={n}"))
    out.append(k.case({"cond": k.rand((4, 5, 31), dtype=bool), "a": k.rand((4, 1, 31)), "b": k.rand((5, 31))},
                      "broadcast"))
    out.append(k.case({"cond": k.rand((3, 4), dtype=bool), "a": k.rand((3, 4)), "b": k.rand(())}, "0-d b"))
    return out


@generator("ew_bwd")
def _ew_bwd(k: Kernel):
    arrays, psets = _ew_parts(k)
    fwd = forward_of(k.name, k.contract)
    if arrays[0] == "y" and fwd is not None:
        dom = DOMAIN.get(k.name) or DOMAIN.get(fwd, UNARY_DOMAIN)
        fsig = signature(kernels(k.contract)[fwd])

        def first(shape, ps):  # y = forward(x): in the forward's range (0 < sigmoid < 1, ...)
            x = _sample(k, shape, dom)
            with _quiet():
                return np.asarray(getattr(HOST, fwd)(x, *[ps[n] for n in fsig.names[1:]]))
    else:
        dom = DOMAIN.get(k.name) or DOMAIN.get(fwd or "", BWD_DOMAIN)

        def first(shape, ps):
            return _sample(k, shape, dom)
    out = []
    for shape in [(n,) for n in SIZES] + [(31, 33), ()]:
        for ps in psets:
            out.append(k.case({arrays[0]: first(shape, ps), "g": k.rand(shape), **ps},
                              f"{shape} {_pdesc(ps)}", params=ps))
    ps = psets[0]
    g = k.rand(33)
    out.append(k.case({arrays[0]: first((31, 33), ps), "g": g, **ps}, f"broadcast cotangent (33,) {_pdesc(ps)}",
                      params=ps))
    out.append(k.case({arrays[0]: first((31, 33), ps), "g": View(g, lambda v, xp: xp.broadcast_to(v, (31, 33)),
                                                                  "stride-0 view"), **ps},
                      f"stride-0 cotangent {_pdesc(ps)}", params=ps))
    return out


@generator("ew_binary_bwd")
def _ew_binary_bwd(k: Kernel):
    _, psets = _ew_parts(k)
    out = []
    for n in SIZES:
        a = k.rng.integers(-2, 3, n).astype(k.dtype)  # integer values: ties everywhere
        b = k.rng.integers(-2, 3, n).astype(k.dtype)
        g = k.rand(n)
        for ps in psets:
            out.append(k.case({"a": a, "b": b, "g": g, **ps}, f"n={n} {_pdesc(ps)}", params=ps))
            if n:
                out.append(k.case({"a": a[:1].copy(), "b": b, "g": g, **ps}, f"broadcast a (1,) n={n} {_pdesc(ps)}",
                                  params=ps))
    return out


# -- reductions --

_SHAPES_2D = [(1, 1), (1, 7), (7, 1), (31, 1000), (4097, 3), (3, 4097), (33, 65), (64, 64), (1, 200003),
              (200003, 1), (257, 1025), (1000, 17), (5, 0), (0, 5)]


@generator("matrix")
def _matrix(k: Kernel):
    """``(x[rows, cols])``: documented constraints such as ``(rows >= 1)`` are respected."""
    need = set(re.findall(r"\((\w+) >= 1\)", k.sig.doc))
    out = []
    for shape in _SHAPES_2D:
        env = dict(zip(("rows", "cols"), shape))
        if any(env.get(d, 1) < 1 for d in need):
            continue
        out.append(k.case({"x": k.rand(shape)}, f"x{shape}"))
    return out


_X4 = (4, 31, 1, 1000)


@generator("axes")
def _axes(k: Kernel):
    out = []
    x = k.rand(_X4)
    for axes in (None, (0,), (1, 2), (0, 2), (0, 1, 3), (-1,), (-3, -1), ()):
        for keep in (False, True):
            out.append(k.case({"x": x, "axes": axes, "keepdim": keep}, f"x{_X4} axes={axes} keepdim={keep}"))
    for n in SIZES:
        out.append(k.case({"x": k.rand(n), "axes": None, "keepdim": False}, f"whole x({n},)"))
    out.append(k.case({"x": k.rand(()), "axes": None, "keepdim": False}, "0-d"))
    e = k.rand((0, 3))
    for axes in ((0,), (1,), None):
        out.append(k.case({"x": e, "axes": axes, "keepdim": False}, f"empty x(0, 3) axes={axes}"))
    return out


@generator("axis_keep")
def _axis_keep(k: Kernel):
    out = []
    x = k.rand(_X4)
    for axis in (0, 1, 2, 3, -1):
        for keep in (False, True):
            out.append(k.case({"x": x, "axis": axis, "keepdim": keep}, f"x{_X4} axis={axis} keepdim={keep}"))
    for shape, axis in (((4097,), 0), ((1, 1), 0), ((0, 3), 1), ((3, 4097), 1), ((4097, 3), 0)):
        out.append(k.case({"x": k.rand(shape), "axis": axis, "keepdim": False}, f"x{shape} axis={axis}"))
    return out


@generator("nd_axis")
def _nd_axis(k: Kernel):
    x = k.rand((3, 31, 5, 67))
    out = [k.case({"x": x, "axis": a}, f"x(3, 31, 5, 67) axis={a}") for a in range(-4, 4)]
    for shape, axis in (((4097,), 0), ((0, 3), 0), ((0, 3), 1), ((31, 0), 1), ((1,), 0)):
        out.append(k.case({"x": k.rand(shape), "axis": axis}, f"x{shape} axis={axis}"))
    return out


@generator("max_bwd")
def _max_bwd(k: Kernel):
    out = []
    x = k.rng.integers(0, 4, (5, 31, 7)).astype(k.dtype)  # ties everywhere
    x[1, 3, 2] = np.nan
    for axis in (0, 1, 2, -1):
        y = HOST.amax(x, axis, True)
        out.append(k.case({"x": x, "y_keepdim": y, "g_keepdim": k.rand(y.shape), "axis": axis},
                          f"ties and a NaN, axis={axis}"))
    for n in SIZES[1:]:
        x = k.rand(n)
        y = HOST.amax(x, 0, True)
        out.append(k.case({"x": x, "y_keepdim": y, "g_keepdim": k.rand(y.shape), "axis": 0}, f"x({n},)"))
    return out


@generator("sum_to_shape")
def _sum_to_shape(k: Kernel):
    g = k.rand((3, 4, 31, 5))
    out = [k.case({"g": g, "shape": s}, f"g(3, 4, 31, 5) to {s}")
           for s in ((3, 4, 31, 5), (5,), (31, 1), (1, 4, 1, 5), (), (4, 31, 5), (1, 1, 1, 1))]
    out.append(k.case({"g": k.rand((4097, 3)), "shape": (3,)}, "g(4097, 3) to (3,)"))
    out.append(k.case({"g": k.rand((0, 3)), "shape": (3,)}, "g(0, 3) to (3,)"))
    return out


# -- sorting, counting and cumulative ops --


def _ties(k: Kernel, shape, nans=0):
    """Small integers as floats (ties everywhere, exact), with ``nans`` NaNs at the start."""
    x = k.rng.integers(-3, 4, size=shape).astype(k.dtype)
    if nans and x.size > nans:
        x.reshape(-1)[:nans] = np.nan
    return x


@generator("argsort")
def _argsort(k: Kernel):
    out = []
    x = _ties(k, (3, 31, 5), nans=3)
    for axis in (0, 1, 2, -1):
        for desc in (False, True):
            out.append(k.case({"x": x, "axis": axis, "descending": desc}, f"ties, NaN x(3, 31, 5) axis={axis} "
                              f"descending={desc}"))
    for shape, axis in (((4097,), 0), ((0, 3), 0), ((31, 0), 1), ((1,), 0)):
        out.append(k.case({"x": k.rand(shape), "axis": axis, "descending": True}, f"x{shape} axis={axis}"))
    out.append(k.case({"x": View(x, lambda v, xp: v[:, ::2].transpose(2, 1, 0), "strided"), "axis": 1,
                       "descending": False}, "a strided view"))
    return out


@generator("unique")
def _unique(k: Kernel):
    out = [k.case({"x": _ties(k, (1000,), nans=2), "axis": None}, "ties and two NaNs (1000,)"),
           k.case({"x": _ties(k, (3, 31, 5)), "axis": None}, "x(3, 31, 5) flattened"),
           k.case({"x": k.rand(4097), "axis": None}, "distinct (4097,)"),
           k.case({"x": k.rand(0), "axis": None}, "empty"),
           k.case({"x": k.rand(()), "axis": None}, "0-d")]
    rows = _ties(k, (6, 3))
    x = rows[k.rng.integers(0, 6, size=31)]
    out.append(k.case({"x": x, "axis": 0}, "repeated rows (31, 3) axis=0"))
    out.append(k.case({"x": np.ascontiguousarray(x.T), "axis": 1}, "repeated columns (3, 31) axis=1"))
    return out


@generator("bincount")
def _bincount(k: Kernel):
    out = []
    for n, hi in ((1000, 50), (4097, 7), (1, 1), (0, 1)):
        x = k.rng.integers(0, hi, size=n).astype(np.int64)
        for minlength in (0, 10, 100):
            out.append(k.case({"x": x, "weights": None, "minlength": minlength}, f"x({n},) in [0, {hi}) "
                              f"minlength={minlength}"))
            out.append(k.case({"x": x, "weights": k.rand(n), "minlength": minlength}, f"weighted x({n},) "
                              f"minlength={minlength}"))
    return out


@generator("histc")
def _histc(k: Kernel):
    out = []
    x = k.rand(1000)
    x[:5] = [-2.0, 2.0, np.nan, 0.0, 2.5]  # both edges, a NaN, the middle, outside
    for bins, lo, hi in ((10, -2.0, 2.0), (1, -1.0, 1.0), (100, -3.0, 3.0), (7, 0.25, 0.5)):
        out.append(k.case({"x": x, "bins": bins, "lo": lo, "hi": hi}, f"(1000,) bins={bins} [{lo}, {hi}]"))
    out.append(k.case({"x": k.rand((31, 33)), "bins": 13, "lo": -3.0, "hi": 3.0}, "2-D x"))
    out.append(k.case({"x": k.rand(0), "bins": 4, "lo": 0.0, "hi": 1.0}, "empty"))
    return out


@generator("searchsorted")
def _searchsorted(k: Kernel):
    out = []
    seq = np.sort(_ties(k, (1000,))) * k.dtype.type(0.5)
    vals = _ties(k, (31, 7)) * k.dtype.type(0.5)
    vals[0, :3] = [-10.0, 10.0, seq[500]]
    nd_seq = np.sort(k.rand((3, 5, 40)), axis=-1)
    nd_vals = k.rand((3, 5, 9))
    nd_vals[..., 0] = nd_seq[..., 7]
    for right in (False, True):
        out.append(k.case({"seq": seq, "values": vals, "right": right}, f"1-D seq with ties right={right}"))
        out.append(k.case({"seq": nd_seq, "values": nd_vals, "right": right}, f"seq(3, 5, 40) right={right}"))
        out.append(k.case({"seq": seq, "values": k.rand(0), "right": right}, f"no values right={right}"))
        out.append(k.case({"seq": k.rand(0), "values": vals, "right": right}, f"empty seq right={right}"))
    return out


@generator("cumulative")
def _cumulative(k: Kernel):
    """Products stay near 1 (signs mixed, zeros sprinkled: cumprod_bwd's exact path); the running
    argmax / argmin see ties and NaNs."""
    prod = k.name == "cumprod"
    arg = k.name.startswith("cumarg")

    def sample(shape):
        if arg:
            return _ties(k, shape, nans=2 if int(np.prod(shape)) > 40 else 0)
        if not prod:
            return k.rand(shape)
        x = k.rand(shape, 0.9, 1.1) * np.where(k.rng.random(shape) < 0.5, -1, 1).astype(k.dtype)
        x.reshape(-1)[::37] = 0
        return x
    out = []
    x = sample((3, 31, 5, 17))
    for axis in (0, 1, 2, 3, -1, -3):
        out.append(k.case({"x": x, "axis": axis}, f"x(3, 31, 5, 17) axis={axis}"))
    for shape, axis in (((4097,), 0), ((0, 3), 0), ((0, 3), 1), ((31, 0), 1), ((1,), 0), ((2, 1000), 1)):
        out.append(k.case({"x": sample(shape), "axis": axis}, f"x{shape} axis={axis}"))
    return out


# -- layout --


@generator("concat1d")
def _concat1d(k: Kernel):
    return [k.case({"a": k.rand(n), "b": k.rand(m)}, f"({n},) + ({m},)")
            for n, m in ((0, 0), (0, 5), (1, 1), (31, 4097), (1000, 0), (7, 1000))]


@generator("slice1d")
def _slice1d(k: Kernel):
    out = [k.case({"x": k.rand(1000), "start": 5, "length": 900}, "x(1000,)[5:905]")]
    for m in (0, 1, 5, 4097):
        b = k.rand(m)
        spans = [(0, m), (m, 0)] + ([(m - 1, 1), (m // 3, m - m // 3)] if m else [])
        out += [k.case({"x": b, "start": s, "length": n}, f"x({m},)[{s}:{s + n}]") for s, n in spans]
    return out


@generator("vec_broadcast")
def _vec_broadcast(k: Kernel):
    """``(v[d], e)``: v of length d spread along a new axis of length e."""
    (v, d), other = (k.sig.args[0].name, k.sig.args[0].dims[0]), k.sig.args[1].name
    out = []
    for rows, cols in ((1, 1), (31, 1000), (4097, 3), (0, 4), (3, 0), (31, 33)):
        env = {"rows": rows, "cols": cols}
        out.append(k.case({v: k.rand(env[d]), other: env[other]}, f"rows={rows} cols={cols}"))
    return out


_PLANS = [((3,), (4097, 3), None), ((31, 1), (2, 31, 1000), None), ((1, 1), (5, 7), None), ((), (3, 4), (0, 0)),
          ((5,), (5, 3, 2), (1, 0, 0)),  # the seeds' map: inserted axes after the input's
          ((4, 1, 6), (4, 3, 6, 2), (1, 2, 3, 0)), ((2, 3), (2, 3), (1, 2)), ((1,), (0, 3), (0, 1)),
          ((1, 1000), (4, 3, 1000), None)]


@generator("axis_map")
def _axis_map(k: Kernel):
    """``broadcast_to`` (input of in_dims) and its adjoint (input of out_dims) over the same plans."""
    from ..shape import broadcast_plan
    first = k.sig.names[0]
    out = []
    for in_dims, out_dims, amap in _PLANS:
        if amap is None:
            in_dims, out_dims, amap = broadcast_plan(in_dims, out_dims)
        shape = in_dims if first == "x" else out_dims
        out.append(k.case({first: k.rand(shape), "in_dims": tuple(in_dims), "out_dims": tuple(out_dims),
                           "axis_map": tuple(amap)}, f"{tuple(in_dims)} -> {tuple(out_dims)} map {tuple(amap)}"))
    return out


@generator("swap_adjacent")
def _swap_adjacent(k: Kernel):
    dims = (3, 31, 5, 67)
    x = k.rand(dims).reshape(-1)
    # depths out of range: the identity
    out = [k.case({"x": x, "dims": dims, "depth": d}, f"dims={dims} depth={d}") for d in range(-1, 5)]
    for dims, d in (((4097, 3, 1), 0), ((0, 3, 2), 1), ((31, 1000), 0), ((1, 1), 0)):
        out.append(k.case({"x": k.rand(dims), "dims": dims, "depth": d}, f"dims={dims} depth={d}"))
    return out


@generator("permute")
def _permute(k: Kernel):
    x = k.rand((3, 31, 5))
    out = [k.case({"x": x, "perm": p}, f"x(3, 31, 5) perm={p}") for p in itertools.permutations(range(3))]
    for shape, p in (((4097,), (0,)), ((), ()), ((0, 3, 2), (2, 0, 1)), ((2, 3, 4, 5), (3, 1, 0, 2)),
                     ((31, 1000), (1, 0))):
        out.append(k.case({"x": k.rand(shape), "perm": p}, f"x{shape} perm={p}"))
    return out


@generator("sequence")
def _sequence(k: Kernel):
    """``concat`` (shapes equal off the axis) and ``stack`` ("same-shape": a new axis)."""
    seq = k.sig.names[0]
    out = []
    if "same-shape" in k.sig.doc:
        for shape, n, axes in (((4, 5), 3, (0, 1, 2, -1)), ((), 2, (0,)), ((0, 3), 2, (1,)), ((4097,), 1, (0,)),
                               ((31, 33), 2, (-3,))):
            xs = [k.rand(shape) for _ in range(n)]
            out += [k.case({seq: xs, "axis": a}, f"{n} x {shape} axis={a}") for a in axes]
        return out
    for shapes, axes in ((((3, 5), (2, 5), (0, 5)), (0,)), (((4, 1), (4, 31)), (1, -1)), (((2, 3, 4),) * 3, (0, 1, 2)),
                         (((31,),), (0,)), (((0,), (1000,), (4097,)), (0,))):
        xs = [k.rand(s) for s in shapes]
        out += [k.case({seq: xs, "axis": a}, f"{shapes} axis={a}") for a in axes]
    return out


@generator("flip")
def _flip(k: Kernel):
    x = k.rand((3, 31, 5))
    out = [k.case({"x": x, "axes": a}, f"x(3, 31, 5) axes={a}") for a in ((), (0,), (1,), (2,), (0, 2), (0, 1, 2))]
    for shape, a in (((4097,), (0,)), ((), ()), ((0, 3, 2), (0, 2)), ((31, 1000), (1,))):
        out.append(k.case({"x": k.rand(shape), "axes": a}, f"x{shape} axes={a}"))
    return out


_KEYS = [(1,), (slice(1, None, 2),), (Ellipsis, 3), (None, 2, slice(None), slice(None, None, -1)), (slice(0, 0),),
         (4, 30, 6), (Ellipsis,), (slice(-3, None), None), (slice(None), slice(2, 29, 3), Ellipsis)]


@generator("basic_index")
def _basic_index(k: Kernel):
    x = k.rand((5, 31, 7))
    out = [k.case({"x": x, "key": key}, f"x(5, 31, 7)[{key}]") for key in _KEYS]
    out.append(k.case({"x": k.rand(4097), "key": (slice(5, 4000, 7),)}, "x(4097,)[5:4000:7]"))
    return out


@generator("basic_index_add")
def _basic_index_add(k: Kernel):
    out = []
    for key in _KEYS:
        x = k.rand((5, 31, 7))
        region = np.zeros((5, 31, 7))[key].shape
        out.append(k.case({"x": x, "key": key, "g": k.rand(region)}, f"x(5, 31, 7)[{key}] += g",
                          inplace=("x",), outputs=()))
    out.append(k.case({"x": k.rand(4097), "key": (slice(5, 4000, 7),), "g": k.rand(571)},
                      "x(4097,)[5:4000:7] += g", inplace=("x",), outputs=()))
    return out


# -- index --

_OOB = 2 ** 32 - 1  # in uint32 range but out of bounds: gathers 0, ignored by scatters


@generator("gather")
def _gather(k: Kernel):
    first = k.sig.args[0]
    nd = len(first.dims or ("n",))
    src = k.rand(1000) if nd == 1 else k.rand((31, 1000))
    n = src.shape[0]
    out = []
    for idx, desc in (([0, n - 1, n, 5, _OOB, 5, min(31, n - 1)], "out of bounds -> 0"), ([], "empty list"),
                      (np.array([], dtype=np.int64), "empty array"), (np.arange(7), "np.arange(7)"),
                      (k.rng.integers(0, n + n // 10 + 2, 4097), "4097 random, some out of bounds"),
                      (np.array([n - 1], dtype=np.int32), "int32")):
        out.append(k.case({first.name: src, "indices": idx}, desc))
    if nd > 1:
        out.append(k.case({first.name: k.rand((5, 3, 4)), "indices": np.arange(7)}, "3-d rows"))
    return out


@generator("scatter")
def _scatter(k: Kernel):
    """``(x, values, indices)``: repeats accumulate in index order (equal bit for bit), OOB ignored."""
    first = k.sig.args[0]
    tail = () if len(first.dims or ("n",)) == 1 else (7,)
    out = []
    for rows, idx, desc in ((31, [3, 3, 3, 0, 30, 31, _OOB, 3], "repeats and out of bounds"),
                            (31, k.rng.integers(0, 40, 4097), "4097 indices, many collisions"),
                            (31, [], "no indices"), (1, [0, 0], "one row"),
                            (31, k.rng.integers(0, 35, 3000), "3000 indices")):
        x = k.rand((rows,) + tail)
        vals = k.rand((len(idx),) + tail)
        out.append(k.case({first.name: x, "values": vals, "indices": idx}, desc))
    return out


@generator("scatter_row")
def _scatter_row(k: Kernel):
    mat = k.rand((31, 1000))
    out = [k.case({"mat": mat, "row": k.rand(1000), "i": i}, f"i={i}") for i in (0, 30, 31, _OOB)]
    out.append(k.case({"mat": k.rand((1, 1)), "row": k.rand(1), "i": 0}, "(1, 1)"))
    return out


@generator("ints")
def _ints(k: Kernel):
    """``device_ints`` (a host int array) and ``host_ints`` (a device int array)."""
    arg = k.sig.args[0]
    out = []
    info = np.iinfo(k.dtype)
    for shape in ((0,), (1,), (31,), (4, 5), (4097,), ()):
        a = np.asarray(k.rng.integers(max(info.min, -2 ** 40), min(info.max, 2 ** 40), size=shape)).astype(k.dtype)
        out.append(k.case({arg.name: a}, f"{k.dtype}{shape}"))
    if arg.host:
        out.append(k.case({arg.name: [3, 1, 4, 1, 5]}, "a list"))
    return out


# -- linear algebra --

_MATMUL = [((31, 65), (65, 17)), ((1, 1), (1, 1)), ((31, 1000), (1000, 33)), ((2, 1, 5, 7), (3, 7, 4)),
           ((7,), (7, 4)), ((5, 7), (7,)), ((7,), (7,)), ((0, 7), (7, 4)), ((3, 0), (0, 4)), ((4, 5, 7), (7, 3))]
_BMM = [((3, 31, 65), (3, 65, 17)), ((1, 1, 1), (1, 1, 1)), ((2, 7, 0), (2, 0, 3)), ((4, 1, 1000), (4, 1000, 5))]


@generator("matmul")
def _matmul(k: Kernel):
    batched = len(k.sig.args[0].dims or ()) == 3
    return [k.case({"a": k.rand(sa), "b": k.rand(sb)}, f"{sa} @ {sb}") for sa, sb in (_BMM if batched else _MATMUL)]


@generator("matmul_t")
def _matmul_t(k: Kernel):
    out = []
    for sa, sb in _MATMUL + _BMM:
        if len(sa) < 2 or len(sb) < 2:
            continue
        for ta in (False, True):
            for tb in (False, True):
                a, b = k.rand(sa), k.rand(sb)
                a = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if ta else a
                b = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b
                out.append(k.case({"a": a, "b": b, "ta": ta, "tb": tb}, f"{sa} @ {sb} ta={ta} tb={tb}"))
    return out


@generator("linear")
def _linear(k: Kernel):
    out = []
    for xs in ((31, 65), (2, 3, 65), (65,), (0, 65), (4097, 65)):
        x, w, b = k.rand(xs), k.rand((17, 65)), k.rand(17)
        out.append(k.case({"x": x, "w": w, "b": b}, f"x{xs} with bias"))
        out.append(k.case({"x": x, "w": w, "b": None}, f"x{xs} no bias"))
    return out


def _spd(k: Kernel, shape):
    a = k.rand(shape, -1.0, 1.0).astype(np.float64)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(k.dtype)


def _distinct_sv(k: Kernel, shape):
    """A matrix with well separated singular values 2 ... 0.5 (unique singular vectors up to sign)."""
    *batch, m, n = shape
    u = np.linalg.qr(k.rng.standard_normal((*batch, m, m)))[0]
    v = np.linalg.qr(k.rng.standard_normal((*batch, n, n)))[0]
    s = np.zeros(shape)
    i = np.arange(min(m, n))
    s[..., i, i] = np.linspace(2.0, 0.5, len(i))
    return (u @ s @ v).astype(k.dtype)


_DECOMP_TOL = _t(Tol(1e-4, 1e-6, "norm", ref64=True), Tol(1e-10, 1e-12, "norm"))


@generator("linalg")
def _linalg(k: Kernel):
    """The decompositions on well-conditioned matrices (separated eigen- and singular values, so
    their vectors are unique up to the normalised sign); each backward on its forward's results
    and a random cotangent of each."""
    H, n, out = HOST, k.name, []

    def case(values, desc, **kw):
        out.append(k.case(values, desc, tol=_DECOMP_TOL[str(k.dtype)], **kw))

    for shape in ((3, 3), (1, 1), (2, 5, 5), (17, 17)):
        spd, gen = _spd(k, shape), (k.rand(shape, -1.0, 1.0) + shape[-1] * np.eye(shape[-1])).astype(k.dtype)
        g = k.rand(shape, -1.0, 1.0)
        if n == "linalg_solve":
            case({"a": gen, "b": k.rand(shape[:-1] + (2,))}, f"a{shape}")
        elif n == "linalg_cholesky":
            case({"a": spd}, f"{shape}")
        elif n == "linalg_cholesky_bwd":
            case({"l": H.linalg_cholesky(spd), "g": g}, f"{shape}")
        elif n == "linalg_eigh":
            a = _distinct_sv(k, shape)
            a = (a + np.swapaxes(a, -1, -2)).astype(k.dtype)
            for upper in (False, True):
                case({"a": a, "upper": upper}, f"{shape} upper={upper}")
        elif n == "linalg_eigh_bwd":
            a = _distinct_sv(k, shape)
            w, v = H.linalg_eigh((a + np.swapaxes(a, -1, -2)).astype(k.dtype), False)
            case({"w": w, "v": v, "gw": k.rand(w.shape, -1.0, 1.0), "gv": g}, f"{shape}")
        elif n in ("linalg_det", "linalg_slogdet"):
            case({"a": gen}, f"{shape}")
            case({"a": -gen}, f"{shape} negated")
        elif n in ("linalg_det_bwd", "linalg_slogdet_bwd"):
            case({"a": gen, "g": k.rand(shape[:-2], -1.0, 1.0)}, f"{shape}")
    for shape in ((4, 3), (3, 5), (3, 3), (2, 6, 4), (1, 1)):
        a = _distinct_sv(k, shape)
        if n == "linalg_qr":
            for mode in ("reduced", "complete", "r"):
                case({"a": a, "mode": mode}, f"{shape} {mode}")
        elif n == "linalg_qr_bwd":
            for mode in ("reduced", "complete") if shape[-2] <= shape[-1] else ("reduced",):
                q, r = H.linalg_qr(a, mode)
                case({"a": a, "q": q, "r": r, "gq": k.rand(q.shape, -1.0, 1.0), "gr": k.rand(r.shape, -1.0, 1.0),
                      "mode": mode}, f"{shape} {mode}")
        elif n == "linalg_svd":
            # full matrices only where the complement is one vector (else no unique basis)
            for full in (False, True) if abs(shape[-1] - shape[-2]) <= 1 else (False,):
                case({"a": a, "full_matrices": full}, f"{shape} full_matrices={full}")
        elif n == "linalg_svd_bwd":
            u, sv, vh = H.linalg_svd(a, False)
            case({"u": u, "s": sv, "vh": vh, "gu": k.rand(u.shape, -1.0, 1.0), "gs": k.rand(sv.shape, -1.0, 1.0),
                  "gvh": k.rand(vh.shape, -1.0, 1.0)}, f"{shape}")
    return out


# -- memory --


@generator("alloc")
def _alloc(k: Kernel):
    """``(shape, ..., dtype)``; an uninitialised result is compared by shape and dtype only."""
    psets = _param_sets(k.name, k.sig, k.sig.names[1:-1], k.contract)
    meta = "uninitialised" in k.sig.doc
    out = []
    for shape in ((0,), (1,), (31, 1000), (4097,), (3, 0), ()):
        for ps in psets:
            out.append(k.case({"shape": shape, "dtype": k.dtype, **ps}, f"shape={shape} {_pdesc(ps)}",
                              tol=Tol(meta=True) if meta else None, params=ps))
    return out


def _layouts(k: Kernel):
    """Arrays in the layouts a kernel may meet: contiguous of every size, 0-d, transposed, offset."""
    m = k.rand((31, 33))
    flat = k.rand(1 + 31 * 33)
    return ([(k.rand(n), f"({n},)") for n in SIZES] + [(m, "(31, 33)"), (k.rand(()), "0-d"),
            (View(m, lambda v, xp: v.T, "m.T"), "transposed view"),
            (View(flat, lambda v, xp: v[1:].reshape(31, 33), "offset"), "offset view")])


@generator("memory_x")
def _memory_x(k: Kernel):
    """``(x)``: copies, transfers, ``from_dlpack(obj)`` (an array of the surface is DLPack-capable)."""
    return [k.case({k.sig.names[0]: x}, d) for x, d in _layouts(k)]


class _Exported:
    """A DLPack capsule of surface ``K`` behind the ``__dlpack__`` protocol, for ``K.from_dlpack``."""

    def __init__(self, capsule, K):
        self.capsule, self.K = capsule, K

    def __dlpack__(self, **kw):
        return self.capsule

    def __dlpack_device__(self):
        if getattr(self.K, "device", "cpu") == "cpu":
            return (1, 0)  # kDLCPU
        import cupy
        return (2, cupy.cuda.Device().id)  # kDLCUDA


def _from_capsule(capsule, K):
    return K.from_dlpack(_Exported(capsule, K))


@generator("dlpack")
def _dlpack(k: Kernel):
    """``(x, **kw) -> capsule``: what the capsule holds, read back by the surface's from_dlpack."""
    return [k.case({"x": x}, f"{d}, read back with from_dlpack", convert=_from_capsule) for x, d in _layouts(k)]


@generator("astype")
def _astype(k: Kernel):
    return [k.case({"x": x, "dtype": np.dtype(dt)}, f"{d} to {dt}")
            for x, d in _layouts(k) for dt in (k.dtype, k.other_float(), np.dtype("int32"), np.dtype("float16"))]


@generator("fill")
def _fill(k: Kernel):
    return [k.case({"x": x, "value": v}, f"{d} value={v}", inplace=("x",), outputs=())
            for x, d in _layouts(k) for v in PARAM_VALUES["value"]]


@generator("assign")
def _assign(k: Kernel):
    out = []
    for src_dt in (k.dtype, k.other_float()):
        for on_host in (True, False):
            for shape in ((31, 33), (0,), (4097,), ()):
                out.append(k.case({"dst": np.zeros(shape, k.dtype), "src": k.rand(shape, dtype=src_dt)},
                                  f"{shape} src {src_dt} on the {'host' if on_host else 'device'}",
                                  inplace=("dst",), outputs=(), host=("src",) if on_host else ()))
            # src broadcast to dst's shape, from either device
            out.append(k.case({"dst": np.zeros((31, 33), k.dtype), "src": k.rand((33,), dtype=src_dt)},
                              f"(33,) broadcast to (31, 33), src {src_dt} on the {'host' if on_host else 'device'}",
                              inplace=("dst",), outputs=(), host=("src",) if on_host else ()))
    for src, d in ((2.5, "a Python float"), ([1.0, -2.0, 3.0], "a list"), (np.float64(-0.75), "a NumPy scalar")):
        out.append(k.case({"dst": np.zeros((4, 3), k.dtype), "src": src}, f"(4, 3) from {d}",
                          inplace=("dst",), outputs=(), host=("src",)))
    return out


@generator("from_host")
def _from_host(k: Kernel):
    tie = np.array([1 + 2 ** -24, 1 + 3 * 2 ** -24, -(1 + 2 ** -24), 0.1, 2.0 ** -130, 3.5e38])  # ties to even
    srcs = [(k.rand((31, 33), dtype=np.float64), "float64 (31, 33)"), (tie, "float64 rounding ties"),
            (k.rand(4097, dtype=np.float32), "float32 (4097,)"), (np.asarray(2.5), "0-d"),
            (np.arange(-5, 6, dtype=np.int64), "int64"), (np.array([True, False]), "bool"), (k.rand(0), "empty")]
    with _quiet():
        return [k.case({"a": a, "dtype": k.dtype}, f"{d} to {k.dtype}") for a, d in srcs]


@generator("to_device")
def _to_device(k: Kernel):
    out = []
    for x, d in _layouts(k)[:6]:
        for dev, where in ((SURFACE_DEVICE, "the surface's device"), ("cpu", "cpu")):
            out.append(k.case({"x": x, "device": dev}, f"{d} from the surface to {where}"))
            out.append(k.case({"x": x, "device": dev}, f"{d} from the host to {where}", host=("x",)))
    return out


@generator("bool_mask")
def _bool_mask(k: Kernel):
    m = k.rng.random((4, 5)) < 0.5
    out = []
    for mask, shape, desc in ((m, (4, 5), "bool"), (m.astype(k.dtype), (4, 5), "0/1 floats"),
                              (m[0], (3, 4, 5), "broadcast (5,) -> (3, 4, 5)"), (np.ones(1, bool), (0,), "to empty"),
                              (View(m[:1], lambda v, xp: xp.broadcast_to(v, (4, 5)), "stride 0"), (4, 5),
                               "stride-0 rows"),
                              (k.rng.random((31, 1000)) < 0.3, (31, 1000), "large")):
        out.append(k.case({"mask": mask, "shape": shape}, f"{desc} on the host", host=("mask",)))
        out.append(k.case({"mask": mask, "shape": shape}, f"{desc} on the device", host=()))
    return out


# -- softmax and losses --

# warp rows (<= 1024), block rows held in registers, and rows long enough for the streaming kernels
_ROWS = [(1, 1), (4097, 31), (9, 200), (3, 1000), (7, 1024), (7, 1025), (2, 5000), (2, 3, 4097), (5,), (0, 7),
         (2, 20000), (2, 40000)]


@generator("rows")
def _rows(k: Kernel):
    out = []
    for shape in _ROWS:
        x = k.rand(shape, -20, 20)
        out.append(k.case({"x": x}, f"x{shape}"))
        if x.size:
            xb = x.copy()
            xb[..., 0] = -np.inf  # a blocked logit
            out.append(k.case({"x": xb}, f"x{shape} with -inf", bwd=False))
    return out


@generator("rows_masked")
def _rows_masked(k: Kernel):
    out = []
    for shape in ((1, 1), (4097, 31), (3, 1000), (5, 2000), (2, 3, 33)):
        x = k.rand(shape, -10, 10)
        mask = k.rng.random(shape) < 0.6
        mask.reshape(-1, shape[-1])[0] = False  # a fully blocked row is all zeros
        out.append(k.case({"x": x, "mask": mask}, f"x{shape} bool mask"))
        out.append(k.case({"x": x, "mask": mask.astype(k.dtype)}, f"x{shape} 0/1 mask"))
        bm = mask[..., :1, :] if len(shape) > 2 else mask[:1]
        out.append(k.case({"x": x, "mask": bm}, f"x{shape} broadcast mask {bm.shape}"))
    return out


@generator("mse")
def _mse(k: Kernel):
    return [k.case({"yhat": k.rand(s), "target": k.rand(s)}, f"{s}") for s in ((31, 7), (1,), (4097,), (2, 3, 4), (0,))]


@generator("nll")
def _nll(k: Kernel):
    out = []
    for (n, c), ignore in (((31, 5), -100), ((1, 1), -100), ((4097, 4), 7), ((9, 1000), -100)):
        with _quiet():
            logp = HOST.log_softmax(k.rand((n, c)))
        target = k.rng.integers(0, c, n).astype(np.int64)
        if n > 3:
            target[3] = ignore if ignore < 0 else target[3]
            target[n // 2] = ignore
        for weight in (None, k.rand(c, 0.1, 2.0)):
            for red in ("mean", "sum", "none"):
                out.append(k.case({"logp": logp, "target": target, "weight": weight, "ignore_index": ignore,
                                   "reduction": red}, f"({n}, {c}) weight={weight is not None} {red} ignore={ignore}"))
    with _quiet():
        logp = HOST.log_softmax(k.rand((9, 4)))
    target = np.full(9, -100, dtype=np.int64)  # every row ignored: the mean is 0 / 0
    for red in ("mean", "sum", "none"):
        out.append(k.case({"logp": logp, "target": target, "weight": None, "ignore_index": -100, "reduction": red},
                          f"every row ignored, {red}", bwd=red != "mean"))
    return out


# -- random numbers --

_SEEDS = ((0, 0), (1234, 7), (-5, 2 ** 63 + 11), (2 ** 64 - 1, 2 ** 40))


@generator("rng")
def _rng(k: Kernel):
    psets = _param_sets(k.name, k.sig, [n for n in k.sig.names if n not in _RNG_ARGS], k.contract)
    out = []
    for shape in [(n,) for n in SIZES] + [(100003,), (3, 5, 7)]:
        for seed, counter in _SEEDS:
            for ps in psets:
                out.append(k.case({"shape": shape, "seed": seed, "counter": counter, "dtype": k.dtype.type, **ps},
                                  f"shape={shape} seed={seed} counter={counter} {_pdesc(ps)}", params=ps))
    return out


# -- optimizers --


@generator("optim_step")
def _optim_step(k: Kernel):
    """``(p, g, <state arrays>, <hyper-parameters>) -> None``: five steps, a fresh gradient each;
    p and the state arrays are compared after the last."""
    state, hypers = _optim_split(k.name, k.sig)
    out = []
    for cfg in OPTIM_CONFIGS.get(k.name, [{}]):
        absent = cfg.get("absent", ())
        for n in SIZES:
            vals = {"p": k.rand(n), "g": Steps(tuple(k.rand(n) for _ in range(_OPTIM_STEPS)))}
            for a in state:
                vals[a.name] = None if a.name in absent else np.zeros(n, k.dtype)
            for h in hypers:
                vals[h] = (Steps(tuple(PER_STEP[h](s) for s in range(1, _OPTIM_STEPS + 1))) if h in PER_STEP
                           else cfg.get(h, DEFAULT_HYPER.get(h)))
            hp = {h: cfg[h] for h in hypers if h in cfg}
            out.append(k.case(vals, f"n={n} {_pdesc(hp)} absent={absent}", outputs=(),
                              inplace=["p"] + [a.name for a in state if a.name not in absent]))
    return out


@generator("optim_multi")
def _optim_multi(k: Kernel):
    """``(ps, gs, <state lists>, steps, <hyper-parameters>)``: more tensors than one launch takes,
    two step counts (two runs), three calls."""
    state, hypers = _optim_split(k.name, k.sig)
    lists = ["ps", "gs"] + [a.name for a in state]
    sizes = [1, 31, 0, 1000, 4097, 3] * 5
    base = [3 if i % 7 else 1 for i in range(len(sizes))]
    calls = 3
    out = []
    for cfg in OPTIM_CONFIGS.get(k.name, [{}]):
        absent = cfg.get("absent", ())
        vals = {}
        for n in lists:
            if n == "gs":
                vals[n] = Steps(tuple([k.rand(s) for s in sizes] for _ in range(calls)))
            elif n == "steps":  # per-tensor step counts
                vals[n] = Steps(tuple([b + c for b in base] for c in range(calls)))
            elif n == "ps":
                vals[n] = [k.rand(s) for s in sizes]
            else:
                vals[n] = [None] * len(sizes) if n in absent else [k.rand(s, 0.0, 0.5) for s in sizes]
        for h in hypers:
            vals[h] = cfg.get(h, DEFAULT_HYPER.get(h))
        hp = {h: cfg[h] for h in hypers if h in cfg}
        out.append(k.case(vals, f"{len(sizes)} tensors {_pdesc(hp)} absent={absent}", outputs=(),
                          inplace=[n for n in lists if n not in ("gs", "steps") and n not in absent]))
    return out


# -- layers --

# (N, C_in, C_out, spatial, kernel, stride, padding, dilation, groups)
CONV_CASES = [
    (2, 3, 4, (11,), (3,), (2,), (1,), (1,), 1),
    (3, 4, 6, (9, 7), (3, 2), (2, 1), (1, 0), (1, 2), 2),
    (1, 2, 3, (5, 6, 7), (2, 3, 2), (2, 1, 2), (1, 1, 0), (2, 1, 1), 1),
    (2, 4, 6, (5, 3), (1, 1), (1, 1), (0, 0), (1, 1), 2),
    (5, 8, 8, (13, 13), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (2, 4, 4, (10, 9), (3, 3), (1, 1), (2, 1), (2, 1), 2),
    (2, 3, 3, (7,), (1,), (1,), (1,), (1,), 1),
    (2, 2, 2, (4, 3, 3, 5), (2, 1, 2, 3), (1, 2, 1, 2), (0, 1, 1, 1), (1, 1, 1, 2), 1),
]


def _conv_desc(c):
    n, ci, co, sp, kk, s, p, d, g = c
    return f"N={n} C={ci}->{co} S={sp} k={kk} s={s} p={p} d={d} G={g}"


@generator("conv")
def _conv(k: Kernel):
    out = []
    for c in CONV_CASES:
        n, ci, co, sp, kk, s, p, d, groups = c
        x, w = k.rand((n, ci) + sp, -1, 1), k.rand((co, ci // groups) + kk, -1, 1)
        b = k.rand(co, -1, 1) if n != 3 else None
        out.append(k.case({"x": x, "w": w, "b": b, "stride": s, "padding": p, "dilation": d, "groups": groups},
                          _conv_desc(c)))
    return out


@generator("conv_transpose")
def _conv_transpose(k: Kernel):
    out = []
    for c in CONV_CASES:
        n, ci, co, sp, kk, s, p, d, groups = c
        op = tuple(min(si, di) - 1 for si, di in zip(s, d))  # the largest output padding allowed
        x, w = k.rand((n, ci) + sp, -1, 1), k.rand((ci, co // groups) + kk, -1, 1)
        b = k.rand(co, -1, 1) if n != 3 else None
        out.append(k.case({"x": x, "w": w, "b": b, "stride": s, "padding": p, "output_padding": op, "dilation": d,
                           "groups": groups}, f"{_conv_desc(c)} op={op}"))
    return out


# (x shape, kernel, stride, padding, dilation): padding <= dilation * (kernel - 1), so every window
# holds a real cell
POOL_CASES = [((2, 3, 9, 7), (2, 3), (2, 2), (1, 1), (1, 1)), ((2, 3, 11), (3,), (2,), (1,), (2,)),
              ((1, 2, 5, 6, 7), (2, 2, 2), (1, 2, 1), (0, 1, 1), (1, 1, 1)), ((4, 4, 4), (4,), (4,), (0,), (1,)),
              ((3, 31, 33), (3, 3), (1, 1), (1, 1), (1, 1)), ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0), (1, 1)),
              ((2, 1000), (5,), (3,), (2,), (1,))]


@generator("pool")
def _pool(k: Kernel):
    names = k.sig.names
    psets = _param_sets(k.name, k.sig, [n for n in names if n in PARAM_VALUES], k.contract)
    out = []
    for shape, kk, s, p, d in POOL_CASES:
        x = k.rand(shape, -1, 1)
        for ps in psets:
            vals = {"x": x, "kernel": kk, "stride": s, "padding": p, "dilation": d, **ps}
            out.append(k.case({n: vals[n] for n in names}, f"x{shape} k={kk} s={s} p={p} d={d} {_pdesc(ps)}",
                              params=ps))
    return out


@generator("norm")
def _norm(k: Kernel):
    """``(x[dims], <per-feature arrays>[dim] (| None), <attributes>)``: shapes by the documented dims.

    A kernel documented ``-> None`` folds x into its per-feature arrays in place (batch norm's
    running statistics): three calls on fresh batches, the arrays compared after the last, each
    optional array also absent alone, and x compared too (it must come back as it was: a device
    kernel that centred x in place, or used it as scratch, would pass on the arrays alone)."""
    x_arg = k.sig.args[0]
    arrays = [a for a in k.sig.args[1:] if a.dims]
    optional = [a.name for a in arrays if a.optional]
    psets = _param_sets(k.name, k.sig, _norm_attributes(k.sig), k.contract)
    in_place = documented_outputs(k.sig) == []
    out = []
    for shape in _NORM_SHAPES[x_arg.dims]:
        env = dict(zip(x_arg.dims, shape))
        # an offset: the mean must come off before squaring
        x = Steps(tuple(k.rand(shape) + 2.0 for _ in range(3))) if in_place else k.rand(shape) + 2.0
        full = {a.name: k.rand(tuple(env[d] for d in a.dims)) for a in arrays}
        variants = [full]
        if optional:
            variants += [{**full, **{n: None for n in optional}}, {**full, **{n: None for n in optional[1:]}}]
            if in_place and len(optional) > 1:
                variants.append({**full, optional[0]: None})
        for v in variants:
            absent = [n for n in v if v[n] is None]
            for ps in psets:
                kw = dict(outputs=(), inplace=["x"] + [a.name for a in arrays if v[a.name] is not None],
                          bwd=False) if in_place else {}
                out.append(k.case({"x": x, **v, **ps}, f"x{shape} absent={absent} {_pdesc(ps)}", params=ps, **kw))
    return out


_ATTENTION = [(1, 1, 1, 1, 1), (2, 5, 6, 8, 3), (3, 64, 64, 16, 16), (2, 65, 130, 32, 24), (1, 129, 300, 100, 128),
              (2, 150, 70, 32, 32)]


@generator("attention")
def _attention(k: Kernel):
    out = []
    for b, n, m, d, e in _ATTENTION:
        q, kk, v = k.rand((b, n, d), -1, 1), k.rand((b, m, d), -1, 1), k.rand((b, m, e), -1, 1)
        scale = 1.0 / math.sqrt(d)
        empty = k.rng.random((b, n, m)) < 0.5
        empty[:, ::3] = False  # rows with no allowed key
        causal = np.tril(np.ones((n, m), bool))
        for mask, hard, desc in ((None, False, "no mask"), (k.rng.random((b, n, m)) < 0.6, False, "soft mask"),
                                 (k.rng.random((b, n, m)) < 0.6, True, "hard mask"),
                                 (empty, True, "hard, rows with no key"), (empty, False, "soft, rows with no key"),
                                 (View(causal, lambda a, xp, s=(b, n, m): xp.broadcast_to(a, s), "causal"), True,
                                  "causal stride-0 mask")):
            out.append(k.case({"q": q, "k": kk, "v": v, "mask": mask, "scale": scale, "hard": hard, "causal": False},
                              f"b={b} n={n} m={m} d={d} e={e} {desc}"))
        # the causal flag: key tiles above the diagonal skipped, alone and with a mask
        for mask, desc in ((None, "causal flag"), (k.rng.random((b, n, m)) < 0.6, "causal flag and a mask")):
            out.append(k.case({"q": q, "k": kk, "v": v, "mask": mask, "scale": scale, "hard": True, "causal": True},
                              f"b={b} n={n} m={m} d={d} e={e} {desc}"))
    return out


@generator("rfft")
def _rfft(k: Kernel):
    return [k.case({"x": k.rand(s)}, f"x{s}") for s in ((3, 31), (1, 1), (2, 64), (4, 1000), (1, 4097), (2, 2))]


@generator("irfft")
def _irfft(k: Kernel):
    return [k.case({"p": k.rand((3, n // 2 + 1, 2)), "n": n}, f"n={n} (imaginary parts at DC/Nyquist ignored)")
            for n in (1, 2, 31, 64, 1000, 4097)]


# (batch, grid, in, out, modes): size 1; odd and even grids with modes = grid//2 + 1 (the Nyquist
# bin); channels over the 32-channel staging and the 128-thread tiles; a split grid axis
SPECTRAL_CASES = [(1, 1, 1, 1, 1), (2, 31, 3, 5, 16), (3, 64, 4, 2, 33), (9, 100, 70, 130, 7), (4, 4096, 8, 8, 32),
                  (1, 2048, 3, 2, 40)]


@generator("spectral_conv")
def _spectral_conv(k: Kernel):
    out = []
    for b, n, ci, co, m in SPECTRAL_CASES:
        out.append(k.case({"x": k.rand((b, n, ci)), "w_re": k.rand((m, ci, co), -1, 1),
                           "w_im": k.rand((m, ci, co), -1, 1)}, f"batch={b} grid={n} in={ci} out={co} modes={m}"))
    return out


_SCAN = [((), 1, 1), ((2,), 31, 5), ((3, 2), 100, 33), ((), 1000, 4)]


@generator("scan")
def _scan(k: Kernel):
    """Arrays shaped by their documented dims (``[S]``, ``[..., S]``, ``[..., L, S]``; undocumented:
    ``[..., L, S]``); the decay ``a`` in (-0.99, 0.99)."""
    out = []
    for lead, L, S in _SCAN:
        env = {"L": L, "S": S}
        vals = {}
        for a in k.sig.args:
            dims = a.dims or ("...", "L", "S")
            shape = (lead if dims[0] == "..." else ()) + tuple(env[t] for t in dims if t != "...")
            vals[a.name] = k.rand(shape, -0.99, 0.99) if a.name == "a" else k.rand(shape)
        out.append(k.case(vals, f"lead={lead} L={L} S={S}"))
    return out


# (T, N, H): one step of one unit; odd sizes; a long sequence; H over a warp's width
_RECURRENCE = [(1, 1, 1), (5, 3, 4), (64, 4, 8), (9, 2, 33)]


@generator("recurrence")
def _recurrence(k: Kernel):
    """``gx`` (T, N, G*H) with G read off ``w_hh``'s documented rows; ``mask`` None, then lengths
    that leave held steps at the end of some sequences; ``relu`` both ways."""
    G = int(re.match(r"(\d*)H", k.sig.args[1].dims[0]).group(1) or 1)
    out = []
    for T, N, H in _RECURRENCE:
        lengths = (np.arange(N) * 7) % T + 1
        for mask in (None, np.arange(T)[:, None] < lengths[None, :]):
            vals = {"gx": k.rand((T, N, G * H), -2, 2), "w_hh": k.rand((G * H, H), -0.5, 0.5),
                    "h0": k.rand((N, H), -1, 1), "mask": mask}
            if "c0" in k.sig.names:
                vals["c0"] = k.rand((N, H), -1, 1)
            if "b_hh" in k.sig.names:
                vals["b_hh"] = k.rand((G * H,), -1, 1)
            for relu in ((False, True) if "relu" in k.sig.names else (None,)):
                if relu is not None:
                    vals = {**vals, "relu": relu}
                desc = f"T={T} N={N} H={H}{' held steps' if mask is not None else ''}"
                out.append(k.case(vals, desc + ("" if relu is None else f" relu={relu}")))
    return out


# -- backward kernels from their forward's cases --


def _need_combos(flags: list) -> list:
    """All needed; each one alone; each but one."""
    if not flags:
        return [{}]
    combos = [tuple(True for _ in flags)]
    for i in range(len(flags)):
        combos.append(tuple(j == i for j in range(len(flags))))
        combos.append(tuple(j != i for j in range(len(flags))))
    seen, out = set(), []
    for c in combos:
        if c not in seen and any(c):
            seen.add(c)
            out.append(dict(zip(flags, c)))
    return out


@generator("backward")
def _backward(k: Kernel):
    """Every case of the forward (that allows it) with the forward's outputs computed on the host,
    a random cotangent ``g`` of its first output's shape, ``<arg>_shape`` the forward argument's
    shape, ``shape`` its first array's, and each combination of ``need_*`` flags."""
    fwd = forward_of(k.name, k.contract)
    fk = k.derive(fwd)
    fcls = classify(fwd, k.contract)
    outs = output_names(fk.sig)
    flags = [n for n in k.sig.names if n.startswith("need_")]
    combos = _need_combos(flags)
    result = []
    for fc in GENERATORS[fcls](fk):
        if not fc.bwd:
            continue
        hargs = _place(fc.args, HOST, None, ())
        with _quiet():
            ys = getattr(HOST, fwd)(*_step(hargs, 0), **fc.kwargs)
        ys = ys if isinstance(ys, tuple) else (ys,)
        named = dict(zip(outs, ys))
        fvals = dict(zip(fk.sig.names, fc.args))
        fhost = dict(zip(fk.sig.names, hargs))
        y0 = np.asarray(ys[0])
        g = k.rand(y0.shape, -1.0, 1.0, dtype=y0.dtype if y0.dtype.kind == "f" else k.dtype)
        first_array = next((v for v in hargs if isinstance(v, np.ndarray)), None)
        for combo in combos:
            vals = {}
            for n in k.sig.names:
                if n == "g":
                    vals[n] = g
                elif n in combo:
                    vals[n] = combo[n]
                elif n in named:
                    vals[n] = named[n]
                elif n in fvals:
                    vals[n] = fvals[n]
                elif n.endswith("_shape") and n[:-6] in fhost:
                    vals[n] = tuple(np.shape(fhost[n[:-6]]))
                elif n == "shape":
                    vals[n] = tuple(first_array.shape)
            result.append(k.case(vals, f"{fc.desc}; {_pdesc(combo)}".rstrip("; "), params=fc.params))
    return result


# ---- the table -----------------------------------------------------------------------------------


def cases(name: str, rng: np.random.Generator, dtype=None, contract: dict = CONTRACT) -> list:
    """The cases of kernel ``name`` in ``dtype`` (every dtype of :func:`dtypes` when None); empty
    for an excluded kernel; KeyError for a kernel with no class (see :func:`missing`)."""
    if name in EXCLUDED:
        return []
    cls = classify(name, contract)
    if cls is None:
        raise KeyError(f"{name}: no signature class and no documented exclusion")
    family = family_of(name, contract)
    sig = signature(contract[family][name])
    out = []
    for dt in ([dtype] if dtype is not None else dtypes(name, contract)):
        k = Kernel(name, family, sig, rng, np.dtype(dt), contract)
        for c in GENERATORS[cls](k):
            c.dtype = np.dtype(dt).name
            if c.tol is None:
                c.tol = tolerance(name, dt, c.params, contract)
            out.append(c)
    return out


# ---- running a case ---------------------------------------------------------------------------


class _quiet:
    """NumPy's floating-point warnings off (log(0), 0/0 in a mean of nothing: documented results)."""

    def __enter__(self):
        self._err = np.seterr(all="ignore")
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        self._w.__exit__(*exc)
        np.seterr(**self._err)
        return False


def _xp(a):
    return np if isinstance(a, (np.ndarray, np.generic)) else sys.modules[type(a).__module__.split(".")[0]]


def _place(obj, K, device, host: tuple, top=True):
    """Host values -> values on surface ``K`` (copies of every array; ``host`` positions stay host arrays)."""
    if top:
        return tuple(_place(v, None if i in host else K, device, (), False) for i, v in enumerate(obj))
    if isinstance(obj, np.ndarray):
        a = obj.copy()
        return a if K is None else K.from_host(a, a.dtype)
    if isinstance(obj, View):
        base = _place(obj.base, K, device, (), False)
        return obj.fn(base, _xp(base))
    if isinstance(obj, Steps):
        return Steps(tuple(_place(v, K, device, (), False) for v in obj.values))
    if isinstance(obj, list):
        return [_place(v, K, device, (), False) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_place(v, K, device, (), False) for v in obj)
    if obj is SURFACE_DEVICE:
        return device if device is not None else "cpu"
    return obj


def _map_float(obj, fn):
    """``fn`` applied to every float host array inside ``obj`` (lists, tuples, views, steps)."""
    if isinstance(obj, np.ndarray):
        return fn(obj) if obj.dtype.kind == "f" else obj
    if isinstance(obj, View):
        return View(_map_float(obj.base, fn), obj.fn, obj.desc)
    if isinstance(obj, Steps):
        return Steps(tuple(_map_float(v, fn) for v in obj.values))
    if isinstance(obj, list):
        return [_map_float(v, fn) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_map_float(v, fn) for v in obj)
    return obj


def _place_kw(kwargs, K, device):
    return {k: _place((v,), K, device, ())[0] for k, v in kwargs.items()}


def _calls(args, kwargs) -> int:
    n = [len(v.values) for v in list(args) + list(kwargs.values()) if isinstance(v, Steps)]
    return max(n) if n else 1


def _step(args, i):
    return tuple(v.values[i] if isinstance(v, Steps) else v for v in args)


def _kwstep(kwargs, i):
    return {k: (v.values[i] if isinstance(v, Steps) else v) for k, v in kwargs.items()}


def _outs(ret) -> tuple:
    if ret is None:
        return ()
    return ret if isinstance(ret, tuple) else (ret,)


def _np(K, y):
    if y is None:
        return None
    if isinstance(y, (np.ndarray, np.generic)):
        return np.asarray(y)
    return K.to_host(y)


def host_positions(name: str, contract: dict = CONTRACT) -> tuple:
    """Argument positions of ``name`` that stay host objects (index sequences, host arrays)."""
    fam = family_of(name, contract)
    if fam is None:
        return ()
    return tuple(i for i, a in enumerate(signature(contract[fam][name]).args) if a.host)


def _run(name, case, K, args, kwargs, before=None, want_sizes=None):
    """Call kernel ``name`` of ``K`` (every step); the selected outputs, then the in-place arrays,
    as (label, host array or None) pairs, and whether the kernel returned None."""
    fn = getattr(K, name)
    ret = None
    for i in range(_calls(args, kwargs)):
        if before is not None:
            before(*(want_sizes or ()))
        with _quiet():
            ret = fn(*_step(args, i), **_kwstep(kwargs, i))
    outs = _outs(ret)
    sel = range(len(outs)) if case.outputs is None else case.outputs
    conv = case.convert or (lambda y, K: y)
    got = [(f"output {j}", _np(K, conv(outs[j], K)) if j < len(outs) else "absent") for j in sel]
    for pos in case.inplace:
        a = _step(args, -1)[pos] if isinstance(args[pos], Steps) else args[pos]
        if isinstance(a, (list, tuple)):
            got += [(f"argument {pos}[{j}] (in place)", _np(K, v)) for j, v in enumerate(a) if v is not None]
        else:
            got.append((f"argument {pos} (in place)", _np(K, a)))
    return got, ret is None


def run_case(name: str, case: Case, K, ref=None, before: Callable | None = None, contract: dict = CONTRACT):
    """Run ``case`` of kernel ``name`` on surface ``K`` and on ``ref`` (the host surface by
    default), and compare. ``before(*nbytes)`` is called before each call on ``K`` with the byte
    sizes of the reference's outputs (the CUDA tests poison the memory pool with it). Returns the
    compared arrays of ``K``'s run, on the host; raises AssertionError naming the kernel and the case."""
    ref = ref if ref is not None else HOST
    where = f"{name} [{case.dtype or '?'}] case {case.desc!r}"
    host = case.host if case.host is not None else host_positions(name, contract)
    tol = case.tol if case.tol is not None else tolerance(name, case.dtype or "float32", case.params, contract)
    try:
        rdev, ddev = getattr(ref, "device", "cpu"), getattr(K, "device", None)
        want, want_none = _run(name, case, ref, _place(case.args, ref, rdev, host),
                               _place_kw(case.kwargs, ref, rdev))
        sizes = [w.nbytes for _, w in want if isinstance(w, np.ndarray)]
        got, got_none = _run(name, case, K, _place(case.args, K, ddev, host), _place_kw(case.kwargs, K, ddev),
                             before, sizes)
        want_ref = want
        if tol.ref64 and not tol.meta:
            up = _map_float(case.args, lambda a: a.astype(np.float64))
            want_ref, _ = _run(name, case, ref, _place(up, ref, rdev, host), _place_kw(case.kwargs, ref, rdev))
        bound = None
        if tol.mode == "sumabs":
            up = _map_float(case.args, lambda a: np.abs(a.astype(np.float64)))
            bound, _ = _run(name, case, ref, _place(up, ref, rdev, host), _place_kw(case.kwargs, ref, rdev))
    except Exception as e:  # a launch error, a bad argument, an assertion inside the kernel
        raise AssertionError(f"{where}: {type(e).__name__}: {e}") from e
    assert got_none == want_none, f"{where}: returned None on {'one surface' if got_none else 'the reference'} only"
    assert len(got) == len(want), f"{where}: {len(got)} outputs vs {len(want)} on the reference"
    peak = 0.0
    if tol.peak:
        peak = max([float(np.nanmax(np.abs(w[np.isfinite(w)]))) for _, w in want_ref
                    if isinstance(w, np.ndarray) and w.dtype.kind == "f" and np.isfinite(w).any()] + [0.0])
    for i, ((label, g), (_, w), (_, r)) in enumerate(zip(got, want, want_ref)):
        msg = f"{where}, {label}"
        if isinstance(w, str) or isinstance(g, str):
            raise AssertionError(f"{msg}: output absent")
        if w is None:
            assert g is None, f"{msg}: an array where the reference gives None"
            continue
        assert g is not None, f"{msg}: None where the reference gives an array"
        assert isinstance(g, np.ndarray), f"{msg}: to_host gave {type(g)}"
        assert g.shape == w.shape, f"{msg}: shape {g.shape} vs {w.shape} on the reference"
        assert g.dtype == w.dtype, f"{msg}: dtype {g.dtype} vs {w.dtype} on the reference"
        if tol.meta:
            continue
        if w.dtype.kind not in "fc":
            try:
                np.testing.assert_array_equal(g, w)
            except AssertionError as e:
                raise AssertionError(f"{msg}: {str(e).strip()}") from None
            continue
        _compare(msg, g, np.asarray(r), tol, peak, None if bound is None else np.asarray(bound[i][1]))
    return [g for _, g in got]


def _compare(msg, g, r, tol: Tol, peak: float, bound):
    unwritten = np.isnan(g) & ~np.isnan(r)
    if tol.mode == "norm":
        assert not unwritten.any(), f"{msg}: NaN where the reference has none (unwritten output?)"
        if r.size:
            g64, r64 = g.astype(np.float64), r.astype(np.float64)
            ok = np.isfinite(r64)
            err, scale = np.linalg.norm((g64 - r64)[ok]), np.linalg.norm(r64[ok])
            assert err <= tol.rtol * scale + tol.atol, f"{msg}: relative error {err / (scale or 1):.3g} > {tol.rtol}"
            assert np.array_equal(g64[~ok], r64[~ok], equal_nan=True), f"{msg}: non-finite entries differ"
        return
    if tol.mode == "sumabs":
        g64, r64 = g.astype(np.float64), r.astype(np.float64)
        with _quiet():
            diff = np.abs(g64 - r64)
            lim = tol.rtol * bound + tol.atol
            ok = (diff <= lim) | (np.isnan(g64) & np.isnan(r64)) | (g64 == r64)
        if not ok.all():
            j = np.argwhere(~ok)[0]
            raise AssertionError(f"{msg}: |device - reference| = {diff[tuple(j)]:.3g} at {tuple(j)} exceeds "
                                 f"{tol.rtol:.3g} * (the kernel on |args|) + {tol.atol:.3g} = {lim[tuple(j)]:.3g} "
                                 f"({int((~ok).sum())} elements)")
        return
    try:
        np.testing.assert_allclose(g, r, rtol=tol.rtol, atol=tol.atol + tol.peak * peak, equal_nan=True)
    except AssertionError as e:
        raise AssertionError(f"{msg}: {str(e).strip()}") from None
    assert not unwritten.any(), f"{msg}: NaN where the reference has none (unwritten output?)"


# ---- the documented shapes and dtypes --------------------------------------------------------------


def _bind(tokens, shape, env, problems, what):
    """Bind the identifiers among ``tokens`` to ``shape``'s sizes; False when the ranks differ."""
    tokens = list(tokens)
    marks = [i for i, t in enumerate(tokens) if t == "..." or t.startswith("*")]
    if marks:
        left = tokens[:marks[0]]
        right = tokens[marks[0] + 1:] if tokens[marks[0]] == "..." and len(marks) == 1 else []
        if len(shape) < len(left) + len(right):
            return False
        pairs = list(zip(left, shape)) + list(zip(right, shape[len(shape) - len(right):]))
    else:
        if len(tokens) != len(shape):
            return False
        pairs = list(zip(tokens, shape))
    for t, n in pairs:
        if t.isidentifier() and not keyword.iskeyword(t):
            if t in env and env[t] != n:
                problems.append(f"{what}: {t} = {n} but {env[t]} elsewhere")
            env[t] = n
    return True


def _eval(t, env):
    """A documented dim (``rows``, ``n + m``, ``n//2+1``, ``out_dims``) -> an int, a tuple (a whole
    shape), or None where it names something unbound."""
    try:
        v = eval(t, {"__builtins__": {}}, dict(env))  # a dims expression of the contract
    except Exception:
        return None
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, tuple) and all(isinstance(e, (int, np.integer)) for e in v):
        return tuple(int(e) for e in v)
    return None


def _shape_problems(what, dims, shape, env) -> list:
    """``shape`` against documented ``dims`` (``...``: any leading axes; ``*X``: any trailing ones)."""
    toks = list(dims)
    if len(toks) == 1:
        v = _eval(toks[0], env)
        if isinstance(v, tuple):
            return [] if tuple(shape) == v else [f"{what}: shape {tuple(shape)}, documented [{toks[0]}] = {v}"]
    stars = [i for i, t in enumerate(toks) if t.startswith("*")]
    if stars:
        left, right = toks[:stars[0]], []
    elif "..." in toks:
        i = toks.index("...")
        left, right = toks[:i], toks[i + 1:]
    else:
        if len(toks) != len(shape):
            return [f"{what}: rank {len(shape)}, documented [{', '.join(toks)}]"]
        left, right = toks, []
    if len(shape) < len(left) + len(right):
        return [f"{what}: rank {len(shape)}, documented [{', '.join(toks)}]"]
    out = []
    pairs = list(zip(left, shape)) + list(zip(right, shape[len(shape) - len(right):]))
    for t, n in pairs:
        v = _eval(t, env)
        if isinstance(v, int) and v != n:
            out.append(f"{what}: {t} = {n}, documented {v}")
    return out


def documented_problems(name: str, case: Case, contract: dict = CONTRACT) -> list:
    """Run ``case`` on the host; what disagrees with the contract's documentation: argument
    shapes that contradict the documented dims, output counts, output shapes (documented dims,
    a ``shape`` argument, elementwise broadcasting) and dtypes (floats keep the float inputs' dtype,
    or take the ``dtype`` argument; documented ``bool array`` / ``int64 array`` results)."""
    fam = family_of(name, contract)
    sig = signature(contract[fam][name])
    host = case.host if case.host is not None else host_positions(name, contract)
    args = _place(case.args, HOST, "cpu", host)
    with _quiet():
        ret = None
        for i in range(_calls(args, case.kwargs)):
            ret = getattr(HOST, name)(*_step(args, i), **_kwstep(case.kwargs, i))
    if case.convert is not None:
        ret = tuple(case.convert(o, HOST) for o in _outs(ret))
        ret = ret[0] if len(ret) == 1 else ret
    problems, env = [], {}
    last = _step(args, -1) if _calls(args, case.kwargs) > 1 else args
    values = dict(zip(sig.names, last))
    ranks_ok = True
    for a in sig.args:
        v = values[a.name]
        if a.dims is None or v is None:
            continue
        try:
            shape = np.shape(v)
        except ValueError:
            continue
        ranks_ok &= _bind(a.dims, shape, env, problems, f"argument {a.name}")
    for a in sig.args:  # scalar and tuple attributes ("(v[cols], rows)", "(x, in_dims, out_dims, ...)")
        v = values[a.name]
        if a.dims is None and a.name not in env and _eval(a.name, {a.name: v}) is not None:
            env[a.name] = v
    for a in sig.args:  # expressions among the arguments' dims ("p[batch, n//2+1, 2]")
        v = values[a.name]
        if a.dims and isinstance(v, np.ndarray) and ranks_ok:
            problems += _shape_problems(f"argument {a.name}", a.dims, v.shape, env)
    doc = documented_outputs(sig)
    outs = _outs(ret)
    if doc == []:
        if ret is not None:
            problems.append(f"documented to return None, returned {type(ret).__name__}")
    elif doc is not None and len(doc) > 1 and len(outs) != len(doc):
        problems.append(f"{len(outs)} outputs, {len(doc)} documented")
    arrays = [np.asarray(o) for o in outs if o is not None]
    if doc and ranks_ok:
        for (oname, dims), o in zip(doc, outs):
            if dims is not None and o is not None:
                problems += _shape_problems(f"output {oname or 0}", dims, np.shape(o), env)
    if "shape" in sig.names and len(arrays) == 1 and values["shape"] is not None:
        if tuple(arrays[0].shape) != tuple(values["shape"]):
            problems.append(f"output shape {arrays[0].shape}, the shape argument is {tuple(values['shape'])}")
    in_arrays = [np.asarray(v) for v in values.values() if isinstance(v, np.ndarray)]
    if fam == "elementwise" and arrays and in_arrays:
        bshape = np.broadcast_shapes(*(a.shape for a in in_arrays))
        for j, o in enumerate(arrays):
            if o.shape != bshape:
                problems.append(f"output {j}: shape {o.shape}, the inputs broadcast to {bshape}")
    floats = [a.dtype for a in in_arrays if a.dtype.kind == "f"]
    if "dtype" in sig.names:
        want_dt = np.dtype(values["dtype"])
    elif floats:
        want_dt = np.result_type(*floats)
    else:
        want_dt = None
    for j, o in enumerate(arrays):
        if re.search(r"\bbool array\b", sig.returns) and o.dtype != np.bool_:
            problems.append(f"output {j}: dtype {o.dtype}, documented bool")
        elif re.search(r"\bint64 array\b", sig.returns) and o.dtype != np.int64:
            problems.append(f"output {j}: dtype {o.dtype}, documented int64")
        elif o.dtype.kind == "f" and want_dt is not None and want_dt.kind == "f" and o.dtype != want_dt:
            problems.append(f"output {j}: dtype {o.dtype}, the float inputs are {want_dt}")
    return problems


__all__ = ["Case", "Tol", "View", "Steps", "SURFACE_DEVICE", "EXCLUDED", "DECLARED", "GENERATORS", "cases",
           "classify", "missing", "lineage", "dtypes", "tolerance", "signature", "documented_outputs", "forward_of",
           "run_case", "documented_problems", "host_positions", "SIZES", "FLOATS", "ANY"]
