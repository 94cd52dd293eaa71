"""``CairnFileSystem``: an ``fsspec.AbstractFileSystem`` over cairn-fs.

Every instance serves one protocol (``s3``, ``cos``, ``oss``, ``gcs``,
``tclake``, ``file``, ``memory``; aliases ``s3a``, ``gs``, ``local``) with
s3fs-style storage options as keyword arguments; the FSSPEC_/AWS_/
TENCENTCLOUD_ environment is read as cairn-fs reads it. I/O runs in Rust on
one shared runtime with the GIL released. Instances pickle by their
arguments (fsspec's own mechanism), so Ray and Dask can ship them.
"""

from __future__ import annotations

import io
import json
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from ._native import NativeFileSystem
from ._read_cache import SequentialReadAheadCache

__all__ = ["CairnFileSystem", "CosFileSystem", "TclakeFileSystem", "register"]


#: s3fs keyword arguments holding Python objects (an event loop, a botocore
#: session): accepted and without effect; they cannot cross into Rust.
_PYTHON_OBJECT_OPTIONS = ("loop", "session")

#: Block size of ``open`` when ``default_block_size`` is not given (s3fs's).
DEFAULT_BLOCK_SIZE = 5 * 2**20


def _entry(raw: tuple) -> Dict[str, Any]:
    name, size, kind, modified, etag = raw
    info: Dict[str, Any] = {"name": name, "size": size, "type": kind}
    if modified is not None:
        info["LastModified"] = modified
    if etag is not None:
        info["ETag"] = etag
    return info


