"""The kernel case table (torchlean.testing.kernel_cases) on the CPU.

tests/test_cuda_kernels.py runs the table on a GPU; CI has none, so here: every kernel of the
contract has cases or a documented exclusion, every case runs on the host surface and gives the
shapes and dtypes the contract documents, the runner catches a wrong kernel, and the table is
inferred from the contract (a new kernel of a known signature class gets cases with no edit).
"""

import copy
from types import SimpleNamespace

import numpy as np
import pytest

from torchlean.kernels import get_kernels
from torchlean.kernels.api import CONTRACT, KERNELS
from torchlean.testing import kernel_cases as kc

H = get_kernels("cpu")
TESTED = [n for n in KERNELS if n not in kc.EXCLUDED]


# ---- (a) coverage ---------------------------------------------------------------------------


def test_every_kernel_has_cases_or_a_documented_exclusion():
    assert kc.missing() == []
    for name, reason in kc.EXCLUDED.items():
        assert name in KERNELS, f"exclusion of {name!r}, which the contract no longer has"
        assert len(reason) > 40, f"{name}: the exclusion needs its reason"
    stale = [n for n in kc.DECLARED if n not in KERNELS]
    assert not stale, f"DECLARED names kernels the contract no longer has: {stale}"
    for name in TESTED:
        assert kc.classify(name) in kc.GENERATORS, name
        assert kc.dtypes(name), name


def test_graph_capture_is_excluded_because_the_cpu_has_none():
    assert "graph_capture" in kc.EXCLUDED and "DeviceError" in kc.EXCLUDED["graph_capture"]
    assert kc.cases("graph_capture", np.random.default_rng(0)) == [] and kc.dtypes("graph_capture") == ()


# ---- (b) every case on the host -------------------------------------------------------------


@pytest.mark.parametrize("name", TESTED)
def test_cases_run_on_the_host_as_documented(name, rng):
    for dtype in kc.dtypes(name):
        cases = kc.cases(name, rng, dtype)
        assert cases, f"{name}: no cases in {dtype}"
        for case in cases:
            assert case.dtype == dtype and case.tol is not None and case.desc, (name, case.desc)
            problems = kc.documented_problems(name, case)
            assert not problems, f"{name} [{dtype}] case {case.desc!r}: {problems}"


@pytest.mark.parametrize("name", TESTED)
def test_runner_passes_the_host_against_itself(name, rng):
    """The GPU test's runner end to end (placement, views, steps, in-place selection, tolerances),
    with the host surface in the place of the device."""
    for dtype in kc.dtypes(name):
        cases = kc.cases(name, rng, dtype)
        for case in cases[:4] + cases[-2:]:
            kc.run_case(name, case, H)


def test_awkward_sizes_and_both_float_dtypes(rng):
    for cls in ("ew_unary", "ew_bwd", "ew_where", "optim_step"):
        names = [n for n in TESTED if kc.classify(n) == cls]
        assert names, cls
        for name in names:
            assert set(kc.dtypes(name)) >= set(kc.FLOATS), name
            sizes = {np.size(c.args[0]) for c in kc.cases(name, rng, "float32")}
            assert sizes >= set(kc.SIZES), (name, sorted(sizes))


def test_domains_stay_valid(rng):
    for name in ("log", "sqrt", "inv", "pow_scalar"):
        for case in kc.cases(name, rng, "float64"):
            assert (case.args[0] >= 0).all(), (name, case.desc)
    for case in kc.cases("sigmoid_bwd", rng, "float64"):  # y = sigmoid(x)
        assert ((case.args[0] >= 0) & (case.args[0] <= 1)).all()


def test_in_place_kernels_compare_their_updated_arrays(rng):
    """A kernel documented ``-> None`` (optimizer steps, fill, assign) is compared by its arrays."""
    in_place = [n for n in TESTED if kc.documented_outputs(kc.signature(KERNELS[n])) == []]
    assert {"sgd_step", "adam_step", "adam_step_multi", "fill", "assign"} <= set(in_place)
    for name in in_place:
        for case in kc.cases(name, rng, "float32"):
            assert case.inplace and case.outputs == (), (name, case.desc)
            assert 0 in case.inplace, (name, case.desc)


