"""Training steps captured as CUDA graphs: :func:`capture_step` (``tl.cuda.capture_step``).

An eager step on a GPU is bound by the host at the sizes of the example models: every op costs
tens of microseconds of Python and driver time while its kernel runs for a few. A captured step
records the forward, the loss and the backward of one step into a CUDA graph once, and each
call then replays them with one launch:

1. the example inputs are copied into input buffers that the graph owns;
2. the step runs eagerly on a side stream (the warm-up: kernels compile, index and mask uploads
   land in their caches, memory comes from a private pool), then once more under stream capture
   (the mechanism is :class:`torchlean.kernels.cuda.graphs.GraphCapture`, which compiled IR
   programs use too);
3. each call copies its inputs into those buffers, replays the graph on the current stream and
   gives each parameter the gradient the replay wrote.

The optimizer step stays eager (Adam is one launch per 24 parameters).

    >>> import torchlean as tl
    >>> if tl.cuda.is_available():
    ...     model = tl.nn.Linear(4, 3).to("cuda")
    ...     opt = tl.optim.Adam(model.parameters(), lr=1e-3)
    ...     x, y = tl.randn(8, 4, device="cuda"), tl.tensor([0, 1, 2, 0, 1, 2, 0, 1], device="cuda")
    ...     step = tl.cuda.capture_step(lambda x, y: tl.nn.F.cross_entropy(model(x), y), x, y)
    ...     opt.zero_grad()
    ...     loss = step(x, y)        # the parameters' .grad now hold this step's gradients
    ...     opt.step()

What a captured step promises, and what it needs:

* The arithmetic of the eager step: the same kernels in the same order, so a call's loss and
  gradients equal the eager step's on the same inputs (tested). Scatter-adds (embedding
  gradients) take a kernel that needs no host-side sort plan, with the same summation order.
* Inputs of the example inputs' shapes; each call's values are read from the graph's buffers.
  Integer inputs are not range-checked at each call (their values never reach the host): an
  out-of-range index gathers a zero row and an out-of-range class target reads class 0, as the
  kernels' bounds rules say. The example inputs are checked during the warm-up.
* Parameters keep their arrays: optimizers update them in place and ``load_state_dict`` copies
  into them. A parameter whose array was replaced since the capture (``module.to(...)``) makes
  the call raise :class:`~torchlean.errors.DeviceError`.
* No host synchronisation inside the step (``.item()``, ``.numpy()``, control flow on values),
  no random numbers (dropout): the graph replays exactly what the capture saw. A step that
  breaks this raises DeviceError when it is captured.
* The warm-up and capture are real forward passes: state that a forward updates in place
  (batch-norm running statistics) moves as if three more steps had run.
* Host constants a step builds at every call (``arange`` positions, pooling weights) are
  uploaded once, during the warm-up, and copied on the device afterwards (the uploads are cached
  by content, :data:`torchlean.kernels.cuda.memory.CONSTANTS`); convolutions through cuDNN
  take their workspace from the capture's pool.
* After a call each parameter's ``.grad`` holds that call's gradient, added to a gradient
  already there as ``backward()`` would. Fresh gradients are the graph's own buffers, which the
  next call overwrites; the returned loss is a copy.
"""

from __future__ import annotations

import numpy as np

from .errors import DeviceError, ShapeError, TorchLeanError
from .kernels import get_kernels
from .autograd import enable_grad, recorded_leaves
from .tensor import Tensor, get_rng_state, set_rng_state

__all__ = ["capture_step", "CapturedStep"]


def _value(x, k):
    if isinstance(x, Tensor):
        return x._value
    if isinstance(x, np.ndarray) or hasattr(x, "__cuda_array_interface__"):
        return x
    raise TorchLeanError(f"capture_step: input {k} must be a Tensor or an array, got {type(x).__name__}")


