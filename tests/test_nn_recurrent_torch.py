"""Recurrent layers against PyTorch: RNN / LSTM / GRU modules and cells with torch's weights (outputs,
final states, gradients of inputs, initial states and every parameter), packed sequences, the
nn.utils.rnn helpers, initialization, and errors."""

import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.recurrent as RN
import torchlean.nn.utils.rnn as RU
from torchlean.errors import DomainError, DTypeError, ShapeError, TorchLeanError
from torchlean.nn.functional_recurrent import gru_layer, lstm_layer, rnn_layer

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TU = torch.nn.utils.rnn
TOL = 1e-9
rng = np.random.default_rng(0)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """torch's thread pool stalls on the long sequences when the cores are shared; one thread is fast."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

KINDS = {"rnn_tanh": (torch.nn.RNN, RN.RNN, {"nonlinearity": "tanh"}),
         "rnn_relu": (torch.nn.RNN, RN.RNN, {"nonlinearity": "relu"}),
         "lstm": (torch.nn.LSTM, RN.LSTM, {}),
         "lstm_proj": (torch.nn.LSTM, RN.LSTM, {"proj_size": 2}),
         "gru": (torch.nn.GRU, RN.GRU, {})}


def host(x):
    return x.numpy() if isinstance(x, tl.Tensor) else x.detach().numpy()


def close(a, b, tol=TOL, what="", atol=None):
    np.testing.assert_allclose(host(a), host(b), rtol=tol, atol=tol if atol is None else atol, err_msg=what)


def pair(kind, dtype=torch.float64, **kw):
    """The same module in torch and here, torch's weights loaded with strict=True."""
    tcls, lcls, extra = KINDS[kind]
    tm = tcls(**extra, **kw).to(dtype)
    lm = lcls(**extra, **kw, dtype="float64" if dtype == torch.float64 else "float32")
    lm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()}, strict=True)
    return tm, lm


def leaf(a, lib):
    if lib is torch:
        return torch.tensor(a, requires_grad=True)
    return tl.tensor(a, dtype=str(a.dtype), requires_grad=True)


def states(out):
    """(output, [h_n] or [h_n, c_n]) of a recurrent module's result."""
    y, h = out
    return y, (list(h) if isinstance(h, tuple) else [h])


def compare(tm, lm, x, hx=None, tol=TOL, atol=None, packed=None):
    """Run both on the same input and initial states; compare outputs, final states and the gradients
    of the input, the initial states and every parameter for random cotangents."""
    xs = {lib: leaf(x, lib) for lib in (torch, tl)}
    hs = {lib: None if hx is None else [leaf(h, lib) for h in hx] for lib in (torch, tl)}
    res = {}
    for lib, m in ((torch, tm), (tl, lm)):
        inp = xs[lib] if packed is None else packed(lib, xs[lib])
        h = None if hs[lib] is None else tuple(hs[lib]) if len(hs[lib]) == 2 else hs[lib][0]
        y, fin = states(m(inp) if h is None else m(inp, h))
        res[lib] = (y, fin)
    (yt, ft), (yl, fl) = res[torch], res[tl]
    if packed is not None:
        assert yl.batch_sizes.tolist() == yt.batch_sizes.tolist()
        for a, b in ((yl.sorted_indices, yt.sorted_indices), (yl.unsorted_indices, yt.unsorted_indices)):
            assert (a is None and b is None) or a.tolist() == b.tolist()
        yt, yl = yt.data, yl.data
    assert tuple(yl.shape) == tuple(yt.shape)
    close(yl, yt, tol, "output", atol)
    for k, (a, b) in enumerate(zip(fl, ft)):
        assert tuple(a.shape) == tuple(b.shape)
        close(a, b, tol, f"final state {k}", atol)
    cots = [rng.standard_normal(tuple(t.shape)).astype(x.dtype) for t in [yt] + ft]
    sum((t * torch.tensor(c)).sum() for t, c in zip([yt] + ft, cots)).backward()
    sum((t * tl.tensor(c, dtype=str(x.dtype))).sum() for t, c in zip([yl] + fl, cots)).backward()
    close(xs[tl].grad, xs[torch].grad, tol, "input grad", atol)
    for a, b in zip(hs[tl] or [], hs[torch] or []):
        close(a.grad, b.grad, tol, "initial state grad", atol)
    lp = dict(lm.named_parameters())
    for n, p in tm.named_parameters():
        close(lp[n].grad, p.grad, tol, f"grad of {n}", atol)


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(sorted(KINDS)), layers=st.integers(1, 3), bias=st.booleans(),
       batch_first=st.booleans(), bidi=st.booleans(), with_hx=st.booleans(), batched=st.booleans(),
       T=st.integers(1, 5), N=st.integers(1, 3), H=st.integers(3, 6), I=st.integers(1, 4))
