"""The host kernels of the conv, norm, spectral and attention families over an explicit array
namespace (``xp``, NumPy by default), and the CUDA family modules that bind them to CuPy.

The CUDA device runs these host kernels with ``xp=cupy`` for the kernels it has no native
version of and for the inputs its native kernels do not take. These tests check that the host
modules compute only through ``xp`` (statically, and by running them with a recording
namespace), that ``xp=numpy`` changes nothing, bit for bit, and that the CUDA modules define the
bound kernels. ``@pytest.mark.cuda`` tests run the host kernels on CuPy against NumPy.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
from pathlib import Path

import numpy as np
import pytest

from torchlean.kernels.api import CONTRACT
from torchlean.testing import kernel_cases as kc

FAMILIES = ("conv", "norm", "spectral", "attention")
HOST = {f: importlib.import_module(f"torchlean.kernels.host.{f}") for f in FAMILIES}
KERNELS_DIR = Path(HOST["conv"].__file__).resolve().parent.parent

#: The ``np.<name>`` the four host modules may reference inside a function. Arrays (NumPy's and
#: CuPy's alike) carry NumPy dtype objects, so dtypes are namespace-neutral: ``np.float32`` as a
#: ``dtype=`` argument or in a comparison, ``np.dtype(...)`` to normalize one, ``np.intp`` for
#: index arrays. ``np.inf`` and ``np.pi`` are Python floats. Nothing else of NumPy may appear in
#: a function body: every array function (``np.zeros``, ``np.matmul``, ``np.fft``, ``np.lib``,
#: ...) must come from ``xp``. Host-side integer arithmetic on shapes uses ``math.prod`` and
#: builtins, so no NumPy reduction is needed for it.
NP_ALLOWED = frozenset({
    "dtype",                                        # dtype normalization
    "float32", "float64", "complex64", "complex128",  # float / complex dtypes
    "int32", "int64", "intp", "bool_",              # integer / bool dtypes (index arrays, masks)
    "inf", "pi",                                    # Python float constants
})

#: The contract kernels of the four families whose host kernels now take ``xp``.
CONVERTED = [(fam, name) for fam in FAMILIES for name in CONTRACT[fam]]

#: Kernels documented ``-> None``: their results are the array arguments they write in place.
IN_PLACE = {name for fam, name in CONVERTED if kc.documented_outputs(kc.signature(CONTRACT[fam][name])) == []}

#: Kernels whose host code needs nothing from the array namespace, and why (the static checks
#: above still hold them to NumPy only through ``xp``).
NAMESPACE_FREE = {
    "batch_norm_running_update": "array methods only: astype, mean and an in-place assignment",
}

#: The contract names the CUDA modules had no kernel for: now the host kernels bound to CuPy.
BOUND_ON_CUDA = {
    "conv": ("max_pool_forward", "max_pool_backward", "avg_pool_forward", "avg_pool_backward",
             "smooth_max_pool_forward", "smooth_max_pool_backward"),
    "spectral": ("rfft1d_packed", "irfft1d_packed"),
}
# (batch_norm_fwd/bwd were bound too until they got native kernels in src/norm.cu.)

#: The families whose CUDA module still calls its host module (fallbacks or bound kernels).
CUDA_USES_HOST = ("conv", "spectral", "attention")


# ---- static checks ---------------------------------------------------------------------------


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _host_tree(fam):
    return _tree(KERNELS_DIR / "host" / f"{fam}.py")


def _takes_xp(fn: ast.FunctionDef) -> bool:
    return any(a.arg == "xp" for a in fn.args.args + fn.args.kwonlyargs)


def _xp_functions(tree) -> set:
    """Names of the module-level functions that take ``xp``."""
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and _takes_xp(n)}


@pytest.mark.parametrize("fam", FAMILIES)
def test_numpy_is_imported_only_as_np(fam):
    # ``from numpy.lib.stride_tricks import sliding_window_view`` (and the like) would bind an
    # array function outside ``xp``.
    for node in ast.walk(_host_tree(fam)):
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("numpy"), f"host/{fam}.py:{node.lineno}: from {node.module}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "numpy":
                    assert a.name == "numpy" and a.asname == "np", f"host/{fam}.py:{node.lineno}: import {a.name}"


@pytest.mark.parametrize("fam", FAMILIES)
def test_functions_compute_only_through_xp(fam):
    """Inside every function (those taking ``xp``, their closures, and the helpers without
    ``xp``, which must then need no array namespace at all), ``np`` appears only as
    ``np.<allowed>``: no NumPy array function is called or passed around."""
    tree = _host_tree(fam)
    bad = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "np":
                if node.attr not in NP_ALLOWED:
                    bad.append(f"host/{fam}.py:{node.lineno} in {fn.name}: np.{node.attr}")
    assert not bad, "NumPy used outside xp:\n" + "\n".join(bad)


@pytest.mark.parametrize("fam", FAMILIES)
def test_bare_np_only_as_default_or_identity_test(fam):
    """A bare ``np`` appears only as the default of ``xp`` and in ``xp is (not) np``: the NumPy
    module is never passed on nor bound to a name inside a function."""
    tree = _host_tree(fam)
    allowed = set()
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        allowed.update(id(d) for d in fn.args.defaults + [d for d in fn.args.kw_defaults if d is not None])
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            allowed.update(id(c) for c in node.comparators)
        if isinstance(node, ast.Attribute):
            allowed.add(id(node.value))  # np.<attr>: checked by test_functions_compute_only_through_xp
    bad = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id == "np" and id(node) not in allowed:
                bad.append(f"host/{fam}.py:{node.lineno} in {fn.name}")
    assert not bad, "bare np (a namespace passed on or bound) outside xp's default:\n" + "\n".join(bad)


@pytest.mark.parametrize("fam", FAMILIES)
def test_xp_helpers_always_get_xp(fam):
    """A call of one of the module's own xp-taking functions passes ``xp=xp``: a forgotten ``xp``
    would silently run NumPy on CuPy arrays (or on the default namespace)."""
    tree = _host_tree(fam)
    takes = _xp_functions(tree)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in takes:
            kw = [k for k in node.keywords if k.arg == "xp"]
            if not kw or not (isinstance(kw[0].value, ast.Name) and kw[0].value.id == "xp"):
                bad.append(f"host/{fam}.py:{node.lineno}: {node.func.id}(...) without xp=xp")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("fam,name", CONVERTED)
def test_kernel_takes_keyword_only_xp_defaulting_to_numpy(fam, name):
    p = inspect.signature(getattr(HOST[fam], name)).parameters.get("xp")
    assert p is not None and p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is np


@pytest.mark.parametrize("fam", CUDA_USES_HOST)
def test_cuda_module_passes_cupy_to_every_host_call(fam):
    """Every use of the host module in ``cuda/<fam>.py`` (a fallback call, or a kernel bound with
    functools.partial) passes ``xp=cupy``; the source re-execution helpers are gone."""
    path = KERNELS_DIR / "cuda" / f"{fam}.py"
    src = path.read_text(encoding="utf-8")
    assert "ported" not in src and "twin(" not in src
    tree = _tree(path)
    host_alias = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  and n.module == "host" and n.level == 2 for a in n.names if a.name == fam}
    assert host_alias, f"cuda/{fam}.py does not import host.{fam}"
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        target = None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in host_alias:
            target = f.attr                                  # _host.kernel(..., xp=cupy)
        elif (isinstance(f, ast.Attribute) and f.attr == "partial" and node.args
              and isinstance(node.args[0], ast.Attribute) and isinstance(node.args[0].value, ast.Name)
              and node.args[0].value.id in host_alias):
            target = node.args[0].attr                       # functools.partial(_host.kernel, xp=cupy)
        if target is None:
            continue
        kw = [k for k in node.keywords if k.arg == "xp"]
        if not kw or not (isinstance(kw[0].value, ast.Name) and kw[0].value.id == "cupy"):
            bad.append(f"cuda/{fam}.py:{node.lineno}: {target} without xp=cupy")
    assert not bad, "\n".join(bad)


def test_source_reexecution_module_is_gone():
    assert not (KERNELS_DIR / "cuda" / "ported.py").exists()
    assert importlib.util.find_spec("torchlean.kernels.cuda.ported") is None


# ---- cases: every converted kernel on a couple of shapes --------------------------------------


def _r(rng, shape, dtype, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, shape).astype(dtype)


def _cases(dtype):
    """(id, family, kernel, args) for every converted kernel, a couple of shapes each; inputs
    that a backward needs from its forward come from the NumPy forward."""
    rng = np.random.default_rng(1234 + np.dtype(dtype).itemsize)
    H = HOST
    out = []

    def add(cid, fam, name, *args):
        out.append((f"{name}-{cid}", fam, name, args))

    # conv: (x, w, b, stride, padding, dilation, groups)
    for cid, x, w, b, s, p, dil, gr in (
            ("2d", _r(rng, (2, 3, 9, 7), dtype), _r(rng, (4, 3, 3, 2), dtype), _r(rng, 4, dtype),
             (2, 1), (1, 0), (1, 2), 1),
            ("1d-groups", _r(rng, (2, 4, 11), dtype), _r(rng, (6, 2, 3), dtype), None, (1,), (1,), (1,), 2)):
        add(cid, "conv", "conv_forward", x, w, b, s, p, dil, gr)
        g = _r(rng, H["conv"].conv_forward(x, w, b, s, p, dil, gr).shape, dtype)
        add(cid, "conv", "conv_backward", x, w, g, s, p, dil, gr, True, True, True)
        add(cid + "-dx", "conv", "conv_backward", x, w, g, s, p, dil, gr, True, False, False)
    for cid, x, w, b, s, p, op, dil, gr in (
            ("2d", _r(rng, (2, 4, 5, 6), dtype), _r(rng, (4, 3, 3, 3), dtype), _r(rng, 3, dtype),
             (2, 1), (1, 1), (1, 0), (1, 1), 1),
            ("1d-groups", _r(rng, (2, 4, 7), dtype), _r(rng, (4, 2, 3), dtype), None, (1,), (1,), (0,), (2,), 2)):
        add(cid, "conv", "conv_transpose_forward", x, w, b, s, p, op, dil, gr)
        g = _r(rng, H["conv"].conv_transpose_forward(x, w, b, s, p, op, dil, gr).shape, dtype)
        add(cid, "conv", "conv_transpose_backward", x, w, g, s, p, op, dil, gr, True, True, True)
    # pools: (x, kernel, stride, padding[, dilation])
    for cid, x, k, s, p, dil in (("2d-pad", _r(rng, (2, 3, 9, 7), dtype), (2, 3), (2, 2), (1, 1), (1, 1)),
                                 ("1d-dil", _r(rng, (3, 10), dtype), (3,), (1,), (1,), (2,))):
        add(cid, "conv", "max_pool_forward", x, k, s, p, dil)
        y, idx = H["conv"].max_pool_forward(x, k, s, p, dil)
        add(cid, "conv", "max_pool_backward", _r(rng, y.shape, dtype), idx, x.shape, k, s, p, dil)
        add(cid, "conv", "avg_pool_forward", x, k, s, p)
        ya = H["conv"].avg_pool_forward(x, k, s, p)
        add(cid, "conv", "avg_pool_backward", _r(rng, ya.shape, dtype), x.shape, k, s, p)
        for beta in (2.0, -1.5):
            bid = f"{cid}-beta{beta}"
            add(bid, "conv", "smooth_max_pool_forward", x, k, beta, s, p)
            ys, m, lse = H["conv"].smooth_max_pool_forward(x, k, beta, s, p)
            add(bid, "conv", "smooth_max_pool_backward", x, m, lse, _r(rng, ys.shape, dtype), k, beta, s, p)
    # an all-padding window row: max_pool routes -inf windows to their first real cell
    xn = np.full((1, 1, 3, 3), -np.inf, dtype=dtype)
    add("neginf", "conv", "max_pool_forward", xn, (2, 2), (1, 1), (1, 1), (1, 1))

    # norm
    for cid, x, affine in (("affine", _r(rng, (31, 65), dtype), True), ("plain", _r(rng, (4, 7), dtype), False)):
        n = x.shape[1]
        gamma, beta = (_r(rng, n, dtype), _r(rng, n, dtype)) if affine else (None, None)
        add(cid, "norm", "layer_norm_fwd", x, gamma, beta, 1e-5)
        _, mean, rstd = H["norm"].layer_norm_fwd(x, gamma, beta, 1e-5)
        add(cid, "norm", "layer_norm_bwd", x, gamma, mean, rstd, _r(rng, x.shape, dtype))
    for cid, x in (("ncs", _r(rng, (4, 3, 10), dtype)), ("s1", _r(rng, (2, 5, 1), dtype))):
        c = x.shape[1]
        gamma, beta = _r(rng, c, dtype), _r(rng, c, dtype)
        add(cid, "norm", "batch_norm_fwd", x, gamma, beta, 1e-5)
        _, mean, rstd = H["norm"].batch_norm_fwd(x, gamma, beta, 1e-5)
        add(cid, "norm", "batch_norm_bwd", x, gamma, mean, rstd, _r(rng, x.shape, dtype))
        add(cid, "norm", "batch_norm_running_update", x, _r(rng, c, dtype), _r(rng, c, dtype, 0.5, 2.0), 0.1)
        add(cid + "-var-only", "norm", "batch_norm_running_update", x, None, _r(rng, c, dtype, 0.5, 2.0), 0.5)

    # spectral
    for cid, x in (("odd", _r(rng, (3, 31), dtype)), ("even", _r(rng, (2, 16), dtype))):
        add(cid, "spectral", "rfft1d_packed", x)
        add(cid, "spectral", "irfft1d_packed", H["spectral"].rfft1d_packed(x), x.shape[1])
    for cid, x, modes, cout in (("few-modes", _r(rng, (2, 16, 3), dtype), 5, 4),
                                ("all-modes", _r(rng, (1, 31, 2), dtype), 16, 2)):
        wr, wi = _r(rng, (modes, x.shape[2], cout), dtype), _r(rng, (modes, x.shape[2], cout), dtype)
        g = _r(rng, x.shape[:2] + (cout,), dtype)
        add(cid, "spectral", "spectral_conv1d_rfft_fwd", x, wr, wi)
        for name in ("spectral_conv1d_rfft_bwd_x", "spectral_conv1d_rfft_bwd_wre", "spectral_conv1d_rfft_bwd_wim"):
            add(cid, "spectral", name, x, wr, wi, g)
        for nx, nw in ((True, True), (False, True), (True, False)):
            add(f"{cid}-{int(nx)}{int(nw)}", "spectral", "spectral_conv1d_rfft_bwd", x, wr, wi, g, nx, nw)

    # attention: (q, k, v, mask, scale, hard); the test shrinks the key tile so that the long
    # case runs over several tiles
    for cid, b, n, m, d, e, masked, hard in (("soft-mask", 2, 5, 6, 8, 3, True, False),
                                               ("hard-mask", 2, 5, 6, 8, 3, True, True),
                                               ("tiles", 1, 4, 150, 8, 5, True, True),
                                               ("nomask", 3, 7, 9, 4, 4, False, False)):
        q, k, v = _r(rng, (b, n, d), dtype), _r(rng, (b, m, d), dtype), _r(rng, (b, m, e), dtype)
        mask = None
        if masked:
            mask = rng.random((b, n, m)) < 0.7
            if hard:
                mask[0, 0] = False  # a row without an allowed key: out 0, lse +inf
        add(cid, "attention", "flash_attention_fwd", q, k, v, mask, 0.35, hard)
        o, lse = H["attention"].flash_attention_fwd(q, k, v, mask, 0.35, hard)
        g = _r(rng, o.shape, dtype)
        for name in ("flash_attention_bwd", "flash_attention_bwd_q", "flash_attention_bwd_k",
                     "flash_attention_bwd_v"):
            add(cid, "attention", name, q, k, v, mask, o, lse, g, 0.35, hard)
    return out


DTYPES = (np.float32, np.float64)
CASES = {np.dtype(dt).name: _cases(dt) for dt in DTYPES}
CASE_IDS = [(dt, i) for dt in CASES for i in range(len(CASES[dt]))]


def test_cases_cover_every_converted_kernel():
    for dt, cases in CASES.items():
        seen = {(fam, name) for _, fam, name, _ in cases}
        assert seen == set(CONVERTED), (dt, set(CONVERTED) - seen)


def _flat(r):
    return list(r) if isinstance(r, tuple) else [r]


def _results(name, fn, args, to=np.array, **kw):
    """``fn``'s outputs; for an in-place kernel, its array arguments after the call. The arrays
    go in through ``to`` (a copy), so that a case's arrays stay as made for the next run."""
    moved = [to(a) if isinstance(a, np.ndarray) else a for a in args]
    ret = fn(*moved, **kw)
    if name not in IN_PLACE:
        return _flat(ret)
    assert ret is None, f"{name} is documented to return None"
    return [m for a, m in zip(args, moved) if isinstance(a, np.ndarray)]


