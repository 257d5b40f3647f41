"""The shape surface against PyTorch: values, dtypes, shapes and gradients on the same inputs,
including 0-d tensors, empty axes, negative dims, integer and bool dtypes and non-contiguous
inputs (``x.t()``, strided slices)."""

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings
from hypothesis import strategies as st

import torchlean as tl
from torchlean.errors import DomainError, IndexRangeError, ShapeError, TorchLeanError
from torchlean.shape import Size

RNG = np.random.default_rng(0)


def _arr(shape, dtype="float32"):
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    if dtype.startswith("int"):
        return RNG.integers(-9, 9, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _dtype_name(t):
    return str(t.dtype).removeprefix("torch.")


def check(f, *specs, grad=True, pre=None, device="cpu"):
    """Run ``f(lib, *tensors)`` on torchlean (on ``device``) and torch over the same inputs (shape
    or (shape, dtype) per input) and compare outputs and, for float inputs, gradients."""
    arrays = [_arr(s) if not (isinstance(s, tuple) and len(s) == 2 and isinstance(s[1], str)) else _arr(*s)
              for s in specs]
    xs = [tl.tensor(a, device=device, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    xin, tin = xs, ts
    if pre is not None:
        xin, tin = [pre(x) for x in xs], [pre(t) for t in ts]
    outs, touts = _flat(f(tl, *xin)), _flat(f(torch, *tin))
    assert len(outs) == len(touts)
    for o, t in zip(outs, touts):
        assert isinstance(o, tl.Tensor)
        assert tuple(o.shape) == tuple(t.shape), (o.shape, t.shape)
        assert o.dtype.name == _dtype_name(t), (o.dtype, t.dtype)
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-6)
    if not grad or not any(a.dtype.kind == "f" for a in arrays):
        return outs
    cots = [RNG.standard_normal(tuple(t.shape)).astype(np.float32) for t in touts]
    pairs = [(o, t, c) for o, t, c in zip(outs, touts, cots) if t.requires_grad]
    if not pairs:
        return outs
    loss = sum((o * tl.tensor(c, device=o.device)).sum() for o, _, c in pairs)
    tloss = sum((t * torch.tensor(c)).sum() for _, t, c in pairs)
    loss.backward()
    tloss.backward()
    for x, tt in zip(xs, ts):
        if tt.grad is None or (tt.grad.numel() == 0 and x.grad is None):
            assert x.grad is None or not np.any(x.grad.numpy())
            continue
        np.testing.assert_allclose(x.grad.numpy(), tt.grad.numpy(), rtol=1e-5, atol=1e-5)
    return outs


T = lambda x: x.t()  # a non-contiguous view in torch
STRIDED = lambda x: x[:, ::2]

CASES = {
    # views
    "reshape": (lambda L, x: x.reshape(4, -1), (2, 3, 4)),
    "reshape_tuple": (lambda L, x: x.reshape((6, 4)), (2, 3, 4)),
    "reshape_fn": (lambda L, x: L.reshape(x, (-1,)), (2, 3, 4)),
    "reshape_kw": (lambda L, x: x.reshape(shape=(3, 8)), (2, 3, 4)),
    "reshape_0d": (lambda L, x: x.reshape(1, 1), ()),
    "reshape_0d_back": (lambda L, x: x.reshape(()), (1, 1)),
    "reshape_empty": (lambda L, x: x.reshape(3, 0, 5), (0, 3)),
    "reshape_size": (lambda L, x: x.reshape(x.shape[::-1]), (2, 3)),
    "reshape_noncontig": (lambda L, x: x.t().reshape(-1), (2, 3)),
    "view": (lambda L, x: x.view(2, -1), (6,)),
    "view_kw": (lambda L, x: x.view(size=(3, 2)), (6,)),
    "view_as": (lambda L, x, y: x.view_as(y), (6,), (2, 3)),
    "reshape_as": (lambda L, x, y: x.reshape_as(y), (2, 3), (3, 2)),
    "flatten": (lambda L, x: x.flatten(), (2, 3, 4)),
    "flatten_range": (lambda L, x: L.flatten(x, 1, 2), (2, 3, 4, 5)),
    "flatten_neg": (lambda L, x: x.flatten(0, -2), (2, 3, 4)),
    "flatten_0d": (lambda L, x: x.flatten(), ()),
    "ravel": (lambda L, x: x.t().ravel(), (2, 3)),
    "unflatten": (lambda L, x: x.unflatten(1, (3, -1)), (2, 12)),
    "unflatten_fn": (lambda L, x: L.unflatten(x, -1, (2, 2)), (3, 4)),
    "squeeze_all": (lambda L, x: x.squeeze(), (1, 3, 1, 2)),
    "squeeze_dim": (lambda L, x: x.squeeze(-2), (1, 3, 1, 2)),
    "squeeze_noop": (lambda L, x: L.squeeze(x, 1), (1, 3, 1, 2)),
    "squeeze_tuple": (lambda L, x: x.squeeze((0, 1, 2)), (1, 3, 1, 2)),
    "squeeze_0d": (lambda L, x: x.squeeze(0), ()),
    "unsqueeze": (lambda L, x: x.unsqueeze(-1), (2, 3)),
    "unsqueeze_mid": (lambda L, x: L.unsqueeze(x, 1), (2, 3)),
    "unsqueeze_0d": (lambda L, x: x.unsqueeze(0), ()),
    # broadcasting
    "expand": (lambda L, x: x.expand(2, -1, 4), (3, 1)),
    "expand_tuple": (lambda L, x: x.expand((2, 3)), (1, 3)),
    "expand_0d": (lambda L, x: x.expand(2, 2), ()),
    "expand_same": (lambda L, x: x.expand(-1, -1), (2, 3)),
    "expand_as": (lambda L, x, y: x.expand_as(y), (3, 1), (2, 3, 4)),
    "broadcast_to": (lambda L, x: L.broadcast_to(x, (2, 3, 4)), (3, 1)),
    "broadcast_to_keep": (lambda L, x: x.broadcast_to((2, -1, 4)), (3, 1)),
    "broadcast_tensors": (lambda L, x, y, z: L.broadcast_tensors(x, y, z), (3, 1), (4,), ()),
    # repeats
    "repeat": (lambda L, x: x.repeat(2, 1, 3), (2, 3)),
    "repeat_tuple": (lambda L, x: x.repeat((2, 2)), (3,)),
    "repeat_ones": (lambda L, x: x.repeat(1, 1), (2, 3)),
    "repeat_zero": (lambda L, x: x.repeat(0, 2), (2, 3)),
    "repeat_0d": (lambda L, x: x.repeat(2, 3), ()),
    "repeat_noncontig": (lambda L, x: x.repeat(2, 2), (2, 3), {"pre": T}),
    "tile": (lambda L, x: L.tile(x, (2,)), (3, 2)),
    "tile_more": (lambda L, x: x.tile((2, 1, 2)), (3, 2)),
    "repeat_interleave": (lambda L, x: x.repeat_interleave(2), (2, 3)),
    "repeat_interleave_dim": (lambda L, x: L.repeat_interleave(x, 3, dim=1), (2, 3)),
    "repeat_interleave_neg": (lambda L, x: x.repeat_interleave(2, dim=-2, output_size=4), (2, 3)),
    "repeat_interleave_tensor": (lambda L, x: x.repeat_interleave(L.tensor([1, 0, 3]), dim=1), (2, 3)),
    "repeat_interleave_one": (lambda L, x: x.repeat_interleave(L.tensor([2]), dim=0), (2, 3)),
    "repeat_interleave_0d": (lambda L, x: x.repeat_interleave(3), ()),
    "repeat_interleave_counts": (lambda L, x: L.repeat_interleave(L.tensor([2, 0, 1])), (1,)),
    # axis moves
    "permute": (lambda L, x: x.permute(2, 0, 1), (2, 3, 4)),
    "permute_tuple": (lambda L, x: x.permute((-1, 0, 1)), (2, 3, 4)),
    "permute_fn": (lambda L, x: L.permute(x, (1, 0, 2)), (2, 3, 4)),
    "permute_kw": (lambda L, x: x.permute(dims=[1, 0]), (2, 3)),
    "permute_0d": (lambda L, x: x.permute(()), ()),
    "transpose": (lambda L, x: x.transpose(0, 2), (2, 3, 4)),
    "transpose_neg": (lambda L, x: L.transpose(x, -1, -2), (2, 3, 4)),
    "transpose_0d": (lambda L, x: x.transpose(0, -1), ()),
    "swapaxes": (lambda L, x: L.swapaxes(x, 0, 1), (2, 3, 4)),
    "swapdims": (lambda L, x: x.swapdims(2, 0), (2, 3, 4)),
    "t": (lambda L, x: x.t(), (2, 3)),
    "t_fn_1d": (lambda L, x: L.t(x), (3,)),
    "t_0d": (lambda L, x: x.t(), ()),
    "T_2d": (lambda L, x: x.T, (2, 3)),
    "T_1d": (lambda L, x: x.T, (3,)),
    "mT": (lambda L, x: x.mT, (2, 3, 4)),
    "mH": (lambda L, x: x.mH, (3, 4)),
    "H": (lambda L, x: x.H, (3, 4)),
    "adjoint": (lambda L, x: L.adjoint(x), (2, 3, 4)),
    "adjoint_m": (lambda L, x: x.adjoint(), (3, 4)),
    "movedim": (lambda L, x: L.movedim(x, (0, 1), (2, 0)), (2, 3, 4)),
    "movedim_int": (lambda L, x: x.movedim(0, -1), (2, 3, 4)),
    "moveaxis": (lambda L, x: L.moveaxis(x, -1, 1), (2, 3, 4)),
    "movedim_same": (lambda L, x: x.movedim(1, 1), (2, 3)),
    "contiguous": (lambda L, x: x.t().contiguous(), (2, 3)),
    # flips, rolls, rotations
    "flip": (lambda L, x: L.flip(x, (0, 2)), (2, 3, 4)),
    "flip_varargs": (lambda L, x: x.flip(0, 1), (2, 3)),
    "flip_list": (lambda L, x: x.flip([-1]), (2, 3)),
    "flip_0d": (lambda L, x: L.flip(x, (0,)), ()),
    "flip_empty": (lambda L, x: L.flip(x, (0, 1)), (0, 3)),
    "flip_noncontig": (lambda L, x: x.flip(1), (3, 5), {"pre": STRIDED}),
    "fliplr": (lambda L, x: L.fliplr(x), (2, 3, 2)),
    "flipud": (lambda L, x: x.flipud(), (3,)),
    "roll_flat": (lambda L, x: L.roll(x, 1), (2, 3)),
    "roll_dims": (lambda L, x: x.roll((1, -1), (0, 1)), (2, 3)),
    "roll_big": (lambda L, x: L.roll(x, -7, dims=1), (2, 3)),
    "roll_zero": (lambda L, x: x.roll(3, 0), (3, 2)),
    "roll_same_dim": (lambda L, x: x.roll((1, 2), (1, 1)), (2, 5)),
    "roll_empty": (lambda L, x: x.roll(2, 0), (0, 2)),
    "roll_noncontig": (lambda L, x: x.roll(1, 0), (2, 3), {"pre": T}),
    "rot90": (lambda L, x: L.rot90(x), (2, 3)),
    "rot90_2": (lambda L, x: x.rot90(2), (2, 3)),
    "rot90_3": (lambda L, x: L.rot90(x, 3, (1, 2)), (2, 3, 4)),
    "rot90_neg": (lambda L, x: L.rot90(x, -1, [0, 1]), (2, 3)),
    "rot90_0": (lambda L, x: x.rot90(4, (-1, 0)), (2, 3)),
    # slicing and splitting
    "narrow": (lambda L, x: x.narrow(0, 1, 2), (4, 3)),
    "narrow_neg": (lambda L, x: L.narrow(x, -1, -2, 2), (4, 3)),
    "narrow_tensor": (lambda L, x: x.narrow(0, L.tensor(1), 0), (4, 3)),
    "narrow_noncontig": (lambda L, x: x.narrow(1, 1, 2), (3, 4), {"pre": T}),
    "unfold": (lambda L, x: x.unfold(0, 2, 2), (5, 4)),
    "unfold_mid": (lambda L, x: x.unfold(1, 2, 1), (2, 5, 3)),
    "unfold_last": (lambda L, x: x.unfold(-1, 3, 2), (2, 7)),
    "unfold_full": (lambda L, x: x.unfold(0, 5, 1), (5,)),
    "unfold_zero": (lambda L, x: x.unfold(0, 0, 1), (5,)),
    "unfold_0d": (lambda L, x: x.unfold(0, 1, 1), ()),
    "chunk": (lambda L, x: x.chunk(4), (10, 2)),
    "chunk_dim": (lambda L, x: L.chunk(x, 6, dim=-1), (2, 10)),
    "chunk_empty": (lambda L, x: x.chunk(3), (0, 2)),
    "split": (lambda L, x: x.split(3), (10, 2)),
    "split_list": (lambda L, x: L.split(x, [1, 0, 3], dim=1), (2, 4)),
    "split_empty": (lambda L, x: x.split(2), (0,)),
    "tensor_split": (lambda L, x: x.tensor_split(3), (10,)),
    "tensor_split_idx": (lambda L, x: L.tensor_split(x, [1, 5, 20]), (10,)),
    "tensor_split_neg": (lambda L, x: x.tensor_split([-3, 8], dim=1), (2, 10)),
    "tensor_split_t0": (lambda L, x: x.tensor_split(L.tensor(4)), (10,)),
    "tensor_split_t1": (lambda L, x: x.tensor_split(L.tensor([2, 1])), (10,)),
    "unbind": (lambda L, x: x.unbind(), (3, 2)),
    "unbind_neg": (lambda L, x: L.unbind(x, -1), (3, 2)),
    # joining
    "stack": (lambda L, x, y: L.stack([x, y]), (2, 3), (2, 3)),
    "stack_neg": (lambda L, x, y: L.stack((x, y), dim=-1), (2, 3), (2, 3)),
    "stack_0d": (lambda L, x, y: L.stack([x, y]), (), ()),
    "stack_promote": (lambda L, x, y: L.stack([x, y], 1), ((2,), "int64"), (2,)),
    "cat": (lambda L, x, y: L.cat([x, y]), (2, 3), (4, 3)),
    "cat_dim": (lambda L, x, y: L.cat((x, y), dim=-1), (2, 3), (2, 1)),
    "cat_axis": (lambda L, x, y: L.cat((x, y), axis=1), (2, 3), (2, 1)),
    "cat_legacy_empty": (lambda L, x, y, z: L.cat([x, y, z], 1), (2, 3), (0,), (2, 2)),
    "cat_all_empty": (lambda L, x, y: L.cat([x, y]), (0,), (0,)),
    "cat_promote": (lambda L, x, y: L.cat([x, y]), ((2,), "int64"), (3,)),
    "cat_promote_empty": (lambda L, x, y: L.cat([x, y]), ((2,), "float32"), ((0,), "float64")),
    "concat": (lambda L, x, y: L.concat([x, y], 1), (2, 3), (2, 3)),
    "concatenate": (lambda L, x, y: L.concatenate([x, y], axis=0), (2, 3), (1, 3)),
    "cat_noncontig": (lambda L, x, y: L.cat([x, y], 0), (2, 3), (2, 3), {"pre": T}),
    "hstack_1d": (lambda L, x, y: L.hstack([x, y]), (2,), (3,)),
    "hstack_2d": (lambda L, x, y: L.hstack([x, y]), (2, 1), (2, 3)),
    "hstack_0d": (lambda L, x, y: L.hstack([x, y]), (), ()),
    "vstack": (lambda L, x, y: L.vstack([x, y]), (3,), (2, 3)),
    "row_stack": (lambda L, x, y: L.row_stack((x, y)), (3,), (3,)),
    "dstack": (lambda L, x, y: L.dstack([x, y]), (2, 3), (2, 3, 2)),
    "dstack_1d": (lambda L, x, y: L.dstack([x, y]), (3,), (3,)),
    "column_stack": (lambda L, x, y, z: L.column_stack([x, y, z]), (3,), (3, 2), (3,)),
    "column_stack_0d": (lambda L, x, y: L.column_stack([x, y]), (), (1, 2)),
    "atleast_1d": (lambda L, x: L.atleast_1d(x), ()),
    "atleast_2d": (lambda L, x, y: L.atleast_2d(x, y), (), (3,)),
    "atleast_2d_list": (lambda L, x, y: L.atleast_2d([x, y]), (2, 3), (3,)),
    "atleast_3d": (lambda L, x, y, z: L.atleast_3d(x, y, z), (), (3,), (2, 3)),
    "atleast_3d_big": (lambda L, x: L.atleast_3d(x), (2, 3, 4, 1)),
    # triangles and diagonals
    "tril": (lambda L, x: x.tril(), (3, 4)),
    "tril_k": (lambda L, x: L.tril(x, -1), (2, 3, 4)),
    "tril_kw": (lambda L, x: L.tril(x, diagonal=2), (4, 3)),
    "triu": (lambda L, x: L.triu(x), (3, 4)),
    "triu_k": (lambda L, x: x.triu(1), (2, 4, 3)),
    "triu_neg": (lambda L, x: x.triu(diagonal=-5), (3, 3)),
    "tril_empty": (lambda L, x: x.tril(), (0, 3)),
    "tril_noncontig": (lambda L, x: x.tril(), (3, 4), {"pre": T}),
    "diag_vec": (lambda L, x: L.diag(x), (3,)),
    "diag_vec_k": (lambda L, x: x.diag(1), (3,)),
    "diag_vec_neg": (lambda L, x: L.diag(x, -2), (3,)),
    "diag_vec_empty": (lambda L, x: L.diag(x, 2), (0,)),
    "diag_mat": (lambda L, x: x.diag(), (3, 4)),
    "diag_mat_k": (lambda L, x: L.diag(x, 1), (3, 4)),
    "diag_mat_neg": (lambda L, x: L.diag(x, -2), (3, 4)),
    "diag_mat_far": (lambda L, x: L.diag(x, 5), (3, 4)),
    "diagonal": (lambda L, x: L.diagonal(x), (3, 4)),
    "diagonal_3d": (lambda L, x: x.diagonal(1, 0, 2), (2, 3, 4)),
    "diagonal_neg": (lambda L, x: x.diagonal(offset=-1, dim1=-1, dim2=-2), (2, 3, 4)),
    "diagonal_swapped": (lambda L, x: x.diagonal(-1, 1, 0), (3, 3)),
    "diagonal_noncontig": (lambda L, x: x.diagonal(), (3, 4), {"pre": T}),
    "diagflat": (lambda L, x: L.diagflat(x), (2, 2)),
    "diagflat_k": (lambda L, x: x.diagflat(-1), (3,)),
    # copies
    "clone": (lambda L, x: x.clone(), (2, 3)),
    "clone_fn": (lambda L, x: L.clone(x, memory_format=L.contiguous_format) if L is torch else L.clone(x), (2, 3)),
    "clone_0d": (lambda L, x: x.clone(), ()),
}


def _case(name):
    f, *specs = CASES[name]
    kw = specs.pop() if specs and isinstance(specs[-1], dict) else {}
    return f, specs, kw


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch(name):
    f, specs, kw = _case(name)
    check(f, *specs, **kw)


REFERENCE_CASES = ["flip", "roll_dims", "rot90_3", "repeat", "repeat_interleave_tensor", "tril_k", "diag_vec_k",
                   "diagonal_3d", "unfold_mid", "tensor_split_neg", "cat_legacy_empty", "column_stack", "movedim",
                   "expand_0d", "clone"]


@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_reference_mode(name):
    f, specs, kw = _case(name)
    with tl.options(fast_kernels=False):
        check(f, *specs, **kw)


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch_on_cuda(name):
    f, specs, kw = _case(name)
    check(f, *specs, device="cuda", **kw)


@pytest.mark.cuda
def test_cuda_metadata():
    x = tl.zeros(2, 3, device="cuda")
    assert x.data_ptr() == x._value.data.ptr and x.view(6).data_ptr() == x.data_ptr()
    assert x.stride() == (3, 1) and x.is_contiguous()
    np.testing.assert_array_equal(tl.arange(6, device="cuda").reshape(2, 3).flip(1).tril().numpy(),
                                  np.tril(np.arange(6).reshape(2, 3)[:, ::-1]))


INT_CASES = ["flip", "roll_dims", "rot90", "repeat", "tile", "repeat_interleave_tensor", "tril_k", "triu",
             "diag_vec_k", "diagonal_3d", "unfold_mid", "chunk", "cat", "stack", "permute", "expand",
             "narrow", "movedim", "clone", "hstack_2d", "broadcast_tensors"]


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name", INT_CASES)
def test_integer_and_bool_dtypes(name, dtype):
    f, specs, kw = _case(name)
    check(f, *[(s, dtype) for s in specs], **kw)


def test_tril_keeps_infinities_and_nans():
    a = np.array([[np.inf, -np.inf], [np.nan, 1.0]], dtype=np.float32)
    np.testing.assert_array_equal(tl.tensor(a).tril().numpy(), torch.tensor(a).tril().numpy())
    np.testing.assert_array_equal(tl.tensor(a).triu().numpy(), torch.tensor(a).triu().numpy())
    np.testing.assert_array_equal(tl.diag(tl.tensor(a[0])).numpy(), torch.diag(torch.tensor(a[0])).numpy())


def test_view_dtype_reinterprets_bytes():
    a = _arr((2, 6))
    for dt, tdt in ((tl.int32, torch.int32), (tl.int16, torch.int16), (tl.float64, torch.float64)):
        got, want = tl.tensor(a).view(dt), torch.tensor(a).view(tdt)
        assert tuple(got.shape) == tuple(want.shape) and got.dtype.name == _dtype_name(want)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert tl.tensor(a).view(dtype=tl.int32).numpy().tobytes() == a.tobytes()
    with pytest.raises(ShapeError, match="view"):
        tl.tensor(a[:, :5]).view(tl.float64)


def test_views_share_the_buffer():
    x = tl.tensor(_arr((2, 3)))
    for y in (x.view(6), x.reshape(3, 2), x.flatten(), x.unsqueeze(0), x.view(1, 2, 3).squeeze(0), x.ravel()):
        assert y.data_ptr() == x.data_ptr()
    assert x.clone().data_ptr() != x.data_ptr()
    assert x.detach().data_ptr() == x.data_ptr()
    assert x.contiguous() is x


def test_detach_leaves_the_graph():
    x = tl.tensor(_arr((3,)), requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf
    (x * 2 + tl.detach(x * 3)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))


def test_size_class():
    s = Size([2, 3])
    t = torch.Size([2, 3])
    assert tl.Size is Size and type(tl.zeros(2, 3).shape) is Size and type(tl.zeros(2, 3).size()) is Size
    assert repr(s) == "torchlean.Size([2, 3])" == str(s)
    assert s == (2, 3) == t and isinstance(s, tuple) and hash(s) == hash((2, 3))
    assert s.numel() == t.numel() == 6 and Size([]).numel() == 1
    for r in (s[1:], s + (4,)):
        assert type(r) is Size
    assert s[1:] + (4,) == (3, 4) and s[-1] == 3 and type(s[0]) is int
    assert pickle.loads(pickle.dumps(s)) == s and type(pickle.loads(pickle.dumps(s))) is Size
    assert Size(np.array([4, 5])) == (4, 5)


def test_size_and_metadata():
    for shape, dtype in (((2, 3, 4), "float32"), ((2, 0, 3), "float64"), ((), "int64"), ((5, 1), "bool"),
                         ((3,), "int32")):
        a = _arr(shape, dtype)
        x, t = tl.tensor(a), torch.tensor(a)
        assert x.size() == t.size() and x.shape == t.shape
        for d in range(-len(shape), len(shape)):
            assert x.size(d) == t.size(d)
            assert x.stride(d) == torch.zeros(shape).stride(d)
        assert x.stride() == torch.zeros(shape).stride() and type(x.stride()) is tuple
        assert x.numel() == tl.numel(x) == t.numel() and x.nelement() == t.nelement()
        assert x.dim() == x.ndimension() == t.dim()
        assert x.element_size() == t.element_size() and x.itemsize == t.itemsize and x.nbytes == t.nbytes
        assert x.is_contiguous() and x.is_contiguous(memory_format=None) and x.storage_offset() == 0
        assert x.data_ptr() == x._value.ctypes.data
    with pytest.raises(ShapeError, match="stride"):
        tl.zeros(2, 3).stride(2)


def test_broadcast_shapes():
    for shapes in (((2, 1), (3,)), (2, (3, 1)), ((), (4,)), ((0, 1), (1, 5)), ((5,),)):
        got = tl.broadcast_shapes(*shapes)
        assert got == torch.broadcast_shapes(*shapes) and type(got) is Size
    with pytest.raises(ShapeError, match="broadcast_shapes"):
        tl.broadcast_shapes((2,), (3,))


def test_t_and_T_are_warning_free(recwarn):
    x = tl.tensor(_arr((2, 3, 4)))
    assert tuple(x.T.shape) == (4, 3, 2)
    np.testing.assert_array_equal(x.T.numpy(), np.transpose(x.numpy()))
    assert tuple(tl.tensor(1.0).T.shape) == () and tuple(tl.tensor(1.0).H.shape) == ()
    assert len(recwarn) == 0


def test_repeat_interleave_output_size_and_counts_dtype():
    r = tl.repeat_interleave(tl.tensor([2, 0, 1]))
    assert r.dtype == tl.int64 and r.tolist() == [0, 0, 2]
    with pytest.raises(ShapeError, match="output_size"):
        tl.zeros(2, 3).repeat_interleave(2, dim=1, output_size=5)


# ---- errors: both libraries refuse, ours with a TorchLeanError naming the op ---------------

ERRORS = [
    ("reshape", lambda L, x: x.reshape(4, -1), (2, 3), ShapeError),
    ("reshape", lambda L, x: x.reshape(-1, -1), (2, 3), ShapeError),
    ("reshape", lambda L, x: x.reshape(-1, 0), (0, 3), ShapeError),
    ("view", lambda L, x: x.view(5), (2, 3), ShapeError),
    ("unflatten", lambda L, x: x.unflatten(1, (2, 2)), (2, 3), ShapeError),
    ("squeeze", lambda L, x: x.squeeze(5), (2, 3), ShapeError),
    ("expand", lambda L, x: x.expand(-1, 3, 4), (3, 1), ShapeError),
    ("expand", lambda L, x: x.expand(3), (2, 3), ShapeError),
    ("broadcast_to", lambda L, x: L.broadcast_to(x, (3, 3)), (2, 3), ShapeError),
    ("repeat", lambda L, x: x.repeat(2), (2, 3), ShapeError),
    ("repeat_interleave", lambda L, x: x.repeat_interleave(-1), (2, 3), DomainError),
    ("repeat_interleave", lambda L, x: x.repeat_interleave(L.tensor([1, 2]), dim=1), (2, 3), ShapeError),
    ("permute", lambda L, x: x.permute(0, 0, 1), (2, 3, 4), ShapeError),
    ("transpose", lambda L, x: x.transpose(0, 3), (2, 3), ShapeError),
    ("t", lambda L, x: x.t(), (2, 3, 4), ShapeError),
    ("mT", lambda L, x: x.mT, (3,), ShapeError),
    ("H", lambda L, x: x.H, (2, 3, 4), ShapeError),
    ("adjoint", lambda L, x: L.adjoint(x), (3,), ShapeError),
    ("movedim", lambda L, x: L.movedim(x, (0, 1), (1,)), (2, 3), ShapeError),
    ("movedim", lambda L, x: L.movedim(x, (0, 0), (1, 0)), (2, 3), ShapeError),
    ("flip", lambda L, x: L.flip(x, (0, 0)), (2, 3), ShapeError),
    ("flip", lambda L, x: L.flip(x, (2,)), (2, 3), ShapeError),
    ("fliplr", lambda L, x: L.fliplr(x), (3,), ShapeError),
    ("flipud", lambda L, x: L.flipud(x), (), ShapeError),
    ("roll", lambda L, x: L.roll(x, (1, 2), (0,)), (2, 3), ShapeError),
    ("rot90", lambda L, x: L.rot90(x, 1, (0, 0)), (2, 3), ShapeError),
    ("rot90", lambda L, x: L.rot90(x), (3,), ShapeError),
    ("narrow", lambda L, x: x.narrow(0, 3, 3), (5,), ShapeError),
    ("narrow", lambda L, x: x.narrow(0, -6, 1), (5,), IndexRangeError),
    ("unfold", lambda L, x: x.unfold(0, 6, 1), (5,), ShapeError),
    ("unfold", lambda L, x: x.unfold(0, 2, 0), (5,), DomainError),
    ("chunk", lambda L, x: x.chunk(0), (5,), DomainError),
    ("split", lambda L, x: x.split(0), (5,), DomainError),
    ("split", lambda L, x: x.split([3, 6]), (10,), ShapeError),
    ("tensor_split", lambda L, x: x.tensor_split(0), (5,), DomainError),
    ("unbind", lambda L, x: x.unbind(), (), ShapeError),
    ("stack", lambda L, x, y: L.stack([x, y]), (2, 3), (3, 2), ShapeError),
    ("stack", lambda L: L.stack([]), None, ShapeError),
    ("cat", lambda L, x, y: L.cat([x, y]), (2, 3), (2, 4), ShapeError),
    ("concat", lambda L, x, y: L.cat([x, y]), (), (), ShapeError),
    ("cat", lambda L: L.cat([]), None, ShapeError),
    ("tril", lambda L, x: x.tril(), (3,), ShapeError),
    ("triu", lambda L, x: L.triu(x), (), ShapeError),
    ("diag", lambda L, x: L.diag(x), (2, 2, 1), ShapeError),
    ("diag", lambda L, x: L.diag(x), (), ShapeError),
    ("diagonal", lambda L, x: x.diagonal(0, 1, 1), (2, 3), ShapeError),
    ("diagonal", lambda L, x: x.diagonal(), (3,), ShapeError),
]


@pytest.mark.parametrize("op, f, specs, err", [(e[0], e[1], [s for s in e[2:-1] if s is not None], e[-1])
                                                for e in ERRORS], ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_errors(op, f, specs, err):
    arrays = [_arr(s) for s in specs]
    with pytest.raises((RuntimeError, IndexError, ValueError, TypeError)):
        f(torch, *[torch.tensor(a) for a in arrays])
    with pytest.raises(err) as info:
        f(tl, *[tl.tensor(a) for a in arrays])
    assert isinstance(info.value, TorchLeanError) and op in str(info.value), str(info.value)


# ---- random shapes --------------------------------------------------------------------------

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, data=st.data())
def test_random_axis_ops(shape, data):
    n = len(shape)
    if n:
        perm = tuple(data.draw(st.permutations(range(n))))
        dims = tuple({d % n: d for d in data.draw(st.lists(st.integers(-n, n - 1), max_size=n))}.values())
        shifts = tuple(data.draw(st.lists(st.integers(-6, 6), min_size=len(dims), max_size=len(dims))))
        check(lambda L, x: x.permute(perm), shape)
        check(lambda L, x: L.flip(x, dims), shape)
        if dims:
            check(lambda L, x: L.roll(x, shifts, dims), shape)
        d = data.draw(st.integers(-n, n - 1))
        check(lambda L, x: L.movedim(x, d, -1), shape)
        k = data.draw(st.integers(1, 3))
        check(lambda L, x: x.chunk(k, d), shape)
    reps = tuple(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n + 2)))
    check(lambda L, x: x.repeat(reps), shape)
    check(lambda L, x: L.roll(x, 3), shape)
    check(lambda L, x: L.reshape(x, (-1,)), shape)


