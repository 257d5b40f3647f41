"""Gaps the port programs (tests/ports/) found in torchlean, each checked against PyTorch."""

import numpy as np
import pytest

import torchlean as tl

torch = pytest.importorskip("torch")


# ---- Tensor.fill_diagonal_ ------------------------------------------------------------------

@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), False), ((7, 3), True), ((3, 5), False),
                                        ((3, 5), True), ((2, 2, 2), False), ((4, 4, 4, 4), False)])
def test_fill_diagonal_matches_torch(shape, wrap):
    base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    ours = tl.tensor(base.copy())
    ref = torch.tensor(base.copy())
    assert ours.fill_diagonal_(-1.5, wrap=wrap) is ours
    ref.fill_diagonal_(-1.5, wrap=wrap)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_fill_diagonal_inf_for_nearest_neighbour():
    d = tl.cdist(tl.tensor([[0.0], [1.0], [3.0]]), tl.tensor([[0.0], [1.0], [3.0]]))
    d.fill_diagonal_(float("inf"))
    assert d.argmin(dim=1).tolist() == [1, 0, 1]


def test_fill_diagonal_rejects_unequal_dims():
    with pytest.raises(ValueError):
        tl.zeros(2, 3, 4).fill_diagonal_(1.0)
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3, 4).fill_diagonal_(1.0)


# ---- torch.autograd.gradcheck / gradgradcheck -----------------------------------------------

def _bad_square(lib):
    class BadSquare(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a          # should be 2 * a * g
    return BadSquare


@pytest.mark.parametrize("lib", [tl, torch], ids=["torchlean", "torch"])
def test_gradcheck_accepts_true_gradients_and_rejects_wrong_ones(lib):
    x = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
    w = lib.tensor([[1.0, 2.0, 3.0], [0.1, 0.2, 0.3]], dtype=lib.float64, requires_grad=True)
    assert lib.autograd.gradcheck(lambda a, b: (b @ a.sin(), a * 2), (x, w)) is True
    assert lib.autograd.gradcheck(lambda a: a.exp().sum(), x) is True
    bad = _bad_square(lib)
    assert lib.autograd.gradcheck(bad.apply, (x,), raise_exception=False) is False
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        lib.autograd.gradcheck(bad.apply, (x,))
    assert lib.autograd.gradgradcheck(lambda a: (a ** 3).sum(), (x,)) is True
    assert lib.autograd.gradgradcheck(lambda a: a.sin() * a, (x,)) is True


def test_gradcheck_error_class_and_no_input_requiring_grad():
    assert issubclass(tl.autograd.GradcheckError, RuntimeError)
    with pytest.raises(ValueError):
        tl.autograd.gradcheck(lambda a: a * 2, (tl.tensor([1.0], dtype=tl.float64),))
    with pytest.raises(ValueError):
        torch.autograd.gradcheck(lambda a: a * 2, (torch.tensor([1.0], dtype=torch.float64),))


def test_gradcheck_ignores_non_tensor_arguments_and_integer_outputs():
    x = tl.tensor([0.3, 0.7], dtype=tl.float64, requires_grad=True)
    assert tl.autograd.gradcheck(lambda a, k: (a * k, a.argmax()), (x, 3.0))
