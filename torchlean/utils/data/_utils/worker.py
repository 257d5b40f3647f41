"""The DataLoader's worker processes: their loop, their identity (:func:`get_worker_info`) and the
wrapping of their exceptions for the main process.

A worker receives ``(task index, sample indices)`` on its own queue, fetches and collates the batch
and puts ``(task index, batch)`` on the shared result queue; an exception is sent back wrapped, with
the worker id and the original traceback, and re-raised by the main process.
"""

from __future__ import annotations

import gc
import os
import pickle
import queue
import random
import traceback
from dataclasses import dataclass

import numpy as np

from ....tensor import manual_seed
from .errors import DataLoaderError
from .fetch import IterableStop, ResumeIteration, create_fetcher

# How often (seconds) a worker waiting for work checks that its parent is still alive (as torch).
MP_STATUS_CHECK_INTERVAL = 5.0

_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    """Who this worker is: ``id`` (0 .. num_workers - 1), ``num_workers``, ``seed`` (this worker's
    seed: the loader's base seed + id) and ``dataset`` (this process's copy of the dataset)."""

    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info():
    """The :class:`WorkerInfo` of the DataLoader worker process calling it; None in the main process.
    An IterableDataset uses it to give each worker its own share of the stream.

        >>> from torchlean.utils.data import get_worker_info
        >>> get_worker_info() is None
        True
    """
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process (picklable) and re-raised there."""

    def __init__(self, exc, where: str):
        self.exc_type = type(exc)
        self.type_name = type(exc).__name__
        self.exc_msg = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.where = where

    def __getstate__(self):
        state = dict(self.__dict__)
        try:  # a type defined where the main process cannot import it travels by name only
            pickle.dumps(self.exc_type)
        except Exception:
            state["exc_type"] = None
        return state

    def reraise(self):
        """Raise, in the main process, an exception of the worker's type (and a DataLoaderError, so
        ``except tl.TorchLeanError`` also catches it) whose message names the worker and carries the
        original traceback; a type that cannot be rebuilt gives a plain DataLoaderError."""
        msg = f"Caught {self.type_name} {self.where}.\nOriginal {self.exc_msg}"
        exc = None
        if self.exc_type is not None and issubclass(self.exc_type, Exception) \
                and not issubclass(self.exc_type, DataLoaderError):
            try:
                cls = type(self.type_name, (self.exc_type, DataLoaderError),
                           {"__str__": lambda self: str(self.args[0]) if self.args else "",
                            "__module__": self.exc_type.__module__})
                exc = cls(msg)
            except Exception:
                exc = None
        if exc is None:
            exc = DataLoaderError(msg)
        raise exc


def _seed_worker(seed: int, base_seed: int, worker_id: int):
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(np.random.SeedSequence([base_seed % 2 ** 64, worker_id]).generate_state(4))


def _worker_loop(dataset_kind, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn,
                 drop_last, base_seed, init_fn, worker_id, num_workers):
    """One worker process: seed, run ``init_fn``, then fetch batches until told to stop (None)."""
    global _worker_info
    # Objects inherited through fork belong to the parent: never finalize them here (a garbage
    # DataLoader iterator collected in a worker would shut down the parent's workers).
    gc.freeze()
    try:
        seed = base_seed + worker_id
        _seed_worker(seed, base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_exception = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
        except Exception as e:
            init_exception = ExceptionWrapper(e, f"in DataLoader worker process {worker_id}")
        iteration_end = False
        parent = os.getppid()
        while True:
            try:
                r = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
            except queue.Empty:
                if os.getppid() != parent:
                    break
                continue
            if r is None:
                break
            if isinstance(r, ResumeIteration):
                data_queue.put((r, None))
                iteration_end = False
                if init_exception is None:
                    fetcher = create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
                continue
            if done_event.is_set() or iteration_end:
                continue
            idx, index = r
            if init_exception is not None:
                data, init_exception = init_exception, None
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if fetcher.is_iterable:
                        data = IterableStop(worker_id)
                        iteration_end = True
                    else:
                        data = ExceptionWrapper(RuntimeError("the sampler's index fetch raised StopIteration"),
                                                f"in DataLoader worker process {worker_id}")
                except Exception as e:
                    data = ExceptionWrapper(e, f"in DataLoader worker process {worker_id}")
            try:
                data_queue.put((idx, data))
            except Exception as e:  # the batch itself cannot be pickled
                data_queue.put((idx, ExceptionWrapper(e, f"in DataLoader worker process {worker_id}")))
            del data, idx, index, r
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        data_queue.cancel_join_thread()
        data_queue.close()
