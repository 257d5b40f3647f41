"""torch as the oracle for the tensor core: dtypes and promotion, conversions, printing, Python
protocols, in-place writes with version checks, and the autograd API (grad, hooks, retain_grad,
custom Functions, grad modes)."""

import weakref

import numpy as np
import pytest

import torchlean as tl
from torchlean.autograd.node import Released
from torchlean.errors import AutogradError, DTypeError, IndexRangeError, ShapeError, TorchLeanError

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
ALIASES = ["long", "int", "short", "float", "double", "half"]


def both(data, dtype=None, requires_grad=False):
    a = np.asarray(data).tolist()
    t = torch.tensor(a, dtype=getattr(torch, dtype) if dtype else None, requires_grad=requires_grad)
    x = tl.tensor(a, dtype=dtype, requires_grad=requires_grad)
    return x, t


# ---- dtypes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DTYPES + ALIASES)
def test_dtype_names_match_torch(name):
    d, td = getattr(tl, name), getattr(torch, name)
    assert d.name == str(td).removeprefix("torch.")
    assert d.is_floating_point == td.is_floating_point
    assert d.itemsize == td.itemsize
    assert repr(d) == repr(td).replace("torch.", "torchlean.")


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_promote_types_matches_torch(a, b):
    assert tl.promote_types(getattr(tl, a), getattr(tl, b)).name == \
        str(torch.promote_types(getattr(torch, a), getattr(torch, b))).removeprefix("torch.")


OPERANDS = [("t", "int64"), ("t", "int32"), ("t", "float32"), ("t", "float64"), ("t", "bool"), ("t", "uint8"),
            ("z", "int64"), ("z", "float64"), ("z", "float32"), ("z", "bool"), ("s", 2), ("s", 2.5), ("s", True)]


def _operand(kind, v, lib):
    if kind == "s":
        return v
    shape = (3,) if kind == "t" else ()
    return lib.ones(shape, dtype=getattr(lib, v))


@pytest.mark.parametrize("a", OPERANDS[:10])
@pytest.mark.parametrize("b", OPERANDS)
def test_result_type_matches_torch(a, b):
    got = tl.result_type(_operand(*a, tl), _operand(*b, tl))
    want = torch.result_type(_operand(*a, torch), _operand(*b, torch))
    assert got.name == str(want).removeprefix("torch.")


@pytest.mark.parametrize("a", OPERANDS[:10])
@pytest.mark.parametrize("b", [o for o in OPERANDS if o[1] != True])  # noqa: E712 - bool arithmetic differs
def test_binary_ops_promote_like_torch(a, b):
    for op in ("__add__", "__mul__", "__truediv__"):
        x, y = _operand(*a, tl), _operand(*b, tl)
        tx, ty = _operand(*a, torch), _operand(*b, torch)
        if "bool" in (a[1], str(b[1])) and op != "__truediv__":
            continue
        want = getattr(tx, op)(ty)
        got = getattr(x, op)(y)
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), op
        np.testing.assert_allclose(got.tolist(), want.tolist(), rtol=1e-6)


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_finfo_matches_torch(name):
    f, tf = tl.finfo(getattr(tl, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "resolution"):
        assert getattr(f, attr) == pytest.approx(getattr(tf, attr)), attr


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name):
    i, ti = tl.iinfo(getattr(tl, name)), torch.iinfo(getattr(torch, name))
    assert (i.bits, i.min, i.max) == (ti.bits, ti.min, ti.max)


def test_finfo_refuses_integers_and_iinfo_floats():
    with pytest.raises(DTypeError, match="finfo"):
        tl.finfo(tl.int32)
    with pytest.raises(DTypeError, match="iinfo"):
        tl.iinfo(tl.float32)


def test_ops_refuse_integer_inputs_instead_of_truncating():
    x = tl.tensor([1, 2, 3])
    with pytest.raises(DTypeError, match="softmax"):
        x.softmax(0)
    assert x.float().softmax(0).dtype == tl.float32


