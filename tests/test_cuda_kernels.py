"""The CUDA kernel surface against the host kernels (the reference), kernel by kernel.

``test_kernel`` runs, for every kernel of the contract (``KERNELS``) and every dtype it is tested
in, every case of :mod:`torchlean.testing.kernel_cases` on the CUDA surface and on the host
surface and compares them: sizes that are not multiples of any block size (1, 31, 1000, 4097),
empty and size-1 cases, float32 and float64, per-case tolerances. The table is built from the
contract's signature strings, so a kernel added there is tested here with no edit of this file
(tests/test_kernel_cases.py checks on the CPU that every kernel has cases). Before each launch the
memory pool is seeded with NaN-filled blocks of the outputs' sizes, so an output element the
kernel fails to write shows up as NaN.

The other tests check what a host-versus-device table cannot say: NaN propagation, offset and
strided layouts of the fast paths, TF32 off, index range errors raised before any launch, memory
statistics, device-versus-device bit equality, and the native paths under monkeypatched
thresholds. Skipped without a GPU (tests/conftest.py).
"""

import math

import numpy as np
import pytest

from torchlean.errors import BackendUnavailableError, DTypeError, IndexRangeError
from torchlean.kernels import get_kernels
from torchlean.kernels.api import KERNELS
from torchlean.testing import kernel_cases as kc

pytestmark = pytest.mark.cuda

H = get_kernels("cpu")
DTYPES = [np.float32, np.float64]


@pytest.fixture(scope="module")
def K():
    return get_kernels("cuda")


@pytest.fixture(scope="module")
def cp(K):
    import cupy
    return cupy


def poison(*nbytes):
    """Leave NaN-filled (0xFF bytes) free blocks of these sizes at the top of CuPy's pool."""
    import cupy
    blocks = [cupy.full(max(int(n), 1), 255, dtype=np.uint8) for n in nbytes]
    cupy.cuda.Device().synchronize()
    del blocks


def dev(K, a):
    return K.from_host(a, a.dtype) if isinstance(a, np.ndarray) else a


def host(K, y):
    if y is None:
        return None
    return K.to_host(y)


def check(K, name, *args, tol=None):
    """Run kernel ``name`` on both devices and compare (a one-off case of the table's runner:
    index arguments stay on the host, the pool is poisoned first). Returns the device outputs,
    copied to the host."""
    dtype = next((a.dtype.name for a in args if isinstance(a, np.ndarray) and a.dtype.kind == "f"), "float32")
    case = kc.Case(tuple(args), tol=None if tol is None else kc.Tol(*tol), desc="hand-written", dtype=dtype)
    return kc.run_case(name, case, K, before=poison)


def rand(rng, shape, dtype, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def run_table(K, rng, name, dtype):
    """Every case of ``name`` in ``dtype``; one failure report naming each failing case."""
    cases = kc.cases(name, rng, dtype)
    assert cases, f"{name}: no cases in {dtype} (kernel_cases.missing() should name it)"
    failures = []
    for case in cases:
        try:
            kc.run_case(name, case, K, before=poison)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} of {len(cases)} cases of {name} [{dtype}] failed:\n" + "\n".join(
        f[:2000] for f in failures[:10])


# ---- the surface --------------------------------------------------------------------------


def test_surface_complete(K, cp):
    missing = [n for n in KERNELS if not callable(getattr(K, n, None))]
    assert not missing and not K.unsupported
    assert K.device == "cuda"
    assert isinstance(K.zeros((3,), np.float32), cp.ndarray)


def test_tf32_is_off_and_matmul_is_fp32(K, cp, rng):
    import torchlean.cuda as tc
    assert not tc.tf32_enabled()
    a, b = rand(rng, (512, 512), np.float32), rand(rng, (512, 512), np.float32)
    got = K.to_host(K.matmul(dev(K, a), dev(K, b)))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # TF32 (10-bit mantissa) would be near 1e-3 here; float32 lands near 1e-7.
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5


def test_missing_cupy_raises_backend_unavailable(monkeypatch):
    import sys
    from torchlean.kernels import cuda as kcuda
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(BackendUnavailableError, match="torchlean\\[cuda\\]"):
        kcuda._import_cupy()


# ---- every kernel of the contract, from the case table ------------------------------------------

TABLE = [pytest.param(name, dt, id=f"{name}-{dt}") for name in KERNELS for dt in (kc.dtypes(name) or ("-",))]


