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

from .layers import *  # noqa: E402,F401,F403 - LayerNorm, BatchNorm*, SpectralConv1d, SelectiveScan
from . import layers as _layers  # noqa: E402

__all__ += _layers.__all__

from . import norms as _norms  # noqa: E402
from .norms import *  # noqa: E402,F401,F403 - GroupNorm, InstanceNorm*, RMSNorm, LocalResponseNorm, ...

__all__ += [n for n in _norms.__all__ if n not in __all__]
from . import activations as _activations  # noqa: E402
from .activations import *  # noqa: E402,F401,F403 - ReLU6, PReLU, ELU, Mish, Hardswish, GLU, ...

__all__ += [n for n in _activations.__all__ if n not in __all__]
from . import losses as _losses  # noqa: E402
from .losses import *  # noqa: E402,F401,F403 - CrossEntropyLoss, MSELoss, BCEWithLogitsLoss, CTCLoss, ...

__all__ += [n for n in _losses.__all__ if n not in __all__]
from . import resample as _resample  # noqa: E402
from .resample import *  # noqa: E402,F401,F403 - padding modules, adaptive pools, Upsample, PixelShuffle, ...

__all__ += [n for n in _resample.__all__ if n not in __all__]
from . import recurrent as _recurrent  # noqa: E402
from .recurrent import *  # noqa: E402,F401,F403 - RNN, LSTM, GRU and their cells

__all__ += [n for n in _recurrent.__all__ if n not in __all__]
from . import pooling as _pooling  # noqa: E402
from .pooling import *  # noqa: E402,F401,F403 - Conv*, ConvTranspose*, MaxPool*, MaxUnpool*, AvgPool*, ...

__all__ += [n for n in _pooling.__all__ if n not in __all__]
from . import transformer as _transformer  # noqa: E402
from .transformer import *  # noqa: E402,F401,F403 - MultiheadAttention, Transformer*, ...

__all__ += [n for n in _transformer.__all__ if n not in __all__]
from . import sparse as _sparse  # noqa: E402
from .sparse import *  # noqa: E402,F401,F403 - Embedding, EmbeddingBag

__all__ += [n for n in _sparse.__all__ if n not in __all__]
from . import lazy as _lazy  # noqa: E402
from .lazy import *  # noqa: E402,F401,F403 - LazyLinear, LazyConv*, LazyBatchNorm*, LazyInstanceNorm*, ...

__all__ += [n for n in _lazy.__all__ if n not in __all__]
from . import extra as _extra  # noqa: E402
from .extra import *  # noqa: E402,F401,F403 - FractionalMaxPool2d/3d

__all__ += [n for n in _extra.__all__ if n not in __all__]
from . import parallel  # noqa: E402
from .parallel import DataParallel  # noqa: E402
from .parameter import Buffer  # noqa: E402
from . import parameter as _parameter  # noqa: E402

_parameter.UninitializedParameter = _lazy.UninitializedParameter  # torch.nn.parameter's names
_parameter.UninitializedBuffer = _lazy.UninitializedBuffer
__all__ += ["parallel", "DataParallel", "Buffer"]
