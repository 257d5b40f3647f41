"""torchvision.datasets under torchlean: the datasets example programs load, read from torchvision's own
file layouts, so a folder torchvision downloaded is used as it is.

- :class:`MNIST`, :class:`FashionMNIST`, :class:`KMNIST`: ``root/<Class>/raw/{train,t10k}-{images-idx3,
  labels-idx1}-ubyte`` (or the ``.gz`` files); samples are ``(PIL Image "L", int)``.
- :class:`CIFAR10`, :class:`CIFAR100`: ``root/cifar-10-batches-py`` / ``root/cifar-100-python``; their
  pickled batches are read by an unpickler that builds NumPy arrays and plain containers only.
- :class:`ImageFolder` / :class:`DatasetFolder`: ``root/<class>/<file>``, classes sorted by name.
- :class:`FakeData`: random images, the same image for the same index on every call.

``download=True`` fetches missing files from torchvision's mirrors, checks their MD5, and moves them
into place only when complete (an interrupted download leaves no partial file under the final name).
Without a network, or with ``download=False``, a missing dataset raises :class:`DatasetError` naming
the folder and files it looked for.

    >>> from torchlean.vision import datasets, transforms
    >>> d = datasets.FakeData(size=3, image_size=(1, 4, 4), num_classes=2, transform=transforms.ToTensor())
    >>> x, y = d[0]
    >>> tuple(x.shape), y in (0, 1), bool((d[0][0] == x).all())
    ((1, 4, 4), True, True)
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import io
import os
import pickle
import tarfile
import urllib.error
import urllib.request

import numpy as np

from .. import ops
from ..errors import DatasetError, SerializationError
from ..fileio import atomic_write
from ..utils.data import Dataset
from .transforms.functional import pil

__all__ = ["VisionDataset", "MNIST", "FashionMNIST", "KMNIST", "CIFAR10", "CIFAR100", "DatasetFolder",
           "ImageFolder", "FakeData", "IMG_EXTENSIONS", "default_loader"]


class VisionDataset(Dataset):
    """Base of the datasets: ``root``, ``transform`` (of the sample), ``target_transform``, or one
    ``transforms`` callable of both."""

    _repr_indent = 4

    def __init__(self, root=None, transforms=None, transform=None, target_transform=None):
        self.root = os.fspath(root) if root is not None else None
        if transforms is not None and (transform is not None or target_transform is not None):
            raise DatasetError(f"{type(self).__name__}: only transforms or transform/target_transform can be passed")
        self.transform, self.target_transform = transform, target_transform
        self.transforms = transforms

    def _apply(self, img, target):
        if self.transforms is not None:
            return self.transforms(img, target)
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"Number of datapoints: {len(self)}"]
        if self.root is not None:
            lines.append(f"Root location: {self.root}")
        lines += [x for x in self.extra_repr().splitlines() if x]
        if self.transform is not None:
            lines.append(f"StandardTransform\nTransform: {self.transform!r}")
        if self.target_transform is not None:
            lines.append(f"Target transform: {self.target_transform!r}")
        body = "\n".join(" " * self._repr_indent + line for line in "\n".join(lines).splitlines())
        return f"Dataset {type(self).__name__}\n{body}"


# ---- downloads -------------------------------------------------------------------------------------

def _md5(path):
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download_url(url, folder, filename, md5=None):
    """Fetch ``url`` into ``folder/filename`` (skipped when it is there with the right MD5), written
    atomically (:func:`torchlean.fileio.atomic_write`): a failed, interrupted or mismatching download
    leaves nothing under the name."""
    target = os.path.join(folder, filename)
    if os.path.isfile(target) and (md5 is None or _md5(target) == md5):
        return target

    def fetch(out):
        h = hashlib.md5(usedforsecurity=False)
        with urllib.request.urlopen(url, timeout=60) as r:  # noqa: S310 - the dataset's own http(s) mirrors
            for chunk in iter(lambda: r.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
        if md5 is not None and h.hexdigest() != md5:
            raise DatasetError(f"download: {url} arrived with a different MD5 than {md5} (file discarded)")

    atomic_write(target, fetch)
    return target


def _fetch(name, folder, files, mirrors):
    """Download ``files`` [(filename, md5)] from the first mirror that answers."""
    for filename, md5 in files:
        errors = []
        for mirror in mirrors:
            try:
                download_url(mirror + filename, folder, filename, md5)
                break
            except (urllib.error.URLError, OSError, DatasetError) as e:
                errors.append(f"{mirror}{filename}: {e}")
        else:
            raise DatasetError(f"{name}: could not download {filename} ({'; '.join(errors)}); put the file in "
                               f"{folder} yourself")


# ---- MNIST family ----------------------------------------------------------------------------------

_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
    """An IDX file (MNIST's format; gzip-compressed when it ends in .gz) as a NumPy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise SerializationError(f"read_idx: {path} is not an IDX file (bad magic number {data[:4]!r})")
    nd = data[3]
    if len(data) < 4 + 4 * nd:
        raise SerializationError(f"read_idx: {path} ends inside its header")
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(nd))
    dt = np.dtype(_IDX_TYPES[data[2]])
    want = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    body = data[4 + 4 * nd:]
    if len(body) != want:
        raise SerializationError(f"read_idx: {path} holds {len(body)} data bytes, its header {shape} says {want}")
    return np.frombuffer(body, dtype=dt).reshape(shape).astype(dt.newbyteorder("="))


