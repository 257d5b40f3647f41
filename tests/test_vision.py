"""torchlean.vision (torchvision under `torchlean run`): datasets read from torchvision's file layouts,
downloads that never leave partial files, transforms, make_grid / save_image, and MNIST-style programs
run unchanged."""

import gzip
import hashlib
import io
import os
import pickle
import textwrap

import numpy as np
import pytest

import torchlean as tl
from torchlean import runner
from torchlean.errors import DatasetError, DomainError, DTypeError, SerializationError
from torchlean.vision import datasets, transforms, utils
from torchlean.vision.transforms import functional as TF

Image = pytest.importorskip("PIL.Image")


def _idx(a, code=0x08):
    return bytes([0, 0, code, a.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in a.shape) + a.tobytes()


def _mnist(root, n_train=12, n_test=5, gz=True, cls="MNIST"):
    """A small MNIST in torchvision's layout: images (n, 28, 28) with pixel values i + r + c."""
    raw = root / cls / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        img = ((np.arange(n)[:, None, None] * 7 + np.arange(28)[:, None] + np.arange(28)) % 256).astype(np.uint8)
        lab = (np.arange(n) % 10).astype(np.uint8)
        for name, a in ((f"{split}-images-idx3-ubyte", img), (f"{split}-labels-idx1-ubyte", lab)):
            if gz:
                with gzip.open(raw / (name + ".gz"), "wb") as f:
                    f.write(_idx(a))
            else:
                (raw / name).write_bytes(_idx(a))
        out[split] = (img, lab)
    return out


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_reads_torchvisions_layout(tmp_path, gz):
    want = _mnist(tmp_path, gz=gz)
    d = datasets.MNIST(str(tmp_path), train=True)
    assert len(d) == 12 and d.data.dtype == tl.uint8 and d.targets.dtype == tl.int64
    np.testing.assert_array_equal(d.data.numpy(), want["train"][0])
    img, y = d[3]
    assert isinstance(img, Image.Image) and img.mode == "L" and img.size == (28, 28) and y == 3
    np.testing.assert_array_equal(np.asarray(img), want["train"][0][3])
    t = datasets.MNIST(tmp_path, train=False, transform=transforms.ToTensor(), target_transform=lambda v: v * 10)
    x, y = t[4]
    assert len(t) == 5 and y == 40 and x.dtype == tl.float32 and tuple(x.shape) == (1, 28, 28)
    np.testing.assert_allclose(x.numpy()[0], want["t10k"][0][4] / 255.0, rtol=1e-6)
    assert t.class_to_idx["7 - seven"] == 7 and "Split: Test" in repr(t)


def test_fashion_and_kmnist_use_their_own_folders_and_classes(tmp_path):
    _mnist(tmp_path, cls="FashionMNIST")
    d = datasets.FashionMNIST(tmp_path)
    assert d.classes[9] == "Ankle boot" and len(d) == 12
    with pytest.raises(DatasetError, match=r"KMNIST: dataset not found in .*KMNIST.raw"):
        datasets.KMNIST(tmp_path)


def test_missing_and_malformed_files_raise_naming_them(tmp_path):
    with pytest.raises(DatasetError, match=r"MNIST: dataset not found in .*MNIST.raw .*train-images-idx3-ubyte"):
        datasets.MNIST(tmp_path)
    with pytest.raises(RuntimeError):              # torchvision raises RuntimeError: still caught
        datasets.MNIST(tmp_path, train=False)
    _mnist(tmp_path, gz=False)
    p = tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte"
    good = p.read_bytes()
    p.write_bytes(b"\x00\x00\x07\x03" + good[4:])
    with pytest.raises(SerializationError, match="not an IDX file"):
        datasets.MNIST(tmp_path)
    p.write_bytes(good[:-5])
    with pytest.raises(SerializationError, match=r"holds 9403 data bytes, its header \(12, 28, 28\) says 9408"):
        datasets.MNIST(tmp_path)
    p.write_bytes(_idx(np.zeros((11, 28, 28), np.uint8)))
    with pytest.raises(SerializationError, match=r"images \(11, 28, 28\) and labels \(12,\) .* do not pair up"):
        datasets.MNIST(tmp_path)


def test_download_checks_md5_and_leaves_no_partial_file(tmp_path, monkeypatch):
    src = tmp_path / "mirror"
    _mnist(src)
    files = sorted(os.listdir(src / "MNIST" / "raw"))
    md5 = {f: hashlib.md5((src / "MNIST" / "raw" / f).read_bytes()).hexdigest() for f in files}
    mirror = (src / "MNIST" / "raw").as_uri() + "/"
    monkeypatch.setattr(datasets.MNIST, "mirrors", ["file:///nonexistent-mirror/", mirror])
    monkeypatch.setattr(datasets.MNIST, "resources", [(f, md5[f]) for f in files])
    root = tmp_path / "data"
    d = datasets.MNIST(root, download=True)
    assert len(d) == 12 and sorted(os.listdir(root / "MNIST" / "raw")) == files
    # a file whose MD5 does not match is refused and nothing is left under its name or a temporary one
    monkeypatch.setattr(datasets.MNIST, "resources", [(f, "0" * 32) for f in files])
    bad = tmp_path / "bad"
    with pytest.raises(DatasetError, match=r"could not download t10k-images-idx3-ubyte.gz .*different MD5"):
        datasets.MNIST(bad, download=True)
    assert os.listdir(bad / "MNIST" / "raw") == []


def _cifar(root, n=4, hostile=False):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, n)]
        batches[name] = (data, labels)
        with open(folder / name, "wb") as f:
            pickle.dump({"batch_label": name, "data": data, "labels": labels}, f, protocol=2)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                                     "ship", "truck"]}, f, protocol=2)
    if hostile:
        class Evil:
            def __reduce__(self):
                return (os.system, ("echo pwned",))
        with open(folder / "test_batch", "wb") as f:
            pickle.dump({"data": Evil()}, f, protocol=2)
    return batches


