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

# The layers by family, each in its own module (nn/<family>.py).
__all__ += [n for n in functional._reexport(globals(), __name__, ("layers", "norms", "activations", "losses",
                                                                  "resample", "recurrent", "pooling", "transformer",
                                                                  "sparse", "lazy", "extra"))
            if n not in __all__]

from . import parallel  # noqa: E402
from .lazy import UninitializedBuffer, UninitializedParameter  # noqa: E402
from .parallel import DataParallel  # noqa: E402
from .parameter import Buffer  # noqa: E402
from . import parameter as _parameter  # noqa: E402

_parameter.UninitializedParameter = UninitializedParameter  # torch.nn.parameter's names
_parameter.UninitializedBuffer = UninitializedBuffer
__all__ += ["parallel", "DataParallel", "Buffer"]