class _Recorder:
    """A namespace forwarding to NumPy that records which of its names the kernels used."""

    def __init__(self):
        self.used = set()

    def __getattr__(self, name):
        self.used.add(name)
        return getattr(np, name)


@pytest.fixture
def small_tiles(monkeypatch):
    # Key tiles of 64 columns (the minimum) and no size threshold for the row thread pool, so
    # that the small cases take the multi-tile and the threaded code paths.
    monkeypatch.setattr(HOST["attention"], "_TILE_ELEMS", 64)
    monkeypatch.setattr(HOST["attention"], "_MIN_PARALLEL", 0)


@pytest.mark.parametrize("dt,i", CASE_IDS, ids=[f"{dt}-{CASES[dt][i][0]}" for dt, i in CASE_IDS])
def test_explicit_numpy_is_bitwise_the_default(small_tiles, dt, i):
    cid, fam, name, args = CASES[dt][i]
    fn = getattr(HOST[fam], name)
    ref = _results(name, fn, args)
    for xp in (np, _Recorder()):
        got = _results(name, fn, args, xp=xp)
        assert len(got) == len(ref)
        for a, b in zip(got, ref):
            if b is None:
                assert a is None
                continue
            assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes(), f"{name}: not bitwise equal"
        if isinstance(xp, _Recorder):
            # the kernel went through the namespace it was given (and, for attention, the
            # non-NumPy branch of the row pool: one call over all rows)
            assert xp.used or name in NAMESPACE_FREE, f"{name} never used xp"


