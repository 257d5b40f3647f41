"""DataLoader as torch's ``torch.utils.data.DataLoader``: batches from a map-style or iterable
dataset, in the main process (``num_workers=0``) or in real worker processes.

With ``num_workers > 0`` each worker is a process (``fork`` where the platform has it, else
``spawn``; ``multiprocessing_context`` chooses) holding its own copy of the dataset: the main
process draws batch indices from the sampler, hands them round-robin to the workers, at most
``prefetch_factor`` outstanding per worker, and yields the collated batches in sampler order
(``in_order=False``: as they arrive). Worker ``i`` is seeded with ``base_seed + i`` (Python's
``random``, torchlean's global stream, NumPy's legacy global generator), where ``base_seed`` is
drawn from ``generator`` (or the global stream) once per iterator. An exception in a worker is
re-raised in the main process with the worker id, the original type and traceback; a worker that
dies, or a wait beyond ``timeout``, raises :class:`DataLoaderError`.

    >>> import torchlean as tl
    >>> from torchlean.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(tl.arange(10).float(), tl.arange(10))
    >>> loader = DataLoader(ds, batch_size=4)
    >>> len(loader), [tuple(x.shape) for x, y in loader]
    (3, [(4,), (4,), (2,)])
"""

from __future__ import annotations

import itertools
import math
import multiprocessing as mp
import os
import queue
import time
import warnings

from ...errors import DomainError, DTypeError, ShapeError
from ...ops import Generator
from ._utils import worker as _worker
from ._utils.collate import default_collate, default_convert
from ._utils.errors import DataLoaderError
from ._utils.fetch import ITERABLE, MAP, IterableStop, ResumeIteration, create_fetcher
from ._utils.worker import ExceptionWrapper
from .dataset import IterableDataset
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    _fresh_seed,
)

__all__ = ["DataLoader"]

# How long (seconds) the main process waits on the result queue before checking its workers are alive.
_POLL_INTERVAL = 0.5


class _InfiniteConstantSampler(Sampler):
    """An IterableDataset's sampler: None forever (the dataset itself decides when to stop)."""

    def __iter__(self):
        while True:
            yield None


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _default_context():
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


class DataLoader:
    """Batches of ``dataset``, with torch's arguments and defaults.

    ``batch_size`` (None turns automatic batching off: each sample passes through ``collate_fn``,
    default :func:`default_convert`), ``shuffle`` (a :class:`RandomSampler` driven by ``generator``),
    ``sampler`` / ``batch_sampler`` (mutually exclusive with shuffle, and batch_sampler with
    batch_size/drop_last, as torch), ``num_workers`` (worker processes), ``collate_fn`` (default
    :func:`default_collate`), ``drop_last``, ``timeout`` (seconds to wait for a worker's batch; 0:
    forever), ``worker_init_fn(worker_id)``, ``multiprocessing_context``, ``generator``,
    ``prefetch_factor`` (batches in flight per worker, default 2), ``persistent_workers`` (keep the
    workers between epochs), ``in_order``. ``pin_memory`` and ``pin_memory_device`` are accepted and
    have no effect on this backend: batches are host arrays already and uploads do not go through
    page-locked staging buffers (torch warns as here when no accelerator is found).

        >>> import torchlean as tl
        >>> from torchlean.utils.data import DataLoader
        >>> [b.tolist() for b in DataLoader(range(5), batch_size=2, drop_last=True)]
        [[0, 1], [2, 3]]
    """

    _initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
            raise DomainError(f"DataLoader: num_workers option should be a non-negative integer, got "
                              f"{num_workers!r}; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise DomainError(f"DataLoader: timeout option should be non-negative, got {timeout}")
        if num_workers == 0 and prefetch_factor is not None:
            raise DomainError("DataLoader: prefetch_factor option could only be specified in multiprocessing. "
                              "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor "
                              f"to None (got prefetch_factor={prefetch_factor}).")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise DomainError(f"DataLoader: prefetch_factor option should be non-negative, got {prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise DomainError("DataLoader: persistent_workers option needs num_workers > 0")
        if generator is not None and not isinstance(generator, Generator):
            raise DTypeError(f"DataLoader: generator must be a torchlean.Generator, got {type(generator).__name__}")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = ITERABLE
            if shuffle not in (False, None):
                raise ShapeError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ShapeError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ShapeError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = MAP
        if sampler is not None and shuffle:
            raise ShapeError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ShapeError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 f"sampler, and drop_last (got batch_size={batch_size}, shuffle={shuffle}, "
                                 f"sampler={sampler}, drop_last={drop_last})")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ShapeError("DataLoader: batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if self._dataset_kind == ITERABLE:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called = None
        self._iterator = None
        self._initialized = True
        self.check_worker_number_rationality()

    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx):
        if ctx is not None:
            if self.num_workers == 0:
                raise DomainError("DataLoader: multiprocessing_context can only be used with multi-process "
                                  f"loading (num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(ctx, str):
                methods = mp.get_all_start_methods()
                if ctx not in methods:
                    raise DomainError(f"DataLoader: multiprocessing_context option should specify a valid start "
                                      f"method in {methods!r}, but got multiprocessing_context={ctx!r}")
                ctx = mp.get_context(ctx)
            if not isinstance(ctx, mp.context.BaseContext):
                raise DTypeError("DataLoader: multiprocessing_context option should be a valid context object or "
                                 f"a string specifying the start method, but got multiprocessing_context={ctx}")
        self._multiprocessing_context = ctx

    def __setattr__(self, attr, val):
        if self._initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                          "persistent_workers"):
            raise DomainError(f"DataLoader: {attr} attribute should not be set after {type(self).__name__} "
                              "is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        self.check_worker_number_rationality()
        return _MultiProcessIter(self)

    def __iter__(self):
        """A new pass over the data (with ``persistent_workers``, the same workers, restarted)."""
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None or self._iterator._shutdown_done:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self):
        """Batches per pass: ``len(batch_sampler)`` (or ``len(sampler)`` without batching); for an
        IterableDataset its ``len`` divided by batch_size (floor with drop_last, else ceiling)."""
        if self._dataset_kind == ITERABLE:
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self):
        """Warn, as torch, when more workers are asked for than this process may use CPUs."""
        cpus = _cpu_count()
        if self.num_workers > 0 and cpus is not None and self.num_workers > cpus:
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. Our suggested "
                          f"max number of worker in current system is {cpus}, which is smaller than what this "
                          "DataLoader is going to create. Please be aware that excessive worker creation might get "
                          "DataLoader running slow or even freeze, lower the worker number to avoid potential "
                          "slowness/freeze if necessary.", stacklevel=2)