class CairnFileSystem(AbstractFileSystem):
    """An fsspec filesystem over cairn-fs.

    ``CairnFileSystem("s3", key=..., secret=..., endpoint_url=...)`` takes
    the options s3fs takes (and gcsfs/ossfs for gcs/oss); an unknown option
    is a ``ValueError`` naming it.
    """

    protocol = ("cairn",)
    #: The protocol an instance serves when none is given (subclasses
    #: registered for one scheme set it).
    default_protocol: Optional[str] = None
    root_marker = ""

    def __init__(
        self, protocol: Optional[str] = None, checkpoint: bool = False, **storage_options: Any
    ):
        protocol = protocol or self.default_protocol
        if not protocol:
            raise ValueError(
                "CairnFileSystem needs a protocol: CairnFileSystem('s3', ...) (or 'cos', 'oss', "
                "'gcs', 'tclake', 'file', 'memory')"
            )
        for ignored in _PYTHON_OBJECT_OPTIONS:
            storage_options.pop(ignored, None)
        block_size = storage_options.pop("default_block_size", None)
        if protocol.lower() in ("gcs", "gs"):
            # gcsfs's name for it (still passed on: cairn-fs recognises it).
            block_size = block_size or storage_options.get("block_size")
        self.blocksize = block_size or DEFAULT_BLOCK_SIZE
        super().__init__(protocol=protocol, checkpoint=checkpoint, **storage_options)
        try:
            options = json.dumps({protocol.lower(): storage_options})
        except TypeError as e:
            raise ValueError(
                f"storage options must be JSON values (strings, numbers, dicts): {e}"
            ) from e
        self._native = NativeFileSystem(protocol, options, checkpoint)
        self._protocol = self._native.protocol()
        self.protocol = (self._protocol,)
        if self._protocol in ("file", "memory"):
            self.root_marker = "/"

    # ------------------------------------------------------------ paths
    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if "://" in path:
            scheme, rest = path.split("://", 1)
            if scheme.lower() in ("file", "local", "memory"):
                rest = "/" + rest.lstrip("/")
            path = rest
        if len(path) > 1:
            path = path.rstrip("/")
        return path

    def unstrip_protocol(self, name: str) -> str:
        return self._native.url(name)

    # ------------------------------------------------------------ reads
    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        return _entry(self._native.info(self._strip_protocol(path)))

    def ls(
        self, path: str, detail: bool = True, **kwargs: Any
    ) -> Union[List[str], List[Dict[str, Any]]]:
        entries = [_entry(e) for e in self._native.ls(self._strip_protocol(path))]
        return entries if detail else [e["name"] for e in entries]

    def find(
        self,
        path: str,
        maxdepth: Optional[int] = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        path = self._strip_protocol(path)
        try:
            entries = [_entry(e) for e in self._native.find(path, maxdepth, withdirs)]
        except FileNotFoundError:
            entries = []
        if withdirs and not entries:
            try:
                if self.isdir(path):
                    entries = [self.info(path)]
            except FileNotFoundError:
                pass
        entries.sort(key=lambda e: e["name"])
        if detail:
            return {e["name"]: e for e in entries}
        return [e["name"] for e in entries]

    def cat_file(
        self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any
    ) -> bytes:
        path = self._strip_protocol(path)
        start, end = self._from_the_start(path, start, end)
        return self._native.cat_file(path, start, end)

    def _from_the_start(
        self, path: str, start: Optional[int], end: Optional[int]
    ) -> Tuple[Optional[int], Optional[int]]:
        """``start`` and ``end`` counted from the start of the file, as
        fsspec counts a negative one from its end (one size lookup then)."""
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = self.info(path)["size"]
            start = max(size + start, 0) if start is not None and start < 0 else start
            end = max(size + end, 0) if end is not None and end < 0 else end
        return start, end

    def cat_ranges(
        self,
        paths: List[str],
        starts: Any,
        ends: Any,
        max_gap: Optional[int] = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> List[Any]:
        """Byte ranges of files, fetched concurrently: each exactly the
        bytes asked for (one size lookup a file, one ranged request a
        range, a long range in parallel pieces). A failed range is its
        exception in the list (``on_error="return"``) or raised."""
        if max_gap is not None:
            raise NotImplementedError("cat_ranges(max_gap=...): ranges are read as asked")
        if not isinstance(paths, list):
            raise TypeError(f"cat_ranges takes a list of paths, not {type(paths).__name__}")
        starts = list(starts) if isinstance(starts, Iterable) else [starts] * len(paths)
        ends = list(ends) if isinstance(ends, Iterable) else [ends] * len(paths)
        if len(starts) != len(paths) or len(ends) != len(paths):
            raise ValueError(
                f"cat_ranges: {len(paths)} paths, {len(starts)} starts and {len(ends)} ends"
            )
        ranges = []
        for path, start, end in zip(paths, starts, ends):
            path = self._strip_protocol(path)
            start, end = self._from_the_start(path, start, end)
            ranges.append((path, start or 0, end))
        out = self._native.cat_ranges(ranges)
        if on_error != "return":
            for value in out:
                if isinstance(value, BaseException):
                    raise value
        return out

    def cat(
        self, path: Any, recursive: bool = False, on_error: str = "raise", **kwargs: Any
    ) -> Any:
        paths = self.expand_path(path, recursive=recursive)
        files = [p for p in paths if not self.isdir(p)] if recursive or len(paths) > 1 else paths
        if (
            len(files) > 1
            or isinstance(path, list)
            or self._strip_protocol(path) != files[0]
            or recursive
        ):
            results = self._native.cat_many(files)
            out: Dict[str, Any] = {}
            for name, value in zip(files, results):
                if isinstance(value, BaseException):
                    if on_error == "raise":
                        raise value
                    if on_error == "omit":
                        continue
                out[name] = value
            return out
        return self.cat_file(files[0])

    def modified(self, path: str) -> Any:
        import datetime

        info = self.info(path)
        if "LastModified" not in info:
            raise IsADirectoryError(f"{path} has no modification time (a directory?)")
        text = info["LastModified"].replace(" UTC", "+00:00").replace("Z", "+00:00")
        return datetime.datetime.fromisoformat(text.replace(" ", "T", 1))

    def ukey(self, path: str) -> str:
        info = self.info(path)
        return info.get("ETag") or f"{info['size']}-{info.get('LastModified')}"

    # ----------------------------------------------------------- writes
    def pipe(self, path: Any, value: Optional[bytes] = None, **kwargs: Any) -> None:
        if isinstance(path, str):
            self.pipe_file(path, value, **kwargs)
            return
        if not isinstance(path, dict):
            raise ValueError("pipe takes a path and bytes, or a dict of paths to bytes")
        files = [(self._strip_protocol(p), bytes(v)) for p, v in path.items()]
        for result in self._native.pipe_many(files):
            if result is not None:
                raise result

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        self._native.pipe_file(self._strip_protocol(path), bytes(value), mode == "create")

    def rm(self, path: Any, recursive: bool = False, maxdepth: Optional[int] = None) -> None:
        paths = path if isinstance(path, list) else [path]
        self._native.rm([self._strip_protocol(p) for p in paths], recursive, maxdepth)

    def _rm(self, path: str) -> None:
        self._native.rm([self._strip_protocol(path)], False, None)

    def rm_file(self, path: str) -> None:
        self._rm(path)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        if not create_parents and self._protocol in ("file", "memory"):
            parent = self._parent(path)
            if parent and parent != path and not self.isdir(parent):
                raise FileNotFoundError(f"{parent} does not exist (create_parents=False)")
        if self._real_directories() and self.exists(path):
            raise FileExistsError(path)
        if not self._real_directories() and "/" in path.strip("/"):
            # Object stores have no directories: a key prefix exists once a
            # file is under it (s3fs does the same).
            return
        self._native.mkdir(path)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        path = self._strip_protocol(path)
        if not self._real_directories() and "/" in path.strip("/"):
            return
        if self.exists(path):
            if not exist_ok and self._real_directories():
                raise FileExistsError(path)
            return
        self._native.mkdir(path)

    def rmdir(self, path: str) -> None:
        self._native.rmdir(self._strip_protocol(path))

    def _real_directories(self) -> bool:
        return self._protocol in ("file", "memory")

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        if self.isdir(path1):
            # A directory is copied as its files; only stores with real
            # directories get an empty one (as s3fs does).
            if self._real_directories():
                self.makedirs(path2, exist_ok=True)
            return
        self._native.cp(path1, path2, False)

    def mv(
        self,
        path1: Any,
        path2: Any,
        recursive: bool = False,
        maxdepth: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(path1, list) or isinstance(path2, list) or maxdepth is not None:
            return super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
        source = self._strip_protocol(path1)
        if self.isdir(source) and not recursive:
            return super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
        target = self._strip_protocol(path2)
        if recursive and self.isdir(target):
            target = target.rstrip("/") + "/" + source.rstrip("/").rsplit("/", 1)[-1]
        self._native.mv(source, target, recursive)

    def put_file(
        self, lpath: str, rpath: str, callback: Any = None, mode: str = "overwrite", **kwargs: Any
    ) -> None:
        import os

        if os.path.isdir(lpath):
            if self._real_directories():
                self.makedirs(rpath, exist_ok=True)
            return
        self._native.put_file(lpath, self._strip_protocol(rpath))

    def get_file(
        self, rpath: str, lpath: str, callback: Any = None, outfile: Any = None, **kwargs: Any
    ) -> None:
        import os

        rpath = self._strip_protocol(rpath)
        if self.isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        if outfile is not None:
            outfile.write(self.cat_file(rpath))
            return
        self._native.get_file(rpath, lpath)

    # ------------------------------------------------------------ files
    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Optional[int] = None,
        autocommit: bool = True,
        cache_options: Optional[dict] = None,
        **kwargs: Any,
    ) -> "CairnFile":
        if "x" in mode and self.exists(path):
            # Said at open, as fsspec expects; the write at close is a
            # create-if-absent too, for a file that appears meanwhile.
            raise FileExistsError(
                f"{self.unstrip_protocol(self._strip_protocol(path))} exists (mode {mode!r})"
            )
        kwargs.setdefault("cache_type", SequentialReadAheadCache.name)
        return CairnFile(
            self,
            path,
            mode,
            block_size=block_size or self.blocksize,
            autocommit=autocommit,
            cache_options=cache_options,
            **kwargs,
        )


class CairnFile(AbstractBufferedFile):
    """A file of a ``CairnFileSystem``. Reads are ranged requests (one size
    lookup when opened, none after) that read a block ahead while the
    caller reads in order and fetch exactly what is asked otherwise
    (``cache_type="cairn-sequential"``; fsspec's caches can be asked for
    by name). ``wb`` streams: each full
    block is uploaded as it fills (a multipart upload on object stores, a
    temporary file on local disk) and the file appears whole at ``close()``;
    ``discard()``, or an exception leaving a ``with`` block, abandons the
    write and leaves nothing. ``xb`` is buffered and sent at ``close()`` as
    one create-if-absent request (``FileExistsError`` if the file appeared)."""

    def _fetch_range(self, start: int, end: int) -> bytes:
        return self.fs._native.read_range(self.fs._strip_protocol(self.path), start, end, self.size)

    def _initiate_upload(self) -> None:
        if "x" in self.mode:
            self._parts = io.BytesIO()
            self._writer = None
        else:
            self._writer = self.fs._native.open_write(self.fs._strip_protocol(self.path))

    def _upload_chunk(self, final: bool = False) -> bool:
        if self._writer is not None:
            self._writer.write(self.buffer.getvalue())
            if final:
                self._writer.close()
            return True
        self._parts.write(self.buffer.getvalue())
        if final:
            self.fs.pipe_file(self.path, self._parts.getvalue(), mode="create")
        return True

    def discard(self) -> None:
        writer = getattr(self, "_writer", None)
        if writer is not None:
            writer.abort()
        self._parts = io.BytesIO()
        self.buffer = io.BytesIO()
        # Nothing more is written: a later close() (or garbage collection)
        # must not commit what is left.
        self.closed = True

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and self.mode != "rb" and not self.closed:
            # An exception in the with block: the file is not finished, so
            # nothing of it is made visible (fsspec's default commits it).
            self.discard()
            return
        self.close()


class CosFileSystem(CairnFileSystem):
    """``cos://`` through cairn (registered with fsspec by the package)."""

    protocol = ("cos",)
    default_protocol = "cos"


class TclakeFileSystem(CairnFileSystem):
    """``tclake://`` volumes through cairn (registered with fsspec by the package)."""

    protocol = ("tclake",)
    default_protocol = "tclake"


def register(schemes: Iterable[str] = ("s3", "s3a", "gcs", "gs", "oss")) -> None:
    """Routes ``schemes`` to cairn in fsspec (``fsspec.filesystem("s3")``,
    ``fsspec.open("s3://...")``, pandas ``storage_options``), replacing
    s3fs/gcsfs/ossfs for them in this process."""
    import fsspec

    for scheme in schemes:
        cls = type(
            f"Cairn_{scheme}_FileSystem",
            (CairnFileSystem,),
            {"protocol": (scheme,), "default_protocol": scheme},
        )
        fsspec.register_implementation(scheme, cls, clobber=True)