def test_modules_match_torch(kind, layers, bias, batch_first, bidi, with_hx, batched, T, N, H, I):
    tm, lm = pair(kind, input_size=I, hidden_size=H, num_layers=layers, bias=bias, batch_first=batch_first,
                  bidirectional=bidi)
    D = 2 if bidi else 1
    P = 2 if kind == "lstm_proj" else H
    x = rng.standard_normal(((N, T) if batch_first else (T, N)) + (I,) if batched else (T, I))
    hx = None
    if with_hx:
        lead = (layers * D, N) if batched else (layers * D,)
        hx = [rng.standard_normal(lead + (P,))] + ([rng.standard_normal(lead + (H,))] if "lstm" in kind else [])
    compare(tm, lm, x, hx)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_input_matches_torch(kind, enforce_sorted):
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    tm, lm = pair(kind, input_size=3, hidden_size=4, num_layers=2, bidirectional=True)
    x = rng.standard_normal((5, 4, 3))
    hx = [rng.standard_normal((4, 4, 2 if kind == "lstm_proj" else 4))]
    if "lstm" in kind:
        hx.append(rng.standard_normal((4, 4, 4)))

    def packed(lib, t):
        mod = TU if lib is torch else RU
        return mod.pack_padded_sequence(t, lengths, enforce_sorted=enforce_sorted)
    compare(tm, lm, x, hx, packed=packed)
    compare(tm, lm, x, None, packed=packed)


def test_packed_output_pads_back_like_torch():
    tm, lm = pair("gru", input_size=2, hidden_size=3, batch_first=True)
    x = rng.standard_normal((3, 4, 2))
    lengths = [2, 4, 1]
    yt, _ = tm(TU.pack_padded_sequence(torch.tensor(x), lengths, batch_first=True, enforce_sorted=False))
    yl, _ = lm(RU.pack_padded_sequence(tl.tensor(x, dtype="float64"), lengths, batch_first=True,
                                       enforce_sorted=False))
    pt, lt = TU.pad_packed_sequence(yt, batch_first=True)
    pl, ll = RU.pad_packed_sequence(yl, batch_first=True)
    close(pl, pt)
    assert ll.tolist() == lt.tolist() == lengths
    assert float(np.abs(pl.numpy()[2, 1:]).max()) == 0.0


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
def test_long_sequence_float32(kind):
    tm, lm = pair(kind, dtype=torch.float32, input_size=8, hidden_size=16, num_layers=2, bidirectional=True)
    x = rng.standard_normal((100, 3, 8)).astype(np.float32)
    compare(tm, lm, x, tol=1e-4, atol=1e-5)