# ---- conversions -------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["float", "double", "long", "int", "bool", "half", "short", "byte", "char"])
def test_conversion_methods_match_torch(method):
    x, t = both([[-1.5, 0.0], [2.25, 3.0]], "float32")
    got, want = getattr(x, method)(), getattr(t, method)()
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(got.numpy().astype(np.float64), want.numpy().astype(np.float64))


def test_to_type_and_type_as_follow_torch():
    x, t = both([1, 2, 3])
    assert x.type() == t.type() == "torch.LongTensor"
    assert x.type(tl.float64).dtype == tl.float64
    assert x.type("torch.FloatTensor").dtype == tl.float32
    y = tl.ones(2, dtype=tl.float64)
    assert x.type_as(y).dtype == tl.float64
    assert x.to(y).dtype == tl.float64
    assert x.to("cpu", tl.float32).dtype == tl.float32
    assert x.to(dtype=tl.int32).dtype == tl.int32
    assert x.is_floating_point() is False and y.is_floating_point() is True
    assert x.element_size() == t.element_size() == 8


def test_cast_is_differentiable():
    x, t = both([1.5, -2.0], "float32", requires_grad=True)
    (x.double() * 3).sum().backward()
    (t.double() * 3).sum().backward()
    assert x.grad.dtype == tl.float32
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


# ---- printing and Python protocols ----------------------------------------------------------------

@pytest.mark.parametrize("data,dtype", [
    ([1.0, 2.0], None), ([[1.0, 2.5], [3.0, -4.0]], None), ([1e-6, 1e3], None), ([1, 2, 3], None),
    ([True, False], None), (3.0, None), ([1.0, 2.0], "float64"), ([1, 2], "int32"), ([0.1234567, 10.5], None),
    ([[1, -20], [300, 4]], None)])
def test_repr_matches_torch(data, dtype):
    x, t = both(data, dtype)
    assert repr(x) == repr(t).replace("torch.", "torchlean.")


def test_repr_shows_grad_state_like_torch():
    x, t = both([1.0, 2.0], requires_grad=True)
    assert repr(x) == repr(t)
    assert repr(x * 2) == repr(t * 2)
    assert repr(x.sum()) == repr(t.sum())


def test_python_protocols_match_torch():
    x, t = both([[1.0, 2.0], [3.0, 4.0]])
    assert len(x) == len(t) == 2
    assert [r.tolist() for r in x] == [r.tolist() for r in t]
    assert float(x[1, 1]) == float(t[1, 1]) == 4.0
    assert f"{x[0, 1]:.3f}" == f"{t[0, 1]:.3f}"
    assert [10, 20, 30][tl.tensor(1)] == 20
    assert bool(tl.tensor([1.0])) is True
    with pytest.raises(TorchLeanError):
        bool(x)
    with pytest.raises(TypeError):
        len(tl.tensor(1.0))
    assert x.shape == t.shape and x.size() == (2, 2) and x.size(-1) == 2 and x.shape.numel() == 4
    assert repr(x.shape) == "torchlean.Size([2, 2])"


def test_numpy_shares_memory_on_the_cpu():
    x = tl.zeros(3)
    a = x.numpy()
    a[1] = 5.0
    assert x.tolist() == [0.0, 5.0, 0.0]


# ---- in-place writes ----------------------------------------------------------------------------------

def test_setitem_forms_match_torch():
    x, t = both(np.arange(12.0).reshape(3, 4), "float32")
    for lib, a in ((tl, x), (torch, t)):
        a[0] = 1
        a[:, 2] = lib.tensor([5.0, 6.0, 7.0])
        a[a > 8] = -1
        a[lib.tensor([2, 0])] = 9.5
        a[..., 1] = a[..., 3]
        a[1, [0, 3]] = lib.tensor([3.0, 4.0])
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_setitem_out_of_range_raises_index_error():
    x = tl.zeros(3)
    with pytest.raises(IndexRangeError):
        x[5] = 1.0
    with pytest.raises(IndexError):
        x[tl.tensor([0, 3])] = 1.0


