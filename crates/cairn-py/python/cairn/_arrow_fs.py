"""The pyarrow filesystem cairn hands to pyarrow and Ray Data.

``pyarrow.fs.FSSpecHandler`` opens a random-access file with fsspec's
``open``, whose read-ahead cache turns every small ranged read (a Parquet
footer, one column chunk) into a whole block (5 MiB by default): a file of
a few MB is fetched whole each time pyarrow opens it, once per row group
under Ray. Here a random-access file answers each read with exactly the
bytes asked for (the size known from opening, so no read asks the store
for it again; a read longer than a part in parallel pieces), the GIL
released while it waits. pyarrow takes the reads of one Python file one at
a time, under a lock, so where another client can read the objects as
cairn does the file is pyarrow's own, whose reads do not wait for each
other: on local disk pyarrow's local file, and on an S3-compatible store
with static keys (or anonymous) a file of pyarrow's ``S3FileSystem``
configured from cairn's resolved settings (endpoint, region, addressing,
credentials, attempts, timeout; ``NativeFileSystem.s3_read_settings``).
Elsewhere (credential chains, tclake volumes, OSS, GCS, requester-pays, a
proxy in the environment, ``CAIRN_PYARROW_S3=0``), or if pyarrow's client
cannot open the file, the file is cairn's.
pyarrow's own pre-buffering coalesces a Parquet reader's ranges before they
reach it. Sequential streams (``open_input_stream``, CSV and JSON lines)
keep fsspec's read-ahead, which suits reading a file from start to end.

Deleting a directory for which a clean-up was registered
(:func:`clean_up_on_delete`: cairn's Ray checkpoint manager registers each
checkpoint it opened) runs that clean-up first: Ray's
``delete_checkpoint_on_success`` then ends the checkpoint as the protocol
does, behind a completion marker that survives a kill.
"""

from __future__ import annotations

import atexit
import io
import os
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

import pyarrow as pa
import pyarrow.fs as pafs


class _Reads:
    """The reads of ``RangeFile`` in flight, and when the last one ended.

    pyarrow keeps what a Python file's ``read`` returned in buffers that its
    I/O threads release when a scan's last reads finish, possibly after
    the script's end: a release then (it takes the GIL) during Python's
    shutdown aborts the process ("terminate called without an active
    exception", apache/arrow#39162). So, at exit, Python waits until no
    read has been in flight for a moment (at most ``EXIT_WAIT_S``) before
    it shuts down."""

    QUIET_S = 0.2
    EXIT_WAIT_S = 5.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._last_end: Optional[float] = None

    def __enter__(self) -> None:
        with self._lock:
            self._in_flight += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._in_flight -= 1
            self._last_end = time.monotonic()

    def wait_until_quiet(self) -> None:
        deadline = time.monotonic() + self.EXIT_WAIT_S
        while time.monotonic() < deadline:
            with self._lock:
                if self._last_end is None:
                    return
                if self._in_flight == 0 and time.monotonic() - self._last_end >= self.QUIET_S:
                    return
            time.sleep(0.02)


_READS = _Reads()
atexit.register(_READS.wait_until_quiet)


class RangeFile(io.RawIOBase):
    """A file of a cairn filesystem read by exact byte ranges: ``read(n)``
    at the current position fetches at most ``n`` bytes (one ranged
    request, or parallel ones of ``part_size`` for a read longer than a
    part), with no size lookup; nothing is read ahead or kept."""

    def __init__(self, fs: Any, path: str, size: int) -> None:
        super().__init__()
        self._fs = fs
        self._path = path
        self._size = size
        self._pos = 0

    @property
    def size(self) -> int:
        """The file's size in bytes, as found when it was opened."""
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence!r} (0, 1 or 2)")
        if pos < 0:
            raise OSError(f"seek to {pos} before the start of {self._path}")
        self._pos = pos
        return pos

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError(f"read of closed file {self._path}")
        end = self._size if size is None or size < 0 else min(self._pos + size, self._size)
        if end <= self._pos:
            return b""
        with _READS:
            data = self._fs._native.read_range(self._path, self._pos, end, self._size)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)


#: Clean-ups to run in place of a plain delete, by (protocol, stripped path).
_CLEAN_UPS: Dict[Tuple[str, str], Callable[[], bool]] = {}


def clean_up_on_delete(fs: Any, path: str, clean_up: Callable[[], bool]) -> None:
    """Makes the next ``delete_dir(path)`` through a pyarrow filesystem over
    ``fs`` (a ``CairnFileSystem``) in this process call ``clean_up()``
    first: when it returns True it did the deleting, when False the plain
    recursive delete follows. A later registration for the same path
    replaces it."""
    _CLEAN_UPS[_key(fs, path)] = clean_up


def _key(fs: Any, path: str) -> Tuple[str, str]:
    """``path`` on ``fs`` as the registry knows it: a local path made
    absolute, as Ray resolves it."""
    if fs._protocol == "file" and "://" not in path:
        path = os.path.abspath(path)
    return fs._protocol, fs._native.strip(path)


_LOCAL = pafs.LocalFileSystem()


