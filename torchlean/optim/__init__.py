"""``tl.optim``: optimizers with PyTorch's defaults and update rules, and LR schedulers.

    >>> import torchlean as tl
    >>> w = tl.nn.Parameter(tl.tensor([3.0]))
    >>> opt = tl.optim.Adam([w], lr=0.1)
    >>> for _ in range(100):
    ...     opt.zero_grad(); (w * w).sum().backward(); opt.step()
    >>> abs(w.item()) < 0.5
    True
"""

from . import lr_scheduler
from .optimizer import SGD, Adadelta, Adagrad, Adam, AdamW, Optimizer, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta", "lr_scheduler"]