def test_row_pool_runs_on_threads_only_for_numpy(monkeypatch):
    att = HOST["attention"]
    monkeypatch.setattr(att, "_MIN_PARALLEL", 0)
    monkeypatch.setattr(att, "_CPUS", 4)
    calls = []
    att._par_rows(lambda lo, hi: calls.append((lo, hi)), 8, 8)
    assert len(calls) == 4 and sorted(calls)[0] == (0, 2)
    calls.clear()
    att._par_rows(lambda lo, hi: calls.append((lo, hi)), 8, 8, xp=_Recorder())
    assert calls == [(0, 8)]


# ---- CUDA modules ----------------------------------------------------------------------------


@pytest.mark.parametrize("fam", sorted(BOUND_ON_CUDA))
def test_cuda_modules_define_the_bound_kernels(fam):
    cupy = pytest.importorskip("cupy")
    mod = importlib.import_module(f"torchlean.kernels.cuda.{fam}")
    for name in BOUND_ON_CUDA[fam]:
        fn = getattr(mod, name, None)
        assert callable(fn), f"cuda/{fam}.py lacks {name}"
        assert isinstance(fn, functools.partial) and fn.func is getattr(HOST[fam], name)
        assert fn.keywords == {"xp": cupy} and fn.args == ()
    missing = [n for n in CONTRACT[fam] if not callable(getattr(mod, n, None))]
    assert not missing, f"cuda/{fam}.py lacks contract kernels {missing}"


