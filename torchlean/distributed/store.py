"""A key-value store over TCP for the processes of one job: torch's ``TCPStore``.

The processes of a job meet here before they share any collective: rank 0 (``is_master``) serves
the store from a thread (the standard library's ``socketserver``), every process connects to it as
a client. Keys are strings, values bytes; :meth:`TCPStore.get` waits until its key is set (up to
the timeout), :meth:`TCPStore.add` is an atomic counter. The distributed backends use it to
rendezvous, to exchange NCCL's unique id, for barriers, and to say which ranks did not arrive when
a collective times out.

    >>> from torchlean.distributed import TCPStore
    >>> s = TCPStore("127.0.0.1", 0, world_size=1, is_master=True)
    >>> s.set("k", b"v"); s.get("k")
    b'v'
    >>> s.add("n", 2), s.add("n", 3)
    (2, 5)

Requests are one op byte and length-prefixed fields; nothing received is unpickled.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from datetime import timedelta

from ..errors import DistributedError

__all__ = ["TCPStore", "DEFAULT_TIMEOUT"]

#: torch's default for process groups and stores.
DEFAULT_TIMEOUT = timedelta(minutes=30)

_SET, _GET, _ADD, _CHECK, _DELETE, _NUM = b"S", b"G", b"A", b"C", b"D", b"N"
_LEN = struct.Struct("!I")
_I64 = struct.Struct("!q")


def _seconds(timeout) -> float:
    if timeout is None:
        return DEFAULT_TIMEOUT.total_seconds()
    return timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)


def _recv_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("store: connection closed")
        buf += chunk
    return bytes(buf)


def _field(sock) -> bytes:
    return _recv_exact(sock, _LEN.unpack(_recv_exact(sock, 4))[0])


def _pack(*fields: bytes) -> bytes:
    return b"".join(_LEN.pack(len(f)) + f for f in fields)


class _Data:
    def __init__(self):
        self.kv: dict = {}
        self.cond = threading.Condition()


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        data: _Data = self.server.data
        sock = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            try:
                op = _recv_exact(sock, 1)
            except (ConnectionError, OSError):
                return
            key = _field(sock).decode()
            with data.cond:
                if op == _SET:
                    data.kv[key] = _field(sock)
                    data.cond.notify_all()
                    out = b""
                elif op == _GET:
                    wait = _I64.unpack(_field(sock))[0] / 1000.0
                    end = time.monotonic() + wait
                    while key not in data.kv:
                        left = end - time.monotonic()
                        if left <= 0 or not data.cond.wait(left):
                            if key not in data.kv:
                                break
                    out = b"\x01" + data.kv[key] if key in data.kv else b"\x00"
                elif op == _ADD:
                    n = int(data.kv.get(key, b"0")) + _I64.unpack(_field(sock))[0]
                    data.kv[key] = str(n).encode()
                    data.cond.notify_all()
                    out = _I64.pack(n)
                elif op == _CHECK:
                    out = b"\x01" if key in data.kv else b"\x00"
                elif op == _DELETE:
                    out = b"\x01" if data.kv.pop(key, None) is not None else b"\x00"
                elif op == _NUM:
                    out = _I64.pack(len(data.kv))
                else:
                    return
            sock.sendall(_pack(out))


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class TCPStore:
    """torch's ``TCPStore(host_name, port, world_size=None, is_master=False, timeout=30 min)``.

    The master serves on ``(host_name, port)`` (port 0: a free port, read back from :attr:`port`);
    a client retries connecting until ``timeout``. ``wait_for_workers`` (master only) waits until
    ``world_size`` processes have connected."""

    def __init__(self, host_name, port, world_size=None, is_master=False, timeout=None, wait_for_workers=True,
                 **_unused):
        self.host = host_name
        self.timeout = _seconds(timeout)
        self.world_size = world_size
        self._server = None
        if is_master:
            try:
                self._server = _Server((host_name, int(port)), _Handler)
            except OSError as e:
                raise DistributedError(f"TCPStore: cannot serve on {host_name}:{port} ({e})") from None
            self._server.data = _Data()
            threading.Thread(target=self._server.serve_forever, name="torchlean-store", daemon=True).start()
            port = self._server.server_address[1]
        self.port = int(port)
        self._lock = threading.Lock()
        self._sock = self._connect()
        if is_master and wait_for_workers and world_size:
            self.add("__workers__", 1)
            self.wait_value("__workers__", int(world_size), "TCPStore: waiting for the workers")
        elif world_size:
            self.add("__workers__", 1)

    def _connect(self):
        end = time.monotonic() + self.timeout
        while True:
            try:
                s = socket.create_connection((self.host, self.port), timeout=max(0.1, end - time.monotonic()))
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except OSError as e:
                if time.monotonic() >= end:
                    raise DistributedError(f"TCPStore: no store at {self.host}:{self.port} within "
                                           f"{self.timeout:.0f} s ({e})") from None
                time.sleep(0.05)

    def _call(self, op: bytes, key: str, *fields: bytes) -> bytes:
        with self._lock:
            try:
                self._sock.sendall(op + _pack(key.encode(), *fields))
                return _field(self._sock)
            except (ConnectionError, OSError) as e:
                raise DistributedError(f"TCPStore: lost the store at {self.host}:{self.port} ({e}); "
                                       f"the process serving it (rank 0) may have exited") from None

    # -- torch's methods -------------------------------------------------------------------------
    def set(self, key: str, value) -> None:
        self._call(_SET, key, value if isinstance(value, bytes) else str(value).encode())

    def get(self, key: str, timeout=None) -> bytes:
        """The value of ``key``, waiting for it up to the timeout (DistributedError after)."""
        t = self.timeout if timeout is None else _seconds(timeout)
        out = self._call(_GET, key, _I64.pack(int(t * 1000)))
        if out[:1] != b"\x01":
            raise DistributedError(f"TCPStore: key {key!r} was not set within {t:.1f} s")
        return out[1:]

    def try_get(self, key: str, seconds: float):
        """The value of ``key``, or None if it is not set within ``seconds``."""
        out = self._call(_GET, key, _I64.pack(int(seconds * 1000)))
        return out[1:] if out[:1] == b"\x01" else None

    def add(self, key: str, amount: int) -> int:
        return _I64.unpack(self._call(_ADD, key, _I64.pack(int(amount))))[0]

    def check(self, keys) -> bool:
        return all(self._call(_CHECK, k) == b"\x01" for k in ([keys] if isinstance(keys, str) else keys))

    def delete_key(self, key: str) -> bool:
        return self._call(_DELETE, key) == b"\x01"

    def num_keys(self) -> int:
        return _I64.unpack(self._call(_NUM, ""))[0]

    def wait(self, keys, timeout=None) -> None:
        for k in ([keys] if isinstance(keys, str) else keys):
            self.get(k, timeout)

    def wait_value(self, key: str, target: int, what: str, timeout=None) -> None:
        """Wait until counter ``key`` reaches ``target``."""
        t = self.timeout if timeout is None else _seconds(timeout)
        end = time.monotonic() + t
        while int(self.add(key, 0)) < target:
            if time.monotonic() >= end:
                raise DistributedError(f"{what}: {self.add(key, 0)} of {target} arrived within {t:.0f} s")
            time.sleep(0.002)

    def close(self) -> None:
        try:
            self._sock.close()
        finally:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
                self._server = None
