"""The example models: PyTorch twins (same weights, same batches), structure, and quality bars on real data."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import torchlean as tl
from torchlean import train as T
from torchlean.data import DataLoader, TensorDataset, as_images, load_digits
from torchlean.models import CNN, FNO1d, GPT, MLP, MambaLM, ResNet, ViT

torch = pytest.importorskip("torch")


def _bench_models():
    return importlib.import_module("torchlean.bench.bench_models")


# ---- the MLP and CNN twins, written out here -------------------------------------------------------

class TorchMLP(torch.nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        layers, prev = [], in_features
        for h in hidden:
            layers += [torch.nn.Linear(prev, h), torch.nn.ReLU()]
            prev = h
        layers.append(torch.nn.Linear(prev, out_features))
        self.net = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def _load_into_torch(ours, twin):
    twin.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()}, strict=True)


def _track_20_steps(ours, twin, images, lr=2e-3):
    """Adam on the same digits batches in both; returns the two loss sequences and the final weights."""
    x, y = load_digits("train")
    if images:
        x = as_images(x)
    _load_into_torch(ours, twin)
    opt = tl.optim.Adam(ours.parameters(), lr=lr)
    topt = torch.optim.Adam(twin.parameters(), lr=lr)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, seed=0)
    ours_l, theirs_l = [], []
    for i, (xb, yb) in enumerate(loader):
        if i == 20:
            break
        loss = tl.nn.F.cross_entropy(ours(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ours_l.append(loss.item())
        tloss = torch.nn.functional.cross_entropy(twin(torch.tensor(xb.numpy())), torch.tensor(yb.numpy()))
        topt.zero_grad()
        tloss.backward()
        topt.step()
        theirs_l.append(tloss.item())
    return np.array(ours_l), np.array(theirs_l)


def _max_param_diff(ours, twin):
    sd = twin.state_dict()
    return max(float(np.max(np.abs(v.numpy() - sd[k].numpy()))) for k, v in ours.state_dict().items())


def test_mlp_tracks_torch_for_20_steps():
    tl.manual_seed(0)
    ours = MLP(64, [128, 64], 10)
    twin = TorchMLP(64, [128, 64], 10)
    a, b = _track_20_steps(ours, twin, images=False)
    assert a[-5:].mean() < a[0] - 0.1  # it learns
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert _max_param_diff(ours, twin) < 1e-4


def test_cnn_tracks_torch_for_20_steps():
    tl.manual_seed(0)
    ours = CNN()
    twin = TorchCNN()
    a, b = _track_20_steps(ours, twin, images=True)
    assert a[-5:].mean() < a[0] - 0.1
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert _max_param_diff(ours, twin) < 1e-4


# ---- every model vs its twin: forward and gradients ------------------------------------------------

SMALL = {
    "mlp": {}, "cnn": {}, "resnet": {}, "vit": {"dim": 32, "depth": 1},
    "fno1d": {"modes": 8, "width": 16, "n_layers": 2},
    "gpt": {"n_layer": 1, "n_embd": 32, "n_head": 4},
    "mamba": {"d_model": 32, "n_layer": 2, "d_state": 4},
}


@pytest.mark.parametrize("name", list(SMALL))
def test_forward_and_gradients_match_torch_twin(name):
    B = _bench_models()
    ours, twin = B.make_pair(name, seed=1, **SMALL[name])
    xb, yb = B.make_batch(name, 8, seed=2)
    if name in ("gpt", "mamba"):
        xb, yb = xb[:, :16], yb[:, :16]
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in twin.named_parameters()]
    x, y = tl.tensor(xb), tl.tensor(yb)
    loss = B.loss_ours(name, ours(x), y)
    loss.backward()
    tloss = B.loss_torch(name, twin(torch.tensor(xb)), torch.tensor(yb))
    tloss.backward()
    assert abs(loss.item() - tloss.item()) <= 1e-5 * max(1.0, abs(tloss.item()))
    tgrads = dict(twin.named_parameters())
    for k, p in ours.named_parameters():
        g, tg = p.grad.numpy(), tgrads[k].grad.numpy()
        scale = max(1e-6, float(np.max(np.abs(tg))))
        assert float(np.max(np.abs(g - tg))) <= 2e-4 * scale, k


def test_resnet_batch_norm_running_stats_and_eval_match_torch():
    B = _bench_models()
    ours, twin = B.make_pair("resnet", seed=3)
    xb, _ = B.make_batch("resnet", 16, seed=4)
    ours(tl.tensor(xb))
    twin(torch.tensor(xb))
    sd = twin.state_dict()
    for k, v in ours.state_dict().items():
        np.testing.assert_allclose(v.numpy(), sd[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    ours.eval()
    twin.eval()
    with tl.no_grad():
        out = ours(tl.tensor(xb)).numpy()
    np.testing.assert_allclose(out, twin(torch.tensor(xb)).detach().numpy(), rtol=1e-4, atol=1e-5)


# ---- structure ---------------------------------------------------------------------------------------

def test_gpt_is_causal_and_ties_weights():
    tl.manual_seed(0)
    m = GPT(vocab_size=11, block_size=12, n_layer=1, n_head=2, n_embd=16)
    assert m.lm_head.weight is m.transformer.wte.weight
    names = [k for k, _ in m.named_parameters()]
    assert "lm_head.weight" not in names and "lm_head.weight" in m.state_dict()
    ids = np.arange(12)[None] % 11
    other = ids.copy()
    other[0, 7:] = (other[0, 7:] + 3) % 11
    with tl.no_grad():
        a, b = m(tl.tensor(ids)).numpy(), m(tl.tensor(other)).numpy()
    np.testing.assert_array_equal(a[0, :7], b[0, :7])
    assert not np.allclose(a[0, 7:], b[0, 7:])
    with pytest.raises(tl.errors.ShapeError, match="block_size 12"):
        m(tl.tensor(np.zeros((1, 13), dtype=np.int64)))
    untied = GPT(vocab_size=11, block_size=12, n_layer=1, n_head=2, n_embd=16, tie_weights=False)
    assert untied.lm_head.weight is not untied.transformer.wte.weight


def test_mamba_is_causal_and_uses_token_dependent_scan(monkeypatch):
    tl.manual_seed(0)
    m = MambaLM(vocab_size=9, d_model=16, n_layer=1, d_state=4)
    ids = (np.arange(10)[None] * 5) % 9
    other = ids.copy()
    other[0, 6:] = (other[0, 6:] + 1) % 9
    with tl.no_grad():
        a, b = m(tl.tensor(ids)).numpy(), m(tl.tensor(other)).numpy()
    np.testing.assert_array_equal(a[0, :6], b[0, :6])
    assert not np.allclose(a[0, 6:], b[0, 6:])
    seen = []
    with tl.autograd.tracing(lambda op, *_: seen.append(op)):
        m(tl.tensor(ids))
    assert "selective_scan_var" in seen and "selective_scan" not in seen
    sd = m.state_dict()
    assert sd["layers.0.mixer.A_log"].shape == (32, 4) and sd["layers.0.mixer.D"].shape == (32,)
    assert sd["layers.0.mixer.conv1d.weight"].shape == (32, 1, 4)


def test_fno_runs_on_other_resolutions():
    tl.manual_seed(0)
    m = FNO1d(modes=8, width=16, n_layers=2)
    for grid in (32, 64, 128):
        assert m(tl.zeros(2, grid)).shape == (2, grid)
    assert m(tl.zeros(2, 32, 1)).shape == (2, 32, 1)


def test_vit_shapes_and_names():
    tl.manual_seed(0)
    m = ViT(dim=32, depth=1, num_heads=4)
    names = dict(m.named_parameters())
    assert names["pos_embed"].shape == (1, 17, 32) and names["cls_token"].shape == (1, 1, 32)
    assert names["blocks.0.attn.in_proj_weight"].shape == (96, 32)
    assert m(tl.zeros(3, 1, 8, 8)).shape == (3, 10)
    with pytest.raises(tl.errors.ShapeError, match="patch_size"):
        ViT(image_size=8, patch_size=3)


def test_resnet_structure():
    tl.manual_seed(0)
    m = ResNet(widths=(8, 16), blocks_per_stage=2)
    keys = m.state_dict().keys()
    assert "layer2.0.downsample.0.weight" in keys and "layer2.1.downsample.0.weight" not in keys
    assert "layer1.0.bn1.running_var" in keys and "layer1.0.bn1.num_batches_tracked" in keys
    assert m(tl.zeros(2, 1, 8, 8)).shape == (2, 10)


# ---- quality bars on the bundled data ----------------------------------------------------------------

def _fit(name, **kw):
    t = T.build_task(name, progress="none", **kw)
    t.fit()
    return t


def test_mlp_reaches_95_percent_on_digits():
    t = _fit("mlp")
    assert t.final_metrics()["accuracy"] >= 0.95


def test_cnn_reaches_97_percent_on_digits():
    t = _fit("cnn")
    assert t.final_metrics()["accuracy"] >= 0.97


def test_fno_reaches_5_percent_relative_l2_on_burgers():
    t = _fit("fno1d", epochs=20, build=T.burgers_task(n_train=400, n_test=100, width=24, modes=12))
    assert t.final_metrics()["rel_l2"] <= 0.05


@pytest.mark.parametrize("kind,model_kw", [("gpt", {"n_embd": 48, "n_layer": 1}),
                                           ("mamba", {"d_model": 32, "n_layer": 1})])
def test_language_models_beat_the_unigram_baseline(kind, model_kw):
    t = _fit(kind, steps=150, batch_size=16,
             build=T.text_task(kind, block=32, max_chars=200_000, **model_kw))
    res = t.final_metrics()
    assert res["val_loss"] < res["unigram"] - 0.4, res