def _to_cupy(cupy, a):
    return cupy.asarray(a) if isinstance(a, np.ndarray) else a


def _tol(dt):
    return dict(rtol=2e-4, atol=2e-4) if dt == "float32" else dict(rtol=1e-9, atol=1e-9)


@pytest.mark.cuda
@pytest.mark.parametrize("dt,i", CASE_IDS, ids=[f"{dt}-{CASES[dt][i][0]}" for dt, i in CASE_IDS])
def test_host_kernels_on_cupy_match_numpy(small_tiles, dt, i):
    """Every converted host kernel with ``xp=cupy`` (the CUDA fallbacks and the bound kernels)
    against the NumPy run: same dtypes and shapes, values within float tolerance, max-pool
    winners exactly."""
    import cupy
    cid, fam, name, args = CASES[dt][i]
    fn = getattr(HOST[fam], name)
    ref = _results(name, fn, args)
    got = _results(name, fn, args, lambda a: _to_cupy(cupy, a), xp=cupy)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        if b is None:
            assert a is None
            continue
        assert isinstance(a, cupy.ndarray), type(a)
        assert a.dtype == b.dtype and a.shape == b.shape
        a = cupy.asnumpy(a)
        if b.dtype.kind in "iub":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, **_tol(dt))


@pytest.mark.cuda
@pytest.mark.parametrize("fam", sorted(BOUND_ON_CUDA))
def test_cuda_surface_runs_the_bound_kernels(fam):
    """The ten kernels through ``get_kernels("cuda")``: no DeviceError stub, CuPy results."""
    import cupy
    from torchlean.kernels import get_kernels
    K = get_kernels("cuda")
    for _, f, name, args in CASES["float32"]:
        if f != fam or name not in BOUND_ON_CUDA[fam]:
            continue
        assert name not in K.unsupported
        ref = _flat(getattr(HOST[fam], name)(*args))
        got = _flat(getattr(K, name)(*[_to_cupy(cupy, a) for a in args]))
        for a, b in zip(got, ref):
            np.testing.assert_allclose(cupy.asnumpy(a), b, **_tol("float32"))