def test_basic_index_results_write_back_like_torch_views():
    x, t = both(np.zeros((2, 3)), "float32")
    for a in (x, t):
        a[0].fill_(7)
        a[:, 1].zero_()
        a[1][2] = 4.0
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_version_counter_counts_writes():
    x, t = both([1.0, 2.0])
    for a in (x, t):
        a[0] = 3.0
        a.zero_()
        a.copy_(a * 0 + 1)
    assert x._version == t._version == 3


def test_modified_saved_tensor_raises_like_torch():
    for lib, err in ((torch, RuntimeError), (tl, AutogradError)):
        a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = a.exp()                # exp saves its result
        y = (h * 2).sum()
        h.zero_()
        with pytest.raises(err, match="modified by an inplace|modified by an in-place"):
            y.backward()


def test_in_place_on_a_leaf_that_requires_grad_raises_like_torch():
    for lib in (torch, tl):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf"):
            w.zero_()
        with lib.no_grad():
            w.zero_()
        assert w.tolist() == [0.0, 0.0]


def test_copy_into_a_non_leaf_carries_gradients_like_torch():
    x, t = both([1.0, 2.0, 3.0], requires_grad=True)
    s, ts = both([4.0, 5.0, 6.0], requires_grad=True)
    for a, b in ((x, s), (t, ts)):
        y = a * 2
        y.copy_(b * 3)
        (y * y).sum().backward()
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy())
    assert x.grad is None and t.grad.tolist() == [0.0, 0.0, 0.0]   # torch: zeros through the overwritten copy


def test_data_writes_are_not_tracked():
    w = tl.tensor([1.0, 2.0], requires_grad=True)
    y = (w * w).sum()
    w.data.mul_(2) if hasattr(w.data, "mul_") else w.data.copy_(w.data * 2)
    y.backward()                               # torch does not check .data writes either
    assert w.tolist() == [2.0, 4.0]


# ---- autograd API --------------------------------------------------------------------------------------

def test_autograd_grad_matches_torch():
    x, t = both([1.0, 2.0, 3.0], requires_grad=True)
    outs = []
    for lib, a in ((tl, x), (torch, t)):
        h = a * a
        y = (h * 3).sum()
        z = (a * 5).sum()
        gx, gh = lib.autograd.grad([y, z], [a, h], retain_graph=True)
        (gz,) = lib.autograd.grad(h, a, grad_outputs=lib.ones(3) * 2)
        outs.append((gx.tolist(), gh.tolist(), gz.tolist()))
    assert outs[0] == outs[1]
    assert x.grad is None


def test_autograd_grad_unused_and_create_graph():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    u = tl.tensor([1.0], requires_grad=True)
    y = (x * x).sum()
    with pytest.raises(AutogradError, match="allow_unused"):
        tl.autograd.grad(y, [x, u], retain_graph=True)
    gx, gu = tl.autograd.grad(y, [x, u], allow_unused=True, retain_graph=True)
    assert gu is None and gx.tolist() == [2.0, 4.0]
    (g,) = tl.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad and g.tolist() == [2.0, 4.0]


def test_hooks_and_retain_grad_match_torch():
    res = []
    for lib in (tl, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(g.tolist()))
        h = x * 2
        h.retain_grad()
        handle = h.register_hook(lambda g: g * 10)
        (h * h).sum().backward()
        handle.remove()
        res.append((x.grad.tolist(), h.grad.tolist(), seen, h.retains_grad, x.is_leaf, h.is_leaf))
    assert res[0] == res[1]


# ---- memory: the tape keeps what backward needs, as torch's graph keeps its saved tensors ---------

def test_a_result_nobody_holds_and_backward_does_not_read_is_freed():
    x = tl.tensor(np.linspace(-1.0, 1.0, 6), requires_grad=True)
    a = x + 1.0                       # add saves nothing; sum reads only the shape
    ref = weakref.ref(a._value)
    s = a.sum()
    del a
    assert ref() is None
    s.backward()
    assert x.grad.tolist() == [1.0] * 6


