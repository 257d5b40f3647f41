"""torch.futures under torchlean: ``Future`` (``set_result``, ``wait``, ``value``, ``done``, ``then``,
``add_done_callback``), ``collect_all`` and ``wait_all``. The collectives here complete before they
return (docs/differences.md), so the futures they hand out are already done; a ``Future`` a program
makes itself completes when it calls ``set_result``.

    >>> from torchlean.futures import Future
    >>> f = Future()
    >>> g = f.then(lambda fut: fut.value() * 2)
    >>> f.set_result(21)
    >>> g.wait()
    42
"""

from __future__ import annotations

__all__ = ["Future", "collect_all", "wait_all"]

_UNSET = object()


class Future:
    """A value that is set once; callbacks registered before it is set run when it is."""

    def __init__(self, *, devices=None):
        self._value = _UNSET
        self._error = None
        self._callbacks: list = []

    @classmethod
    def completed(cls, value) -> "Future":
        f = cls()
        f.set_result(value)
        return f

    def done(self) -> bool:
        return self._value is not _UNSET or self._error is not None

    def set_result(self, result) -> None:
        if self.done():
            raise RuntimeError("Future.set_result: the future is already completed")
        self._value = result
        self._run_callbacks()

    def set_exception(self, result) -> None:
        if self.done():
            raise RuntimeError("Future.set_exception: the future is already completed")
        self._error = result
        self._run_callbacks()

    def _run_callbacks(self):
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def wait(self):
        """The value (the error raised if it failed); a future nobody completed raises."""
        if self._error is not None:
            raise self._error
        if self._value is _UNSET:
            raise RuntimeError("Future.wait: the future was never completed (set_result was not called)")
        return self._value

    def value(self):
        return self.wait()

    def then(self, callback) -> "Future":
        """A future of ``callback(self)``, completed when this one is."""
        out = Future()

        def run(f):
            try:
                out.set_result(callback(f))
            except Exception as e:  # noqa: BLE001 - carried by the returned future, worded as torch's
                err = RuntimeError(f"Got the following error when running the callback: {type(e).__name__}: {e}")
                err.__cause__ = e
                out.set_exception(err)
        self.add_done_callback(run)
        return out

    def add_done_callback(self, callback) -> None:
        if self.done():
            callback(self)
        else:
            self._callbacks.append(callback)


def collect_all(futures) -> Future:
    """A future of the list of ``futures``, completed when all of them are."""
    futures = list(futures)
    out = Future()
    left = [len(futures)]

    def one(_):
        left[0] -= 1
        if left[0] == 0:
            out.set_result(futures)
    if not futures:
        out.set_result([])
    for f in futures:
        f.add_done_callback(one)
    return out


def wait_all(futures) -> list:
    """The values of ``futures``, in order."""
    return [f.wait() for f in futures]
