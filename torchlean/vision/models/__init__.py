"""torchvision.models under torchlean: the ResNet family (:mod:`.resnet`), with torchvision's
architectures, initialization and ``state_dict`` names; pretrained weights are not downloaded.

    >>> from torchlean.vision import models
    >>> models.list_models(include="resnet1*")
    ['resnet101', 'resnet152', 'resnet18']
"""

from . import resnet  # noqa: F401 - torchvision.models.resnet
from .resnet import *  # noqa: F401,F403 - torchvision.models' names
from .resnet import __all__  # noqa: F401