def _mnist_files(*md5s):
    """MNIST's four file names (train/t10k images/labels, gzipped) paired with their MD5s."""
    names = [f"{split}-{kind}-ubyte.gz" for split in ("train", "t10k") for kind in ("images-idx3", "labels-idx1")]
    return list(zip(names, md5s))


class MNIST(VisionDataset):
    """MNIST digits: 28 x 28 grayscale images and their labels 0-9 (60000 train, 10000 test)."""

    mirrors = ["https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"]
    resources = _mnist_files("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
                             "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c")
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven",
               "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        if download and not self._check_exists():
            _fetch(type(self).__name__, self.raw_folder, self.resources, self.mirrors)
        if not self._check_exists():
            names = ", ".join(self._file(r[0]) for r in self.resources)
            raise DatasetError(f"{type(self).__name__}: dataset not found in {self.raw_folder} (looked for {names}, "
                               "each also as .gz). You can use download=True to download it")
        self.data, self.targets = self._load_data()

    @property
    def raw_folder(self):
        return os.path.join(self.root, type(self).__name__, "raw")

    @property
    def processed_folder(self):
        return os.path.join(self.root, type(self).__name__, "processed")

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    @staticmethod
    def _file(gz_name):
        return gz_name[:-3] if gz_name.endswith(".gz") else gz_name

    def _path(self, name):
        """The extracted file, else its .gz, else None."""
        for p in (os.path.join(self.raw_folder, name), os.path.join(self.raw_folder, name + ".gz")):
            if os.path.isfile(p):
                return p
        return None

    def _check_exists(self):
        return all(self._path(self._file(r[0])) is not None for r in self.resources)

    def _load_data(self):
        split = "train" if self.train else "t10k"
        images = read_idx(self._path(f"{split}-images-idx3-ubyte"))
        labels = read_idx(self._path(f"{split}-labels-idx1-ubyte"))
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise SerializationError(f"{type(self).__name__}: images {images.shape} and labels {labels.shape} "
                                     f"in {self.raw_folder} do not pair up")
        return ops.tensor(np.ascontiguousarray(images, np.uint8)), ops.tensor(labels.astype(np.int64))

    def __getitem__(self, index):
        img = pil().fromarray(self.data[index].numpy(), mode="L")
        return self._apply(img, int(self.targets[index]))

    def __len__(self):
        return len(self.data)

    def extra_repr(self):
        return f"Split: {'Train' if self.train is True else 'Test'}"


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST, in MNIST's format."""

    mirrors = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    resources = _mnist_files("8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
                             "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310")
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]


