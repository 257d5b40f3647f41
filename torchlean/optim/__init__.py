"""``tl.optim``: PyTorch's optimizers (defaults, update rules, state-dict layout) and
``tl.optim.lr_scheduler``.

    >>> import torchlean as tl
    >>> w = tl.nn.Parameter(tl.tensor([3.0]))
    >>> opt = tl.optim.Adam([w], lr=0.1)
    >>> for _ in range(100):
    ...     opt.zero_grad(); (w * w).sum().backward(); opt.step()
    >>> abs(w.item()) < 0.5
    True
"""

from . import lr_scheduler, optimizer, swa_utils
from .extras import ASGD, Adafactor, SparseAdam
from .optimizer import (LBFGS, SGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam, Optimizer, RAdam, RMSprop,
                        Rprop)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adamax", "Adagrad", "RMSprop", "Adadelta",
           "Rprop", "LBFGS", "SparseAdam", "ASGD", "Adafactor", "lr_scheduler", "optimizer", "swa_utils"]