class _BaseIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._generator = loader.generator
        self._persistent_workers = loader.persistent_workers
        self._in_order = loader.in_order
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = _fresh_seed(loader.generator)
        self._num_yielded = 0
        self._shutdown_done = False
        if loader.pin_memory:
            from ... import cuda
            if not cuda.is_available():
                warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device "
                              "pinned memory won't be used.", stacklevel=3)
        if loader.pin_memory_device:
            warnings.warn("pin_memory_device is deprecated, the current accelerator will be used as the device,"
                          f"ignore pin_memory_device='{loader.pin_memory_device}'.", stacklevel=3)

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        if self._dataset_kind == ITERABLE and self._IterableDataset_len_called is not None \
                and self._num_yielded > self._IterableDataset_len_called:
            warnings.warn(f"Length of IterableDataset {self._dataset} was reported to be "
                          f"{self._IterableDataset_len_called} (when accessing len(dataloader)), but "
                          f"{self._num_yielded} samples have been fetched. ", stacklevel=2)
        return data

    def __len__(self):
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = create_fetcher(self._dataset_kind, self._dataset, self._auto_collation, self._collate_fn,
                                       self._drop_last)

    def _next_data(self):
        index = self._next_index()
        return self._fetcher.fetch(index)


class _MultiProcessIter(_BaseIter):
    """Workers, one index queue each, one shared result queue; results reordered by task index."""

    def __init__(self, loader):
        super().__init__(loader)
        ctx = loader.multiprocessing_context or _default_context()
        self._worker_init_fn = loader.worker_init_fn
        self._owner_pid = os.getpid()
        self._worker_result_queue = ctx.Queue()
        self._workers_done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        for i in range(self._num_workers):
            q = ctx.Queue()
            q.cancel_join_thread()
            w = ctx.Process(target=_worker._worker_loop,
                            args=(self._dataset_kind, self._dataset, q, self._worker_result_queue,
                                  self._workers_done_event, self._auto_collation, self._collate_fn,
                                  self._drop_last, self._base_seed, self._worker_init_fn, i, self._num_workers),
                            daemon=True)
            w.start()
            self._index_queues.append(q)
            self._workers.append(w)
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info = {}
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            for q in self._index_queues:
                q.put(ResumeIteration())
            pending = self._num_workers
            while pending > 0:
                idx, _ = self._get_data()
                if isinstance(idx, ResumeIteration):
                    pending -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        if self._tasks_outstanding >= self._prefetch_factor * self._num_workers:
            return
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return  # every worker is done
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _get_data(self):
        start = time.monotonic()
        while True:
            wait = _POLL_INTERVAL if not self._timeout else min(_POLL_INTERVAL, self._timeout)
            try:
                return self._worker_result_queue.get(timeout=wait)
            except queue.Empty:
                pass
            dead = [(i, w) for i, w in enumerate(self._workers) if self._workers_status[i] and not w.is_alive()]
            if dead:
                desc = ", ".join(f"worker {i} (pid {w.pid}, exit code {w.exitcode})" for i, w in dead)
                self._shutdown_workers(wait=False)
                raise DataLoaderError(f"DataLoader {desc} exited unexpectedly")
            if self._timeout and time.monotonic() - start >= self._timeout:
                self._shutdown_workers(wait=False)
                raise DataLoaderError(f"DataLoader timed out after {self._timeout} seconds")

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info:
                    if len(info) == 2 or self._workers_status[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process_data(data)
            idx, data = self._get_data()
            if isinstance(idx, ResumeIteration):
                continue
            self._tasks_outstanding -= 1
            if self._dataset_kind == ITERABLE and isinstance(data, IterableStop):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                if not self._in_order:
                    del self._task_info[idx]
                    return self._process_data(data)
                self._task_info[idx] += (data,)
            else:
                del self._task_info[idx]
                self._rcvd_idx += 1
                return self._process_data(data)

    def _process_data(self, data):
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            self._shutdown_workers()
            data.reraise()
        return data

    def _shutdown_workers(self, wait=True):
        """Stop the workers: ask them to exit and wait ``wait`` (a busy worker at most a second), then
        terminate what remains; only the process that started them does anything."""
        if self._shutdown_done or os.getpid() != getattr(self, "_owner_pid", None):
            return
        self._shutdown_done = True
        try:
            self._workers_done_event.set()
            for q in self._index_queues:
                try:
                    q.put(None)
                except Exception:
                    pass
            for w in self._workers:
                w.join(timeout=1.0 if wait else 0.0)
            for w in self._workers:
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=1.0)
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            self._worker_result_queue.cancel_join_thread()
            self._worker_result_queue.close()
        except Exception:  # interpreter shutdown: the daemonic workers die with the process
            pass

    def __del__(self):
        self._shutdown_workers()