def test_dropout_only_in_training():
    tm, lm = pair("lstm", input_size=3, hidden_size=5, num_layers=3, dropout=0.5)
    x = rng.standard_normal((4, 2, 3))
    tm.eval()
    lm.eval()
    compare(tm, lm, x)
    lm.train()
    xt = tl.tensor(x, dtype="float64")
    y_train = lm(xt)[0].numpy()
    y_eval = lm.eval()(xt)[0].numpy()
    assert np.abs(y_train - y_eval).max() > 1e-3
    # the last layer gets no dropout: a one-layer model with dropout is the same in both modes
    with pytest.warns(UserWarning, match="num_layers"):
        one = RN.GRU(3, 4, dropout=0.5, dtype="float64")
    with pytest.warns(UserWarning, match="num_layers"):
        torch.nn.GRU(3, 4, dropout=0.5)
    close(one.train()(xt)[0], one.eval()(xt)[0])


@pytest.mark.parametrize("kw", [dict(num_layers=2, bidirectional=True, proj_size=3),
                                dict(num_layers=3, bias=False, batch_first=True, dropout=0.2),
                                dict(proj_size=2, bias=False)])
def test_parameter_names_shapes_and_repr(kw):
    tm = torch.nn.LSTM(4, 6, **kw)
    lm = RN.LSTM(4, 6, **kw)
    assert [(n, tuple(p.shape)) for n, p in lm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert list(lm.state_dict()) == list(tm.state_dict())
    assert lm._flat_weights_names == tm._flat_weights_names
    assert lm._all_weights == tm._all_weights
    assert [[tuple(p.shape) for p in ws] for ws in lm.all_weights] == \
        [[tuple(p.shape) for p in ws] for ws in tm.all_weights]
    assert all(a is b for a, b in zip(lm._flat_weights, lm.parameters()))
    assert repr(lm) == repr(tm)
    assert lm.flatten_parameters() is None
    for tcls, lcls, args in ((torch.nn.RNN, RN.RNN, (3, 4, 2, "relu", False)), (torch.nn.GRU, RN.GRU, (3, 4)),
                             (torch.nn.RNNCell, RN.RNNCell, (3, 4, False, "relu")),
                             (torch.nn.LSTMCell, RN.LSTMCell, (3, 4)), (torch.nn.GRUCell, RN.GRUCell, (3, 4))):
        t, m = tcls(*args), lcls(*args)
        assert repr(m) == repr(t)
        assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in t.named_parameters()]


def test_initialization_range_and_statistics():
    tl.manual_seed(3)
    H = 64
    for m in (RN.LSTM(32, H, num_layers=2), RN.GRUCell(32, H), RN.RNN(32, H, bidirectional=True)):
        vals = np.concatenate([p.numpy().ravel() for p in m.parameters()])
        bound = 1 / np.sqrt(H)
        assert vals.min() >= -bound and vals.max() <= bound
        assert abs(vals.mean()) < 0.05 * bound
        assert abs(vals.std() - bound / np.sqrt(3)) < 0.03 * bound
        assert vals.min() < -0.95 * bound and vals.max() > 0.95 * bound
    assert RN.LSTM(3, 4, dtype="float64").weight_ih_l0.dtype == tl.float64