def test_tolerances_follow_the_hand_written_tests():
    assert kc.tolerance("relu", "float32") == kc.Tol(1e-5, 1e-6)
    assert kc.tolerance("relu", "float64") == kc.Tol(1e-12, 1e-13)
    assert kc.tolerance("add", "float32") == kc.EXACT
    assert kc.tolerance("gelu_bwd", "float32", {"approximate": "tanh"}) == kc.Tol(1e-5, 1e-5)
    assert kc.tolerance("gelu_bwd", "float32", {"approximate": "none"}) == kc.Tol(1e-5, 1e-6)
    assert kc.tolerance("layer_norm_bwd", "float32").rtol == 1e-3
    assert kc.tolerance("matmul", "float32").mode == "norm"
    assert kc.tolerance("sum", "float64").mode == "sumabs"
    assert kc.tolerance("transpose2d", "int32") == kc.EXACT


# ---- the runner catches wrong kernels -------------------------------------------------------


def _surface(**kernels):
    return SimpleNamespace(**{**vars(H), **kernels})


def test_runner_names_the_kernel_and_the_case(rng):
    case = kc.cases("relu", rng, "float32")[3]
    with pytest.raises(AssertionError, match=r"relu \[float32\] case 'x\(1000,\)', output 0"):
        kc.run_case("relu", case, _surface(relu=lambda x: x))
    with pytest.raises(AssertionError, match="dtype"):
        kc.run_case("relu", case, _surface(relu=lambda x: H.relu(x).astype(np.float64)))


def test_runner_sees_unwritten_elements_and_exceptions(rng):
    case = kc.cases("exp", rng, "float64")[3]

    def half_written(x):
        y = H.exp(x)
        y[::2] = np.nan
        return y
    with pytest.raises(AssertionError, match="exp"):
        kc.run_case("exp", case, _surface(exp=half_written))

    def broken(x):
        raise RuntimeError("launch failed")
    with pytest.raises(AssertionError, match="RuntimeError: launch failed"):
        kc.run_case("exp", case, _surface(exp=broken))


def test_runner_compares_in_place_state(rng):
    case = kc.cases("adam_step", rng, "float32")[3]

    def stale_v(p, g, m, v, step, *rest):
        H.adam_step(p, g, m, v, step, *rest)
        if step == 5:  # the last step leaves a wrong second moment (p and m are right)
            v[...] = 0
    with pytest.raises(AssertionError, match=r"adam_step \[float32\] case .*, argument 3 \(in place\)"):
        kc.run_case("adam_step", case, _surface(adam_step=stale_v))


def test_runner_poisons_before_every_call(rng):
    case = kc.cases("sgd_step", rng, "float64")[2]
    calls = []
    kc.run_case("sgd_step", case, H, before=lambda *nbytes: calls.append(nbytes))
    assert len(calls) == 5  # five optimizer steps
    case = kc.cases("softmax", rng, "float32")[2]
    calls.clear()
    kc.run_case("softmax", case, H, before=lambda *nbytes: calls.append(nbytes))
    assert calls == [(case.args[0].nbytes,)]


def test_index_arguments_stay_on_the_host(rng):
    seen = []

    def gather_vec(v, indices):
        seen.append(type(indices))
        return H.gather_vec(v, indices)
    for case in kc.cases("gather_vec", rng, "float32"):
        kc.run_case("gather_vec", case, _surface(gather_vec=gather_vec))
    assert list in seen and np.ndarray in seen
    assert kc.host_positions("scatter_add") == (2,) and kc.host_positions("from_host") == (0,)
    assert kc.host_positions("bool_mask") == ()  # host or device: the cases say which


# ---- (c) inferred from the contract, not a hand list ----------------------------------------


def _with(**new):
    """A copy of the contract with kernels added: family -> {name: signature}."""
    contract = copy.deepcopy(CONTRACT)
    for family, kernels in new.items():
        contract[family].update(kernels)
    return contract


