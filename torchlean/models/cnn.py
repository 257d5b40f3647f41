"""Small convolutional classifiers for 8x8 images: a plain CNN and a ResNet."""

from __future__ import annotations

from .. import nn
from ..errors import ShapeError
from ..nn.layers import BatchNorm2d
from ..nn.pooling import Conv2d, MaxPool2d


class CNN(nn.Module):
    """Two rounds of conv(3x3, same padding) - ReLU - max-pool(2), then a linear classifier.

    For 8x8 digits: ``(N, 1, 8, 8) -> (N, c1, 4, 4) -> (N, c2, 2, 2) -> (N, classes)``.
    Parameter names (``features.0.weight``, ``features.3.weight``, ``classifier.weight``)
    are those of the same ``torch.nn.Sequential`` layout.

        >>> import torchlean as tl
        >>> _ = tl.manual_seed(0)
        >>> CNN()(tl.zeros(2, 1, 8, 8)).shape
        torchlean.Size([2, 10])
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, channels=(16, 32), image_size: int = 8):
        super().__init__()
        c1, c2 = (int(c) for c in channels)
        if image_size % 4:
            raise ShapeError(f"CNN: image_size must be a multiple of 4 (two 2x2 poolings), got {image_size}")
        self.config = {"in_channels": int(in_channels), "num_classes": int(num_classes),
                       "channels": [c1, c2], "image_size": int(image_size)}
        self.features = nn.Sequential(
            Conv2d(in_channels, c1, 3, padding=1), nn.ReLU(), MaxPool2d(2),
            Conv2d(c1, c2, 3, padding=1), nn.ReLU(), MaxPool2d(2))
        self.classifier = nn.Linear(c2 * (image_size // 4) ** 2, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


class BasicBlock(nn.Module):
    """ResNet's basic block: conv3x3-BN-ReLU-conv3x3-BN, plus the (projected) input, then ReLU.

    When the stride or the width changes, the skip path is a 1x1 convolution with
    batch norm (``downsample.0``, ``downsample.1``), as in torchvision.
    """

    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = BatchNorm2d(planes)
        self.conv2 = Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = BatchNorm2d(planes)
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                            BatchNorm2d(planes))
        else:
            self.downsample = None

    def forward(self, x):
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out))
        skip = x if self.downsample is None else self.downsample(x)
        return (out + skip).relu()


class ResNet(nn.Module):
    """A small ResNet: a 3x3 stem, one basic block per stage, global average pooling, a linear head.

    ``widths`` sets the stages; every stage after the first halves the resolution
    (8x8 -> 4x4 -> 2x2 with the defaults). Names follow torchvision (``conv1``, ``bn1``,
    ``layer1.0.conv1``, ``layer2.0.downsample.0``, ``fc``).

        >>> import torchlean as tl
        >>> _ = tl.manual_seed(0)
        >>> ResNet()(tl.zeros(2, 1, 8, 8)).shape
        torchlean.Size([2, 10])
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, widths=(16, 32, 64), blocks_per_stage: int = 1):
        super().__init__()
        widths = [int(w) for w in widths]
        self.config = {"in_channels": int(in_channels), "num_classes": int(num_classes), "widths": widths,
                       "blocks_per_stage": int(blocks_per_stage)}
        self.conv1 = Conv2d(in_channels, widths[0], 3, padding=1, bias=False)
        self.bn1 = BatchNorm2d(widths[0])
        prev = widths[0]
        for i, w in enumerate(widths):
            blocks = []
            for j in range(int(blocks_per_stage)):
                blocks.append(BasicBlock(prev, w, stride=2 if (i > 0 and j == 0) else 1))
                prev = w
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.n_stages = len(widths)
        self.fc = nn.Linear(prev, num_classes)

    def forward(self, x):
        x = self.bn1(self.conv1(x)).relu()
        for i in range(self.n_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(x.mean(dim=(2, 3)))
