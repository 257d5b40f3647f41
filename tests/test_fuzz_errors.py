"""Bad inputs against the public surface, with PyTorch as the oracle.

Every case calls torchlean and torch with the same arguments and judges the pair:

* torch raises -> torchlean must raise too: a TorchLeanError naming the op, or a standard Python
  exception of the kind torch's users catch (TypeError, ValueError, IndexError, RuntimeError, ...).
  Anything else (NumPy's AxisError, AttributeError on None, KeyError, ZeroDivisionError) is a LEAK;
  accepting the input is a SILENT difference.
* torch accepts -> torchlean must give torch's answer (shape, dtype, values; NaN where torch has NaN);
  a different answer is a SILENT difference, refusing it is a REJECT.

The cases come from tables: the creation functions, every function of ``torchlean.ops``' registry
that torch also has (probed with None, NaN/inf, empty tensors and out-of-range dims), the index ops
(hypothesis draws indices inside and outside the bounds) and nn's module list (sizes negative, huge,
of the wrong type). Sizes that would need terabytes are never given to torch: torchlean must refuse
them with ResourceError before allocating. ``python tests/test_fuzz_errors.py`` prints the counts.
"""

# ruff: noqa: B023 - every lambda of a loop is called within its own iteration (judge runs it at once)
from __future__ import annotations

import inspect
import math
import warnings
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchlean as tl
import torchlean.nn as tnn
import torchlean.nn.functional as TF

torch = pytest.importorskip("torch")
from torchlean.errors import ResourceError, TorchLeanError
from torchlean.ops.table import FUNCTIONS

# Python's exceptions a torch user's ``except`` clause may name: a torchlean failure outside these and
# TorchLeanError is a leak.
STANDARD = (TypeError, ValueError, IndexError, RuntimeError, NotImplementedError, MemoryError, OverflowError)
NON_STANDARD = (AttributeError, KeyError, ZeroDivisionError, AssertionError, UnboundLocalError, NameError)

# Random ops: torchlean's streams are not torch's, so only shape and dtype are compared.
RANDOM = {"rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm", "normal", "bernoulli",
          "multinomial", "poisson", "dropout", "alpha_dropout", "feature_alpha_dropout", "rrelu", "seed",
          "initial_seed", "manual_seed", "get_rng_state", "empty", "empty_like", "empty_strided"}
# Functions that are not tensor ops (state, configuration): not probed with tensors.
NOT_OPS = {"manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "set_default_dtype",
           "get_default_dtype", "set_printoptions", "is_tensor", "is_storage", "is_grad_enabled",
           "set_grad_enabled", "use_deterministic_algorithms", "compile", "save", "load", "from_numpy",
           "set_default_device", "get_default_device", "is_floating_point", "is_complex", "numel",
           "result_type", "promote_types", "can_cast", "is_nonzero", "typename", "is_same_size", "Generator"}
# Inputs where torch's answer is an accident of its implementation, not a rule torchlean copies:
# torch.mode's pick among NaNs depends on where its sort leaves them (mode([nan, 1, 2]) is nan,
# mode([1, nan, 2]) is 1).
KNOWN = {("mode", "special")}
# A composite module's error may name the part that refused the argument.
PARTS = {"Transformer": ("MultiheadAttention", "Linear"), "TransformerEncoderLayer": ("MultiheadAttention", "Linear"),
         "TransformerDecoderLayer": ("MultiheadAttention", "Linear")}


class Tally:
    """Counts of the judged cases by verdict, with the first examples of each failure kind."""

    def __init__(self):
        self.counts = Counter()
        self.examples = {}

    def add(self, verdict, what):
        self.counts[verdict] += 1
        if verdict in ("leak", "silent", "unnamed", "reject"):
            self.examples.setdefault(verdict, []).append(what)

    @property
    def total(self):
        return sum(self.counts.values())


TALLY = Tally()


def _run(f):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return True, f()
    except Exception as e:  # noqa: BLE001 - the verdict is about which exception
        return False, e


def _np(x):
    if isinstance(x, tl.Tensor):
        return x.detach().numpy(), x.dtype.name
    if isinstance(x, torch.Tensor):
        return x.detach().numpy(), str(x.dtype).removeprefix("torch.")
    return x, None