def test_cifar10_reads_pickled_batches_and_refuses_code(tmp_path):
    batches = _cifar(tmp_path)
    d = datasets.CIFAR10(tmp_path, train=True)
    assert len(d) == 20 and d.classes[3] == "cat" and d.class_to_idx["truck"] == 9
    data, labels = batches["data_batch_2"]
    img, y = d[5]                                  # the second sample of the second batch
    assert isinstance(img, Image.Image) and img.mode == "RGB" and y == labels[1]
    np.testing.assert_array_equal(np.asarray(img), data[1].reshape(3, 32, 32).transpose(1, 2, 0))
    x = transforms.ToTensor()(img)
    np.testing.assert_allclose(x.numpy(), data[1].reshape(3, 32, 32) / 255.0, rtol=1e-6)
    evil = tmp_path / "evil"
    _cifar(evil, hostile=True)
    with pytest.raises(SerializationError, match=r"names posix.system, which is not a NumPy array part"):
        datasets.CIFAR10(evil, train=False)


def test_image_folder_sorts_classes_and_files(tmp_path):
    for cls, colours in (("dog", [(255, 0, 0), (0, 255, 0)]), ("cat", [(0, 0, 255)])):
        (tmp_path / cls).mkdir()
        for i, c in enumerate(colours):
            Image.new("RGB", (5, 4), c).save(tmp_path / cls / f"{i}.png")
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    d = datasets.ImageFolder(tmp_path, transform=transforms.ToTensor())
    assert d.classes == ["cat", "dog"] and d.targets == [0, 1, 1] and len(d) == 3
    x, y = d[2]
    assert y == 1 and tuple(x.shape) == (3, 4, 5) and x[1].min().item() == 1.0 and x[0].max().item() == 0.0
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="couldn't find any class folder"):
        datasets.ImageFolder(tmp_path / "empty")