def test_a_new_elementwise_kernel_needs_no_edit(rng):
    contract = _with(elementwise={"fake_unary": "(x) -> something new", "fake_unary_bwd": "(x, g)",
                                  "fake_binary": "(a, b) -> a @@ b", "fake_param": "(x, mode) mode in {'a', 'b'}"})
    assert kc.classify("fake_unary", contract) == "ew_unary"
    assert kc.classify("fake_unary_bwd", contract) == "ew_bwd"
    assert kc.classify("fake_binary", contract) == "ew_binary"
    assert kc.classify("fake_param", contract) == "ew_unary"
    assert kc.missing(contract) == []
    cases = kc.cases("fake_unary", rng, contract=contract)
    assert {c.dtype for c in cases} == set(kc.FLOATS)
    assert {np.size(c.args[0]) for c in cases} >= set(kc.SIZES)
    assert all(len(c.args) == 1 for c in cases)
    assert {c.params["mode"] for c in kc.cases("fake_param", rng, "float32", contract)} == {"a", "b"}
    # and the runner takes it: a surface that has the kernel, against a reference that has it too
    K = _surface(fake_unary=np.tanh)
    for case in cases:
        kc.run_case("fake_unary", case, K, ref=K, contract=contract)


def test_new_kernels_of_other_known_classes_need_no_edit():
    contract = _with(rng={"fake_rand": "(shape, seed, counter, dtype) -> numbers"},
                     optim={"fake_step": "(p, g, m, lr, eps) -> None"},
                     shape={"fake_flip": "(x[rows, cols]) -> [cols, rows]"},
                     conv={"fake_pool_forward": "(x[..., *S], kernel, stride, padding) -> y",
                           "fake_pool_backward": "(g, x_shape, kernel, stride, padding) -> dx"})
    assert kc.classify("fake_rand", contract) == "rng"
    assert kc.classify("fake_step", contract) == "optim_step"
    assert kc.classify("fake_flip", contract) == "matrix"
    assert kc.classify("fake_pool_forward", contract) == "pool"
    assert kc.classify("fake_pool_backward", contract) == "backward"
    assert kc.missing(contract) == []
    step = kc.cases("fake_step", np.random.default_rng(0), "float32", contract)
    assert step and all(c.inplace == (0, 2) for c in step)


def test_an_unknown_signature_is_reported_missing():
    contract = _with(elementwise={"fake_odd": "(x, frobnication)"}, shape={"fake_mystery": "(x, plan)"})
    assert sorted(kc.missing(contract)) == ["fake_mystery", "fake_odd"]
    with pytest.raises(KeyError, match="fake_odd"):
        kc.cases("fake_odd", np.random.default_rng(0), contract=contract)


def test_signature_strings_parse():
    sig = kc.signature(KERNELS["bool_mask"])
    assert sig.names == ["mask", "shape"] and "device array" in sig.arg("mask").note
    sig = kc.signature(KERNELS["flash_attention_fwd"])
    assert sig.arg("mask").dims == ("b", "n", "m") and sig.arg("mask").optional
    assert kc.documented_outputs(sig) == [("out", ("b", "n", "e")), ("lse", ("b", "n"))]
    assert kc.signature(KERNELS["compare"]).choices["op"] == ("lt", "le", "gt", "ge", "eq", "ne")
    assert kc.documented_outputs(kc.signature(KERNELS["sgd_step"])) == []
    assert kc.documented_outputs(kc.signature(KERNELS["mse_loss"])) is None
    assert kc.forward_of("flash_attention_bwd_q") == "flash_attention_fwd"
    assert kc.forward_of("conv_transpose_backward") == "conv_transpose_forward"
    assert kc.forward_of("max_bwd") is None


def test_documented_shapes_are_checked():
    """A kernel that returns what its documentation does not say is caught."""
    contract = _with(reduce={"reduce_sum_axis0": "(x[rows, cols]) -> [rows]: documented wrongly"})
    case = kc.Case((np.ones((3, 5), np.float32),), dtype="float32")
    assert kc.documented_problems("reduce_sum_axis0", case) == []
    problems = kc.documented_problems("reduce_sum_axis0", case, contract)
    assert problems and "documented 3" in problems[0]