class KMNIST(MNIST):
    """Kuzushiji-MNIST, in MNIST's format."""

    mirrors = ["http://codh.rois.ac.jp/kmnist/dataset/kmnist/"]
    resources = _mnist_files("bdb82020997e1d708af4cf47b453dcf7", "e144d726b3acfaa3e44228e80efcd344",
                             "5c965bf0a639b31b8f53240b1b52f4d7", "7320c461ea6c1c855c0b718fb2a4b134")
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]


# ---- CIFAR -----------------------------------------------------------------------------------------

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:                      # NumPy 1.x
    from numpy.core.multiarray import _reconstruct


class _ArrayUnpickler(pickle.Unpickler):
    """Builds NumPy arrays and plain containers; refuses every other name a file mentions."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"): _reconstruct,
                ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
                ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
                ("_codecs", "encode"): codecs.encode}     # protocol-2 bytes written by Python 3

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[module, name]
        raise SerializationError(f"CIFAR: the batch file names {module}.{name}, which is not a NumPy array part "
                                 "(refused: reading it could run code)")


def _load_pickled(path, what, key):
    """The dict of a CIFAR pickle (a ``what``: "batch" or "meta file") through the restricted
    unpickler; SerializationError naming the file when it is none or lacks ``key``."""
    with open(path, "rb") as f:
        try:
            d = _ArrayUnpickler(f, encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError, ValueError) as e:
            if isinstance(e, SerializationError):
                raise
            raise SerializationError(f"CIFAR: {path} is not a CIFAR {what} ({e})") from None
    if not isinstance(d, dict) or key not in d:
        raise SerializationError(f"CIFAR: {path} is not a CIFAR {what} (no {key!r} entry)")
    return d


def _load_batch(path):
    return _load_pickled(path, "batch", "data")


class CIFAR10(VisionDataset):
    """CIFAR-10: 32 x 32 colour images in 10 classes (50000 train, 10000 test)."""

    base_folder = "cifar-10-batches-py"
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    filename = "cifar-10-python.tar.gz"
    tgz_md5 = "c58f30108f718f92721af3b95e74349a"
    train_list = [f"data_batch_{i}" for i in range(1, 6)]
    test_list = ["test_batch"]
    meta = ("batches.meta", "label_names")
    labels_key = "labels"

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        folder = os.path.join(self.root, self.base_folder)
        names = self.train_list if train else self.test_list
        if download and not all(os.path.isfile(os.path.join(folder, n)) for n in names):
            self._download()
        missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
        if missing:
            raise DatasetError(f"{type(self).__name__}: dataset not found in {folder} (missing {', '.join(missing)}). "
                               "You can use download=True to download it")
        data, targets = [], []
        for n in names:
            d = _load_batch(os.path.join(folder, n))
            data.append(np.asarray(d["data"], np.uint8).reshape(-1, 3, 32, 32))
            targets.extend(int(v) for v in d[self.labels_key])
        self.data = np.ascontiguousarray(np.concatenate(data).transpose(0, 2, 3, 1))   # (N, 32, 32, 3), as torchvision
        self.targets = targets
        meta = os.path.join(folder, self.meta[0])
        self.classes = [str(c) for c in _load_meta(meta, self.meta[1])] if os.path.isfile(meta) else []
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def _download(self):
        archive = download_url(self.url, self.root, self.filename, self.tgz_md5)
        with tarfile.open(archive, "r:gz") as tar:
            if not hasattr(tarfile, "data_filter"):
                raise DatasetError(f"{type(self).__name__}: extracting {archive} safely needs Python >= 3.11.4")
            tar.extractall(self.root, filter="data")      # no member lands outside root

    def __getitem__(self, index):
        return self._apply(pil().fromarray(self.data[index]), self.targets[index])

    def __len__(self):
        return len(self.data)

    def extra_repr(self):
        return f"Split: {'Train' if self.train is True else 'Test'}"


def _load_meta(path, key):
    return _load_pickled(path, "meta file", key)[key]


class CIFAR100(CIFAR10):
    """CIFAR-100: 32 x 32 colour images in 100 fine classes."""

    base_folder = "cifar-100-python"
    url = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
    filename = "cifar-100-python.tar.gz"
    tgz_md5 = "eb9058c3a382ffc7106e4002c42a8d85"
    train_list = ["train"]
    test_list = ["test"]
    meta = ("meta", "fine_label_names")
    labels_key = "fine_labels"


# ---- folders and fakes -----------------------------------------------------------------------------

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def default_loader(path):
    """The image at ``path`` as an RGB PIL Image."""
    with open(path, "rb") as f:
        img = pil().open(io.BytesIO(f.read()))
        return img.convert("RGB")


class DatasetFolder(VisionDataset):
    """Samples ``root/<class>/**/<file>``: classes are the sorted subfolder names, files whose names end
    in ``extensions`` (or pass ``is_valid_file``) are the samples, in sorted order."""

    def __init__(self, root, loader, extensions=None, transform=None, target_transform=None, is_valid_file=None,
                 allow_empty=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        if (extensions is None) == (is_valid_file is None):
            raise DatasetError(f"{type(self).__name__}: pass exactly one of extensions and is_valid_file")
        if not os.path.isdir(self.root):
            raise DatasetError(f"{type(self).__name__}: {self.root} is not a folder")
        self.classes, self.class_to_idx = self.find_classes(self.root)
        ok = is_valid_file or (lambda p: p.lower().endswith(tuple(extensions)))
        self.samples = []
        for c in self.classes:
            for dirpath, _, files in sorted(os.walk(os.path.join(self.root, c), followlinks=True)):
                self.samples += [(os.path.join(dirpath, f), self.class_to_idx[c]) for f in sorted(files)
                                 if ok(os.path.join(dirpath, f))]
        if not self.samples and not allow_empty:
            raise DatasetError(f"{type(self).__name__}: found no valid file in the class folders of {self.root} "
                               f"(supported extensions: {', '.join(extensions or ())})")
        self.loader, self.extensions = loader, extensions
        self.targets = [t for _, t in self.samples]
        self.imgs = self.samples

    @staticmethod
    def find_classes(directory):
        classes = sorted(e.name for e in os.scandir(directory) if e.is_dir())
        if not classes:
            raise DatasetError(f"DatasetFolder: couldn't find any class folder in {directory}")
        return classes, {c: i for i, c in enumerate(classes)}

    def __getitem__(self, index):
        path, target = self.samples[index]
        return self._apply(self.loader(path), target)

    def __len__(self):
        return len(self.samples)


class ImageFolder(DatasetFolder):
    """:class:`DatasetFolder` of images (the usual extensions), loaded as RGB PIL Images."""

    def __init__(self, root, transform=None, target_transform=None, loader=default_loader, is_valid_file=None,
                 allow_empty=False):
        super().__init__(root, loader, IMG_EXTENSIONS if is_valid_file is None else None, transform=transform,
                         target_transform=target_transform, is_valid_file=is_valid_file, allow_empty=allow_empty)


class FakeData(VisionDataset):
    """``size`` random images of ``image_size`` (C, H, W) and random labels: sample ``i`` is the same on
    every call (drawn from a generator seeded by ``i + random_offset``)."""

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None, target_transform=None,
                 random_offset=0):
        super().__init__(None, transform=transform, target_transform=target_transform)
        self.size, self.num_classes = size, num_classes
        self.image_size, self.random_offset = tuple(image_size), random_offset

    def __getitem__(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"FakeData: index {index} out of range for a dataset of {len(self)} samples")
        rng = np.random.default_rng(index + self.random_offset)
        c, h, w = self.image_size
        img = rng.integers(0, 256, size=(h, w, c), dtype=np.uint8)
        target = int(rng.integers(0, self.num_classes))
        img = pil().fromarray(img[:, :, 0] if c == 1 else img)
        return self._apply(img, target)

    def __len__(self):
        return self.size
