"""torch.utils.checkpoint: activation checkpointing, accepted and run without recomputation.

torch frees a checkpointed segment's activations after the forward and recomputes them in the
backward, trading time for memory; the results are the same as without checkpointing (torch
restores the random state for the recomputation). Here the segment simply runs once and its
activations stay saved: the values and gradients are those torch gives, the memory saving is
absent (docs/differences.md, "Names accepted and ignored").

    >>> import torchlean as tl
    >>> from torchlean.utils.checkpoint import checkpoint
    >>> x = tl.ones(2, requires_grad=True)
    >>> checkpoint(lambda t: t * 3, x, use_reentrant=False).sum().backward()
    >>> x.grad.tolist()
    [3.0, 3.0]
"""

from __future__ import annotations

import warnings

__all__ = ["checkpoint", "checkpoint_sequential"]

_REENTRANT_WARNING = ("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                      "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the differences between "
                      "the two variants.")


def _check_reentrant(use_reentrant) -> None:
    if use_reentrant is None:
        warnings.warn(_REENTRANT_WARNING, stacklevel=3)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               early_stop=True, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, with torch's signature and warning (no recomputation here)."""
    _check_reentrant(use_reentrant)
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002
    """The modules (or a ``Sequential``) applied in order to ``input``; ``segments`` is accepted."""
    _check_reentrant(use_reentrant)
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    for f in functions:
        input = f(input)  # noqa: A001
    return input
