"""The error taxonomy on the cases a user meets first: each failure is a TorchLeanError that is also
the Python class torch raises there, names the op, and comes before any allocation; and the silent
wrong answers of the bad-input survey now match torch (values checked against torch itself)."""

from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
import torchlean.nn as nn
import torchlean.nn.functional as F
from torchlean.errors import (
    DimRangeError,
    DomainError,
    DTypeError,
    IndexRangeError,
    ResourceError,
    ShapeError,
    TorchLeanError,
)
from torchlean.ops.table import _guarded

torch = pytest.importorskip("torch")


def _raises(cls, fn, *words):
    with pytest.raises(cls) as info:
        fn()
    assert isinstance(info.value, TorchLeanError), type(info.value)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    return info.value


# ---- allocation limits ---------------------------------------------------------------------------

def test_huge_creation_raises_resource_error_naming_op_shape_and_bytes():
    e = _raises(MemoryError, lambda: tl.zeros(10 ** 12), "zeros", "(1000000000000,)", "4000000000000 bytes")
    assert isinstance(e, ResourceError)
    _raises(ResourceError, lambda: tl.randn(10 ** 6, 10 ** 6), "randn", "(1000000, 1000000)")
    _raises(ResourceError, lambda: tl.arange(0, 10 ** 13), "arange")
    _raises(ResourceError, lambda: tl.eye(10 ** 7), "eye")
    _raises(ResourceError, lambda: tl.full((10 ** 12,), 1.5, dtype=tl.float64), "full", "8000000000000 bytes")
    _raises(ResourceError, lambda: tl.ones(3).new_zeros(10 ** 12), "new_zeros")


def test_huge_module_raises_resource_error_naming_the_module():
    _raises(ResourceError, lambda: nn.Linear(10 ** 7, 10 ** 7), "Linear", "(10000000, 10000000)",
            "400000000000000 bytes")
    _raises(ResourceError, lambda: nn.Embedding(10 ** 9, 10 ** 4), "Embedding")
    _raises(ResourceError, lambda: nn.Conv2d(10 ** 5, 10 ** 5, 100), "Conv2d")
    _raises(ResourceError, lambda: nn.LSTM(10 ** 7, 10 ** 7), "LSTM")


def test_max_alloc_bytes_option_limits_and_restores():
    assert tl.get_options().max_alloc_bytes is None
    with tl.options(max_alloc_bytes=4096):
        assert tl.zeros(1024).shape == (1024,)                     # exactly 4096 bytes: allowed
        _raises(ResourceError, lambda: tl.zeros(1025), "zeros", "4100 bytes", "max_alloc_bytes=4096")
        _raises(ResourceError, lambda: tl.rand(33, 32), "rand")
        _raises(ResourceError, lambda: nn.Linear(100, 100), "Linear", "40000 bytes")
        assert nn.Linear(10, 10).weight.shape == (10, 10)
    assert tl.zeros(2000).shape == (2000,)
    for bad in (0, -5, 1.5, "1k", True):
        with pytest.raises(TorchLeanError, match="max_alloc_bytes"):
            tl.set_options(max_alloc_bytes=bad)


# ---- sizes and arguments ------------------------------------------------------------------------------

def test_negative_zero_step_and_low_high_raise_value_errors():
    _raises(ValueError, lambda: tl.randn(2, -3), "randn", "-3")
    _raises(ValueError, lambda: tl.arange(0, 5, 0), "arange", "step")
    _raises(ValueError, lambda: tl.randint(5, 2, (3,)), "randint", "low=5", "high=2")
    _raises(ValueError, lambda: nn.Linear(-1, 3), "Linear", "-1")
    _raises(ValueError, lambda: nn.Embedding(3, -2), "Embedding", "-2")


def test_wrong_types_raise_type_errors_naming_the_argument():
    _raises(TypeError, lambda: tl.zeros("a"), "zeros", "size")
    _raises(TypeError, lambda: tl.scalar_tensor(None), "scalar_tensor")
    _raises(TypeError, lambda: tl.ones(2).new_full((2,), None), "new_full", "fill_value")
    e = _raises(TypeError, lambda: nn.Linear(2.5, 3), "Linear", "in_features", "2.5")
    assert isinstance(e, DTypeError)
    _raises(TypeError, lambda: nn.BatchNorm1d(None), "BatchNorm1d", "num_features")


