"""tl.save / tl.load: exact round trips of nested checkpoints, torch.save files read without torch's
unpickler, refusal of anything but tensors and plain containers, and damaged files refused."""

import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest

import torchlean as tl
from torchlean.torch_pickle import UnpicklingError

torch = pytest.importorskip("torch")

TL_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def _np(x):
    """A tensor's values as float64/int/bool NumPy (bfloat16 widened), for exact comparison."""
    if isinstance(x, tl.Tensor):
        a = x.numpy()
        return a.astype(np.float32) if a.dtype.name == "bfloat16" else a
    x = x.detach()
    return (x.float() if x.dtype == torch.bfloat16 else x).numpy()


def same(a, b, path="top"):
    """b (torchlean) equals a (torch or torchlean): types, order, dtypes, shapes and exact values."""
    if isinstance(a, (torch.Tensor, tl.Tensor)):
        assert isinstance(b, tl.Tensor), f"{path}: {type(b)}"
        assert str(a.dtype).split(".")[-1] == b.dtype.name, f"{path}: {a.dtype} vs {b.dtype}"
        assert tuple(a.shape) == tuple(b.shape), path
        assert bool(a.requires_grad) == b.requires_grad, path
        np.testing.assert_array_equal(_np(a), _np(b), err_msg=path)
        return
    if isinstance(a, torch.Size):
        assert isinstance(b, tl.Size) and tuple(a) == tuple(b), path
        return
    if isinstance(a, torch.dtype):
        assert b is getattr(tl, str(a).split(".")[-1]), path
        return
    if isinstance(a, torch.device):
        assert b == str(a), path
        return
    if isinstance(a, tl.Size):
        assert isinstance(b, tl.Size) and a == b, path
        return
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, path
        np.testing.assert_array_equal(a, b)
        return
    assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}/{i}")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), path
    else:
        assert a == b, path


def roundtrip(obj, **kw):
    buf = io.BytesIO()
    tl.save(obj, buf)
    return tl.load(io.BytesIO(buf.getvalue()), **kw)


def torch_bytes(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


# ---- tl.save round trips ---------------------------------------------------------------------------

def _nested():
    return {
        "model": collections.OrderedDict(w=tl.randn(3, 4), b=tl.zeros(4), n=tl.tensor(7)),
        "optim": {"state": {0: {"step": tl.tensor(3.0), "exp_avg": tl.ones(2)}},
                  "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0], "foreach": None,
                                    "amsgrad": False}]},
        "epoch": 3, "loss": float("nan"), "big": 2 ** 70, "name": "run-1", "none": None,
        "pair": (1, [2, (3,)]), "empty": {"l": [], "t": (), "d": {}}, (1, "a"): "tuple key", 2.5: "float key",
        True: "bool key", None: "none key", "bytes": b"\x00\xff", "ba": bytearray(b"ab"), "size": tl.Size([2, 3]),
        "dtype": tl.float16, "set": {1, 2}, "frozen": frozenset({"a"}), "complex": 1 - 2j,
        "array": np.arange(6, dtype=np.int16).reshape(2, 3), "zero_d": tl.tensor(True), "empty_t": tl.zeros(0, 3),
    }


def test_roundtrip_nested_exact():
    obj = _nested()
    out = roundtrip(obj)
    same(obj, out)
    assert out["model"]["n"].shape == () and out["optim"]["state"][0]["step"].shape == ()
    assert isinstance(out["model"], collections.OrderedDict) and type(out["optim"]) is dict


@pytest.mark.parametrize("name", TL_DTYPES)
def test_roundtrip_every_dtype(name):
    dt = getattr(tl, name)
    x = tl.Tensor((np.arange(-3, 9) % 5).reshape(3, 4).astype(dt.dtype))
    s = tl.Tensor(x.numpy()[1, 2].copy().reshape(()))
    out = roundtrip({"x": x, "s": s, "t": [x]})
    same({"x": x, "s": s, "t": [x]}, out)
    assert out["s"].shape == () and out["x"].dtype is dt


def test_roundtrip_shared_tensor_and_grad_flags(tmp_path):
    w = tl.randn(3, requires_grad=True)
    obj = {"a": w, "b": [w], "c": w.detach()}
    path = tmp_path / "ck.pt"
    tl.save(obj, str(path))
    out = tl.load(path)
    assert out["a"] is out["b"][0] and out["a"].requires_grad and not out["c"].requires_grad
    np.testing.assert_array_equal(out["a"].detach().numpy(), w.detach().numpy())
    assert os.listdir(tmp_path) == ["ck.pt"]          # the temporary file was replaced, not left


def test_flat_state_dict_is_plain_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    m = tl.nn.Sequential(tl.nn.Linear(3, 4), tl.nn.BatchNorm1d(4))
    sd = m.state_dict()
    path = tmp_path / "m.safetensors"
    tl.save(sd, path)
    raw = st.load_file(str(path))
    assert set(raw) == set(sd)
    for k, v in sd.items():
        np.testing.assert_array_equal(raw[k], v.numpy())
    out = tl.load(path, mmap=True)
    same(sd, out)
    assert list(out) == list(sd)
    m2 = tl.nn.Sequential(tl.nn.Linear(3, 4), tl.nn.BatchNorm1d(4))
    m2.load_state_dict(out)