@pytest.mark.parametrize("name,dtype", TABLE)
def test_kernel(K, rng, name, dtype):
    if name in kc.EXCLUDED:
        pytest.skip(f"{name}: {kc.EXCLUDED[name]}")
    run_table(K, rng, name, dtype)


# ---- reductions: the special layouts and NaN ---------------------------------------------


def _sum_close(got, x, axis, keepdims=False):
    """A float32 sum against the float64 sum: error bounded by a few ulps of sum |x|."""
    ref = np.asarray(x.astype(np.float64).sum(axis=axis, keepdims=keepdims))
    bound = np.asarray(np.abs(x.astype(np.float64)).sum(axis=axis, keepdims=keepdims))
    eps = np.finfo(x.dtype).eps
    assert got.shape == ref.shape
    assert np.all(np.abs(got - ref) <= 4 * eps * bound + 1e-30), np.abs(got - ref).max()


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_columns_of_an_offset_view(K, rng, dtype):
    """A contiguous view that starts mid-allocation (its pointer not 16-byte aligned) reduces right."""
    flat = rand(rng, 1 + 31 * 1000, dtype)
    x = dev(K, flat)[1:].reshape(31, 1000)
    got = K.to_host(K.reduce_sum_axis0(x))
    _sum_close(got, flat[1:].reshape(31, 1000), 0)
    np.testing.assert_array_equal(K.to_host(K.reduce_max_axis0(x)), flat[1:].reshape(31, 1000).max(axis=0))


def test_reduce_max_propagates_nan(K, rng):
    x = rand(rng, (7, 2000), np.float32)
    x[3, 1500] = np.nan
    x[5, 0] = np.nan
    check(K, "reduce_max_axis1", x, tol=(0.0, 0.0))
    check(K, "reduce_max_axis0", x, tol=(0.0, 0.0))
    check(K, "amax", x, -1, True, tol=(0.0, 0.0))


# ---- gather / scatter: the index rules -----------------------------------------------------


def test_index_rules_checked_on_host_before_launch(K, rng):
    v = dev(K, rand(rng, 10, np.float32))
    mat = dev(K, rand(rng, (4, 3), np.float32))
    before = K.to_host(mat)
    for bad in ([-1], [0, 2 ** 32], [2 ** 70]):
        with pytest.raises(IndexRangeError):
            K.gather_vec(v, bad)
        with pytest.raises(IndexRangeError):
            K.gather_rows(mat, bad)
        with pytest.raises(IndexRangeError):
            K.scatter_add(v, dev(K, np.ones(len(bad), np.float32)), bad)
        with pytest.raises(IndexRangeError):
            K.scatter_add_rows(mat, dev(K, np.ones((len(bad), 3), np.float32)), bad)
    for bad in (-1, 2 ** 32):
        with pytest.raises(IndexRangeError):
            K.scatter_add_row(mat, dev(K, np.ones(3, np.float32)), bad)
    with pytest.raises(DTypeError):
        K.gather_vec(v, [0.5])
    np.testing.assert_array_equal(K.to_host(mat), before)


# ---- memory and transfer --------------------------------------------------------------------


def test_memory_identity_and_layout(K, cp, rng):
    """What the value comparisons cannot see: results that must be the input itself, contiguity."""
    a = rng.standard_normal((31, 33))
    x = K.from_host(a, np.float32)
    assert x.dtype == np.float32 and x.flags.c_contiguous and isinstance(x, cp.ndarray)
    assert isinstance(K.to_host(x), np.ndarray)
    t = x.T
    assert K.copy(t).flags.c_contiguous
    assert K.ascontiguous(x) is x and K.ascontiguous(t).flags.c_contiguous
    assert K.astype(x, np.float32) is x and K.astype(x, np.float64).dtype == np.float64
    assert K.to_device(x, "cuda") is x
    assert K.empty((4097,), np.float32).shape == (4097,)


def test_memory_stats(K, cp):
    import torchlean.cuda as tc
    assert tc.is_available()
    tc.synchronize()
    tc.reset_peak_memory_stats()
    s0 = tc.memory_stats()
    for key in ("live_bytes", "peak_bytes", "allocations", "frees", "pool_reserved_bytes", "pool_used_bytes"):
        assert key in s0
    x = cp.ones(1 << 20, dtype=np.float32)  # 4 MiB
    s1 = tc.memory_stats()
    assert s1["live_bytes"] - s0["live_bytes"] == 4 << 20
    assert s1["allocations"] == s0["allocations"] + 1
    assert s1["peak_bytes"] >= s0["live_bytes"] + (4 << 20)
    assert s1["pool_reserved_bytes"] >= 4 << 20
    del x
    s2 = tc.memory_stats()
    assert s2["frees"] == s1["frees"] + 1 and s2["live_bytes"] == s0["live_bytes"]
    tc.reset_peak_memory_stats()
    assert tc.memory_stats()["peak_bytes"] == s2["live_bytes"]
    tc.empty_cache()
    assert isinstance(tc.device_name(), str)


