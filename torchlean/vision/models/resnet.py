"""torchvision.models under torchlean: the ResNet family, with torchvision's architecture,
initialization and ``state_dict`` names.

``resnet18`` ... ``resnet152``, ``resnext50_32x4d``, ``resnext101_32x8d``, ``resnext101_64x4d``,
``wide_resnet50_2`` and ``wide_resnet101_2`` build the same modules as torchvision's constructors of
those names (``conv1``, ``bn1``, ``layer1.0.conv1``, ``layer2.0.downsample.0``, ``fc``, ...), so a
``state_dict`` saved from torchvision loads as it is. Pretrained weights are not downloaded: any
``weights`` other than None (or ``pretrained=True``) raises :class:`BackendUnavailableError`; save
torchvision's weights once with ``torch.save(model.state_dict(), path)`` and load them with
``model.load_state_dict(tl.load(path))``.

    >>> import torchlean as tl
    >>> from torchlean.vision import models
    >>> _ = tl.manual_seed(0)
    >>> model = models.resnet18(num_classes=10).eval()
    >>> model(tl.zeros(1, 3, 32, 32)).shape
    torchlean.Size([1, 10])
"""

from __future__ import annotations

import warnings
from enum import Enum

from ... import nn, ops
from ...errors import BackendUnavailableError, DomainError

__all__ = [
    "BasicBlock", "Bottleneck", "ResNet",
    "ResNet18_Weights", "ResNet34_Weights", "ResNet50_Weights", "ResNet101_Weights", "ResNet152_Weights",
    "ResNeXt50_32X4D_Weights", "ResNeXt101_32X8D_Weights", "ResNeXt101_64X4D_Weights",
    "Wide_ResNet50_2_Weights", "Wide_ResNet101_2_Weights",
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2",
    "get_model", "get_model_weights", "list_models",
]


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1, dilation: int = 1) -> nn.Conv2d:
    """3x3 convolution without bias, padded by ``dilation`` so that stride 1 keeps the size."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation, groups=groups,
                     bias=False, dilation=dilation)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution without bias."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """conv3x3(stride)-BN-ReLU-conv3x3-BN, plus the input (through ``downsample`` when given), then ReLU.

    ``expansion = 1``: the block outputs ``planes`` channels. Only ``groups=1``,
    ``base_width=64`` and ``dilation=1`` are allowed, as in torchvision.

        >>> import torchlean as tl
        >>> BasicBlock(8, 8)(tl.zeros(1, 8, 5, 5)).shape
        torchlean.Size([1, 8, 5, 5])
    """

    expansion: int = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample=None, groups: int = 1,
                 base_width: int = 64, dilation: int = 1, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise DomainError(f"BasicBlock only supports groups=1 and base_width=64, got groups={groups}, "
                              f"base_width={base_width}")
        if dilation > 1:
            raise DomainError(f"BasicBlock: dilation > 1 is not supported, got dilation={dilation}")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    """conv1x1-BN-ReLU, conv3x3(stride, groups, dilation)-BN-ReLU, conv1x1-BN, plus the input, then ReLU.

    The inner width is ``int(planes * base_width / 64) * groups``; the block outputs
    ``planes * expansion`` channels (``expansion = 4``). The stride sits on the 3x3
    convolution (ResNet v1.5), as in torchvision.

        >>> import torchlean as tl
        >>> Bottleneck(16, 4)(tl.zeros(1, 16, 5, 5)).shape
        torchlean.Size([1, 16, 5, 5])
    """

    expansion: int = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample=None, groups: int = 1,
                 base_width: int = 64, dilation: int = 1, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """torchvision's ResNet: a 7x7/2 stem, a 3x3/2 max-pool, four stages of ``block``, global
    average pooling and a linear head.

    ``layers`` gives the number of blocks per stage (widths 64, 128, 256, 512, times
    ``block.expansion``); stages 2-4 halve the resolution, or, where
    ``replace_stride_with_dilation[i]`` is true, keep it and dilate instead. Convolutions are
    initialized ``kaiming_normal_(mode="fan_out", nonlinearity="relu")``, norm layers with weight 1
    and bias 0; ``zero_init_residual`` zeroes the last norm weight of every block, so each block
    starts as the identity.

        >>> import torchlean as tl
        >>> _ = tl.manual_seed(0)
        >>> m = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=5)
        >>> m(tl.zeros(2, 3, 16, 16)).shape, m.layer2[0].downsample[0].stride
        (torchlean.Size([2, 5]), (2, 2))
    """

    def __init__(self, block, layers, num_classes: int = 1000, zero_init_residual: bool = False,
                 groups: int = 1, width_per_group: int = 64, replace_stride_with_dilation=None,
                 norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = 64
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise DomainError("ResNet: replace_stride_with_dilation should be None or a 3-element tuple, "
                              f"got {replace_stride_with_dilation}")
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2, dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2, dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2, dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes: int, blocks: int, stride: int = 1, dilate: bool = False) -> nn.Sequential:
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width,
                        previous_dilation, norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                                dilation=self.dilation, norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def _forward_impl(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = ops.flatten(self.avgpool(x), 1)
        return self.fc(x)

    def forward(self, x):
        return self._forward_impl(x)


class _Weights(Enum):
    """The names of torchvision's pretrained weights. They are not downloaded: asking a
    constructor for them raises :class:`BackendUnavailableError`, as does :meth:`get_state_dict`."""

    @classmethod
    def verify(cls, obj):
        """``obj`` as a member of this enum: None stays None, a name (``"DEFAULT"``,
        ``"IMAGENET1K_V1"`` or ``"ResNet18_Weights.IMAGENET1K_V1"``) is looked up."""
        if obj is None or isinstance(obj, cls):
            return obj
        if isinstance(obj, str):
            name = obj.replace(cls.__name__ + ".", "")
            if name in cls.__members__:
                return cls.__members__[name]
        raise DomainError(f"Invalid Weight class provided; expected {cls.__name__} but received {obj!r}.")

    def get_state_dict(self, *args, **kwargs):
        """Always raises :class:`BackendUnavailableError`: torchlean does not download weights."""
        raise _not_downloaded(self.__class__.__name__.replace("_Weights", "").lower(), self)


def _weights(name: str, latest: int) -> type:
    """The enum ``name`` of torchvision's weight names ``IMAGENET1K_V1 .. V<latest>``, ``DEFAULT`` the latest."""
    versions = [(f"IMAGENET1K_V{v}", f"IMAGENET1K_V{v}") for v in range(1, latest + 1)]
    return _Weights(name, versions + [("DEFAULT", f"IMAGENET1K_V{latest}")], module=__name__)