@settings(max_examples=25, deadline=None)
@given(r=st.integers(0, 4), c=st.integers(0, 4), b=st.integers(0, 2), k=st.integers(-5, 5))
def test_random_triangles_and_diagonals(r, c, b, k):
    shape = (b, r, c) if b else (r, c)
    check(lambda L, x: L.tril(x, k), shape)
    check(lambda L, x: L.triu(x, k), shape)
    check(lambda L, x: x.diagonal(k, -2, -1), shape)
    check(lambda L, x: x.diagonal(k, -1, 0), shape)
    if not b:
        check(lambda L, x: L.diag(x, k), shape)
        check(lambda L, x: L.diag(x, k), (r,))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("sizes", [(3,), (3, 2), (3, 2, 4)])
def test_meshgrid_matches_torch(indexing, sizes):
    rng = np.random.default_rng(len(sizes))
    data = [rng.standard_normal(n).tolist() for n in sizes]
    xs = [tl.tensor(d, requires_grad=True) for d in data]
    ts = [torch.tensor(d, requires_grad=True) for d in data]
    got, want = tl.meshgrid(*xs, indexing=indexing), torch.meshgrid(*ts, indexing=indexing)
    w = [rng.standard_normal(tuple(g.shape)) for g in want]
    for g, q, wk in zip(got, want, w):
        np.testing.assert_array_equal(g.detach().numpy(), q.detach().numpy())
    sum((g * tl.tensor(wk)).sum() for g, wk in zip(got, w)).backward()
    sum((q * torch.tensor(wk)).sum() for q, wk in zip(want, w)).backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