# ---- softmax: accuracy against float64 -----------------------------------------------------


def test_softmax_against_float64(K, rng):
    x = rand(rng, (64, 3000), np.float32, -30, 30)
    got = K.to_host(K.softmax(dev(K, x)))
    ref = H.softmax(x.astype(np.float64))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-9)
    got = K.to_host(K.log_softmax(dev(K, x)))
    np.testing.assert_allclose(got, H.log_softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


# ---- random numbers: the same stream as the CPU ---------------------------------------------


@pytest.mark.parametrize("n", [31, 4097, 100003])
def test_randn_mostly_bit_identical(K, n):
    """Box-Muller through the GPU's log/cos agrees with the host within an ulp or two (the table's
    tolerance), and for almost every element exactly; the uniforms lie in [0, 1)."""
    for seed, counter in ((0, 0), (1234, 7), (2 ** 64 - 1, 2 ** 40)):
        z = K.to_host(K.randn((n,), seed, counter, np.float32))
        assert np.mean(z == H.randn((n,), seed, counter, np.float32)) > 0.99
    u = K.to_host(K.rand_uniform((3, 5, 7), 9, 1, np.float32))
    assert u.shape == (3, 5, 7) and u.min() >= 0 and u.max() < 1


# ---- optimizer steps: layouts the table does not take ----------------------------------------


def test_optimizer_noncontiguous_param(K, cp, rng):
    p = rand(rng, (8, 6), np.float32)
    g = rand(rng, (6, 8), np.float32).T
    dp = dev(K, p.T.copy()).T  # a non-contiguous view is updated in place through a copy
    m, v = cp.zeros((8, 6), np.float32), cp.zeros((8, 6), np.float32)
    K.adam_step(dp, dev(K, np.ascontiguousarray(g)), m, v, 1, 1e-2, 0.9, 0.999, 1e-8, 0.0, False)
    H.adam_step(p, np.ascontiguousarray(g), np.zeros_like(p), np.zeros_like(p), 1, 1e-2, 0.9, 0.999, 1e-8, 0.0,
                False)
    np.testing.assert_allclose(K.to_host(dp), p, rtol=1e-6)


# ---- native layer kernels under monkeypatched thresholds (the table's cases) ---------------


def _lineage(*classes):
    return [pytest.param(n, dt, id=f"{n}-{dt}") for c in classes for n in kc.lineage(c) for dt in kc.dtypes(n)]


@pytest.mark.parametrize("name,dtype", _lineage("conv", "conv_transpose"))
def test_conv_native_chunked(K, rng, monkeypatch, name, dtype):
    """A tiny column budget: one sample per chunk of the im2col GEMMs."""
    monkeypatch.setattr("torchlean.kernels.cuda.conv.COLS_BUDGET", 1)
    run_table(K, rng, name, dtype)


@pytest.mark.parametrize("path", ["dft", "fft"])
@pytest.mark.parametrize("name,dtype", _lineage("spectral_conv"))
def test_spectral_conv_native_paths(K, rng, monkeypatch, name, dtype, path):
    """Both paths of the native spectral convolution, pinned: the DFT GEMM and cuFFT."""
    monkeypatch.setattr("torchlean.kernels.cuda.spectral.FORCE_PATH", path)
    run_table(K, rng, name, dtype)


@pytest.mark.parametrize("split", [1, 2, 8])
@pytest.mark.parametrize("name", [n for n in kc.lineage("spectral_conv") if kc.classify(n) == "backward"])
def test_spectral_conv_split(K, rng, monkeypatch, name, split):
    """The grid axis of the DFT GEMM split into chunks (the weight gradients sum over them)."""
    monkeypatch.setattr("torchlean.kernels.cuda.spectral.SPLIT", split)
    run_table(K, rng, name, "float32")


def test_spectral_conv_deterministic(K, rng):
    x, g = rand(rng, (3, 512, 5), np.float32), rand(rng, (3, 512, 6), np.float32)
    w_re, w_im = rand(rng, (2, 9, 5, 6), np.float32, -1, 1)
    args = [dev(K, a) for a in (x, w_re, w_im, g)]
    a, b = (K.to_host(K.spectral_conv1d_rfft_bwd_wre(*args)) for _ in range(2))
    assert np.array_equal(a, b)


# ---- direct cuBLAS: the matrix products recorded in CUDA graphs ----------------------------


def _same_product(cp, got, want):
    """Equal to ``cupy.matmul``'s product up to summation order (relative norm of the difference)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    g, w = cp.asnumpy(got), cp.asnumpy(want)
    assert not np.isnan(g).any(), "unwritten (NaN) output elements"
    tol = 1e-5 if w.dtype == np.float32 else 1e-12
    assert np.linalg.norm(g - w) <= tol * np.linalg.norm(w) + 1e-30


GEMM_CASES = [
    ((31, 65), (65, 17)),             # odd sizes
    ((1, 1), (1, 1)),
    ((1, 65), (65, 1)),
    ((7,), (7, 5)), ((5, 7), (7,)), ((7,), (7,)),
    ((3, 31, 65), (3, 65, 17)),       # batched
    ((2, 1, 5, 7), (3, 7, 4)),        # broadcast batch axes
    ((4, 5, 7), (7, 3)), ((5, 7), (2, 7, 3)), ((2, 3, 5, 7), (7,)),
    ((0, 7), (7, 4)), ((3, 0), (0, 4)), ((2, 0, 3), (2, 3, 5)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", GEMM_CASES)
def test_gemm_direct_equals_cupy_matmul(K, cp, rng, sa, sb, dtype):
    from torchlean.kernels.cuda import gemm
    a, b = cp.asarray(rand(rng, sa, dtype)), cp.asarray(rand(rng, sb, dtype))
    want = cp.matmul(a, b)
    poison(want.nbytes)
    _same_product(cp, gemm.gemm(a, b), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_transposed_and_strided_operands(K, cp, rng, dtype):
    from torchlean.kernels.cuda import gemm
    a, b = cp.asarray(rand(rng, (65, 31), dtype)), cp.asarray(rand(rng, (17, 65), dtype))
    A, B = cp.asarray(rand(rng, (3, 7, 5), dtype)), cp.asarray(rand(rng, (3, 9, 7), dtype))
    big = cp.asarray(rand(rng, (80, 70), dtype))
    cases = [
        (a.T, b.T),                                    # both transposed views: cuBLAS's T flag
        (a.T, cp.ascontiguousarray(b.T)), (cp.ascontiguousarray(a.T), b.T),
        (big[:31, :65], big[3:68, 40:57]),             # row pitch larger than the row (ld > cols)
        (big[:65, 2:33].T, big[:65, :17]),             # a transposed view of a padded block
        (big[::2, :65], big[:65, ::-1][:, :17]),       # every other row; negative strides (copied)
        (cp.swapaxes(A, 1, 2), cp.swapaxes(B, 1, 2)),  # batched transposes
        (A[:, ::2], B[:, ::2].transpose(0, 2, 1)[:, :5, :]),
        (cp.broadcast_to(A[0], (4, 7, 5)), cp.ones((4, 5, 3), dtype)),  # a zero batch stride (copied)
        (B[:, :, :5].T, cp.ones((5, 3, 4), dtype)),    # a full 3-d transpose (copied)
    ]
    for x, y in cases:
        want = cp.matmul(x, y)
        poison(want.nbytes)
        _same_product(cp, gemm.gemm(x, y), want)


def test_gemm_is_strict_fp32_unless_tf32_is_set(K, cp, rng):
    import torchlean.cuda as tc
    from torchlean.kernels.cuda import gemm
    a, b = rand(rng, (512, 512), np.float32), rand(rng, (512, 512), np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)

    def err():
        got = cp.asnumpy(gemm.gemm(cp.asarray(a), cp.asarray(b)))
        return np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err() < 1e-5
    tc.set_tf32(True)
    try:
        assert err() > 1e-5  # TF32's 10-bit mantissa: near 1e-4 .. 1e-3
    finally:
        tc.set_tf32(False)
    assert err() < 1e-5


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_is_captured_by_a_cuda_graph(K, cp, rng, dtype):
    """Products inside a stream capture: recorded, and each replay reads the inputs' new values."""
    from torchlean.kernels.cuda import gemm
    assert not gemm.active()
    a = cp.asarray(rand(rng, (3, 33, 65), dtype))
    w = cp.asarray(rand(rng, (17, 65), dtype))
    pool, stream = cp.cuda.MemoryPool(), cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()

    def step():
        y = K.linear(a, w, None)                                  # a batch against w.T
        z = K.matmul(cp.swapaxes(y, 1, 2), y)                     # batched, a transposed operand
        dx, dw, _ = K.linear_bwd(a, w, y, True, True, False)
        return z, dx, dw

    with cp.cuda.using_allocator(pool.malloc), stream, gemm.capture_scope(stream) as ws:
        assert gemm.active() and ws is not None
        step()
        stream.synchronize()
        stream.begin_capture()
        outs = step()
        graph = stream.end_capture()
    assert not gemm.active()
    for _ in range(2):
        a[...] = cp.asarray(rand(rng, a.shape, dtype))
        w[...] = cp.asarray(rand(rng, w.shape, dtype))
        graph.launch()
        cp.cuda.Device().synchronize()
        y = cp.matmul(a, w.T)
        wants = (cp.matmul(cp.swapaxes(y, 1, 2), y), cp.matmul(y, w),
                 cp.matmul(y.reshape(-1, 17).T, a.reshape(-1, 65)))
        for got, want in zip(outs, wants):
            _same_product(cp, got, want)


# ---- host-overhead paths: vectorized sums, multi-tensor Adam ------------------------------------


@pytest.mark.parametrize("n", [1 << 16, (1 << 16) + 3, 1 << 22, 3_000_001])
def test_sum_vectorized_whole_array(K, cp, rng, n):
    x = rand(rng, n, np.float32)
    got = K.to_host(K.sum(dev(K, x)))
    ref = x.astype(np.float64).sum()
    assert abs(float(got) - ref) <= 1e-6 * np.abs(x.astype(np.float64)).sum()
    np.testing.assert_allclose(K.to_host(K.mean(dev(K, x))), x.astype(np.float64).mean(), rtol=1e-5, atol=1e-7)
    assert float(K.to_host(K.amax(dev(K, x), None))) == x.max()
    d = dev(K, x)
    off = d[1:]  # 4-byte offset: not 16-byte aligned, the scalar kernel runs
    assert abs(float(K.to_host(K.sum(off))) - x[1:].astype(np.float64).sum()) <= 1e-6 * np.abs(x).sum()
    x[n // 2] = np.nan
    assert np.isnan(K.to_host(K.amax(dev(K, x), None)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opts", [dict(), dict(weight_decay=0.1), dict(weight_decay=0.1, decoupled=True),
                                  dict(ams=True), dict(maximize=True, weight_decay=0.05)])
def test_adam_multi_matches_per_tensor(K, cp, rng, dtype, opts):
    """One launch over many tensors (more than a launch's table holds) gives adam_step's bits."""
    sizes = [1, 31, 0, 1000, 4097, 3] * 5
    wd, dec, ams, mx = opts.get("weight_decay", 0.0), opts.get("decoupled", False), opts.get("ams", False), \
        opts.get("maximize", False)
    steps = [3 if i % 7 else 1 for i in range(len(sizes))]  # two step counts: two runs
    host_state = []
    for s in sizes:
        host_state.append([rand(rng, s, dtype), rand(rng, s, dtype), rand(rng, s, dtype) * 0.1,
                           rand(rng, s, dtype, 0.0, 0.5), rand(rng, s, dtype, 0.0, 0.6)])
    ref = [[dev(K, a.copy()) for a in st] for st in host_state]
    got = [[dev(K, a.copy()) for a in st] for st in host_state]
    for (p, g, m, v, x), step in zip(ref, steps):
        K.adam_step(p, -g if mx else g, m, v, step, 1e-2, 0.9, 0.999, 1e-8, wd, dec, x if ams else None)
    # A transposed (non-contiguous) parameter takes the per-tensor kernel inside the multi call.
    pm = rand(rng, (6, 5), dtype)
    pg, pz = rand(rng, (5, 6), dtype), np.zeros((5, 6), dtype)
    p_ref, p_got = dev(K, pm.copy()).T, dev(K, pm.copy()).T
    m_ref, v_ref, m_got, v_got = (dev(K, pz.copy()) for _ in range(4))
    K.adam_step(p_ref, -dev(K, pg) if mx else dev(K, pg), m_ref, v_ref, 2, 1e-2, 0.9, 0.999, 1e-8, wd, dec,
                dev(K, pz.copy()) if ams else None)
    K.adam_step_multi([s[0] for s in got] + [p_got], [s[1] for s in got] + [dev(K, pg)],
                      [s[2] for s in got] + [m_got], [s[3] for s in got] + [v_got],
                      [s[4] if ams else None for s in got] + [dev(K, pz.copy()) if ams else None],
                      steps + [2], 1e-2, 0.9, 0.999, 1e-8, wd, dec, mx)
    for r, o in zip(ref, got):
        for k in (0, 2, 3, 4):
            np.testing.assert_array_equal(K.to_host(o[k]), K.to_host(r[k]))
    np.testing.assert_array_equal(K.to_host(p_got), K.to_host(p_ref))
    np.testing.assert_array_equal(K.to_host(v_got), K.to_host(v_ref))


def test_optimizer_adam_cuda_matches_cpu_trajectory(K):
    """torch-style Adam on CUDA parameters (multi-tensor path) follows the CPU trajectory."""
    import torchlean as tl
    from torchlean import optim
    rng = np.random.default_rng(5)
    for kw in (dict(), dict(amsgrad=True, weight_decay=0.1), dict(maximize=True)):
        for cls in (optim.Adam, optim.AdamW):
            inits = [rng.standard_normal(s).astype(np.float32) for s in ((7, 3), (3,), (1,), (40,))]
            grads = [[rng.standard_normal(a.shape).astype(np.float32) for a in inits] for _ in range(4)]
            traj = []
            for device in ("cpu", "cuda"):
                ps = [tl.nn.Parameter(tl.tensor(a).to(device)) for a in inits]
                opt = cls(ps, lr=1e-2, **kw)
                for gs in grads:
                    for p, g in zip(ps, gs):
                        p.grad = tl.tensor(g).to(device)
                    opt.step()
                traj.append([p.numpy() for p in ps] + [opt.state_dict()["state"][0]["step"]])
            for a, b in zip(traj[0][:-1], traj[1][:-1]):
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
            assert traj[0][-1] == traj[1][-1] == 4


# ---- native flash attention (src/attention.cu) ----------------------------------------------


def _fa_reference(q, k, v, mask, scale, hard, g):
    """Float64 host forward and backward of float32 inputs: the reference the kernels approach."""
    up = [None if a is None else a.astype(np.float64) for a in (q, k, v)]
    out, lse = H.flash_attention_fwd(*up, mask, scale, hard)
    grads = H.flash_attention_bwd(*up, mask, out, lse, g.astype(np.float64), scale, hard)
    return out, lse, grads


@pytest.mark.parametrize("B,n,m,d,e", [(1, 1, 1, 1, 1), (2, 5, 6, 8, 3), (3, 64, 64, 16, 16), (2, 65, 130, 32, 24),
                                       (2, 200, 77, 64, 64), (1, 129, 300, 100, 128), (2, 70, 40, 130, 20)])
@pytest.mark.parametrize("masking", ["none", "soft", "hard", "hard_empty_rows", "broadcast"])
@pytest.mark.parametrize("variant", ["device", "fma"])
def test_flash_attention_native(K, rng, monkeypatch, B, n, m, d, e, masking, variant):
    """Tensor-core (3xTF32) kernels where the device has them, and the float32 FMA kernels."""
    from torchlean.kernels.cuda import attention
    monkeypatch.setattr(attention, "FORCE_TENSOR_CORES", None if variant == "device" else False)
    q, k, v = rand(rng, (B, n, d), np.float32, -1, 1), rand(rng, (B, m, d), np.float32, -1, 1), \
        rand(rng, (B, m, e), np.float32, -1, 1)
    g = rand(rng, (B, n, e), np.float32, -1, 1)
    mask, hard = None, masking.startswith("hard")
    if masking in ("soft", "hard"):
        mask = rng.random((B, n, m)) < 0.6
    elif masking == "hard_empty_rows":
        mask = rng.random((B, n, m)) < 0.5
        mask[:, ::3] = False  # rows with no allowed key: out 0, lse +inf, no gradient
    elif masking == "broadcast":
        mask = np.broadcast_to(np.tril(np.ones((n, m), bool)), (B, n, m))  # causal, shared by the batch
    scale = 1.0 / math.sqrt(d)
    out_w, lse_w, (dq_w, dk_w, dv_w) = _fa_reference(q, k, v, mask, scale, hard, g)
    dmask = None if mask is None else K.from_host(np.ascontiguousarray(mask), bool)
    if masking == "broadcast":
        import cupy
        dmask = cupy.broadcast_to(K.from_host(np.tril(np.ones((n, m), bool)), bool), (B, n, m))
    poison(out_w.nbytes * 4)
    out, lse = K.flash_attention_fwd(dev(K, q), dev(K, k), dev(K, v), dmask, scale, hard)
    out, lse = host(K, out), host(K, lse)
    assert out.dtype == lse.dtype == np.float32
    np.testing.assert_allclose(out, out_w, rtol=1e-4, atol=2e-5)
    finite = np.isfinite(lse_w)
    assert np.array_equal(np.isfinite(lse), finite)
    np.testing.assert_allclose(lse[finite], lse_w[finite], rtol=1e-5, atol=1e-5)
    assert np.all(lse[~finite] == np.inf)
    grads = K.flash_attention_bwd(dev(K, q), dev(K, k), dev(K, v), dmask, dev(K, out), dev(K, lse), dev(K, g),
                                  scale, hard)
    for name, got, want in zip(("dq", "dk", "dv"), grads, (dq_w, dk_w, dv_w)):
        got = host(K, got)
        assert got.shape == want.shape and got.dtype == np.float32, name
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(want).max())),
                                   err_msg=name)
    dq_only = host(K, K.flash_attention_bwd_q(dev(K, q), dev(K, k), dev(K, v), dmask, dev(K, out), dev(K, lse),
                                              dev(K, g), scale, hard))
    np.testing.assert_array_equal(dq_only, host(K, grads[0]))