def test_top_level_values_and_map_location():
    same(tl.tensor(2.5), roundtrip(tl.tensor(2.5)))
    assert roundtrip([1, "a", None]) == [1, "a", None]
    assert roundtrip(5) == 5
    seen = []
    out = roundtrip({"w": tl.ones(2)}, map_location=lambda t, loc: seen.append(loc) or t * 2)
    assert seen == ["cpu"] and out["w"].tolist() == [2.0, 2.0]
    assert roundtrip({"w": tl.ones(2)}, map_location={"cuda:0": "cpu"})["w"].tolist() == [1.0, 1.0]


def test_save_refuses_unstorable_values():
    class Thing:
        pass

    with pytest.raises(tl.TorchLeanError, match=r"Thing.*a/0"):
        tl.save({"a": [Thing()]}, io.BytesIO())
    with pytest.raises(tl.TorchLeanError, match="keys"):
        tl.save({tl.ones(1): 1}, io.BytesIO())


# ---- damaged tl.save files -------------------------------------------------------------------------

def test_every_bit_flip_and_truncation_is_refused():
    buf = io.BytesIO()
    tl.save({"w": tl.tensor([[1.0, -2.0]]), "step": 10, "k": (tl.tensor(3, dtype=tl.int64), "x")}, buf)
    data = buf.getvalue()
    good = tl.load(io.BytesIO(data))
    assert good["step"] == 10
    for i in range(len(data)):
        for bit in range(8):
            bad = bytearray(data)
            bad[i] ^= 1 << bit
            with pytest.raises(tl.TorchLeanError):
                tl.load(io.BytesIO(bytes(bad)))
    for n in range(len(data)):
        with pytest.raises(tl.TorchLeanError):
            tl.load(io.BytesIO(data[:n]))


def test_damage_message_is_clear():
    buf = io.BytesIO()
    tl.save({"w": tl.zeros(64)}, buf)
    bad = bytearray(buf.getvalue())
    bad[-5] ^= 0x10
    with pytest.raises(tl.errors.SerializationError, match="bytes of tensor 'w' changed"):
        tl.load(io.BytesIO(bytes(bad)))
    # the structure record edited (same length, so the file still parses): the metadata is named
    buf = io.BytesIO()
    tl.save({"w": tl.zeros(2), "epoch": 7}, buf)
    bad = buf.getvalue().replace(b'7', b'8', 1) if b'7' in buf.getvalue()[8:200] else None
    data = buf.getvalue()
    n = int.from_bytes(data[:8], "little")
    header = data[8:8 + n].replace(b"7]", b"8]")
    assert header != data[8:8 + n]
    with pytest.raises(tl.errors.SerializationError, match="metadata"):
        tl.load(io.BytesIO(data[:8] + header + data[8 + n:]))


# ---- torch.save files ------------------------------------------------------------------------------

def _trained():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(12, 4), torch.nn.LayerNorm(4))
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2, amsgrad=True),
            torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)]
    for opt in opts:
        for _ in range(2):
            opt.zero_grad()
            m(torch.randn(5, 2, 4, 4)).square().mean().backward()
            opt.step()
    return m, opts