class CairnHandler(pafs.FSSpecHandler):
    """``pyarrow.fs.FSSpecHandler`` over a ``CairnFileSystem`` whose
    random-access files (``open_input_file``: Parquet, Arrow IPC, Lance)
    read exact byte ranges (pyarrow's own files on local disk, and on S3 and
    COS where pyarrow's client reads the objects as cairn does); every
    other call is fsspec's, answered by cairn's Rust filesystem."""

    def __init__(self, fs: Any, pyarrow_s3_allowed: Optional[bool] = None) -> None:
        super().__init__(fs)
        # Decided where the filesystem is made (the driver), from its
        # environment, and carried to the processes it is shipped to.
        self._pyarrow_s3_allowed = (
            _pyarrow_s3_allowed() if pyarrow_s3_allowed is None else pyarrow_s3_allowed
        )
        self._s3: Optional[pafs.S3FileSystem] = None
        self._s3_known = False
        self._s3_lock = threading.Lock()

    def __getstate__(self) -> Dict[str, Any]:
        # pyarrow's client is rebuilt where the handler is unpickled.
        return {"fs": self.fs, "pyarrow_s3_allowed": self._pyarrow_s3_allowed}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["fs"], state["pyarrow_s3_allowed"])

    def open_input_file(self, path: str) -> pa.NativeFile:
        stripped = self.fs._strip_protocol(path)
        s3 = self._pyarrow_s3()
        if s3 is not None:
            try:
                return s3.open_input_file(stripped)
            except OSError:
                # cairn's own open below names what is wrong (missing, a
                # directory, refused) with its URL, or reads what pyarrow's
                # client could not reach.
                pass
        info = self.fs.info(path)
        if info["type"] != "file":
            raise IsADirectoryError(f"{self.fs.unstrip_protocol(path)} is a directory")
        if s3 is not None:
            # A file cairn reaches and pyarrow's client did not: that client
            # does not read this store as cairn does; cairn's files from now on.
            with self._s3_lock:
                self._s3 = None
        if self.fs._protocol == "file":
            # pyarrow's own file: its reads of one file run at once (pread),
            # where a Python file's are taken one at a time under a lock.
            return _LOCAL.open_input_file(stripped)
        return pa.PythonFile(RangeFile(self.fs, stripped, int(info["size"])), mode="r")

    def _pyarrow_s3(self) -> Optional[pafs.S3FileSystem]:
        """pyarrow's S3 client configured as cairn's, built once, or None
        where it would not read the objects as cairn does."""
        if not self._pyarrow_s3_allowed:
            return None
        with self._s3_lock:
            if not self._s3_known:
                self._s3 = pyarrow_s3(self.fs._native.s3_read_settings())
                self._s3_known = True
            return self._s3

    def move(self, src: str, dest: str) -> None:
        """pyarrow's ``move``. A file on an object store is copied and
        deleted (renamed where the store can) with no directory checks
        first, as pyarrow's own S3 filesystem moves it: three requests on
        S3 (OpenDAL's copy heads its source to copy on its ETag), where
        fsspec's ``mv`` asks whether each path is a directory (ten). Anything
        else (a directory, a prefix, local disk) is fsspec's ``mv``."""
        if not self.fs._real_directories():
            try:
                self.fs._native.mv_file(self.fs._strip_protocol(src), self.fs._strip_protocol(dest))
                return
            except (FileNotFoundError, IsADirectoryError):
                pass  # no such file: a directory's prefix, or nothing at all
        super().move(src, dest)

    def delete_dir(self, path: str) -> None:
        clean_up = _CLEAN_UPS.pop(_key(self.fs, path), None)
        if clean_up is None or not clean_up():
            super().delete_dir(path)


#: Proxy variables pyarrow's S3 client does not read (cairn's does).
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def _pyarrow_s3_allowed() -> bool:
    """False with ``CAIRN_PYARROW_S3=0`` in the environment (every read
    through cairn's own client, its retry policy and metrics), or with a
    proxy there, which cairn's client honours and pyarrow's would not."""
    if os.environ.get("CAIRN_PYARROW_S3") == "0":
        return False
    return not any(
        os.environ.get(name) or os.environ.get(name.lower()) for name in _PROXY_VARIABLES
    )


#: pyarrow's S3 clients by the settings they were made from: a client is
#: costly to make (the AWS SDK's), and Ray unpickles a filesystem, so a
#: handler, in every read task.
_S3_CLIENTS: Dict[Tuple[Any, ...], pafs.S3FileSystem] = {}
_S3_CLIENTS_LOCK = threading.Lock()


def pyarrow_s3(settings: Optional[Dict[str, Any]]) -> Optional[pafs.S3FileSystem]:
    """pyarrow's ``S3FileSystem`` from cairn's resolved read settings
    (``NativeFileSystem.s3_read_settings``), or None without them; one per
    process for the same settings."""
    if settings is None:
        return None
    key = tuple(sorted(settings.items()))
    with _S3_CLIENTS_LOCK:
        client = _S3_CLIENTS.get(key)
        if client is None:
            client = _S3_CLIENTS[key] = _new_pyarrow_s3(settings)
        return client


def _new_pyarrow_s3(settings: Dict[str, Any]) -> pafs.S3FileSystem:
    scheme, _, host = settings["endpoint"].partition("://")
    credentials: Dict[str, Any] = (
        {"anonymous": True}
        if settings["anonymous"]
        else {
            "access_key": settings["key"],
            "secret_key": settings["secret"],
            "session_token": settings["token"],
        }
    )
    return pafs.S3FileSystem(
        **credentials,
        region=settings["region"],
        scheme=scheme,
        endpoint_override=host.rstrip("/"),
        force_virtual_addressing=settings["virtual_host"],
        request_timeout=settings["request_timeout"],
        connect_timeout=settings["request_timeout"],
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=settings["max_attempts"]),
    )


def arrow_filesystem(fs: Any) -> pafs.PyFileSystem:
    """``fs`` (a ``CairnFileSystem``) as a ``pyarrow.fs.FileSystem``."""
    return pafs.PyFileSystem(CairnHandler(fs))
