"""torchlean: a deep-learning runtime whose every op has a reference meaning.

    >>> import torchlean as tl
    >>> x = tl.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> y = (x @ x).sum()
    >>> y.backward()
    >>> x.grad.tolist()
    [[7.0, 11.0], [9.0, 13.0]]
"""

from . import errors
from .errors import TorchLeanError
from .options import get_options, options, set_options
from .tensor import *  # noqa: F401,F403 - Tensor, dtypes, creation and math functions, grad mode

__version__ = "0.1.0"


def __getattr__(name):
    # Subpackages load lazily so `import torchlean` stays light (nn, optim, ir, cuda, models, data).
    import importlib
    if name in ("nn", "optim", "ir", "cuda", "models", "data", "autograd", "kernels", "spec", "testing"):
        return importlib.import_module(f"{__name__}.{name}")
    if name in ("save", "load"):
        from . import serialization
        return getattr(serialization, name)
    if name == "compile":
        from .ir import compile_module
        return compile_module
    raise AttributeError(f"module 'torchlean' has no attribute {name!r}")