def test_torch_model_and_optimizer_state_dicts():
    m, (adam, sgd) = _trained()
    ckpt = {"model": m.state_dict(), "adam": adam.state_dict(), "sgd": sgd.state_dict(), "epoch": 2,
            "best": 0.25, "tag": "v1"}
    data = torch_bytes(ckpt)
    ref = torch.load(io.BytesIO(data), weights_only=True)
    out = tl.load(io.BytesIO(data))
    same(ref, out)
    assert out["model"]["1.num_batches_tracked"].shape == () and out["model"]["1.num_batches_tracked"].item() == 4
    assert out["model"]["1.running_var"].dtype is tl.float32
    # the state dict drives a torchlean model to torch's outputs
    tm = tl.nn.Sequential(tl.nn.Conv2d(2, 3, 3), tl.nn.BatchNorm2d(3), tl.nn.ReLU(), tl.nn.Flatten(),
                          tl.nn.Linear(12, 4), tl.nn.LayerNorm(4))
    tm.load_state_dict(out["model"])
    m.eval()
    tm.eval()
    x = torch.randn(3, 2, 4, 4)
    np.testing.assert_allclose(tm(tl.tensor(x.numpy())).detach().numpy(), m(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_torch_views_shared_storage_and_parameters():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    p = torch.nn.Parameter(torch.randn(3))
    obj = {"base": base, "t": base.t(), "slice": base[1:, ::2], "row": base[2], "scalar": base[3, 5],
           "expand": torch.ones(3)[None].expand(4, 3), "alias": base, "param": p, "grad": torch.ones(2).requires_grad_(),
           "empty": base[:0], "size": torch.Size([4, 6]), "dtype": torch.int8, "dev": torch.device("cpu"),
           "b": b"xy", "set": {3}, "c": 2j, "od": collections.OrderedDict(a=1)}
    data = torch_bytes(obj)
    ref = torch.load(io.BytesIO(data))
    out = tl.load(io.BytesIO(data))
    same(ref, out)
    assert out["alias"] is out["base"] and out["scalar"].shape == ()
    assert out["param"].requires_grad and out["grad"].requires_grad


@pytest.mark.parametrize("name", TL_DTYPES)
def test_torch_every_dtype(name):
    x = (torch.arange(-4, 8) % 5).reshape(3, 4).to(getattr(torch, name))
    data = torch_bytes({"x": x, "v": x[:, 1:3].t(), "s": x[2, 3]})
    same(torch.load(io.BytesIO(data)), tl.load(io.BytesIO(data)))


@pytest.mark.parametrize("name", ["complex64", "uint16"])
def test_torch_dtypes_without_storage_are_refused(name):
    data = torch_bytes({"x": torch.zeros(2, dtype=getattr(torch, name))})
    with pytest.raises(UnpicklingError, match=name):
        tl.load(io.BytesIO(data))


def test_torch_legacy_format_and_paths(tmp_path):
    m, (adam, _) = _trained()
    obj = {"model": m.state_dict(), "adam": adam.state_dict(), "t": torch.arange(6.0).reshape(2, 3).t()}
    for legacy in (False, True):
        path = tmp_path / f"w{legacy}.pth"
        torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
        same(torch.load(path), tl.load(path))
        same(torch.load(path), tl.load(str(path), map_location="cpu", mmap=not legacy))


def test_torch_big_endian_archive():
    x = torch.arange(5, dtype=torch.float64) / 3
    data = torch_bytes({"x": x})
    zin = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for n in zin.namelist():
            raw = zin.read(n)
            if n.endswith("byteorder"):
                raw = b"big"
            elif "/data/" in n:
                raw = np.frombuffer(raw, "<f8").astype(">f8").tobytes()
            z.writestr(n, raw)
    same({"x": x}, tl.load(io.BytesIO(out.getvalue())))


class _Custom:
    def __init__(self):
        self.v = 1


_RAN = []


class _Evil:
    def __reduce__(self):
        return (_RAN.append, ("ran",))


@pytest.mark.parametrize("bad, name", [(print, "builtins.print"), (_Custom(), f"{__name__}._Custom"),
                                       (_Evil(), "builtins.getattr")])
def test_torch_files_with_other_objects_are_refused(bad, name):
    data = torch_bytes({"w": torch.ones(2), "x": bad})
    for wo in (None, True, False):
        with pytest.raises(UnpicklingError, match=name.replace(".", r"\.")) as e:
            tl.load(io.BytesIO(data), weights_only=wo)
        assert isinstance(e.value, pickle.UnpicklingError) and isinstance(e.value, tl.TorchLeanError)
    assert _RAN == []


def test_torch_damaged_archive_is_refused():
    data = bytearray(torch_bytes({"w": torch.arange(100.0)}))
    i = bytes(data).index(np.arange(100.0, dtype=np.float32)[50:52].tobytes())
    data[i] ^= 1
    with pytest.raises(UnpicklingError, match="damaged"):
        tl.load(io.BytesIO(bytes(data)))
    with pytest.raises(tl.TorchLeanError):
        tl.load(io.BytesIO(bytes(data[: len(data) // 2])))


def test_out_of_bounds_view_is_refused():
    data = torch_bytes({"w": torch.arange(4.0)})
    zin = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for n in zin.namelist():
            raw = zin.read(n)
            if n.endswith("data.pkl"):   # the record claims 40 elements of a 4-element storage
                raw = raw.replace(b"K\x04\x85", b"K(\x85")
            z.writestr(n, raw)
    with pytest.raises(UnpicklingError, match="storage"):
        tl.load(io.BytesIO(out.getvalue()))


def test_mmap_needs_a_path():
    with pytest.raises(tl.TorchLeanError, match="mmap"):
        tl.load(io.BytesIO(b""), mmap=True)


def _relocated(data, location):
    """A torch.save archive whose storages claim to come from ``location`` (e.g. a GPU machine's file)."""
    zin = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for n in zin.namelist():
            raw = zin.read(n)
            if n.endswith("data.pkl"):
                loc = location.encode()
                raw = raw.replace(b"X\x03\x00\x00\x00cpu", b"X" + len(loc).to_bytes(4, "little") + loc)
            z.writestr(n, raw)
    return out.getvalue()


def test_map_location_for_a_gpu_saved_file():
    x = torch.arange(3.0)
    data = _relocated(torch_bytes({"x": x}), "cuda:0")
    for ml in ("cpu", {"cuda:0": "cpu"}, torch.device("cpu")):
        same({"x": x}, tl.load(io.BytesIO(data), map_location=ml))
    seen = []
    tl.load(io.BytesIO(data), map_location=lambda t, loc: seen.append(loc) or t)
    assert seen == ["cuda:0"]
    if not tl.cuda.is_available():
        with pytest.raises(tl.TorchLeanError, match="map_location='cpu'"):
            tl.load(io.BytesIO(data))
