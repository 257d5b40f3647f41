"""``tl.nn.utils.parametrize``: a tensor of a module computed from other tensors (torch's API).

``register_parametrization(module, "weight", P)`` moves ``module.weight`` to
``module.parametrizations.weight.original`` (through ``P.right_inverse`` when ``P`` has one) and makes
``module.weight`` a property returning ``P(original)``: gradients flow to ``original``. The module's
class becomes a subclass ``Parametrized<Class>``, and the state dict keys are torch's
(``parametrizations.weight.original``), so torch checkpoints load as they are.

    >>> import torchlean as tl
    >>> class Symmetric(tl.nn.Module):
    ...     def forward(self, X):
    ...         return X.triu() + X.triu(1).transpose(-1, -2)
    >>> m = register_parametrization(tl.nn.Linear(3, 3), "weight", Symmetric())
    >>> bool((m.weight == m.weight.T).all()), type(m).__name__
    (True, 'ParametrizedLinear')
    >>> list(m.state_dict())
    ['bias', 'parametrizations.weight.original']
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager

from ...errors import DomainError, DTypeError, ShapeError, TorchLeanError
from ...tensor import Tensor, no_grad
from ..module import Module, ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized", "remove_parametrizations",
           "type_before_parametrizations"]

#: While ``cached()`` is active: ``{(id(module), tensor_name): value}``, else None.
_CACHE = contextvars.ContextVar("torchlean_parametrize_cache", default=None)


@contextmanager
def cached():
    """Inside this context each parametrized tensor is computed once, at its first use (torch's
    ``parametrize.cached``); nested contexts share the outermost cache."""
    if _CACHE.get() is not None:
        yield
        return
    token = _CACHE.set({})
    try:
        yield
    finally:
        _CACHE.reset(token)


def _register_parameter_or_buffer(module, name, value):
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _maybe_set(dest: Tensor, src: Tensor) -> None:
    """``dest.set_(src)``: ``dest`` (the same object) takes ``src``'s value, shape and dtype."""
    if dest is not src:
        dest._value = src._value


def _check_same(op, ref, new, what):
    if not isinstance(new, Tensor):
        raise TorchLeanError(f"{op}: {what} must return a tensor, got {type(new).__name__}")
    if new.dtype != ref.dtype:
        raise DTypeError(f"{op}: {what} may not change the dtype of the tensor, unless `unsafe` flag is enabled "
                         f"(dtype {ref.dtype} became {new.dtype})")
    if tuple(new.shape) != tuple(ref.shape):
        raise ShapeError(f"{op}: {what} may not change the shape of the tensor, unless `unsafe` flag is enabled "
                         f"(shape {tuple(ref.shape)} became {tuple(new.shape)})")


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and its unconstrained ``original``
    (``original0``, ``original1``, ... when the first one's ``right_inverse`` returns several tensors)."""

    def __init__(self, modules, original, unsafe: bool = False):
        if len(modules) == 0:
            raise DomainError("ParametrizationList requires one or more modules")
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    new = m.right_inverse(new)
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if not unsafe and new.dtype != original.dtype:
                raise DTypeError(f"register_parametrization: right_inverse may not change the dtype "
                                 f"{original.dtype} -> {new.dtype}")
            _maybe_set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise TorchLeanError(f"register_parametrization: right_inverse must return a tensor or a sequence "
                                         f"of tensors, got {type(t).__name__} at position {i}")
                if isinstance(original, Parameter):
                    t = Parameter(t.detach(), requires_grad=original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", t)
        if not unsafe:
            with no_grad():
                z = self()
            _check_same("register_parametrization", original, z, "a parametrization")

    def right_inverse(self, value) -> None:
        """Set the originals so that the parametrized tensor becomes ``value`` (``module.weight = value``)."""
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise TorchLeanError(f"parametrization {type(m).__name__} does not implement right_inverse")
                value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise TorchLeanError(f"right_inverse must return a tensor, got {type(value).__name__}")
                if not self.unsafe:
                    _check_same("right_inverse", self.original, value, "right_inverse")
                _maybe_set(self.original, value)
            else:
                if len(value) != self.ntensors:
                    raise TorchLeanError(f"right_inverse must return a sequence of {self.ntensors} tensors, got "
                                         f"{len(value)}")
                for i, t in enumerate(value):
                    _maybe_set(getattr(self, f"original{i}"), t)

    def forward(self):
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _inject_new_class(module) -> None:
    cls = module.__class__
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"__doc__": cls.__doc__})


def _inject_property(module, tensor_name) -> None:
    def get_parametrized(self):
        plist = self.parametrizations[tensor_name]
        cache = _CACHE.get()
        if cache is None:
            return plist()
        key = (id(self), tensor_name)
        if key not in cache:
            cache[key] = plist()
        return cache[key]

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module, tensor_name: str, parametrization, *, unsafe: bool = False):
    """Make ``module.<tensor_name>`` the output of ``parametrization`` (a Module) on an unconstrained original.

    A second registration on the same tensor is applied after the first. Without ``unsafe`` the
    parametrization must keep the tensor's shape and dtype (checked). Returns ``module``.
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check_same("register_parametrization", y, x, "a parametrization")
            if hasattr(parametrization, "right_inverse"):
                _check_same("register_parametrization", y, parametrization.right_inverse(x), "right_inverse")
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    if tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        if original is None:
            raise DomainError(f"register_parametrization: {type(module).__name__}.{tensor_name} is None")
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
        return module
    raise DomainError(f"Module '{type(module).__name__}' does not have a parameter, a buffer, or a parametrized "
                      f"element with name '{tensor_name}'")


def is_parametrized(module, tensor_name=None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, or on any tensor)."""
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if plists is None or not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def remove_parametrizations(module, tensor_name: str, leave_parametrized: bool = True):
    """Undo :func:`register_parametrization` on ``tensor_name``: the tensor becomes a plain parameter (or
    buffer) again, holding the parametrized value (``leave_parametrized``) or the original."""
    if not is_parametrized(module, tensor_name):
        raise DomainError(f"Module {type(module).__name__} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            _maybe_set(original, t)
    else:
        if not leave_parametrized:
            raise DomainError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                              "parametrized in terms of a sequence of tensors.")
        with no_grad():
            t = getattr(module, tensor_name)
        requires_grad = any(getattr(plist, f"original{i}").requires_grad for i in range(plist.ntensors))
        original = Parameter(t.detach(), requires_grad=requires_grad) if requires_grad else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module) -> type:
    """The module's class before parametrizations were registered (``type(module)`` if none)."""
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)
