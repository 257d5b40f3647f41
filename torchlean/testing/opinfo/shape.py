"""Test records of the shape ops."""

from __future__ import annotations

import numpy as np

from ...errors import DomainError, DTypeError, IndexRangeError, ShapeError
from . import BadInput, OpInfo, Sample, defop, rand


def _cases(cases):
    """Samples from ``[(shapes, attrs), ...]``: one random input per shape."""
    def samples(rng):
        return [Sample(tuple(rand(rng, *s) for s in shapes), dict(attrs), f"{shapes} {attrs}")
                for shapes, attrs in cases]
    return samples


def _bad(cases, extra=()):
    """Bad inputs from ``[(shapes, attrs, error, match), ...]`` (shapes of float inputs) plus ``extra``."""
    def bad(rng):
        return [BadInput(tuple(np.ones(s) for s in shapes), dict(attrs), err, match, f"{shapes} {attrs}")
                for shapes, attrs, err, match in cases] + list(extra)
    return bad


def _info(name, cases, bad=(), torch_ref=None, extra_bad=(), **kw):
    defop(OpInfo(name, _cases(cases), _bad(bad, extra_bad), torch_ref=torch_ref, **kw))


# A float and an int input: the float one reaches the op as float32, the int one stays int64.
_MIXED = [BadInput((np.ones((2, 3)), np.ones((2, 3), dtype=np.int64)), {}, DTypeError, "dtype", "mixed dtypes")]


# ---- views ----------------------------------------------------------------------------------

_info("reshape",
      [([(3, 4)], {"shape": (2, 6)}), ([(2, 3, 4)], {"shape": (24,)}), ([()], {"shape": (1, 1)}),
       ([(1,)], {"shape": ()}), ([(0, 3)], {"shape": (3, 0)}), ([(6,)], {"shape": [3, 1, 2]})],
      [([(2, 3)], {"shape": (4, 2)}, ShapeError, "(2, 3)"),
       ([(2, 3)], {"shape": (-1, 3)}, ShapeError, "negative"),
       ([(2, 3)], {"shape": "6"}, ShapeError, "tuple of ints")],
      lambda torch, x, *, shape: torch.reshape(x, tuple(shape)))

_info("flatten",
      [([(2, 3, 4)], {}), ([(2, 3, 4)], {"start_dim": 1}), ([(2, 3, 4)], {"start_dim": 0, "end_dim": 1}),
       ([(2, 3, 4, 5)], {"start_dim": 1, "end_dim": -2}), ([()], {}), ([(5,)], {}), ([(2, 1)], {"start_dim": 1})],
      [([(2, 3, 4)], {"start_dim": 2, "end_dim": 1}, ShapeError, "start_dim 2"),
       ([(2, 3)], {"start_dim": 3}, ShapeError, "axis 3")],
      lambda torch, x, *, start_dim=0, end_dim=-1: torch.flatten(x, start_dim, end_dim))

_info("unsqueeze",
      [([(3, 4)], {"dim": 0}), ([(3, 4)], {"dim": 2}), ([(3, 4)], {"dim": -1}), ([(3, 4)], {"dim": -3}),
       ([()], {"dim": 0})],
      [([(3, 4)], {"dim": 3}, ShapeError, "axis 3"), ([(3, 4)], {"dim": -4}, ShapeError, "axis -4")],
      lambda torch, x, *, dim: torch.unsqueeze(x, dim))


def _torch_squeeze(torch, x, *, dim=None):
    return torch.squeeze(x) if dim is None else torch.squeeze(x, dim)


_info("squeeze",
      [([(1, 3, 1)], {}), ([(1, 3, 1)], {"dim": 0}), ([(1, 3, 1)], {"dim": 1}), ([(1, 3, 1)], {"dim": -1}),
       ([()], {}), ([()], {"dim": 0}), ([(1,)], {"dim": 0}), ([(2, 3)], {})],
      [([(1, 3)], {"dim": 2}, ShapeError, "axis 2"), ([(1, 3)], {"dim": (0,)}, ShapeError, "int")],
      _torch_squeeze)


# ---- axis moves -----------------------------------------------------------------------------

