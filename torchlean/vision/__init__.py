"""torchvision under torchlean: ``datasets``, ``transforms``, ``models`` and ``utils`` with torchvision's
names and behaviour, over torchlean tensors. ``torchlean run`` answers ``import torchvision`` with this
package, so example programs that load MNIST or CIFAR, transform their images and save sample grids run
unchanged. Images are PIL Images where torchvision's are (Pillow is needed for those; ``pip install
pillow``); pretrained weights are not downloaded (docs/differences.md).

    >>> from torchlean import vision
    >>> sorted(vision.__all__)
    ['datasets', 'models', 'transforms', 'utils']
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["datasets", "models", "transforms", "utils"]
__version__ = "0.0.0+torchlean"


def __getattr__(name):
    if name in __all__:
        return import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'torchlean.vision' has no attribute {name!r}")