class CapturedStep:
    """``fn(*inputs)`` (a 0-d loss) and its backward, captured as one CUDA graph (module docs).

    Built by :func:`capture_step`. Attributes: ``params`` (the leaves that receive gradients,
    in the order the backward reached them), ``input_shapes``, ``input_dtypes``.
    """

    def __init__(self, fn, *example_inputs, warmup: int = 2):
        if not callable(fn):
            raise TorchLeanError(f"capture_step: expected a function, got {type(fn).__name__}")
        if not example_inputs:
            raise TorchLeanError("capture_step: give the step's example inputs")
        K = get_kernels("cuda")  # BackendUnavailableError without a GPU
        self.fn = fn
        self.K = K
        vals = [_value(x, k) for k, x in enumerate(example_inputs)]
        self.input_shapes = tuple(tuple(v.shape) for v in vals)
        # Floats keep their dtype; integers are held as int64, the index kernels' type.
        self.input_dtypes = tuple(np.dtype(v.dtype) if np.dtype(v.dtype).kind == "f" else np.dtype(np.int64)
                                  for v in vals)
        self._user_grads = None
        rng = get_rng_state()
        self.capture = K.graph_capture()
        with self.capture.scope():
            self.inputs = []
            for v, dt in zip(vals, self.input_dtypes):
                buf = K.empty(v.shape, dt)
                K.assign(buf, v)
                self.inputs.append(buf)
            for _ in range(max(1, int(warmup))):
                self._run("the warm-up step")
            if get_rng_state() != rng:
                set_rng_state(rng)
                self._restore_user_grads()
                raise DeviceError("capture_step: the step draws random numbers (dropout, ...), which a "
                                  "captured graph would repeat at every call; run it eagerly")
            ran = []
            try:
                self.graph = self.capture.capture(lambda: ran.append(self._run("the capture")))
            except BaseException as e:
                self._restore_user_grads()
                err = self._error("the capture", e)
                if err is e:
                    raise
                raise err from e
        loss, params, grads = ran[0]
        self.loss = loss._value
        self.params = params
        self.grads = grads
        self._arrays = [(p, p._value) for p in params]
        self._restore_user_grads()

    # -- capture ---------------------------------------------------------------------------------
    @staticmethod
    def _error(what, e):
        if not isinstance(e, Exception) or (isinstance(e, TorchLeanError) and (
                not isinstance(e, DeviceError) or str(e).startswith("capture_step:"))):
            return e  # an interrupt, a user error, or one already explained
        return DeviceError(f"capture_step: {what} failed ({type(e).__name__}: {e}). Every op of a captured "
                           f"step must run without host transfers or synchronisation (.item(), .numpy(), "
                           f"value-dependent control flow); run this step eagerly")

    def _run(self, what):
        ts = [Tensor(b) for b in self.inputs]
        try:
            with enable_grad():
                loss = self.fn(*ts)
            if not isinstance(loss, Tensor) or loss.numel() != 1 or loss.dtype.kind != "f":
                raise TorchLeanError(f"capture_step: the step must return a float Tensor with one element "
                                     f"(the loss), got {loss!r:.80}")
            if not loss.requires_grad or loss._tape is None:
                raise TorchLeanError("capture_step: the loss does not depend on any tensor that requires grad")
            params = recorded_leaves(loss)
            if self._user_grads is None:
                self._user_grads = [(p, p._grad) for p in params]
            for p in params:
                p._grad = None
            loss.backward()
            grads = [None if p._grad is None else p._grad._value for p in params]
        except TorchLeanError:
            self._restore_user_grads()
            raise
        except Exception as e:  # a CUDA or CuPy error: say what a captured step may not do
            self._restore_user_grads()
            raise self._error(what, e) from e
        return loss, params, grads

    def _restore_user_grads(self):
        for p, g in self._user_grads or ():
            p._grad = g

    # -- replay ----------------------------------------------------------------------------------
    def __call__(self, *inputs) -> Tensor:
        """Copy ``inputs`` into the graph's buffers, replay, set the gradients; returns the loss."""
        if len(inputs) != len(self.inputs):
            raise TorchLeanError(f"captured step: takes {len(self.inputs)} input(s), got {len(inputs)}")
        for k, (x, buf) in enumerate(zip(inputs, self.inputs)):
            v = _value(x, k)
            if tuple(v.shape) != buf.shape:
                raise ShapeError(f"captured step: input {k} has shape {tuple(v.shape)}, the step was captured "
                                 f"with {buf.shape}")
            if (np.dtype(v.dtype).kind == "f") != (buf.dtype.kind == "f"):
                raise TorchLeanError(f"captured step: input {k} has dtype {v.dtype}, the step was captured "
                                     f"with {buf.dtype}")
            self.K.assign(buf, v)
        for p, a in self._arrays:
            if p._value is not a:
                raise DeviceError(f"captured step: a parameter of shape {p.shape} holds a new array since the "
                                  f"capture (moved or reassigned); capture the step again")
        self.graph.launch()
        for p, g in zip(self.params, self.grads):
            if g is None:
                continue
            p._grad = Tensor(g) if p._grad is None else Tensor(p._grad._value + g)
        return Tensor(self.K.copy(self.loss))

    def accepts(self, *inputs) -> bool:
        """True when ``inputs`` have the shapes the step was captured with (a replay can take them)."""
        return len(inputs) == len(self.inputs) and all(
            tuple(_value(x, k).shape) == buf.shape for k, (x, buf) in enumerate(zip(inputs, self.inputs)))

    def __repr__(self):
        return (f"CapturedStep({len(self.params)} parameters, inputs "
                f"{', '.join(str(s) for s in self.input_shapes)})")


def capture_step(fn, *example_inputs, warmup: int = 2) -> CapturedStep:
    """Capture ``fn(*example_inputs)`` (a scalar loss) and its backward as a CUDA graph.

    Returns a :class:`CapturedStep`: ``step(*inputs)`` replays the forward and backward on new
    inputs of the same shapes, sets every parameter's ``.grad`` and returns the loss. See the
    module docs for what a step must satisfy; one that cannot be captured raises DeviceError.
    """
    return CapturedStep(fn, *example_inputs, warmup=warmup)
