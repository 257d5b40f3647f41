"""torch.jit under torchlean: the decorators and entry points programs call on the way (``script``,
``trace``, ``ignore``, ``unused``, ``export``, ``is_scripting``, ``is_tracing``) are accepted and leave
the function or module as it is: TorchScript compilation has no counterpart here (``torchlean.compile``
is the tracing compiler). ``save`` / ``load`` of TorchScript archives raise (docs/differences.md).

    >>> import torchlean as tl
    >>> @tl.jit.script
    ... def f(x):
    ...     return x * 2
    >>> f(tl.ones(2)).tolist()
    [2.0, 2.0]
"""

from __future__ import annotations

from .errors import TorchLeanError

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting", "is_tracing",
           "annotate", "save", "load", "freeze", "optimize_for_inference", "Final"]


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``obj`` itself (no TorchScript here)."""
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    """``func`` itself: it runs eagerly on every call."""
    return func


def trace_module(mod, inputs, *args, **kwargs):
    return mod


def ignore(drop=False, **kwargs):
    """A decorator that leaves the function as it is (also used bare: ``@torch.jit.ignore``)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def is_scripting() -> bool:
    """False: nothing is scripted here."""
    return False


def is_tracing() -> bool:
    return False


def annotate(the_type, the_value):
    return the_value


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    return mod


def optimize_for_inference(mod, other_methods=None):
    return mod


class Final:
    """``torch.jit.Final[T]`` annotations: accepted."""

    def __class_getitem__(cls, item):
        return item


def save(m, f, _extra_files=None):
    raise TorchLeanError("jit.save: TorchScript archives are not supported; save the state_dict with "
                         "torchlean.save, or the model as torchlean IR (ir.trace + ir.save)")


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    raise TorchLeanError("jit.load: TorchScript archives are not supported; load a state_dict or torchlean IR")
