"""Edge samples: inputs exactly at kinks and ties, and at large magnitudes.

The ordinary samples of a record stay off kinks and at magnitudes of a few units, because
they also feed the finite-difference check of the spec. That leaves two kinds of kernel bug
invisible: a wrong subgradient at a kink (relu'(0) = 1 instead of the documented 0) and a
missing stability trick (a softmax without the row-max shift is exact for |x| <= 3 and gives
inf/NaN at x100). The samples here are checked by ``torchlean check`` only — the device
forward and the device VJP against the spec's forward and VJP in float64 — so every
convention of DESIGN.md (relu'(0)=0, abs'(0)=0, sqrt'(0)=0, clamp' 1 strictly inside, max/min
split 1/2-1/2 on ties, max-pool's first row-major winner) and every stability trick is
enforced on every device.

Every edge input is rounded to float32 first, so the device and the spec see the same numbers
and the comparison measures the kernel, not the upload.
"""

from __future__ import annotations

import numpy as np

from . import OPINFOS, Sample

#: The magnitudes of the large-magnitude pass: x100, and near float32 overflow (3.4e38) where
#: the op's meaning stays finite (differences of two such values still fit in float32).
LARGE = 100.0
HUGE = 1e37


def f32(x) -> np.ndarray:
    """``x`` rounded to the nearest float32, held in float64."""
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def _scaled(samples, factor, which=(0,), tag=""):
    """The samples with the inputs at ``which`` multiplied by ``factor`` (rounded to float32)."""
    out = []
    for s in samples:
        xs = tuple(f32(x * factor) if i in which else f32(x) for i, x in enumerate(s.inputs))
        out.append(Sample(xs, dict(s.attrs), f"{tag or f'x{factor:g}'}: {s.desc}"))
    return out


def _attach(name, fn):
    info = OPINFOS[name]
    prev = info.edge

    def edge(rng, _prev=prev, _fn=fn):
        return list(_prev(rng)) + list(_fn(rng))
    info.edge = edge


def _large(name, factors=(LARGE, HUGE), which=(0,), n=None):
    """Edge samples of ``name``: its ordinary samples (the first ``n``) scaled by each factor."""
    def fn(rng, _name=name):
        base = OPINFOS[_name].samples(rng)[:n]
        return [s for f in factors for s in _scaled(base, f, which)]
    _attach(name, fn)


# ---- large magnitudes: every op with exp/log/softmax-like numerics -----------------------------

for _name in ("softmax", "log_softmax", "cross_entropy", "sigmoid", "tanh", "softplus"):
    _large(_name)
for _name in ("nll_loss", "silu", "safe_log", "gelu", "hard_masked_softmax", "smooth_max_pool", "erf", "erfc"):
    _large(_name, (LARGE,))


def _offset(name, offset=100.0):
    """Normalization at a large offset: a one-pass E[x^2] - E[x]^2 variance cancels there."""
    def fn(rng, _name=name):
        out = []
        for s in OPINFOS[_name].samples(rng):
            xs = (f32(s.inputs[0] + offset),) + tuple(f32(x) for x in s.inputs[1:])
            out.append(Sample(xs, dict(s.attrs), f"offset {offset:g}: {s.desc}"))
        return out
    _attach(name, fn)


for _name in ("layer_norm", "layer_norm_noaffine", "batch_norm_train"):
    _offset(_name)

# attention: q and k x10 each make the logits x100
_large("flash_attention", (10.0,), which=(0, 1))
_large("multi_head_attention", (3.0,), which=(0,))  # logits x9: the projections amplify rounding


# ---- kinks and ties ----------------------------------------------------------------------------

_KINK = np.array([-1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 0.0])


def _at(values, shape, rng):
    return f32(rng.choice(values, size=shape))


def _unary_at(name, values, attrs=({},)):
    def fn(rng, _v=np.asarray(values, dtype=np.float64)):
        out = [Sample((f32(_v),), dict(a), f"at {_v.tolist()} {a}") for a in attrs]
        out += [Sample((_at(_v, (3, 4), rng),), dict(a), f"(3, 4) drawn from {_v.tolist()} {a}") for a in attrs]
        return out
    _attach(name, fn)


_unary_at("relu", _KINK)
_unary_at("abs", _KINK)
_unary_at("sign", _KINK)
_unary_at("sqrt", [0.0, 0.0, 0.25, 1.0, 4.0])
_unary_at("leaky_relu", _KINK, ({}, {"negative_slope": 0.2}, {"negative_slope": -1.5}))
_unary_at("clamp", [-1.0, -0.5, -0.5, 0.0, 0.5, 0.5, 1.0],
          ({"lo": -0.5, "hi": 0.5}, {"lo": -0.5}, {"hi": 0.5}))
_unary_at("round", [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.0])
for _name in ("floor", "ceil", "trunc"):
    _unary_at(_name, [-2.0, -1.0, 0.0, 1.0, 2.0, 0.5])


def _tie_pairs(rng):
    """(a, b) equal at about half the entries, also under broadcasting."""
    out = []
    for sa, sb in (((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 3))):
        a = _at([-1.0, 0.0, 1.0], sa, rng)
        b = _at([-1.0, 0.0, 1.0], sb, rng)
        out.append(Sample((a, b), {}, f"ties {sa} vs {sb}"))
    a = _at([-1.0, 0.0, 1.0], (7,), rng)
    out.append(Sample((a, a.copy()), {}, "all tied"))
    return out