_info("transpose",
      [([(3, 4)], {"dim0": 0, "dim1": 1}), ([(2, 3, 4)], {"dim0": 0, "dim1": 2}),
       ([(2, 3, 4)], {"dim0": -1, "dim1": -2}), ([(2, 3, 4)], {"dim0": 1, "dim1": 1}),
       ([()], {"dim0": 0, "dim1": -1}), ([(5,)], {"dim0": 0, "dim1": -1}), ([(1, 4)], {"dim0": 0, "dim1": 1})],
      [([(3, 4)], {"dim0": 0, "dim1": 2}, ShapeError, "axis 2")],
      lambda torch, x, *, dim0, dim1: torch.transpose(x, dim0, dim1))

_info("permute",
      [([(2, 3, 4)], {"dims": (2, 0, 1)}), ([(2, 3, 4)], {"dims": (-1, 0, 1)}), ([(3, 4)], {"dims": (1, 0)}),
       ([()], {"dims": ()}), ([(2, 1, 3, 2)], {"dims": [3, 1, 0, 2]})],
      [([(2, 3, 4)], {"dims": (0, 0, 1)}, ShapeError, "not a permutation"),
       ([(2, 3, 4)], {"dims": (0, 1)}, ShapeError, "(0, 1)")],
      lambda torch, x, *, dims: torch.permute(x, tuple(dims)))


def _torch_swap(torch, x, *, depth):
    return x.transpose(depth, depth + 1) if 0 <= depth < x.dim() - 1 else x.clone()


_info("swap_adjacent",
      [([(2, 3, 4)], {"depth": 0}), ([(2, 3, 4)], {"depth": 1}), ([(2, 3, 4)], {"depth": 2}),
       ([(2, 3, 4)], {"depth": 7}), ([(2, 3, 4)], {"depth": -1}), ([(3,)], {"depth": 0}),
       ([()], {"depth": 0}), ([(3, 5)], {"depth": 0})],
      [([(2, 3)], {"depth": 0.5}, DomainError, "depth")],
      _torch_swap)

_info("broadcast_to",
      [([(3,)], {"shape": (2, 3)}), ([(4, 1)], {"shape": (2, 4, 3)}), ([()], {"shape": (2, 2)}),
       ([()], {"shape": ()}), ([(2, 3)], {"shape": (2, 3)}), ([(1, 3, 1)], {"shape": [2, 3, 5]}),
       ([(1,)], {"shape": (0,)})],
      [([(2, 3)], {"shape": (3, 3)}, ShapeError, "(2, 3)"),
       ([(2, 3)], {"shape": (3,)}, ShapeError, "fewer axes"),
       ([(2, 3)], {"shape": (2, -1)}, ShapeError, "negative")],
      lambda torch, x, *, shape: torch.broadcast_to(x, tuple(shape)))


# ---- joining --------------------------------------------------------------------------------

def _torch_cat(torch, *xs, axis=0):
    return torch.cat(xs, dim=axis)


_info("concat",
      [([(2, 3), (4, 3)], {"axis": 0}), ([(2, 3), (2, 1), (2, 2)], {"axis": -1}), ([(3,)], {}),
       ([(2, 0), (2, 3)], {"axis": 1}), ([(1, 2, 2), (1, 2, 2)], {"axis": 1})],
      [([], {}, ShapeError, "at least one"),
       ([(2, 3), (2, 4)], {"axis": 0}, ShapeError, "(2, 4)"),
       ([(2, 3), (2, 3, 1)], {"axis": 0}, ShapeError, "(2, 3, 1)"),
       ([(), ()], {}, ShapeError, "0-d"),
       ([(2, 3), (2, 3)], {"axis": 2}, ShapeError, "axis 2")],
      _torch_cat, extra_bad=_MIXED)


def _torch_stack(torch, *xs, axis=0):
    return torch.stack(xs, dim=axis)


_info("stack",
      [([(3,), (3,)], {"axis": 0}), ([(2, 3)] * 3, {"axis": -1}), ([(2, 3)] * 2, {"axis": 1}),
       ([(), ()], {}), ([(4,)], {"axis": 1})],
      [([], {}, ShapeError, "at least one"),
       ([(2, 3), (3, 2)], {}, ShapeError, "(3, 2)"),
       ([(2, 3), (2, 3)], {"axis": 3}, ShapeError, "axis 3")],
      _torch_stack, extra_bad=_MIXED)

# ---- slicing and indexing -------------------------------------------------------------------

def _torch_slice(torch, x, *, axis, start=None, stop=None, step=1):
    return x[(slice(None),) * (axis % x.dim()) + (slice(start, stop, step),)]