@pytest.mark.parametrize("kind", ["rnn_tanh", "rnn_relu", "lstm", "gru"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_torch(kind, bias):
    tcls, lcls, kw = {"rnn_tanh": (torch.nn.RNNCell, RN.RNNCell, {"nonlinearity": "tanh"}),
                      "rnn_relu": (torch.nn.RNNCell, RN.RNNCell, {"nonlinearity": "relu"}),
                      "lstm": (torch.nn.LSTMCell, RN.LSTMCell, {}),
                      "gru": (torch.nn.GRUCell, RN.GRUCell, {})}[kind]
    tc = tcls(3, 5, bias=bias, **kw).double()
    lc = lcls(3, 5, bias=bias, dtype="float64", **kw)
    lc.load_state_dict(tc.state_dict(), strict=True)
    for batched, with_hx in ((True, True), (True, False), (False, True), (False, False)):
        lead = (4,) if batched else ()
        x = rng.standard_normal(lead + (3,))
        hx = [rng.standard_normal(lead + (5,)) for _ in range(2 if kind == "lstm" else 1)] if with_hx else None
        xs = {lib: leaf(x, lib) for lib in (torch, tl)}
        hs = {lib: None if hx is None else [leaf(h, lib) for h in hx] for lib in (torch, tl)}
        outs = {}
        for lib, m in ((torch, tc), (tl, lc)):
            h = None if hx is None else tuple(hs[lib]) if kind == "lstm" else hs[lib][0]
            o = m(xs[lib], h)
            outs[lib] = list(o) if isinstance(o, tuple) else [o]
        for a, b in zip(outs[tl], outs[torch]):
            assert tuple(a.shape) == tuple(b.shape)
            close(a, b)
        cots = [rng.standard_normal(tuple(o.shape)) for o in outs[torch]]
        sum((o * torch.tensor(c)).sum() for o, c in zip(outs[torch], cots)).backward()
        sum((o * tl.tensor(c, dtype="float64")).sum() for o, c in zip(outs[tl], cots)).backward()
        close(xs[tl].grad, xs[torch].grad)
        for a, b in zip(hs[tl] or [], hs[torch] or []):
            close(a.grad, b.grad)
        lp = dict(lc.named_parameters())
        for n, p in tc.named_parameters():
            close(lp[n].grad, p.grad, what=n)
            p.grad = None
            lp[n].grad = None


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=5), batch_first=st.booleans(),
       enforce_sorted=st.booleans(), pad=st.sampled_from([0.0, -1.5]), extra=st.integers(0, 2),
       feat=st.sampled_from([(), (2,), (2, 3)]))
def test_pack_pad_match_torch(lengths, batch_first, enforce_sorted, pad, extra, feat):
    if enforce_sorted:
        lengths = sorted(lengths, reverse=True)
    T, B = max(lengths) + extra, len(lengths)
    x = rng.standard_normal(((B, T) if batch_first else (T, B)) + feat)
    xt, xl = leaf(x, torch), leaf(x, tl)
    pt = TU.pack_padded_sequence(xt, torch.tensor(lengths), batch_first, enforce_sorted)
    pl = RU.pack_padded_sequence(xl, tl.tensor(lengths), batch_first, enforce_sorted)
    close(pl.data, pt.data)
    assert pl.batch_sizes.dtype == tl.int64 and pl.batch_sizes.device == "cpu"
    assert pl.batch_sizes.tolist() == pt.batch_sizes.tolist()
    for a, b in ((pl.sorted_indices, pt.sorted_indices), (pl.unsorted_indices, pt.unsorted_indices)):
        assert (a is None) == (b is None) and (a is None or a.tolist() == b.tolist())
    total = T if extra else None
    yt, lt = TU.pad_packed_sequence(pt, batch_first, pad, total)
    yl, ll = RU.pad_packed_sequence(pl, batch_first, pad, total)
    close(yl, yt)
    assert ll.tolist() == lt.tolist() and ll.dtype == tl.int64
    g = rng.standard_normal(tuple(yt.shape))
    (yt * torch.tensor(g)).sum().backward()
    (yl * tl.tensor(g, dtype="float64")).sum().backward()
    close(xl.grad, xt.grad)
    for a, b in zip(RU.unpack_sequence(pl), TU.unpack_sequence(pt)):
        close(a, b)
    for a, b in zip(RU.unpad_sequence(yl, ll, batch_first), TU.unpad_sequence(yt, lt, batch_first)):
        close(a, b)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_pad_and_pack_sequence_match_torch(side, batch_first):
    arrs = [rng.standard_normal((n, 2)) for n in (2, 4, 1)]
    st_, sl = [leaf(a, torch) for a in arrs], [leaf(a, tl) for a in arrs]
    yt = TU.pad_sequence(st_, batch_first, 3.0, side)
    yl = RU.pad_sequence(sl, batch_first, 3.0, side)
    close(yl, yt)
    g = rng.standard_normal(tuple(yt.shape))
    (yt * torch.tensor(g)).sum().backward()
    (yl * tl.tensor(g, dtype="float64")).sum().backward()
    for a, b in zip(sl, st_):
        close(a.grad, b.grad)
    pt, pl = TU.pack_sequence(st_, enforce_sorted=False), RU.pack_sequence(sl, enforce_sorted=False)
    close(pl.data, pt.data)
    assert pl.sorted_indices.tolist() == pt.sorted_indices.tolist()
    assert RU.invert_permutation(tl.tensor([2, 0, 1])).tolist() == [1, 2, 0]
    assert RU.invert_permutation(None) is None
    p = RU.PackedSequence(tl.ones(3, 2), [2, 1])
    assert p.batch_sizes.tolist() == [2, 1] and p.sorted_indices is None and not p.is_cuda
    assert p.double().data.dtype == tl.float64 and p.to("cpu").batch_sizes.device == "cpu"
    assert isinstance(p, tuple) and len(p) == 4