def test_fake_data_repeats_each_index():
    d = datasets.FakeData(size=4, image_size=(3, 6, 5), num_classes=3)
    a, ya = d[2]
    b, yb = d[2]
    assert a.size == (5, 6) and a.mode == "RGB" and ya == yb and 0 <= ya < 3
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(d[1][0]))
    with pytest.raises(IndexError):
        d[4]


# ---- transforms ------------------------------------------------------------------------------------

def _rgb(h=6, w=8):
    return (np.arange(h * w * 3).reshape(h, w, 3) * 5 % 256).astype(np.uint8)


def test_to_tensor_and_back():
    a = _rgb()
    for pic in (a, Image.fromarray(a)):
        x = transforms.ToTensor()(pic)
        assert x.dtype == tl.float32 and tuple(x.shape) == (3, 6, 8)
        np.testing.assert_allclose(x.numpy(), a.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    p = transforms.ToPILImage()(transforms.ToTensor()(Image.fromarray(a)))
    assert p.mode == "RGB"
    np.testing.assert_array_equal(np.asarray(p), a)
    pt = transforms.PILToTensor()(Image.fromarray(a))
    assert pt.dtype == tl.uint8 and pt[:, 1, 2].tolist() == a[1, 2].tolist()
    f = transforms.ToTensor()(np.ones((2, 3), np.float64) * 0.5)         # float arrays keep their values
    assert f.dtype == tl.float64 and f.tolist() == [[[0.5] * 3] * 2]
    assert transforms.ToTensor()(Image.fromarray(a[:, :, 0]).convert("1")).max().item() == 1.0
    with pytest.raises(DTypeError, match="to_tensor: pic should be a PIL Image or ndarray"):
        transforms.ToTensor()(tl.ones(3, 2, 2))


def test_normalize_is_per_channel_and_checks_its_input():
    x = tl.tensor(np.random.default_rng(1).random((2, 3, 4, 5)), dtype=tl.float32)
    m, s = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    y = transforms.Normalize(m, s)(x)
    want = (x.numpy() - np.array(m, np.float32)[:, None, None]) / np.array(s, np.float32)[:, None, None]
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    z = x.clone()
    assert transforms.Normalize(m, s, inplace=True)(z) is z
    np.testing.assert_allclose(z.numpy(), want, rtol=1e-6)
    with pytest.raises(DomainError, match="std evaluated to zero"):
        TF.normalize(x, m, (1.0, 0.0, 1.0))
    with pytest.raises(DTypeError, match="input tensor should be a float tensor"):
        TF.normalize(tl.ones(3, 2, 2, dtype=tl.int64), m, s)


def test_resize_matches_pillow_and_interpolate():
    a = _rgb(6, 8)
    p = transforms.Resize(3)(Image.fromarray(a))                 # smaller edge 6 -> 3, width 8 -> 4
    assert p.size == (4, 3)
    np.testing.assert_array_equal(np.asarray(p), np.asarray(Image.fromarray(a).resize((4, 3), Image.BILINEAR)))
    assert transforms.Resize((5, 7))(Image.fromarray(a)).size == (7, 5)
    assert transforms.Resize(10, max_size=12)(Image.fromarray(a)).size == (12, 9)
    x = tl.tensor(a.transpose(2, 0, 1).astype(np.float32))
    y = transforms.Resize((3, 4))(x)
    want = tl.nn.functional.interpolate(x[None], size=(3, 4), mode="bilinear", align_corners=False,
                                        antialias=True)[0]
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-6)
    n = transforms.Resize((12, 16), interpolation=transforms.InterpolationMode.NEAREST)(x)
    np.testing.assert_array_equal(n.numpy()[:, ::2, ::2], x.numpy())
    with pytest.raises(DomainError, match="max_size = 3 must be strictly greater"):
        transforms.Resize(3, max_size=3)(x)


