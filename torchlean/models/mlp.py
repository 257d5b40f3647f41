"""A multilayer perceptron."""

from __future__ import annotations

from .. import nn
from ..errors import ShapeError


class MLP(nn.Module):
    """``in_features -> hidden[0] -> ... -> out_features`` with ReLU between layers.

    The layers live in ``self.net`` (an ``nn.Sequential``), so parameter names are
    PyTorch's ``net.0.weight``, ``net.0.bias``, ``net.2.weight``, ... and the
    ``state_dict`` of the same ``torch.nn.Sequential`` loads as is.

        >>> import torchlean as tl
        >>> _ = tl.manual_seed(0)
        >>> MLP(64, [128], 10)(tl.zeros(5, 64)).shape
        torchlean.Size([5, 10])
    """

    def __init__(self, in_features: int, hidden=(128,), out_features: int = 10):
        super().__init__()
        hidden = [int(h) for h in hidden]
        if int(in_features) < 1 or int(out_features) < 1 or any(h < 1 for h in hidden):
            raise ShapeError(f"MLP: sizes must be positive, got in={in_features}, hidden={hidden}, "
                             f"out={out_features}")
        self.config = {"in_features": int(in_features), "hidden": hidden, "out_features": int(out_features)}
        layers, prev = [], int(in_features)
        for h in hidden:
            layers += [nn.Linear(prev, h), nn.ReLU()]
            prev = h
        layers.append(nn.Linear(prev, int(out_features)))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x.flatten(1) if x.ndim > 2 else x)