def same(a, b, values=True) -> bool:
    """torchlean's result ``a`` equals torch's ``b``: shapes, dtypes, values (NaN where NaN)."""
    if isinstance(b, (tuple, list)) and not isinstance(b, torch.Size):
        return isinstance(a, (tuple, list)) and len(a) == len(b) and all(same(x, y, values) for x, y in zip(a, b))
    if isinstance(b, torch.Size):
        return tuple(a) == tuple(b)
    if isinstance(b, torch.nn.Module):   # a constructor: the same class was built
        return isinstance(a, tnn.Module) and type(a).__name__ == type(b).__name__
    (av, ad), (bv, bd) = _np(a), _np(b)
    if bd is None:
        if isinstance(b, (bool, int, float)) and isinstance(av, (bool, int, float, np.generic)):
            return (math.isnan(b) and math.isnan(av)) if isinstance(b, float) and math.isnan(b) else av == b
        return type(a) is type(b) and (a == b)
    if ad != bd or np.shape(av) != np.shape(bv):
        return False
    if not values:
        return True
    if bv.dtype.kind in "fc":
        tol = 1e-3 if bd in ("float16", "bfloat16") else 1e-5
        return bool(np.allclose(av, bv, rtol=tol, atol=tol, equal_nan=True))
    return bool(np.array_equal(av, bv))


def judge(op, tl_call, torch_call=None, *, expect=None, values=True, tally=TALLY):
    """Run and classify one case (see the module docstring). ``expect``: the exception class
    torchlean must raise when torch is not called (sizes torch would try to allocate)."""
    ok_l, r_l = _run(tl_call)
    if torch_call is not None:
        ok_t, r_t = _run(torch_call)
    else:
        ok_t, r_t = False, None
    what = f"{op}: torchlean {'-> ' + type(r_l).__name__ + ': ' + str(r_l)[:90] if not ok_l else 'accepted'}; " \
           f"torch {'accepted' if ok_t else type(r_t).__name__ if r_t is not None else 'not called'}"
    if not ok_l:
        e = r_l
        if isinstance(e, TorchLeanError):
            names = (op.split(".")[-1], *PARTS.get(op, ()))
            verdict = "raised" if any(n.lower() in str(e).lower() for n in names) else "unnamed"
        elif type(e).__module__ == "builtins" and isinstance(e, STANDARD) and not isinstance(e, NON_STANDARD):
            verdict = "raised"
        else:
            verdict = "leak"
        if verdict == "raised" and expect is not None and not isinstance(e, expect):
            verdict = "leak"
        if verdict == "raised" and ok_t:
            verdict = "reject"
        tally.add(verdict, what)
        return verdict
    if not ok_t:
        tally.add("silent", what)
        return "silent"
    verdict = "same" if same(r_l, r_t, values) else "silent"
    if verdict == "silent":
        what += f" (values differ: {_np(r_l)[1]} {np.shape(_np(r_l)[0])} vs {_np(r_t)[1]} {np.shape(_np(r_t)[0])})"
    tally.add(verdict, what)
    return verdict


def both(arr):
    """The same data as a torchlean and a torch tensor."""
    a = np.asarray(arr)
    return tl.tensor(a), torch.tensor(a)


# ---- creation functions ---------------------------------------------------------------------------

HUGE = 10 ** 12

# (name, bad arguments): each is called as tl.name(*args) and torch.name(*args).
CREATION_BAD = [
    *[(n, a) for n in ("zeros", "ones", "empty", "rand", "randn")
      for a in [(2, -3), (-1,), ((2, -3),), ("a",), (2.5,), (None,), ((2, None),), ([3, 2],), (0, 3), ()]],
    *[("full", a) for a in [((2, -3), 1.0), ((2,), "a"), ((2,), None), ("a", 1.0), ((2,), float("nan")),
                            ((2,), float("inf")), ((0,), 1), ((2, 2.5), 1)]],
    *[("arange", a) for a in [(0, 5, 0), (5, 0, 1), (0, 5, -1), (0, float("inf")), (float("nan"),), ("a",), (None,),
                              (0, 1, 0.25), (5,), (0,), (-3,), (0.5, 2.5)]],
    *[("linspace", a) for a in [(0, 1, -2), (0, 1, 0), (0, 1, 1), (0, 1, 2.5), (0, 1, None), ("a", 1, 3),
                                (0, float("inf"), 3), (float("nan"), 1, 3), (1, 0, 5)]],
    *[("logspace", a) for a in [(0, 1, -2), (0, 1, 0), (0, 2, 3), (0, 1, "a")]],
    *[("eye", a) for a in [(-2,), (2, -1), (2.5,), (None,), (0,), (3, 2), ("a",)]],
    *[("randint", a) for a in [(5, 2, (3,)), (5, 5, (3,)), (0, (3,)), (-1, (3,)), (5, (-3,)), (5, ("a",)),
                               (5.5, (3,)), (None, (3,)), (0, 10, (2, 2))]],
    *[("randperm", a) for a in [(-1,), (2.5,), (None,), (0,), (5,), ("a",)]],
    *[(n, a) for n in ("tril_indices", "triu_indices") for a in [(-1, 3), (3, -1), (3, 3, 1), (2.5, 3), (3, None),
                                                                 (0, 0)]],
    *[("empty_strided", a) for a in [((2, -1), (1, 1)), ((2, 3), (1,)), ((2, 3), (3, 1))]],
    *[("scalar_tensor", a) for a in [("a",), (None,), (float("nan"),), (2,)]],
    *[("tensor", a) for a in [([1, "a"],), ([[1, 2], [3]],), (None,), ([float("nan")],), ([],), ([[]],)]],
]