_info("slice",
      [([(5,)], {"axis": 0, "start": 1, "stop": 4}), ([(6, 4)], {"axis": 0, "start": -4, "stop": None, "step": 2}),
       ([(6, 4)], {"axis": -1, "start": None, "stop": -1}), ([(6, 4)], {"axis": 1, "start": 10, "stop": 20}),
       ([(3, 7)], {"axis": 1, "start": -100, "stop": 100, "step": 3}), ([(3, 1, 2)], {"axis": 1, "start": 0, "stop": 1})],
      [([(5,)], {"axis": 0, "start": 0, "stop": 5, "step": 0}, DomainError, "step"),
       ([(5,)], {"axis": 0, "start": 4, "stop": 0, "step": -1}, DomainError, "step"),
       ([(5,)], {"axis": 1, "start": 0, "stop": 2}, ShapeError, "axis 1"),
       ([()], {"axis": 0, "start": 0, "stop": 1}, ShapeError, "0-d"),
       ([(5,)], {"axis": 0, "start": 0.5, "stop": 2}, DomainError, "start")],
      _torch_slice)

_GETITEM = [(1, slice(None, None, 2)), (Ellipsis, None, -1), (None, slice(1, -1), Ellipsis, 0),
            (slice(-3, None),), 2, (), (slice(None), slice(1, 100, 3), slice(-2, None, 1)), (0, 1, 2), (-4, Ellipsis)]

_info("getitem",
      [([(4, 5, 6)], {"index": i}) for i in _GETITEM]
      + [([()], {"index": (None,)}), ([()], {"index": Ellipsis}), ([(3,)], {"index": (None, Ellipsis, None)})],
      [([(4, 5)], {"index": (5,)}, IndexRangeError, "index 5"),
       ([(4, 5)], {"index": (0, -6)}, IndexRangeError, "size 5"),
       ([(4, 5)], {"index": (0, 0, 0)}, IndexRangeError, "too many"),
       ([(4, 5)], {"index": (Ellipsis, Ellipsis)}, IndexRangeError, "Ellipsis"),
       ([(4, 5)], {"index": ([0, 1],)}, DomainError, "basic indexing"),
       ([(4, 5)], {"index": (True,)}, DomainError, "basic indexing"),
       ([(4, 5)], {"index": (slice(None, None, 0),)}, DomainError, "step"),
       ([(4, 5)], {"index": (slice(None, None, -1),)}, DomainError, "step")],
      lambda torch, x, *, index: x[index])

_info("select",
      [([(3, 4)], {"axis": 0, "index": 1}), ([(3, 4)], {"axis": -1, "index": -1}), ([(5,)], {"axis": 0, "index": 2}),
       ([(2, 1, 3)], {"axis": 1, "index": 0})],
      [([(3, 4)], {"axis": 1, "index": 4}, IndexRangeError, "index 4"),
       ([(3, 4)], {"axis": 0, "index": -4}, IndexRangeError, "size 3"),
       ([()], {"axis": 0, "index": 0}, ShapeError, "0-d"),
       ([(3, 4)], {"axis": 2, "index": 0}, ShapeError, "axis 2")],
      lambda torch, x, *, axis, index: torch.select(x, axis, index))

# The cotangent is zero by design, so finite differences (which see the identity) do not apply.
_info("detach", [([(3, 4)], {}), ([()], {})], [],
      lambda torch, x: x.detach() + 0 * x, fd=False)


def _torch_flip(torch, x, *, dims):
    return torch.flip(x, (dims,) if isinstance(dims, int) else tuple(dims))


_info("flip",
      [([(3, 4)], {"dims": (0,)}), ([(3, 4)], {"dims": (-1,)}), ([(2, 3, 4)], {"dims": (0, 2)}),
       ([(2, 3, 4)], {"dims": [2, -3, 1]}), ([(5,)], {"dims": 0}), ([()], {"dims": ()}), ([()], {"dims": (0,)}),
       ([(3, 0, 2)], {"dims": (1, 2)}), ([(2, 3)], {"dims": ()})],
      [([(2, 3)], {"dims": (0, -2)}, ShapeError, "more than once"),
       ([(2, 3)], {"dims": (2,)}, ShapeError, "axis 2"),
       ([(2, 3)], {"dims": (0.5,)}, DomainError, "dim")],
      _torch_flip)