def test_none_where_a_tensor_is_expected_raises_type_error():
    with pytest.raises(TypeError):
        tl.ones(3) + None          # torch raises TypeError, never NaN
    with pytest.raises(TypeError):
        tl.ones(3) * None
    _raises(TypeError, lambda: tl.exp(None), "exp", "NoneType")
    _raises(TypeError, lambda: tl.nonzero(None), "nonzero")
    _raises(TypeError, lambda: tl.argwhere(None), "argwhere")
    _raises(TypeError, lambda: tl.where(None), "where")


def test_out_of_range_dims_are_index_errors_and_value_errors():
    for fn, op in [(lambda: tl.ones(3).sum(dim=5), "sum"), (lambda: tl.ones(2, 3).transpose(0, 4), "transpose"),
                   (lambda: tl.all(tl.ones(2), dim=5), "all"), (lambda: tl.ones(3).cumsum(dim=3), "cumsum"),
                   (lambda: tl.cat([tl.ones(3)], dim=2), "cat"), (lambda: tl.ones(2).flip(5), "flip")]:
        e = _raises(IndexError, fn, op)
        assert isinstance(e, DimRangeError) and isinstance(e, ShapeError) and isinstance(e, ValueError)
        with pytest.raises(IndexError):   # what torch raises there
            {"sum": lambda: torch.ones(3).sum(dim=5), "transpose": lambda: torch.ones(2, 3).transpose(0, 4),
             "all": lambda: torch.all(torch.ones(2), dim=5), "cumsum": lambda: torch.ones(3).cumsum(dim=3),
             "cat": lambda: torch.cat([torch.ones(3)], dim=2), "flip": lambda: torch.ones(2).flip(5)}[op]()


def test_errors_of_inner_ops_name_the_op_called():
    e = _raises(IndexError, lambda: tl.any(tl.ones(2), dim=3), "any")
    assert str(e).startswith("any:")


def test_numpy_and_python_internal_errors_become_torchlean_errors():
    def axis():
        np.sum(np.ones(2), axis=4)

    def ufunc():
        np.add(np.ones(2, np.int64), np.ones(2), out=np.ones(2, np.int64))

    def zero():
        return 1 // 0

    def memory():
        raise MemoryError("no room")

    for fn, cls, py in [(axis, DimRangeError, IndexError), (ufunc, DTypeError, TypeError),
                        (zero, DomainError, ValueError), (memory, ResourceError, MemoryError)]:
        with pytest.raises(cls, match="^demo: ") as info:
            _guarded("demo", fn)()
        assert isinstance(info.value, py)
    with pytest.raises(KeyError):               # a bug stays a bug: not disguised as a user error
        _guarded("demo", lambda: {}["x"])()


# ---- out-of-range indices ------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: nn.Embedding(3, 2)(tl.tensor([0, 3])),
    lambda: F.embedding(tl.tensor([0, 3]), tl.ones(3, 2)),
    lambda: tl.ones(3)[tl.tensor([0, 5])],
    lambda: tl.ones(3, 3).gather(1, tl.tensor([[0, 5, 1]])),
    lambda: tl.zeros(3, 3).scatter(1, tl.tensor([[0, 5, 1]]), tl.ones(1, 3)),
    lambda: tl.ones(3, 3).index_select(0, tl.tensor([0, 5])),
    lambda: tl.ones(3, 3).take(tl.tensor([0, 9])),
    lambda: F.cross_entropy(tl.ones(2, 3), tl.tensor([0, 3])),
    lambda: F.nll_loss(tl.ones(2, 3), tl.tensor([0, 3])),
], ids=["Embedding", "embedding", "getitem", "gather", "scatter", "index_select", "take", "cross_entropy",
        "nll_loss"])
def test_out_of_range_indices_raise_index_errors(call):
    with pytest.raises(IndexError) as info:
        call()
    assert isinstance(info.value, IndexRangeError)
    assert any(str(v) in str(info.value) for v in (3, 5, 9))