@pytest.mark.parametrize("fn", ["rnn", "lstm", "gru"])
def test_layer_functions_hold_state_where_masked(fn):
    T, N, H = 5, 3, 4
    lengths = np.array([5, 2, 3])
    mask = np.arange(T)[:, None] < lengths[None, :]
    G = {"rnn": 1, "lstm": 4, "gru": 3}[fn]
    gx = tl.tensor(rng.standard_normal((T, N, G * H)), dtype="float64")
    w = tl.tensor(rng.standard_normal((G * H, H)) * 0.5, dtype="float64")
    b = tl.tensor(rng.standard_normal(G * H), dtype="float64")
    h0 = tl.tensor(rng.standard_normal((N, H)), dtype="float64")

    def run(g, h, m=None):
        if fn == "rnn":
            return rnn_layer(g, w, h, "relu", mask=m)
        if fn == "lstm":
            return lstm_layer(g, w, h, h * 0.5, mask=m)
        return gru_layer(g, w, b, h, mask=m)
    full = run(gx, h0, mask)
    for n in range(N):
        alone = run(gx[:lengths[n], n:n + 1], h0[n:n + 1])
        close(full[0][:lengths[n], n], alone[0][:, 0])
        assert np.all(full[0].numpy()[lengths[n]:, n] == 0)
        for a, c in zip(full[1:], alone[1:]):
            close(a[n], c[0])