LIKE_BAD = [(n, a) for n in ("zeros_like", "ones_like", "empty_like", "rand_like", "randn_like", "full_like")
            for a in [(None,), ("a",), (3,), ([1.0, 2.0],)]]


def run_creation(tally=TALLY):
    for name, args in CREATION_BAD:
        judge(name, lambda: getattr(tl, name)(*args), lambda: getattr(torch, name)(*args),
              values=name not in RANDOM, tally=tally)
    for name, args in LIKE_BAD:
        a = (*args, 1.0) if name == "full_like" else args
        judge(name, lambda: getattr(tl, name)(*a), lambda: getattr(torch, name)(*a), tally=tally)
    for name in ("zeros_like", "ones_like", "full_like", "rand_like"):   # an empty and a NaN input
        for data in (np.zeros((0, 3), np.float32), np.array([np.nan, np.inf], np.float32)):
            x, y = both(data)
            extra = (2.0,) if name == "full_like" else ()
            judge(name, lambda: getattr(tl, name)(x, *extra), lambda: getattr(torch, name)(y, *extra),
                  values=name not in RANDOM and name != "rand_like", tally=tally)
    # Sizes beyond any machine: ResourceError before allocating (torch is not asked).
    for name, args in [("zeros", (HUGE,)), ("ones", (HUGE, 4)), ("empty", (10 ** 7, 10 ** 7)), ("rand", (HUGE,)),
                       ("randn", (HUGE,)), ("full", ((HUGE,), 1.0)), ("arange", (0, HUGE * 10)),
                       ("linspace", (0, 1, HUGE)), ("eye", (10 ** 7,)), ("randint", (5, (HUGE,))),
                       ("randperm", (HUGE,)), ("tril_indices", (10 ** 7, 10 ** 7))]:
        judge(name, lambda: getattr(tl, name)(*args), None, expect=ResourceError, tally=tally)
    big = tl.zeros(1)
    for name, args in [("new_zeros", (HUGE,)), ("new_ones", (HUGE,)), ("new_empty", (HUGE,)),
                       ("new_full", ((HUGE,), 2.0))]:
        judge(name, lambda: getattr(big, name)(*args), None, expect=ResourceError, tally=tally)
    x, y = both(np.ones(2, np.float32))
    for name, args in [("new_zeros", (2, -1)), ("new_ones", ("a",)), ("new_full", ((2,), None)),
                       ("new_empty", (None,)), ("new_zeros", ((2, 3),)), ("new_tensor", ([1, 2],))]:
        judge(name, lambda: getattr(x, name)(*args), lambda: getattr(y, name)(*args), tally=tally,
              values=name != "new_empty")


# ---- every registered op: None, NaN/inf, empty, out-of-range dims ----------------------------------------

def _accepts_dim(fn) -> bool:
    try:
        return "dim" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def op_names():
    return sorted(n for n in FUNCTIONS if hasattr(torch, n) and n not in NOT_OPS and n not in RANDOM)


def run_ops(tally=TALLY):
    base = np.array([[0.5, -1.5, 2.0], [3.0, 0.0, -0.25]], np.float32)
    special = np.array([[np.nan, np.inf, -np.inf], [0.0, -0.0, 1.0]], np.float32)
    empty = np.zeros((0, 3), np.float32)
    for name in op_names():
        f_l, f_t = FUNCTIONS[name], getattr(torch, name)
        x, y = both(base)
        ok, _ = _run(lambda: f_t(y))
        judge(name, lambda: f_l(None), lambda: f_t(None), tally=tally)
        if not ok:
            continue                                         # not a one-tensor op: None is its probe
        judge(name, lambda: f_l(x), lambda: f_t(y), tally=tally)
        for kind, data in (("special", special), ("empty", empty)):
            if (name, kind) in KNOWN:
                continue
            xs, ys = both(data)
            judge(name, lambda: f_l(xs), lambda: f_t(ys), tally=tally)
        if _accepts_dim(f_l):
            for d in (2, -3, 7):
                judge(name, lambda: f_l(x, dim=d), lambda: f_t(y, dim=d), tally=tally)
        xi, yi = both(np.array([[1, 2, 3], [4, 5, 6]], np.int64))
        judge(name, lambda: f_l(xi), lambda: f_t(yi), tally=tally)