def test_ignore_index_targets_are_not_out_of_range():
    a = F.cross_entropy(tl.zeros(2, 3), tl.tensor([1, -100])).item()
    b = torch.nn.functional.cross_entropy(torch.zeros(2, 3), torch.tensor([1, -100])).item()
    assert a == pytest.approx(b) == pytest.approx(np.log(3))


# ---- silent wrong answers, now torch's -----------------------------------------------------------------

@pytest.mark.parametrize("grad", [[float("nan"), 1.0, 2.0], [float("inf"), 1.0, 2.0], [3.0, 4.0, 0.0]])
def test_clip_grad_norm_matches_torch_with_non_finite_norms(grad):
    p, q = nn.Parameter(tl.zeros(3)), torch.nn.Parameter(torch.zeros(3))
    p.grad, q.grad = tl.tensor(grad), torch.tensor(grad)
    n1 = nn.utils.clip_grad_norm_([p], 1.0)
    n2 = torch.nn.utils.clip_grad_norm_([q], 1.0)
    np.testing.assert_allclose(n1.numpy(), n2.numpy(), rtol=1e-6)
    np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6)   # NaN where torch has NaN
    if not np.isfinite(n2.item()):
        assert np.isnan(p.grad.numpy()).any()
    with pytest.raises(RuntimeError) if not np.isfinite(n2.item()) else _no_error():
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


class _no_error:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_backward_casts_the_gradient_to_the_output_dtype():
    for dt_p, dt_g in [("float32", "float64"), ("float64", "float32")]:
        p = nn.Parameter(tl.ones(3, dtype=getattr(tl, dt_p)))
        q = torch.nn.Parameter(torch.ones(3, dtype=getattr(torch, dt_p)))
        (p * 2).backward(tl.tensor([1.0, 2.0, 3.0], dtype=getattr(tl, dt_g)))
        (q * 2).backward(torch.tensor([1.0, 2.0, 3.0], dtype=getattr(torch, dt_g)))
        assert p.grad.dtype.name == str(q.grad.dtype).removeprefix("torch.") == dt_p
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    p = nn.Parameter(tl.ones(3))
    (p * 2).sum().backward(tl.tensor(1.0, dtype=tl.float64))
    assert p.grad.dtype == tl.float32 and p.grad.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("offset", [0, 1, -2])
def test_diag_embed_keeps_nan_and_inf_on_the_diagonal(offset):
    data = np.array([[np.nan, np.inf, -np.inf], [0.0, -0.0, 1.5]], np.float32)
    x, y = tl.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    a, b = tl.diag_embed(x, offset), torch.diag_embed(y, offset)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    w = np.arange(a.numel(), dtype=np.float32).reshape(a.shape)
    (a * tl.tensor(w)).sum().backward()
    (b * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.grad.numpy())
    assert tl.diag_embed(tl.ones(2, 3), 1, 0, 2).shape == torch.diag_embed(torch.ones(2, 3), 1, 0, 2).shape


def test_rsqrt_matches_torch_at_negative_zero_and_infinities():
    data = np.array([-0.0, 0.0, -np.inf, np.inf, 4.0, -1.0], np.float32)
    x, y = tl.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    np.testing.assert_array_equal(tl.rsqrt(x).detach().numpy(), torch.rsqrt(y).detach().numpy())
    g = tl.tensor([4.0, 0.25, 9.0], requires_grad=True)
    h = torch.tensor([4.0, 0.25, 9.0], requires_grad=True)
    tl.rsqrt(g).sum().backward()
    torch.rsqrt(h).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), h.grad.numpy(), rtol=1e-6)


def test_one_hot_names_the_offending_class_value():
    import torchlean.nn.functional as F
    with pytest.raises(tl.errors.IndexRangeError, match="class value 3 is not smaller than num_classes=3"):
        F.one_hot(tl.tensor([0, 3]), 3)
    with pytest.raises(tl.errors.IndexRangeError, match="non-negative, got -2"):
        F.one_hot(tl.tensor([1, -2]), 3)
    assert F.one_hot(tl.tensor([2, 0]), -1).tolist() == [[0, 0, 1], [1, 0, 0]]