def test_flash_attention_native_deterministic(K, rng):
    q, k, v, g = (rand(rng, (4, 300, 64), np.float32, -1, 1) for _ in range(4))
    args = [dev(K, a) for a in (q, k, v)]
    out, lse = K.flash_attention_fwd(*args, None, 0.125, False)
    first = [host(K, t) for t in K.flash_attention_bwd(*args, None, out, lse, dev(K, g), 0.125, False)]
    again = [host(K, t) for t in K.flash_attention_bwd(*args, None, out, lse, dev(K, g), 0.125, False)]
    for a, b in zip(first, again):
        assert np.array_equal(a, b)


def test_flash_attention_two_streams_match_one(K, rng, monkeypatch):
    """The backward's dq and dk/dv kernels on two streams give exactly what one stream gives, also
    on a stream of the caller's whose inputs were written just before (the side stream waits for
    them, and the caller's stream for the side stream's results)."""
    import cupy
    from torchlean.kernels.cuda import attention
    q, k, v, g = (rand(rng, (3, 333, 64), np.float32, -1, 1) for _ in range(4))
    res = {}
    for concurrent in (False, True):
        monkeypatch.setattr(attention, "CONCURRENT_BWD", concurrent)
        with cupy.cuda.Stream(non_blocking=True) as s:
            args = [dev(K, a) * 1.0 for a in (q, k, v)]  # written on s just before the backward reads them
            out, lse = K.flash_attention_fwd(*args, None, 0.125, False)
            grads = K.flash_attention_bwd(*args, None, out, lse, dev(K, g) * 1.0, 0.125, False)
            doubled = [t * 2 for t in grads]               # read on s right after
            s.synchronize()
        res[concurrent] = [host(K, t) for t in list(grads) + doubled]
    for a, b in zip(res[False], res[True]):
        assert np.array_equal(a, b)
    _, _, (dq_w, dk_w, dv_w) = _fa_reference(q, k, v, None, 0.125, False, g)
    for got, want in zip(res[True][:3], (dq_w, dk_w, dv_w)):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_flash_attention_tensor_cores_match_fma(K, rng, monkeypatch):
    """The 3xTF32 products are float32-accurate: the two kernel families agree to float32 rounding,
    also for logits of about 100, where TF32 alone (10-bit mantissa) would move them by about 0.1."""
    from torchlean.kernels.cuda import attention
    q, k, v, g = (rand(rng, (2, 190, 64), np.float32, -4, 4) for _ in range(4))
    args = [dev(K, a) for a in (q, k, v)]
    res = {}
    for force in (None, False):
        monkeypatch.setattr(attention, "FORCE_TENSOR_CORES", force)
        out, lse = K.flash_attention_fwd(*args, None, 0.3, False)
        grads = K.flash_attention_bwd(*args, None, out, lse, dev(K, g), 0.3, False)
        res[force] = [host(K, t) for t in (out, lse) + tuple(grads)]
    for a, b in zip(res[None], res[False]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(np.abs(b[np.isfinite(b)]).max()))