# ---- index ops: out-of-range indices raise as torch raises ---------------------------------------------

def index_cases(idx):
    """(op, torchlean call, torch call) for one index vector ``idx`` into 3 rows / 3 classes."""
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    m = np.arange(9, dtype=np.float32).reshape(3, 3)
    (wl, wt), (ml, mt) = both(w), both(m)
    il, it = both(np.asarray(idx, np.int64))
    g = np.asarray(idx, np.int64).reshape(1, -1)
    gl, gt = both(g)
    src = np.ones(g.shape, np.float32)
    sl, stt = both(src)
    logits = np.linspace(-1, 1, len(idx) * 3, dtype=np.float32).reshape(len(idx), 3)
    ll, lt = both(logits)
    return [
        ("embedding", lambda: TF.embedding(il, wl), lambda: torch.nn.functional.embedding(it, wt)),
        ("getitem", lambda: ml[il], lambda: mt[it]),
        ("index_select", lambda: ml.index_select(0, il), lambda: mt.index_select(0, it)),
        ("take", lambda: ml.take(il), lambda: mt.take(it)),
        ("gather", lambda: ml[:1].gather(1, gl), lambda: mt[:1].gather(1, gt)),
        ("scatter", lambda: tl.zeros(1, 3).scatter(1, gl, sl), lambda: torch.zeros(1, 3).scatter(1, gt, stt)),
        ("scatter_add", lambda: tl.zeros(1, 3).scatter_add(1, gl, sl),
         lambda: torch.zeros(1, 3).scatter_add(1, gt, stt)),
        ("index_add", lambda: tl.zeros(3, 2).index_add(0, il, tl.ones(len(idx), 2)),
         lambda: torch.zeros(3, 2).index_add(0, it, torch.ones(len(idx), 2))),
        # torch's CPU take_along_dim reads out of bounds without a check (index 3 of 3 gives a
        # value); the oracle is its gather, which take_along_dim is documented to equal, with
        # indices in [-3, 0) counted from the end as torchlean does (torch: undefined there).
        ("take_along_dim", lambda: tl.take_along_dim(ml[:1], gl, dim=1),
         lambda: torch.gather(mt[:1], 1, torch.where((gt < 0) & (gt >= -3), gt + 3, gt))),
        ("one_hot", lambda: TF.one_hot(il, 3), lambda: torch.nn.functional.one_hot(it, 3)),
        ("cross_entropy", lambda: TF.cross_entropy(ll, il), lambda: torch.nn.functional.cross_entropy(lt, it)),
        ("nll_loss", lambda: TF.nll_loss(ll, il), lambda: torch.nn.functional.nll_loss(lt, it)),
    ]


def run_index_fixed(tally=TALLY):
    for idx in ([0, 3], [0, -4], [2, -1], [0, 1, 2], [], [5]):
        for op, a, b in index_cases(idx):
            if op in ("one_hot", "cross_entropy", "nll_loss") and not idx:
                continue
            judge(op, a, b, tally=tally)
    emb_l, emb_t = tnn.Embedding(3, 2), torch.nn.Embedding(3, 2)
    judge("embedding", lambda: emb_l(tl.tensor([0, 3])), lambda: emb_t(torch.tensor([0, 3])), tally=tally)
    # ignore_index targets are not out of range
    ll, lt = both(np.zeros((2, 3), np.float32))
    judge("cross_entropy", lambda: TF.cross_entropy(ll, tl.tensor([0, -100])),
          lambda: torch.nn.functional.cross_entropy(lt, torch.tensor([0, -100])), tally=tally)
    judge("nll_loss", lambda: TF.nll_loss(ll, tl.tensor([7, 1]), ignore_index=7),
          lambda: torch.nn.functional.nll_loss(lt, torch.tensor([7, 1]), ignore_index=7), tally=tally)


# ---- module constructors ------------------------------------------------------------------------------------

SIZE_PARAMS = ("in_features", "out_features", "in1_features", "in2_features", "num_embeddings", "embedding_dim",
               "in_channels", "out_channels", "num_features", "input_size", "hidden_size", "embed_dim",
               "normalized_shape", "num_groups", "num_channels", "d_model", "nhead", "dim_feedforward")