def test_crops_pads_and_flips():
    a = _rgb(6, 8)
    x = tl.tensor(a.transpose(2, 0, 1).copy())
    c = transforms.CenterCrop((2, 4))(x)
    np.testing.assert_array_equal(c.numpy(), a.transpose(2, 0, 1)[:, 2:4, 2:6])
    np.testing.assert_array_equal(np.asarray(transforms.CenterCrop((2, 4))(Image.fromarray(a))), a[2:4, 2:6])
    big = transforms.CenterCrop(10)(x)                          # smaller image: zero-padded around it
    assert tuple(big.shape) == (3, 10, 10) and big[:, :2].abs().sum().item() == 0
    np.testing.assert_array_equal(big.numpy()[:, 2:8, 1:9], a.transpose(2, 0, 1))
    for mode in ("constant", "edge", "reflect", "symmetric"):
        got = transforms.Pad((1, 2), padding_mode=mode)(Image.fromarray(a))
        want = np.pad(a, ((2, 2), (1, 1), (0, 0)), mode=mode)
        np.testing.assert_array_equal(np.asarray(got), want)
        gt = transforms.Pad((1, 2, 3, 0), padding_mode=mode)(x)
        np.testing.assert_array_equal(gt.numpy(), np.pad(a.transpose(2, 0, 1), ((0, 0), (2, 0), (1, 3)), mode=mode))
    tl.manual_seed(3)
    crops = [transforms.RandomCrop(4, padding=2)(x) for _ in range(6)]
    tl.manual_seed(3)
    again = [transforms.RandomCrop(4, padding=2)(x) for _ in range(6)]
    assert all(np.array_equal(u.numpy(), v.numpy()) for u, v in zip(crops, again))
    padded = np.pad(a.transpose(2, 0, 1), ((0, 0), (2, 2), (2, 2)))
    windows = {padded[:, i:i + 4, j:j + 4].tobytes() for i in range(7) for j in range(9)}
    assert all(u.numpy().tobytes() in windows for u in crops) and len({u.numpy().tobytes() for u in crops}) > 1
    np.testing.assert_array_equal(transforms.RandomHorizontalFlip(1.0)(x).numpy(), a.transpose(2, 0, 1)[:, :, ::-1])
    np.testing.assert_array_equal(np.asarray(transforms.RandomVerticalFlip(1.0)(Image.fromarray(a))), a[::-1])
    assert transforms.RandomHorizontalFlip(0.0)(x) is x
    with pytest.raises(DomainError, match=r"required crop size \(7, 9\) is larger than input image size \(6, 8\)"):
        transforms.RandomCrop((7, 9))(x)


def test_random_resized_crop_grayscale_compose_lambda():
    a = _rgb(16, 16)
    tl.manual_seed(0)
    out = transforms.RandomResizedCrop(8, scale=(0.3, 0.6))(Image.fromarray(a))
    assert out.size == (8, 8)
    g = transforms.Grayscale()(tl.tensor(a.transpose(2, 0, 1).astype(np.float32)))
    want = a[..., 0] * 0.2989 + a[..., 1] * 0.587 + a[..., 2] * 0.114
    np.testing.assert_allclose(g.numpy()[0], want, rtol=1e-5)
    assert transforms.Grayscale(3)(Image.fromarray(a)).mode == "RGB"
    t = transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda v: v * 2)])
    np.testing.assert_allclose(t(a).numpy(), a.transpose(2, 0, 1) / 127.5, rtol=1e-6)
    assert "Lambda()" in repr(t) and "ToTensor()" in repr(t)
    with pytest.raises(DTypeError, match="Lambda: argument should be callable"):
        transforms.Lambda(3)
    assert TF.convert_image_dtype(tl.tensor([[[255]]], dtype=tl.uint8)).item() == 1.0


# ---- utils -----------------------------------------------------------------------------------------