@pytest.mark.parametrize("threads", [None, 1, 200, 1 << 30])
def test_planless_scatter_add_rows_is_bit_identical_to_the_sorted_kernel(K, cp, monkeypatch, threads):
    """Inside a capture scope scatter_add_rows runs without a host sort plan: each thread walks the
    indices for one column of a span of rows (span = every row with 1 thread per column, a few rows
    with 200 threads, one row with 2^30). Every span adds in index order from the initial value, so
    each equals the sorted kernel bit for bit; an out-of-bounds index adds nothing."""
    from torchlean.kernels.cuda import gemm as G
    from torchlean.kernels.cuda import index as I
    rng = np.random.default_rng(7)
    rows, cols, k = 97, 33, 1500
    mat = cp.asarray(rng.standard_normal((rows, cols)).astype(np.float32))
    vals = cp.asarray((rng.standard_normal((k, cols)) * 10 ** rng.uniform(-3, 3, (k, 1))).astype(np.float32))
    idx = rng.integers(0, rows, k)
    idx[:200] = 5                                    # a heavily repeated row: order matters in float32
    idx[300] = rows + 4                              # out of bounds (in uint32 range): ignored
    idx[-1] = rows - 1                               # the last row, the end of the last span
    want = K.scatter_add_rows(mat, vals, idx)
    if threads is not None:
        monkeypatch.setattr(I, "PLANLESS_THREADS", threads)
    with G.capture_scope(cp.cuda.get_current_stream()):
        got = K.scatter_add_rows(mat, vals, idx)
    assert cp.array_equal(got, want)