# Modules with a weight whose size is the product of two size arguments.
HUGE_2D = {"Linear", "Bilinear", "Embedding", "EmbeddingBag", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
           "ConvTranspose2d", "ConvTranspose3d", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
           "MultiheadAttention", "Transformer", "TransformerEncoderLayer", "TransformerDecoderLayer"}


def module_classes():
    out = []
    for n in sorted(dir(tnn)):
        c = getattr(tnn, n)
        if isinstance(c, type) and issubclass(c, tnn.Module) and hasattr(torch.nn, n) and not n.startswith("Lazy"):
            try:
                params = inspect.signature(c.__init__).parameters
            except (TypeError, ValueError):
                continue
            sizes = [p for p in params if p in SIZE_PARAMS]
            if sizes:
                out.append((n, c, getattr(torch.nn, n), params, sizes))
    return out


def _ctor_args(n, params, sizes, value, which):
    """Valid small arguments for every required parameter, ``value`` for size parameter ``which``."""
    kw = {}
    for p, spec in params.items():
        if p == "self" or spec.kind in (spec.VAR_POSITIONAL, spec.VAR_KEYWORD):
            continue
        if p in sizes:
            kw[p] = value if p == which else (2 if p in ("nhead", "num_groups") else 4)
        elif spec.default is inspect.Parameter.empty:
            kw[p] = 3 if p == "kernel_size" else 2
    return kw


def run_modules(tally=TALLY):
    for n, cl, ct, params, sizes in module_classes():
        for which in sizes:
            for bad in (-1, "a", None, 2.5):
                kw = _ctor_args(n, params, sizes, bad, which)
                judge(n, lambda: cl(**kw), lambda: ct(**kw), values=False, tally=tally)
            kw = _ctor_args(n, params, sizes, 10 ** 7, which)
            others = [p for p in sizes if p != which and p not in ("nhead", "num_groups")]
            if others and n in HUGE_2D:   # two huge sizes of one weight: terabytes (torch is not asked)
                kw[others[0]] = 10 ** 7
                judge(n, lambda: cl(**kw), None, expect=(ResourceError, TorchLeanError), tally=tally)


# ---- the tests -------------------------------------------------------------------------------------------------

def _report(tally):
    return (f"{tally.total} cases: {dict(tally.counts)}\n" +
            "\n".join(f"  {k}: {v[:8]}" for k, v in tally.examples.items()))


@pytest.mark.parametrize("part", [run_creation, run_ops, run_index_fixed, run_modules], ids=lambda f: f.__name__)
def test_no_leaks_and_no_silent_differences(part):
    t = Tally()
    part(t)
    assert t.total > 20, _report(t)
    assert t.counts["leak"] == 0, _report(t)
    assert t.counts["silent"] == 0, _report(t)
    assert t.counts["unnamed"] == 0, _report(t)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(-7, 7), min_size=1, max_size=5))
def test_index_ops_raise_exactly_where_torch_raises(idx):
    t = Tally()
    for op, a, b in index_cases(idx):
        judge(op, a, b, tally=t)
    assert t.counts["leak"] == t.counts["silent"] == t.counts["unnamed"] == t.counts["reject"] == 0, _report(t)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-3, 4), min_size=0, max_size=3), st.sampled_from(["zeros", "ones", "rand", "randn"]))
def test_sizes_raise_exactly_where_torch_raises(size, name):
    t = Tally()
    judge(name, lambda: getattr(tl, name)(*size), lambda: getattr(torch, name)(*size),
          values=name not in RANDOM, tally=t)
    judge(name, lambda: getattr(tl, name)(size), lambda: getattr(torch, name)(size), values=name not in RANDOM,
          tally=t)
    assert t.counts["leak"] == t.counts["silent"] == t.counts["unnamed"] == t.counts["reject"] == 0, _report(t)


@settings(max_examples=60, deadline=None)
@given(st.integers(-4, 6), st.integers(-4, 6), st.sampled_from([-2, -1, 0, 1, 3, 0.5, -0.5]))
def test_arange_raises_exactly_where_torch_raises(start, end, step):
    t = Tally()
    judge("arange", lambda: tl.arange(start, end, step), lambda: torch.arange(start, end, step), tally=t)
    assert t.counts["leak"] == t.counts["silent"] == t.counts["unnamed"] == t.counts["reject"] == 0, _report(t)


if __name__ == "__main__":
    for part in (run_creation, run_ops, run_index_fixed, run_modules):
        part(TALLY)
    print(_report(TALLY))