def test_make_grid_places_each_image_with_padding():
    imgs = tl.stack([tl.full((1, 2, 3), float(i)) for i in range(5)])
    g = utils.make_grid(imgs, nrow=2, padding=1, pad_value=-1.0)
    assert tuple(g.shape) == (3, 3 * 3 + 1, 2 * 4 + 1)          # 1 channel repeated to 3
    a = g.numpy()
    for k in range(5):
        r, c = divmod(k, 2)
        np.testing.assert_array_equal(a[:, 1 + 3 * r:3 + 3 * r, 1 + 4 * c:4 + 4 * c], k)
    assert (a[:, 7:9, 5:8] == -1).all() and (a[:, 0] == -1).all()   # the missing sixth cell, the top border
    n = utils.make_grid(imgs, normalize=True, padding=0)
    assert n.min().item() == 0.0 and n.max().item() == 1.0
    assert tuple(utils.make_grid(tl.ones(1, 3, 4, 4)).shape) == (3, 4, 4)


def test_save_image_writes_an_rgb_png(tmp_path):
    x = tl.tensor(np.linspace(0, 1, 2 * 3 * 4, dtype=np.float32).reshape(2, 1, 3, 4))
    p = tmp_path / "grid.png"
    utils.save_image(x, str(p), nrow=2, padding=0)
    img = Image.open(p)
    assert img.mode == "RGB" and img.size == (8, 3)
    want = np.clip(np.concatenate([x.numpy()[0, 0], x.numpy()[1, 0]], axis=1) * 255 + 0.5, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(np.asarray(img)[..., 0], want)
    buf = io.BytesIO()
    utils.save_image(x[0], buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"


# ---- programs --------------------------------------------------------------------------------------

def test_an_mnist_program_runs_unchanged_through_torchlean_run(tmp_path):
    _mnist(tmp_path / "data", n_train=64, n_test=16)
    script = tmp_path / "main.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import torchvision
        from torchvision import datasets, transforms
        from torchvision.utils import save_image
        import torchvision.transforms.functional as TF
        torch.manual_seed(0)
        tf = transforms.Compose([transforms.RandomCrop(28, padding=2), transforms.ToTensor(),
                                 transforms.Normalize((0.1307,), (0.3081,))])
        train = torch.utils.data.DataLoader(datasets.MNIST("data", train=True, download=True, transform=tf),
                                            batch_size=16, shuffle=True)
        test = datasets.MNIST("data", train=False, transform=transforms.ToTensor())
        model = nn.Sequential(nn.Conv2d(1, 4, 3, 2), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 13 * 13, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in train:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        save_image(torch.stack([test[i][0] for i in range(4)]), "samples.png", nrow=2)
        print("batches", len(train), "loss", round(loss.item(), 3) > 0, tuple(TF.hflip(test[0][0]).shape))
        """))
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        import contextlib
        with contextlib.redirect_stdout(out):
            code = runner.run_script(str(script), out=out)
    finally:
        os.chdir(cwd)
    assert code == 0, out.getvalue()
    assert "batches 4 loss True (1, 28, 28)" in out.getvalue()
    assert Image.open(tmp_path / "samples.png").size == (62, 62)


def test_a_missing_torchvision_name_is_reported_as_torchvision(tmp_path):
    script = tmp_path / "uses.py"
    script.write_text("import torchvision\nfrom torchvision import datasets\nd = datasets.NoSuchSet('x')\n")
    err = io.StringIO()
    assert runner.run_script(str(script), out=err) == 2
    assert "torchvision.datasets.NoSuchSet is not available in torchlean" in err.getvalue()


def test_v2_transforms_match_v1_and_pass_other_inputs_through():
    from torchlean.vision.transforms import v2
    a = _rgb(10, 12)
    v1 = transforms.Compose([transforms.ToTensor(), transforms.CenterCrop(6), transforms.Normalize((0.5,) * 3, (0.2,) * 3)])
    new = v2.Compose([v2.ToImage(), v2.ToDtype(tl.float32, scale=True), v2.CenterCrop(6),
                      v2.Normalize((0.5,) * 3, (0.2,) * 3)])
    np.testing.assert_allclose(new(Image.fromarray(a)).numpy(), v1(Image.fromarray(a)).numpy(), rtol=1e-6)
    img = v2.ToImage()(Image.fromarray(a))
    assert img.dtype == tl.uint8 and tuple(img.shape) == (3, 10, 12)
    x, label, extra = new(Image.fromarray(a), 3, "keep")
    assert tuple(x.shape) == (3, 6, 6) and label == 3 and extra == "keep"
    pair = v2.RandomHorizontalFlip(1.0)((tl.tensor(a.transpose(2, 0, 1).copy()), {"label": 1}))
    np.testing.assert_array_equal(pair[0].numpy(), a.transpose(2, 0, 1)[:, :, ::-1])
    assert pair[1] == {"label": 1}
    back = v2.ToDtype(tl.uint8, scale=True)(tl.tensor([[[0.0, 1.0]]]))
    assert back.dtype == tl.uint8 and back.tolist() == [[[0, 255]]]
    assert v2.ToDtype(tl.float64)(img).max().item() == a.max()


def test_colour_jitter_and_erasing():
    from PIL import ImageEnhance
    a = _rgb(8, 10)
    p = Image.fromarray(a)
    np.testing.assert_array_equal(np.asarray(TF.adjust_contrast(p, 0.5)),
                                  np.asarray(ImageEnhance.Contrast(p).enhance(0.5)))
    x = tl.tensor(a.transpose(2, 0, 1).astype(np.float32) / 255)
    np.testing.assert_allclose(TF.adjust_brightness(x, 0.5).numpy(), x.numpy() * 0.5, rtol=1e-6)
    grey = TF.adjust_saturation(x, 0.0).numpy()
    np.testing.assert_allclose(grey[0], grey[2], rtol=1e-6)                 # no colour left
    for h in (0.0, 0.5, -0.5):                                              # a full or null turn of the hue wheel
        back = TF.adjust_hue(TF.adjust_hue(x, h), -h) if h else TF.adjust_hue(x, 0.0)
        np.testing.assert_allclose(back.numpy(), x.numpy(), atol=2e-6)
    jit = transforms.ColorJitter(0.4, 0.4, 0.4, 0.1)
    tl.manual_seed(5)
    one = jit(x)
    tl.manual_seed(5)
    np.testing.assert_array_equal(jit(x).numpy(), one.numpy())
    assert not np.array_equal(one.numpy(), x.numpy()) and 0 <= one.min().item() and one.max().item() <= 1
    assert transforms.ColorJitter().brightness is None and transforms.ColorJitter(hue=0.2).hue == (-0.2, 0.2)
    with pytest.raises(DomainError, match=r"hue values should be between \(-0.5, 0.5\)"):
        transforms.ColorJitter(hue=0.7)
    tl.manual_seed(0)
    e = transforms.RandomErasing(p=1.0, value=(0.1, 0.2, 0.3))(x)
    changed = (e.numpy() != x.numpy()).any(axis=0)
    rows, cols = np.flatnonzero(changed.any(axis=1)), np.flatnonzero(changed.any(axis=0))
    assert changed.sum() > 0 and changed[rows.min():rows.max() + 1, cols.min():cols.max() + 1].all()
    np.testing.assert_allclose(e.numpy()[:, rows.min(), cols.min()], [0.1, 0.2, 0.3], rtol=1e-6)
    assert transforms.RandomErasing(p=0.0)(x) is x
    with pytest.raises(DomainError, match="should be a number or a sequence of length 1 or 3"):
        transforms.RandomErasing(p=1.0, value=(1, 2))(x)
    from torchlean.vision.transforms import v2
    assert v2.ColorJitter(0.2)(x, 4)[1] == 4