ResNet18_Weights = _weights("ResNet18_Weights", 1)
ResNet34_Weights = _weights("ResNet34_Weights", 1)
ResNet50_Weights = _weights("ResNet50_Weights", 2)
ResNet101_Weights = _weights("ResNet101_Weights", 2)
ResNet152_Weights = _weights("ResNet152_Weights", 2)
ResNeXt50_32X4D_Weights = _weights("ResNeXt50_32X4D_Weights", 2)
ResNeXt101_32X8D_Weights = _weights("ResNeXt101_32X8D_Weights", 2)
ResNeXt101_64X4D_Weights = _weights("ResNeXt101_64X4D_Weights", 1)
Wide_ResNet50_2_Weights = _weights("Wide_ResNet50_2_Weights", 2)
Wide_ResNet101_2_Weights = _weights("Wide_ResNet101_2_Weights", 2)


def _not_downloaded(arch: str, weights) -> BackendUnavailableError:
    shown = f"{type(weights).__name__}.{weights.name}" if isinstance(weights, Enum) else repr(weights)
    return BackendUnavailableError(
        f"{arch}(weights={shown}): pretrained weights are not downloaded by torchlean. Build the model "
        f"with weights=None and load a state_dict saved from torchvision (torch.save(torchvision.models."
        f"{arch}(weights=...).state_dict(), path)): model.load_state_dict(tl.load(path)).")


def _overwrite_named_param(kwargs: dict, name: str, value) -> None:
    if name in kwargs and kwargs[name] != value:
        raise DomainError(f"The parameter '{name}' expected value {value} but got {kwargs[name]} instead.")
    kwargs[name] = value


def _resnet(arch: str, block, layers, weights, kwargs: dict) -> ResNet:
    if "pretrained" in kwargs:
        pretrained = kwargs.pop("pretrained")
        warnings.warn("The parameter 'pretrained' is deprecated since 0.13 and may be removed in the future, "
                      "please use 'weights' instead.", UserWarning, stacklevel=3)
        if pretrained and weights is None:
            weights = "DEFAULT"
    if weights is not None:
        raise _not_downloaded(arch, weights)
    return ResNet(block, layers, **kwargs)