def test_saved_values_are_freed_by_backward_while_the_loss_lives():
    x = tl.tensor([0.5, 1.0, 2.0], requires_grad=True)
    h = x.exp()                       # exp's backward reads its output
    ref = weakref.ref(h._value)
    loss = h.sum()
    del h
    assert ref() is not None          # still needed by the backward
    loss.backward()
    assert ref() is None and loss.item() == pytest.approx(float(np.exp([0.5, 1.0, 2.0]).sum()))
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0, 2.0]), rtol=1e-6)


@pytest.mark.parametrize("retain", [False, True])
def test_a_node_lets_its_saved_values_go_once_its_backward_ran(retain):
    x = tl.tensor([0.1, 0.2, 0.3], requires_grad=True)
    a = x * 3.0
    b = a.exp()
    ref = weakref.ref(b._value)
    seen = []
    a.register_hook(lambda g: seen.append(ref() is None))   # runs after exp's backward
    loss = b.sum()
    del b
    loss.backward(retain_graph=retain)
    assert seen == [not retain]
    if retain:  # the graph is whole: a second backward adds the same gradient
        loss.backward()
        np.testing.assert_allclose(x.grad.numpy(), 6.0 * np.exp(3.0 * np.array([0.1, 0.2, 0.3])), rtol=1e-6)


def test_a_backward_that_fails_midway_releases_the_graph():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    a = x * 2.0
    loss = a.exp().sum()

    def boom(g):
        raise ValueError("hook failed")
    h = a.register_hook(boom)
    with pytest.raises(ValueError, match="hook failed"):
        loss.backward()
    h.remove()
    with pytest.raises(AutogradError, match="second time"):  # never a silent partial gradient
        loss.backward()


