"""``tl.nn``: modules, parameters, initializers and the functional API (``tl.nn.F``).

    >>> import torchlean as tl
    >>> _ = tl.manual_seed(0)
    >>> net = tl.nn.Sequential(tl.nn.Linear(4, 8), tl.nn.ReLU(), tl.nn.Linear(8, 1))
    >>> net(tl.randn(5, 4)).shape
    torchlean.Size([5, 1])
"""

from . import functional, init, utils
from .module import (IncompatibleKeys, Module, ModuleDict, ModuleList, ParameterDict, ParameterList,
                     RemovableHandle, Sequential)
from . import modules as _modules
from .modules import *  # noqa: F401,F403 - Linear, activations, Flatten, Dropout, Embedding, ...
from .parameter import Parameter

F = functional

__all__ = ["F", "functional", "init", "utils", "Module", "Parameter", "Sequential", "ModuleList",
           "ModuleDict", "IncompatibleKeys", "ParameterList", "ParameterDict", "RemovableHandle"] + _modules.__all__

from .layers import *  # noqa: E402,F401,F403 - Conv*, pools, LayerNorm, BatchNorm*, MultiheadAttention, ...
from . import layers as _layers  # noqa: E402

__all__ += _layers.__all__