# ---- IEEE subnormals: the kernels are compiled with -ftz=false (CuPy's own kernels flush) ---------

def test_float32_subnormals_survive_arithmetic_casts_and_comparisons(K, cp):
    t = np.float32(2.0 ** -130)                       # a float32 subnormal
    x = K.from_host(np.array([t, -t, 3 * t], dtype=np.float32), np.float32)
    two = K.from_host(np.array([2.0], dtype=np.float32), np.float32)
    want = np.array([t, -t, 3 * t], dtype=np.float32)
    np.testing.assert_array_equal(K.to_host(K.mul(x, two)), want * 2)
    np.testing.assert_array_equal(K.to_host(K.scale(x, 0.5)), want * np.float32(0.5))
    np.testing.assert_array_equal(K.to_host(K.add_scalar(x, 0.0)), want)
    np.testing.assert_array_equal(K.to_host(K.neg(x)), -want)
    np.testing.assert_array_equal(K.to_host(K.abs(x)), np.abs(want))
    np.testing.assert_array_equal(K.to_host(K.compare(x, K.zeros((3,), np.float32), "gt")), want > 0)
    wide = K.astype(x, np.float64)
    np.testing.assert_array_equal(K.to_host(wide), want.astype(np.float64))
    np.testing.assert_array_equal(K.to_host(K.astype(wide, np.float32)), want)
    np.testing.assert_array_equal(K.to_host(K.astype(x, np.bool_)), want != 0)
    mixed = K.add(x, K.from_host(np.zeros((2, 3)), np.float64))    # broadcast and promoted
    np.testing.assert_array_equal(K.to_host(mixed), np.broadcast_to(want.astype(np.float64), (2, 3)))
    inv = K.astype(K.inv(K.from_host(np.array(2.0 ** 127), np.float64)), np.float32)
    assert float(K.to_host(inv)) == 2.0 ** -127      # GradScaler's 1 / scale at scale 2**127
    np.testing.assert_array_equal(K.to_host(K.cumsum(x, 0)), np.cumsum(want.astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize("shape,b_shape", [((4, 5, 6), (1, 5, 6)), ((4, 5, 6), (5, 6)), ((2, 3), (1, 3))])
def test_binary_row_block_layout_matches_numpy(K, rng, shape, b_shape):
    a, b = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
    for op, f in (("sub", np.subtract), ("div", np.divide), ("maximum", np.maximum)):
        got = getattr(K, op)(K.from_host(a, np.float32), K.from_host(b, np.float32))
        np.testing.assert_array_equal(K.to_host(got), f(a, b))