def test_errors():
    lstm = RN.LSTM(3, 4, num_layers=2)
    with pytest.raises(ShapeError, match="LSTM.*input_size"):
        lstm(tl.randn(5, 2, 4))
    with pytest.raises(ShapeError, match="LSTM.*2D or 3D"):
        lstm(tl.randn(5))
    with pytest.raises(ShapeError, match=r"LSTM.*hidden\[0\] size"):
        lstm(tl.randn(5, 2, 3), (tl.zeros(1, 2, 4), tl.zeros(2, 2, 4)))
    with pytest.raises(ShapeError, match=r"LSTM.*hidden\[1\] size"):
        lstm(tl.randn(5, 2, 3), (tl.zeros(2, 2, 4), tl.zeros(2, 3, 4)))
    with pytest.raises(ShapeError, match="3-D"):
        lstm(tl.randn(5, 2, 3), (tl.zeros(2, 4), tl.zeros(2, 4)))
    with pytest.raises(ShapeError, match="GRU.*hidden size"):
        RN.GRU(3, 4)(tl.randn(5, 2, 3), tl.zeros(1, 2, 5))
    with pytest.raises(ShapeError, match="2-D"):
        RN.RNN(3, 4)(tl.randn(5, 3), tl.zeros(1, 1, 4))
    with pytest.raises(DTypeError):
        RN.RNN(3, 4)(tl.randn(5, 2, 3, dtype="float64"))
    with pytest.raises(DomainError, match="nonlinearity"):
        RN.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(DomainError, match="proj_size"):
        RN.GRU(3, 4, proj_size=2)
    with pytest.raises(DomainError, match="proj_size"):
        RN.LSTM(3, 4, proj_size=4)
    with pytest.raises(DomainError, match="dropout"):
        RN.LSTM(3, 4, dropout=1.5)
    with pytest.raises(DomainError, match="hidden_size"):
        RN.LSTM(3, 0)
    with pytest.raises(DTypeError, match="bias"):
        RN.LSTM(3, 4, bias=1)
    with pytest.raises(ShapeError, match="LSTMCell.*input_size"):
        RN.LSTMCell(3, 4)(tl.randn(2, 4))
    with pytest.raises(ShapeError, match="GRUCell.*batch size"):
        RN.GRUCell(3, 4)(tl.randn(2, 3), tl.zeros(3, 4))
    with pytest.raises(ShapeError, match="RNNCell.*hidden_size"):
        RN.RNNCell(3, 4)(tl.randn(2, 3), tl.zeros(2, 5))
    with pytest.raises(ShapeError, match="RNNCell.*1D or 2D"):
        RN.RNNCell(3, 4)(tl.randn(1, 2, 3))
    with pytest.raises(DomainError, match="sorted in decreasing"):
        RU.pack_padded_sequence(tl.randn(4, 3), [2, 3, 1])
    with pytest.raises(DomainError, match="greater than 0"):
        RU.pack_padded_sequence(tl.randn(4, 3), [4, 0, 2], enforce_sorted=False)
    with pytest.raises(ShapeError):
        RU.pack_padded_sequence(tl.randn(4, 3), [5, 3, 1])
    p = RU.pack_sequence([tl.ones(3), tl.ones(2)])
    with pytest.raises(DomainError, match="total_length"):
        RU.pad_packed_sequence(p, total_length=2)
    with pytest.raises(DomainError, match="padding_side"):
        RU.pad_sequence([tl.ones(2)], padding_side="mid")
    with pytest.raises(ShapeError):
        RU.pad_sequence([tl.ones(2, 3), tl.ones(3, 2)])
    with pytest.raises(TorchLeanError):
        RU.pad_sequence([])
    with pytest.raises(ShapeError, match="mask"):
        rnn_layer(tl.zeros(3, 2, 4), tl.zeros(4, 4), tl.zeros(2, 4), mask=np.ones((2, 3), bool))
    with pytest.raises(ShapeError, match="w_hh"):
        lstm_layer(tl.zeros(3, 2, 8), tl.zeros(4, 2), tl.zeros(2, 2), tl.zeros(2, 2))


@pytest.mark.cuda
def test_recurrent_cuda_matches_cpu():
    pytest.importorskip("cupy")
    from torchlean.kernels import cuda_available
    if not cuda_available():
        pytest.skip("CUDA not available")
    x = rng.standard_normal((6, 3, 4)).astype(np.float32)
    lengths = [6, 2, 4]
    for kind in ("lstm_proj", "gru", "rnn_relu"):
        res = []
        for dev in ("cpu", "cuda"):
            tl.manual_seed(0)
            m = KINDS[kind][1](**KINDS[kind][2], input_size=4, hidden_size=5, num_layers=2,
                               bidirectional=True).to(dev)
            xd = tl.tensor(x, device=dev, requires_grad=True)
            p = RU.pack_padded_sequence(xd, lengths, enforce_sorted=False)
            y, h = m(p)
            h = h[0] if isinstance(h, tuple) else h
            padded, _ = RU.pad_packed_sequence(y)
            ((padded * padded).sum() + h.sum()).backward()
            res.append([padded.cpu().numpy(), h.cpu().numpy(), xd.grad.cpu().numpy()]
                       + [q.grad.cpu().numpy() for q in m.parameters()])
        for a, c in zip(*res):
            np.testing.assert_allclose(c, a, rtol=1e-4, atol=1e-5)
    cell = RN.LSTMCell(4, 5)
    outs = [cell.to(dev)(tl.tensor(x[0], device=dev))[0].cpu().numpy() for dev in ("cpu", "cuda")]
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)