def test_second_order_gradients_through_dropped_values_match_torch():
    res = []
    for lib in (tl, torch):
        x = lib.tensor([0.3, -1.2, 2.0, 0.7], dtype=lib.float64, requires_grad=True)
        y = (((x.sin() + 0.5).tanh() * x).sigmoid() * x.remainder(0.9)).sum()   # temporaries die here
        if lib is tl:
            assert any(isinstance(n.value, Released) for n in y._tape.nodes)
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        res.append((g.detach().numpy(), gg.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-10)


def test_split_pieces_add_into_one_gradient_like_torch():
    """Slices' cotangents are added at their places of the input's gradient (one zero fill, then
    in-place adds), also when the first contribution is another op's array (copied, never written)."""
    rng = np.random.default_rng(3)
    xv, wv = rng.standard_normal((4, 6)), rng.standard_normal((4, 2))
    res = []
    for lib in (tl, torch):
        x = lib.tensor(xv, requires_grad=True)
        w = lib.tensor(wv, requires_grad=True)
        a = x * 2.0
        q, k, v = a.split(2, dim=1)
        # recorded last, exp's contribution reaches a first: the slices add into a copy of it; an
        # overlapping narrow adds on top of the split's pieces
        y = (q * w).sum() + (k * k).sum() + v.tanh().sum() + a.narrow(1, 1, 3).pow(2).sum() + a.exp().sum()
        y.backward(retain_graph=True)
        g1 = x.grad.clone()
        y.backward()
        res.append((g1.numpy(), x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(res[0], res[1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_split_backward_fills_zeros_once(monkeypatch):
    from torchlean.kernels import HOST
    calls = {"basic_index_bwd": 0, "basic_index_add": 0}
    for name in calls:
        fn = getattr(HOST, name)

        def counted(*a, _fn=fn, _n=name):
            calls[_n] += 1
            return _fn(*a)
        monkeypatch.setattr(HOST, name, counted)
    x = tl.tensor(np.arange(12.0).reshape(2, 6), requires_grad=True)
    q, k, v = (x * 1.0).split(2, dim=1)        # a recorded result, as a projection's output
    ((q * 1.0).sum() + (k * 2.0).sum() + (v * 3.0).sum()).backward()
    assert calls == {"basic_index_bwd": 1, "basic_index_add": 2}
    assert x.grad.tolist() == [[1.0, 1.0, 2.0, 2.0, 3.0, 3.0]] * 2


def test_post_accumulate_grad_hooks_run_once_per_backward_like_torch():
    res = []
    for lib in (tl, torch):
        w = lib.tensor([1.0, -2.0], requires_grad=True)
        seen = []
        h = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
        ((w * 3).sum() + (w * w).sum()).backward()     # w reached twice in one graph: one call
        (w * 2).sum().backward()
        h.remove()
        (w * 2).sum().backward()
        res.append(seen)
        with pytest.raises((AutogradError, RuntimeError)):
            (w * 1).register_post_accumulate_grad_hook(lambda p: None)
    assert res[0] == res[1] == [[5.0, -1.0], [7.0, 1.0]]


def test_post_accumulate_hooks_fire_while_backward_goes_on_like_torch():
    """A leaf's post-accumulate hook runs as soon as its gradient is complete, before the gradients of
    the layers below it exist (what lets DistributedDataParallel overlap its all-reduce with the backward)."""
    res = []
    for lib in (tl, torch):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
        names = {id(p): n for n, p in net.named_parameters()}
        log = []
        for p in net.parameters():
            p.register_post_accumulate_grad_hook(
                lambda p: log.append((names[id(p)], [n for n, q in net.named_parameters() if q.grad is not None])))
        net(lib.ones(5, 3)).pow(2).sum().backward()
        res.append(log)
    assert [n for n, _ in res[0]] == [n for n, _ in res[1]]
    first = dict(res[0])
    assert "0.weight" not in first["2.weight"] and sorted(first["0.weight"]) == sorted(dict(res[1])["0.weight"])
    assert {k: sorted(v) for k, v in res[0]} == {k: sorted(v) for k, v in res[1]}


def test_queue_callback_runs_after_every_gradient_is_in():
    w = tl.tensor([1.0, 2.0], requires_grad=True)
    v = tl.tensor([3.0], requires_grad=True)
    order = []
    w.register_post_accumulate_grad_hook(
        lambda p: tl.autograd.queue_callback(lambda: order.append(("done", w.grad.tolist(), v.grad.tolist()))))
    (w.sum() * v.sum()).backward()
    assert order == [("done", [3.0, 3.0], [3.0])]
    with pytest.raises(AutogradError, match="only valid while backward"):
        tl.autograd.queue_callback(lambda: None)


def test_backward_inputs_restricts_accumulation_like_torch():
    res = []
    for lib in (tl, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        (a * b).sum().backward(inputs=[a])
        res.append((a.grad.tolist(), b.grad))
    assert res[0] == res[1]


def _custom(lib):
    class Clip(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, lo):
            ctx.save_for_backward(x)
            ctx.lo = lo
            return x.clamp(min=lo), x * 2

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            return g1 * (x > ctx.lo).to(g1.dtype) + g2 * 2, None
    return Clip


def test_custom_function_with_two_outputs_matches_torch():
    res = []
    for lib in (tl, torch):
        x = lib.tensor([-1.0, 0.5, 2.0], requires_grad=True)
        a, b = _custom(lib).apply(x, 0.0)
        (a * 3 + b * b).sum().backward()
        res.append((a.tolist(), b.tolist(), x.grad.tolist()))
    assert res[0] == res[1]


def test_custom_function_checks_saved_tensor_versions():
    class Sq(tl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = tl.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    y = Sq.apply(h).sum()
    h.fill_(5)
    with pytest.raises(AutogradError, match="in-place"):
        y.backward()


def test_grad_modes_match_torch():
    for lib in (tl, torch):
        x = lib.ones(2, requires_grad=True)
        with lib.no_grad():
            assert not (x * 2).requires_grad
            with lib.enable_grad():
                assert (x * 2).requires_grad
        with lib.set_grad_enabled(False):
            assert not (x * 2).requires_grad
        assert (x * 2).requires_grad
        with lib.inference_mode():
            assert not (x * 2).requires_grad

        @lib.no_grad()
        def f(v):
            return v * 2
        assert not f(x).requires_grad
        lib.set_grad_enabled(False)
        assert not (x * 2).requires_grad
        lib.set_grad_enabled(True)
        assert (x * 2).requires_grad


def test_detach_and_requires_grad_errors():
    x = tl.tensor([1.0], requires_grad=True)
    y = x * 2
    with pytest.raises(AutogradError):
        y.requires_grad_(False)
    with pytest.raises(DTypeError):
        tl.tensor([1, 2]).requires_grad_()
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    assert y.grad_fn.name() == (torch.ones(1, requires_grad=True) * 2).grad_fn.name()


def test_backward_of_non_scalar_needs_a_gradient():
    x = tl.ones(2, requires_grad=True)
    with pytest.raises(AutogradError, match="scalar"):
        (x * 2).backward()
    with pytest.raises(ShapeError):
        (x * 2).backward(tl.ones(3))


def test_tape_dense_backward_from_a_seed_list():
    from torchlean.autograd import Tape
    t = Tape()
    x = t.leaf(np.array([1.0, 2.0]))
    a = t.mul(x, x)
    b = t.exp(x)
    g = t.backward([None, np.ones(2), np.array([1.0, 0.0])])
    np.testing.assert_allclose(g[x], [2.0 + np.e, 4.0])
    np.testing.assert_allclose(g[a], [1.0, 1.0])
    with pytest.raises(ShapeError, match="one per node"):
        t.backward([None, np.ones(2)])
    assert a != b


INPLACE_CASES = [
    ("add_", lambda L: (L.tensor([1.0, 2.0, 3.0]),), {"alpha": 2}),
    ("sub_", lambda L: (2.5,), {}),
    ("mul_", lambda L: (L.tensor([2.0, -1.0, 0.5]),), {}),
    ("div_", lambda L: (4.0,), {}),
    ("pow_", lambda L: (2,), {}),
    ("clamp_", lambda L: (), {"min": -0.5, "max": 0.5}),
    ("fill_", lambda L: (7.0,), {}),
    ("zero_", lambda L: (), {}),
    ("copy_", lambda L: (L.tensor([9.0, 8.0, 7.0]),), {}),
    ("masked_fill_", lambda L: (L.tensor([True, False, True]), -1.0), {}),
    ("index_add_", lambda L: (0, L.tensor([2, 0]), L.tensor([10.0, 20.0])), {}),
    ("scatter_", lambda L: (0, L.tensor([1, 2]), L.tensor([5.0, 6.0])), {}),
    ("scatter_add_", lambda L: (0, L.tensor([1, 1]), L.tensor([5.0, 6.0])), {}),
    ("relu_", lambda L: (), {}), ("sigmoid_", lambda L: (), {}), ("tanh_", lambda L: (), {}),
    ("exp_", lambda L: (), {}), ("neg_", lambda L: (), {}), ("abs_", lambda L: (), {}),
    ("unsqueeze_", lambda L: (0,), {}), ("t_", lambda L: (), {}),
]


@pytest.mark.parametrize("name,args,kwargs", INPLACE_CASES, ids=[c[0] for c in INPLACE_CASES])
def test_inplace_methods_match_torch(name, args, kwargs):
    res = []
    for lib in (tl, torch):
        x = lib.tensor([0.25, -1.5, 2.0])
        y = getattr(x, name)(*args(lib), **kwargs)
        assert y is x
        res.append((np.asarray(x.tolist()), tuple(x.shape), x._version))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    assert res[0][1:] == res[1][1:]


def test_inplace_log_squeeze_and_random_fills():
    x = tl.tensor([[1.0, 2.0, 4.0]])
    x.log_().squeeze_()
    assert x.shape == (3,) and x.tolist() == pytest.approx([0.0, np.log(2.0), np.log(4.0)])
    z = tl.zeros(2000)
    assert 0.4 < float(z.bernoulli_(0.5).mean()) < 0.6
    assert float(z.exponential_(2.0).mean()) == pytest.approx(0.5, rel=0.15)
    assert float(z.normal_(3.0, 0.1).mean()) == pytest.approx(3.0, abs=0.02)
    u = z.uniform_(-1, 1)
    assert -1 <= float(u.min()) and float(u.max()) < 1
    r = tl.zeros(50, dtype=tl.int64).random_(0, 3)
    assert set(r.tolist()) <= {0, 1, 2}
    d = tl.ones(2, requires_grad=True) * 2
    assert d.detach_() is d and not d.requires_grad and d.is_leaf


def test_int_tensor_refuses_a_float_result_in_place_like_torch():
    for lib in (tl, torch):
        x = lib.tensor([1, 2])
        with pytest.raises((TypeError, RuntimeError)):
            x.add_(1.5)
        x += 2
        assert x.tolist() == [3, 4]


REFUSED_ON_INTEGERS = {
    "gelu": lambda L, x: L.nn.functional.gelu(x),
    "layer_norm": lambda L, x: L.nn.functional.layer_norm(x, (4,)),
    "mse_loss": lambda L, x: L.nn.functional.mse_loss(x, x),
    "mean": lambda L, x: x.mean(),
    "softmax": lambda L, x: L.softmax(x, -1),
}


@pytest.mark.parametrize("name", sorted(REFUSED_ON_INTEGERS))
def test_float_only_ops_refuse_integers_like_torch(name):
    f = REFUSED_ON_INTEGERS[name]
    with pytest.raises(RuntimeError):
        f(torch, torch.tensor([[1, 2, 3, 4]]))
    with pytest.raises(DTypeError):
        f(tl, tl.tensor([[1, 2, 3, 4]]))


def test_avg_pool_refuses_integers_where_torch_truncates():
    with pytest.raises(DTypeError, match="avg_pool"):
        tl.nn.functional.avg_pool1d(tl.tensor([[[1, 2, 3, 4]]]), 2)


@pytest.mark.parametrize("expr", ["x ** 0.5", "x.clamp(0.5, 2.5)", "x.reciprocal()", "x.sqrt()", "x.sigmoid()",
                                  "x / 2", "x * 2.5"])
def test_integer_inputs_promote_instead_of_truncating_like_torch(expr):
    got = eval(expr, {"x": tl.tensor([[1, 2, 3, 4]])})
    want = eval(expr, {"x": torch.tensor([[1, 2, 3, 4]])})
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("args", [(2, 3), ([1, 2],), ([[1.5, 2.0], [3.0, 4.0]],), ()])
def test_legacy_tensor_constructor_matches_torch(args):
    a, b = tl.Tensor(*args), torch.Tensor(*args)
    assert a.shape == b.shape and a.dtype.name == "float32" and b.dtype == torch.float32
    if args and not isinstance(args[0], int):
        assert a.tolist() == b.tolist()
    with pytest.raises(DTypeError):
        tl.Tensor("abc")


@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor", "ByteTensor"])
def test_legacy_tensor_types_match_torch(name):
    a, b = getattr(tl, name)([1, 0, 2]), getattr(torch, name)([1, 0, 2])
    assert a.dtype.name == str(b.dtype).removeprefix("torch.") and a.tolist() == b.tolist()
    assert isinstance(a, getattr(tl, name)) and isinstance(b, getattr(torch, name))
    assert isinstance(a, tl.FloatTensor) == isinstance(b, torch.FloatTensor)
    assert getattr(tl, name)(2, 3).shape == getattr(torch, name)(2, 3).shape
    x, t = tl.ones(2), torch.ones(2)
    assert x.type(getattr(tl, name)).dtype.name == str(t.type(getattr(torch, name)).dtype).removeprefix("torch.")
