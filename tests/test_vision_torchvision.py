"""torchlean.vision against torchvision itself, where torchvision imports (it is not a test dependency:
its wheels are built against a CUDA torch, so these tests skip in CI): the same files read, the same
transforms applied, the same grids saved."""

import sys
import types

import numpy as np
import pytest

import torchlean as tl
from torchlean.vision import datasets, transforms, utils
from torchlean.vision.transforms import functional as TF

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")


def _torchvision():
    try:
        import torchvision
    except ImportError:
        pytest.skip("torchvision is not installed")
    except RuntimeError:
        # a torchvision wheel whose compiled ops do not load against this torch: the Python parts
        # (datasets, transforms, utils) work once its operator registrations are skipped
        for k in [k for k in sys.modules if k.startswith("torchvision")]:
            del sys.modules[k]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
        import torchvision
    return torchvision


def _rgb(h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


PIPELINES = [
    ("to_tensor_normalize", lambda T: T.Compose([T.ToTensor(), T.Normalize((0.485, 0.456, 0.406),
                                                                           (0.229, 0.224, 0.225))])),
    ("resize_int_center_crop", lambda T: T.Compose([T.Resize(20), T.CenterCrop(16), T.ToTensor()])),
    ("resize_pair_bicubic", lambda T: T.Compose([T.Resize((9, 31), interpolation=T.InterpolationMode.BICUBIC),
                                                 T.PILToTensor()])),
    ("center_crop_larger", lambda T: T.Compose([T.CenterCrop((40, 50)), T.ToTensor()])),
    ("pad_reflect_grayscale", lambda T: T.Compose([T.Pad((2, 3), padding_mode="reflect"), T.Grayscale(3),
                                                   T.ToTensor()])),
    ("tensor_resize_antialias", lambda T: T.Compose([T.ToTensor(), T.Resize((11, 13))])),
    ("tensor_center_crop_pad", lambda T: T.Compose([T.PILToTensor(), T.CenterCrop((30, 8)), T.Pad(1, fill=7)])),
    ("tensor_grayscale", lambda T: T.Compose([T.ToTensor(), T.Grayscale()])),
]


@pytest.mark.parametrize("name,make", PIPELINES, ids=[n for n, _ in PIPELINES])
def test_deterministic_pipelines_equal_torchvisions(name, make):
    tv = _torchvision()
    img = Image.fromarray(_rgb(24, 37))
    ours = make(transforms)(img)
    theirs = make(tv.transforms)(img)
    assert tuple(ours.shape) == tuple(theirs.shape) and str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.numpy().astype(np.float64), rtol=1e-5,
                               atol=2e-6 if ours.dtype.is_floating_point else 0)


def test_pil_outputs_and_to_pil_image_equal_torchvisions():
    tv = _torchvision()
    a = _rgb(15, 22, 1)
    for ours, theirs in ((transforms.Resize(7), tv.transforms.Resize(7)),
                         (transforms.Pad((1, 2, 3, 4), padding_mode="symmetric"),
                          tv.transforms.Pad((1, 2, 3, 4), padding_mode="symmetric")),
                         (transforms.RandomHorizontalFlip(1.0), tv.transforms.RandomHorizontalFlip(1.0))):
        np.testing.assert_array_equal(np.asarray(ours(Image.fromarray(a))), np.asarray(theirs(Image.fromarray(a))))
    x = np.random.default_rng(2).random((3, 5, 6)).astype(np.float32)
    p = TF.to_pil_image(tl.tensor(x))
    q = tv.transforms.functional.to_pil_image(torch.tensor(x))
    assert p.mode == q.mode and np.array_equal(np.asarray(p), np.asarray(q))


def test_mnist_and_make_grid_equal_torchvisions(tmp_path):
    tv = _torchvision()
    from test_vision import _mnist
    _mnist(tmp_path, gz=False)
    ours = datasets.MNIST(tmp_path, transform=transforms.ToTensor())
    theirs = tv.datasets.MNIST(str(tmp_path), transform=tv.transforms.ToTensor())
    assert len(ours) == len(theirs) and ours.classes == theirs.classes
    for i in (0, 7):
        np.testing.assert_array_equal(ours[i][0].numpy(), theirs[i][0].numpy())
        assert ours[i][1] == theirs[i][1]
    batch = np.random.default_rng(3).random((5, 1, 4, 6)).astype(np.float32) * 3 - 1
    for kw in ({}, {"nrow": 2, "padding": 1, "pad_value": 0.5}, {"normalize": True},
               {"normalize": True, "value_range": (-0.5, 0.5), "scale_each": True}):
        np.testing.assert_allclose(utils.make_grid(tl.tensor(batch), **kw).numpy(),
                                   tv.utils.make_grid(torch.tensor(batch), **kw).numpy(), rtol=1e-6, atol=1e-7)
    utils.save_image(tl.tensor(batch), tmp_path / "a.png", nrow=3, normalize=True)
    tv.utils.save_image(torch.tensor(batch), tmp_path / "b.png", nrow=3, normalize=True)
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "a.png")), np.asarray(Image.open(tmp_path / "b.png")))


def test_v2_pipelines_equal_torchvisions():
    _torchvision()
    from torchlean.vision.transforms import v2
    img = Image.fromarray(_rgb(21, 30, 4))

    def make(T, dt):
        return T.Compose([T.ToImage(), T.ToDtype(dt, scale=True), T.Resize(12), T.CenterCrop(10),
                          T.Normalize((0.4, 0.5, 0.6), (0.2, 0.3, 0.4))])
    ours = make(v2, tl.float32)(img)
    import torchvision.transforms.v2 as tv2
    theirs = make(tv2, torch.float32)(img)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("fn,factor", [("adjust_brightness", 1.3), ("adjust_brightness", 0.4),
                                       ("adjust_contrast", 0.6), ("adjust_contrast", 1.7),
                                       ("adjust_saturation", 0.3), ("adjust_saturation", 1.8),
                                       ("adjust_hue", 0.2), ("adjust_hue", -0.45)])
def test_colour_adjustments_equal_torchvisions(fn, factor):
    tv = _torchvision()
    a = _rgb(9, 11, 5)
    ours = getattr(TF, fn)(Image.fromarray(a), factor)
    theirs = getattr(tv.transforms.functional, fn)(Image.fromarray(a), factor)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))          # PIL: Pillow's own enhancers
    x = a.transpose(2, 0, 1).astype(np.float32) / 255
    ours_t = getattr(TF, fn)(tl.tensor(x), factor).numpy()
    theirs_t = getattr(tv.transforms.functional, fn)(torch.tensor(x), factor).numpy()
    np.testing.assert_allclose(ours_t, theirs_t, rtol=1e-5, atol=2e-6)
    u8 = getattr(TF, fn)(tl.tensor(a.transpose(2, 0, 1).copy()), factor).numpy().astype(int)
    tu8 = getattr(tv.transforms.functional, fn)(torch.tensor(a.transpose(2, 0, 1).copy()), factor).numpy().astype(int)
    assert np.abs(u8 - tu8).max() <= 1          # uint8 rounding of a float32 intermediate