def resnet18(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """ResNet-18 (BasicBlock, [2, 2, 2, 2]); ``kwargs`` go to :class:`ResNet`.

    ``weights`` must be None (``pretrained=False`` is accepted, with torchvision's deprecation
    warning); ``progress`` is accepted and unused.
    """
    return _resnet("resnet18", BasicBlock, [2, 2, 2, 2], weights, kwargs)


def resnet34(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """ResNet-34 (BasicBlock, [3, 4, 6, 3]); arguments as :func:`resnet18`."""
    return _resnet("resnet34", BasicBlock, [3, 4, 6, 3], weights, kwargs)


def resnet50(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """ResNet-50 (Bottleneck, [3, 4, 6, 3]); arguments as :func:`resnet18`."""
    return _resnet("resnet50", Bottleneck, [3, 4, 6, 3], weights, kwargs)


def resnet101(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """ResNet-101 (Bottleneck, [3, 4, 23, 3]); arguments as :func:`resnet18`."""
    return _resnet("resnet101", Bottleneck, [3, 4, 23, 3], weights, kwargs)


def resnet152(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """ResNet-152 (Bottleneck, [3, 8, 36, 3]); arguments as :func:`resnet18`."""
    return _resnet("resnet152", Bottleneck, [3, 8, 36, 3], weights, kwargs)


def resnext50_32x4d(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """ResNeXt-50 32x4d (Bottleneck, [3, 4, 6, 3], groups=32, width_per_group=4)."""
    _overwrite_named_param(kwargs, "groups", 32)
    _overwrite_named_param(kwargs, "width_per_group", 4)
    return _resnet("resnext50_32x4d", Bottleneck, [3, 4, 6, 3], weights, kwargs)


def resnext101_32x8d(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """ResNeXt-101 32x8d (Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=8)."""
    _overwrite_named_param(kwargs, "groups", 32)
    _overwrite_named_param(kwargs, "width_per_group", 8)
    return _resnet("resnext101_32x8d", Bottleneck, [3, 4, 23, 3], weights, kwargs)


def resnext101_64x4d(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """ResNeXt-101 64x4d (Bottleneck, [3, 4, 23, 3], groups=64, width_per_group=4)."""
    _overwrite_named_param(kwargs, "groups", 64)
    _overwrite_named_param(kwargs, "width_per_group", 4)
    return _resnet("resnext101_64x4d", Bottleneck, [3, 4, 23, 3], weights, kwargs)


def wide_resnet50_2(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """Wide ResNet-50-2 (Bottleneck, [3, 4, 6, 3], width_per_group=128: inner 3x3 widths doubled)."""
    _overwrite_named_param(kwargs, "width_per_group", 64 * 2)
    return _resnet("wide_resnet50_2", Bottleneck, [3, 4, 6, 3], weights, kwargs)


def wide_resnet101_2(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """Wide ResNet-101-2 (Bottleneck, [3, 4, 23, 3], width_per_group=128)."""
    _overwrite_named_param(kwargs, "width_per_group", 64 * 2)
    return _resnet("wide_resnet101_2", Bottleneck, [3, 4, 23, 3], weights, kwargs)


_MODELS = {
    "resnet18": (resnet18, ResNet18_Weights), "resnet34": (resnet34, ResNet34_Weights),
    "resnet50": (resnet50, ResNet50_Weights), "resnet101": (resnet101, ResNet101_Weights),
    "resnet152": (resnet152, ResNet152_Weights),
    "resnext50_32x4d": (resnext50_32x4d, ResNeXt50_32X4D_Weights),
    "resnext101_32x8d": (resnext101_32x8d, ResNeXt101_32X8D_Weights),
    "resnext101_64x4d": (resnext101_64x4d, ResNeXt101_64X4D_Weights),
    "wide_resnet50_2": (wide_resnet50_2, Wide_ResNet50_2_Weights),
    "wide_resnet101_2": (wide_resnet101_2, Wide_ResNet101_2_Weights),
}


def list_models(module=None, include=None, exclude=None) -> list:
    """The names :func:`get_model` builds, sorted; ``include``/``exclude`` are fnmatch patterns
    (a string or a list of them), as in torchvision. ``module`` is accepted and unused."""
    import fnmatch
    names = sorted(_MODELS)
    if include is not None:
        pats = [include] if isinstance(include, str) else list(include)
        names = [n for n in names if any(fnmatch.fnmatch(n, p) for p in pats)]
    if exclude is not None:
        pats = [exclude] if isinstance(exclude, str) else list(exclude)
        names = [n for n in names if not any(fnmatch.fnmatch(n, p) for p in pats)]
    return names


def _lookup(name: str):
    key = name.lower()
    if key not in _MODELS:
        raise DomainError(f"Unknown model {name}; torchlean.vision.models has {', '.join(sorted(_MODELS))}")
    return _MODELS[key]


def get_model(name: str, **config) -> nn.Module:
    """The model ``name`` (see :func:`list_models`) built with ``config``, as torchvision's
    ``get_model``.

        >>> get_model("resnet18", num_classes=3).fc.out_features
        3
    """
    return _lookup(name)[0](**config)


def get_model_weights(name):
    """The weights enum of a model name or constructor (``ResNet18_Weights`` for ``"resnet18"``)."""
    if callable(name):
        name = name.__name__
    return _lookup(name)[1]
