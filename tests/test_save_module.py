"""tl.save of a whole Module (torch.save(model, f)) and tl.load of it: rebuilt from its class (already
imported; never imported by load) and its attributes, without running any of its code."""

import io
import json
import sys
import types

import numpy as np
import pytest

import torchlean as tl
import torchlean.nn as nn
from torchlean import serialization as S

stn = pytest.importorskip("safetensors.numpy")


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.rnn = nn.LSTM(4, 6, batch_first=True)
        self.enc = nn.TransformerEncoderLayer(6, 2, 12, dropout=0.0, batch_first=True)
        self.norm = nn.BatchNorm1d(6)
        self.head = nn.Linear(4, 7, bias=False)
        self.head.weight = self.emb.weight           # tied
        self.proj = nn.Linear(6, 4)
        self.vocab = ["a", "b"]
        self.config = {"layers": 1, "eps": 1e-5}

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        h = self.enc(h)
        h = self.norm(h.transpose(1, 2)).transpose(1, 2)
        return self.head(self.proj(h))


def _roundtrip(obj):
    buf = io.BytesIO()
    tl.save(obj, buf)
    return tl.load(io.BytesIO(buf.getvalue()))


def test_a_whole_module_round_trips():
    tl.manual_seed(0)
    m = Tied()
    for _ in range(2):
        m(tl.randint(0, 7, (3, 5)))                  # running statistics move
    m.eval()
    got = _roundtrip({"model": m, "epoch": 4})
    m2 = got["model"]
    assert type(m2) is Tied and got["epoch"] == 4 and not m2.training
    assert m2.head.weight is m2.emb.weight and isinstance(m2.head.weight, nn.Parameter)
    assert len(list(m2.parameters())) == len(list(m.parameters()))
    x = tl.randint(0, 7, (2, 5))
    np.testing.assert_array_equal(m2(x).detach().numpy(), m(x).detach().numpy())
    assert m2.vocab == ["a", "b"] and m2.config == {"layers": 1, "eps": 1e-5}
    assert m2.enc.activation is m.enc.activation     # torchlean's own function, by name
    for (k, a), b in zip(m.state_dict().items(), m2.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    opt = tl.optim.SGD(m2.parameters(), lr=0.1)      # it trains like the original
    m2.train()
    m2(x).sum().backward()
    opt.step()


def test_loading_never_imports_the_class():
    mod = types.ModuleType("port_models_tmp")
    exec("import torchlean.nn as nn\nclass Net(nn.Module):\n"
         "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n", mod.__dict__)
    sys.modules["port_models_tmp"] = mod
    try:
        buf = io.BytesIO()
        tl.save(mod.Net(), buf)
    finally:
        del sys.modules["port_models_tmp"]
    with pytest.raises(tl.TorchLeanError, match="port_models_tmp.Net.*not imported.*never imports"):
        tl.load(io.BytesIO(buf.getvalue()))


def test_what_cannot_be_saved_or_loaded_is_refused():
    m = nn.Linear(2, 2)
    m.register_forward_hook(lambda *a: None)
    with pytest.raises(tl.TorchLeanError, match="hooks"):
        tl.save(m, io.BytesIO())
    m = nn.Linear(2, 2)
    m.act = lambda x: x                              # user code is not stored
    with pytest.raises(tl.TorchLeanError, match="function"):
        tl.save(m, io.BytesIO())
    # A crafted file naming a class that is not a Module, or a function outside torchlean, is refused.
    buf = io.BytesIO()
    tl.save(nn.Linear(2, 2), buf)
    data = buf.getvalue()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    for record, match in (({"__module__": ["os", "_wrap_close"], "attrs": []}, "not an nn.Module"),
                          ({"__function__": ["os", "system"]}, "not one of torchlean's functions"),
                          ({"__dict__": [["w", {"__tensor__": "nope"}]]}, "metadata field 'tree' is malformed")):
        meta = dict(header["__metadata__"], tree=json.dumps(record))
        meta.pop("sha256")
        arrays = stn.load(data)
        entries = [(k, S._CODE_OF[tl.dtypes.dtype_of(a.dtype).name], a.shape, a.reshape(-1).view(np.uint8))
                   for k, a in arrays.items()]
        meta["sha256"] = S._digest(meta, entries)
        with pytest.raises(tl.errors.SerializationError, match=match):
            tl.load(io.BytesIO(stn.save(arrays, metadata=meta)))


def test_nn_modules_submodules_are_attributes():
    import torchlean.nn.modules as M
    assert M.dropout.Dropout is nn.Dropout and M.rnn.LSTM is nn.LSTM and M.linear.Linear is nn.Linear