@pytest.mark.cuda
def test_cuda_fallbacks_run_the_host_code_on_cupy():
    """Inputs the native CUDA kernels do not take go to the host kernels with ``xp=cupy``:
    float64 attention, mixed-dtype convolution, a spectral input with an empty batch."""
    import cupy
    from torchlean.kernels import get_kernels
    K = get_kernels("cuda")
    rng = np.random.default_rng(7)
    # attention in float64: the native kernels are float32 only
    q, k, v = (_r(rng, s, np.float64) for s in ((2, 5, 8), (2, 6, 8), (2, 6, 3)))
    mask = rng.random((2, 5, 6)) < 0.7
    o_ref, lse_ref = HOST["attention"].flash_attention_fwd(q, k, v, mask, 0.35, True)
    o, lse = K.flash_attention_fwd(*(cupy.asarray(a) for a in (q, k, v, mask)), 0.35, True)
    assert isinstance(o, cupy.ndarray) and o.dtype == np.float64
    np.testing.assert_allclose(cupy.asnumpy(o), o_ref, **_tol("float64"))
    np.testing.assert_allclose(cupy.asnumpy(lse), lse_ref, **_tol("float64"))
    g = _r(rng, o_ref.shape, np.float64)
    ref = HOST["attention"].flash_attention_bwd(q, k, v, mask, o_ref, lse_ref, g, 0.35, True)
    got = K.flash_attention_bwd(*(cupy.asarray(a) for a in (q, k, v, mask, o_ref, lse_ref, g)), 0.35, True)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(cupy.asnumpy(a), b, **_tol("float64"))
    # convolution with a float32 input and a float64 weight: not a native dtype combination
    x, w = _r(rng, (2, 3, 9, 7), np.float32), _r(rng, (4, 3, 3, 2), np.float64)
    ref = HOST["conv"].conv_forward(x, w, None, (2, 1), (1, 0), (1, 2), 1)
    got = K.conv_forward(cupy.asarray(x), cupy.asarray(w), None, (2, 1), (1, 0), (1, 2), 1)
    assert got.dtype == ref.dtype
    np.testing.assert_allclose(cupy.asnumpy(got), ref, rtol=1e-6, atol=1e-6)
    # spectral convolution with an empty batch: the native path needs every axis non-empty
    x = np.zeros((0, 16, 3), np.float32)
    wr, wi = _r(rng, (5, 3, 4), np.float32), _r(rng, (5, 3, 4), np.float32)
    ref = HOST["spectral"].spectral_conv1d_rfft_fwd(x, wr, wi)
    got = K.spectral_conv1d_rfft_fwd(cupy.asarray(x), cupy.asarray(wr), cupy.asarray(wi))
    assert got.shape == ref.shape and got.dtype == ref.dtype