for _name in ("maximum", "minimum"):
    _attach(_name, _tie_pairs)


def _l1_ties(rng):
    a = _at([-1.0, 0.0, 1.0], (3, 4), rng)
    b = np.where(rng.uniform(size=(3, 4)) > 0.5, a, _at([-1.0, 0.0, 1.0], (3, 4), rng))
    return [Sample((a, f32(b)), dict(r), f"a == b at ties {r}")
            for r in ({}, {"reduction": "sum"}, {"reduction": "none"})]


_attach("l1_loss", _l1_ties)


def _reduce_ties(rng):
    shapes = [((3, 4), 0, False), ((3, 4), 1, True), ((2, 3, 5), -1, False), ((2, 3, 5), 1, True), ((7,), 0, False)]
    out = [Sample((_at([-1.0, 0.0, 1.0], s, rng),), {"axis": a, "keepdim": k}, f"ties {s} axis={a}")
           for s, a, k in shapes]
    out.append(Sample((np.zeros((3, 4)),), {"axis": 1}, "all tied"))
    return out


for _name in ("reduce_max", "reduce_min"):
    _attach(_name, _reduce_ties)


def _pool_ties(rng):
    """Max-pool windows with tied maxima (the cotangent goes to the first row-major winner)."""
    out = []
    for s in OPINFOS["max_pool"].samples(rng):
        x = s.inputs[0]
        out.append(Sample((_at([-1.0, 0.0, 1.0], x.shape, rng),), dict(s.attrs), f"ties: {s.desc}"))
        out.append(Sample((np.zeros(x.shape),), dict(s.attrs), f"all tied: {s.desc}"))
    return out


_attach("max_pool", _pool_ties)


def _cumarg_ties(name):
    def fn(rng):
        return [Sample((_at([-1.0, 0.0, 1.0], s.inputs[0].shape, rng),), dict(s.attrs), f"ties: {s.desc}")
                for s in OPINFOS[name].samples(rng)]
    return fn


for _name in ("cumargmax", "cumargmin"):
    if _name in OPINFOS:
        _attach(_name, _cumarg_ties(_name))


def _near_constant(name, spread=3e-3):
    """Rows of spread ~1e-3 (variance below eps = 1e-5): where eps sits (inside the square root,
    var + eps, not added to the standard deviation) decides the value."""
    def fn(rng, _name=name):
        return [Sample((f32(s.inputs[0] * spread),) + tuple(f32(x) for x in s.inputs[1:]), dict(s.attrs),
                       f"spread {spread:g}: {s.desc}") for s in OPINFOS[_name].samples(rng)]
    _attach(name, fn)


for _name in ("layer_norm", "layer_norm_noaffine", "batch_norm_train"):
    _near_constant(_name)


# ---- subnormal magnitudes ----------------------------------------------------------------------

#: The tiny pass scales inputs by 2**-130, inside float32's subnormal range (below 2**-126): a
#: kernel that flushes subnormals to zero (CuPy compiles its own kernels with ``-ftz=true``) gives
#: 0, or sign(0), or log(0), where IEEE arithmetic, NumPy, torch and the spec do not.
TINY = 2.0 ** -130
#: Smallest positive float32 (a subnormal): the tiny pass allows this much per input element,
#: the rounding of a result to the subnormal grid, on top of the relative allowance.
SUBNORMAL_SPACING = 2.0 ** -149

#: Ops checked at subnormal magnitudes, and which inputs are scaled: ops whose results at such
#: inputs are representable in float32 (homogeneous ones, or ones whose value or sign follows the
#: input's), so that a flush-to-zero shows as an error far above float32 rounding.
TINY_OPS = {
    **{n: (0,) for n in ("abs", "neg", "relu", "leaky_relu", "sign", "sqrt", "log", "sin", "tan", "asin", "atan",
                         "sinh", "asinh", "atanh", "tanh", "erf", "expm1", "log1p", "erfinv", "floor", "ceil",
                         "trunc", "gelu", "silu", "scale", "clamp", "cast", "sum", "reduce_sum", "reduce_mean",
                         "reduce_max", "reduce_min", "cumsum", "mul", "div", "matmul", "bmm", "linear",
                         "linear_nobias", "conv_nobias", "avg_pool", "max_pool", "layer_norm_noaffine")},
    **{n: (0, 1) for n in ("add", "sub", "maximum", "minimum", "compare", "atan2", "concat")},
    "where": (1, 2),
}
#: Of those, the ops whose gradient at subnormal inputs overflows float32 in its meaning (1/x,
#: b / (a^2 + b^2)): their tiny pass checks the forward only.
TINY_FORWARD_ONLY = frozenset({"log", "atan2"})


def tiny(name: str, rng) -> list:
    """The subnormal samples of ``name`` (none for an op not in :data:`TINY_OPS`)."""
    which = TINY_OPS.get(name)
    if which is None or name not in OPINFOS:
        return []
    return _scaled(OPINFOS[name].samples(rng), TINY, which, tag="x2**-130")
